//! The producer: [`Producer::send`] places a record in its partition's batch and returns at
//! once with a [`DeliveryFuture`]; a background task sends batches when they are full or have
//! lingered, and retries transient failures.
//!
//! Partitioning is described in [`partitioner`]; batching, ordering and the in-flight window in
//! [`accumulator`]; sending and retries in [`sender`]. With
//! [`ProducerConfig::enable_idempotence`] the producer asks for a producer id ([`identity`]),
//! numbers each partition's records ([`sequence`]) and keeps up to five batches per partition
//! in flight; a broker then appends a retried batch only once. Errors after which Kafka's
//! producer cannot go on without reordering or losing records (fenced by a newer instance, a
//! broker that lost the sequence, a batch whose fate stays unknown) stop it for good:
//! [`Error::ProducerFatal`] for every record not yet acknowledged and every later send.
//! [`ack_loss`] injects lost acknowledgements from the client side, for labs and tests.
//!
//! The hot path allocates nothing per record: the record is encoded straight into its batch's
//! buffer, metadata is read from the cache by `&str`, and the delivery future shares its
//! batch's channel.

pub mod accumulator;
pub mod ack_loss;
pub mod batch;
pub mod config;
pub mod identity;
pub mod partitioner;
pub mod request;
pub mod sender;
pub mod sequence;
pub mod shared;
pub mod transaction;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use protocol::batch::HEADER_LEN;
use tokio::sync::TryAcquireError;
use tokio::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::record::codec::estimated_record_size;
use crate::record::Header;
use accumulator::Accumulator;
pub use ack_loss::{AckLoss, LossPattern, LostAck};
use batch::Settlement;
pub use config::{Acks, ProducerConfig, MAX_IN_FLIGHT_IDEMPOTENT};
pub use identity::ProducerIdAndEpoch;
use shared::Shared;

/// A record to send; borrows everything, so building one allocates nothing.
#[derive(Debug, Clone, Copy)]
pub struct ProducerRecord<'a> {
    pub topic: &'a str,
    /// `None`: the partitioner decides.
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [Header<'a>],
    /// Milliseconds since the epoch; `None`: now.
    pub timestamp: Option<i64>,
}

impl<'a> ProducerRecord<'a> {
    pub fn new(topic: &'a str) -> Self {
        Self {
            topic,
            partition: None,
            key: None,
            value: None,
            headers: &[],
            timestamp: None,
        }
    }

    pub fn key<K: AsRef<[u8]> + ?Sized>(mut self, key: &'a K) -> Self {
        self.key = Some(key.as_ref());
        self
    }

    pub fn value<V: AsRef<[u8]> + ?Sized>(mut self, value: &'a V) -> Self {
        self.value = Some(value.as_ref());
        self
    }

    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    pub fn headers(mut self, headers: &'a [Header<'a>]) -> Self {
        self.headers = headers;
        self
    }

    pub fn timestamp(mut self, millis: i64) -> Self {
        self.timestamp = Some(millis);
        self
    }
}

/// Where a record was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    pub partition: i32,
    /// -1 with acks=0: the broker does not say.
    pub offset: i64,
    /// The record's timestamp, or the broker's when the topic uses LogAppendTime.
    pub timestamp: i64,
}

/// Resolves when the record's batch is acknowledged or has failed for good.
pub struct DeliveryFuture {
    outcome: Arc<Settlement>,
    partition: i32,
    index: i32,
    timestamp: i64,
}

impl DeliveryFuture {
    /// The partition the record went to, known before delivery.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    pub async fn wait(self) -> Result<RecordMetadata> {
        let delivered = match self.outcome.wait().await {
            Ok(d) => *d,
            Err(e) => return Err(e.clone()),
        };
        Ok(RecordMetadata {
            partition: self.partition,
            offset: match delivered.base_offset {
                -1 => -1,
                base => base + self.index as i64,
            },
            timestamp: match delivered.log_append_time {
                -1 => self.timestamp,
                t => t,
            },
        })
    }
}

