//! Per-partition batching: records are encoded into the open batch of their partition; a batch
//! is ready when it is full, when `linger` has passed since its first record, or when a flush
//! asks for everything.
//!
//! Each partition has a window of batches in flight: one without idempotence, so that a retry
//! can never overtake the batch after it; up to five with idempotence, whose sequences let the
//! broker refuse anything out of order. A batch gets its place in the partition's order (and its
//! sequence) when first sent. A batch that fails with a retriable error goes back in front of
//! the queue, in that order, and the partition sends nothing more until every request in flight
//! for it has come back: then the retries go first, in order, and new batches follow them.
//! Batches keep filling meanwhile.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::time::Instant;

use super::batch::{ProducerBatch, Settlement};
use super::identity::ProducerIdAndEpoch;
use super::partitioner::{Sticky, Target};
use super::sequence::PartitionSequences;
use crate::record::{Header, ProducerIdentity};

/// Buffers of settled batches kept for new ones: enough for a window of five and the batches
/// filling meanwhile, so that a busy producer writes into memory it used a moment ago (fresh
/// memory costs a page fault per 4 KiB and reaches the cache cold).
const SPARE_BUFFERS: usize = 8;

#[derive(Default)]
struct PartitionQueue {
    open: Option<ProducerBatch>,
    /// Closed batches waiting their turn: batches waiting for a retry first, in send order, then
    /// batches never sent.
    queued: VecDeque<ProducerBatch>,
    in_flight: usize,
    /// A batch failed and waits for a retry: send nothing until the window is empty.
    recovering: bool,
    /// Backoff before the front batch may be retried.
    retry_at: Option<Instant>,
    next_ordinal: u64,
    sequences: PartitionSequences,
}

impl PartitionQueue {
    /// Takes `batch` into the window; on its first send it gets its place in the partition's
    /// order and, with a producer id, its sequence.
    fn start(
        &mut self,
        mut batch: ProducerBatch,
        stamp: Option<ProducerIdAndEpoch>,
    ) -> ProducerBatch {
        if batch.ordinal.is_none() {
            batch.ordinal = Some(self.next_ordinal);
            self.next_ordinal += 1;
            if let Some(stamp) = stamp {
                batch.identity = ProducerIdentity {
                    producer_id: stamp.producer_id,
                    producer_epoch: stamp.epoch,
                    base_sequence: self.sequences.assign(batch.record_count()),
                };
            }
        }
        batch.in_flight = true;
        self.in_flight += 1;
        batch
    }

    /// Takes a batch out of the window.
    fn leave(&mut self, batch: &mut ProducerBatch) {
        if std::mem::take(&mut batch.in_flight) {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
    }
}

struct TopicQueues {
    name: Arc<str>,
    partitions: Vec<PartitionQueue>,
    sticky: Sticky,
    /// The partition count records are routed with, as last learned from the client.
    routing: Option<Routing>,
}

/// A partition count and when it was learned: it holds while the client's metadata generation
/// is unchanged and for at most the metadata max age. Kept here, under the lock `append` takes
/// anyway, so that a record costs no second lock and no second lookup of its topic.
#[derive(Debug, Clone, Copy)]
struct Routing {
    partitions: i32,
    generation: u64,
    learned_at: Instant,
}

/// Where an appended record ended up.
pub struct Appended {
    pub partition: i32,
    /// The record's position in its batch: its offset is the batch's base offset plus this.
    pub index: i32,
    pub outcome: Arc<Settlement>,
    /// A batch was opened or filled up, so the sender has new work or a new deadline.
    pub wake_sender: bool,
}

pub struct Accumulator {
    topics: Vec<TopicQueues>,
    /// Where each topic is in `topics`.
    by_name: HashMap<Arc<str>, usize>,
    /// The topic of the last lookup: producers mostly send to one topic at a time, and
    /// comparing its name costs less than hashing it.
    last: usize,
    batch_size: usize,
    linger: Duration,
    /// Batches of one partition in flight at once.
    window: usize,
    /// Buffers of settled batches, for new batches to write into.
    spare_buffers: Vec<BytesMut>,
    rng: StdRng,
}

impl Accumulator {
    pub fn new(batch_size: usize, linger: Duration, window: usize) -> Self {
        Self {
            topics: Vec::new(),
            by_name: HashMap::new(),
            last: 0,
            batch_size,
            linger,
            window: window.max(1),
            spare_buffers: Vec::new(),
            rng: StdRng::from_entropy(),
        }
    }

