//! Figures for issue 29 (not a test: nothing here is asserted): the Produce/EndTxn race of
//! `tests/tests/txn_append_race.rs` run for longer in both storage modes and the violations it
//! found; how long a second client waits while another sends each request that used to stall
//! everyone; the memory a cleaning pass over ~400 MB of a compacted partition takes; and what
//! expiring a million idle producer ids gives back, and whether the next million reuse it. Run it
//! built for speed (iterations of the race in memory and on disk as arguments, 20,000 and 5,000
//! unless given):
//!
//! ```sh
//! cargo run -p tests --release --example txn_stalls -- 20000 5000
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
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
/// at most during it.
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
    let before = status_mib("VmRSS:");
    // The kernel's own peak (VmHWM), reset to the current RSS: the highest RSS during the pass,
    // not what a sampler happened to see.
    std::fs::write("/proc/self/clear_refs", "5").expect("Linux resets the RSS peak");
    let cleaner = broker.clone();
    let stats = tokio::task::spawn_blocking(move || cleaner.maintain_logs(10_000_000_000_000).1)
        .await
        .unwrap();
    let peak = status_mib("VmHWM:");
    println!(
        "cleaning {} MB of a compacted partition ({} records removed): RSS {before:.0} MiB before, at most {peak:.0} MiB during",
        stats.bytes_before / 1_000_000,
        stats.records_removed
    );
    drop(client);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One batch from each producer of `ids`, stamped at 1,000 ms: their state stays in the
/// partition; the batches themselves are deleted (retention, not expiry, removes them).
fn idle_producers(log: &broker::log::PartitionLog, ids: std::ops::Range<i64>) {
    for id in ids {
        let stamp = ProducerStamp {
            id,
            epoch: 0,
            base_sequence: 0,
        };
        let batch = idempotent_batch(&[(None, "v", 1_000)], stamp);
        let header = protocol::batch::BatchHeader::parse(&batch).unwrap();
        log.append(&batch, &header).unwrap();
    }
    log.delete_records(log.offsets().end).unwrap();
}

/// A `/proc/self/status` figure (`field` with its colon) in MiB.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The race of `tests/tests/txn_append_race.rs`, `iterations` times on a fresh broker.
async fn race(on_disk: bool, iterations: usize) {
    let dir = data_dir("txn-race-figures");
    let config = if on_disk {
        data_dir_config(&dir)
    } else {
        BrokerConfig::default()
    };
    let broker = start_broker(config).await;
    let started = Instant::now();
    let findings = tests::txn_race::race(&broker, iterations).await;
    let mode = if on_disk { "on disk" } else { "in memory" };
    println!(
        "race {mode} ({:.0?}): {}",
        started.elapsed(),
        findings.summary(iterations)
    );
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// IncrementalAlterConfigs of topic "t": `operation` (0 SET, 2 APPEND) of `value` to `name`.
fn alter_config(name: &str, operation: i8, value: &str) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s("t"))
        .with_configs(vec![AlterableConfig::default()
            .with_name(s(name))
            .with_config_operation(operation)
            .with_value(Some(s(value)))])])
}

/// Sends `request` while a second client watches: the answer's time and the longest wait of
/// the other client.
async fn timed<R: kafka_protocol::protocol::Request>(
    broker: &Broker,
    client: &mut RawClient,
    request: &R,
    version: i16,
) -> (R::Response, Duration, Duration) {
    let mut answer = None;
    let mut took = Duration::ZERO;
    let stall = longest_stall(broker, async {
        let sent = Instant::now();
        answer = Some(client.call(request, version).await);
        took = sent.elapsed();
    })
    .await;
    (answer.expect("answered"), took, stall)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let in_memory = args
        .next()
        .unwrap_or(Ok(20_000))
        .expect("iterations in memory");
    let on_disk = args
        .next()
        .unwrap_or(Ok(5_000))
        .expect("iterations on disk");
    race(false, in_memory).await;
    race(true, on_disk).await;

    let dir = data_dir("txn-stalls");
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", 64).await, 0);

    // 100,000 unknown partitions in one TxnOffsetCommit.
    let producer = init(&mut client, "unknown").await;
    let request = offsets("unknown", producer, 1_000..101_000, "");
    let (answer, took, stall) = timed(&broker, &mut client, &request, 3).await;
    let unknown = answer.topics[0]
        .partitions
        .iter()
        .filter(|p| p.error_code == ResponseError::UnknownTopicOrPartition.code())
        .count();
    println!(
        "TxnOffsetCommit of 100k unknown partitions: {unknown} answered \
         UNKNOWN_TOPIC_OR_PARTITION in {took:?}; another client's longest wait {stall:?}"
    );

    // 31 MB of metadata in one offset (it was taken, and the state file rewritten with it).
    let producer = init(&mut client, "huge").await;
    assert_eq!(
        add_offsets_to_txn(&mut client, "huge", producer, "readers").await,
        0
    );
    let request = offsets("huge", producer, 0..1, &"m".repeat(31 << 20));
    let (answer, took, stall) = timed(&broker, &mut client, &request, 3).await;
    println!(
        "TxnOffsetCommit of 31 MB of metadata: error {} in {took:?}; another client's longest \
         wait {stall:?}",
        answer.topics[0].partitions[0].error_code
    );

    // Config values: 19 MB in one, then APPENDs of 20,000 entries to a list, five times (each
    // took longer as the list grew).
    let request = alter_config("compression.type", 0, &"x".repeat(19 << 20));
    let (answer, took, stall) = timed(&broker, &mut client, &request, 1).await;
    println!(
        "IncrementalAlterConfigs of a 19 MB value: error {} in {took:?}; another client's \
         longest wait {stall:?}",
        answer.responses[0].error_code
    );
    let throttled = "leader.replication.throttled.replicas";
    for round in 0..5 {
        let entries: Vec<String> = (0..20_000)
            .map(|i| format!("{}:1", round * 20_000 + i))
            .collect();
        let request = alter_config(throttled, 2, &entries.join(","));
        let (answer, took, stall) = timed(&broker, &mut client, &request, 1).await;
        println!(
            "IncrementalAlterConfigs APPEND of 20,000 entries (round {}): error {} in {took:?}; \
             another client's longest wait {stall:?}",
            round + 1,
            answer.responses[0].error_code
        );
    }

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
    let before = status_mib("VmRSS:");
    idle_producers(&log, 0..1_000_000);
    let full = status_mib("VmRSS:");
    let producers = log.producers();
    let expired = log.expire_producers(1_000);
    let emptied = status_mib("VmRSS:");
    // A second million: the memory the first gave back is where they go.
    idle_producers(&log, 1_000_000..2_000_000);
    println!(
        "1M producer ids: RSS {before:.0} MiB before, {full:.0} MiB with {producers} producers, \
         {emptied:.0} MiB after expiring {expired}, {:.0} MiB with {} new ones",
        status_mib("VmRSS:"),
        log.producers()
    );
}
