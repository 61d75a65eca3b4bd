//! Topic configs as Kafka has them: validated on create and alter (INVALID_CONFIG, nothing
//! changed), applied (LogAppendTime, in memory and on disk, compaction, retention.ms), described
//! with their sources; DeleteRecords; authorized operations in Metadata.

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request as incremental;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder, TimestampType};
use kafka_protocol::ResponseError;
use tests::*;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

async fn create_with(
    client: &mut RawClient,
    name: &str,
    configs: &[(&str, &str)],
) -> (i16, String) {
    let topic = create_topic_with(client, name, configs).await;
    (
        topic.error_code,
        topic
            .error_message
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

/// Records `(key, value or None for a tombstone, timestamp)` as one plain batch.
fn keyed(records: &[MaybeValue<'_>]) -> Bytes {
    records_batch(records, Compression::None, None, false)
}

/// The offsets of every record of partition 0.
async fn read_offsets(client: &mut RawClient, topic: &str) -> Vec<i64> {
    read_all(client, topic, 0)
        .await
        .iter()
        .map(|r| r.0)
        .collect()
}

/// Every record from `offset` on: `(offset, key, value, timestamp, log append time?)`.
async fn read_all(
    client: &mut RawClient,
    topic: &str,
    offset: i64,
) -> Vec<(i64, Option<String>, Option<String>, i64, bool)> {
    let response = client.call(&fetch_request(topic, 0, offset, 0), 12).await;
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut data = p.records.clone().unwrap_or_default();
    let text = |b: Bytes| String::from_utf8_lossy(&b).into_owned();
    RecordBatchDecoder::decode_all(&mut data)
        .unwrap()
        .into_iter()
        .flat_map(|b| b.records)
        .map(|r| {
            let appended = r.timestamp_type == TimestampType::LogAppend;
            (
                r.offset,
                r.key.map(text),
                r.value.map(text),
                r.timestamp,
                appended,
            )
        })
        .collect()
}

fn describe(name: &str) -> DescribeConfigsRequest {
    DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(name))])
}

/// `(value, source)` of one config of a topic.
async fn config_of(client: &mut RawClient, topic: &str, name: &str) -> (String, i8) {
    let response = client.call(&describe(topic), 4).await;
    let entry = response.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} described"))
        .clone();
    (entry.value.unwrap().to_string(), entry.config_source)
}

/// With a data directory the stamped batch is what reaches the file (a log on disk writes a
/// producer's bytes without copying them, and copies them only to stamp them): after a restart
/// each batch still carries the broker's time, its own offset and a valid CRC.
#[tokio::test]
async fn log_append_time_is_stamped_on_the_batch_written_to_the_data_dir() {
    let dir = data_dir("stamped-on-disk");
    let configs = [("message.timestamp.type", "LogAppendTime")];
    let mut stamped_at = Vec::new();
    {
        let broker = start_broker(data_dir_config(&dir)).await;
        let mut client = RawClient::connect(broker.addr()).await;
        assert_eq!(create_with(&mut client, "stamped", &configs).await.0, 0);
        for base_offset in [0, 3] {
            let answer = produce(&mut client, "stamped", 0, values(3), 9).await;
            assert_eq!((answer.error_code, answer.base_offset), (0, base_offset));
            stamped_at.push(answer.log_append_time_ms);
        }
        broker.shutdown().await;
    }
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let fetched = client.call(&fetch_request("stamped", 0, 0, 0), 12).await;
    let data = fetched.responses[0].partitions[0].records.clone().unwrap();
    // Per batch: its offset, the broker's time as its max timestamp, the LogAppendTime bit, and
    // whether its CRC (over the stamped bytes) holds.
    let batches: Vec<(i64, i64, bool, bool)> = protocol::batch::split_batches(data)
        .map(|(header, bytes)| {
            let crc_holds = protocol::batch::validate_single_batch(&bytes).is_ok();
            let stamp = (header.max_timestamp, header.log_append_time());
            (header.base_offset, stamp.0, stamp.1, crc_holds)
        })
        .collect();
    let expected = vec![
        (0, stamped_at[0], true, true),
        (3, stamped_at[1], true, true),
    ];
    assert_eq!(batches, expected);
    let records = read_all(&mut client, "stamped", 0).await;
    let offsets: Vec<(i64, bool)> = records.iter().map(|r| (r.0, r.4)).collect();
    assert_eq!(
        offsets,
        (0..6).map(|offset| (offset, true)).collect::<Vec<_>>()
    );
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn an_unknown_or_invalid_config_creates_nothing() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let (code, message) = create_with(&mut client, "bad", &[("bogus.key", "1")]).await;
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert_eq!(message, "Unknown topic config name: bogus.key");
    let (code, message) = create_with(&mut client, "bad", &[("retention.ms", "-5")]).await;
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert_eq!(
        message,
        "Invalid value -5 for configuration retention.ms: Value must be at least -1"
    );
    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name("bad")))
        ]))
        .with_allow_auto_topic_creation(false);
    let answer = client.call(&metadata, 12).await;
    assert_eq!(
        answer.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[tokio::test]
async fn log_append_time_stamps_each_batch_with_the_brokers_time() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let configs = [("message.timestamp.type", "LogAppendTime")];
    assert_eq!(create_with(&mut client, "stamped", &configs).await.0, 0);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let answer = produce(&mut client, "stamped", 0, values(3), 9).await;
    assert_eq!((answer.error_code, answer.base_offset), (0, 0));
    assert!(
        answer.log_append_time_ms >= before,
        "{}",
        answer.log_append_time_ms
    );
    let records = read_all(&mut client, "stamped", 0).await;
    assert_eq!(records.len(), 3);
    assert!(
        records.iter().all(|r| r.4),
        "every record's timestamp type is LogAppendTime"
    );
    // What a consumer takes as every record's timestamp: the batch's max timestamp, the
    // broker's time instead of the producer's 1000..1002.
    let fetched = client.call(&fetch_request("stamped", 0, 0, 0), 12).await;
    let data = fetched.responses[0].partitions[0].records.clone().unwrap();
    let header = protocol::batch::BatchHeader::parse(&data).unwrap();
    assert!(header.log_append_time());
    assert_eq!(header.max_timestamp, answer.log_append_time_ms);
    // A CreateTime topic answers -1 and keeps the producer's timestamps.
    assert_eq!(create_topic(&mut client, "created", 1).await, 0);
    let answer = produce(&mut client, "created", 0, values(1), 9).await;
    assert_eq!(answer.log_append_time_ms, -1);
    assert_eq!(read_all(&mut client, "created", 0).await[0].3, 1000);
}