    /// The partition count learned for `topic` by [`learn_partitions`](Self::learn_partitions),
    /// unless the client's metadata changed since (`generation`) or it is `max_age` old.
    pub fn known_partitions(
        &mut self,
        topic: &str,
        generation: u64,
        now: Instant,
        max_age: Duration,
    ) -> Option<i32> {
        let at = self.topic_index(topic);
        let routing = self.topics[at].routing?;
        let current = routing.generation == generation
            && now.saturating_duration_since(routing.learned_at) < max_age;
        current.then_some(routing.partitions)
    }

    /// Remembers the partition count the client gave for `topic` when its metadata generation
    /// was `generation` (read before asking).
    pub fn learn_partitions(
        &mut self,
        topic: &str,
        partitions: i32,
        generation: u64,
        now: Instant,
    ) {
        let at = self.topic_index(topic);
        self.topics[at].routing = Some(Routing {
            partitions,
            generation,
            learned_at: now,
        });
    }

    /// Encodes a record into its partition's open batch (allocating only when a batch or a
    /// topic is new).
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        topic: &str,
        target: Target,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
        memory: u32,
        now: Instant,
    ) -> Appended {
        let at = self.topic_index(topic);
        let queues = &mut self.topics[at];
        let partition = match target {
            Target::Partition(p) => p,
            Target::Sticky { partitions } => queues.sticky.partition(partitions, &mut self.rng),
        };
        let at = partition as usize;
        if queues.partitions.len() <= at {
            queues
                .partitions
                .resize_with(at + 1, PartitionQueue::default);
        }
        let queue = &mut queues.partitions[at];
        let mut wake_sender = false;
        let fits = queue.open.as_mut().is_some_and(|open| {
            let builder = open.builder.as_mut().expect("open batches are unsealed");
            builder.try_append(timestamp, key, value, headers)
        });
        if !fits {
            if let Some(full) = queue.open.take() {
                queue.queued.push_back(full);
                queues.sticky.batch_closed(partition);
            }
            let buffer = self.spare_buffers.pop().unwrap_or_default();
            let mut batch = ProducerBatch::new(
                Arc::clone(&queues.name),
                partition,
                buffer,
                self.batch_size,
                now,
            );
            let builder = batch.builder.as_mut().expect("new batch");
            let appended = builder.try_append(timestamp, key, value, headers);
            debug_assert!(appended, "an empty batch takes any record");
            queue.open = Some(batch);
            wake_sender = true;
        }
        let open = queue.open.as_mut().expect("an open batch");
        open.memory += memory;
        let builder = open.builder().expect("open batches are unsealed");
        if builder.size() >= self.batch_size {
            wake_sender = true;
        }
        Appended {
            partition,
            index: builder.record_count() - 1,
            outcome: open.settlement(),
            wake_sender,
        }
    }

    /// Takes every batch that may be sent now, in each partition's order and within its window,
    /// and says when to look again (the next linger or backoff deadline). `stamp`: the producer
    /// id and epoch to give new batches their sequences, `None` without idempotence.
    pub fn drain(
        &mut self,
        now: Instant,
        flush: bool,
        stamp: Option<ProducerIdAndEpoch>,
    ) -> (Vec<ProducerBatch>, Option<Instant>) {
        let mut ready = Vec::new();
        let mut next: Option<Instant> = None;
        let mut soonest = |at: Instant| next = Some(next.map_or(at, |n| n.min(at)));
        let (window, linger, batch_size) = (self.window, self.linger, self.batch_size);
        for queues in &mut self.topics {
            for (p, queue) in queues.partitions.iter_mut().enumerate() {
                if queue.recovering {
                    if queue.in_flight > 0 {
                        continue;
                    }
                    queue.recovering = false;
                }
                if let Some(at) = queue.retry_at {
                    if at > now {
                        soonest(at);
                        continue;
                    }
                    queue.retry_at = None;
                }
                while queue.in_flight < window {
                    let batch = match queue.queued.pop_front() {
                        Some(batch) => batch,
                        None => {
                            let Some(open) = &queue.open else { break };
                            let due = open.created + linger;
                            let full = open.builder().is_some_and(|b| b.size() >= batch_size);
                            if !(flush || full || due <= now) {
                                soonest(due);
                                break;
                            }
                            queues.sticky.batch_closed(p as i32);
                            match queue.open.take() {
                                Some(batch) => batch,
                                None => break,
                            }
                        }
                    };
                    ready.push(queue.start(batch, stamp));
                }
            }
        }
        (ready, next)
    }