/// Closes the producer when the last handle goes: the sender then delivers what is left and
/// stops.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }
}

/// A Kafka producer. Clones share batches and the background sender.
#[derive(Clone)]
pub struct Producer {
    handle: Arc<Handle>,
}

impl Producer {
    /// Starts the background sender (needs a tokio runtime). With idempotence, the sender asks
    /// for a producer id at once, as Kafka's producer does; [`producer_id`](Self::producer_id)
    /// waits for it.
    pub fn new(client: Client, config: ProducerConfig) -> Result<Self> {
        let shared = Arc::new(Shared::new(client, config.checked()?));
        tokio::spawn(sender::run(Arc::clone(&shared)));
        Ok(Self {
            handle: Arc::new(Handle { shared }),
        })
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.handle.shared.config
    }

    /// The producer id and epoch this producer writes with, `None` without idempotence. Waits
    /// for InitProducerId if it is still under way.
    pub async fn producer_id(&self) -> Result<Option<ProducerIdAndEpoch>> {
        let shared = &self.handle.shared;
        if !shared.config.enable_idempotence {
            return Ok(None);
        }
        shared.producer_id().await.map(Some)
    }

    /// The error that stopped this producer for good, if one did.
    pub fn fatal_error(&self) -> Option<Error> {
        self.handle.shared.fatal_error()
    }

    /// Acknowledgements thrown away so far by [`ProducerConfig::lose_acks`].
    pub fn acks_lost(&self) -> u64 {
        self.handle.shared.lost.lock().lost()
    }

    /// What the broker had said in each acknowledgement thrown away (the first 10,000).
    pub fn lost_acks(&self) -> Vec<LostAck> {
        self.handle.shared.lost.lock().log().to_vec()
    }

    /// Each answer that told this producer its metadata was stale (NOT_LEADER_OR_FOLLOWER, ...),
    /// in order, with the batch's topic and partition: Java's producer logs each as "Received
    /// invalid metadata error in produce request on partition ..." and re-reads metadata, as
    /// this one does (the first 10,000 are kept).
    pub fn invalid_metadata_errors(&self) -> Vec<crate::error::ServerError> {
        self.handle.shared.invalid_metadata.lock().clone()
    }

    /// Adds the record to a batch. Waits only for topic metadata (when not cached) and for
    /// buffer space; delivery is awaited through the returned future.
    pub async fn send(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        let shared = &self.handle.shared;
        if let Some(fatal) = shared.fatal_error() {
            return Err(fatal);
        }
        if shared.closed.load(Ordering::SeqCst) {
            return Err(Error::ProducerClosed);
        }
        let size = HEADER_LEN + estimated_record_size(record.key, record.value, record.headers);
        let max = shared
            .config
            .max_request_size
            .min(shared.config.buffer_memory);
        if size > max {
            return Err(Error::RecordTooLarge { size, max });
        }
        let permits = u32::try_from(size).map_err(|_| Error::RecordTooLarge {
            size,
            max: u32::MAX as usize,
        })?;
        let timestamp = record.timestamp.unwrap_or_else(now_millis);
        let now = Instant::now();
        if let Some(sent) = self.try_send_now(&record, timestamp, permits, now) {
            return sent;
        }
        let target = self.target(&record, now).await?;
        shared
            .memory
            .acquire_many(permits)
            .await
            .map_err(|_| Error::ProducerClosed)?
            .forget();
        // Waiting for memory may have taken a while: the batch's linger starts now.
        let now = Instant::now();
        let delivery = self.append(
            &mut shared.acc.lock(),
            &record,
            target,
            timestamp,
            permits,
            now,
        );
        Ok(delivery)
    }

