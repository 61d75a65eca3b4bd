//! The topic registry: names, partition logs and the configs a topic was created with.
//!
//! Lookups take a shard of a concurrent map and a per-topic read lock for a moment; the partition
//! list is only written when partitions are added, so produce and fetch never serialise on it.
//!
//! With a data directory each topic is a folder `DIR/<topic>/` ([`crate::topic_store`]): its
//! id, partition count and configs, and each partition's segments. Topic names pass Kafka's
//! validation before they become folder names, so none can climb out of the directory.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use kafka_protocol::ResponseError;
use parking_lot::RwLock;
use uuid::Uuid;

use crate::disk_log::DiskLog;
use crate::file_pool::FilePool;
use crate::group_commit::{FlushDefaults, GroupCommit};
use crate::log::PartitionLog;
use crate::topic_config::{self, LogPolicy};
use crate::topic_error::TopicError;
use crate::topic_store::{self, SegmentPolicy, TopicMeta};

/// Kafka's upper bound on partitions a request may create in one go would be far above anything
/// useful here; this keeps a typo from allocating millions of logs.
pub const MAX_PARTITIONS: i32 = 100_000;

#[derive(Debug)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    /// The configs set on the topic (at creation, or altered since); defaults are not listed.
    configs: RwLock<BTreeMap<String, String>>,
    /// What those configs ask of the produce path, kept beside them so that Produce reads it
    /// without parsing configs or taking a partition's lock.
    policy: RwLock<LogPolicy>,
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

    /// The topic's configs as the produce path applies them.
    pub fn policy(&self) -> LogPolicy {
        *self.policy.read()
    }

    /// The configs set on the topic, as DescribeConfigs reports them (DYNAMIC_TOPIC_CONFIG).
    pub fn configs(&self) -> BTreeMap<String, String> {
        self.configs.read().clone()
    }
}

/// In-memory logs for `count` partitions.
fn memory_logs(count: i32, policy: LogPolicy) -> Vec<Arc<PartitionLog>> {
    (0..count)
        .map(|_| {
            let log = PartitionLog::new();
            log.set_policy(policy);
            Arc::new(log)
        })
        .collect()
}

fn disk_logs(disks: Vec<DiskLog>, policy: LogPolicy) -> Vec<Arc<PartitionLog>> {
    disks
        .into_iter()
        .map(|disk| {
            let log = PartitionLog::on_disk(disk);
            log.set_policy(policy);
            Arc::new(log)
        })
        .collect()
}

/// Kafka's `log.segment.bytes` is 1 GiB; a workshop's disk is smaller.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;
/// A topic with `retention.bytes` and no `segment.bytes` gets segments of a quarter of its
/// retention (at least this), so its disk holds about 1.25 times the retention rather than a
/// whole default segment more.
const MIN_DERIVED_SEGMENT_BYTES: u64 = 1 << 20;

/// The topic's segment size and retention, from its (validated) configs and the broker's
/// default.
fn segment_policy(configs: &BTreeMap<String, String>, default_segment_bytes: u64) -> SegmentPolicy {
    let retention_bytes = LogPolicy::from_configs(configs).retention_bytes;
    let segment_bytes = topic_config::segment_bytes(configs).unwrap_or(match retention_bytes {
        Some(keep) => (keep as u64 / 4)
            .max(MIN_DERIVED_SEGMENT_BYTES)
            .min(default_segment_bytes),
        None => default_segment_bytes,
    });
    SegmentPolicy {
        segment_bytes,
        retention_bytes,
    }
}

/// Kafka's `Topic.unifyCollisionChars`: `.` and `_` are one character in metric names.
fn unify_collision_chars(name: &str) -> String {
    name.replace('.', "_")
}

/// Where and how topics are stored with a data directory.
#[derive(Debug)]
struct Store {
    dir: PathBuf,
    pool: Arc<FilePool>,
    default_segment_bytes: u64,
}

fn storage_error(e: io::Error) -> TopicError {
    TopicError::new(
        ResponseError::KafkaStorageError,
        format!("cannot write the topic's files: {e}"),
    )
}

