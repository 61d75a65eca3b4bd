//! A single-node broker that speaks the Kafka wire protocol, for workshops and tests.
//!
//! Request flow: [`server`] accepts connections (bounded by a semaphore) and spawns
//! [`connection::serve`], which reads length-prefixed frames with a size cap and hands each to
//! [`handler::handle`]. The handler peeks the header, refuses what Kafka refuses, decodes the body
//! with the `kafka-protocol` crate and routes it by API key to one module per API. Those read and
//! write the [`topics`] registry, whose partitions are [`log::PartitionLog`]s: raw record batches
//! with an offset index, each behind its own lock. Consumer-group APIs go to the [`group`]
//! coordinator (one lock per group); [`lag`] combines its committed offsets with the logs, and
//! `--metrics` serves both as Prometheus text.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let config = broker::BrokerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
//! let broker = broker::Broker::start(config).await?;
//! println!("listening on {}", broker.addr());
//! broker.shutdown().await;
//! # Ok(()) }
//! ```

mod accept;
mod answers;
pub mod capacity;
pub mod cluster;
pub mod config;
mod connection;
mod disk_log;
mod durable;
pub mod faults;
pub mod fetch_memory;
mod file_pool;
pub mod group;
pub mod group_commit;
mod handler;
mod identity;
pub mod lag;
pub mod log;
mod log_tasks;
pub mod metrics;
pub mod producer;
pub mod producer_expiry;
mod segment;
mod server;
mod state;
mod stored;
pub mod topic_config;
pub mod topic_error;
mod topic_store;
pub mod topics;
pub mod txn;
mod txn_end;
mod writeback;

pub use config::BrokerConfig;
pub use server::Broker;
pub use state::BrokerState;
