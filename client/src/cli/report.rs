//! Turns failures into the one line the CLI prints: what failed, and what to do about it; and
//! the exit code, by one rule for every verb, as test runners read it: 0 the command did what it
//! says (a check holds), 1 a check ran and does not hold ([`Failure::check_failed`]), 2 the
//! command could not do it or the check could not run (bad arguments, no broker, an unknown
//! topic or group, a refusal, data it cannot read), 130 stopped by a signal.

use std::fmt;
use std::process::ExitCode;

use client::{Error, ServerError, TransportError};
use kafka_protocol::ResponseError;

/// A failure of a CLI command, already phrased for the user.
#[derive(Debug)]
pub struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    /// The command could not do what it was asked, or a check could not run (exit code 2):
    /// the harness is broken, not the service it checks.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }

    /// A check ran and does not hold (exit code 1): a group that did not catch up, records out
    /// of order.
    pub fn check_failed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }

    /// Bad arguments that clap could not catch (exit code 2, as clap's own).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }

    /// Stopped by Ctrl-C or SIGTERM before it was done (exit code 130, as shells report SIGINT).
    pub fn interrupted() -> Self {
        Self {
            message: "interrupted".into(),
            code: 130,
        }
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }

    /// Nothing to print: the reader of our output went away (`client consume t | head`), which
    /// is how such pipelines normally end.
    pub fn is_silent(&self) -> bool {
        self.code == 0
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::new(explain(&e))
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Self {
                message: String::new(),
                code: 0,
            };
        }
        Self::new(format!("I/O error: {e}"))
    }
}

/// The error, then a hint when there is a usual fix.
pub fn explain(err: &Error) -> String {
    match err {
        Error::Transport(t) => transport(t),
        Error::UnknownTopic { topic } => format!(
            "topic '{topic}' does not exist: create it with `client topics create {topic} \
             --partitions N` (see `client topics list`)"
        ),
        Error::UnknownGroup { .. } => format!("{err}: see `client groups list`"),
        Error::UnknownPartition { topic, count, .. } => format!(
            "{err}: use a partition below {count}, or grow the topic with `client topics alter \
             {topic} --partitions N`"
        ),
        Error::Server(s) => server(s),
        // A broker that leaves an API out (some Kafka-protocol brokers offer no
        // CreatePartitions, say) is not too old: it cannot do this, whatever its version.
        Error::Protocol(client::ProtocolError::UnsupportedVersion {
            api, broker: None, ..
        }) => format!(
            "the broker does not offer the {api} API (it is not in its ApiVersions answer): \
             this cluster cannot do what the command asks"
        ),
        Error::Protocol(client::ProtocolError::UnsupportedVersion { .. }) => {
            format!("{err}: this client speaks the versions of Kafka 2.1 and newer")
        }
        other => other.to_string(),
    }
}

/// Which change to a topic failed: the same code asks for different fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicChange {
    Create,
    Alter,
}

/// [`explain`], with the hint that fits `verb` where the code means something else for it (an
/// INVALID_PARTITIONS from a create is a count below 1, from an alter a count that would shrink).
pub fn explain_topic_change(err: &Error, verb: TopicChange) -> String {
    let Error::Server(s) = err else {
        return explain(err);
    };
    let hint = match (verb, s.kind()) {
        (TopicChange::Create, ResponseError::InvalidPartitions) => {
            "give --partitions 1 or more, or -1 for the broker's default"
        }
        (TopicChange::Create, ResponseError::InvalidReplicationFactor) => {
            "ask for no more replicas than there are brokers, or -1 for the broker's default"
        }
        (_, ResponseError::InvalidConfig) => {
            "use a topic config Kafka knows, with a value of its type \
             (https://kafka.apache.org/documentation/#topicconfigs)"
        }
        _ => return explain(err),
    };
    format!("{s}: {hint}")
}

fn transport(t: &TransportError) -> String {
    let addr = t.addr();
    match t {
        _ if t.is_connection_refused() => format!(
            "no broker listening at {addr}: start one with `broker --listen {addr}`, or point \
             --bootstrap (or KAFKA_BOOTSTRAP) at a running broker"
        ),
        TransportError::Unresolved { .. } => {
            format!("{t}: check the host name given to --bootstrap (or KAFKA_BOOTSTRAP)")
        }
        TransportError::NotKafka { .. } | TransportError::Silent { .. } => {
            format!("{t}: point --bootstrap (or KAFKA_BOOTSTRAP) at a Kafka listener")
        }
        TransportError::Connect { .. } | TransportError::ConnectTimeout { .. } => {
            format!("{t}: check the address given to --bootstrap and that the broker is reachable")
        }
        _ => format!("{t}: check that the broker at {addr} is still running, then retry"),
    }
}

