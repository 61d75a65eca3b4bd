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
    /// Our id in Metadata; also the controller and every partition's leader. With several
    /// `nodes`, the first node's id; the others follow it.
    pub node_id: i32,
    /// Brokers in this process (`--nodes`): node k listens on `listen`'s port + k - 1 (each on a
    /// free port with port 0) and partitions' leaders are spread over them.
    pub nodes: usize,
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
    /// With a data directory: partition files kept open at once (`None`: half the process's
    /// open-files limit); the others are opened when used.
    pub max_open_files: Option<usize>,
    /// With a data directory: the segment size of topics without `segment.bytes` (Kafka's
    /// `log.segment.bytes`).
    pub log_segment_bytes: u64,
    /// With a data directory: Kafka's `log.flush.interval.messages` and
    /// `log.flush.interval.ms`, the defaults of topics' `flush.messages` and `flush.ms` (`None`:
    /// unset, Kafka's default; see docs/broker.md).
    pub log_flush: crate::group_commit::FlushDefaults,
    /// Kafka's `advertised.listeners`: the host and port clients are told to connect to in
    /// Metadata and FindCoordinator answers; `None` advertises the address bound (see
    /// [`BrokerConfig::advertised`]).
    pub advertised_listener: Option<(String, u16)>,
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
    // Transactions and the log's background work.
    /// Kafka's `transaction.max.timeout.ms`: the longest transaction timeout a producer may ask
    /// for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT above it).
    pub transaction_max_timeout_ms: i32,
    /// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often the
    /// coordinator looks for transactions past their timeout, which it aborts.
    pub transaction_abort_interval: Duration,
    /// Kafka's `producer.id.expiration.ms`: a partition forgets a producer id idle that long
    /// (with no transaction open there).
    pub producer_id_expiration_ms: i64,
    /// Kafka's `transactional.id.expiration.ms`: the coordinator forgets a transactional id
    /// idle that long (with no transaction under way).
    pub transactional_id_expiration_ms: i64,
    /// Kafka's `producer.id.expiration.check.interval.ms`: how often both are expired.
    pub producer_id_expiration_check_interval: Duration,
    /// Kafka's `log.retention.check.interval.ms`: how often `retention.ms` is applied.
    pub log_retention_check_interval: Duration,
    /// Kafka's `log.cleaner.backoff.ms`: how often the log cleaner looks for compacted
    /// partitions to clean.
    pub log_cleaner_backoff: Duration,
    /// Kafka's `log.cleaner.dedupe.buffer.size`: the memory one cleaning pass may use for its
    /// map of keys.
    pub log_cleaner_dedupe_buffer_bytes: usize,
    /// Kafka's `offsets.retention.minutes`: how long an Empty group's offsets (and a simple
    /// group's, from their commit) are kept.
    pub offsets_retention: Duration,
    /// Kafka's `offsets.retention.check.interval.ms`: how often expired offsets are removed.
    pub offsets_retention_check_interval: Duration,
}

/// Kafka's controller refuses a request that would add more partitions (`MAX_RECORDS_PER_USER_OP`).
pub const DEFAULT_MAX_PARTITIONS_PER_REQUEST: usize = 10_000;

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            node_id: 1,
            nodes: 1,
            default_partitions: 1,
            auto_create_topics: false,
            max_request_bytes: protocol::frame::DEFAULT_MAX_FRAME_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_connections: 4096,
            faults: Vec::new(),
            data_dir: None,
            group_initial_rebalance_delay: Duration::ZERO,
            metrics: None,
            max_open_files: None,
            log_segment_bytes: crate::topics::DEFAULT_SEGMENT_BYTES,
            log_flush: Default::default(),
            advertised_listener: None,
            max_uncompressed_batch_bytes: 64 << 20,
            max_partitions_per_request: DEFAULT_MAX_PARTITIONS_PER_REQUEST,
            max_partitions: 100_000,
            max_fetch_wait: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            fetch_memory_bytes: 256 << 20,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_interval: Duration::from_secs(10),
            producer_id_expiration_ms: 86_400_000,
            transactional_id_expiration_ms: 604_800_000,
            producer_id_expiration_check_interval: Duration::from_secs(600),
            log_retention_check_interval: Duration::from_secs(300),
            log_cleaner_backoff: Duration::from_secs(15),
            log_cleaner_dedupe_buffer_bytes: 128 << 20,
            offsets_retention: Duration::from_secs(7 * 24 * 3600),
            offsets_retention_check_interval: Duration::from_secs(600),
        }
    }
}

impl BrokerConfig {
    /// What clients are told to connect to, given the address actually bound: the advertised
    /// listener when set; else the bound address, except that a wildcard one (0.0.0.0, ::) is no
    /// address to connect to, so this machine's host name stands in for it, as Kafka does for a
    /// listener without a host.
    pub fn advertised(&self, bound: SocketAddr) -> (String, u16) {
        if let Some((host, port)) = &self.advertised_listener {
            return (host.clone(), *port);
        }
        if bound.ip().is_unspecified() {
            let name = gethostname::gethostname().into_string().unwrap_or_default();
            let host = if name.is_empty() {
                "localhost".to_string()
            } else {
                name
            };
            return (host, bound.port());
        }
        (bound.ip().to_string(), bound.port())
    }

    /// What clients are told to connect to for the node with this index (0 for the first)
    /// bound at `bound`: as [`Self::advertised`], with an advertised listener's port shifted by
    /// the index as the listen ports are. `None` past the last port.
    pub fn advertised_node(&self, bound: SocketAddr, index: usize) -> Option<(String, u16)> {
        let (host, port) = self.advertised(bound);
        if self.advertised_listener.is_none() {
            return Some((host, port));
        }
        let port = u16::try_from(usize::from(port) + index).ok()?;
        Some((host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_address_is_advertised_by_host_name_and_a_listener_overrides_all() {
        let config = BrokerConfig::default();
        let bound: SocketAddr = "127.0.0.1:9092".parse().unwrap();
        assert_eq!(config.advertised(bound), ("127.0.0.1".to_string(), 9092));
        let everywhere: SocketAddr = "0.0.0.0:9093".parse().unwrap();
        let (host, port) = config.advertised(everywhere);
        assert_eq!(port, 9093);
        assert!(!host.is_empty() && host != "0.0.0.0", "{host}");
        let v6: SocketAddr = "[::]:9094".parse().unwrap();
        assert_ne!(config.advertised(v6).0, "::");
        let config = BrokerConfig {
            advertised_listener: Some(("kafka.example".into(), 19092)),
            ..config
        };
        assert_eq!(
            config.advertised(everywhere),
            ("kafka.example".to_string(), 19092)
        );
    }
}
