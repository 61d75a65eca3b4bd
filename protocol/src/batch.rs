//! A view over the 61-byte header of a v2 record batch (magic 2), read in place.
//!
//! The broker stores batches exactly as producers sent them and only rewrites `baseOffset`, which
//! the CRC does not cover, so neither produce nor fetch decodes a single record (but for a batch
//! recompressed into its topic's `compression.type`, [`recompressed`]). Layout: Kafka's
//! `DefaultRecordBatch` (see `shared/reference/kafka-protocol.md`, section 4).

use bytes::{Bytes, BytesMut};

use crate::compression::Compression;

/// Bytes before the first record.
pub const HEADER_LEN: usize = 61;
/// `baseOffset` and `batchLength` are not counted in `batchLength`.
const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;

/// Attribute bits.
const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;
/// KIP-534: the base timestamp holds the batch's delete horizon, set by the log cleaner.
pub const DELETE_HORIZON_BIT: i16 = 0x40;

/// The header fields of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

/// Why bytes are not one valid v2 batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("record batch of {0} bytes is shorter than its {HEADER_LEN}-byte header")]
    TooShort(usize),
    #[error("record batch has magic {0}; only magic 2 is supported")]
    UnsupportedMagic(i8),
    #[error("record batch declares {declared} bytes but {actual} were sent")]
    LengthMismatch { declared: i64, actual: usize },
    #[error("more than one record batch where exactly one is allowed")]
    MultipleBatches,
    #[error("record batch CRC {stored:#010x} does not match its content ({computed:#010x})")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("record batch has a negative record count or offset delta")]
    NegativeCount,
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl BatchHeader {
    /// Reads the header at the start of `buf` without checking the CRC or the total length.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < HEADER_LEN {
            return Err(BatchError::TooShort(buf.len()));
        }
        let magic = buf[16] as i8;
        if magic != 2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        Ok(Self {
            base_offset: i64_at(buf, 0),
            batch_length: i32_at(buf, 8),
            partition_leader_epoch: i32_at(buf, 12),
            magic,
            crc: i32_at(buf, 17) as u32,
            attributes: i16_at(buf, 21),
            last_offset_delta: i32_at(buf, 23),
            base_timestamp: i64_at(buf, 27),
            max_timestamp: i64_at(buf, 35),
            producer_id: i64_at(buf, 43),
            producer_epoch: i16_at(buf, 51),
            base_sequence: i32_at(buf, 53),
            record_count: i32_at(buf, 57),
        })
    }

    /// The whole batch's size on the wire, prefix included.
    pub fn total_len(&self) -> i64 {
        self.batch_length as i64 + LOG_OVERHEAD as i64
    }

    /// Saturating: a hostile base offset must not overflow (the delta was checked non-negative
    /// only by [`validate_single_batch`]).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(self.last_offset_delta as i64)
    }

    /// 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression(&self) -> i16 {
        self.attributes & COMPRESSION_MASK
    }

    pub fn log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// When the log cleaner may drop the batch's tombstones (KIP-534): set by the first
    /// cleaning that kept one, in the base timestamp, so it travels with the batch (to disk,
    /// across restarts, to replicas); the records' deltas are relative to it then.
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_BIT != 0).then_some(self.base_timestamp)
    }

    /// The sequence of the batch's last record, wrapping past `i32::MAX` to 0 as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        (last % (i32::MAX as i64 + 1)) as i32
    }
}

