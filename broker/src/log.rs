//! One partition's log: record batches exactly as producers sent them, with only `baseOffset`
//! rewritten, and an offset index over them.
//!
//! Neither append nor read decodes a record: a batch is located by its header, and fetch hands out
//! the stored bytes. Each partition has its own lock, so produce and fetch on different partitions
//! never wait for each other. Without a data directory the batches are kept in memory. With one,
//! each append is written to the partition's segments ([`DiskLog`]) before it becomes visible,
//! only the index stays in memory and reads come from the files ([`Stored`]), and an acks=all
//! produce waits for a sync it shares with the produces waiting at that moment ([`GroupCommit`]).
//!
//! With `retention.bytes`, the oldest batches go once the partition holds more, and the log
//! start offset moves past them: in memory batch by batch, with a data directory whole segments
//! at a time (so a restart starts where the log started). Besides bounding memory, this is what
//! keeps a busy broker fast:
//! the memory of dropped batches is reused for new ones, while a log that only grows must have
//! every new page zeroed by the kernel, which cost half of the broker's time under produce load.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use protocol::batch::{set_base_offset, BatchHeader};
use tracing::debug;

use crate::disk_log::{DiskLog, Recovered};
use crate::group_commit::GroupCommit;
use crate::producer::{SequenceVerdict, SequenceWindows};
use crate::stored::{self, Stored};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// A stored batch and what the index needs to find it without reading it.
#[derive(Debug, Clone)]
pub struct StoredBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub data: Bytes,
}

/// What the index holds of a batch: enough to find it without reading it, and where it is.
#[derive(Debug, Clone)]
struct IndexedBatch {
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    len: usize,
    stored: Stored,
}

/// Log start (earliest readable offset) and log end (next offset to assign, the high watermark of
/// a single replica).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsets {
    pub start: i64,
    pub end: i64,
}

/// What a read returns: the stored batches from the one holding the offset, and the offsets at
/// the time of the read.
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// The stored batches themselves (each a reference count, not a copy), in offset order;
    /// empty when there is nothing to read.
    pub records: Vec<Bytes>,
    pub offsets: LogOffsets,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("offset {requested} is outside the log [{}, {}]", .offsets.start, .offsets.end)]
pub struct OffsetOutOfRange {
    pub requested: i64,
    pub offsets: LogOffsets,
}

#[derive(Debug, Default)]
struct LogState {
    /// In offset order; `batches[i].last_offset < batches[i + 1].base_offset`.
    batches: VecDeque<IndexedBatch>,
    start: i64,
    end: i64,
    /// Sum of stored batch sizes.
    bytes: usize,
    /// Idempotent producers' sequence windows; checked and updated under the same lock as the
    /// append, so a retry racing its original cannot slip in twice.
    sequences: SequenceWindows,
    /// Retries of idempotent batches answered without appending.
    duplicates_absorbed: u64,
    /// Where appends are written when the broker has a data directory (boxed: an in-memory
    /// partition pays one pointer for it, see `tests/tests/partition_memory.rs`).
    disk: Option<Box<DiskLog>>,
    /// Kafka's `retention.bytes`; `None` keeps everything.
    retention_bytes: Option<usize>,
}

impl LogState {
    /// Drops the oldest batches while the log would still hold `retention.bytes` without them,
    /// the condition on which Kafka deletes a segment. In memory a batch is a segment and the
    /// newest batch always stays; on disk whole segments go, and the active one stays.
    fn apply_retention(&mut self) {
        let Some(keep) = self.retention_bytes else {
            return;
        };
        if let Some(disk) = &mut self.disk {
            if let Some(first) = disk.apply_retention(keep) {
                while self.batches.front().is_some_and(|b| b.base_offset < first) {
                    if let Some(oldest) = self.batches.pop_front() {
                        self.bytes -= oldest.len;
                    }
                }
                self.start = self.start.max(first);
            }
            return;
        }
        while self.batches.len() > 1 && self.bytes - self.batches[0].len >= keep {
            if let Some(oldest) = self.batches.pop_front() {
                self.bytes -= oldest.len;
            }
        }
        if let Some(first) = self.batches.front() {
            self.start = self.start.max(first.base_offset);
        }
    }
}

/// Where an append went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Written at this base offset.
    New(i64),
    /// An idempotent retry of a batch already written at this base offset; nothing was written.
    Duplicate(i64),
}

