//! What every request handler reads: the configuration, our identity, and the topics.

use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::faults::Faults;
use crate::group::GroupCoordinator;
use crate::producer::ProducerIds;
use crate::topics::Topics;

#[derive(Debug)]
pub struct BrokerState {
    pub config: BrokerConfig,
    /// The host and port clients are told to connect to ([`crate::BrokerConfig::advertised`]).
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Kafka's cluster ids are 22-character base64 UUIDs; any stable string works for clients.
    pub cluster_id: String,
    pub topics: Topics,
    pub producer_ids: ProducerIds,
    pub faults: Arc<Faults>,
    pub groups: GroupCoordinator,
}

impl BrokerState {
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }
}
