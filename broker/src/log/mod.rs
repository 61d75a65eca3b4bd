//! One partition's log: record batches exactly as producers sent them, with only `baseOffset`
//! rewritten (and, on a LogAppendTime topic, the broker's time stamped in), and an offset index
//! over them.
//!
//! Neither append nor read decodes a record: a batch is located by its header, and fetch hands out
//! the stored bytes. Each partition has its own lock, so produce and fetch on different partitions
//! never wait for each other. Without a data directory the batches are kept in memory. With one,
//! each append is written to the partition's segments ([`DiskLog`]) before it becomes visible,
//! only the index stays in memory and reads come from the files ([`Stored`]), and an acks=all
//! produce waits for a sync it shares with the produces waiting at that moment ([`GroupCommit`]).
//!
//! Transactions leave their trace here ([`txn_index`]): the producers with a transaction open
//! (which holds the last stable offset) and the aborted ones, which a read_committed fetch reads
//! up to and tells about. What the topic's configs ask of the log ([`LogPolicy`]) is applied by
//! [`retention`] (by size at each append, by age and by DeleteRecords on request) and by the
//! [`cleaner`], which a background task runs, never a produce or a fetch.

pub mod cleaner;
pub mod retention;
pub mod txn_index;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use protocol::batch::{set_base_offset, set_log_append_time, BatchHeader};
use protocol::control::{marker_batch, Marker};
use tracing::debug;

use crate::disk_log::{DiskLog, Recovered};
use crate::group_commit::GroupCommit;
use crate::producer::{SequenceVerdict, SequenceWindows};
use crate::stored::{self, Stored};
use crate::topic_config::LogPolicy;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
pub use txn_index::AbortedTxn;
use txn_index::TxnIndex;

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

/// Log start (earliest readable offset), last stable offset (below it no transaction is open)
/// and log end (next offset to assign, the high watermark of a single replica).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsets {
    pub start: i64,
    pub stable: i64,
    pub end: i64,
}

/// Kafka's `isolation_level` of Fetch and ListOffsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Up to the high watermark, aborted records included.
    #[default]
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions to skip.
    ReadCommitted,
}

impl Isolation {
    /// The wire's 0 (read_uncommitted) or 1 (read_committed).
    pub fn from_code(code: i8) -> Self {
        if code == 1 {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        }
    }
}

/// What a read returns: the stored batches from the one holding the offset, and the offsets at
/// the time of the read.
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// The stored batches themselves (each a reference count, not a copy), in offset order;
    /// empty when there is nothing to read.
    pub records: Vec<Bytes>,
    pub offsets: LogOffsets,
    /// read_committed: the aborted transactions overlapping the batches returned.
    pub aborted: Vec<AbortedTxn>,
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
    /// Open and aborted transactions; `None` until a transactional batch comes (boxed for the
    /// same reason).
    txns: Option<Box<TxnIndex>>,
    policy: LogPolicy,
    /// The cleaner's checkpoint: offsets below it have been compacted at least once.
    cleaned_to: i64,
}

impl LogState {
    fn offsets(&self) -> LogOffsets {
        LogOffsets {
            start: self.start,
            stable: self.stable(),
            end: self.end,
        }
    }

    /// The first offset of the oldest open transaction (never below the log start), else the
    /// end.
    fn stable(&self) -> i64 {
        match self.txns.as_ref().and_then(|t| t.first_unstable()) {
            Some(first) => first.clamp(self.start, self.end),
            None => self.end,
        }
    }

    fn push(&mut self, header: &BatchHeader, base_offset: i64, len: usize, stored: Stored) {
        let last_offset = base_offset + header.last_offset_delta as i64;
        self.bytes += len;
        self.batches.push_back(IndexedBatch {
            base_offset,
            last_offset,
            max_timestamp: header.max_timestamp,
            len,
            stored,
        });
        self.end = last_offset + 1;
    }

    /// Takes a batch's transaction role into the index: data of an open transaction, or its end.
    fn index_transaction(
        &mut self,
        header: &BatchHeader,
        base_offset: i64,
        marker: Option<Marker>,
    ) {
        if !header.is_transactional() {
            return;
        }
        let txns = self.txns.get_or_insert_with(Box::default);
        match marker {
            Some(marker) => {
                txns.marker(header.producer_id, marker, base_offset);
                self.sequences.marker(
                    header.producer_id,
                    header.producer_epoch,
                    header.max_timestamp,
                );
            }
            None if !header.is_control() => {
                txns.data(header.producer_id, header.producer_epoch, base_offset)
            }
            None => {}
        }
    }