/// Checks that `buf` is exactly one v2 batch with a valid CRC-32C, as a broker must before
/// appending it, and returns its header.
pub fn validate_single_batch(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = single_batch_header(buf)?;
    let computed = crc32c(&buf[CRC_START..]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// Checks that `buf` is exactly one v2 batch, all but its CRC (a consumer with Kafka's
/// `check.crcs=false`), and returns its header.
pub fn single_batch_header(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let declared = header.total_len();
    if declared < HEADER_LEN as i64 || declared > buf.len() as i64 {
        return Err(BatchError::LengthMismatch {
            declared,
            actual: buf.len(),
        });
    }
    if declared < buf.len() as i64 {
        return Err(BatchError::MultipleBatches);
    }
    if header.record_count < 0 || header.last_offset_delta < 0 {
        return Err(BatchError::NegativeCount);
    }
    Ok(header)
}

/// CRC-32C (Castagnoli), the checksum of a v2 batch from its attributes to its end.
pub fn crc32c(data: &[u8]) -> u32 {
    // CRC-32/ISCSI is CRC-32C under its catalogue name; the value fits 32 bits.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32
}

/// Overwrites `baseOffset`. The CRC starts after it, so the batch stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Stamps a batch with the broker's time, as a topic with `message.timestamp.type=LogAppendTime`
/// does: the timestamp-type bit and the max timestamp (every record's timestamp from then on),
/// and the CRC they are covered by.
pub fn set_log_append_time(batch: &mut [u8], time: i64) {
    let attributes = i16_at(batch, 21) | TIMESTAMP_TYPE_BIT;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&time.to_be_bytes());
    let crc = crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// `batch` (one v2 batch, its `header`) with its records recompressed into `codec` at `level`,
/// as Kafka's `LogValidator` rebuilds a batch sent in another codec than its topic's
/// `compression.type`: the header is kept but for the codec bits, the length and the CRC. The
/// records are decompressed to at most `limit` bytes.
pub fn recompressed(
    batch: &Bytes,
    header: &BatchHeader,
    codec: Compression,
    level: i32,
    limit: usize,
) -> Result<Bytes, String> {
    let source = Compression::from_attribute_bits(header.attributes)
        .ok_or_else(|| format!("unknown compression codec {}", header.compression()))?;
    let records = source
        .decompress(batch.slice(HEADER_LEN..), limit)
        .map_err(|e| e.to_string())?;
    let mut out = BytesMut::with_capacity(HEADER_LEN + records.len());
    out.extend_from_slice(&batch[..HEADER_LEN]);
    let attributes = (header.attributes & !COMPRESSION_MASK) | codec.attribute_bits();
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    codec.compress_at(&records, level, &mut out)?;
    let batch_length = i32::try_from(out.len() - LOG_OVERHEAD)
        .map_err(|_| format!("a batch of {} bytes", out.len()))?;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

/// Splits concatenated batches into whole batches, dropping an incomplete tail (a broker may cut
/// the last batch of a fetch at `max_bytes`). Stops at the first header that cannot be read.
pub fn split_batches(mut buf: Bytes) -> impl Iterator<Item = (BatchHeader, Bytes)> {
    std::iter::from_fn(move || {
        let header = BatchHeader::parse(&buf).ok()?;
        let len = usize::try_from(header.total_len()).ok()?;
        if len < HEADER_LEN || len > buf.len() {
            return None;
        }
        Some((header, buf.split_to(len)))
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
        TimestampType,
    };

    #[test]
    fn crc32c_is_castagnoli() {
        // The catalogue's check value, and RFC 3720's 32 bytes of zeros.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[0; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[]), 0);
    }

    /// Record `i` of a test batch: key `k{i}`, `value`, and `timestamp`.
    pub(crate) fn test_record(i: usize, timestamp: i64, value: Bytes) -> Record {
        Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            delete_horizon: false,
            offset: i as i64,
            // The crate starts a new batch whenever offset - sequence changes.
            sequence: i as i32 - 1,
            timestamp,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(value),
            headers: Default::default(),
        }
    }

    fn records(n: usize) -> Vec<Record> {
        (0..n)
            .map(|i| {
                test_record(
                    i,
                    1_700_000_000_000 + i as i64,
                    Bytes::from(format!("v{i}")),
                )
            })
            .collect()
    }

    fn encoded(n: usize) -> BytesMut {
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &records(n), &options).unwrap();
        buf
    }

    #[test]
    fn reads_the_header_the_crate_wrote() {
        let buf = encoded(3);
        let header = validate_single_batch(&buf).unwrap();
        assert_eq!(header.base_offset, 0);
        assert_eq!(header.last_offset_delta, 2);
        assert_eq!(header.record_count, 3);
        assert_eq!(header.total_len(), buf.len() as i64);
        assert_eq!(header.base_timestamp, 1_700_000_000_000);
        assert_eq!(header.max_timestamp, 1_700_000_000_002);
        assert_eq!(header.producer_id, -1);
        assert_eq!(header.compression(), 0);
    }

    #[test]
    fn rewriting_base_offset_keeps_the_crc_valid() {
        let mut buf = encoded(2);
        set_base_offset(&mut buf, 42);
        assert_eq!(validate_single_batch(&buf).unwrap().base_offset, 42);
        let mut bytes = buf.freeze();
        let decoded = RecordBatchDecoder::decode(&mut bytes).unwrap();
        let offsets: Vec<i64> = decoded.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![42, 43]);
    }

    #[test]
    fn detects_corruption_truncation_and_extra_batches() {
        let mut buf = encoded(2);
        buf[22] ^= 0x01; // an attribute bit, covered by the CRC
        assert!(matches!(
            validate_single_batch(&buf),
            Err(BatchError::CrcMismatch { .. })
        ));
        let buf = encoded(2);
        assert!(matches!(
            validate_single_batch(&buf[..buf.len() - 1]),
            Err(BatchError::LengthMismatch { .. })
        ));
        let mut two = encoded(1);
        two.extend_from_slice(&encoded(1));
        assert_eq!(
            validate_single_batch(&two),
            Err(BatchError::MultipleBatches)
        );
        assert_eq!(
            validate_single_batch(&buf[..60]),
            Err(BatchError::TooShort(60))
        );
        let mut old = encoded(1);
        old[16] = 1;
        assert_eq!(
            validate_single_batch(&old),
            Err(BatchError::UnsupportedMagic(1))
        );
    }

    #[test]
    fn a_negative_batch_length_is_refused_not_trusted() {
        let mut buf = encoded(1);
        buf[8..12].copy_from_slice(&(-100i32).to_be_bytes());
        assert!(matches!(
            validate_single_batch(&buf),
            Err(BatchError::LengthMismatch { .. })
        ));
        assert_eq!(split_batches(buf.freeze()).count(), 0);
    }

    #[test]
    fn split_drops_an_incomplete_tail() {
        let mut buf = encoded(2);
        buf.extend_from_slice(&encoded(3));
        let full = buf.len();
        let cut = buf.freeze().slice(..full - 5);
        let batches: Vec<_> = split_batches(cut).collect();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].0.record_count, 2);
    }

    #[test]
    fn log_append_time_sets_the_bit_and_the_max_timestamp_and_keeps_the_crc_valid() {
        let mut buf = encoded(3);
        set_log_append_time(&mut buf, 42_000);
        let header = validate_single_batch(&buf).unwrap();
        assert!(header.log_append_time());
        assert_eq!(
            (header.max_timestamp, header.base_timestamp),
            (42_000, 1_700_000_000_000)
        );
        let decoded = RecordBatchDecoder::decode(&mut buf.freeze()).unwrap();
        assert!(decoded
            .records
            .iter()
            .all(|r| r.timestamp_type == TimestampType::LogAppend));
    }

    #[test]
    fn last_sequence_wraps_past_i32_max() {
        let mut header = BatchHeader::parse(&encoded(3)).unwrap();
        header.base_sequence = i32::MAX - 1;
        header.last_offset_delta = 2;
        assert_eq!(header.last_sequence(), 0);
        header.base_sequence = 5;
        assert_eq!(header.last_sequence(), 7);
    }
}
