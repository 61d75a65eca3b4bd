//! Idempotent producers: producer ids, epochs, and the per-partition sequence window that turns a
//! retried batch into a no-op instead of a duplicate.
//!
//! Kafka's rules (`ProducerAppendInfo`, `ProducerStateEntry`): per (producer id, partition) the
//! broker keeps the current epoch and the last five batches. A batch equal to one of them is a
//! retry whose acknowledgement was lost: it is answered with the original offset and not appended.
//! Five is also why producers keep at most five requests in flight per partition.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};

use dashmap::DashMap;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use protocol::batch::BatchHeader;

use crate::identity::{producer_id_high_water, record_producer_id_high_water};

/// Kafka's `NUM_BATCHES_TO_RETAIN`.
pub const RETAINED_BATCHES: usize = 5;

/// One appended batch as the window remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RetainedBatch {
    first_sequence: i32,
    last_sequence: i32,
    base_offset: i64,
}

/// What one producer id has written to one partition.
#[derive(Debug, Clone, Default)]
pub struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<RetainedBatch>,
    /// The max timestamp of its last batch or marker here, Kafka's `lastTimestamp`, from which
    /// `producer.id.expiration.ms` counts.
    last_timestamp: i64,
}

/// The sequence window of one partition: producer id to its entry.
#[derive(Debug, Default)]
pub struct SequenceWindows {
    entries: HashMap<i64, ProducerEntry>,
}

/// What to do with an idempotent batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceVerdict {
    /// New data in sequence: append it, then [`SequenceWindows::record`] it.
    Append,
    /// A retry of a batch already in the log at this base offset.
    Duplicate { base_offset: i64 },
}

/// The sequence that follows `last`, wrapping past `i32::MAX` to 0 as Kafka does.
fn next_sequence(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

impl SequenceWindows {
    /// Checks a batch of an idempotent producer (`producer_id >= 0`) against the window, in
    /// Kafka's order: fenced epoch, retained duplicate, new epoch starting at 0, next sequence.
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceVerdict, ResponseError> {
        let Some(entry) = self.entries.get(&header.producer_id) else {
            // No state (a new producer here, or state expired): Kafka accepts any sequence.
            return Ok(SequenceVerdict::Append);
        };
        let epoch = header.producer_epoch;
        if epoch < entry.epoch {
            return Err(ResponseError::InvalidProducerEpoch);
        }
        let (first, last) = (header.base_sequence, header.last_sequence());
        if epoch == entry.epoch {
            if let Some(retained) = entry
                .batches
                .iter()
                .find(|b| b.first_sequence == first && b.last_sequence == last)
            {
                return Ok(SequenceVerdict::Duplicate {
                    base_offset: retained.base_offset,
                });
            }
            let expected = entry.batches.back().map(|b| next_sequence(b.last_sequence));
            if expected.is_some_and(|expected| first != expected) {
                return Err(ResponseError::OutOfOrderSequenceNumber);
            }
        } else if first != 0 {
            // A bumped epoch (KIP-360) starts its sequences over.
            return Err(ResponseError::OutOfOrderSequenceNumber);
        }
        Ok(SequenceVerdict::Append)
    }

    /// Remembers a batch appended at `base_offset` after [`check`](Self::check) said `Append`.
    pub fn record(&mut self, header: &BatchHeader, base_offset: i64) {
        let entry = self.entries.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == RETAINED_BATCHES {
            entry.batches.pop_front();
        }
        entry.last_timestamp = header.max_timestamp;
        entry.batches.push_back(RetainedBatch {
            first_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            base_offset,
        });
    }
}

impl SequenceWindows {
    /// A transaction marker of `producer_id` at `epoch` was written here at `timestamp`. A
    /// newer epoch (the coordinator bumps it when it aborts a transaction that timed out) starts
    /// the producer's window over, so its older epoch is fenced in this partition from now on.
    pub fn marker(&mut self, producer_id: i64, epoch: i16, timestamp: i64) {
        let entry = self.entries.entry(producer_id).or_insert(ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            last_timestamp: timestamp,
        });
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = entry.last_timestamp.max(timestamp);
    }

    /// Forgets the producers whose last batch or marker here is at or before `cutoff_ms` and
    /// that have no transaction open here (`open`), as Kafka's
    /// `ProducerStateManager.removeExpiredProducers` does every
    /// `producer.id.expiration.check.interval.ms`. A forgotten producer is a new one at its next
    /// batch. How many were forgotten.
    pub fn expire(&mut self, cutoff_ms: i64, open: impl Fn(i64) -> bool) -> usize {
        let before = self.entries.len();
        self.entries
            .retain(|id, entry| entry.last_timestamp > cutoff_ms || open(*id));
        // Less than a quarter of the table in use: give the rest back.
        if self.entries.capacity() > 4 * self.entries.len().max(16) {
            self.entries.shrink_to_fit();
        }
        before - self.entries.len()
    }

    /// Producers with state here.
    pub fn producers(&self) -> usize {
        self.entries.len()
    }
}

