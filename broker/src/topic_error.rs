//! A refusal of a topic change or a topic config, with Kafka's error code: what the topic
//! registry, its configs and the partition budget answer, below all three.

use kafka_protocol::ResponseError;

/// A refusal with Kafka's error code and, where Kafka gives one, its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TopicError {
    pub code: ResponseError,
    pub message: String,
}

impl TopicError {
    pub(crate) fn new(code: ResponseError, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn unknown_topic() -> Self {
        Self::new(
            ResponseError::UnknownTopicOrPartition,
            "This server does not host this topic-partition.",
        )
    }
}
