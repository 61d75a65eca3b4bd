//! A transactional Produce racing its producer's EndTxn on another connection (issue 29, item
//! 1), in memory and on disk, commits and aborts alternately: the batch is either in the
//! transaction, before its marker, or refused with INVALID_TXN_STATE; data never follows the
//! marker that ended its transaction. How each iteration races is in [`tests::txn_race`]
//! (`tests/src/txn_race.rs`); the `txn_stalls` example runs it longer for the figures.

use tests::txn_race::{race, Findings};
use tests::*;

fn assert_isolated(findings: Findings, iterations: usize) {
    println!("{}", findings.summary(iterations));
    assert_eq!(findings.counts(), (0, 0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_produce_racing_end_txn_never_lands_after_the_marker_in_memory() {
    let broker = broker().await;
    let iterations = 1_000;
    assert_isolated(race(&broker, iterations).await, iterations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_produce_racing_end_txn_never_lands_after_the_marker_on_disk() {
    let dir = data_dir("txn-race");
    let broker = start_broker(data_dir_config(&dir)).await;
    let iterations = 300;
    assert_isolated(race(&broker, iterations).await, iterations);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}
