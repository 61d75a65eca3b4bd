//! The workshop's Kafka client: a producer, an assign-mode consumer and topic administration,
//! speaking only Kafka's own APIs at versions agreed through ApiVersions, so it works against
//! the workshop broker and Apache Kafka alike.
//!
//! ```no_run
//! # async fn demo() -> client::Result<()> {
//! use client::{Client, ClientConfig, Producer, ProducerConfig, ProducerRecord};
//! let kafka = Client::connect(ClientConfig::new("127.0.0.1:9092")).await?;
//! let producer = Producer::new(kafka.clone(), ProducerConfig::default())?;
//! let sent = producer
//!     .send_and_wait(ProducerRecord::new("orders").key("order-8842").value("paid"))
//!     .await?;
//! println!("partition {} offset {}", sent.partition, sent.offset);
//! # Ok(()) }
//! ```
//!
//! How a request travels: [`Producer`], [`Consumer`] or [`Admin`] asks the [`Client`] for the
//! leader (from the [`metadata`] cache, refreshed when stale or after routing errors) and its
//! [`connection`], builds the request at the negotiated version, and the connection's
//! messenger matches the answer by correlation id. Errors are layered as in [`error`].
//!
//! Module map:
//! - [`connection`]: messenger (pipelining, timeouts, poisoning), version negotiation
//!   (KIP-511), reconnect on next use.
//! - [`client`]: bootstrap, connections per broker, metadata refresh policy.
//! - [`metadata`]: the cluster and topic cache (pure data).
//! - [`record`]: the v2 record format, batch building, compression, lazy fetched batches.
//! - [`producer`]: partitioner, accumulator (batching, linger, ordering), sender (retries),
//!   idempotence (producer ids, sequences, fatal errors), client-side lost acknowledgements.
//! - [`consumer`]: assign, seek, positions, the fetch loop.
//! - [`group`]: consumer groups: a member with heartbeats, rebalances, commits; assignors.
//! - [`offsets`]: ListOffsets, shared by consumer and admin.
//! - [`coordinator`]: FindCoordinator, for groups (consumer, admin) and transactional ids
//!   (producer).
//! - [`admin`]: create/delete/grow/describe topics and their configs; list/describe/delete
//!   consumer groups, their committed offsets, lag and time lag; reset and delete offsets; wait
//!   for a group to catch up.
//! - [`lag_status`]: a Burrow-style status (OK, WARN, STALL, STOP) from a window of lag
//!   observations.
//! - [`check`]: per-key order, checked as records arrive or over a whole topic.
//! - [`retry`]: the backoff policy.

pub mod admin;
pub mod check;
pub mod client;
pub mod connection;
pub mod consumer;
pub mod coordinator;
pub mod error;
pub mod group;
pub mod lag_status;
pub mod metadata;
pub mod offsets;
pub mod producer;
pub mod record;
pub mod retry;
pub mod signals;

pub use admin::{Admin, NewTopic};
pub use client::{Client, ClientConfig};
pub use consumer::{Consumer, ConsumerConfig, OffsetReset, SeekTo, TopicPartition};
pub use error::{
    Error, ProtocolError, Result, ServerError, TransportError, COMMIT_FAILED_NOT_IN_GROUP,
    COMMIT_FAILED_REBALANCED,
};
pub use group::{
    CommitFuture, GroupConfig, GroupConsumer, PolledRecords, RebalanceEvent, RebalanceListener,
};
/// The API keys, for [`Client::api_version`].
pub use kafka_protocol::messages::ApiKey;
pub use metadata::{BrokerInfo, ClusterInfo, PartitionInfo, TopicInfo};
pub use offsets::{ListedOffset, OffsetSpec};
pub use producer::{
    AckLoss, Acks, DeliveryFuture, LostAck, Producer, ProducerConfig, ProducerIdAndEpoch,
    ProducerRecord, RecordMetadata,
};
pub use record::{Compression, Header, PartitionRecords, Record, RecordHeader};
pub use retry::RetryPolicy;
