//! The log cleaner with a dedupe buffer smaller than the log's keys (issue 29, item 4): it
//! cleans in passes, each building its map from where the last one stopped and cleaning from
//! the log start to where the map ends, until each key has its last record only, in memory and
//! on disk, where a segment it empties is deleted. (Each pass built its map from the log start
//! again, so a log with more keys than the buffer holds was never cleaned past its first
//! batches, and emptied segments stayed.)

use std::path::Path;

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};
use tests::*;

async fn create_compacted(client: &mut RawClient, extra: &[(&str, &str)]) {
    let mut configs = vec![
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    configs.extend_from_slice(extra);
    let created = create_topic_with(client, "accounts", &configs).await;
    assert_eq!(created.error_code, 0);
}

/// Twelve batches of two records: keys k0 k1, then k2 k3, and so on (offsets 0 to 23).
async fn produce_updates(client: &mut RawClient) {
    for i in 0..12 {
        let keys = [format!("k{}", (2 * i) % 4), format!("k{}", (2 * i + 1) % 4)];
        let value = format!("v{i}");
        let records: Vec<MaybeValue<'_>> = keys
            .iter()
            .map(|k| (Some(k.as_str()), Some(value.as_str()), 1_000))
            .collect();
        let batch: Bytes = records_batch(&records, Compression::None, None, false);
        assert_eq!(produce(client, "accounts", 0, batch, 9).await.error_code, 0);
    }
}

/// Every record a fetch of "accounts" from offset 0 returns.
async fn records_left(client: &mut RawClient) -> Vec<Record> {
    let response = client.call(&fetch_request("accounts", 0, 0, 0), 12).await;
    let mut data = response.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    RecordBatchDecoder::decode_all(&mut data)
        .unwrap()
        .into_iter()
        .flat_map(|b| b.records)
        .collect()
}

async fn offsets_left(client: &mut RawClient) -> Vec<i64> {
    records_left(client)
        .await
        .iter()
        .map(|r| r.offset)
        .collect()
}

/// When the cleaner runs (every record is older than any lag).
const NOW_MS: i64 = 10_000_000_000_000;

/// Cleaner passes until one finds nothing to do; how many did something.
fn clean_until_done(broker: &Broker) -> usize {
    (0..50)
        .take_while(|_| broker.maintain_logs(NOW_MS).1.batches_read > 0)
        .count()
}

/// A buffer for two keys (each costs the map 32 bytes) in a log of four.
const TWO_KEYS: usize = 64;

#[tokio::test]
async fn a_full_dedupe_buffer_cleans_in_passes_in_memory() {
    let broker = start_broker(BrokerConfig {
        log_cleaner_dedupe_buffer_bytes: TWO_KEYS,
        ..BrokerConfig::default()
    })
    .await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_compacted(&mut client, &[]).await;
    produce_updates(&mut client).await;
    // One batch's keys a pass.
    assert_eq!(clean_until_done(&broker), 12);
    // The last k0 k1 (batch 10) and the last k2 k3 (batch 11).
    assert_eq!(offsets_left(&mut client).await, vec![20, 21, 22, 23]);
}

#[tokio::test]
async fn a_full_dedupe_buffer_cleans_in_passes_on_disk() {
    let dir = data_dir("cleaner-passes");
    let broker = start_broker(BrokerConfig {
        log_cleaner_dedupe_buffer_bytes: TWO_KEYS,
        ..data_dir_config(&dir)
    })
    .await;
    let mut client = RawClient::connect(broker.addr()).await;
    // Three batches a segment: segments at 0, 6, 12 closed, 18 the active one.
    create_compacted(&mut client, &[("internal.segment.bytes", "300")]).await;
    produce_updates(&mut client).await;
    assert_eq!(segment_files(&dir), 4);
    // One segment a pass (a segment's keys always fit, as in Kafka).
    assert_eq!(clean_until_done(&broker), 3);
    // Past `file.delete.delay.ms` (60 s), the replaced files are gone.
    broker.maintain_logs(NOW_MS + 60_000);
    // The segment at 6 is emptied and deleted; the one at 0 too is empty but stays, as the
    // log start a restart reads.
    assert_eq!(segment_files(&dir), 3);
    // Below the active segment, the last k2 k3 (batch 7) and k0 k1 (batch 8); the active
    // segment is never cleaned.
    assert_eq!(
        offsets_left(&mut client).await,
        vec![14, 15, 16, 17, 18, 19, 20, 21, 22, 23]
    );
    drop(broker);
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(
        offsets_left(&mut client).await,
        vec![14, 15, 16, 17, 18, 19, 20, 21, 22, 23]
    );
    assert_eq!(list_offset(&mut client, "accounts", 0, -2).await.2, 0);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A topic's `file.delete.delay.ms`: the files of segments the cleaner replaced stay that long
/// (a fetch that found a batch in one a moment before still reads it), then go.
#[tokio::test]
async fn replaced_segment_files_stay_for_the_topics_file_delete_delay_ms() {
    let dir = data_dir("cleaner-file-delete-delay");
    let broker = start_broker(data_dir_config(&dir)).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let configs = [
        ("internal.segment.bytes", "300"),
        ("file.delete.delay.ms", "1000"),
    ];
    create_compacted(&mut client, &configs).await;
    produce_updates(&mut client).await;
    assert_eq!(segment_files(&dir), 4);
    assert_eq!(clean_until_done(&broker), 1);
    // Segments 0, 6 and 12 replaced: 0 by an empty copy (the log start), 12 by a copy with
    // the last k2 k3 and k0 k1 below the active segment, 6 emptied and gone; their three old
    // files are still there, beside the active segment at 18.
    assert_eq!(segment_files(&dir), 6);
    broker.maintain_logs(NOW_MS + 999);
    assert_eq!(segment_files(&dir), 6);
    broker.maintain_logs(NOW_MS + 1000);
    assert_eq!(segment_files(&dir), 3);
    assert_eq!(
        offsets_left(&mut client).await,
        vec![14, 15, 16, 17, 18, 19, 20, 21, 22, 23]
    );
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Segment files in the data directory, of every generation.
fn segment_files(dir: &std::path::Path) -> usize {
    let mut count = 0;
    for topic in std::fs::read_dir(dir).unwrap() {
        let path = topic.unwrap().path();
        if path.is_dir() {
            count += std::fs::read_dir(&path)
                .unwrap()
                .filter(|f| {
                    f.as_ref()
                        .unwrap()
                        .path()
                        .extension()
                        .is_some_and(|e| e == "log")
                })
                .count();
        }
    }
    count
}

/// Issue 35, item 2: a tombstone stamped long ago is kept for `delete.retention.ms` from the
/// first cleaning that sees it (Kafka's delete horizon, KIP-534), not dropped by its own
/// timestamp; on disk the horizon survives a restart. Each record keeps its timestamp.
async fn a_tombstone_is_kept_until_the_delete_horizon_of_its_first_cleaning(dir: Option<&Path>) {
    const HOUR_MS: i64 = 3_600_000;
    let config = || dir.map_or_else(BrokerConfig::default, data_dir_config);
    let mut broker = start_broker(config()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    // Three batches a segment on disk, so the tombstone's segment closes and can be cleaned.
    let retention = HOUR_MS.to_string();
    let configs = [
        ("delete.retention.ms", retention.as_str()),
        ("internal.segment.bytes", "300"),
    ];
    create_compacted(&mut client, &configs).await;
    // "a" written, then deleted: both stamped at the epoch's first seconds, days before NOW_MS.
    let produce_one = |key: &'static str, value: Option<&'static str>, at: i64| {
        records_batch(&[(Some(key), value, at)], Compression::None, None, false)
    };
    let mut filler = 0;
    let mut dirty_the_log = async |client: &mut RawClient| {
        for _ in 0..3 {
            filler += 1;
            let batch = produce_one("f", Some("v"), 3_000 + filler);
            assert_eq!(produce(client, "accounts", 0, batch, 9).await.error_code, 0);
        }
    };
    for (value, at) in [(Some("1"), 1_000), (None, 2_000)] {
        let batch = produce_one("a", value, at);
        assert_eq!(
            produce(&mut client, "accounts", 0, batch, 9)
                .await
                .error_code,
            0
        );
    }
    dirty_the_log(&mut client).await;
    dirty_the_log(&mut client).await;
    // The first cleaning drops "a"'s value and keeps the delete, with its own timestamp.
    broker.maintain_logs(NOW_MS);
    assert_eq!(tombstone_of_a(&mut client).await, Some((1, 2_000)));
    // Half an hour later, still there; on disk, across a restart too.
    dirty_the_log(&mut client).await;
    broker.maintain_logs(NOW_MS + HOUR_MS / 2);
    assert_eq!(tombstone_of_a(&mut client).await, Some((1, 2_000)));
    if dir.is_some() {
        drop(broker);
        broker = start_broker(config()).await;
        client = RawClient::connect(broker.addr()).await;
        assert_eq!(tombstone_of_a(&mut client).await, Some((1, 2_000)));
    }
    // Once the horizon (the first cleaning's time plus delete.retention.ms) has passed, gone.
    dirty_the_log(&mut client).await;
    broker.maintain_logs(NOW_MS + HOUR_MS);
    assert_eq!(tombstone_of_a(&mut client).await, None);
    drop(broker);
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The offset and timestamp of the delete of key "a", if a fetch still returns it.
async fn tombstone_of_a(client: &mut RawClient) -> Option<(i64, i64)> {
    records_left(client)
        .await
        .into_iter()
        .find(|r| r.key.as_deref() == Some(b"a".as_slice()) && r.value.is_none())
        .map(|r| (r.offset, r.timestamp))
}

#[tokio::test]
async fn a_tombstone_is_kept_until_the_delete_horizon_in_memory() {
    a_tombstone_is_kept_until_the_delete_horizon_of_its_first_cleaning(None).await;
}

#[tokio::test]
async fn a_tombstone_is_kept_until_the_delete_horizon_on_disk_across_a_restart() {
    let dir = data_dir("cleaner-horizon");
    a_tombstone_is_kept_until_the_delete_horizon_of_its_first_cleaning(Some(&dir)).await;
}

/// Every transaction marker a fetch of "t" returns: `(offset, delete horizon)`.
async fn markers_of_t(client: &mut RawClient) -> Vec<(i64, Option<i64>)> {
    let response = client.call(&fetch_request("t", 0, 0, 0), 12).await;
    let data = response.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    protocol::batch::split_batches(data)
        .filter(|(header, _)| header.is_control())
        .map(|(header, _)| (header.base_offset, header.delete_horizon()))
        .collect()
}

/// Kafka's cleaner keeps a transaction marker while a batch of its transaction is left
/// (`CleanedTransactionMetadata.onControlBatchRead`); the first cleaning that finds none stamps
/// the marker with a delete horizon, as a tombstone's batch (`containsMarkerForEmptyTxn`), and
/// a cleaning past it removes the marker; on disk the horizon survives a restart.
async fn a_marker_goes_by_the_delete_horizon_once_its_transaction_is_cleaned(dir: Option<&Path>) {
    const HOUR_MS: i64 = 3_600_000;
    let config = || dir.map_or_else(BrokerConfig::default, data_dir_config);
    let mut broker = start_broker(config()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let retention = HOUR_MS.to_string();
    let configs = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", retention.as_str()),
        ("internal.segment.bytes", "300"),
    ];
    assert_eq!(
        create_topic_with(&mut client, "t", &configs)
            .await
            .error_code,
        0
    );
    let init = init_producer_id(&mut client, Some("writer"), 60_000).await;
    let producer = (init.producer_id.0, init.producer_epoch);
    // "a" committed (offset 0, its marker 1), "b" aborted (offset 2, its marker 3).
    for (sequence, key, commit) in [(0, "a", true), (1, "b", false)] {
        assert_eq!(
            add_partitions_to_txn(&mut client, "writer", producer, &[0], 3).await,
            vec![0]
        );
        let stamp = ProducerStamp {
            id: producer.0,
            epoch: producer.1,
            base_sequence: sequence,
        };
        let batch = records_batch(
            &[(Some(key), Some("1"), 1_000)],
            Compression::None,
            Some(stamp),
            true,
        );
        assert_eq!(produce(&mut client, "t", 0, batch, 9).await.error_code, 0);
        assert_eq!(end_txn(&mut client, "writer", producer, commit).await, 0);
    }
    let mut filler = 0;
    let mut dirty_the_log = async |client: &mut RawClient, key: &str| {
        for _ in 0..4 {
            filler += 1;
            let value = filler.to_string();
            let batch = records_batch(
                &[(Some(key), Some(value.as_str()), 1_000)],
                Compression::None,
                None,
                false,
            );
            assert_eq!(produce(client, "t", 0, batch, 9).await.error_code, 0);
        }
    };
    // "a" written again (offset 4 on), so the committed transaction's record goes.
    dirty_the_log(&mut client, "a").await;
    dirty_the_log(&mut client, "f").await;
    // The first cleaning drops both transactions' records and keeps their markers.
    broker.maintain_logs(NOW_MS);
    assert_eq!(markers_of_t(&mut client).await, vec![(1, None), (3, None)]);
    // The next finds nothing left of them: the markers get the horizon.
    let horizon = NOW_MS + 1 + HOUR_MS;
    dirty_the_log(&mut client, "f").await;
    broker.maintain_logs(NOW_MS + 1);
    let stamped = vec![(1, Some(horizon)), (3, Some(horizon))];
    assert_eq!(markers_of_t(&mut client).await, stamped);
    dirty_the_log(&mut client, "f").await;
    broker.maintain_logs(horizon - 1);
    assert_eq!(markers_of_t(&mut client).await, stamped);
    if dir.is_some() {
        drop(broker);
        broker = start_broker(config()).await;
        client = RawClient::connect(broker.addr()).await;
        assert_eq!(markers_of_t(&mut client).await, stamped);
    }
    dirty_the_log(&mut client, "f").await;
    broker.maintain_logs(horizon);
    assert_eq!(markers_of_t(&mut client).await, vec![]);
    drop(broker);
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test]
async fn a_transaction_marker_goes_by_the_delete_horizon_in_memory() {
    a_marker_goes_by_the_delete_horizon_once_its_transaction_is_cleaned(None).await;
}

#[tokio::test]
async fn a_transaction_marker_goes_by_the_delete_horizon_on_disk_across_a_restart() {
    let dir = data_dir("cleaner-marker-horizon");
    a_marker_goes_by_the_delete_horizon_once_its_transaction_is_cleaned(Some(&dir)).await;
}