/// What CreateTopics asks for, after `-1` defaults are resolved by the caller.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// How partitions are kept on disk.
#[derive(Debug, Clone, Copy)]
pub struct StorageConfig {
    /// Partition files kept open at once; `None`: half the open-files limit.
    pub max_open_files: Option<usize>,
    /// Segment size of topics without `segment.bytes` (Kafka's `log.segment.bytes`).
    pub segment_bytes: u64,
    /// `log.flush.interval.messages` and `log.flush.interval.ms`.
    pub flush: FlushDefaults,
}

#[derive(Debug, Default)]
pub struct Topics {
    by_name: DashMap<String, Arc<Topic>>,
    /// Each topic's name by its id (Metadata v12+ and Java's `describeTopics` by id).
    names_by_id: DashMap<Uuid, String>,
    /// Each topic's name by its name with `.` read as `_`: Kafka refuses a topic whose name
    /// collides so with an existing one's (their metric names would be the same). Creation
    /// takes this entry first, so two colliding creations cannot both succeed.
    names_by_unified: DashMap<String, String>,
    /// Where topics are stored; `None` keeps everything in memory.
    store: Option<Store>,
}

impl Topics {
    /// The topics stored under `dir` (created if missing), each partition replayed from disk;
    /// a topic that cannot be read is quarantined rather than failing the start.
    pub fn open(dir: &Path, storage: StorageConfig) -> io::Result<Topics> {
        std::fs::create_dir_all(dir)?;
        let store = Store {
            dir: dir.to_path_buf(),
            pool: FilePool::with_flush(storage.max_open_files, storage.flush),
            default_segment_bytes: storage.segment_bytes,
        };
        let policy =
            |meta: &TopicMeta| Ok(segment_policy(&meta.configs, store.default_segment_bytes));
        let by_name = DashMap::new();
        let names_by_id = DashMap::new();
        let names_by_unified = DashMap::new();
        for (name, loaded) in topic_store::load_all(dir, &store.pool, policy)? {
            let policy = LogPolicy::from_configs(&loaded.meta.configs);
            let partitions = loaded
                .partitions
                .into_iter()
                .map(|recovered| {
                    let log = PartitionLog::recovered(recovered);
                    log.set_policy(policy);
                    Arc::new(log)
                })
                .collect();
            let topic = Topic {
                name: name.clone(),
                id: loaded.meta.id,
                configs: RwLock::new(loaded.meta.configs),
                policy: RwLock::new(policy),
                partitions: RwLock::new(partitions),
            };
            names_by_id.insert(topic.id, name.clone());
            // Topics stored before collisions were refused keep their names; the first holds
            // the unified one.
            names_by_unified
                .entry(unify_collision_chars(&name))
                .or_insert_with(|| name.clone());
            by_name.insert(name, Arc::new(topic));
        }
        Ok(Topics {
            by_name,
            names_by_id,
            names_by_unified,
            store: Some(store),
        })
    }