#[tokio::test]
async fn a_compacted_topic_keeps_the_last_record_of_each_key_and_refuses_keyless_ones() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(
        create_with(&mut client, "accounts", &[("cleanup.policy", "compact")])
            .await
            .0,
        0
    );
    // 40 updates of 13 accounts, in 8 batches of 5.
    let keys: Vec<String> = (0..40).map(|i| format!("k{}", i % 13)).collect();
    let values: Vec<String> = (0..40).map(|i| format!("v{i}")).collect();
    for chunk in 0..8 {
        let records: Vec<_> = (chunk * 5..chunk * 5 + 5)
            .map(|i| {
                (
                    Some(keys[i].as_str()),
                    Some(values[i].as_str()),
                    1_000 + i as i64,
                )
            })
            .collect();
        let answer = produce(&mut client, "accounts", 0, keyed(&records), 9).await;
        assert_eq!(
            (answer.error_code, answer.base_offset),
            (0, chunk as i64 * 5)
        );
    }
    let keyless = produce(&mut client, "accounts", 0, values_batch(), 9).await;
    assert_eq!(keyless.error_code, ResponseError::InvalidRecord.code());
    assert_eq!(
        keyless.error_message.as_deref(),
        Some("Compacted topic cannot accept message without key in topic partition accounts-0.")
    );
    assert_eq!(read_all(&mut client, "accounts", 0).await.len(), 40);
    let now = 10_000_000_000_000;
    let (_, stats) = broker.maintain_logs(now);
    assert_eq!(stats.records_removed, 27);
    let kept = read_all(&mut client, "accounts", 0).await;
    let offsets: Vec<i64> = kept.iter().map(|r| r.0).collect();
    assert_eq!(offsets, (27..40).collect::<Vec<i64>>());
    for (offset, key, value, _, _) in &kept {
        assert_eq!(key.as_deref(), Some(format!("k{}", offset % 13).as_str()));
        assert_eq!(value.as_deref(), Some(format!("v{offset}").as_str()));
    }
    // The log end is where it was; a second pass finds nothing dirty.
    assert_eq!(list_offset(&mut client, "accounts", 0, -1).await.2, 40);
    assert_eq!(broker.maintain_logs(now).1.records_removed, 0);
}

/// A keyless batch.
fn values_batch() -> Bytes {
    values(2)
}