    /// The common case, without an await: the partition count is known and buffer memory is
    /// free. `None`: the caller must wait for one or the other.
    fn try_send_now(
        &self,
        record: &ProducerRecord<'_>,
        timestamp: i64,
        memory: u32,
        now: Instant,
    ) -> Option<Result<DeliveryFuture>> {
        let shared = &self.handle.shared;
        let generation = shared.client.metadata_generation();
        let max_age = shared.client.config().metadata_max_age;
        let mut acc = shared.acc.lock();
        let partitions = acc.known_partitions(record.topic, generation, now, max_age)?;
        let target = partitioner::target_of(record, partitions).ok()?;
        match shared.memory.try_acquire_many(memory) {
            Ok(reserved) => reserved.forget(),
            Err(TryAcquireError::Closed) => return Some(Err(Error::ProducerClosed)),
            Err(TryAcquireError::NoPermits) => return None,
        }
        Some(Ok(
            self.append(&mut acc, record, target, timestamp, memory, now)
        ))
    }

    /// Puts the record in its batch, its buffer memory already reserved.
    fn append(
        &self,
        acc: &mut Accumulator,
        record: &ProducerRecord<'_>,
        target: partitioner::Target,
        timestamp: i64,
        memory: u32,
        now: Instant,
    ) -> DeliveryFuture {
        let appended = acc.append(
            record.topic,
            target,
            timestamp,
            record.key,
            record.value,
            record.headers,
            memory,
            now,
        );
        if appended.wake_sender {
            self.handle.shared.wake.notify_one();
        }
        DeliveryFuture {
            outcome: appended.outcome,
            partition: appended.partition,
            index: appended.index,
            timestamp,
        }
    }

    /// Sends one record and waits for its acknowledgement.
    pub async fn send_and_wait(&self, record: ProducerRecord<'_>) -> Result<RecordMetadata> {
        self.send(record).await?.wait().await
    }

    /// Sends everything buffered now, ignoring linger, and waits until every batch is settled.
    pub async fn flush(&self) {
        let shared = &self.handle.shared;
        struct Flushing<'a>(&'a AtomicUsize);
        impl Drop for Flushing<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        shared.flushing.fetch_add(1, Ordering::SeqCst);
        let _flushing = Flushing(&shared.flushing);
        shared.wake.notify_one();
        loop {
            let progressed = shared.progress.notified();
            tokio::pin!(progressed);
            // Registered before the check, so a batch settled in between still wakes us.
            progressed.as_mut().enable();
            if shared.acc.lock().is_idle() {
                return;
            }
            progressed.await;
        }
    }

    /// Delivers everything buffered, then lets the sender stop once the last handle is gone.
    pub async fn close(self) {
        self.flush().await;
    }

    /// Asks the client for the topic's partition count (a metadata request when its cache is
    /// stale), remembers it in the accumulator, and routes the record with it.
    async fn target(
        &self,
        record: &ProducerRecord<'_>,
        now: Instant,
    ) -> Result<partitioner::Target> {
        let shared = &self.handle.shared;
        let client = &shared.client;
        let mut looked_again = false;
        loop {
            let generation = client.metadata_generation();
            let auto_create = shared.config.allow_auto_create_topics;
            let partitions = client.partition_count(record.topic, auto_create).await?;
            shared
                .acc
                .lock()
                .learn_partitions(record.topic, partitions, generation, now);
            match partitioner::target_of(record, partitions) {
                // The topic may have grown since the cache was filled: look once more.
                Err(Error::UnknownPartition { .. }) if !looked_again => {
                    client.invalidate(record.topic);
                    looked_again = true;
                }
                routed => return routed,
            }
        }
    }
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_borrow_their_parts() {
        let key = String::from("k");
        let r = ProducerRecord::new("t")
            .key(&key)
            .value("v")
            .partition(2)
            .timestamp(5);
        assert_eq!(r.key, Some(&b"k"[..]));
        assert_eq!(r.value, Some(&b"v"[..]));
        assert_eq!((r.partition, r.timestamp), (Some(2), Some(5)));
    }
}
