//! Per-partition batching: records are encoded into the open batch of their partition; a batch
//! is ready when it is full, when `linger` has passed since its first record, or when a flush
//! asks for everything.
//!
//! Each partition has at most one request in flight. A batch that fails with a retriable error
//! goes back to the *front* of its queue, so retries never reorder a partition's records (Kafka
//! needs idempotence for that with several requests in flight; one in flight is the simple
//! guarantee until idempotence arrives, and batches keep filling meanwhile).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::sync::watch;
use tokio::time::Instant;

use super::partitioner::{Sticky, Target};
use crate::error::Error;
use crate::record::{BatchBuilder, Compression, Header, ProducerIdentity};

/// What the broker said about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// -1 when unknown (acks=0).
    pub base_offset: i64,
    /// The broker's time when the topic uses LogAppendTime, else -1.
    pub log_append_time: i64,
}

pub type Outcome = Option<Result<Delivered, Error>>;

/// A batch on its way: filled, then sealed into wire bytes once, then sent (perhaps again).
pub struct ProducerBatch {
    pub topic: Arc<str>,
    pub partition: i32,
    builder: Option<BatchBuilder>,
    sealed: Option<Bytes>,
    sealed_records: i32,
    pub created: Instant,
    /// Retries so far.
    pub attempts: u32,
    /// Buffer memory to give back when the batch is done.
    pub memory: u32,
    outcome: watch::Sender<Outcome>,
}

impl ProducerBatch {
    fn new(topic: Arc<str>, partition: i32, batch_size: usize, now: Instant) -> Self {
        Self {
            topic,
            partition,
            builder: Some(BatchBuilder::new(batch_size)),
            sealed: None,
            sealed_records: 0,
            created: now,
            attempts: 0,
            memory: 0,
            outcome: watch::Sender::new(None),
        }
    }

    fn builder(&self) -> Option<&BatchBuilder> {
        self.builder.as_ref()
    }

    pub fn record_count(&self) -> i32 {
        self.builder()
            .map_or(self.sealed_records, BatchBuilder::record_count)
    }

    /// The wire bytes. The first call closes the batch (compressing it); retries resend exactly
    /// the same bytes, as idempotent sequences will require.
    pub fn payload(&mut self, compression: Compression) -> Result<Bytes, String> {
        if let Some(bytes) = &self.sealed {
            return Ok(bytes.clone());
        }
        let builder = self.builder.take().ok_or("batch has no records")?;
        self.sealed_records = builder.record_count();
        let bytes = builder.finish(compression, ProducerIdentity::NONE)?;
        self.sealed = Some(bytes.clone());
        Ok(bytes)
    }

    pub fn subscribe(&self) -> watch::Receiver<Outcome> {
        self.outcome.subscribe()
    }

    /// Tells every record of the batch how it went.
    pub fn complete(self, result: Result<Delivered, Error>) {
        self.outcome.send_replace(Some(result));
    }
}

#[derive(Default)]
struct PartitionQueue {
    open: Option<ProducerBatch>,
    /// Closed batches waiting their turn; a retried batch is put back in front.
    queued: VecDeque<ProducerBatch>,
    in_flight: bool,
    /// Backoff before the front batch may be retried.
    retry_at: Option<Instant>,
}

struct TopicQueues {
    name: Arc<str>,
    partitions: Vec<PartitionQueue>,
    sticky: Sticky,
}

/// Where an appended record ended up.
pub struct Appended {
    pub partition: i32,
    /// The record's position in its batch: its offset is the batch's base offset plus this.
    pub index: i32,
    pub outcome: watch::Receiver<Outcome>,
    /// A batch was opened or filled up, so the sender has new work or a new deadline.
    pub wake_sender: bool,
}

pub struct Accumulator {
    topics: HashMap<String, TopicQueues>,
    batch_size: usize,
    linger: Duration,
    rng: StdRng,
}

