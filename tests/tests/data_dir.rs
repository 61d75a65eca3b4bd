//! `--data-dir` recovery, one defect per test: producer ids and the cluster id across restarts,
//! topics that cannot be read, a missing partition, a corrupt batch in the middle of a file, and
//! retention applied to the files; and large synced batches, whose writeback starts as they are
//! written, read back whole.

use std::path::{Path, PathBuf};

use broker::group_commit::FlushDefaults;
use bytes::Bytes;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tests::*;

async fn init_producer(client: &mut RawClient) -> (i64, i16) {
    let init = client
        .call(
            &InitProducerIdRequest::default().with_transactional_id(None),
            4,
        )
        .await;
    assert_eq!(init.error_code, 0);
    (init.producer_id.0, init.producer_epoch)
}

async fn cluster_id(client: &mut RawClient) -> String {
    let metadata = client
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    metadata.cluster_id.expect("a cluster id").to_string()
}

/// Every record of one partition from offset 0: `(offset, value)`.
async fn read_values(client: &mut RawClient, topic: &str, partition: i32) -> Vec<(i64, String)> {
    let response = client
        .call(&fetch_request(topic, partition, 0, 0), 12)
        .await;
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch {topic}-{partition}");
    decode_records(p.records.as_ref().unwrap())
        .into_iter()
        .map(|(offset, _, value)| (offset, value))
        .collect()
}

/// The files of one partition, whatever the layout: `N.log` or `N-<base offset>.log`.
fn partition_files(topic_dir: &Path, partition: i32) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(topic_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name == format!("{partition}.log")
                || (name.starts_with(&format!("{partition}-")) && name.ends_with(".log"))
        })
        .collect();
    files.sort();
    files
}

