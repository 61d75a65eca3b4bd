//! The producer: [`Producer::send`] places a record in its partition's batch and returns at
//! once with a [`DeliveryFuture`]; a background task sends batches when they are full or have
//! lingered, and retries transient failures.
//!
//! Partitioning is described in [`partitioner`]; batching and ordering in [`accumulator`];
//! sending and retries in [`sender`].
//!
//! The hot path allocates nothing per record: the record is encoded straight into its batch's
//! buffer, metadata is read from the cache by `&str`, and the delivery future shares its
//! batch's channel.

pub mod accumulator;
pub mod partitioner;
pub mod sender;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use protocol::batch::HEADER_LEN;
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::record::codec::estimated_record_size;
use crate::record::{Compression, Header};
use crate::retry::RetryPolicy;
use accumulator::{Accumulator, Outcome};
use sender::Shared;

/// How many replicas must have a batch before the broker answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acks {
    /// Fire and forget: the broker does not answer at all.
    None,
    /// The leader has it.
    Leader,
    /// Every in-sync replica has it (Kafka's default since 3.0).
    #[default]
    All,
}

impl Acks {
    pub fn code(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Leader => 1,
            Self::All => -1,
        }
    }
}

impl FromStr for Acks {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "0" | "none" => Ok(Self::None),
            "1" | "leader" => Ok(Self::Leader),
            "all" | "-1" => Ok(Self::All),
            _ => Err(format!("unknown acks '{s}': use 0, 1 or all")),
        }
    }
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "0",
            Self::Leader => "1",
            Self::All => "all",
        })
    }
}

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub acks: Acks,
    /// How long a batch waits for more records before it is sent (Kafka 4.0's default is 5 ms).
    pub linger: Duration,
    /// A batch is sent once it holds this many bytes (before compression).
    pub batch_size: usize,
    pub compression: Compression,
    /// Largest record accepted, batch header included (Kafka's max.request.size).
    pub max_request_size: usize,
    /// Bytes of records waiting for delivery before `send` waits (Kafka's buffer.memory).
    pub buffer_memory: usize,
    /// Time from a batch's first record to giving up on it, retries included.
    pub delivery_timeout: Duration,
    pub retry: RetryPolicy,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 16 * 1024,
            compression: Compression::None,
            max_request_size: 1024 * 1024,
            buffer_memory: 32 * 1024 * 1024,
            delivery_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
        }
    }
}

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
    outcome: watch::Receiver<Outcome>,
    partition: i32,
    index: i32,
    timestamp: i64,
}

impl DeliveryFuture {
    /// The partition the record went to, known before delivery.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    pub async fn wait(mut self) -> Result<RecordMetadata> {
        let outcome = self
            .outcome
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Error::ProducerClosed)?;
        let delivered = match outcome.as_ref() {
            Some(Ok(d)) => *d,
            Some(Err(e)) => return Err(e.clone()),
            None => unreachable!("wait_for checked"),
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
    /// Starts the background sender (needs a tokio runtime).
    pub fn new(client: Client, config: ProducerConfig) -> Result<Self> {
        if config.batch_size == 0 || config.max_request_size <= HEADER_LEN {
            return Err(Error::InvalidArgument(
                "batch size and max request size must leave room for a record".into(),
            ));
        }
        let shared = Arc::new(Shared {
            acc: Mutex::new(Accumulator::new(config.batch_size, config.linger)),
            memory: Semaphore::new(config.buffer_memory.min(Semaphore::MAX_PERMITS)),
            client,
            config,
            wake: Notify::new(),
            progress: Notify::new(),
            flushing: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        });
        tokio::spawn(sender::run(Arc::clone(&shared)));
        Ok(Self {
            handle: Arc::new(Handle { shared }),
        })
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.handle.shared.config
    }

    /// Adds the record to a batch. Waits only for topic metadata (when not cached) and for
    /// buffer space; delivery is awaited through the returned future.
    pub async fn send(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        let shared = &self.handle.shared;
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
        let target = self.target(&record).await?;
        let permits = u32::try_from(size).map_err(|_| Error::RecordTooLarge {
            size,
            max: u32::MAX as usize,
        })?;
        shared
            .memory
            .acquire_many(permits)
            .await
            .map_err(|_| Error::ProducerClosed)?
            .forget();
        let timestamp = record.timestamp.unwrap_or_else(now_millis);
        let appended = shared.acc.lock().append(
            record.topic,
            target,
            timestamp,
            record.key,
            record.value,
            record.headers,
            permits,
            Instant::now(),
        );
        if appended.wake_sender {
            shared.wake.notify_one();
        }
        Ok(DeliveryFuture {
            outcome: appended.outcome,
            partition: appended.partition,
            index: appended.index,
            timestamp,
        })
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

    async fn target(&self, record: &ProducerRecord<'_>) -> Result<partitioner::Target> {
        let client = &self.handle.shared.client;
        let partitions = client.partition_count(record.topic, true).await?;
        match partitioner::target(record.topic, record.partition, record.key, partitions) {
            // The topic may have grown since the cache was filled: look once more.
            Err(Error::UnknownPartition { .. }) => {
                client.invalidate(record.topic);
                let partitions = client.partition_count(record.topic, true).await?;
                partitioner::target(record.topic, record.partition, record.key, partitions)
            }
            other => other,
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
    fn acks_parse_like_kafka_tools() {
        assert_eq!("all".parse::<Acks>(), Ok(Acks::All));
        assert_eq!("-1".parse::<Acks>(), Ok(Acks::All));
        assert_eq!("1".parse::<Acks>(), Ok(Acks::Leader));
        assert_eq!("0".parse::<Acks>(), Ok(Acks::None));
        assert!("2".parse::<Acks>().is_err());
        assert_eq!(Acks::None.code(), 0);
        assert_eq!(Acks::All.to_string(), "all");
    }

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