#[tokio::test]
async fn tombstones_go_once_delete_retention_ms_has_passed() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let configs = [
        ("cleanup.policy", "compact"),
        ("delete.retention.ms", "1000"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(create_with(&mut client, "users", &configs).await.0, 0);
    let batch = keyed(&[
        (Some("a"), Some("1"), 10_000),
        (Some("b"), Some("1"), 10_000),
        (Some("a"), None, 20_000), // a deleted
    ]);
    assert_eq!(
        produce(&mut client, "users", 0, batch, 9).await.error_code,
        0
    );
    // Before the tombstone's retention has passed it stays, as the last record of "a".
    broker.maintain_logs(20_500);
    let kept = read_all(&mut client, "users", 0).await;
    let summary: Vec<_> = kept
        .iter()
        .map(|r| (r.0, r.1.clone(), r.2.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, Some("b".into()), Some("1".into())),
            (2, Some("a".into()), None)
        ]
    );
    // A later pass (something new made the log dirty again) drops it.
    let more = keyed(&[(Some("c"), Some("1"), 30_000)]);
    assert_eq!(
        produce(&mut client, "users", 0, more, 9).await.error_code,
        0
    );
    broker.maintain_logs(30_000);
    let offsets = read_offsets(&mut client, "users").await;
    assert_eq!(offsets, vec![1, 3]);
}

#[tokio::test]
async fn alter_and_incremental_alter_change_configs_and_describe_shows_their_sources() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "orders", 1).await, 0);
    assert_eq!(
        config_of(&mut client, "orders", "retention.ms").await,
        ("604800000".into(), 5)
    );
    let alter = |configs: &[(&str, &str)]| {
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("orders"))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )])
    };
    for version in 0..=2 {
        let answer = client
            .call(&alter(&[("retention.ms", "1000")]), version)
            .await;
        assert_eq!(answer.responses[0].error_code, 0, "v{version}");
    }
    assert_eq!(
        config_of(&mut client, "orders", "retention.ms").await,
        ("1000".into(), 1)
    );
    let refused = client
        .call(&alter(&[("retention.ms", "5"), ("nope", "1")]), 2)
        .await;
    assert_eq!(
        refused.responses[0].error_code,
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        refused.responses[0].error_message.as_deref(),
        Some("Unknown topic config name: nope")
    );
    assert_eq!(
        config_of(&mut client, "orders", "retention.ms").await,
        ("1000".into(), 1)
    );

    let op = |name: &str, operation: i8, value: Option<&str>| {
        incremental::AlterableConfig::default()
            .with_name(s(name))
            .with_config_operation(operation)
            .with_value(value.map(s))
    };
    let incremental = |configs| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            incremental::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configs(configs),
        ])
    };
    let append = incremental(vec![op("cleanup.policy", 2, Some("compact"))]);
    assert_eq!(client.call(&append, 1).await.responses[0].error_code, 0);
    // AlterConfigs replaced everything, so retention.ms set by it is still there.
    assert_eq!(
        config_of(&mut client, "orders", "cleanup.policy").await,
        ("delete,compact".into(), 1)
    );
    let delete = incremental(vec![
        op("retention.ms", 1, None),
        op("cleanup.policy", 3, Some("delete")),
    ]);
    assert_eq!(client.call(&delete, 0).await.responses[0].error_code, 0);
    assert_eq!(
        config_of(&mut client, "orders", "retention.ms").await,
        ("604800000".into(), 5)
    );
    assert_eq!(
        config_of(&mut client, "orders", "cleanup.policy").await,
        ("compact".into(), 1)
    );
    // Now compacted: keyless records are refused.
    let keyless = produce(&mut client, "orders", 0, values(1), 9).await;
    assert_eq!(keyless.error_code, ResponseError::InvalidRecord.code());
    let not_a_list = incremental(vec![op("retention.ms", 2, Some("1"))]);
    let answer = client.call(&not_a_list, 1).await;
    assert_eq!(
        answer.responses[0].error_code,
        ResponseError::InvalidConfig.code()
    );
    // The broker's configs are its flags; a missing topic is unknown.
    for (kind, name, error) in [
        (4, "1", ResponseError::InvalidRequest),
        (2, "missing", ResponseError::UnknownTopicOrPartition),
    ] {
        let request =
            AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(kind)
                .with_resource_name(s(name))]);
        let answer = client.call(&request, 1).await;
        assert_eq!(answer.responses[0].error_code, error.code(), "{name}");
    }
}

#[tokio::test]
async fn retention_ms_moves_the_log_start_past_expired_batches() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(
        create_with(&mut client, "events", &[("retention.ms", "60000")])
            .await
            .0,
        0
    );
    for timestamp in [1_000, 50_000, 100_000] {
        let batch = keyed(&[(None, Some("x"), timestamp), (None, Some("y"), timestamp)]);
        assert_eq!(
            produce(&mut client, "events", 0, batch, 9).await.error_code,
            0
        );
    }
    // At 120 s the batch of 1 s and the one of 50 s are older than a minute.
    assert_eq!(broker.maintain_logs(120_000).0, 2);
    assert_eq!(list_offset(&mut client, "events", 0, -2).await.2, 4);
    assert_eq!(list_offset(&mut client, "events", 0, -1).await.2, 6);
}

