//! Fetched data, decoded lazily: a fetch only splits the bytes into batches and checks their
//! CRCs; records are decompressed and decoded when someone iterates over them, and then share
//! the fetched buffer instead of being copied.

use bytes::Bytes;
use protocol::batch::{
    single_batch_header, split_batches, validate_single_batch, BatchHeader, HEADER_LEN,
};

use super::codec::{Reader, Record};
use crate::error::ProtocolError;
use protocol::compression::{Compression, DecompressError};

/// One whole v2 batch, CRC checked (unless the consumer says not to), records not yet decoded.
#[derive(Debug, Clone)]
pub struct FetchedBatch {
    header: BatchHeader,
    data: Bytes,
}

/// The smallest possible record: length, attributes, two deltas, null key, null value, no
/// headers. Used to refuse record counts the data cannot hold.
const MIN_RECORD_LEN: usize = 7;

/// The most one batch's records may decompress to. Kafka sets no such limit, but its consumer
/// streams records while this one holds a batch's records at once; a few KiB of zstd can stand
/// for gigabytes, and a broker must not be able to exhaust a consumer with one batch.
pub const MAX_UNCOMPRESSED_BATCH_BYTES: usize = 128 << 20;

impl FetchedBatch {
    /// Splits a partition's fetched bytes into batches. A broker may cut the last batch at its
    /// size limit; that tail is dropped (the next fetch starts there). A corrupt batch or an old
    /// message format is an error.
    pub fn split(records: Bytes, topic: &str, partition: i32) -> Result<Vec<Self>, ProtocolError> {
        Self::split_checking(records, topic, partition, true)
    }

    /// [`split`](Self::split), checking each batch's CRC only with `check_crcs` (Kafka's consumer
    /// setting of that name).
    pub fn split_checking(
        records: Bytes,
        topic: &str,
        partition: i32,
        check_crcs: bool,
    ) -> Result<Vec<Self>, ProtocolError> {
        let corrupt = |offset: i64, reason: String| ProtocolError::CorruptBatch {
            topic: topic.to_string(),
            partition,
            offset,
            reason,
        };
        let total = records.len();
        let mut batches = Vec::new();
        let mut consumed = 0;
        for (header, data) in split_batches(records.clone()) {
            consumed += data.len();
            let checked = if check_crcs {
                validate_single_batch(&data)
            } else {
                single_batch_header(&data)
            };
            checked.map_err(|e| corrupt(header.base_offset, e.to_string()))?;
            batches.push(Self { header, data });
        }
        // split_batches stops quietly at anything it cannot read; only a cut-off tail is normal.
        let rest = &records[consumed..];
        if rest.len() >= HEADER_LEN {
            if let Err(e) = BatchHeader::parse(rest) {
                let offset = batches
                    .last()
                    .map_or(-1, |b| b.last_offset().saturating_add(1));
                return Err(corrupt(
                    offset,
                    format!("{e} ({} of {total} bytes)", rest.len()),
                ));
            }
        }
        Ok(batches)
    }

    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    pub fn base_offset(&self) -> i64 {
        self.header.base_offset
    }

    /// Saturating: the offsets come from the broker, and a hostile one must not overflow us.
    pub fn last_offset(&self) -> i64 {
        self.header
            .base_offset
            .saturating_add(i64::from(self.header.last_offset_delta))
    }

    pub fn record_count(&self) -> i32 {
        self.header.record_count
    }

    /// Transaction markers, not data.
    pub fn is_control(&self) -> bool {
        self.header.is_control()
    }

    /// The transaction marker this control batch holds; `None` for data (or an unreadable one).
    pub fn marker(&self) -> Option<protocol::control::Marker> {
        protocol::control::marker_of(&self.data, &self.header)
    }

    pub fn compression(&self) -> Option<Compression> {
        Compression::from_attribute_bits(self.header.attributes)
    }

