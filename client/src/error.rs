//! Errors in three layers, as rskafka layers them: the transport (sockets, frames, timeouts), the
//! protocol (what we could not encode, or could not make sense of in an answer) and the server
//! (a Kafka error code, with the topic and partition it applies to). A bad answer from a broker
//! is always one of these values, never a panic.
//!
//! Every error is `Clone`: one broken connection fails every request waiting on it, and one
//! failed batch fails every record in it, so the same error is handed to many waiters.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The connection to a broker failed. Retrying on a new connection may succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransportError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The host name of `addr` does not resolve to any address.
    #[error("cannot resolve {addr}: {source}")]
    Unresolved {
        addr: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("connecting to {addr} timed out after {after:?}")]
    ConnectTimeout { addr: String, after: Duration },
    #[error("connection to {addr} failed: {source}")]
    Io {
        addr: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("broker {addr} broke framing: {reason}")]
    Frame { addr: String, reason: String },
    #[error("connection to {addr} was closed by the broker")]
    Closed { addr: String },
    /// The answer was not Kafka's framing but a text or TLS protocol's.
    #[error("{addr} is not a Kafka broker: it answered {answer}")]
    NotKafka { addr: String, answer: String },
    /// It accepted the connection and never answered the ApiVersions handshake: not a Kafka
    /// listener (a Kafka broker answers ApiVersions at once, before anything else).
    #[error("{addr} accepted the connection but did not answer ApiVersions within {after:?}")]
    Silent { addr: String, after: Duration },
    #[error("connection to {addr} was abandoned while a request was half written")]
    Abandoned { addr: String },
    #[error("{api} request to {addr} got no answer within {after:?}")]
    Timeout {
        addr: String,
        api: &'static str,
        after: Duration,
    },
}

impl TransportError {
    /// The broker address this error is about.
    pub fn addr(&self) -> &str {
        match self {
            Self::Connect { addr, .. }
            | Self::Unresolved { addr, .. }
            | Self::ConnectTimeout { addr, .. }
            | Self::Io { addr, .. }
            | Self::Frame { addr, .. }
            | Self::Closed { addr }
            | Self::NotKafka { addr, .. }
            | Self::Silent { addr, .. }
            | Self::Abandoned { addr }
            | Self::Timeout { addr, .. } => addr,
        }
    }

    /// True when nothing listens at the address (the most common mistake when starting out).
    pub fn is_connection_refused(&self) -> bool {
        matches!(self, Self::Connect { source, .. }
            if source.kind() == std::io::ErrorKind::ConnectionRefused)
    }
}

/// We could not build a request, or could not understand a broker's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("cannot encode {api} v{version}: {reason}")]
    Encode {
        api: &'static str,
        version: i16,
        reason: String,
    },
    #[error("cannot decode {api} v{version} answer: {reason}")]
    Decode {
        api: &'static str,
        version: i16,
        reason: String,
    },
    #[error("{api}: {}", describe_ranges(*.broker, *.client))]
    UnsupportedVersion {
        api: &'static str,
        /// The broker's advertised range, `None` when it does not offer the API at all.
        broker: Option<(i16, i16)>,
        client: (i16, i16),
    },
    #[error("corrupt record batch in {topic}-{partition} near offset {offset}: {reason}")]
    CorruptBatch {
        topic: String,
        partition: i32,
        offset: i64,
        reason: String,
    },
    #[error("the broker's {api} answer is inconsistent: {reason}")]
    BadAnswer { api: &'static str, reason: String },
}

fn describe_ranges(broker: Option<(i16, i16)>, client: (i16, i16)) -> String {
    match broker {
        None => "the broker does not offer this API".to_string(),
        Some((lo, hi)) => format!(
            "the broker speaks versions {lo}..={hi}, this client {}..={}",
            client.0, client.1
        ),
    }
}

/// A Kafka error code from a broker, with what it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    pub code: i16,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    /// The broker's own explanation, when the API carries one.
    pub message: Option<String>,
}