    /// Writes the batch (to disk first with a data directory) at the log end; returns its base
    /// offset and, when its answer must wait for the disk (the topic's `flush.messages`), the
    /// group commit round that covers it.
    fn store(
        &mut self,
        data: Cow<'_, [u8]>,
        header: &BatchHeader,
    ) -> Result<(i64, Option<u64>), ResponseError> {
        let base_offset = self.end;
        let len = data.len();
        let records = header.last_offset_delta as u64 + 1;
        let (stored, sync_first) = match &mut self.disk {
            Some(disk) if disk.failed => return Err(ResponseError::KafkaStorageError),
            // Written before it is visible or acknowledged: nothing a fetch returned or a
            // producer was told can vanish when the process dies (the kernel has it).
            Some(disk) => match disk.append(&data, base_offset, records, header.max_timestamp) {
                Ok((stored, sync_first)) => (stored, sync_first.then_some(disk.ticket)),
                Err(e) => {
                    tracing::error!("partition write failed, no more appends: {e}");
                    disk.failed = true;
                    return Err(ResponseError::KafkaStorageError);
                }
            },
            None => {
                let mut data = data.into_owned();
                set_base_offset(&mut data, base_offset);
                (Stored::Memory(Bytes::from(data)), None)
            }
        };
        self.push(header, base_offset, len, stored);
        Ok((base_offset, sync_first))
    }
}

/// Where an append went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: i64,
    /// An idempotent retry of a batch already written there; nothing was written.
    pub duplicate: bool,
    /// The broker's time stamped on the batch (a LogAppendTime topic), else -1.
    pub log_append_time: i64,
    /// The topic's `flush.messages` was reached: the answer waits for
    /// [`PartitionLog::flush_until`] this group commit round, the first to cover the append.
    pub sync_first: Option<u64>,
}

impl Appended {
    pub fn base_offset(self) -> i64 {
        self.base_offset
    }
}

#[derive(Debug, Default)]
pub struct PartitionLog {
    state: Mutex<LogState>,
    /// Woken on every append, so a parked fetch answers as soon as data arrives.
    appended: Notify,
    /// The data directory's group commit; only a log on disk has it.
    commit: Option<Arc<GroupCommit>>,
    /// `cleanup.policy` holds `compact`: produce refuses records without a key. Kept outside
    /// the lock so that produce checks it before taking it.
    compacted: AtomicBool,
}