    /// Size on the wire.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.header.record_count == 0
    }

    /// Decompresses (if needed) and iterates over the records.
    pub fn records(&self) -> Result<RecordIter, String> {
        let codec = self
            .compression()
            .ok_or_else(|| format!("unknown compression codec {}", self.header.attributes & 7))?;
        let body = codec
            .decompress(self.data.slice(HEADER_LEN..), MAX_UNCOMPRESSED_BATCH_BYTES)
            .map_err(|e| match e {
                DecompressError::TooLarge { codec, limit } => format!(
                    "{codec} records decompress to more than {} MiB, this client's limit for one batch",
                    limit >> 20
                ),
                corrupt => corrupt.to_string(),
            })?;
        let count = usize::try_from(self.header.record_count).unwrap_or(0);
        if count.saturating_mul(MIN_RECORD_LEN) > body.len() {
            return Err(format!("{count} records announced in {} bytes", body.len()));
        }
        Ok(RecordIter {
            reader: Reader::new(body),
            left: count,
            base_offset: self.header.base_offset,
            base_timestamp: self.header.base_timestamp,
            // With LogAppendTime the broker's time, stored once in the header, applies to all.
            append_time: self
                .header
                .log_append_time()
                .then_some(self.header.max_timestamp),
        })
    }
}

pub struct RecordIter {
    reader: Reader,
    left: usize,
    base_offset: i64,
    base_timestamp: i64,
    append_time: Option<i64>,
}

impl Iterator for RecordIter {
    type Item = Result<Record, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match self.reader.record(self.base_offset, self.base_timestamp) {
            Ok(mut record) => {
                if let Some(t) = self.append_time {
                    record.timestamp = t;
                }
                Some(Ok(record))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }
}

/// What one fetch returned for one partition.
#[derive(Debug, Clone)]
pub struct PartitionRecords {
    pub topic: String,
    pub partition: i32,
    /// The log end as the broker saw it when answering.
    pub high_watermark: i64,
    /// Records before this offset were already consumed (a batch may start earlier).
    pub(crate) from_offset: i64,
    pub batches: Vec<FetchedBatch>,
}

impl PartitionRecords {
    /// The records in offset order, decoded one by one, skipping transaction markers and what
    /// was consumed before.
    pub fn records(&self) -> impl Iterator<Item = Result<Record, ProtocolError>> + '_ {
        self.batches
            .iter()
            .filter(|b| !b.is_control())
            .flat_map(move |batch| {
                let (iter, error) = match batch.records() {
                    Ok(iter) => (Some(iter), None),
                    Err(e) => (None, Some(Err(e))),
                };
                iter.into_iter()
                    .flatten()
                    .chain(error)
                    .map(move |r| r.map_err(|reason| self.corrupt(batch, reason)))
            })
            .filter(move |r| {
                r.as_ref()
                    .map_or(true, |rec| rec.offset >= self.from_offset)
            })
    }

    /// The offset after the last fetched batch: where the next fetch starts.
    pub fn next_offset(&self) -> i64 {
        self.batches.last().map_or(self.from_offset, |b| {
            b.last_offset().saturating_add(1).max(self.from_offset)
        })
    }

    fn corrupt(&self, batch: &FetchedBatch, reason: String) -> ProtocolError {
        ProtocolError::CorruptBatch {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: batch.base_offset(),
            reason,
        }
    }
}