impl Appended {
    pub fn base_offset(self) -> i64 {
        match self {
            Appended::New(offset) | Appended::Duplicate(offset) => offset,
        }
    }
}

#[derive(Debug, Default)]
pub struct PartitionLog {
    state: Mutex<LogState>,
    /// Woken on every append, so a parked fetch answers as soon as data arrives.
    appended: Notify,
    /// The syncs of acks=all produces, shared by those waiting at the same moment; only a log
    /// on disk has them, and an empty in-memory partition allocates nothing for it.
    commit: Option<GroupCommit>,
}

impl PartitionLog {
    /// A log kept in memory only.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new, empty log that also writes to `disk`.
    pub fn on_disk(disk: DiskLog) -> Self {
        let log = Self {
            commit: Some(GroupCommit::default()),
            ..Self::default()
        };
        log.state.lock().disk = Some(Box::new(disk));
        log
    }

    /// A log read back from its segments: batches, offsets, and the idempotent producers'
    /// sequence windows, so a retry after a restart is still recognised.
    pub fn recovered(recovered: Recovered) -> Self {
        let log = Self {
            commit: Some(GroupCommit::default()),
            ..Self::default()
        };
        {
            let mut state = log.state.lock();
            for (header, stored) in recovered.batches {
                if header.producer_id >= 0 {
                    state.sequences.record(&header, header.base_offset);
                }
                let len = header.total_len() as usize;
                state.bytes += len;
                state.batches.push_back(IndexedBatch {
                    base_offset: header.base_offset,
                    last_offset: header.last_offset(),
                    max_timestamp: header.max_timestamp,
                    len,
                    stored,
                });
            }
            state.start = recovered.start;
            state.end = recovered.end;
            state.disk = Some(Box::new(recovered.disk));
        }
        log
    }

    pub fn offsets(&self) -> LogOffsets {
        let state = self.state.lock();
        LogOffsets {
            start: state.start,
            end: state.end,
        }
    }

    /// Sets Kafka's `retention.bytes` (`None`: keep everything) and applies it at once.
    pub fn set_retention_bytes(&self, bytes: Option<usize>) {
        let mut state = self.state.lock();
        state.retention_bytes = bytes;
        state.apply_retention();
    }

    /// Bytes stored in this partition.
    pub fn size_bytes(&self) -> usize {
        self.state.lock().bytes
    }

    /// Retries absorbed by the idempotence check so far.
    pub fn duplicates_absorbed(&self) -> u64 {
        self.state.lock().duplicates_absorbed
    }

    /// Appends a batch already validated by the caller. The bytes are copied once, so the stored
    /// batch does not keep the whole request frame alive. A batch of an idempotent producer is
    /// first checked against its sequence window. A file-backed log has written the batch when
    /// this returns; [`flush`](Self::flush) waits until it is on disk.
    pub fn append(&self, batch: &[u8], header: &BatchHeader) -> Result<Appended, ResponseError> {
        let mut data = BytesMut::from(batch);
        let idempotent = header.producer_id >= 0;
        let base_offset = {
            let mut state = self.state.lock();
            if idempotent {
                if let SequenceVerdict::Duplicate { base_offset } = state.sequences.check(header)? {
                    state.duplicates_absorbed += 1;
                    debug!(
                        producer_id = header.producer_id,
                        epoch = header.producer_epoch,
                        sequence = header.base_sequence,
                        base_offset,
                        "duplicate batch absorbed"
                    );
                    return Ok(Appended::Duplicate(base_offset));
                }
            }
            let base_offset = state.end;
            set_base_offset(&mut data, base_offset);
            let len = data.len();
            let stored = match &mut state.disk {
                Some(disk) if disk.failed => return Err(ResponseError::KafkaStorageError),
                // Written before it is visible: nothing a fetch returned can vanish when the
                // process dies (the kernel has it; acks=all also waits for the disk).
                Some(disk) => match disk.append(&data, base_offset) {
                    Ok(stored) => stored,
                    Err(e) => {
                        tracing::error!("partition write failed, no more appends: {e}");
                        disk.failed = true;
                        return Err(ResponseError::KafkaStorageError);
                    }
                },
                None => Stored::Memory(data.freeze()),
            };
            let last_offset = base_offset + header.last_offset_delta as i64;
            state.bytes += len;
            state.batches.push_back(IndexedBatch {
                base_offset,
                last_offset,
                max_timestamp: header.max_timestamp,
                len,
                stored,
            });
            state.end = last_offset + 1;
            state.apply_retention();
            if idempotent {
                state.sequences.record(header, base_offset);
            }
            base_offset
        };
        self.appended.notify_waiters();
        Ok(Appended::New(base_offset))
    }