impl Accumulator {
    pub fn new(batch_size: usize, linger: Duration) -> Self {
        Self {
            topics: HashMap::new(),
            batch_size,
            linger,
            rng: StdRng::from_entropy(),
        }
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
        if !self.topics.contains_key(topic) {
            let queues = TopicQueues {
                name: Arc::from(topic),
                partitions: Vec::new(),
                sticky: Sticky::default(),
            };
            self.topics.insert(topic.to_string(), queues);
        }
        let queues = self.topics.get_mut(topic).expect("inserted above");
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
            let mut batch =
                ProducerBatch::new(Arc::clone(&queues.name), partition, self.batch_size, now);
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
            outcome: open.subscribe(),
            wake_sender,
        }
    }

    /// Takes every batch that may be sent now, one per idle partition, and says when to look
    /// again (the next linger or backoff deadline).
    pub fn drain(&mut self, now: Instant, flush: bool) -> (Vec<ProducerBatch>, Option<Instant>) {
        let mut ready = Vec::new();
        let mut next: Option<Instant> = None;
        let mut soonest = |at: Instant| next = Some(next.map_or(at, |n| n.min(at)));
        for queues in self.topics.values_mut() {
            for (p, queue) in queues.partitions.iter_mut().enumerate() {
                if queue.in_flight {
                    continue;
                }
                if let Some(at) = queue.retry_at {
                    if at > now {
                        soonest(at);
                        continue;
                    }
                    queue.retry_at = None;
                }
                if let Some(batch) = queue.queued.pop_front() {
                    queue.in_flight = true;
                    ready.push(batch);
                    continue;
                }
                let Some(open) = &queue.open else { continue };
                let due = open.created + self.linger;
                let full = open.builder().is_some_and(|b| b.size() >= self.batch_size);
                if flush || full || due <= now {
                    queue.in_flight = true;
                    ready.extend(queue.open.take());
                    queues.sticky.batch_closed(p as i32);
                } else {
                    soonest(due);
                }
            }
        }
        (ready, next)
    }

    /// Puts a failed batch back in front of its partition, to go again after `retry_at`.
    pub fn requeue(&mut self, batch: ProducerBatch, retry_at: Instant) {
        if let Some(queue) = self.queue(&batch.topic, batch.partition) {
            queue.in_flight = false;
            queue.retry_at = Some(retry_at);
            queue.queued.push_front(batch);
        }
    }

    /// The partition's request is over; its next batch may go.
    pub fn done(&mut self, topic: &str, partition: i32) {
        if let Some(queue) = self.queue(topic, partition) {
            queue.in_flight = false;
        }
    }

    /// Nothing open, queued or in flight.
    pub fn is_idle(&self) -> bool {
        self.topics.values().all(|t| {
            t.partitions
                .iter()
                .all(|q| q.open.is_none() && q.queued.is_empty() && !q.in_flight)
        })
    }

    /// Takes every batch not yet sent, to fail them (the producer is going away).
    pub fn take_unsent(&mut self) -> Vec<ProducerBatch> {
        let mut out = Vec::new();
        for queues in self.topics.values_mut() {
            for queue in &mut queues.partitions {
                out.extend(queue.queued.drain(..));
                out.extend(queue.open.take());
            }
        }
        out
    }

    fn queue(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        self.topics
            .get_mut(topic)?
            .partitions
            .get_mut(usize::try_from(partition).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINGER: Duration = Duration::from_millis(5);

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

    #[test]
    fn records_of_a_partition_share_a_batch_until_linger() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, LINGER);
        let a = append(&mut acc, 0, b"a", now);
        let b = append(&mut acc, 0, b"b", now);
        let c = append(&mut acc, 1, b"c", now);
        assert!(a.wake_sender && !b.wake_sender && c.wake_sender);
        assert_eq!((a.index, b.index, c.index), (0, 1, 0));
        let (ready, next) = acc.drain(now, false);
        assert!(ready.is_empty());
        assert_eq!(next, Some(now + LINGER));
        let (ready, _) = acc.drain(now + LINGER, false);
        assert_eq!(ready.len(), 2);
        let counts: Vec<i32> = ready.iter().map(ProducerBatch::record_count).collect();
        assert_eq!(counts.iter().sum::<i32>(), 3);
        assert!(!acc.is_idle(), "in flight");
        for b in ready {
            acc.done(&b.topic, b.partition);
        }
        assert!(acc.is_idle());
    }

    #[test]
    fn a_full_batch_is_ready_at_once_and_the_next_one_waits_its_turn() {
        let now = Instant::now();
        let mut acc = Accumulator::new(200, LINGER);
        let value = [0u8; 60];
        let mut woke = 0;
        for _ in 0..6 {
            woke += append(&mut acc, 0, &value, now).wake_sender as usize;
        }
        assert!(woke >= 2);
        let (ready, _) = acc.drain(now, false);
        assert_eq!(ready.len(), 1, "one in flight per partition");
        let first = ready.into_iter().next().unwrap();
        assert_eq!(first.record_count(), 2);
        let (ready, _) = acc.drain(now + LINGER, false);
        assert!(ready.is_empty(), "the partition is busy");
        acc.done("t", 0);
        let (ready, _) = acc.drain(now, false);
        assert_eq!(ready[0].record_count(), 2);
    }

    #[test]
    fn a_retried_batch_goes_first_after_its_backoff() {
        let now = Instant::now();
        let mut acc = Accumulator::new(200, LINGER);
        let first = append(&mut acc, 0, &[1u8; 100], now).outcome;
        let second = append(&mut acc, 0, &[2u8; 100], now).outcome;
        assert!(!first.same_channel(&second));
        let (mut ready, _) = acc.drain(now, true);
        let batch = ready.pop().unwrap();
        assert!(batch.subscribe().same_channel(&first));
        let retry_at = now + Duration::from_millis(100);
        acc.requeue(batch, retry_at);
        let (ready, next) = acc.drain(now, true);
        assert!(ready.is_empty());
        assert_eq!(next, Some(retry_at));
        let (ready, _) = acc.drain(retry_at, true);
        assert!(
            ready[0].subscribe().same_channel(&first),
            "the retry goes before the rest"
        );
    }

    #[test]
    fn flush_takes_open_batches_before_linger() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, Duration::from_secs(60));
        append(&mut acc, 0, b"x", now);
        assert!(acc.drain(now, false).0.is_empty());
        assert_eq!(acc.drain(now, true).0.len(), 1);
    }

    #[test]
    fn null_keys_stick_to_a_partition_until_its_batch_closes() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, LINGER);
        let sticky = Target::Sticky { partitions: 8 };
        let parts: Vec<i32> = (0..10)
            .map(|_| {
                acc.append("t", sticky, 0, None, Some(b"v"), &[], 1, now)
                    .partition
            })
            .collect();
        assert!(parts.iter().all(|p| *p == parts[0]));
        let (ready, _) = acc.drain(now + LINGER, false);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].record_count(), 10);
        let next = acc
            .append("t", sticky, 0, None, Some(b"v"), &[], 1, now)
            .partition;
        assert_ne!(next, parts[0]);
    }

    #[test]
    fn sealing_happens_once() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, LINGER);
        append(&mut acc, 0, b"x", now);
        let (mut ready, _) = acc.drain(now, true);
        let batch = &mut ready[0];
        let a = batch.payload(Compression::Gzip).unwrap();
        let b = batch.payload(Compression::Gzip).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(batch.memory, 1);
    }
}