fn server(s: &ServerError) -> String {
    let topic = s.topic.as_deref().unwrap_or("TOPIC");
    let hint = match s.kind() {
        ResponseError::TopicAlreadyExists => {
            format!("see it with `client topics describe {topic}`")
        }
        ResponseError::InvalidPartitions => format!(
            "a topic can only grow: give more partitions than it has (see `client topics \
             describe {topic}`)"
        ),
        ResponseError::InvalidReplicationFactor => {
            "ask for no more replicas than there are brokers".to_string()
        }
        ResponseError::UnknownTopicOrPartition => {
            "check the name with `client topics list`".to_string()
        }
        ResponseError::InvalidTopicException => {
            "topic names use letters, digits, '.', '_' and '-', at most 249 characters".into()
        }
        ResponseError::TopicAuthorizationFailed | ResponseError::ClusterAuthorizationFailed => {
            "this client does not authenticate; use a listener without ACLs".into()
        }
        _ if s.is_retriable() => "the cluster is busy or changing; retry in a moment".into(),
        _ => return s.to_string(),
    };
    format!("{s}: {hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_missing_broker_says_how_to_start_one() {
        let err = Error::Transport(TransportError::Connect {
            addr: "127.0.0.1:9092".into(),
            source: Arc::new(std::io::ErrorKind::ConnectionRefused.into()),
        });
        let line = explain(&err);
        assert!(
            line.starts_with("no broker listening at 127.0.0.1:9092"),
            "{line}"
        );
        assert!(line.contains("broker --listen 127.0.0.1:9092"));
        assert!(!line.contains('\n'));
    }

    #[test]
    fn server_errors_get_hints() {
        let e = Error::Server(ServerError::new(36).topic("orders"));
        assert_eq!(
            explain(&e),
            "TOPIC_ALREADY_EXISTS (36) on topic orders: see it with `client topics describe orders`"
        );
        let e = Error::UnknownTopic {
            topic: "nope".into(),
        };
        assert!(explain(&e).contains("client topics create nope"));
        assert_eq!(
            explain(&Error::Server(ServerError::new(87))),
            "INVALID_RECORD (87)"
        );
    }

    #[test]
    fn a_missing_api_is_named_not_blamed_on_the_version() {
        let missing = Error::Protocol(client::ProtocolError::UnsupportedVersion {
            api: "CreatePartitions",
            broker: None,
            client: (0, 3),
        });
        let line = explain(&missing);
        assert_eq!(
            line,
            "the broker does not offer the CreatePartitions API (it is not in its ApiVersions \
             answer): this cluster cannot do what the command asks"
        );
        assert!(!line.contains("Kafka 2.1"), "{line}");
        let old = Error::Protocol(client::ProtocolError::UnsupportedVersion {
            api: "Fetch",
            broker: Some((0, 3)),
            client: (4, 12),
        });
        assert_eq!(
            explain(&old),
            "Fetch: the broker speaks versions 0..=3, this client 4..=12: this client speaks the \
             versions of Kafka 2.1 and newer"
        );
    }

    #[test]
    fn create_and_alter_get_the_advice_of_their_verb() {
        let invalid = Error::Server(ServerError::new(37).topic("orders"));
        let create = explain_topic_change(&invalid, TopicChange::Create);
        assert_eq!(
            create,
            "INVALID_PARTITIONS (37) on topic orders: give --partitions 1 or more, or -1 for the \
             broker's default"
        );
        let alter = explain_topic_change(&invalid, TopicChange::Alter);
        assert!(alter.contains("a topic can only grow"), "{alter}");
        let config = Error::Server(ServerError::new(40).topic("orders"));
        assert!(explain_topic_change(&config, TopicChange::Create).contains("#topicconfigs"));
        let exists = Error::Server(ServerError::new(36).topic("orders"));
        assert_eq!(
            explain_topic_change(&exists, TopicChange::Create),
            explain(&exists)
        );
    }
}
