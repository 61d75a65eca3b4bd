//! Kafka transactions on the broker, over TCP: commit and abort visibility under both isolation
//! levels, the last stable offset held by an open transaction, the aborted-transactions list, a
//! transaction aborted by its timeout, a zombie fenced, offsets committed in a transaction, and
//! transaction state surviving a kill -9.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use kafka_protocol::ResponseError;
use tests::*;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(s(id))
}

/// InitProducerId v4 for `id` with `timeout_ms`: `(error, producer id, epoch)`.
async fn init(client: &mut RawClient, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let answer = init_producer_id(client, Some(id), timeout_ms).await;
    (
        answer.error_code,
        answer.producer_id.0,
        answer.producer_epoch,
    )
}

/// A transactional batch of `values` with sequences from `base_sequence`.
fn txn_batch(producer: (i64, i16), base_sequence: i32, values: &[&str]) -> Bytes {
    let records: Vec<MaybeValue<'_>> = values.iter().map(|v| (None, Some(*v), 1_000)).collect();
    let stamp = ProducerStamp {
        id: producer.0,
        epoch: producer.1,
        base_sequence,
    };
    records_batch(&records, Compression::None, Some(stamp), true)
}

/// What a fetch at `isolation` returns from `offset`: `(high watermark, last stable offset,
/// aborted (producer, first offset), data records (offset, value), marker offsets)`.
struct Fetched {
    high_watermark: i64,
    last_stable: i64,
    aborted: Vec<(i64, i64)>,
    records: Vec<(i64, String)>,
    markers: Vec<i64>,
}

async fn fetch(client: &mut RawClient, offset: i64, isolation: i8) -> Fetched {
    let request = fetch_request("t", 0, offset, 0).with_isolation_level(isolation);
    let answer = client.call(&request, 12).await;
    let p = &answer.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut data = p.records.clone().unwrap_or_default();
    let mut records = Vec::new();
    let mut markers = Vec::new();
    for batch in RecordBatchDecoder::decode_all(&mut data).unwrap() {
        for r in batch.records {
            if r.control {
                markers.push(r.offset);
            } else {
                let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                records.push((r.offset, value.into_owned()));
            }
        }
    }
    Fetched {
        high_watermark: p.high_watermark,
        last_stable: p.last_stable_offset,
        aborted: p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect(),
        records,
        markers,
    }
}

/// ListOffsets latest at `isolation`.
async fn latest(client: &mut RawClient, isolation: i8) -> i64 {
    offset_for(client, -1, isolation).await.1
}

const UNCOMMITTED: i8 = 0;
const COMMITTED: i8 = 1;

async fn setup(broker: &Broker) -> RawClient {
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", 2).await, 0);
    client
}