    /// Returns once everything appended so far is on disk (at once without a data directory).
    /// Produces waiting at the same moment share one sync.
    pub async fn flush(&self) -> Result<(), ResponseError> {
        let target = match &self.state.lock().disk {
            None => return Ok(()),
            Some(disk) if disk.failed => return Err(ResponseError::KafkaStorageError),
            Some(disk) => disk.written,
        };
        let sync_point = || {
            let state = self.state.lock();
            let disk = state.disk.as_ref().expect("a flushed log is on disk");
            disk.sync_point()
        };
        let commit = self
            .commit
            .as_ref()
            .expect("a log on disk has its group commit");
        commit.wait(target, sync_point).await.map_err(|e| {
            tracing::error!("partition sync failed, no more appends: {e}");
            if let Some(disk) = &mut self.state.lock().disk {
                disk.failed = true;
            }
            ResponseError::KafkaStorageError
        })
    }

    /// True when appends go to a data directory (and acks=all waits for [`flush`](Self::flush)).
    pub fn is_on_disk(&self) -> bool {
        self.commit.is_some()
    }

    /// Syncs issued by [`flush`](Self::flush) so far.
    pub fn syncs(&self) -> u64 {
        self.commit.as_ref().map_or(0, GroupCommit::syncs)
    }

    /// A future that completes at the next append. Create (and `enable`) it before reading, so an
    /// append between the read and the wait is not missed.
    pub fn appended(&self) -> Notified<'_> {
        self.appended.notified()
    }

    /// Whole stored batches starting with the one that holds `offset`, up to `max_bytes`; with
    /// `at_least_one`, the first batch even when it is larger (KIP-74: a batch above the limit
    /// must still make progress).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        at_least_one: bool,
    ) -> Result<ReadResult, OffsetOutOfRange> {
        let (picked, offsets) = {
            let state = self.state.lock();
            let offsets = LogOffsets {
                start: state.start,
                end: state.end,
            };
            (
                pick(&state, offset, max_bytes, at_least_one, offsets)?,
                offsets,
            )
        };
        // Read outside the lock: a fetch reading a file never holds up a produce.
        match stored::load(&picked) {
            Ok(records) => Ok(ReadResult { records, offsets }),
            Err(e) => {
                // Retention deleted the segment between the look-up and the read: the offset
                // is now before the log start, as the consumer learns.
                tracing::warn!(offset, "partition read failed: {e}");
                Err(OffsetOutOfRange {
                    requested: offset,
                    offsets: self.offsets(),
                })
            }
        }
    }

    /// The first batch whose max timestamp reaches `timestamp`: the one that holds the first
    /// record at or after that time (Kafka's time index answers the same question).
    pub fn first_batch_at_or_after(&self, timestamp: i64) -> Option<StoredBatch> {
        let found = {
            let state = self.state.lock();
            state
                .batches
                .iter()
                .find(|b| b.max_timestamp >= timestamp)
                .cloned()
        };
        found.and_then(load_one)
    }

    /// The batch holding the record with the largest timestamp (the first one on ties).
    pub fn max_timestamp_batch(&self) -> Option<StoredBatch> {
        let found = {
            let state = self.state.lock();
            let mut best: Option<&IndexedBatch> = None;
            for batch in &state.batches {
                if best.is_none_or(|b| batch.max_timestamp > b.max_timestamp) {
                    best = Some(batch);
                }
            }
            best.cloned()
        };
        found.and_then(load_one)
    }
}

/// The batches a read returns, with their lengths and where they are.
fn pick(
    state: &LogState,
    offset: i64,
    max_bytes: usize,
    at_least_one: bool,
    offsets: LogOffsets,
) -> Result<Vec<(usize, Stored)>, OffsetOutOfRange> {
    if offset < state.start || offset > state.end {
        return Err(OffsetOutOfRange {
            requested: offset,
            offsets,
        });
    }
    let first = state.batches.partition_point(|b| b.last_offset < offset);
    let mut picked = Vec::new();
    let mut size = 0;
    for batch in state.batches.range(first..) {
        if (!picked.is_empty() || !at_least_one) && size + batch.len > max_bytes {
            break;
        }
        size += batch.len;
        picked.push((batch.len, batch.stored.clone()));
    }
    Ok(picked)
}