/// Kafka's `ProducerIdManager` block size: ids are recorded on disk a thousand at a time.
pub const ID_BLOCK: i64 = 1000;

/// The ids that may be handed out without writing to disk first: `next..end`.
#[derive(Debug)]
struct IdBlock {
    next: i64,
    end: i64,
    /// Where the end of each new block is recorded; `None` in memory.
    data_dir: Option<PathBuf>,
}

impl Default for IdBlock {
    fn default() -> Self {
        Self {
            next: 0,
            end: i64::MAX,
            data_dir: None,
        }
    }
}

/// Allocates producer ids and keeps the newest epoch of each transactional producer id, the
/// fencing token that lets a restarted instance shut out its zombie predecessor.
#[derive(Debug, Default)]
pub struct ProducerIds {
    block: Mutex<IdBlock>,
    /// The newest epoch handed out for each producer id of a transactional id.
    current_epoch: DashMap<i64, i16>,
}

impl ProducerIds {
    /// Ids that continue after every id a previous run of `dir` may have handed out.
    pub fn persisted(dir: &Path) -> io::Result<Self> {
        let high_water = producer_id_high_water(dir)?;
        Ok(Self {
            block: Mutex::new(IdBlock {
                next: high_water,
                end: high_water,
                data_dir: Some(dir.to_path_buf()),
            }),
            ..Self::default()
        })
    }

    /// InitProducerId without a transactional id: a fresh id at epoch 0. (With one, the
    /// transaction coordinator, [`crate::txn`], decides the id and epoch.)
    pub fn init_idempotent(&self) -> Result<(i64, i16), ResponseError> {
        Ok((self.allocate()?, 0))
    }

    /// The newest epoch of a transactional producer id, handed out or recovered: older ones are
    /// fenced from now on.
    pub fn restore(&self, producer_id: i64, epoch: i16) {
        self.current_epoch.insert(producer_id, epoch);
    }