fn quarantined(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("@quarantine"))
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn a_new_producer_after_a_restart_gets_a_new_id_and_its_records_are_stored() {
    let dir = data_dir("producer-ids");
    let (first_id, first_cluster);
    {
        let broker = start_broker(data_dir_config(&dir)).await;
        let mut client = RawClient::connect(broker.addr()).await;
        assert_eq!(create_topic(&mut client, "orders", 1).await, 0);
        let (id, epoch) = init_producer(&mut client).await;
        first_id = id;
        first_cluster = cluster_id(&mut client).await;
        let stamp = ProducerStamp {
            id,
            epoch,
            base_sequence: 0,
        };
        let batch = idempotent_batch(&[(None, "before", 1)], stamp);
        let p = produce(&mut client, "orders", 0, batch, 9).await;
        assert_eq!((p.error_code, p.base_offset), (0, 0));
        broker.shutdown().await;
    }
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(cluster_id(&mut client).await, first_cluster);
    let (id, epoch) = init_producer(&mut client).await;
    assert_ne!(id, first_id, "a producer id is never handed out twice");
    let stamp = ProducerStamp {
        id,
        epoch,
        base_sequence: 0,
    };
    let batch = idempotent_batch(&[(None, "after", 2)], stamp);
    let p = produce(&mut client, "orders", 0, batch, 9).await;
    assert_eq!((p.error_code, p.base_offset), (0, 1));
    assert_eq!(
        read_values(&mut client, "orders", 0).await,
        vec![(0, "before".into()), (1, "after".into())]
    );
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_topic_that_cannot_be_read_is_quarantined_and_the_others_are_served() {
    let dir = data_dir("quarantine");
    {
        let broker = start_broker(data_dir_config(&dir)).await;
        let mut client = RawClient::connect(broker.addr()).await;
        assert_eq!(create_topic(&mut client, "good", 1).await, 0);
        assert_eq!(create_topic(&mut client, "emptied", 2).await, 0);
        let p = produce(&mut client, "good", 0, values(2), 9).await;
        assert_eq!(p.error_code, 0);
        broker.shutdown().await;
    }
    // What a kill -9 in the middle of writing topic.meta left before creation was atomic.
    std::fs::write(dir.join("emptied").join("topic.meta"), "").unwrap();
    // A folder with a topic's name and nothing in it.
    std::fs::create_dir_all(dir.join("bare")).unwrap();
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let names: Vec<String> = broker
        .state()
        .topics
        .all()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, vec!["good".to_string()]);
    assert_eq!(read_values(&mut client, "good", 0).await.len(), 2);
    let moved = quarantined(&dir);
    assert_eq!(moved.len(), 2, "{moved:?}");
    assert!(moved[0].starts_with("bare."), "{moved:?}");
    assert!(moved[1].starts_with("emptied."), "{moved:?}");
    // The names are free again: no TOPIC_ALREADY_EXISTS for a topic that is not served.
    assert_eq!(create_topic(&mut client, "emptied", 2).await, 0);
    assert_eq!(create_topic(&mut client, "bare", 1).await, 0);
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_missing_partition_quarantines_its_topic_instead_of_shrinking_it() {
    let dir = data_dir("missing-partition");
    {
        let broker = start_broker(data_dir_config(&dir)).await;
        let mut client = RawClient::connect(broker.addr()).await;
        assert_eq!(create_topic(&mut client, "orders", 3).await, 0);
        for partition in 0..3 {
            let p = produce(&mut client, "orders", partition, values(3), 9).await;
            assert_eq!(p.error_code, 0);
        }
        broker.shutdown().await;
    }
    let topic_dir = dir.join("orders");
    for file in partition_files(&topic_dir, 1) {
        std::fs::remove_file(file).unwrap();
    }
    let sizes: Vec<u64> = [0, 2]
        .iter()
        .flat_map(|p| partition_files(&topic_dir, *p))
        .map(|f| std::fs::metadata(f).unwrap().len())
        .collect();
    let broker = start_broker(data_dir_config(&dir)).await;
    assert!(
        broker.state().topics.get("orders").is_none(),
        "a topic missing a partition is not served with fewer partitions"
    );
    let moved = quarantined(&dir);
    assert_eq!(moved.len(), 1, "{moved:?}");
    // The surviving partitions are kept byte for byte.
    let kept = dir.join("@quarantine").join(&moved[0]);
    let kept_sizes: Vec<u64> = [0, 2]
        .iter()
        .flat_map(|p| partition_files(&kept, *p))
        .map(|f| std::fs::metadata(f).unwrap().len())
        .collect();
    assert_eq!(kept_sizes, sizes);
    assert!(sizes.iter().all(|s| *s > 0));
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_corrupt_batch_in_the_middle_is_skipped_and_the_file_kept() {
    let dir = data_dir("corrupt-middle");
    let batches: Vec<Bytes> = (0..3)
        .map(|b| {
            let values: Vec<String> = (0..20).map(|i| format!("b{b}-{i}")).collect();
            let records: Vec<TestRecord<'_>> =
                values.iter().map(|v| (None, v.as_str(), 1000)).collect();
            batch(&records, kafka_protocol::records::Compression::None)
        })
        .collect();
    {
        let broker = start_broker(data_dir_config(&dir)).await;
        let mut client = RawClient::connect(broker.addr()).await;
        assert_eq!(create_topic(&mut client, "orders", 1).await, 0);
        for (i, b) in batches.iter().enumerate() {
            let p = produce(&mut client, "orders", 0, b.clone(), 9).await;
            assert_eq!((p.error_code, p.base_offset), (0, 20 * i as i64));
        }
        broker.shutdown().await;
    }
    let files = partition_files(&dir.join("orders"), 0);
    assert_eq!(files.len(), 1);
    let mut content = std::fs::read(&files[0]).unwrap();
    let length = content.len();
    // One flipped bit in the last record of the second batch: its CRC no longer matches.
    let second_end = batches[0].len() + batches[1].len();
    content[second_end - 2] ^= 0x10;
    std::fs::write(&files[0], &content).unwrap();

    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let got = read_values(&mut client, "orders", 0).await;
    let offsets: Vec<i64> = got.iter().map(|(o, _)| *o).collect();
    let expected: Vec<i64> = (0..20).chain(40..60).collect();
    assert_eq!(offsets, expected, "served around the corrupt batch");
    assert_eq!(got[20].1, "b2-0");
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().len(),
        length as u64,
        "nothing cut from the file"
    );
    // New records continue after the last readable one, in a file of their own.
    let p = produce(&mut client, "orders", 0, values(1), 9).await;
    assert_eq!((p.error_code, p.base_offset), (0, 60));
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The batch [`fill_small_segments`] produces: one record of a 2,000-byte value.
fn small_segments_batch() -> Bytes {
    let value = "x".repeat(2000);
    batch(
        &[(None, value.as_str(), 1)],
        kafka_protocol::records::Compression::None,
    )
}

/// Creates topic `logs`, one partition keeping 40,000 bytes in segments of 10,000, and produces
/// `count` of [`small_segments_batch`] to it, at offsets 0 to `count` - 1.
async fn fill_small_segments(client: &mut RawClient, count: i64) {
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name("logs"))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.bytes"))
                .with_value(Some(StrBytes::from_static_str("40000"))),
            // Kafka refuses segment.bytes below 1 MiB; its tests (and ours) go below with
            // internal.segment.bytes.
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("internal.segment.bytes"))
                .with_value(Some(StrBytes::from_static_str("10000"))),
        ])]);
    assert_eq!(client.call(&create, 5).await.topics[0].error_code, 0);
    let one = small_segments_batch();
    for i in 0..count {
        let p = produce(client, "logs", 0, one.clone(), 9).await;
        assert_eq!((p.error_code, p.base_offset), (0, i));
    }
}