async fn delete_records(client: &mut RawClient, topic: &str, offset: i64) -> (i16, i64) {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(1000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])]);
    let answer = client.call(&request, 2).await;
    let p = &answer.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

#[tokio::test]
async fn delete_records_moves_the_log_start_and_survives_a_restart() {
    let dir = data_dir("delete-records");
    let config = data_dir_config(&dir);
    let broker = start_broker(config.clone()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "log", 1).await, 0);
    for _ in 0..3 {
        assert_eq!(
            produce(&mut client, "log", 0, values(2), 9)
                .await
                .error_code,
            0
        );
    }
    assert_eq!(delete_records(&mut client, "log", 3).await, (0, 3));
    assert_eq!(
        delete_records(&mut client, "log", 1).await,
        (0, 3),
        "never back"
    );
    assert_eq!(
        delete_records(&mut client, "log", 7).await,
        (ResponseError::OffsetOutOfRange.code(), -1)
    );
    assert_eq!(
        delete_records(&mut client, "missing", 0).await,
        (ResponseError::UnknownTopicOrPartition.code(), -1)
    );
    let fetch = client.call(&fetch_request("log", 0, 2, 0), 12).await;
    let p = &fetch.responses[0].partitions[0];
    assert_eq!(
        (p.error_code, p.log_start_offset),
        (ResponseError::OffsetOutOfRange.code(), 3)
    );
    assert_eq!(list_offset(&mut client, "log", 0, -2).await.2, 3);
    broker.shutdown().await;

    let broker = start_broker(config).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(list_offset(&mut client, "log", 0, -2).await.2, 3);
    // -1: up to the high watermark.
    assert_eq!(delete_records(&mut client, "log", -1).await, (0, 6));
    assert_eq!(
        create_with(&mut client, "kept", &[("cleanup.policy", "compact")])
            .await
            .0,
        0
    );
    assert_eq!(
        delete_records(&mut client, "kept", 0).await,
        (ResponseError::PolicyViolation.code(), -1)
    );
    broker.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_compacted_topic_on_disk_is_read_cleaned_after_a_restart() {
    let dir = data_dir("compacted-disk");
    let config = data_dir_config(&dir);
    let broker = start_broker(config.clone()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    // Segments of about two batches, so that the cleaner has closed segments to clean.
    let configs = [
        ("cleanup.policy", "compact"),
        ("internal.segment.bytes", "300"),
    ];
    assert_eq!(create_with(&mut client, "accounts", &configs).await.0, 0);
    for round in 0..6 {
        let value = format!("r{round}");
        let batch = keyed(&[
            (Some("a"), Some(&value), 1_000),
            (Some("b"), Some(&value), 1_000),
        ]);
        assert_eq!(
            produce(&mut client, "accounts", 0, batch, 9)
                .await
                .error_code,
            0
        );
    }
    // 81 bytes a batch: the first segment closes after three batches (offsets 0-5), the
    // second is the active one.
    let (_, stats) = broker.maintain_logs(10_000_000_000_000);
    assert_eq!((stats.batches_read, stats.records_removed), (3, 4));
    assert_eq!((stats.bytes_before, stats.bytes_after), (243, 81));
    let cleaned = read_all(&mut client, "accounts", 0).await;
    broker.shutdown().await;

    let broker = start_broker(config).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let after = read_all(&mut client, "accounts", 0).await;
    assert_eq!(after, cleaned);
    // The cleaned segment keeps its last a and b (4, 5); the active one is never cleaned.
    let offsets: Vec<i64> = after.iter().map(|r| r.0).collect();
    assert_eq!(offsets, (4..12).collect::<Vec<i64>>());
    assert_eq!(list_offset(&mut client, "accounts", 0, -1).await.2, 12);
    broker.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn metadata_lists_authorized_operations_when_asked() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let request = |asked: bool| {
        MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name("t")))
            ]))
            .with_include_topic_authorized_operations(asked)
    };
    let asked = client.call(&request(true), 12).await;
    assert_eq!(asked.topics[0].topic_authorized_operations, 3576);
    let not_asked = client.call(&request(false), 12).await;
    assert_eq!(not_asked.topics[0].topic_authorized_operations, i32::MIN);
    let cluster = client
        .call(
            &request(true).with_include_cluster_authorized_operations(true),
            10,
        )
        .await;
    assert_eq!(cluster.cluster_authorized_operations, 8096);
}