#[tokio::test]
async fn committed_and_aborted_records_under_both_isolation_levels() {
    let broker = broker().await;
    let mut client = setup(&broker).await;
    let (code, pid, epoch) = init(&mut client, "pay", 60_000).await;
    assert_eq!((code, pid, epoch), (0, 0, 0));
    let producer = (pid, epoch);
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", producer, &[0], 3).await,
        vec![0]
    );
    let sent = produce(
        &mut client,
        "t",
        0,
        txn_batch(producer, 0, &["a", "b", "c"]),
        9,
    )
    .await;
    assert_eq!((sent.error_code, sent.base_offset), (0, 0));
    // A plain record after the open transaction: read_committed waits for the transaction.
    assert_eq!(
        produce(&mut client, "t", 0, values(1), 9).await.base_offset,
        3
    );
    let open = fetch(&mut client, 0, COMMITTED).await;
    assert_eq!((open.high_watermark, open.last_stable), (4, 0));
    assert!(open.records.is_empty());
    assert_eq!(fetch(&mut client, 0, UNCOMMITTED).await.records.len(), 4);
    assert_eq!(latest(&mut client, COMMITTED).await, 0);
    assert_eq!(latest(&mut client, UNCOMMITTED).await, 4);

    assert_eq!(end_txn(&mut client, "pay", producer, true).await, 0);
    let committed = fetch(&mut client, 0, COMMITTED).await;
    assert_eq!((committed.high_watermark, committed.last_stable), (5, 5));
    let offsets: Vec<i64> = committed.records.iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3]);
    assert_eq!(committed.markers, vec![4]);
    assert!(committed.aborted.is_empty());
    assert_eq!(latest(&mut client, COMMITTED).await, 5);

    // The next transaction of the same producer aborts: its records stay in the log, listed.
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", producer, &[0], 3).await,
        vec![0]
    );
    let sent = produce(&mut client, "t", 0, txn_batch(producer, 3, &["x", "y"]), 9).await;
    assert_eq!((sent.error_code, sent.base_offset), (0, 5));
    assert_eq!(end_txn(&mut client, "pay", producer, false).await, 0);
    let aborted = fetch(&mut client, 5, COMMITTED).await;
    assert_eq!((aborted.high_watermark, aborted.last_stable), (8, 8));
    assert_eq!(aborted.aborted, vec![(pid, 5)]);
    assert_eq!(aborted.records, vec![(5, "x".into()), (6, "y".into())]);
    assert_eq!(aborted.markers, vec![7]);
    // read_uncommitted is told of no aborted transaction.
    assert!(fetch(&mut client, 5, UNCOMMITTED).await.aborted.is_empty());
    // A committed read from before the abort lists it too, the commit not.
    assert_eq!(
        fetch(&mut client, 0, COMMITTED).await.aborted,
        vec![(pid, 5)]
    );
}

#[tokio::test]
async fn transactional_requests_are_checked_like_kafka() {
    let broker = broker().await;
    let mut client = setup(&broker).await;
    assert_eq!(
        init(&mut client, "pay", i32::MAX).await.0,
        ResponseError::InvalidTransactionTimeout.code()
    );
    assert_eq!(
        init(&mut client, "pay", 0).await.0,
        ResponseError::InvalidTransactionTimeout.code()
    );
    let (_, pid, epoch) = init(&mut client, "pay", 60_000).await;
    let producer = (pid, epoch);
    // Data for a partition the transaction does not hold.
    let stray = produce(&mut client, "t", 1, txn_batch(producer, 0, &["a"]), 9).await;
    assert_eq!(stray.error_code, ResponseError::InvalidTxnState.code());
    // Nothing to end.
    assert_eq!(
        end_txn(&mut client, "pay", producer, true).await,
        ResponseError::InvalidTxnState.code()
    );
    // One unknown partition: nothing is added.
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", producer, &[0, 7], 3).await,
        vec![
            ResponseError::OperationNotAttempted.code(),
            ResponseError::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", (pid + 1, epoch), &[0], 3).await,
        vec![ResponseError::InvalidProducerIdMapping.code()]
    );
    assert_eq!(
        add_partitions_to_txn(&mut client, "other", producer, &[0], 3).await,
        vec![ResponseError::InvalidProducerIdMapping.code()]
    );
}

