//! Consumer groups, as Kafka's classic group protocol runs them from the member's side: members
//! subscribe to topics, the coordinator (a broker) collects them into generations, one member
//! (the leader) runs a partition [`assignor`] over everyone's subscription, and each member
//! consumes its share, heartbeats, and commits offsets for the group.
//!
//! ```no_run
//! # async fn demo() -> client::Result<()> {
//! use client::{Client, ClientConfig, GroupConfig, GroupConsumer};
//! let kafka = Client::connect(ClientConfig::new("127.0.0.1:9092")).await?;
//! let mut member = GroupConsumer::new(kafka, GroupConfig::new("billing"))?;
//! member.subscribe(["orders"])?;
//! loop {
//!     for part in member.poll().await? {
//!         for record in &part.records {
//!             println!("{}-{} @{}", part.topic, part.partition, record.offset);
//!         }
//!     }
//! }
//! # }
//! ```
//!
//! Module map:
//! - [`consumer`]: [`GroupConsumer`], the application's handle; what a rebalance means for the
//!   member's partitions (revoke, assign, committed offsets).
//! - [`rebalance`]: one JoinGroup/SyncGroup round, and the leader's assignment.
//! - [`state`]: the member state machine (phase, generation, rejoin, clocks), without I/O.
//! - [`heartbeat`]: the background task: heartbeats and the `max.poll.interval` watch.
//! - [`member`]: what the poll loop and the background tasks share; the ordered commit queue.
//! - [`coordinator`]: finding the coordinator and talking to it.
//! - [`requests`], [`offsets`]: the group APIs by version; committed offsets.
//! - [`protocol`]: subscription and assignment bytes (the "consumer" protocol).
//! - [`assignor`]: range, roundrobin, cooperative-sticky.
//! - [`listener`]: rebalance callbacks and events. [`buffer`]: records held back by
//!   `max.poll.records`. [`config`]: settings under Kafka's names.

pub mod assignor;
pub mod buffer;
pub mod config;
pub mod consumer;
pub mod coordinator;
pub mod heartbeat;
pub mod listener;
pub mod member;
pub mod offsets;
pub mod protocol;
pub mod rebalance;
pub mod requests;
pub mod state;

pub use assignor::{Assignor, RebalanceProtocol};
pub use buffer::PolledRecords;
pub use config::GroupConfig;
pub use consumer::GroupConsumer;
pub use listener::{RebalanceEvent, RebalanceListener};
pub use member::CommitFuture;
pub use offsets::CommittedOffsets;
pub use state::Generation;