#[tokio::test]
async fn retention_ms_on_disk_deletes_whole_segments_and_a_restart_starts_after_them() {
    let dir = data_dir("retention-ms-disk");
    let config = data_dir_config(&dir);
    let broker = start_broker(config.clone()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    // A segment rolls once it holds 100 bytes: one batch of one record (73 bytes) each.
    let configs = [("retention.ms", "60000"), ("internal.segment.bytes", "100")];
    assert_eq!(create_with(&mut client, "events", &configs).await.0, 0);
    for timestamp in [1_000, 2_000, 50_000, 100_000, 110_000] {
        let batch = keyed(&[(None, Some("x"), timestamp)]);
        assert_eq!(
            produce(&mut client, "events", 0, batch, 9).await.error_code,
            0
        );
    }
    let files = |dir: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("events"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log"))
            .collect();
        names.sort();
        names
    };
    assert_eq!(files(&dir).len(), 5);
    // At 120 s the segments of 1 s, 2 s and 50 s are older than a minute; 100 s is not.
    assert_eq!(broker.maintain_logs(120_000).0, 3);
    assert_eq!(list_offset(&mut client, "events", 0, -2).await.2, 3);
    assert_eq!(files(&dir).len(), 2);
    broker.shutdown().await;

    let broker = start_broker(config).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(list_offset(&mut client, "events", 0, -2).await.2, 3);
    // Everything old: the active segment is rolled so that it can go too.
    assert_eq!(broker.maintain_logs(1_000_000).0, 2);
    assert_eq!(list_offset(&mut client, "events", 0, -2).await.2, 5);
    assert_eq!(list_offset(&mut client, "events", 0, -1).await.2, 5);
    let answer = produce(
        &mut client,
        "events",
        0,
        keyed(&[(None, Some("y"), 2_000_000)]),
        9,
    )
    .await;
    assert_eq!((answer.error_code, answer.base_offset), (0, 5));
    broker.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// `segment.ms` as Kafka's `LogSegment.shouldRoll` applies it: a new segment starts once a
/// batch's max timestamp is more than `segment.ms` past the max timestamp of the active
/// segment's first batch (record time, KIP-33, so a restarted log rolls where it did).
#[tokio::test]
async fn segment_ms_rolls_a_segment_by_its_records_timestamps_also_after_a_restart() {
    let dir = data_dir("segment-ms");
    let config = data_dir_config(&dir);
    let broker = start_broker(config.clone()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(
        create_with(&mut client, "rolled", &[("segment.ms", "10000")])
            .await
            .0,
        0
    );
    let produce_at = async |client: &mut RawClient, timestamp: i64| {
        let batch = keyed(&[(None, Some("x"), timestamp)]);
        let answer = produce(client, "rolled", 0, batch, 9).await;
        assert_eq!(answer.error_code, 0);
    };
    // 10 s after the first batch's is not past segment.ms; 10.001 s is.
    for timestamp in [1_000, 5_000, 11_000, 11_001, 15_000, 21_002] {
        produce_at(&mut client, timestamp).await;
    }
    let bases = |dir: &std::path::Path| {
        let mut bases: Vec<i64> = std::fs::read_dir(dir.join("rolled"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|n| n.strip_suffix(".log")?.split_once('-')?.1.parse().ok())
            .collect();
        bases.sort();
        bases
    };
    assert_eq!(bases(&dir), vec![0, 3, 5]);
    broker.shutdown().await;

    let broker = start_broker(config).await;
    let mut client = RawClient::connect(broker.addr()).await;
    produce_at(&mut client, 31_002).await;
    assert_eq!(bases(&dir), vec![0, 3, 5]);
    produce_at(&mut client, 31_003).await;
    assert_eq!(bases(&dir), vec![0, 3, 5, 7]);
    broker.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// IncrementalAlterConfigs SET of one topic config: the resource's error code.
async fn set_config(client: &mut RawClient, topic: &str, name: &str, value: &str) -> i16 {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![incremental::AlterableConfig::default()
                .with_name(s(name))
                .with_config_operation(0)
                .with_value(Some(s(value)))]),
    ]);
    client.call(&request, 1).await.responses[0].error_code
}

/// One record of `size` bytes of value.
fn sized(size: usize) -> Bytes {
    batch(&[(None, &"x".repeat(size), 1000)], Compression::None)
}

/// A topic's `max.message.bytes` is its limit both ways, whatever `--max-message-bytes` is:
/// Kafka's `UnifiedLog.analyzeAndValidateRecords` compares the batch with the topic's config,
/// whose default is the broker's.
#[tokio::test]
async fn a_topics_max_message_bytes_is_its_batch_limit_below_and_above_the_brokers() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(
        create_with(&mut client, "small", &[("max.message.bytes", "1000")])
            .await
            .0,
        0
    );
    assert_eq!(
        create_with(&mut client, "large", &[("max.message.bytes", "5000000")])
            .await
            .0,
        0
    );
    assert_eq!(create_topic(&mut client, "plain", 1).await, 0);
    let refused = produce(&mut client, "small", 0, sized(5_000), 9).await;
    assert_eq!(refused.error_code, ResponseError::MessageTooLarge.code());
    assert_eq!(
        produce(&mut client, "small", 0, sized(900), 9)
            .await
            .error_code,
        0
    );
    let two_mb = sized(2_000_000);
    assert_eq!(
        produce(&mut client, "large", 0, two_mb.clone(), 9)
            .await
            .error_code,
        0
    );
    // Without the config the broker's 1 MiB default applies.
    assert_eq!(
        produce(&mut client, "plain", 0, two_mb.clone(), 9)
            .await
            .error_code,
        ResponseError::MessageTooLarge.code()
    );
    // An alteration applies from the next produce on.
    assert_eq!(
        set_config(&mut client, "plain", "max.message.bytes", "3000000").await,
        0
    );
    assert_eq!(
        produce(&mut client, "plain", 0, two_mb, 9).await.error_code,
        0
    );
    assert_eq!(
        set_config(&mut client, "small", "max.message.bytes", "10000").await,
        0
    );
    assert_eq!(
        produce(&mut client, "small", 0, sized(5_000), 9)
            .await
            .error_code,
        0
    );
    let read = read_offsets(&mut client, "plain").await;
    assert_eq!(read, vec![0]);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// KIP-937: a CreateTime record stamped outside `[now - before.max.ms, now + after.max.ms]`
/// fails its batch with INVALID_TIMESTAMP; a LogAppendTime topic takes any stamp.
#[tokio::test]
async fn records_stamped_outside_the_topics_timestamp_window_are_invalid() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let window = [
        ("message.timestamp.before.max.ms", "60000"),
        ("message.timestamp.after.max.ms", "60000"),
    ];
    assert_eq!(create_with(&mut client, "window", &window).await.0, 0);
    let mut appended = window.to_vec();
    appended.push(("message.timestamp.type", "LogAppendTime"));
    assert_eq!(create_with(&mut client, "appended", &appended).await.0, 0);
    assert_eq!(create_topic(&mut client, "default", 1).await, 0);
    let hour = 3_600_000;
    let stamped = |offsets: &[i64]| {
        let now = now_ms();
        let records: Vec<TestRecord<'_>> = offsets.iter().map(|o| (None, "v", now + o)).collect();
        batch(&records, Compression::None)
    };
    let invalid = ResponseError::InvalidTimestamp.code();
    for late_or_early in [&[-hour][..], &[hour], &[0, hour], &[-hour, 0]] {
        let answer = produce(&mut client, "window", 0, stamped(late_or_early), 9).await;
        assert_eq!(answer.error_code, invalid, "{late_or_early:?}");
        let message = answer.error_message.unwrap().to_string();
        assert!(message.contains("invalid timestamp"), "{message}");
    }
    assert_eq!(
        produce(&mut client, "window", 0, stamped(&[0, 1000]), 9)
            .await
            .error_code,
        0
    );
    assert_eq!(
        produce(&mut client, "appended", 0, stamped(&[-hour, hour]), 9)
            .await
            .error_code,
        0
    );
    // Kafka 4.0's defaults: any time before now, at most an hour after it.
    assert_eq!(
        produce(&mut client, "default", 0, stamped(&[-100 * hour]), 9)
            .await
            .error_code,
        0
    );
    assert_eq!(
        produce(&mut client, "default", 0, stamped(&[2 * hour]), 9)
            .await
            .error_code,
        invalid
    );
    assert_eq!(
        set_config(
            &mut client,
            "window",
            "message.timestamp.before.max.ms",
            "7200000"
        )
        .await,
        0
    );
    assert_eq!(
        produce(&mut client, "window", 0, stamped(&[-hour]), 9)
            .await
            .error_code,
        0
    );
    let read = read_offsets(&mut client, "window").await;
    assert_eq!(read, vec![0, 1, 2]);
}

/// IncrementalAlterConfigs of one LIST config with `operation` (2 APPEND, 3 SUBTRACT).
async fn edit_list(
    client: &mut RawClient,
    topic: &str,
    operation: i8,
    value: &str,
) -> (i16, Option<String>) {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![incremental::AlterableConfig::default()
                .with_name(s(THROTTLED))
                .with_config_operation(operation)
                .with_value(Some(s(value)))]),
    ]);
    let answer = &client.call(&request, 1).await.responses[0];
    (
        answer.error_code,
        answer.error_message.as_ref().map(|m| m.to_string()),
    )
}