impl ServerError {
    pub fn new(code: i16) -> Self {
        Self {
            code,
            topic: None,
            partition: None,
            message: None,
        }
    }

    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = Some(topic.into());
        self
    }

    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    pub fn message(mut self, message: Option<impl Into<String>>) -> Self {
        self.message = message.map(Into::into).filter(|m: &String| !m.is_empty());
        self
    }

    /// `Ok` for code 0, else the error with no context yet.
    pub fn check(code: i16) -> Result<(), ServerError> {
        if code == 0 {
            Ok(())
        } else {
            Err(Self::new(code))
        }
    }

    /// The code as the crate's enum.
    pub fn kind(&self) -> ResponseError {
        ResponseError::try_from_code(self.code).unwrap_or(ResponseError::Unknown(0))
    }

    /// Kafka's own name for the code, e.g. `UNKNOWN_TOPIC_OR_PARTITION`.
    pub fn name(&self) -> String {
        kafka_error_name(self.code)
    }

    /// Whether Kafka classes the code as retriable.
    pub fn is_retriable(&self) -> bool {
        self.kind().is_retriable()
    }

    /// Codes after which the metadata we routed by is probably stale.
    pub fn invalidates_metadata(&self) -> bool {
        matches!(
            self.kind(),
            ResponseError::UnknownTopicOrPartition
                | ResponseError::NotLeaderOrFollower
                | ResponseError::LeaderNotAvailable
                | ResponseError::NotController
                | ResponseError::FencedLeaderEpoch
                | ResponseError::UnknownLeaderEpoch
                | ResponseError::ReplicaNotAvailable
        )
    }

    pub fn is(&self, kind: ResponseError) -> bool {
        self.code == kind.code()
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code)?;
        match (&self.topic, self.partition) {
            (Some(t), Some(p)) => write!(f, " on {t}-{p}")?,
            (Some(t), None) => write!(f, " on topic {t}")?,
            (None, Some(p)) => write!(f, " on partition {p}")?,
            (None, None) => {}
        }
        if let Some(m) = &self.message {
            // Brokers end messages with a period; ours are followed by more text.
            write!(f, ": {}", m.trim_end_matches('.'))?;
        }
        Ok(())
    }
}

impl std::error::Error for ServerError {}

/// `UnknownTopicOrPartition` becomes `UNKNOWN_TOPIC_OR_PARTITION`, the name Kafka's docs and tools
/// print; the crate only offers the Rust variant name.
pub fn kafka_error_name(code: i16) -> String {
    let Some(kind) = ResponseError::try_from_code(code) else {
        return "NONE".to_string();
    };
    if let ResponseError::Unknown(c) = kind {
        return format!("UNKNOWN_CODE_{c}");
    }
    let camel = kind.to_string();
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

/// Java's consumer, failing a commit itself without sending it: the member is in no
/// generation, because it left the group (its poll timeout expired) or was dropped from it
/// (`ConsumerCoordinator.sendOffsetCommitRequest`, word for word).
pub const COMMIT_FAILED_NOT_IN_GROUP: &str = "Offset commit cannot be completed since the \
    consumer is not part of an active group for auto partition assignment; it is likely that the \
    consumer was kicked out of the group.";

/// Java's consumer, when the coordinator refuses a commit for the member's generation
/// (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION): `CommitFailedException`'s default message.
pub const COMMIT_FAILED_REBALANCED: &str = "Commit cannot be completed since the group has \
    already rebalanced and assigned the partitions to another member. This means that the time \
    between subsequent calls to poll() was longer than the configured max.poll.interval.ms, which \
    typically implies that the poll loop is spending too much time message processing. You can \
    address this either by increasing max.poll.interval.ms or by reducing the maximum size of \
    batches returned in poll() with max.poll.records.";

/// Any failure of the client library.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The caller asked for something impossible (a bad name, a partition that does not exist).
    #[error("{0}")]
    InvalidArgument(String),
    /// A fresh Metadata answer says the topic does not exist (and was not auto-created).
    #[error("topic {topic} does not exist")]
    UnknownTopic { topic: String },
    /// The group's coordinator describes it as Dead: no members and no committed offsets.
    #[error("consumer group '{group}' does not exist")]
    UnknownGroup { group: String },
    /// The topic exists but has fewer partitions than the one asked for.
    #[error("topic {topic} has {count} partitions, so partition {partition} does not exist")]
    UnknownPartition {
        topic: String,
        partition: i32,
        count: i32,
    },
    /// Offsets of a group with active members cannot be reset (kafka-consumer-groups.sh's
    /// message): the members would overwrite them with their next commit.
    #[error(
        "Assignments can only be reset if the group '{group}' is inactive, but the current \
         state is {state}."
    )]
    GroupActive { group: String, state: String },
    /// A record does not fit in a request.
    #[error("a record of {size} bytes exceeds the {max}-byte request limit")]
    RecordTooLarge { size: usize, max: usize },
    /// A consumer position is needed but none is known and the reset policy is `None`.
    #[error("no position for {topic}-{partition} and auto offset reset is off")]
    NoOffset { topic: String, partition: i32 },
    /// The producer was closed before the record could be sent.
    #[error("the producer is closed")]
    ProducerClosed,
    /// A group member's commit that cannot be applied because the member is no longer part of
    /// the group's current generation, so its partitions may already belong to another member
    /// (Kafka's `CommitFailedException`, with the Java client's message for the cause: see
    /// [`COMMIT_FAILED_NOT_IN_GROUP`] and [`COMMIT_FAILED_REBALANCED`]). The member rejoins on
    /// its next poll.
    #[error("{message}")]
    CommitFailed { message: String },
    /// A produce acknowledgement thrown away by the producer's own fault injection
    /// (`ProducerConfig::lose_acks`): the broker answered, the producer acts as if the answer
    /// never came, and retries.
    #[error("the acknowledgement of {topic}-{partition} was lost (injected by lose_acks)")]
    AckLost { topic: String, partition: i32 },
    /// The producer stopped for good, as Kafka's producer does after a fatal error: fenced by a
    /// newer instance with the same transactional id (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED),
    /// a broker that lost its sequence (OUT_OF_ORDER_SEQUENCE_NUMBER), or a batch whose fate is
    /// unknown after its retries. Going on could reorder or silently lose records, so every
    /// unacknowledged record fails with this and so does every later send: create a new producer.
    #[error("the producer stopped for good after: {0} (create a new producer to go on)")]
    ProducerFatal(Box<Error>),
    /// A transaction call on a producer without a transactional id.
    #[error("the producer has no transactional id")]
    NotTransactional,
    /// A transaction call out of order (commit without begin, begin twice).
    #[error("transaction: {0}")]
    TransactionState(&'static str),
    /// A record of the transaction failed, so it cannot commit: abort it.
    #[error("the transaction cannot commit, a record of it failed: {0} (abort it)")]
    TransactionAborted(Box<Error>),
}