/// One batch of `count` records (value "v") from offset `base`, as a fetch hands it over: what
/// the consumer's and the group's unit tests feed to the code they test.
#[cfg(test)]
pub(crate) fn test_batches(
    topic: &str,
    partition: i32,
    base: i64,
    count: usize,
) -> Vec<FetchedBatch> {
    use crate::record::batch::{BatchBuilder, ProducerIdentity};
    let mut b = BatchBuilder::new(1 << 16);
    for _ in 0..count {
        assert!(b.try_append(0, None, Some(b"v"), &[]));
    }
    let mut bytes =
        bytes::BytesMut::from(&b.finish(Compression::None, ProducerIdentity::NONE).unwrap()[..]);
    protocol::batch::set_base_offset(&mut bytes, base);
    FetchedBatch::split(bytes.freeze(), topic, partition).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::{BatchBuilder, ProducerIdentity};
    use bytes::BytesMut;
    use protocol::batch::set_base_offset;

    fn batch(base: i64, values: &[&str], codec: Compression) -> BytesMut {
        let mut b = BatchBuilder::new(1 << 16);
        for (i, v) in values.iter().enumerate() {
            assert!(b.try_append(1000 + i as i64, Some(b"k"), Some(v.as_bytes()), &[]));
        }
        let mut out = BytesMut::from(&b.finish(codec, ProducerIdentity::NONE).unwrap()[..]);
        set_base_offset(&mut out, base);
        out
    }

    fn values(p: &PartitionRecords) -> Vec<(i64, String)> {
        p.records()
            .map(|r| {
                let r = r.unwrap();
                (
                    r.offset,
                    String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn splits_drops_a_cut_tail_and_skips_consumed_offsets() {
        let mut data = batch(10, &["a", "b", "c"], Compression::None);
        data.extend_from_slice(&batch(13, &["d", "e"], Compression::Gzip));
        let full = data.len();
        data.extend_from_slice(&batch(15, &["f"], Compression::None)[..30]);
        let batches = FetchedBatch::split(data.freeze(), "t", 0).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches.iter().map(FetchedBatch::len).sum::<usize>(), full);
        let p = PartitionRecords {
            topic: "t".into(),
            partition: 0,
            high_watermark: 16,
            from_offset: 11,
            batches,
        };
        assert_eq!(
            values(&p),
            vec![
                (11, "b".to_string()),
                (12, "c".to_string()),
                (13, "d".to_string()),
                (14, "e".to_string())
            ]
        );
        assert_eq!(p.next_offset(), 15);
    }

    #[test]
    fn a_bad_crc_or_an_old_format_is_reported() {
        let mut data = batch(0, &["a"], Compression::None);
        let last = data.len() - 1;
        data[last] ^= 0xff;
        let data = data.freeze();
        let err = FetchedBatch::split(data.clone(), "t", 3).unwrap_err();
        assert!(err.to_string().contains("t-3"), "{err}");
        // check.crcs=false takes the batch as it is, as Kafka's consumer does.
        let unchecked = FetchedBatch::split_checking(data, "t", 3, false).unwrap();
        assert_eq!(unchecked.len(), 1);

        let mut old = batch(0, &["a"], Compression::None);
        old[16] = 1;
        assert!(FetchedBatch::split(old.freeze(), "t", 0).is_err());
    }

    #[test]
    fn log_append_time_replaces_record_timestamps() {
        let mut data = batch(0, &["a", "b"], Compression::None);
        // Set the timestamp-type bit and a broker time, then fix the CRC as a broker would.
        data[22] |= 0x08;
        data[35..43].copy_from_slice(&5555i64.to_be_bytes());
        let crc = protocol::batch::crc32c(&data[21..]);
        data[17..21].copy_from_slice(&crc.to_be_bytes());
        let batches = FetchedBatch::split(data.freeze(), "t", 0).unwrap();
        let stamps: Vec<i64> = batches[0]
            .records()
            .unwrap()
            .map(|r| r.unwrap().timestamp)
            .collect();
        assert_eq!(stamps, vec![5555, 5555]);
    }

    #[test]
    fn an_impossible_record_count_is_an_error_not_a_huge_loop() {
        let mut data = batch(0, &["a"], Compression::None);
        data[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = protocol::batch::crc32c(&data[21..]);
        data[17..21].copy_from_slice(&crc.to_be_bytes());
        let batches = FetchedBatch::split(data.freeze(), "t", 0).unwrap();
        assert!(batches[0].records().is_err());
        let p = PartitionRecords {
            topic: "t".into(),
            partition: 0,
            high_watermark: 1,
            from_offset: 0,
            batches,
        };
        let all: Vec<_> = p.records().collect();
        assert_eq!(all.len(), 1);
        assert!(all[0].is_err());
    }

    #[test]
    fn a_compression_bomb_is_refused_not_decompressed() {
        // One zstd frame of 1 MiB of zeros, repeated: frames concatenate, so 130 of them are
        // 130 MiB of records in a few KiB.
        let mut frame = BytesMut::new();
        Compression::Zstd
            .compress(&vec![0u8; 1 << 20], &mut frame)
            .unwrap();
        let mut data = batch(0, &["a"], Compression::Zstd);
        data.truncate(HEADER_LEN);
        for _ in 0..130 {
            data.extend_from_slice(&frame);
        }
        let len = (data.len() - 12) as i32;
        data[8..12].copy_from_slice(&len.to_be_bytes());
        let crc = protocol::batch::crc32c(&data[21..]);
        data[17..21].copy_from_slice(&crc.to_be_bytes());
        let batches = FetchedBatch::split(data.freeze(), "t", 0).unwrap();
        let err = batches[0].records().err().expect("refused");
        assert_eq!(
            err,
            "zstd records decompress to more than 128 MiB, this client's limit for one batch"
        );
    }
}