const THROTTLED: &str = "leader.replication.throttled.replicas";

/// Config values are bounded as Kafka's are (32,767 bytes, the most a string of its protocol and
/// metadata records holds), and a list grown by APPEND costs what its items do: 100k items in
/// one value are refused whole; lists grown request by request up to the bound are exact.
#[tokio::test]
async fn config_values_are_bounded_as_kafkas_strings_and_list_edits_are_exact() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "orders", 1).await, 0);
    let invalid = ResponseError::InvalidRequest.code();
    let huge = "x".repeat(19 << 20);
    assert_eq!(
        create_with(&mut client, "huge", &[("compression.type", &huge)])
            .await
            .0,
        invalid
    );
    assert_eq!(
        set_config(&mut client, "orders", "compression.type", &huge).await,
        invalid
    );
    let items: Vec<String> = (0..100_000).map(|i| format!("{i}:1")).collect();
    assert_eq!(
        edit_list(&mut client, "orders", 2, &items.join(","))
            .await
            .0,
        invalid
    );
    assert_eq!(config_of(&mut client, "orders", THROTTLED).await.0, "");
    // 100 items a request while the list stays within the bound, then one past it.
    let mut appended = Vec::new();
    for chunk in items.chunks(100) {
        let (error, message) = edit_list(&mut client, "orders", 2, &chunk.join(",")).await;
        let joined_len = appended
            .iter()
            .chain(chunk)
            .map(|i: &String| i.len() + 1)
            .sum::<usize>()
            - 1;
        if joined_len > 32_767 {
            assert_eq!(error, invalid, "{joined_len}");
            assert!(message.unwrap().contains("32767 bytes"));
            break;
        }
        assert_eq!(error, 0, "{joined_len}");
        appended.extend_from_slice(chunk);
    }
    assert_eq!(
        config_of(&mut client, "orders", THROTTLED).await.0,
        appended.join(",")
    );
    // Subtracting every other item leaves the rest in order.
    let odd: Vec<String> = appended.iter().skip(1).step_by(2).cloned().collect();
    assert_eq!(
        edit_list(&mut client, "orders", 3, &odd.join(",")).await.0,
        0
    );
    let even: Vec<String> = appended.iter().step_by(2).cloned().collect();
    assert_eq!(
        config_of(&mut client, "orders", THROTTLED).await.0,
        even.join(",")
    );
}