#[tokio::test]
async fn a_new_instance_fences_the_zombie_and_aborts_what_it_left_open() {
    let broker = broker().await;
    let mut client = setup(&broker).await;
    let (_, pid, epoch) = init(&mut client, "pay", 60_000).await;
    let zombie = (pid, epoch);
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", zombie, &[0], 3).await,
        vec![0]
    );
    assert_eq!(
        produce(&mut client, "t", 0, txn_batch(zombie, 0, &["a", "b"]), 9)
            .await
            .error_code,
        0
    );
    assert_eq!(fetch(&mut client, 0, COMMITTED).await.last_stable, 0);
    // The restarted instance: same producer id, next epoch; the open transaction is aborted.
    let (code, same, next) = init(&mut client, "pay", 60_000).await;
    assert_eq!((code, same, next), (0, pid, 1));
    let after = fetch(&mut client, 0, COMMITTED).await;
    assert_eq!((after.high_watermark, after.last_stable), (3, 3));
    assert_eq!(after.aborted, vec![(pid, 0)]);
    assert_eq!(after.markers, vec![2]);
    // The zombie is refused everywhere: PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2 of
    // the coordinator's APIs, and from the partition).
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", zombie, &[0], 3).await,
        vec![ResponseError::ProducerFenced.code()]
    );
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", zombie, &[0], 1).await,
        vec![ResponseError::InvalidProducerEpoch.code()]
    );
    assert_eq!(
        end_txn(&mut client, "pay", zombie, true).await,
        ResponseError::ProducerFenced.code()
    );
    let late = produce(&mut client, "t", 0, txn_batch(zombie, 2, &["c"]), 9).await;
    assert_eq!(late.error_code, ResponseError::InvalidProducerEpoch.code());
    // The new instance writes and commits from sequence 0.
    let current = (pid, 1);
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", current, &[0], 3).await,
        vec![0]
    );
    let sent = produce(&mut client, "t", 0, txn_batch(current, 0, &["d"]), 9).await;
    assert_eq!((sent.error_code, sent.base_offset), (0, 3));
    assert_eq!(end_txn(&mut client, "pay", current, true).await, 0);
    assert_eq!(
        fetch(&mut client, 3, COMMITTED).await.records,
        vec![(3, "d".into())]
    );
}

#[tokio::test]
async fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let broker = broker().await;
    let mut client = setup(&broker).await;
    let (_, pid, epoch) = init(&mut client, "slow", 1_000).await;
    let producer = (pid, epoch);
    assert_eq!(
        add_partitions_to_txn(&mut client, "slow", producer, &[0, 1], 3).await,
        vec![0, 0]
    );
    assert_eq!(
        produce(&mut client, "t", 0, txn_batch(producer, 0, &["a"]), 9)
            .await
            .error_code,
        0
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert_eq!(
        broker.abort_timed_out_transactions(now).await,
        0,
        "within its timeout"
    );
    assert_eq!(broker.abort_timed_out_transactions(now + 2_000).await, 1);
    let after = fetch(&mut client, 0, COMMITTED).await;
    assert_eq!(
        (after.last_stable, after.aborted.clone()),
        (2, vec![(pid, 0)])
    );
    assert_eq!(after.markers, vec![1]);
    // Partition 1 held no data: its marker is all it has.
    let request = fetch_request("t", 1, 0, 0).with_isolation_level(COMMITTED);
    let p = client.call(&request, 12).await.responses[0].partitions[0].clone();
    assert_eq!((p.high_watermark, p.last_stable_offset), (1, 1));
    assert_eq!(
        end_txn(&mut client, "slow", producer, true).await,
        ResponseError::ProducerFenced.code()
    );
    let late = produce(&mut client, "t", 0, txn_batch(producer, 1, &["b"]), 9).await;
    assert_eq!(late.error_code, ResponseError::InvalidProducerEpoch.code());
}

async fn committed_offset(client: &mut RawClient, group: &str) -> i64 {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name("t"))
            .with_partition_indexes(vec![1])]));
    client.call(&request, 7).await.topics[0].partitions[0].committed_offset
}