#[tokio::test]
async fn retention_bytes_deletes_whole_old_segments_on_disk() {
    let dir = data_dir("retention-files");
    let topic_dir = dir.join("logs");
    // 100 batches of 2,000-byte values; segments of 10,000 bytes; 40,000 bytes retained.
    let batch_len = small_segments_batch().len() as u64;
    let disk = |dir: &Path| -> u64 {
        partition_files(dir, 0)
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum()
    };
    let start;
    {
        let broker = start_broker(data_dir_config(&dir)).await;
        let mut client = RawClient::connect(broker.addr()).await;
        fill_small_segments(&mut client, 100).await;
        // Four batches fit in a segment; the log keeps old segments while it holds 40,000 bytes
        // without them, so four whole segments and the active one (of full segments) remain.
        let per_segment = 10_000 / batch_len;
        assert_eq!(per_segment, 4);
        start = list_offset(&mut client, "logs", 0, -2).await.2;
        assert_eq!(start, 100 - 4 * per_segment as i64 - 4);
        assert_eq!(disk(&topic_dir), (100 - start as u64) * batch_len);
        assert_eq!(partition_files(&topic_dir, 0).len(), 5);
        broker.shutdown().await;
    }
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(list_offset(&mut client, "logs", 0, -2).await.2, start);
    assert_eq!(list_offset(&mut client, "logs", 0, -1).await.2, 100);
    assert_eq!(
        broker
            .state()
            .topics
            .get("logs")
            .unwrap()
            .partition(0)
            .unwrap()
            .size_bytes() as u64,
        (100 - start as u64) * batch_len
    );
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A broker on `dir` that syncs each append before it answers (`--log-flush-interval-messages 1`).
fn synced_config(dir: &Path) -> BrokerConfig {
    BrokerConfig {
        log_flush: FlushDefaults {
            messages: Some(1),
            ms: None,
        },
        ..data_dir_config(dir)
    }
}

/// A partition synced before each answer writes zeros ahead in its active segment: the restart's
/// retention pass, made before any file is read, must not count them as data.
#[tokio::test]
async fn a_restart_keeps_the_segments_retention_kept_when_appends_were_synced() {
    let dir = data_dir("retention-synced");
    let config = || synced_config(&dir);
    // Segments of four batches, 40,000 bytes (19 batches and some) retained. After 97 batches
    // the log holds five whole segments and one batch in the active one: without the oldest
    // of them it would hold 17 batches, less than retention.bytes.
    let start;
    {
        let broker = start_broker(config()).await;
        let mut client = RawClient::connect(broker.addr()).await;
        fill_small_segments(&mut client, 97).await;
        start = list_offset(&mut client, "logs", 0, -2).await.2;
        assert_eq!(start, 97 - 5 * 4 - 1);
        broker.shutdown().await;
    }
    let broker = start_broker(config()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(list_offset(&mut client, "logs", 0, -2).await.2, start);
    assert_eq!(list_offset(&mut client, "logs", 0, -1).await.2, 97);
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A partition synced before each answer starts the writeback of each large batch as it writes
/// it, and writes no zeros after it: each batch is read back whole after a restart, and the
/// segment file holds exactly the batches.
#[tokio::test]
async fn large_synced_batches_are_stored_whole_with_nothing_written_after_them() {
    let dir = data_dir("large-synced");
    let config = || synced_config(&dir);
    let values: Vec<String> = (0..6).map(|i| format!("{i}").repeat(100_000)).collect();
    let batches: Vec<Bytes> = values
        .chunks(2)
        .map(|pair| {
            let records = [(None, pair[0].as_str(), 1), (None, pair[1].as_str(), 1)];
            batch(&records, kafka_protocol::records::Compression::None)
        })
        .collect();
    assert!(batches.iter().all(|b| b.len() > 64 << 10), "large batches");
    {
        let broker = start_broker(config()).await;
        let mut client = RawClient::connect(broker.addr()).await;
        let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(topic_name("big"))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
        assert_eq!(client.call(&create, 5).await.topics[0].error_code, 0);
        for (i, one) in batches.iter().enumerate() {
            let p = produce(&mut client, "big", 0, one.clone(), 9).await;
            assert_eq!((p.error_code, p.base_offset), (0, 2 * i as i64));
        }
        broker.shutdown().await;
    }
    let stored: u64 = batches.iter().map(|b| b.len() as u64).sum();
    let files = partition_files(&dir.join("big"), 0);
    assert_eq!(files.len(), 1);
    assert_eq!(std::fs::metadata(&files[0]).unwrap().len(), stored);
    let broker = start_broker(config()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let expected: Vec<(i64, String)> = (0..).zip(values).collect();
    assert_eq!(read_values(&mut client, "big", 0).await, expected);
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
