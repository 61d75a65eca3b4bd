//! What every request handler reads: the configuration, our identity, and the topics.

use std::sync::Arc;

use crate::capacity::PartitionBudget;
use crate::config::BrokerConfig;
use crate::faults::Faults;
use crate::fetch_memory::FetchMemory;
use crate::group::GroupCoordinator;
use crate::producer::ProducerIds;
use crate::topics::Topics;
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
}

impl BrokerState {
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }
}