    /// The data directory's group commit; `None` in memory.
    pub fn group_commit(&self) -> Option<&Arc<GroupCommit>> {
        self.store.as_ref().map(|s| s.pool.commit())
    }

    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.by_name.get(name).map(|t| t.clone())
    }

    /// The topic with this id, while it exists (a topic created again under its name has
    /// another id).
    pub fn get_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        let name = self.names_by_id.get(&id)?.clone();
        self.get(&name).filter(|topic| topic.id == id)
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
        topic_config::validate(&new.configs)?;
        let policy = LogPolicy::from_configs(&new.configs);
        // Kafka's `validateNewTopicNames`, then its check for an existing topic.
        match self
            .names_by_unified
            .entry(unify_collision_chars(&new.name))
        {
            Entry::Occupied(existing) if *existing.get() == new.name => Err(TopicError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", new.name),
            )),
            Entry::Occupied(existing) => Err(TopicError::new(
                ResponseError::InvalidTopicException,
                format!(
                    "Topic '{}' collides with existing topic: {}",
                    new.name,
                    existing.get()
                ),
            )),
            Entry::Vacant(unified) => {
                let id = Uuid::new_v4();
                let partitions = match &self.store {
                    Some(store) if !validate_only => {
                        let meta = TopicMeta {
                            id,
                            partitions: new.partitions,
                            configs: new.configs.clone(),
                        };
                        let segments = segment_policy(&new.configs, store.default_segment_bytes);
                        let disks = topic_store::create(
                            &store.dir,
                            &new.name,
                            &meta,
                            &store.pool,
                            segments,
                        )
                        .map_err(storage_error)?;
                        disk_logs(disks, policy)
                    }
                    _ => memory_logs(new.partitions, policy),
                };
                let topic = Arc::new(Topic {
                    name: new.name,
                    id,
                    configs: RwLock::new(new.configs),
                    policy: RwLock::new(policy),
                    partitions: RwLock::new(partitions),
                });
                if !validate_only {
                    self.names_by_id.insert(id, topic.name.clone());
                    self.by_name.insert(topic.name.clone(), topic.clone());
                    unified.insert(topic.name.clone());
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
        self.names_by_id.remove(&topic.id);
        self.names_by_unified
            .remove_if(&unify_collision_chars(name), |_, holder| holder == name);
        if let Some(store) = &self.store {
            topic_store::delete(&store.dir, name);
        }
        Ok(topic)
    }

    /// Raises a topic's partition count; Kafka never lowers one (it would lose data and move
    /// every key), and refuses an unchanged count too. `check_added` then sees how many
    /// partitions are added (the request's manual assignments are checked against it).
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
        check_added: impl FnOnce(i32) -> Result<(), TopicError>,
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
        check_added(count - current)?;
        if count > MAX_PARTITIONS {
            return Err(TopicError::new(
                ResponseError::InvalidPartitions,
                format!("Number of partitions {count} is above this broker's limit of {MAX_PARTITIONS}."),
            ));
        }
        if !validate_only {
            let configs = topic.configs();
            let policy = LogPolicy::from_configs(&configs);
            let logs = match &self.store {
                Some(store) => {
                    let segments = segment_policy(&configs, store.default_segment_bytes);
                    let meta = TopicMeta {
                        id: topic.id,
                        partitions: count,
                        configs,
                    };
                    let dir = store.dir.join(name);
                    let disks =
                        topic_store::add_partitions(&dir, current, &meta, &store.pool, segments)
                            .map_err(storage_error)?;
                    disk_logs(disks, policy)
                }
                None => memory_logs(count - current, policy),
            };
            partitions.extend(logs);
        }
        Ok(())
    }

    /// Replaces a topic's configs (AlterConfigs; IncrementalAlterConfigs computes the new set
    /// from the old), as Kafka checks them: nothing changes when one is refused. Applied to every
    /// partition at once: retention by size now, the rest from the next append or background
    /// pass on.
    pub fn alter_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let topic = self.get(name).ok_or_else(TopicError::unknown_topic)?;
        topic_config::validate(&configs)?;
        if validate_only {
            return Ok(());
        }
        // Held throughout, so two alterations of one topic reach its file in the order they
        // take effect.
        let mut current = topic.configs.write();
        let partitions = topic.partitions.read();
        if let Some(store) = &self.store {
            let meta = TopicMeta {
                id: topic.id,
                partitions: partitions.len() as i32,
                configs: configs.clone(),
            };
            topic_store::write_meta(&store.dir.join(name), &meta).map_err(storage_error)?;
            let segments = segment_policy(&configs, store.default_segment_bytes);
            for log in partitions.iter() {
                log.set_segment_bytes(segments.segment_bytes);
            }
        }
        let policy = LogPolicy::from_configs(&configs);
        for log in partitions.iter() {
            log.set_policy(policy);
        }
        *topic.policy.write() = policy;
        *current = configs;
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
        let err = topics
            .add_partitions("orders", 6, false, |_| Ok(()))
            .unwrap_err();
        assert_eq!(
            err.message,
            "The topic orders currently has 12 partition(s); 6 would not be an increase."
        );
        let err = topics
            .add_partitions("orders", 12, false, |_| Ok(()))
            .unwrap_err();
        assert_eq!(err.message, "Topic already has 12 partition(s).");
        topics
            .add_partitions("orders", 24, true, |_| Ok(()))
            .unwrap();
        assert_eq!(topics.get("orders").unwrap().partition_count(), 12);
        topics
            .add_partitions("orders", 24, false, |_| Ok(()))
            .unwrap();
        assert_eq!(topics.get("orders").unwrap().partition_count(), 24);
        assert_eq!(
            topics
                .add_partitions("nope", 2, false, |_| Ok(()))
                .unwrap_err()
                .code,
            ResponseError::UnknownTopicOrPartition
        );
    }

    #[test]
    fn configs_are_checked_like_kafka_and_nothing_is_created_on_error() {
        let topics = Topics::default();
        for (key, value) in [("retention.bytes", "lots"), ("bogus.key", "1")] {
            let mut bad = new("bad", 1);
            bad.configs = BTreeMap::from([(key.to_string(), value.to_string())]);
            assert_eq!(
                topics.create(bad, false).unwrap_err().code,
                ResponseError::InvalidConfig
            );
            assert!(topics.get("bad").is_none());
        }
    }

    #[test]
    fn altered_configs_apply_to_every_partition_and_a_refused_one_changes_nothing() {
        let topics = Topics::default();
        topics.create(new("orders", 2), false).unwrap();
        let compact = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        topics
            .alter_configs("orders", compact.clone(), true)
            .unwrap();
        let topic = topics.get("orders").unwrap();
        assert!(topic.configs().is_empty(), "validate_only");
        topics
            .alter_configs("orders", compact.clone(), false)
            .unwrap();
        assert_eq!(topic.configs(), compact);
        assert!(topic.partitions().iter().all(|p| p.is_compacted()));
        let bad = BTreeMap::from([("segment.ms".to_string(), "0".to_string())]);
        assert_eq!(
            topics.alter_configs("orders", bad, false).unwrap_err().code,
            ResponseError::InvalidConfig
        );
        assert_eq!(topic.configs(), compact);
        assert_eq!(
            topics
                .alter_configs("nope", compact, false)
                .unwrap_err()
                .code,
            ResponseError::UnknownTopicOrPartition
        );
    }

    #[test]
    fn a_creation_that_fails_on_disk_leaves_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("topics-create-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let storage = StorageConfig {
            max_open_files: None,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            flush: FlushDefaults::default(),
        };
        let topics = Topics::open(&dir, storage).unwrap();
        // A file where the topic's folder must go: the last step, the rename, fails.
        std::fs::write(dir.join("orders"), "in the way").unwrap();
        let err = topics.create(new("orders", 500), false).unwrap_err();
        assert_eq!(err.code, ResponseError::KafkaStorageError);
        assert!(topics.get("orders").is_none());
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, vec!["orders".to_string()]);
        std::fs::remove_file(dir.join("orders")).unwrap();
        assert_eq!(
            topics
                .create(new("orders", 500), false)
                .unwrap()
                .partition_count(),
            500
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn adding_partitions_never_empties_a_file_already_there() {
        let dir = std::env::temp_dir().join(format!("topics-grow-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let storage = StorageConfig {
            max_open_files: None,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            flush: FlushDefaults::default(),
        };
        let topics = Topics::open(&dir, storage).unwrap();
        topics.create(new("orders", 2), false).unwrap();
        let stray = dir.join("orders").join(crate::segment::file_name(2, 0));
        std::fs::write(&stray, "data").unwrap();
        let err = topics
            .add_partitions("orders", 3, false, |_| Ok(()))
            .unwrap_err();
        assert_eq!(err.code, ResponseError::KafkaStorageError);
        assert_eq!(std::fs::read(&stray).unwrap(), b"data");
        assert_eq!(topics.get("orders").unwrap().partition_count(), 2);
        // An empty one (an interrupted earlier attempt) is taken over.
        std::fs::write(&stray, "").unwrap();
        topics
            .add_partitions("orders", 3, false, |_| Ok(()))
            .unwrap();
        drop(topics);
        let reopened = Topics::open(&dir, storage).unwrap();
        assert_eq!(reopened.get("orders").unwrap().partition_count(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
