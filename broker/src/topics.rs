//! The topic registry: names, partition logs and the configs a topic was created with.
//!
//! Lookups take a shard of a concurrent map and a per-topic read lock for a moment; the partition
//! list is only written when partitions are added, so produce and fetch never serialise on it.
//!
//! With a data directory each topic is a folder `DIR/<topic>/` holding `topic.meta` (its id and
//! configs) and one `<partition>.log` per partition. Topic names pass Kafka's validation before
//! they become folder names, so none can climb out of the directory.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
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

const META_FILE: &str = "topic.meta";

fn partition_path(topic_dir: &Path, index: i32) -> PathBuf {
    topic_dir.join(format!("{index}.log"))
}

/// Logs for partitions `from..to`, backed by files in `topic_dir` when there is one.
fn new_logs(
    topic_dir: Option<&Path>,
    from: i32,
    to: i32,
    retention_bytes: Option<usize>,
) -> io::Result<Vec<Arc<PartitionLog>>> {
    (from..to)
        .map(|index| {
            let log = match topic_dir {
                Some(dir) => PartitionLog::create_file(&partition_path(dir, index))?,
                None => PartitionLog::new(),
            };
            log.set_retention_bytes(retention_bytes);
            Ok(Arc::new(log))
        })
        .collect()
}

const RETENTION_BYTES: &str = "retention.bytes";

/// The topic's `retention.bytes`: `None` when absent or negative (Kafka's -1 keeps everything).
fn retention_bytes(configs: &BTreeMap<String, String>) -> Result<Option<usize>, TopicError> {
    let Some(value) = configs.get(RETENTION_BYTES) else {
        return Ok(None);
    };
    let bytes: i64 = value.trim().parse().map_err(|_| {
        TopicError::new(
            ResponseError::InvalidConfig,
            format!("Invalid value {value} for configuration {RETENTION_BYTES}: Not a number of type LONG"),
        )
    })?;
    Ok(usize::try_from(bytes).ok())
}

fn write_meta(dir: &Path, id: Uuid, configs: &BTreeMap<String, String>) -> io::Result<()> {
    let mut meta = format!("id={id}\n");
    for (key, value) in configs {
        meta.push_str(&format!("config.{key}={value}\n"));
    }
    std::fs::write(dir.join(META_FILE), meta)
}

/// Reads back a topic folder written by [`Topics::create`].
fn load_topic(name: String, dir: &Path) -> io::Result<Topic> {
    let meta = std::fs::read_to_string(dir.join(META_FILE))?;
    let mut id = None;
    let mut configs = BTreeMap::new();
    for line in meta.lines() {
        match line.split_once('=') {
            Some(("id", value)) => id = value.parse().ok(),
            Some((key, value)) if key.starts_with("config.") => {
                configs.insert(key["config.".len()..].to_string(), value.to_string());
            }
            _ => {}
        }
    }
    let id =
        id.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "topic.meta has no id"))?;
    let retention =
        retention_bytes(&configs).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut partitions = Vec::new();
    loop {
        let path = partition_path(dir, partitions.len() as i32);
        if !path.exists() {
            break;
        }
        let log = PartitionLog::recover(&path)?;
        log.set_retention_bytes(retention);
        partitions.push(Arc::new(log));
    }
    Ok(Topic {
        name,
        id,
        configs,
        partitions: RwLock::new(partitions),
    })
}

fn storage_error(e: io::Error) -> TopicError {
    TopicError::new(
        ResponseError::KafkaStorageError,
        format!("cannot write the topic's files: {e}"),
    )
}

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
    /// Where topics are stored; `None` keeps everything in memory.
    data_dir: Option<PathBuf>,
}

impl Topics {
    /// The topics stored under `dir` (created if missing), each partition replayed from disk.
    pub fn open(dir: &Path) -> io::Result<Topics> {
        std::fs::create_dir_all(dir)?;
        let topics = Topics {
            by_name: DashMap::new(),
            data_dir: Some(dir.to_path_buf()),
        };
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !entry.file_type()?.is_dir() || protocol::names::validate_topic_name(&name).is_err()
            {
                continue;
            }
            let topic = load_topic(name.clone(), &entry.path())
                .map_err(|e| io::Error::new(e.kind(), format!("topic {name}: {e}")))?;
            topics.by_name.insert(name, Arc::new(topic));
        }
        Ok(topics)
    }

    fn topic_dir(&self, name: &str) -> Option<PathBuf> {
        self.data_dir.as_ref().map(|dir| dir.join(name))
    }

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
        let retention = retention_bytes(&new.configs)?;
        match self.by_name.entry(new.name.clone()) {
            Entry::Occupied(_) => Err(TopicError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", new.name),
            )),
            Entry::Vacant(slot) => {
                let id = Uuid::new_v4();
                let dir = self.topic_dir(&new.name).filter(|_| !validate_only);
                if let Some(dir) = &dir {
                    std::fs::create_dir_all(dir)
                        .and_then(|()| write_meta(dir, id, &new.configs))
                        .map_err(storage_error)?;
                }
                let partitions = new_logs(dir.as_deref(), 0, new.partitions, retention)
                    .map_err(storage_error)?;
                let topic = Arc::new(Topic {
                    name: new.name,
                    id,
                    configs: new.configs,
                    partitions: RwLock::new(partitions),
                });
                if !validate_only {
                    slot.insert(topic.clone());
                }
                Ok(topic)
            }
        }
    }

    pub fn delete(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        let (_, topic) = self
            .by_name
            .remove(name)
            .ok_or_else(TopicError::unknown_topic)?;
        if let Some(dir) = self.topic_dir(name) {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(path = %dir.display(), "deleted topic's files remain: {e}");
            }
        }
        Ok(topic)
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
            let dir = self.topic_dir(name);
            let retention = retention_bytes(&topic.configs)?;
            let logs =
                new_logs(dir.as_deref(), current, count, retention).map_err(storage_error)?;
            partitions.extend(logs);
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

    #[test]
    fn retention_bytes_is_read_from_the_configs_and_checked_like_kafka() {
        let with = |value: &str| BTreeMap::from([(RETENTION_BYTES.to_string(), value.to_string())]);
        assert_eq!(retention_bytes(&BTreeMap::new()), Ok(None));
        assert_eq!(retention_bytes(&with("1048576")), Ok(Some(1 << 20)));
        assert_eq!(retention_bytes(&with("-1")), Ok(None));
        let err = retention_bytes(&with("1MB")).unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidConfig);
        assert_eq!(
            err.message,
            "Invalid value 1MB for configuration retention.bytes: Not a number of type LONG"
        );
        let topics = Topics::default();
        let mut bad = new("bad", 1);
        bad.configs = with("lots");
        assert_eq!(
            topics.create(bad, false).unwrap_err().code,
            ResponseError::InvalidConfig
        );
        assert!(topics.get("bad").is_none());
    }
}