#[tokio::test]
async fn offsets_sent_to_a_transaction_are_committed_with_it_only() {
    let broker = broker().await;
    let mut client = setup(&broker).await;
    for commit in [false, true] {
        let (_, pid, epoch) = init(&mut client, "copier", 60_000).await;
        let producer = (pid, epoch);
        assert_eq!(
            add_offsets_to_txn(&mut client, "copier", producer, "readers").await,
            0
        );
        let offsets = TxnOffsetCommitRequest::default()
            .with_transactional_id(txn_id("copier"))
            .with_group_id(GroupId(s("readers")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(42)])]);
        let answer = client.call(&offsets, 3).await;
        assert_eq!(answer.topics[0].partitions[0].error_code, 0);
        assert_eq!(
            committed_offset(&mut client, "readers").await,
            -1,
            "not before the end"
        );
        assert_eq!(end_txn(&mut client, "copier", producer, commit).await, 0);
        let expected = if commit { 42 } else { -1 };
        assert_eq!(committed_offset(&mut client, "readers").await, expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_state_survives_a_kill_9() {
    let dir = std::env::temp_dir().join(format!("txn-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let args = BrokerArgs::new(&dir);
    let mut broker = BrokerProcess::start(&args);
    let mut client = RawClient::connect(broker.addr).await;
    assert_eq!(create_topic(&mut client, "t", 2).await, 0);
    let (_, pid, epoch) = init(&mut client, "pay", 60_000).await;
    let producer = (pid, epoch);
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", producer, &[0], 3).await,
        vec![0]
    );
    assert_eq!(
        produce(&mut client, "t", 0, txn_batch(producer, 0, &["a", "b"]), 9)
            .await
            .error_code,
        0
    );
    broker.kill();

    let mut broker = BrokerProcess::start(&args);
    let mut client = RawClient::connect(broker.addr).await;
    // Still open: the last stable offset is held, and the producer may go on and commit.
    let open = fetch(&mut client, 0, COMMITTED).await;
    assert_eq!((open.high_watermark, open.last_stable), (2, 0));
    let sent = produce(&mut client, "t", 0, txn_batch(producer, 2, &["c"]), 9).await;
    assert_eq!((sent.error_code, sent.base_offset), (0, 2));
    assert_eq!(end_txn(&mut client, "pay", producer, true).await, 0);
    broker.kill();

    let broker = BrokerProcess::start(&args);
    let mut client = RawClient::connect(broker.addr).await;
    let committed = fetch(&mut client, 0, COMMITTED).await;
    assert_eq!((committed.high_watermark, committed.last_stable), (4, 4));
    assert_eq!(committed.records.len(), 3);
    // The epoch survived too: a new instance gets the next one, and the old one is fenced.
    assert_eq!(init(&mut client, "pay", 60_000).await, (0, pid, 1));
    let late = produce(&mut client, "t", 0, txn_batch(producer, 3, &["d"]), 9).await;
    assert_eq!(late.error_code, ResponseError::InvalidProducerEpoch.code());
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("broker.log"));
}

/// ListOffsets of "t" partition 0 by `timestamp` at `isolation`: `(timestamp, offset)`.
async fn offset_for(client: &mut RawClient, timestamp: i64, isolation: i8) -> (i64, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(timestamp)])]);
    let answer = client.call(&request, 7).await;
    let p = &answer.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    (p.timestamp, p.offset)
}

/// Kafka answers no offset for a lookup by time or max timestamp whose record lies at or past
/// what the consumer may read (the last stable offset for read_committed), so a consumer seeking
/// by time does not skip over an open transaction.
#[tokio::test]
async fn read_committed_lookups_by_time_never_answer_past_the_last_stable_offset() {
    let broker = broker().await;
    let mut client = setup(&broker).await;
    let plain: Vec<TestRecord<'_>> = (0..3).map(|i| (None, "p", 1_000 + i)).collect();
    assert_eq!(
        produce(&mut client, "t", 0, batch(&plain, Compression::None), 9)
            .await
            .error_code,
        0
    );
    let (_, pid, epoch) = init(&mut client, "pay", 60_000).await;
    let producer = (pid, epoch);
    add_partitions_to_txn(&mut client, "pay", producer, &[0], 3).await;
    let stamp = ProducerStamp {
        id: pid,
        epoch,
        base_sequence: 0,
    };
    let open = records_batch(
        &[(None, Some("late"), 5_000)],
        Compression::None,
        Some(stamp),
        true,
    );
    assert_eq!(produce(&mut client, "t", 0, open, 9).await.base_offset, 3);
    for (timestamp, uncommitted) in [(1_001, (1_001, 1)), (2_000, (5_000, 3)), (-3, (5_000, 3))] {
        assert_eq!(
            offset_for(&mut client, timestamp, UNCOMMITTED).await,
            uncommitted
        );
        let committed = if uncommitted.1 < 3 {
            uncommitted
        } else {
            (-1, -1)
        };
        assert_eq!(
            offset_for(&mut client, timestamp, COMMITTED).await,
            committed,
            "{timestamp}"
        );
    }
    assert_eq!(end_txn(&mut client, "pay", producer, true).await, 0);
    assert_eq!(offset_for(&mut client, 2_000, COMMITTED).await, (5_000, 3));
    // The commit marker, stamped with the broker's clock, now holds the largest timestamp (as in
    // Kafka, whose time index holds control batches too).
    assert_eq!(offset_for(&mut client, -3, COMMITTED).await.1, 4);
}

