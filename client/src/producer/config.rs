//! What a producer is configured with, and the checks Kafka's producer makes on it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::ack_loss::AckLoss;
use crate::error::{Error, Result};
use crate::record::Compression;
use crate::retry::RetryPolicy;

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

/// Kafka's `NUM_BATCHES_TO_RETAIN`: a broker remembers the last five batches of each producer
/// per partition, so at most five may be unacknowledged at once or a retry could fall out of
/// its window.
pub const MAX_IN_FLIGHT_IDEMPOTENT: usize = 5;

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
    /// Kafka's `enable.idempotence`: the producer gets a producer id (InitProducerId) and
    /// numbers each partition's records, so the broker appends a retried batch only once; up to
    /// [`max_in_flight`](Self::max_in_flight) batches per partition travel at once and retries
    /// keep their order. Forces `acks` to all. Off by default here (Kafka 3.0+ turns it on), so
    /// that the labs can show what it changes.
    pub enable_idempotence: bool,
    /// Kafka's `transactional.id`: instances sharing it share a producer id, each start bumps
    /// the epoch, and an older instance's batches are refused from then on. It also lets the
    /// producer open transactions
    /// ([`Producer::begin_transaction`](crate::Producer::begin_transaction)); outside one, its
    /// sends are delivered as an idempotent producer's. Needs `enable_idempotence`.
    pub transactional_id: Option<String>,
    /// Batches of one partition in flight at once with idempotence, 1 to 5 (Kafka's
    /// `max.in.flight.requests.per.connection`). Without idempotence one batch per partition is
    /// in flight, so that a retry can never overtake the batch after it.
    pub max_in_flight: usize,
    /// Kafka's `allow.auto.create.topics` for producers: the producer's metadata requests ask the
    /// broker to create a topic it does not know (a broker with auto-creation on then does).
    /// On by default, as in Kafka. Off, a send to a missing topic fails with
    /// [`Error::UnknownTopic`], and a producer still running when its topic is deleted cannot
    /// bring the topic back with the broker's default partition count.
    pub allow_auto_create_topics: bool,
    /// Fault injection: acknowledgements to throw away after the broker sent them, so the
    /// producer retries batches the broker already has (see [`AckLoss`]). `None` in production.
    pub lose_acks: Option<AckLoss>,
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
            enable_idempotence: false,
            transactional_id: None,
            max_in_flight: MAX_IN_FLIGHT_IDEMPOTENT,
            allow_auto_create_topics: true,
            lose_acks: None,
        }
    }
}

impl ProducerConfig {
    /// The configuration a producer runs with: refuses what Kafka's producer refuses, and
    /// forces acks=all under idempotence (a leader-only acknowledgement could be lost with the
    /// leader, and acks=0 gives no answer to deduplicate against).
    pub fn checked(mut self) -> Result<Self> {
        let invalid = |why: &str| Err(Error::InvalidArgument(why.to_string()));
        if self.batch_size == 0 || self.max_request_size <= protocol::batch::HEADER_LEN {
            return invalid("batch size and max request size must leave room for a record");
        }
        if let Some(id) = &self.transactional_id {
            if id.is_empty() {
                return invalid("a transactional id cannot be empty");
            }
            if !self.enable_idempotence {
                return invalid("a transactional id needs enable_idempotence");
            }
        }
        if self.enable_idempotence {
            if !(1..=MAX_IN_FLIGHT_IDEMPOTENT).contains(&self.max_in_flight) {
                return invalid("idempotence needs max_in_flight between 1 and 5");
            }
            if self.acks != Acks::All {
                tracing::warn!(acks = %self.acks, "idempotence needs acks=all; using all");
                self.acks = Acks::All;
            }
        }
        Ok(self)
    }

    /// Batches of one partition that may be in flight at once.
    pub fn in_flight_per_partition(&self) -> usize {
        if self.enable_idempotence {
            self.max_in_flight
        } else {
            1
        }
    }
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
    fn idempotence_forces_acks_all_and_bounds_the_window() {
        let idempotent = |f: fn(&mut ProducerConfig)| {
            let mut c = ProducerConfig {
                enable_idempotence: true,
                ..ProducerConfig::default()
            };
            f(&mut c);
            c.checked()
        };
        let c = idempotent(|c| c.acks = Acks::Leader).unwrap();
        assert_eq!((c.acks, c.in_flight_per_partition()), (Acks::All, 5));
        assert!(idempotent(|c| c.max_in_flight = 6).is_err());
        assert!(idempotent(|c| c.max_in_flight = 0).is_err());
        assert!(idempotent(|c| c.transactional_id = Some(String::new())).is_err());
        assert!(idempotent(|c| c.transactional_id = Some("billing".into())).is_ok());
        let plain = ProducerConfig {
            transactional_id: Some("billing".into()),
            ..ProducerConfig::default()
        };
        assert!(
            plain.checked().is_err(),
            "a transactional id needs idempotence"
        );
        let plain = ProducerConfig::default().checked().unwrap();
        assert_eq!(
            (plain.acks, plain.in_flight_per_partition()),
            (Acks::All, 1)
        );
    }
}
