//! The wire layer that the broker and the client share.
//!
//! Message encoding itself comes from the `kafka-protocol` crate, generated from Kafka's own
//! message specs. This crate holds only what that crate does not: framing with a size cap
//! ([`frame`]), frames written around record batches instead of copied with them ([`pieces`]),
//! the versions the broker advertises ([`versions`]), a zero-copy view of v2 record batch
//! headers ([`batch`]), transaction markers ([`control`]), bounded decompression
//! ([`compression`]) and a walk over a batch's records that decodes none of them ([`records`]),
//! Kafka's default partitioner ([`partitioner`]), Kafka's naming rules ([`names`]) and what a
//! time lag is ([`lag`]). Nothing here does I/O policy or holds domain state.

pub mod batch;
pub mod compression;
pub mod control;
pub mod frame;
pub mod lag;
pub mod names;
pub mod partitioner;
pub mod pieces;
pub mod records;
pub mod versions;

pub use kafka_protocol;