/// TxnOffsetCommit at `version` of `(partition, metadata)` offsets of "t" for `group`: each
/// partition's error.
async fn txn_commit_offsets(
    client: &mut RawClient,
    id: &str,
    producer: (i64, i16),
    group: &str,
    offsets: &[(i32, String)],
    version: i16,
) -> Vec<i16> {
    let partitions = offsets
        .iter()
        .map(|(partition, metadata)| {
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(42)
                .with_committed_metadata(Some(s(metadata)))
        })
        .collect();
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(id))
        .with_group_id(GroupId(s(group)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(partitions)]);
    client.call(&request, version).await.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

#[tokio::test]
async fn metadata_past_offset_metadata_max_bytes_is_refused_when_sent_not_dropped_at_the_end() {
    let broker = broker().await;
    let mut client = setup(&broker).await;
    let (_, pid, epoch) = init(&mut client, "copier", 60_000).await;
    let producer = (pid, epoch);
    assert_eq!(
        add_offsets_to_txn(&mut client, "copier", producer, "readers").await,
        0
    );
    // Kafka's `offset.metadata.max.bytes` is 4,096; one past it is refused for that partition.
    let errors = txn_commit_offsets(
        &mut client,
        "copier",
        producer,
        "readers",
        &[(0, "m".repeat(4_097)), (1, "m".repeat(4_096))],
        3,
    )
    .await;
    assert_eq!(
        errors,
        vec![ResponseError::OffsetMetadataTooLarge.code(), 0]
    );
    assert_eq!(end_txn(&mut client, "copier", producer, true).await, 0);
    // What the commit answered 0 for is committed, whole; the refused one is not.
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("readers")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name("t"))
            .with_partition_indexes(vec![0, 1])]));
    let fetched = client.call(&request, 7).await;
    let committed: Vec<(i64, usize)> = fetched.topics[0]
        .partitions
        .iter()
        .map(|p| {
            let metadata = p.metadata.as_ref().map_or(0, |m| m.len());
            (p.committed_offset, metadata)
        })
        .collect();
    assert_eq!(committed, vec![(-1, 0), (42, 4_096)]);
}