    /// Puts a failed batch back among the batches waiting for a retry, in send order, to go
    /// again after `retry_at` and once the partition's window is empty.
    pub fn requeue(&mut self, mut batch: ProducerBatch, retry_at: Instant) {
        let Some(queue) = self.queue(&batch.topic, batch.partition) else {
            return;
        };
        queue.leave(&mut batch);
        queue.recovering = true;
        queue.retry_at = Some(queue.retry_at.map_or(retry_at, |at| at.max(retry_at)));
        let at = queue
            .queued
            .iter()
            .position(|queued| queued.ordinal.is_none_or(|o| Some(o) > batch.ordinal))
            .unwrap_or(queue.queued.len());
        queue.queued.insert(at, batch);
    }

    /// The batch is settled (delivered or failed for good): it leaves the window, and its
    /// sequence is no longer waited for.
    pub fn finished(&mut self, batch: &mut ProducerBatch) {
        let reusable = (self.spare_buffers.len() < SPARE_BUFFERS)
            .then(|| batch.take_buffer())
            .flatten()
            // Not the buffer of a record far above the batch size, nor a compressed copy.
            .filter(|b| (self.batch_size..=2 * self.batch_size).contains(&b.capacity()));
        self.spare_buffers.extend(reusable);
        let sequenced = batch.is_sequenced().then_some(batch.identity.base_sequence);
        if let Some(queue) = self.queue(&batch.topic, batch.partition) {
            queue.leave(batch);
            if let Some(base) = sequenced {
                queue.sequences.settled(base);
            }
        }
    }

    /// True when no batch of the partition sent before this one is still unacknowledged.
    pub fn is_oldest_unacked(&mut self, batch: &ProducerBatch) -> bool {
        let base = batch.identity.base_sequence;
        self.queue(&batch.topic, batch.partition)
            .is_some_and(|q| q.sequences.is_oldest_unacked(base))
    }

    /// Nothing open, queued or in flight.
    pub fn is_idle(&self) -> bool {
        self.topics.iter().all(|t| {
            t.partitions
                .iter()
                .all(|q| q.open.is_none() && q.queued.is_empty() && q.in_flight == 0)
        })
    }

    /// Takes every batch not yet sent, to fail them (the producer is going away).
    pub fn take_unsent(&mut self) -> Vec<ProducerBatch> {
        let mut out = Vec::new();
        for queues in &mut self.topics {
            for queue in &mut queues.partitions {
                out.extend(queue.queued.drain(..));
                out.extend(queue.open.take());
            }
        }
        out
    }

    fn queue(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        let at = *self.by_name.get(topic)?;
        self.topics[at]
            .partitions
            .get_mut(usize::try_from(partition).ok()?)
    }