/// One indexed batch with its bytes; `None` (logged) when its file cannot be read.
fn load_one(batch: IndexedBatch) -> Option<StoredBatch> {
    match stored::load(&[(batch.len, batch.stored)]) {
        Ok(mut data) => Some(StoredBatch {
            base_offset: batch.base_offset,
            last_offset: batch.last_offset,
            max_timestamp: batch.max_timestamp,
            data: data.pop()?,
        }),
        Err(e) => {
            tracing::warn!(offset = batch.base_offset, "partition read failed: {e}");
            None
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

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
        assert_eq!(log.append(&bytes, &header), Ok(Appended::New(2)));
        assert_eq!(log.append(&bytes, &header), Ok(Appended::Duplicate(2)));
        assert_eq!(log.offsets().end, 5);
        assert_eq!(log.duplicates_absorbed(), 1);
    }

    #[test]
    fn offsets_are_assigned_contiguously_and_written_into_the_batch() {
        let log = PartitionLog::new();
        assert_eq!(append(&log, 3, 10, 0), 0);
        assert_eq!(append(&log, 2, 20, 0), 3);
        assert_eq!(log.offsets(), LogOffsets { start: 0, end: 5 });
        let read = log.read(3, usize::MAX, true).unwrap();
        let header = BatchHeader::parse(&read.records[0]).unwrap();
        assert_eq!(header.base_offset, 3);
    }

    #[test]
    fn reads_start_at_the_batch_holding_the_offset() {
        let log = PartitionLog::new();
        append(&log, 3, 10, 0);
        append(&log, 3, 20, 0);
        append(&log, 3, 30, 0);
        let read = log.read(4, usize::MAX, true).unwrap();
        let bases: Vec<i64> = read
            .records
            .iter()
            .map(|b| BatchHeader::parse(b).unwrap().base_offset)
            .collect();
        assert_eq!(bases, vec![3, 6]);
        // The stored batches themselves, not copies.
        let again = log.read(4, usize::MAX, true).unwrap();
        assert_eq!(again.records[1].as_ptr(), read.records[1].as_ptr());
    }

    #[test]
    fn max_bytes_cuts_between_batches_but_never_returns_nothing() {
        let log = PartitionLog::new();
        append(&log, 1, 10, 100);
        append(&log, 1, 10, 100);
        let one = log.read(0, 10, true).unwrap().records;
        assert_eq!(one.len(), 1);
        let size = one[0].len();
        assert_eq!(size, protocol::batch::HEADER_LEN + 100);
        assert!(log.read(0, 10, false).unwrap().records.is_empty());
        assert_eq!(log.read(0, 2 * size, false).unwrap().records.len(), 2);
        assert_eq!(log.read(0, 2 * size - 1, true).unwrap().records.len(), 1);
    }

    #[test]
    fn reading_at_the_end_is_empty_and_past_it_is_out_of_range() {
        let log = PartitionLog::new();
        append(&log, 2, 10, 0);
        assert!(log.read(2, 1000, true).unwrap().records.is_empty());
        let err = log.read(3, 1000, true).unwrap_err();
        assert_eq!(err.offsets, LogOffsets { start: 0, end: 2 });
        assert!(log.read(-1, 1000, true).is_err());
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
        log.set_retention_bytes(Some(2 * size + size / 2));
        assert_eq!(log.offsets(), LogOffsets { start: 4, end: 10 });
        assert_eq!(log.size_bytes(), 3 * size);
        let err = log.read(3, usize::MAX, true).unwrap_err();
        assert_eq!(err.offsets, LogOffsets { start: 4, end: 10 });
        assert_eq!(append(&log, 2, 10, 100), 10);
        assert_eq!(log.offsets(), LogOffsets { start: 6, end: 12 });
        let read = log.read(6, usize::MAX, true).unwrap();
        let stored: usize = read.records.iter().map(Bytes::len).sum();
        assert_eq!(stored, 3 * size);
        // A batch larger than the retention stays: the newest batch always does.
        log.set_retention_bytes(Some(1));
        assert_eq!(log.offsets(), LogOffsets { start: 10, end: 12 });
        log.set_retention_bytes(None);
        append(&log, 2, 10, 100);
        assert_eq!(log.offsets(), LogOffsets { start: 10, end: 14 });
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
}
