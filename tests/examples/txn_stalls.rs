//! Figures for issue 29 (not a test: nothing here is asserted): how long a second client waits
//! while another sends the transaction requests that used to stall everyone, what expiring a
//! million idle producer ids gives back, and the memory a cleaning pass over ~400 MB of a
//! compacted partition takes. Run it built for speed:
//!
//! ```sh
//! cargo run -p tests --release --example txn_stalls
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tests::*;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// A second client's ApiVersions round trips while `work` runs: the longest one.
async fn longest_stall<F: std::future::Future<Output = ()>>(broker: &Broker, work: F) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let mut other = RawClient::connect(broker.addr()).await;
    let watching = stop.clone();
    let watcher = tokio::spawn(async move {
        let mut longest = Duration::ZERO;
        while !watching.load(Ordering::Relaxed) {
            let sent = Instant::now();
            other.call(&ApiVersionsRequest::default(), 3).await;
            longest = longest.max(sent.elapsed());
        }
        longest
    });
    work.await;
    stop.store(true, Ordering::Relaxed);
    watcher.await.unwrap()
}

async fn init(client: &mut RawClient, id: &str) -> (i64, i16) {
    let answer = init_producer_id(client, Some(id), 60_000).await;
    (answer.producer_id.0, answer.producer_epoch)
}

fn offsets(
    id: &str,
    producer: (i64, i16),
    partitions: std::ops::Range<i32>,
    metadata: &str,
) -> TxnOffsetCommitRequest {
    let partitions = partitions
        .map(|p| {
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(1)
                .with_committed_metadata(Some(s(metadata)))
        })
        .collect();
    TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_group_id(GroupId(s("readers")))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(partitions)])
}

/// ~400 MB of updates of 100 keys on disk, then one cleaner pass: the process's RSS before and
/// at most during it, sampled every millisecond.
async fn cleaning_rss() {
    let dir = data_dir("clean-rss");
    let broker = Arc::new(start_broker(data_dir_config(&dir)).await);
    let mut client = RawClient::connect(broker.addr()).await;
    let created =
        create_topic_with(&mut client, "compacted", &[("cleanup.policy", "compact")]).await;
    assert_eq!(created.error_code, 0);
    let value = "x".repeat(4_000);
    let keys: Vec<String> = (0..100).map(|k| format!("key-{k}")).collect();
    for round in 0..800 {
        let records: Vec<TestRecord<'_>> = (0..128)
            .map(|i| {
                (
                    Some(keys[(round * 128 + i) % 100].as_str()),
                    value.as_str(),
                    1_000,
                )
            })
            .collect();
        let answer = produce(
            &mut client,
            "compacted",
            0,
            batch(&records, kafka_protocol::records::Compression::None),
            9,
        )
        .await;
        assert_eq!(answer.error_code, 0);
    }
    let before = rss_mib();
    let done = Arc::new(AtomicBool::new(false));
    let sampling = done.clone();
    let sampler = std::thread::spawn(move || {
        let mut peak: f64 = 0.0;
        while !sampling.load(Ordering::Relaxed) {
            peak = peak.max(rss_mib());
            std::thread::sleep(Duration::from_millis(1));
        }
        peak
    });
    let cleaner = broker.clone();
    let stats = tokio::task::spawn_blocking(move || cleaner.maintain_logs(10_000_000_000_000).1)
        .await
        .unwrap();
    done.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    println!(
        "cleaning {} MB of a compacted partition ({} records removed): RSS {before:.0} MiB before, at most {peak:.0} MiB during",
        stats.bytes_before / 1_000_000,
        stats.records_removed
    );
    drop(client);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = data_dir("txn-stalls");
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", 64).await, 0);

    // 100,000 unknown partitions in one TxnOffsetCommit.
    let producer = init(&mut client, "unknown").await;
    let request = offsets("unknown", producer, 1_000..101_000, "");
    let mut took = Duration::ZERO;
    let stall = longest_stall(&broker, async {
        let sent = Instant::now();
        client.call(&request, 3).await;
        took = sent.elapsed();
    })
    .await;
    println!("TxnOffsetCommit of 100k unknown partitions: {took:?}; another client's longest wait {stall:?}");

    // Legal but large state: 16 transactions of 64 offsets with 4,000 B of metadata (8 MiB),
    // then 200 more changes.
    let metadata = "m".repeat(4_000);
    let mut producers = Vec::new();
    for i in 0..16 {
        let id = format!("big-{i}");
        let producer = init(&mut client, &id).await;
        assert_eq!(
            add_offsets_to_txn(&mut client, &id, producer, "readers").await,
            0
        );
        client
            .call(&offsets(&id, producer, 0..64, &metadata), 3)
            .await;
        producers.push((id, producer));
    }
    let mut slowest = Duration::ZERO;
    let changes = 200;
    let stall = longest_stall(&broker, async {
        for i in 0..changes {
            let (id, producer) = &producers[i % producers.len()];
            let sent = Instant::now();
            client
                .call(&offsets(id, *producer, 0..1, &metadata), 3)
                .await;
            slowest = slowest.max(sent.elapsed());
        }
    })
    .await;
    println!("{changes} changes on 8 MiB of transaction state: slowest {slowest:?}; another client's longest wait {stall:?}");
    drop(client);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);

    cleaning_rss().await;

    // A million idle idempotent producers in one partition, then expired.
    let log = broker::log::PartitionLog::new();
    let before = rss_mib();
    for id in 0..1_000_000i64 {
        let stamp = ProducerStamp {
            id,
            epoch: 0,
            base_sequence: 0,
        };
        let batch = idempotent_batch(&[(None, "v", 1_000)], stamp);
        let header = protocol::batch::BatchHeader::parse(&batch).unwrap();
        log.append(&batch, &header).unwrap();
    }
    // The batches themselves stay: retention, not expiry, removes them.
    log.delete_records(log.offsets().end).unwrap();
    let full = rss_mib();
    let producers = log.producers();
    let expired = log.expire_producers(1_000);
    println!(
        "1M producer ids: RSS {before:.0} MiB before, {full:.0} MiB with {producers} producers, {:.0} MiB after expiring {expired}",
        rss_mib()
    );
}