    /// Where `topic` is in `topics`, adding it when new.
    fn topic_index(&mut self, topic: &str) -> usize {
        if self
            .topics
            .get(self.last)
            .is_some_and(|t| &*t.name == topic)
        {
            return self.last;
        }
        let at = match self.by_name.get(topic) {
            Some(&at) => at,
            None => {
                let name: Arc<str> = Arc::from(topic);
                self.topics.push(TopicQueues {
                    name: Arc::clone(&name),
                    partitions: Vec::new(),
                    sticky: Sticky::default(),
                    routing: None,
                });
                self.by_name.insert(name, self.topics.len() - 1);
                self.topics.len() - 1
            }
        };
        self.last = at;
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Compression;

    const LINGER: Duration = Duration::from_millis(5);
    const STAMP: ProducerIdAndEpoch = ProducerIdAndEpoch {
        producer_id: 7,
        epoch: 0,
    };

    fn append(acc: &mut Accumulator, p: i32, value: &[u8], now: Instant) -> Appended {
        acc.append(
            "t",
            Target::Partition(p),
            0,
            None,
            Some(value),
            &[],
            value.len() as u32,
            now,
        )
    }

    /// `n` batches on partition 0 of one record each (each value fills a 100-byte batch).
    fn batches(acc: &mut Accumulator, n: usize, now: Instant) -> Vec<Arc<Settlement>> {
        (0..n)
            .map(|i| append(acc, 0, &[i as u8; 100], now).outcome)
            .collect()
    }

    fn sequences(batches: &[ProducerBatch]) -> Vec<i32> {
        batches.iter().map(|b| b.identity().base_sequence).collect()
    }

    #[test]
    fn records_of_a_partition_share_a_batch_until_linger() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, LINGER, 1);
        let a = append(&mut acc, 0, b"a", now);
        let b = append(&mut acc, 0, b"b", now);
        let c = append(&mut acc, 1, b"c", now);
        assert!(a.wake_sender && !b.wake_sender && c.wake_sender);
        assert_eq!((a.index, b.index, c.index), (0, 1, 0));
        let (ready, next) = acc.drain(now, false, None);
        assert!(ready.is_empty());
        assert_eq!(next, Some(now + LINGER));
        let (ready, _) = acc.drain(now + LINGER, false, None);
        assert_eq!(ready.len(), 2);
        let counts: Vec<i32> = ready.iter().map(ProducerBatch::record_count).collect();
        assert_eq!(counts.iter().sum::<i32>(), 3);
        assert!(!acc.is_idle(), "in flight");
        for mut b in ready {
            assert!(!b.is_sequenced());
            acc.finished(&mut b);
        }
        assert!(acc.is_idle());
    }

    #[test]
    fn a_full_batch_is_ready_at_once_and_the_next_one_waits_its_turn() {
        let now = Instant::now();
        let mut acc = Accumulator::new(200, LINGER, 1);
        let value = [0u8; 60];
        let mut woke = 0;
        for _ in 0..6 {
            woke += append(&mut acc, 0, &value, now).wake_sender as usize;
        }
        assert!(woke >= 2);
        let (ready, _) = acc.drain(now, false, None);
        assert_eq!(ready.len(), 1, "one in flight per partition");
        let mut first = ready.into_iter().next().unwrap();
        assert_eq!(first.record_count(), 2);
        let (ready, _) = acc.drain(now + LINGER, false, None);
        assert!(ready.is_empty(), "the partition is busy");
        acc.finished(&mut first);
        let (ready, _) = acc.drain(now, false, None);
        assert_eq!(ready[0].record_count(), 2);
    }

    #[test]
    fn a_retried_batch_goes_first_after_its_backoff() {
        let now = Instant::now();
        let mut acc = Accumulator::new(200, LINGER, 1);
        let first = append(&mut acc, 0, &[1u8; 100], now).outcome;
        let second = append(&mut acc, 0, &[2u8; 100], now).outcome;
        assert!(!Arc::ptr_eq(&first, &second));
        let (mut ready, _) = acc.drain(now, true, None);
        let batch = ready.pop().unwrap();
        assert!(Arc::ptr_eq(&batch.settlement(), &first));
        let retry_at = now + Duration::from_millis(100);
        acc.requeue(batch, retry_at);
        let (ready, next) = acc.drain(now, true, None);
        assert!(ready.is_empty());
        assert_eq!(next, Some(retry_at));
        let (ready, _) = acc.drain(retry_at, true, None);
        assert!(
            Arc::ptr_eq(&ready[0].settlement(), &first),
            "the retry goes before the rest"
        );
    }

    #[test]
    fn idempotence_keeps_five_in_flight_with_consecutive_sequences() {
        let now = Instant::now();
        let mut acc = Accumulator::new(100, LINGER, 5);
        batches(&mut acc, 8, now);
        let (ready, _) = acc.drain(now, true, Some(STAMP));
        assert_eq!(sequences(&ready), [0, 1, 2, 3, 4], "a window of five");
        assert!(ready.iter().all(|b| b.identity().producer_id == 7));
        assert!(
            acc.drain(now, true, Some(STAMP)).0.is_empty(),
            "window full"
        );
        let mut ready = ready.into_iter();
        let mut first = ready.next().unwrap();
        acc.finished(&mut first);
        let (more, _) = acc.drain(now, true, Some(STAMP));
        assert_eq!(sequences(&more), [5], "one settled, one more goes");
        // The sequence is fixed at the first send and written into the bytes.
        let mut b = ready.next().unwrap();
        let bytes = b.payload(Compression::None, false).unwrap();
        let header = protocol::batch::validate_single_batch(&bytes).unwrap();
        assert_eq!((header.producer_id, header.base_sequence), (7, 1));
    }

    #[test]
    fn retries_wait_for_the_window_to_empty_then_go_in_sequence_order() {
        let now = Instant::now();
        let mut acc = Accumulator::new(100, LINGER, 5);
        batches(&mut acc, 7, now);
        let (ready, _) = acc.drain(now, true, Some(STAMP));
        let mut ready: Vec<ProducerBatch> = ready.into_iter().collect();
        // Batches 1 and 3 fail (their answers handled 3 first); 0, 2 and 4 are still out.
        let three = ready.remove(3);
        let one = ready.remove(1);
        acc.requeue(three, now);
        acc.requeue(one, now);
        assert!(acc.is_oldest_unacked(&ready[0]));
        assert!(
            !acc.is_oldest_unacked(&ready[1]),
            "batch 1 is still unacknowledged"
        );
        assert!(
            acc.drain(now, true, Some(STAMP)).0.is_empty(),
            "nothing goes while batches are in flight after a failure"
        );
        for mut b in ready.drain(..) {
            acc.finished(&mut b);
        }
        let (retried, _) = acc.drain(now, true, Some(STAMP));
        assert_eq!(
            sequences(&retried),
            [1, 3, 5, 6],
            "the retries first, in order, then the batches never sent"
        );
    }

    #[test]
    fn flush_takes_open_batches_before_linger() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, Duration::from_secs(60), 1);
        append(&mut acc, 0, b"x", now);
        assert!(acc.drain(now, false, None).0.is_empty());
        assert_eq!(acc.drain(now, true, None).0.len(), 1);
    }

    #[test]
    fn null_keys_stick_to_a_partition_until_its_batch_closes() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, LINGER, 1);
        let sticky = Target::Sticky { partitions: 8 };
        let parts: Vec<i32> = (0..10)
            .map(|_| {
                acc.append("t", sticky, 0, None, Some(b"v"), &[], 1, now)
                    .partition
            })
            .collect();
        assert!(parts.iter().all(|p| *p == parts[0]));
        let (ready, _) = acc.drain(now + LINGER, false, None);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].record_count(), 10);
        let next = acc
            .append("t", sticky, 0, None, Some(b"v"), &[], 1, now)
            .partition;
        assert_ne!(next, parts[0]);
    }

    #[test]
    fn a_learned_partition_count_holds_until_the_metadata_changes_or_ages() {
        let now = Instant::now();
        let age = Duration::from_secs(5);
        let mut acc = Accumulator::new(16384, LINGER, 1);
        assert_eq!(
            acc.known_partitions("t", 3, now, age),
            None,
            "never learned"
        );
        acc.learn_partitions("t", 12, 3, now);
        acc.learn_partitions("u", 4, 3, now);
        assert_eq!(acc.known_partitions("t", 3, now, age), Some(12));
        assert_eq!(acc.known_partitions("u", 3, now, age), Some(4));
        assert_eq!(
            acc.known_partitions("t", 4, now, age),
            None,
            "cache changed"
        );
        let later = now + age;
        assert_eq!(acc.known_partitions("t", 3, later, age), None, "too old");
        acc.learn_partitions("t", 24, 4, later);
        assert_eq!(acc.known_partitions("t", 4, later, age), Some(24));
    }

    #[test]
    fn a_settled_batchs_buffer_is_written_again() {
        let now = Instant::now();
        let mut acc = Accumulator::new(4096, LINGER, 1);
        append(&mut acc, 0, &[7; 100], now);
        let (mut ready, _) = acc.drain(now, true, None);
        let mut first = ready.pop().unwrap();
        let bytes = first.payload(Compression::None, false).unwrap();
        let at = bytes.as_ptr();
        drop(bytes);
        acc.finished(&mut first);
        append(&mut acc, 1, &[8; 100], now);
        let (mut ready, _) = acc.drain(now, true, None);
        let second = ready
            .pop()
            .unwrap()
            .payload(Compression::None, false)
            .unwrap();
        assert_eq!(second.as_ptr(), at, "the same memory");
        assert_eq!(second[second.len() - 1], 0, "the record header count");
        assert_eq!(second[second.len() - 2], 8);
    }

    #[test]
    fn sealing_happens_once() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, LINGER, 1);
        append(&mut acc, 0, b"x", now);
        let (mut ready, _) = acc.drain(now, true, None);
        let batch = &mut ready[0];
        let a = batch.payload(Compression::Gzip, false).unwrap();
        let b = batch.payload(Compression::Gzip, false).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(batch.memory, 1);
    }
}