/// `offset.metadata.max.bytes` (4,096) on every offset-commit path: OffsetCommit v2-9 and
/// TxnOffsetCommit v0-4 each refuse one character past it, for that partition alone, and take
/// the bound itself; 31 MB of metadata is refused on both and never reaches the transaction
/// state on disk (it was taken: a 67 MiB state file rewritten at every change).
#[tokio::test]
async fn offset_metadata_max_bytes_holds_on_every_offset_commit_path() {
    let dir = data_dir("txn-metadata-cap");
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = setup(&broker).await;
    let too_large = ResponseError::OffsetMetadataTooLarge.code();
    let (at_bound, past, huge) = ("m".repeat(4_096), "m".repeat(4_097), "m".repeat(31 << 20));
    let plain = |offsets: &[(i32, &String)]| {
        let partitions = offsets
            .iter()
            .map(|(partition, metadata)| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(42)
                    .with_committed_metadata(Some(s(metadata)))
            })
            .collect();
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("plain")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(partitions)])
    };
    let codes = |answer: OffsetCommitResponse| -> Vec<i16> {
        answer.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect()
    };
    for version in 2..=9 {
        let answer = client
            .call(&plain(&[(0, &past), (1, &at_bound)]), version)
            .await;
        assert_eq!(codes(answer), vec![too_large, 0], "OffsetCommit v{version}");
    }
    let answer = client.call(&plain(&[(0, &huge)]), 9).await;
    assert_eq!(codes(answer), vec![too_large]);

    let (_, pid, epoch) = init(&mut client, "copier", 60_000).await;
    let producer = (pid, epoch);
    assert_eq!(
        add_offsets_to_txn(&mut client, "copier", producer, "readers").await,
        0
    );
    for version in 0..=4 {
        let offsets = [(0, past.clone()), (1, at_bound.clone())];
        let errors = txn_commit_offsets(
            &mut client,
            "copier",
            producer,
            "readers",
            &offsets,
            version,
        )
        .await;
        assert_eq!(errors, vec![too_large, 0], "TxnOffsetCommit v{version}");
    }
    let offsets = [(0, huge.clone())];
    let errors = txn_commit_offsets(&mut client, "copier", producer, "readers", &offsets, 4).await;
    assert_eq!(errors, vec![too_large]);
    assert_eq!(end_txn(&mut client, "copier", producer, true).await, 0);
    // The state on disk holds the five accepted commits (8 KiB of hex each) and the headers.
    let state_bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("@transactions"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(
        state_bytes < 64 << 10,
        "{state_bytes} bytes of transaction state"
    );
    drop(client);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The transaction state files in `dir` by name: size, inode and modification time, which tell
/// a file appended to from one rewritten or replaced.
fn txn_state_files(dir: &std::path::Path) -> BTreeMap<String, (u64, u64, i64, i64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("@transactions"))
        .map(|e| {
            let meta = e.metadata().unwrap();
            let identity = (meta.len(), meta.ino(), meta.mtime(), meta.mtime_nsec());
            (e.file_name().to_string_lossy().into_owned(), identity)
        })
        .collect()
}

