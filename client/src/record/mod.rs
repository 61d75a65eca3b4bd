//! Records on the wire: the v2 record format ([`codec`]), building a batch for the producer
//! ([`batch`]) and fetched batches decoded on demand ([`fetched`]); the codecs are
//! [`protocol::compression`]'s, shared with the broker.

pub mod batch;
pub mod codec;
pub mod fetched;

pub use batch::{BatchBuilder, ProducerIdentity};
pub use codec::{Header, Record, RecordHeader};
pub use fetched::{FetchedBatch, PartitionRecords, RecordIter};
pub use protocol::compression::Compression;