/// CreateTopics v5+ answers each created topic's configs as DescribeConfigs lists them
/// (KIP-525), validate_only too; `remote.storage.enable=true` is refused as by a Kafka without
/// tiered storage.
#[tokio::test]
async fn create_topics_v5_answers_the_effective_configs_and_refuses_remote_storage() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let request = |name: &str, validate_only: bool| {
        CreateTopicsRequest::default()
            .with_validate_only(validate_only)
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic_name(name))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("1000")))])])
    };
    for (name, validate_only) in [("dry", true), ("orders", false)] {
        let created = client
            .call(&request(name, validate_only), 7)
            .await
            .topics
            .remove(0);
        assert_eq!(created.error_code, 0);
        let answered: Vec<(String, String, i8)> = created
            .configs
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.clone().unwrap().to_string(),
                    c.config_source,
                )
            })
            .collect();
        assert!(answered.contains(&("retention.ms".into(), "1000".into(), 1)));
        assert!(answered.contains(&("cleanup.policy".into(), "delete".into(), 5)));
        if !validate_only {
            let described: Vec<(String, String, i8)> =
                client.call(&describe(name), 4).await.results[0]
                    .configs
                    .iter()
                    .map(|c| {
                        (
                            c.name.to_string(),
                            c.value.clone().unwrap().to_string(),
                            c.config_source,
                        )
                    })
                    .collect();
            assert_eq!(answered, described);
        }
    }
    let (code, message) =
        create_with(&mut client, "tiered", &[("remote.storage.enable", "true")]).await;
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert_eq!(
        message,
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
    );
    assert_eq!(
        create_with(&mut client, "local", &[("remote.storage.enable", "false")])
            .await
            .0,
        0
    );
    assert_eq!(
        set_config(&mut client, "local", "remote.storage.enable", "TRUE").await,
        ResponseError::InvalidConfig.code()
    );
}