/// A change of the transaction state writes what it changes, whatever else the coordinator
/// keeps: with 512 KiB of state (32 transactions of two 4,000 B offsets), one more offset adds
/// its own record to the journal (8,106 bytes: its metadata in hex and the record's lines) and
/// leaves every other file as it was. The whole state was rewritten and synced at every change
/// (8 MiB of state: ~0.3 s a change, other clients waiting). The state stays below the 1 MiB at
/// which the journal is first compacted, so no snapshot is being written meanwhile. Measured on
/// the files, not on the process's writes, which the other tests of this file add to when they
/// run beside it (one sends 31 MiB of metadata).
#[tokio::test]
async fn a_transaction_state_change_writes_what_it_changes_not_the_whole_state() {
    let dir = data_dir("txn-change-cost");
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = setup(&broker).await;
    let metadata = "m".repeat(4_000);
    let mut producers = Vec::new();
    for i in 0..32 {
        let id = format!("copier-{i}");
        let (_, pid, epoch) = init(&mut client, &id, 60_000).await;
        assert_eq!(
            add_offsets_to_txn(&mut client, &id, (pid, epoch), "readers").await,
            0
        );
        let offsets = [(0, metadata.clone()), (1, metadata.clone())];
        let errors =
            txn_commit_offsets(&mut client, &id, (pid, epoch), "readers", &offsets, 3).await;
        assert_eq!(errors, vec![0, 0]);
        producers.push((id, (pid, epoch)));
    }
    let (id, producer) = &producers[7];
    let before = txn_state_files(&dir);
    let offsets = [(0, metadata.clone())];
    let errors = txn_commit_offsets(&mut client, id, *producer, "readers", &offsets, 3).await;
    assert_eq!(errors, vec![0]);
    let after = txn_state_files(&dir);
    let changed: Vec<&String> = after
        .iter()
        .filter(|(name, identity)| before.get(*name) != Some(identity))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(changed.len(), 1, "files changed: {changed:?}");
    let journal = changed[0];
    let (grown_by, same_inode) = (
        after[journal].0 - before[journal].0,
        after[journal].1 == before[journal].1,
    );
    assert_eq!((grown_by, same_inode), (8_106, true), "{journal}");
    drop(client);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// 100,000 partitions the broker does not have, in one TxnOffsetCommit: each is answered
/// UNKNOWN_TOPIC_OR_PARTITION, in order (the answer was built by searching the unknown ones for
/// each partition: 12 s for this request, every other client waiting).
#[tokio::test]
async fn a_txn_offset_commit_of_100k_unknown_partitions_is_answered_per_partition() {
    let broker = broker().await;
    let mut client = setup(&broker).await;
    let (_, pid, epoch) = init(&mut client, "copier", 60_000).await;
    let offsets: Vec<(i32, String)> = (10..100_010).map(|p| (p, String::new())).collect();
    let errors =
        txn_commit_offsets(&mut client, "copier", (pid, epoch), "readers", &offsets, 3).await;
    assert_eq!(errors.len(), 100_000);
    assert!(errors
        .iter()
        .all(|e| *e == ResponseError::UnknownTopicOrPartition.code()));
}

/// Lines of the transaction state that cannot be read (a disk's bit flip, an edit by hand) cost
/// those lines only: the broker starts, says so on stderr once per line, and keeps everything
/// else. Three kinds of damage in one journal: a byte that is not UTF-8 in one partition of an
/// open transaction (the broker refused to start), the `end` of one record garbled (the whole
/// record was dropped), a header garbled (that transactional id alone starts over).
#[tokio::test]
async fn bad_lines_in_the_transaction_state_are_skipped_said_on_stderr_and_the_rest_kept() {
    let dir = data_dir("txn-bad-lines");
    let args = BrokerArgs::new(&dir);
    let mut broker = BrokerProcess::start(&args);
    let mut client = RawClient::connect(broker.addr).await;
    assert_eq!(create_topic(&mut client, "t", 2).await, 0);
    let (_, pay, _) = init(&mut client, "pay", 60_000).await;
    assert_eq!(
        add_partitions_to_txn(&mut client, "pay", (pay, 0), &[0, 1], 3).await,
        vec![0, 0]
    );
    let (_, ship, _) = init(&mut client, "ship", 60_000).await;
    let (_, keep, _) = init(&mut client, "keep", 60_000).await;
    drop(client);
    broker.kill();

    // Ids and topic in hex, as the file holds them: "pay" 706179, "ship" 73686970, "keep"
    // 6b656570, "t" 74.
    let keep_header = format!("txn 6b656570 {keep} ");
    let damage: [(&[u8], &[u8]); 3] = [
        (b"\np 74 1\n", b"\np 74\xff 1\n"),
        (b"end\nbegin\ntxn 6b656570 ", b"enx\nbegin\ntxn 6b656570 "),
        (keep_header.as_bytes(), b"txn 6b656570 what "),
    ];
    let mut damaged = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("@transactions") {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        for (good, bad) in &damage {
            if let Some(at) = bytes.windows(good.len()).position(|w| w == *good) {
                bytes.splice(at..at + good.len(), bad.iter().copied());
                damaged += 1;
            }
        }
        std::fs::write(&path, bytes).unwrap();
    }
    assert_eq!(damaged, 3);

    let broker = BrokerProcess::try_start(&args).expect("the broker starts");
    let log = std::fs::read_to_string(&broker.log).unwrap();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("transaction state"))
        .collect();
    assert_eq!(said.len(), 3, "{log}");
    assert!(said
        .iter()
        .all(|l| l.contains("skipping a line that cannot be read")));
    let mut client = RawClient::connect(broker.addr).await;
    // "pay" is still open on partition 0; partition 1, its damaged line, is not in it.
    let batch = |values: &[&str]| txn_batch((pay, 0), 0, values);
    assert_eq!(
        produce(&mut client, "t", 0, batch(&["a"]), 9)
            .await
            .error_code,
        0
    );
    assert_eq!(
        produce(&mut client, "t", 1, batch(&["b"]), 9)
            .await
            .error_code,
        ResponseError::InvalidTxnState.code()
    );
    // "ship", whose record lost its end, kept its producer id; "keep" starts over.
    assert_eq!(init(&mut client, "ship", 60_000).await, (0, ship, 1));
    let (code, again, epoch) = init(&mut client, "keep", 60_000).await;
    assert_eq!((code, epoch), (0, 0));
    assert_ne!(again, keep);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}
