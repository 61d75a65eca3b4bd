//! The topic registry: names, partition logs and the configs a topic was created with.
//!
//! Lookups take a shard of a concurrent map and a per-topic read lock for a moment; the partition
//! list is only written when partitions are added, so produce and fetch never serialise on it.

use std::collections::BTreeMap;
use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use kafka_protocol::ResponseError;
use parking_lot::RwLock;
use uuid::Uuid;

use crate::log::PartitionLog;

/// Kafka's upper bound on partitions a request may create in one go would be far above anything
/// useful here; this keeps a typo from allocating millions of logs.
pub const MAX_PARTITIONS: i32 = 100_000;

#[derive(Debug)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    /// Configs given at creation, reported by DescribeConfigs.
    pub configs: BTreeMap<String, String>,
    partitions: RwLock<Vec<Arc<PartitionLog>>>,
}

impl Topic {
    fn new(name: String, partitions: i32, configs: BTreeMap<String, String>) -> Self {
        Self {
            name,
            id: Uuid::new_v4(),
            configs,
            partitions: RwLock::new(new_logs(partitions)),
        }
    }

    pub fn partition(&self, index: i32) -> Option<Arc<PartitionLog>> {
        let index = usize::try_from(index).ok()?;
        self.partitions.read().get(index).cloned()
    }

    pub fn partition_count(&self) -> i32 {
        self.partitions.read().len() as i32
    }

    pub fn partitions(&self) -> Vec<Arc<PartitionLog>> {
        self.partitions.read().clone()
    }
}

fn new_logs(count: i32) -> Vec<Arc<PartitionLog>> {
    (0..count).map(|_| Arc::new(PartitionLog::new())).collect()
}

/// A refusal with Kafka's error code and, where Kafka gives one, its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TopicError {
    pub code: ResponseError,
    pub message: String,
}

impl TopicError {
    fn new(code: ResponseError, message: impl Into<String>) -> Self {
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

/// What CreateTopics asks for, after `-1` defaults are resolved by the caller.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
pub struct Topics {
    by_name: DashMap<String, Arc<Topic>>,
}

impl Topics {
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.by_name.get(name).map(|t| t.clone())
    }

    /// Every topic, sorted by name (Metadata lists them in a stable order).
    pub fn all(&self) -> Vec<Arc<Topic>> {
        let mut topics: Vec<_> = self.by_name.iter().map(|t| t.clone()).collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        topics
    }

    /// Checks a creation as Kafka does and, unless `validate_only`, creates the topic.
    pub fn create(&self, new: NewTopic, validate_only: bool) -> Result<Arc<Topic>, TopicError> {
        protocol::names::validate_topic_name(&new.name)
            .map_err(|m| TopicError::new(ResponseError::InvalidTopicException, m))?;
        if new.partitions <= 0 {
            return Err(TopicError::new(
                ResponseError::InvalidPartitions,
                "Number of partitions was set to an invalid non-positive value.",
            ));
        }
        if new.partitions > MAX_PARTITIONS {
            return Err(TopicError::new(
                ResponseError::InvalidPartitions,
                format!(
                    "Number of partitions {} is above this broker's limit of {MAX_PARTITIONS}.",
                    new.partitions
                ),
            ));
        }
        if new.replication_factor != 1 {
            return Err(TopicError::new(
                ResponseError::InvalidReplicationFactor,
                format!(
                    "Unable to replicate the partition {} time(s): The target replication factor of {} cannot be reached because only 1 broker(s) are registered.",
                    new.replication_factor, new.replication_factor
                ),
            ));
        }
        match self.by_name.entry(new.name.clone()) {
            Entry::Occupied(_) => Err(TopicError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", new.name),
            )),
            Entry::Vacant(slot) => {
                let topic = Arc::new(Topic::new(new.name, new.partitions, new.configs));
                if !validate_only {
                    slot.insert(topic.clone());
                }
                Ok(topic)
            }
        }
    }

    /// The topic, created with `partitions` if it does not exist yet (auto-creation).
    pub fn get_or_create(&self, name: &str, partitions: i32) -> Result<Arc<Topic>, TopicError> {
        if let Some(topic) = self.get(name) {
            return Ok(topic);
        }
        let new = NewTopic {
            name: name.to_string(),
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        };
        match self.create(new, false) {
            Err(e) if e.code == ResponseError::TopicAlreadyExists => {
                self.get(name).ok_or_else(TopicError::unknown_topic)
            }
            other => other,
        }
    }

    pub fn delete(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        self.by_name
            .remove(name)
            .map(|(_, topic)| topic)
            .ok_or_else(TopicError::unknown_topic)
    }

    /// Raises a topic's partition count; Kafka never lowers one (it would lose data and move
    /// every key), and refuses an unchanged count too.
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let topic = self.get(name).ok_or_else(TopicError::unknown_topic)?;
        let mut partitions = topic.partitions.write();
        let current = partitions.len() as i32;
        if count < current {
            return Err(TopicError::new(
                ResponseError::InvalidPartitions,
                format!("The topic {name} currently has {current} partition(s); {count} would not be an increase."),
            ));
        }
        if count == current {
            return Err(TopicError::new(
                ResponseError::InvalidPartitions,
                format!("Topic already has {current} partition(s)."),
            ));
        }
        if count > MAX_PARTITIONS {
            return Err(TopicError::new(
                ResponseError::InvalidPartitions,
                format!("Number of partitions {count} is above this broker's limit of {MAX_PARTITIONS}."),
            ));
        }
        if !validate_only {
            partitions.extend(new_logs(count - current));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(name: &str, partitions: i32) -> NewTopic {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }
    }

    #[test]
    fn create_validates_like_kafka() {
        let topics = Topics::default();
        assert_eq!(
            topics
                .create(new("orders", 12), false)
                .unwrap()
                .partition_count(),
            12
        );
        let code = |r: Result<Arc<Topic>, TopicError>| r.unwrap_err().code;
        assert_eq!(
            code(topics.create(new("orders", 3), false)),
            ResponseError::TopicAlreadyExists
        );
        assert_eq!(
            code(topics.create(new("a/b", 3), false)),
            ResponseError::InvalidTopicException
        );
        assert_eq!(
            code(topics.create(new("x", 0), false)),
            ResponseError::InvalidPartitions
        );
        let mut replicated = new("y", 1);
        replicated.replication_factor = 3;
        assert_eq!(
            code(topics.create(replicated, false)),
            ResponseError::InvalidReplicationFactor
        );
    }

    #[test]
    fn validate_only_creates_nothing() {
        let topics = Topics::default();
        topics.create(new("dry", 2), true).unwrap();
        assert!(topics.get("dry").is_none());
    }

    #[test]
    fn partitions_only_grow_with_kafkas_messages() {
        let topics = Topics::default();
        topics.create(new("orders", 12), false).unwrap();
        let err = topics.add_partitions("orders", 6, false).unwrap_err();
        assert_eq!(
            err.message,
            "The topic orders currently has 12 partition(s); 6 would not be an increase."
        );
        let err = topics.add_partitions("orders", 12, false).unwrap_err();
        assert_eq!(err.message, "Topic already has 12 partition(s).");
        topics.add_partitions("orders", 24, true).unwrap();
        assert_eq!(topics.get("orders").unwrap().partition_count(), 12);
        topics.add_partitions("orders", 24, false).unwrap();
        assert_eq!(topics.get("orders").unwrap().partition_count(), 24);
        assert_eq!(
            topics.add_partitions("nope", 2, false).unwrap_err().code,
            ResponseError::UnknownTopicOrPartition
        );
    }
}
