//! What every request handler reads: the configuration, our identity, and the topics; and the
//! topic changes that must stay within the partition budget (every way a partition comes into
//! being goes through them).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;

use crate::capacity::PartitionBudget;
use crate::cluster::Cluster;
use crate::config::BrokerConfig;
use crate::faults::Faults;
use crate::fetch_memory::FetchMemory;
use crate::group::GroupCoordinator;
use crate::producer::ProducerIds;
use crate::topic_error::TopicError;
use crate::topics::{NewTopic, Topic, Topics};
use crate::txn::TxnCoordinator;

#[derive(Debug)]
pub struct BrokerState {
    pub config: BrokerConfig,
    /// The host and port clients are told to connect to ([`crate::BrokerConfig::advertised`]).
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Kafka's cluster ids are 22-character base64 UUIDs; any stable string works for clients.
    pub cluster_id: String,
    pub topics: Topics,
    /// Partitions held against `--max-partitions`; topics are created through it.
    pub partitions: PartitionBudget,
    pub producer_ids: ProducerIds,
    pub faults: Arc<Faults>,
    /// Fetch answers built and not yet written, against `fetch_memory_bytes`.
    pub fetch_memory: Arc<FetchMemory>,
    pub groups: GroupCoordinator,
    pub txns: TxnCoordinator,
    /// The nodes (one unless `--nodes`), who leads each partition and who coordinates what.
    pub cluster: Cluster,
}

impl BrokerState {
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }
}

impl BrokerState {
    /// Creates a topic (or checks that it could be, with `validate_only`) within the budget.
    pub fn create_topic(
        &self,
        new: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let reservation = self
            .partitions
            .reserve(usize::try_from(new.partitions).unwrap_or(0))?;
        let topic = self.topics.create(new, validate_only)?;
        if !validate_only {
            reservation.keep();
        }
        Ok(topic)
    }

    /// The topic, auto-created with the default partition count if it does not exist yet.
    pub fn topic_or_create(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        if let Some(topic) = self.topics.get(name) {
            return Ok(topic);
        }
        let partitions = self.config.default_partitions;
        let reservation = self
            .partitions
            .reserve(usize::try_from(partitions).unwrap_or(0))?;
        let new = NewTopic {
            name: name.to_string(),
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        };
        match self.topics.create(new, false) {
            Ok(topic) => {
                reservation.keep();
                Ok(topic)
            }
            // Another request created it in between: its partitions are counted already.
            Err(e) if e.code == ResponseError::TopicAlreadyExists => {
                self.topics.get(name).ok_or_else(TopicError::unknown_topic)
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes a topic, then every group's offsets of it (a failure to write their removal is
    /// the answer's error; the topic is gone either way, and the offsets of a topic that no
    /// longer exists are dropped at the next start).
    pub fn delete_topic(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        let topic = self.topics.delete(name)?;
        self.partitions
            .release(usize::try_from(topic.partition_count()).unwrap_or(0));
        self.groups.delete_topic_offsets(name).map_err(|code| {
            TopicError::new(code, "the topic's committed offsets could not be removed")
        })?;
        Ok(topic)
    }

    /// Grows a topic to `count` partitions within the budget, once `check_added` accepts the
    /// number of partitions that adds.
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
        check_added: impl FnOnce(i32) -> Result<(), TopicError>,
    ) -> Result<(), TopicError> {
        let current = self.topics.get(name).map_or(0, |t| t.partition_count());
        let reservation = self
            .partitions
            .reserve(usize::try_from(count.saturating_sub(current)).unwrap_or(0))?;
        self.topics
            .add_partitions(name, count, validate_only, check_added)?;
        if !validate_only {
            reservation.keep();
        }
        Ok(())
    }
}