/// `min.compaction.lag.ms`: the cleaner leaves records younger than the lag, by their
/// timestamp, and cleans them once they are older.
#[tokio::test]
async fn min_compaction_lag_ms_keeps_young_records_from_the_cleaner() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let configs = [
        ("cleanup.policy", "compact"),
        ("min.compaction.lag.ms", "100000"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(create_with(&mut client, "lagging", &configs).await.0, 0);
    let updates = keyed(&[
        (Some("a"), Some("1"), 1_000),
        (Some("a"), Some("2"), 1_000),
        (Some("a"), Some("3"), 1_000),
    ]);
    assert_eq!(
        produce(&mut client, "lagging", 0, updates, 9)
            .await
            .error_code,
        0
    );
    // A later batch, so that the first is not the active end of the log.
    let later = keyed(&[(Some("b"), Some("1"), 1_000)]);
    assert_eq!(
        produce(&mut client, "lagging", 0, later, 9)
            .await
            .error_code,
        0
    );
    assert_eq!(broker.maintain_logs(50_000).1.records_removed, 0);
    assert_eq!(read_all(&mut client, "lagging", 0).await.len(), 4);
    assert_eq!(broker.maintain_logs(200_000).1.records_removed, 2);
    let offsets = read_offsets(&mut client, "lagging").await;
    assert_eq!(offsets, vec![2, 3]);
}

/// `min.cleanable.dirty.ratio`: a log cleaned once is cleaned again only when that share of it
/// is dirty.
#[tokio::test]
async fn min_cleanable_dirty_ratio_decides_when_a_log_is_cleaned_again() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let configs = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.99"),
    ];
    assert_eq!(create_with(&mut client, "ratio", &configs).await.0, 0);
    let values: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    for (i, value) in values.iter().enumerate() {
        let key = format!("k{i}");
        let one = keyed(&[(Some(key.as_str()), Some(value.as_str()), 1_000)]);
        assert_eq!(produce(&mut client, "ratio", 0, one, 9).await.error_code, 0);
    }
    // Everything is dirty at first: cleaned, nothing to drop (every key once).
    assert_eq!(broker.maintain_logs(10_000).1.records_removed, 0);
    for value in ["x", "y"] {
        let update = keyed(&[(Some("k0"), Some(value), 1_000)]);
        assert_eq!(
            produce(&mut client, "ratio", 0, update, 9).await.error_code,
            0
        );
    }
    // 2 of 22 batches dirty: below 0.99, left alone.
    assert_eq!(broker.maintain_logs(10_000).1.records_removed, 0);
    assert_eq!(read_all(&mut client, "ratio", 0).await.len(), 22);
    assert_eq!(
        set_config(&mut client, "ratio", "min.cleanable.dirty.ratio", "0.05").await,
        0
    );
    // k0's first two values go; its last stays.
    assert_eq!(broker.maintain_logs(10_000).1.records_removed, 2);
    let offsets = read_offsets(&mut client, "ratio").await;
    assert_eq!(offsets, (1..20).chain([21]).collect::<Vec<i64>>());
}

/// `max.compaction.lag.ms`: a log whose earliest dirty record is older than the lag is cleaned
/// whatever its dirty ratio (Kafka's `LogCleanerManager.maxCompactionDelay`, which makes it
/// `needCompactionNow`).
#[tokio::test]
async fn max_compaction_lag_ms_cleans_a_log_below_its_dirty_ratio() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let configs = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.99"),
        ("max.compaction.lag.ms", "5000"),
    ];
    assert_eq!(create_with(&mut client, "overdue", &configs).await.0, 0);
    let values: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    for (i, value) in values.iter().enumerate() {
        let key = format!("k{i}");
        let one = keyed(&[(Some(key.as_str()), Some(value.as_str()), 1_000)]);
        assert_eq!(
            produce(&mut client, "overdue", 0, one, 9).await.error_code,
            0
        );
    }
    assert_eq!(broker.maintain_logs(1_000).1.records_removed, 0);
    for (value, timestamp) in [("x", 3_000), ("y", 4_000)] {
        let update = keyed(&[(Some("k0"), Some(value), timestamp)]);
        assert_eq!(
            produce(&mut client, "overdue", 0, update, 9)
                .await
                .error_code,
            0
        );
    }
    // 2 of 22 batches dirty, below 0.99; the earliest, stamped 3000, is not 5000 ms old yet.
    assert_eq!(broker.maintain_logs(8_000).1.records_removed, 0);
    assert_eq!(read_all(&mut client, "overdue", 0).await.len(), 22);
    // Now it is: cleaned although the ratio is still below.
    assert_eq!(broker.maintain_logs(8_001).1.records_removed, 2);
    let offsets = read_offsets(&mut client, "overdue").await;
    assert_eq!(offsets, (1..20).chain([21]).collect::<Vec<i64>>());
}
