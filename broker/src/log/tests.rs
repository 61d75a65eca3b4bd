//! The partition log's unit tests, and helpers the tests of its submodules share.

use super::*;

use std::time::Duration;

impl PartitionLog {
    /// Bytes of batches held in memory rather than in files.
    pub(crate) fn resident_bytes(&self) -> usize {
        let state = self.state.lock();
        let in_memory = state.batches.iter().filter_map(|b| match &b.stored {
            Stored::Memory(data) => Some(data.len()),
            Stored::File { .. } => None,
        });
        in_memory.sum()
    }
}

/// A minimal valid header for `count` records; the log never reads past the header.
fn batch(count: i32, max_timestamp: i64, filler: usize) -> (Vec<u8>, BatchHeader) {
    let mut bytes = vec![0u8; protocol::batch::HEADER_LEN + filler];
    let len = bytes.len() as i32 - 12;
    bytes[8..12].copy_from_slice(&len.to_be_bytes());
    bytes[16] = 2;
    bytes[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    bytes[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    bytes[57..61].copy_from_slice(&count.to_be_bytes());
    let header = BatchHeader::parse(&bytes).unwrap();
    (bytes, header)
}

/// Sets `retention.bytes` alone (`None`: keep everything), as a topic config would.
pub(crate) fn keep_bytes(log: &PartitionLog, bytes: Option<usize>) {
    log.set_policy(LogPolicy {
        retention_bytes: bytes,
        ..LogPolicy::default()
    });
}

pub(crate) fn append(log: &PartitionLog, count: i32, ts: i64, filler: usize) -> i64 {
    let (mut bytes, _) = batch(count, ts, filler);
    bytes[43..51].copy_from_slice(&(-1i64).to_be_bytes()); // no producer id
    let header = BatchHeader::parse(&bytes).unwrap();
    log.append(&bytes, &header).unwrap().base_offset()
}

#[test]
fn an_idempotent_retry_is_answered_with_the_original_offset_and_not_stored() {
    let log = PartitionLog::new();
    append(&log, 2, 10, 0);
    let (mut bytes, _) = batch(3, 10, 0);
    bytes[43..51].copy_from_slice(&5i64.to_be_bytes()); // producer id 5, epoch 0, sequence 0
    let header = BatchHeader::parse(&bytes).unwrap();
    let first = log.append(&bytes, &header).unwrap();
    assert_eq!((first.base_offset, first.duplicate), (2, false));
    let again = log.append(&bytes, &header).unwrap();
    assert_eq!((again.base_offset, again.duplicate), (2, true));
    assert_eq!(log.offsets().end, 5);
    assert_eq!(log.duplicates_absorbed(), 1);
}

#[test]
fn offsets_are_assigned_contiguously_and_written_into_the_batch() {
    let log = PartitionLog::new();
    assert_eq!(append(&log, 3, 10, 0), 0);
    assert_eq!(append(&log, 2, 20, 0), 3);
    assert_eq!(
        log.offsets(),
        LogOffsets {
            start: 0,
            stable: 5,
            end: 5
        }
    );
    let read = log
        .read(3, usize::MAX, true, Isolation::ReadUncommitted)
        .unwrap();
    let header = BatchHeader::parse(&read.records[0]).unwrap();
    assert_eq!(header.base_offset, 3);
}

#[test]
fn reads_start_at_the_batch_holding_the_offset() {
    let log = PartitionLog::new();
    append(&log, 3, 10, 0);
    append(&log, 3, 20, 0);
    append(&log, 3, 30, 0);
    let read = log
        .read(4, usize::MAX, true, Isolation::ReadUncommitted)
        .unwrap();
    let bases: Vec<i64> = read
        .records
        .iter()
        .map(|b| BatchHeader::parse(b).unwrap().base_offset)
        .collect();
    assert_eq!(bases, vec![3, 6]);
    // The stored batches themselves, not copies.
    let again = log
        .read(4, usize::MAX, true, Isolation::ReadUncommitted)
        .unwrap();
    assert_eq!(again.records[1].as_ptr(), read.records[1].as_ptr());
}

#[test]
fn max_bytes_cuts_between_batches_but_never_returns_nothing() {
    let log = PartitionLog::new();
    append(&log, 1, 10, 100);
    append(&log, 1, 10, 100);
    let one = log
        .read(0, 10, true, Isolation::ReadUncommitted)
        .unwrap()
        .records;
    assert_eq!(one.len(), 1);
    let size = one[0].len();
    assert_eq!(size, protocol::batch::HEADER_LEN + 100);
    assert!(log
        .read(0, 10, false, Isolation::ReadUncommitted)
        .unwrap()
        .records
        .is_empty());
    assert_eq!(
        log.read(0, 2 * size, false, Isolation::ReadUncommitted)
            .unwrap()
            .records
            .len(),
        2
    );
    assert_eq!(
        log.read(0, 2 * size - 1, true, Isolation::ReadUncommitted)
            .unwrap()
            .records
            .len(),
        1
    );
}

#[test]
fn reading_at_the_end_is_empty_and_past_it_is_out_of_range() {
    let log = PartitionLog::new();
    append(&log, 2, 10, 0);
    assert!(log
        .read(2, 1000, true, Isolation::ReadUncommitted)
        .unwrap()
        .records
        .is_empty());
    let err = log
        .read(3, 1000, true, Isolation::ReadUncommitted)
        .unwrap_err();
    assert_eq!(
        err.offsets,
        LogOffsets {
            start: 0,
            stable: 2,
            end: 2
        }
    );
    assert!(log
        .read(-1, 1000, true, Isolation::ReadUncommitted)
        .is_err());
}

#[test]
fn timestamp_lookups_find_the_right_batch() {
    let log = PartitionLog::new();
    append(&log, 2, 100, 0);
    append(&log, 2, 300, 0);
    append(&log, 2, 200, 0);
    assert_eq!(log.first_batch_at_or_after(150).unwrap().base_offset, 2);
    assert_eq!(log.first_batch_at_or_after(50).unwrap().base_offset, 0);
    assert!(log.first_batch_at_or_after(301).is_none());
    assert_eq!(log.max_timestamp_batch().unwrap().base_offset, 2);
}

#[test]
fn retention_drops_the_oldest_batches_and_moves_the_log_start() {
    let log = PartitionLog::new();
    let size = protocol::batch::HEADER_LEN + 100;
    for _ in 0..5 {
        append(&log, 2, 10, 100);
    }
    assert_eq!(log.size_bytes(), 5 * size);
    // Room for two and a half batches: three stay, as Kafka keeps a segment until the log
    // holds retention.bytes without it.
    keep_bytes(&log, Some(2 * size + size / 2));
    assert_eq!(
        log.offsets(),
        LogOffsets {
            start: 4,
            stable: 10,
            end: 10
        }
    );
    assert_eq!(log.size_bytes(), 3 * size);
    let err = log
        .read(3, usize::MAX, true, Isolation::ReadUncommitted)
        .unwrap_err();
    assert_eq!(
        err.offsets,
        LogOffsets {
            start: 4,
            stable: 10,
            end: 10
        }
    );
    assert_eq!(append(&log, 2, 10, 100), 10);
    assert_eq!(
        log.offsets(),
        LogOffsets {
            start: 6,
            stable: 12,
            end: 12
        }
    );
    let read = log
        .read(6, usize::MAX, true, Isolation::ReadUncommitted)
        .unwrap();
    let stored: usize = read.records.iter().map(Bytes::len).sum();
    assert_eq!(stored, 3 * size);
    // A batch larger than the retention stays: the newest batch always does.
    keep_bytes(&log, Some(1));
    assert_eq!(
        log.offsets(),
        LogOffsets {
            start: 10,
            stable: 12,
            end: 12
        }
    );
    keep_bytes(&log, None);
    append(&log, 2, 10, 100);
    assert_eq!(
        log.offsets(),
        LogOffsets {
            start: 10,
            stable: 14,
            end: 14
        }
    );
}

#[tokio::test]
async fn an_append_wakes_a_waiting_reader() {
    let log = std::sync::Arc::new(PartitionLog::new());
    let waiter = {
        let log = log.clone();
        tokio::spawn(async move {
            let notified = log.appended();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if log.offsets().end == 0 {
                notified.await;
            }
            log.offsets().end
        })
    };
    tokio::task::yield_now().await;
    append(&log, 4, 10, 0);
    assert_eq!(waiter.await.unwrap(), 4);
}

// A partition log on disk.

#[test]
fn a_log_on_disk_keeps_only_its_index_in_memory_and_reads_the_files() {
    let dir = std::env::temp_dir().join(format!("disk-read-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Segments of three batches, at most two files open.
    let pool = crate::file_pool::FilePool::new(Some(2));
    let size = protocol::batch::HEADER_LEN + 100;
    let disk = crate::disk_log::DiskLog::create(&pool, &dir, 0, 3 * size as u64).unwrap();
    let log = PartitionLog::on_disk(disk);
    let memory = PartitionLog::new();
    for i in 0..10 {
        assert_eq!(append(&log, 2, 10 * i, 100), 2 * i);
        append(&memory, 2, 10 * i, 100);
    }
    assert_eq!(log.size_bytes(), 10 * size);
    assert_eq!(log.resident_bytes(), 0);
    assert_eq!(memory.resident_bytes(), 10 * size);
    // Across segment boundaries, the bytes are the ones the memory log holds.
    let from_disk = log
        .read(5, usize::MAX, true, Isolation::ReadUncommitted)
        .unwrap()
        .records;
    let from_memory = memory
        .read(5, usize::MAX, true, Isolation::ReadUncommitted)
        .unwrap()
        .records;
    assert_eq!(from_disk.len(), 8);
    assert_eq!(from_disk, from_memory);
    assert_eq!(log.first_batch_at_or_after(35).unwrap().base_offset, 8);
    assert_eq!(log.max_timestamp_batch().unwrap().data, from_memory[7]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh directory for a test's partitions.
fn test_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Partitions `0..count` of one topic in `dir`, sharing one pool and its group commit.
fn disk_partitions(dir: &std::path::Path, count: i32) -> Vec<std::sync::Arc<PartitionLog>> {
    let pool = crate::file_pool::FilePool::new(None);
    (0..count)
        .map(|p| {
            let disk = crate::disk_log::DiskLog::create(&pool, dir, p, 1 << 20).unwrap();
            std::sync::Arc::new(PartitionLog::on_disk(disk))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn flushes_waiting_at_the_same_moment_share_one_sync() {
    let dir = test_dir("group-commit-test");
    let logs = disk_partitions(&dir, 2);
    let commit = logs[0].commit.clone().unwrap();
    for log in &logs {
        for _ in 0..5 {
            append(log, 2, 10, 100);
        }
    }
    // Ten produces of two partitions waiting at once: one round, one sync per file.
    let flushes = logs.iter().flat_map(|log| (0..5).map(|_| log.flush()));
    let results = futures_util::future::join_all(flushes).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!((commit.rounds(), commit.file_syncs()), (1, 2));
    // Nothing new: no sync. Something new: one more, of that file only.
    logs[1].flush().await.unwrap();
    assert_eq!((commit.rounds(), commit.file_syncs()), (1, 2));
    append(&logs[0], 2, 10, 100);
    logs[0].flush().await.unwrap();
    assert_eq!((commit.rounds(), commit.file_syncs()), (2, 3));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(start_paused = true)]
async fn appends_made_while_a_sync_runs_share_the_next_one() {
    let dir = test_dir("group-commit-next-test");
    let logs = disk_partitions(&dir, 2);
    let commit = logs[0].commit.clone().unwrap();
    append(&logs[0], 1, 10, 100);
    let first = {
        let log = logs[0].clone();
        tokio::spawn(async move { log.flush().await })
    };
    // The first round starts (and takes the one append) before anything else is written.
    tokio::task::yield_now().await;
    for log in &logs {
        for _ in 0..3 {
            append(log, 1, 10, 100);
        }
    }
    let flushes = logs.iter().flat_map(|log| (0..3).map(|_| log.flush()));
    let results = futures_util::future::join_all(flushes).await;
    assert!(results.iter().all(Result::is_ok));
    first.await.unwrap().unwrap();
    assert_eq!((commit.rounds(), commit.file_syncs()), (2, 3));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_background_syncs_a_write_once_its_flush_ms_has_passed() {
    let dir = test_dir("group-commit-background-test");
    let logs = disk_partitions(&dir, 1);
    let log = &logs[0];
    log.set_policy(LogPolicy {
        flush_ms: Some(100),
        ..LogPolicy::default()
    });
    let commit = log.commit.clone().unwrap();
    let background = {
        let commit = commit.clone();
        tokio::spawn(async move { commit.run_background().await })
    };
    append(log, 1, 10, 100);
    let ticket = log.state.lock().disk.as_ref().unwrap().ticket;
    tokio::time::sleep(Duration::from_millis(99)).await;
    assert_eq!(commit.rounds(), 0);
    tokio::time::sleep(Duration::from_millis(1)).await;
    commit.ended(ticket).await;
    assert_eq!((commit.rounds(), commit.file_syncs()), (1, 1));
    // Two more writes within the next 100 ms: one more round for both.
    append(log, 1, 10, 100);
    tokio::time::sleep(Duration::from_millis(50)).await;
    append(log, 1, 10, 100);
    let ticket = log.state.lock().disk.as_ref().unwrap().ticket;
    tokio::time::sleep(Duration::from_millis(49)).await;
    assert_eq!(commit.rounds(), 1);
    commit.ended(ticket).await;
    assert_eq!((commit.rounds(), commit.file_syncs()), (2, 2));
    background.abort();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_append_that_reaches_flush_messages_waits_for_the_disk() {
    let dir = test_dir("flush-messages-test");
    let logs = disk_partitions(&dir, 1);
    let log = &logs[0];
    let sync_first = |count| {
        let (mut bytes, _) = batch(count, 10, 100);
        bytes[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        let header = BatchHeader::parse(&bytes).unwrap();
        log.append(&bytes, &header).unwrap().sync_first.is_some()
    };
    // Kafka's default: no answer waits.
    assert!(!sync_first(1000));
    log.set_policy(LogPolicy {
        flush_messages: Some(5),
        ..LogPolicy::default()
    });
    // The 1,000 records appended before count: the first append waits, then every fifth record.
    let waits: Vec<bool> = [2, 2, 1, 4, 1, 10].into_iter().map(sync_first).collect();
    assert_eq!(waits, [true, false, false, true, false, true]);
    log.set_policy(LogPolicy {
        flush_messages: Some(1),
        ..LogPolicy::default()
    });
    assert!(sync_first(1) && sync_first(1));
    // In memory, nothing waits whatever the topic says.
    let memory = PartitionLog::new();
    memory.set_policy(LogPolicy {
        flush_messages: Some(1),
        ..LogPolicy::default()
    });
    let (mut bytes, _) = batch(1, 10, 100);
    bytes[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    let header = BatchHeader::parse(&bytes).unwrap();
    assert!(memory.append(&bytes, &header).unwrap().sync_first.is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_answer_waits_for_the_round_that_covered_its_append_not_a_later_one() {
    let dir = test_dir("group-commit-ticket-test");
    let logs = disk_partitions(&dir, 1);
    let log = &logs[0];
    log.set_policy(LogPolicy {
        flush_messages: Some(1),
        ..LogPolicy::default()
    });
    let commit = log.commit.clone().unwrap();
    let appended = |count| {
        let (mut bytes, _) = batch(count, 10, 100);
        bytes[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        let header = BatchHeader::parse(&bytes).unwrap();
        log.append(&bytes, &header).unwrap().sync_first.unwrap()
    };
    // A connection's first produce is appended and its round synced; the next produce, read
    // while that round ran, is appended before the first answer is sent.
    let first = appended(1);
    commit.wait(first).await.unwrap();
    let second = appended(1);
    assert_eq!((first, second), (1, 2));
    // The first answer needs no second round: one that did would make every answer of a
    // pipelining producer wait for the appends after it.
    log.flush_until(first).await.unwrap();
    assert_eq!(commit.rounds(), 1);
    log.flush_until(second).await.unwrap();
    assert_eq!(commit.rounds(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(start_paused = true)]
async fn with_flush_ms_unset_the_background_syncs_a_write_within_thirty_seconds() {
    let dir = test_dir("group-commit-unset-test");
    let logs = disk_partitions(&dir, 1);
    let log = &logs[0];
    let commit = log.commit.clone().unwrap();
    let background = {
        let commit = commit.clone();
        tokio::spawn(async move { commit.run_background().await })
    };
    // A steady stream of writes: one round in thirty seconds, the kernel's own writeback age,
    // not one after another.
    for _ in 0..10 {
        append(log, 1, 10, 100);
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let ticket = log.state.lock().disk.as_ref().unwrap().ticket;
    assert_eq!(commit.rounds(), 0);
    commit.ended(ticket).await;
    assert_eq!((commit.rounds(), commit.file_syncs()), (1, 1));
    background.abort();
    std::fs::remove_dir_all(&dir).unwrap();
}