impl Error {
    /// Whether trying again (after a metadata refresh and a backoff) may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            // Asking a web server again will not make it a broker; a name that does not
            // resolve is a typo far more often than a name server catching up (Kafka's client
            // refuses such a bootstrap at once too).
            Self::Transport(
                TransportError::NotKafka { .. }
                | TransportError::Silent { .. }
                | TransportError::Unresolved { .. },
            ) => false,
            Self::Transport(_) => true,
            Self::Server(e) => e.is_retriable(),
            Self::AckLost { .. } => true,
            _ => false,
        }
    }

    /// What made the producer stop, for [`Error::ProducerFatal`].
    pub fn fatal_cause(&self) -> Option<&Error> {
        match self {
            Self::ProducerFatal(cause) => Some(cause),
            _ => None,
        }
    }

    pub fn server(&self) -> Option<&ServerError> {
        match self {
            Self::Server(e) => Some(e),
            _ => None,
        }
    }

    /// The API a request needed and the broker does not offer in any version this client
    /// speaks (absent from its ApiVersions answer, or only in versions outside ours): a gap of
    /// that cluster, not a failure worth retrying.
    pub fn unsupported_api(&self) -> Option<&'static str> {
        match self.fatal_cause().unwrap_or(self) {
            Self::Protocol(ProtocolError::UnsupportedVersion { api, .. }) => Some(api),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_names_for_codes() {
        assert_eq!(kafka_error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(kafka_error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(kafka_error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(kafka_error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(kafka_error_name(0), "NONE");
        assert_eq!(kafka_error_name(9999), "UNKNOWN_CODE_9999");
    }

    #[test]
    fn server_errors_say_where() {
        let e = ServerError::new(3).topic("orders").partition(2);
        assert_eq!(e.to_string(), "UNKNOWN_TOPIC_OR_PARTITION (3) on orders-2");
        let e = ServerError::new(37)
            .topic("orders")
            .message(Some("Topic currently has 3 partitions"));
        assert_eq!(
            e.to_string(),
            "INVALID_PARTITIONS (37) on topic orders: Topic currently has 3 partitions"
        );
        assert!(ServerError::new(6).is_retriable());
        assert!(ServerError::new(6).invalidates_metadata());
        assert!(!ServerError::new(36).is_retriable());
        assert!(ServerError::check(0).is_ok());
    }

    #[test]
    fn transport_errors_are_retriable_protocol_errors_are_not() {
        let closed: Error = TransportError::Closed { addr: "a:1".into() }.into();
        assert!(closed.is_retriable());
        let bad: Error = ProtocolError::BadAnswer {
            api: "Produce",
            reason: "x".into(),
        }
        .into();
        assert!(!bad.is_retriable());
        let unsupported = ProtocolError::UnsupportedVersion {
            api: "Fetch",
            broker: Some((0, 3)),
            client: (4, 12),
        };
        assert_eq!(
            unsupported.to_string(),
            "Fetch: the broker speaks versions 0..=3, this client 4..=12"
        );
        let missing: Error = ProtocolError::UnsupportedVersion {
            api: "CreatePartitions",
            broker: None,
            client: (0, 3),
        }
        .into();
        assert_eq!(missing.unsupported_api(), Some("CreatePartitions"));
        assert_eq!(
            Error::ProducerFatal(Box::new(missing)).unsupported_api(),
            Some("CreatePartitions")
        );
        assert_eq!(bad.unsupported_api(), None);
    }
}
