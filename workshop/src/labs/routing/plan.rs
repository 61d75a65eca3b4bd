//! The lab's flags.

use clap::value_parser;

/// `workshop routing`: stale partition maps, NOT_LEADER_OR_FOLLOWER, MOVED and ASK.
#[derive(Debug, Clone, clap::Args)]
pub struct RoutingArgs {
    /// Records each Kafka client sends before the leader move, and again after it
    #[arg(long, value_name = "N", default_value_t = 120,
          value_parser = value_parser!(u32).range(12..=100_000))]
    pub records: u32,
    /// Brokers of the embedded cluster (with --bootstrap, the cluster's own)
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = value_parser!(u32).range(1..=9))]
    pub nodes: u32,
    /// With --bootstrap: where the cluster serves Prometheus metrics (`broker --metrics`), to
    /// read its per-node redirect counters
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics: Option<String>,
}

/// The topic: enough partitions that `orders-7` exists, as in the source's log line.
pub const PARTITIONS: i32 = 12;

/// The partition whose leader moves.
pub const MOVED_PARTITION: i32 = 7;

/// The Redis model: user 42's keys, requests after each key migrates, requests afterwards.
pub const REDIS_KEYS: usize = 32;
pub const REDIS_REQUESTS_PER_KEY: usize = 4;
pub const REDIS_REQUESTS_AFTER: usize = 100;
