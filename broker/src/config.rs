//! What a broker is started with.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::faults::Fault;

/// Kafka's `message.max.bytes` default: the largest record batch a produce may carry.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Where to listen; port 0 picks a free port (see [`crate::Broker::addr`]).
    pub listen: SocketAddr,
    /// Our id in Metadata; also the controller and every partition's leader.
    pub node_id: i32,
    /// Partitions of a topic created with `num_partitions = -1` or auto-created.
    pub default_partitions: i32,
    /// Create unknown topics on Metadata (when the client allows it) and on Produce.
    pub auto_create_topics: bool,
    /// Kafka's `socket.request.max.bytes`: larger frames close the connection.
    pub max_request_bytes: usize,
    /// Kafka's `message.max.bytes`: larger batches get MESSAGE_TOO_LARGE.
    pub max_message_bytes: usize,
    /// Connections served at once; further ones wait in the accept queue.
    pub max_connections: usize,
    /// Faults in force from the start (more can be added through [`crate::Broker::faults`]).
    pub faults: Vec<Fault>,
    /// Where topics are stored, and recovered from at start; `None` keeps them in memory.
    pub data_dir: Option<PathBuf>,
    /// Kafka's `group.initial.rebalance.delay.ms`: how long a new group's first rebalance waits
    /// for more members. Kafka defaults to 3 s; 0 here, so a lone consumer starts at once.
    pub group_initial_rebalance_delay: Duration,
    /// Serve Prometheus metrics (partition offsets, consumer lag) over HTTP here; the bound
    /// address is [`crate::Broker::metrics_addr`].
    pub metrics: Option<SocketAddr>,
    // Limits on what one request, one connection or one slow peer can hold.
    /// The most one batch's records may decompress to: a produced batch past it gets
    /// MESSAGE_TOO_LARGE, and no lookup decompresses more. Kafka has no such limit.
    pub max_uncompressed_batch_bytes: usize,
    /// Partitions one CreateTopics or CreatePartitions may add (Kafka's controller: 10,000).
    pub max_partitions_per_request: usize,
    /// Partitions the broker holds at most, however they are created.
    pub max_partitions: usize,
    /// Longest a Fetch waits for data, whatever its `max_wait_ms` (Kafka's clients keep it
    /// below their 30 s request timeout).
    pub max_fetch_wait: Duration,
    /// Longest one response may take to be written; a peer that reads slower is disconnected.
    pub write_timeout: Duration,
    /// Bytes of fetch answers built but not yet written, across all connections.
    pub fetch_memory_bytes: usize,
}

/// Kafka's controller refuses a request that would add more partitions (`MAX_RECORDS_PER_USER_OP`).
pub const DEFAULT_MAX_PARTITIONS_PER_REQUEST: usize = 10_000;

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            node_id: 1,
            default_partitions: 1,
            auto_create_topics: false,
            max_request_bytes: protocol::frame::DEFAULT_MAX_FRAME_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_connections: 4096,
            faults: Vec::new(),
            data_dir: None,
            group_initial_rebalance_delay: Duration::ZERO,
            metrics: None,
            max_uncompressed_batch_bytes: 64 << 20,
            max_partitions_per_request: DEFAULT_MAX_PARTITIONS_PER_REQUEST,
            max_partitions: 100_000,
            max_fetch_wait: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            fetch_memory_bytes: 256 << 20,
        }
    }
}
