//! Records on the wire: the v2 record format ([`codec`]), building a batch for the producer
//! ([`batch`]), codecs ([`compression`]) and fetched batches decoded on demand ([`fetched`]).

pub mod batch;
pub mod codec;
pub mod compression;
pub mod fetched;

pub use batch::{BatchBuilder, ProducerIdentity};
pub use codec::{Header, Record, RecordHeader};
pub use compression::Compression;
pub use fetched::{FetchedBatch, PartitionRecords, RecordIter};