    /// The next id; when the block is used up, the next block's end is on disk first.
    pub fn allocate(&self) -> Result<i64, ResponseError> {
        let mut block = self.block.lock();
        if block.next == block.end {
            if let Some(dir) = &block.data_dir {
                let end = block.end + ID_BLOCK;
                if let Err(e) = record_producer_id_high_water(dir, end) {
                    tracing::error!("cannot record a new block of producer ids: {e}");
                    // Retriable for the client, as Kafka's answer while a block is unavailable.
                    return Err(ResponseError::CoordinatorNotAvailable);
                }
                block.end = end;
            }
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }

    /// A transactional id expired: its producer id's epoch is no longer kept.
    pub fn forget(&self, producer_id: i64) {
        self.current_epoch.remove(&producer_id);
    }

    /// True when a newer epoch of this producer id has been handed out: the writer is a zombie.
    pub fn is_fenced(&self, producer_id: i64, epoch: i16) -> bool {
        self.current_epoch
            .get(&producer_id)
            .is_some_and(|current| epoch < *current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(producer_id: i64, epoch: i16, base_sequence: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id,
            producer_epoch: epoch,
            base_sequence,
            record_count: records,
        }
    }

    /// Appends batches of 2 records with sequences 0-1, 2-3, ... at offsets 0, 2, ...
    fn window_with(batches: i32) -> SequenceWindows {
        let mut window = SequenceWindows::default();
        for i in 0..batches {
            let h = header(7, 0, 2 * i, 2);
            assert_eq!(window.check(&h), Ok(SequenceVerdict::Append));
            window.record(&h, 2 * i as i64);
        }
        window
    }

    #[test]
    fn in_order_batches_are_appended() {
        let window = window_with(3);
        assert_eq!(
            window.check(&header(7, 0, 6, 1)),
            Ok(SequenceVerdict::Append)
        );
    }

    #[test]
    fn a_retry_of_each_of_the_last_five_batches_is_a_duplicate_with_its_offset() {
        let window = window_with(7);
        // Batches 2..=6 are retained; 0 and 1 have left the window.
        for i in 2..7 {
            assert_eq!(
                window.check(&header(7, 0, 2 * i, 2)),
                Ok(SequenceVerdict::Duplicate {
                    base_offset: 2 * i as i64
                })
            );
        }
        assert_eq!(
            window.check(&header(7, 0, 2, 2)),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
    }

    #[test]
    fn a_gap_is_out_of_order() {
        let window = window_with(2);
        assert_eq!(
            window.check(&header(7, 0, 5, 1)),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
    }

    #[test]
    fn an_older_epoch_is_fenced_and_a_newer_one_starts_at_zero() {
        let mut window = window_with(1);
        let bumped = header(7, 1, 0, 1);
        assert_eq!(window.check(&bumped), Ok(SequenceVerdict::Append));
        assert_eq!(
            window.check(&header(7, 1, 3, 1)),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
        window.record(&bumped, 2);
        assert_eq!(
            window.check(&header(7, 0, 2, 1)),
            Err(ResponseError::InvalidProducerEpoch)
        );
    }

    #[test]
    fn a_marker_with_a_newer_epoch_fences_the_older_one() {
        let mut window = window_with(2);
        window.marker(7, 0, 0);
        assert_eq!(
            window.check(&header(7, 0, 4, 1)),
            Ok(SequenceVerdict::Append)
        );
        window.marker(7, 1, 0);
        assert_eq!(
            window.check(&header(7, 0, 4, 1)),
            Err(ResponseError::InvalidProducerEpoch)
        );
        window.marker(9, 3, 0);
        assert_eq!(
            window.check(&header(9, 2, 0, 1)),
            Err(ResponseError::InvalidProducerEpoch)
        );
    }

    #[test]
    fn idle_producers_expire_unless_their_transaction_is_open() {
        let mut window = SequenceWindows::default();
        for (id, timestamp) in [(1, 1_000), (2, 5_000), (3, 1_000)] {
            let mut h = header(id, 0, 0, 1);
            h.max_timestamp = timestamp;
            window.record(&h, 0);
        }
        window.marker(4, 0, 900);
        assert_eq!(window.expire(1_000, |id| id == 3), 2);
        assert_eq!(window.producers(), 2);
        // Forgotten: a new producer, any sequence accepted (Kafka's rule for unknown ones).
        assert_eq!(
            window.check(&header(1, 0, 17, 1)),
            Ok(SequenceVerdict::Append)
        );
        assert_eq!(
            window.check(&header(2, 0, 17, 1)),
            Err(ResponseError::OutOfOrderSequenceNumber)
        );
    }

    #[test]
    fn sequences_wrap_past_i32_max() {
        let mut window = SequenceWindows::default();
        let near_end = header(7, 0, i32::MAX - 1, 2);
        window.record(&near_end, 0);
        assert_eq!(
            window.check(&header(7, 0, 0, 1)),
            Ok(SequenceVerdict::Append)
        );
        assert_eq!(
            window.check(&header(7, 0, i32::MAX - 1, 2)),
            Ok(SequenceVerdict::Duplicate { base_offset: 0 })
        );
        // A batch spanning the wrap ends at sequence 1.
        let spanning = header(7, 0, i32::MAX, 3);
        assert_eq!(spanning.last_sequence(), 1);
    }

    #[test]
    fn unknown_producers_start_anywhere() {
        let window = SequenceWindows::default();
        assert_eq!(
            window.check(&header(9, 3, 42, 1)),
            Ok(SequenceVerdict::Append)
        );
    }

    #[test]
    fn producer_ids_and_transactional_epochs() {
        let ids = ProducerIds::default();
        assert_eq!(ids.init_idempotent(), Ok((0, 0)));
        assert_eq!(ids.init_idempotent(), Ok((1, 0)));
        assert_eq!(ids.allocate(), Ok(2));
        ids.restore(2, 1);
        assert!(ids.is_fenced(2, 0));
        assert!(!ids.is_fenced(2, 1));
        assert!(!ids.is_fenced(0, 0));
    }

    #[test]
    fn persisted_ids_continue_past_every_block_a_previous_run_recorded() {
        let dir = std::env::temp_dir().join(format!("producer-ids-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let first = ProducerIds::persisted(&dir).unwrap();
        assert_eq!(first.init_idempotent(), Ok((0, 0)));
        assert_eq!(first.init_idempotent(), Ok((1, 0)));
        // A restart (clean or not) starts at the next block, never at 2.
        let second = ProducerIds::persisted(&dir).unwrap();
        assert_eq!(second.init_idempotent(), Ok((ID_BLOCK, 0)));
        for expected in ID_BLOCK + 1..2 * ID_BLOCK + 1 {
            assert_eq!(second.init_idempotent().unwrap().0, expected);
        }
        let third = ProducerIds::persisted(&dir).unwrap();
        assert_eq!(third.init_idempotent(), Ok((3 * ID_BLOCK, 0)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