/// Milliseconds since the epoch: the broker's time, as LogAppendTime and markers stamp it.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl PartitionLog {
    /// A log kept in memory only.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new, empty log that also writes to `disk`.
    pub fn on_disk(disk: DiskLog) -> Self {
        let log = Self {
            commit: Some(disk.commit().clone()),
            ..Self::default()
        };
        log.state.lock().disk = Some(Box::new(disk));
        log
    }

    /// A log read back from its segments: batches, offsets, the idempotent producers' sequence
    /// windows (so a retry after a restart is still recognised) and the transactions (so the
    /// last stable offset and the aborted ones are what they were).
    pub fn recovered(recovered: Recovered) -> Self {
        let log = Self {
            commit: Some(recovered.disk.commit().clone()),
            ..Self::default()
        };
        {
            let mut state = log.state.lock();
            for (header, stored, marker) in recovered.batches {
                if header.producer_id >= 0 && !header.is_control() {
                    state.sequences.record(&header, header.base_offset);
                }
                state.index_transaction(&header, header.base_offset, marker);
                let len = header.total_len() as usize;
                state.push(&header, header.base_offset, len, stored);
            }
            state.start = recovered.start;
            state.end = recovered.end;
            state.disk = Some(Box::new(recovered.disk));
            if let Some(txns) = &mut state.txns {
                txns.forget_below(recovered.start);
            }
        }
        log
    }

    pub fn offsets(&self) -> LogOffsets {
        self.state.lock().offsets()
    }

    /// Applies the topic's configs (at creation, at recovery, after an alteration): retention
    /// by size at once, the rest from the next append or background pass on.
    pub fn set_policy(&self, policy: LogPolicy) {
        self.compacted.store(policy.compact, Ordering::Relaxed);
        let mut state = self.state.lock();
        state.policy = policy;
        let messages = self.flush_messages(&state);
        if let (Some(disk), Some(commit)) = (&mut state.disk, &self.commit) {
            disk.set_flush(messages, policy.flush_ms.or(commit.defaults.ms));
        }
        if let Some(disk) = &mut state.disk {
            disk.set_segment_ms(policy.segment_ms);
        }
        state.apply_retention_bytes();
    }

    /// The topic's segment size changed: the next segment rolls by it (a log on disk only).
    pub fn set_segment_bytes(&self, bytes: u64) {
        if let Some(disk) = &mut self.state.lock().disk {
            disk.set_segment_bytes(bytes);
        }
    }

    pub fn policy(&self) -> LogPolicy {
        self.state.lock().policy
    }

    /// True when the topic is compacted: records need keys.
    pub fn is_compacted(&self) -> bool {
        self.compacted.load(Ordering::Relaxed)
    }

    /// Bytes stored in this partition.
    pub fn size_bytes(&self) -> usize {
        self.state.lock().bytes
    }

    /// Forgets the producers idle here since `cutoff_ms` (`producer.id.expiration.ms` ago)
    /// with no transaction open here; how many.
    pub fn expire_producers(&self, cutoff_ms: i64) -> usize {
        let mut state = self.state.lock();
        let LogState {
            sequences, txns, ..
        } = &mut *state;
        let open = |id: i64| txns.as_ref().is_some_and(|t| t.has_open(id));
        sequences.expire(cutoff_ms, open)
    }

    /// Producers with idempotence state here.
    pub fn producers(&self) -> usize {
        self.state.lock().sequences.producers()
    }

    /// Retries absorbed by the idempotence check so far.
    pub fn duplicates_absorbed(&self) -> u64 {
        self.state.lock().duplicates_absorbed
    }

    /// Appends a batch already validated by the caller, a transactional one without asking its
    /// coordinator (see [`append_verified`](Self::append_verified)).
    pub fn append(&self, batch: &[u8], header: &BatchHeader) -> Result<Appended, ResponseError> {
        self.append_verified(batch, header, &|| true)
    }

    /// Appends a batch already validated by the caller. A log in memory keeps a copy of the
    /// bytes, so that the stored batch does not keep the whole request frame alive; a log on disk
    /// writes the request's bytes (its base offset apart) and copies nothing. A batch of an
    /// idempotent producer is first checked against its sequence window. A file-backed log has
    /// written the batch when this returns; [`flush`](Self::flush) waits until it is on disk.
    ///
    /// A transactional batch that opens its producer's transaction here is appended only if
    /// `in_ongoing_txn` (the coordinator) says this partition is in its ongoing transaction,
    /// asked under this partition's lock (KIP-890's verification). The coordinator records its
    /// decision before it writes a marker here, and the marker takes the same lock: so either
    /// the batch is appended before the marker, or the decision is seen and the batch refused
    /// with INVALID_TXN_STATE. Data never follows the marker that ended its transaction.
    pub fn append_verified(
        &self,
        batch: &[u8],
        header: &BatchHeader,
        in_ongoing_txn: &dyn Fn() -> bool,
    ) -> Result<Appended, ResponseError> {
        // Copied before the lock is taken, so that fetches of the partition do not wait for it.
        let mut data = if self.is_on_disk() {
            Cow::Borrowed(batch)
        } else {
            Cow::Owned(batch.to_vec())
        };
        let mut header = *header;
        let idempotent = header.producer_id >= 0;
        let appended = {
            let mut state = self.state.lock();
            if header.is_transactional() {
                let open_here = state
                    .txns
                    .as_ref()
                    .is_some_and(|t| t.is_open(header.producer_id, header.producer_epoch));
                if !open_here && !in_ongoing_txn() {
                    return Err(ResponseError::InvalidTxnState);
                }
            }
            if idempotent {
                if let SequenceVerdict::Duplicate { base_offset } =
                    state.sequences.check(&header)?
                {
                    state.duplicates_absorbed += 1;
                    debug!(
                        producer_id = header.producer_id,
                        epoch = header.producer_epoch,
                        sequence = header.base_sequence,
                        base_offset,
                        "duplicate batch absorbed"
                    );
                    // The original may not be synced yet: with `flush.messages` set, the retry's
                    // answer waits for the round covering everything written (retries are rare;
                    // which append reached the count is not remembered).
                    let sync_first = self.flush_messages(&state).and(state.disk.as_ref());
                    return Ok(Appended {
                        base_offset,
                        duplicate: true,
                        log_append_time: -1,
                        sync_first: sync_first.map(|disk| disk.ticket),
                    });
                }
            }
            let mut log_append_time = -1;
            if state.policy.log_append_time {
                log_append_time = now_millis();
                set_log_append_time(data.to_mut(), log_append_time);
                header.max_timestamp = log_append_time;
            }
            let (base_offset, sync_first) = state.store(data, &header)?;
            state.index_transaction(&header, base_offset, None);
            state.apply_retention_bytes();
            if idempotent {
                state.sequences.record(&header, base_offset);
            }
            Appended {
                base_offset,
                duplicate: false,
                log_append_time,
                sync_first,
            }
        };
        self.appended.notify_waiters();
        Ok(appended)
    }

    /// Writes the marker that ends `producer_id`'s transaction here (at `epoch`, which may be
    /// newer than its batches' when the coordinator fenced it) and returns its offset.
    pub fn append_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        marker: Marker,
        coordinator_epoch: i32,
    ) -> Result<i64, ResponseError> {
        let data = marker_batch(producer_id, epoch, marker, coordinator_epoch, now_millis());
        let header = BatchHeader::parse(&data).map_err(|_| ResponseError::UnknownServerError)?;
        let offset = {
            let mut state = self.state.lock();
            let (offset, _) = state.store(Cow::Owned(data.into()), &header)?;
            state.index_transaction(&header, offset, Some(marker));
            state.apply_retention_bytes();
            offset
        };
        self.appended.notify_waiters();
        Ok(offset)
    }

    /// Returns once everything appended so far is on disk (at once without a data directory).
    /// Waiters share the data directory's group commit rounds.
    pub async fn flush(&self) -> Result<(), ResponseError> {
        let ticket = match &self.state.lock().disk {
            Some(disk) => disk.ticket,
            None => return Ok(()),
        };
        self.flush_until(ticket).await
    }

    /// Returns once group commit round `ticket` (an [`Appended::sync_first`]) has ended. Not
    /// [`Self::flush`]: appends made after the one answered, which a pipelining producer sends
    /// while the round covering it runs, must not hold its answer back for the next round.
    pub async fn flush_until(&self, ticket: u64) -> Result<(), ResponseError> {
        let Some(commit) = &self.commit else {
            return Ok(());
        };
        if self
            .state
            .lock()
            .disk
            .as_ref()
            .is_some_and(|disk| disk.failed)
        {
            return Err(ResponseError::KafkaStorageError);
        }
        commit.wait(ticket).await.map_err(|e| {
            tracing::error!("partition sync failed, no more appends: {e}");
            if let Some(disk) = &mut self.state.lock().disk {
                disk.failed = true;
            }
            ResponseError::KafkaStorageError
        })
    }

    /// True when appends go to a data directory.
    pub fn is_on_disk(&self) -> bool {
        self.commit.is_some()
    }

    /// The partition's `flush.messages` (the topic's, else the broker's), on disk only.
    fn flush_messages(&self, state: &LogState) -> Option<u64> {
        let commit = self.commit.as_ref()?;
        state.policy.flush_messages.or(commit.defaults.messages)
    }

    /// A future that completes at the next append. Create (and `enable`) it before reading, so an
    /// append between the read and the wait is not missed.
    pub fn appended(&self) -> Notified<'_> {
        self.appended.notified()
    }

    /// Whole stored batches starting with the one that holds `offset`, up to `max_bytes`; with
    /// `at_least_one`, the first batch even when it is larger (KIP-74: a batch above the limit
    /// must still make progress). read_committed stops at the last stable offset and lists the
    /// aborted transactions among what it returns.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        at_least_one: bool,
        isolation: Isolation,
    ) -> Result<ReadResult, OffsetOutOfRange> {
        let (picked, offsets, aborted) = {
            let state = self.state.lock();
            let offsets = state.offsets();
            let upto = match isolation {
                Isolation::ReadUncommitted => offsets.end,
                Isolation::ReadCommitted => offsets.stable,
            };
            let (picked, next) = pick(&state, offset, upto, max_bytes, at_least_one, offsets)?;
            let aborted = match (&state.txns, isolation) {
                (Some(txns), Isolation::ReadCommitted) if !picked.is_empty() => {
                    txns.aborted_between(offset, next)
                }
                _ => Vec::new(),
            };
            (picked, offsets, aborted)
        };
        // Read outside the lock: a fetch reading a file never holds up a produce.
        match stored::load(&picked) {
            Ok(records) => Ok(ReadResult {
                records,
                offsets,
                aborted,
            }),
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

    /// The first batch holding an offset at or after `offset`: the one a fetch from there
    /// starts with, whose records include the oldest one not yet read from `offset` on.
    pub fn batch_at_or_after(&self, offset: i64) -> Option<StoredBatch> {
        let found = {
            let state = self.state.lock();
            let first = state.batches.partition_point(|b| b.last_offset < offset);
            state.batches.get(first).cloned()
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

/// The batches a read returns (those below `upto`), with their lengths and where they are, and
/// the offset after the last one.
fn pick(
    state: &LogState,
    offset: i64,
    upto: i64,
    max_bytes: usize,
    at_least_one: bool,
    offsets: LogOffsets,
) -> Result<(Vec<(usize, Stored)>, i64), OffsetOutOfRange> {
    if offset < state.start || offset > state.end {
        return Err(OffsetOutOfRange {
            requested: offset,
            offsets,
        });
    }
    let first = state.batches.partition_point(|b| b.last_offset < offset);
    let mut picked = Vec::new();
    let mut size = 0;
    let mut next = offset;
    for batch in state.batches.range(first..) {
        if batch.base_offset >= upto {
            break;
        }
        if (!picked.is_empty() || !at_least_one) && size + batch.len > max_bytes {
            break;
        }
        size += batch.len;
        next = batch.last_offset + 1;
        picked.push((batch.len, batch.stored.clone()));
    }
    Ok((picked, next))
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
pub(crate) mod tests;
