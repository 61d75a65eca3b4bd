//! The records inside one v2 batch, walked without being decoded: each record's length, and on
//! request its timestamp and offset deltas, never its key, value or headers.
//!
//! Two callers need this much and no more. A broker checks that a produced batch holds exactly
//! the records its header counts (Kafka's `LogValidator` refuses anything else), and a timestamp
//! lookup finds the first record at or after a time inside the one batch the index points at.
//! Uncompressed records are walked in place; compressed ones through a [`Compression::reader`]
//! window, so the cost is bounded by the limit, whatever the header claims.
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint | key, value, headers
//! ```

use std::io::{BufRead, BufReader};

use crate::batch::{BatchHeader, HEADER_LEN};
use crate::compression::{Compression, DecompressError, Limited};

/// Why a batch's records do not match its header. The messages of the count checks are Kafka's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    #[error("unknown compression codec {0}")]
    UnknownCodec(i16),
    #[error(transparent)]
    Decompress(#[from] DecompressError),
    #[error("Incorrect declared batch size, premature EOF reached")]
    PrematureEnd,
    #[error("Incorrect declared batch size, records still remaining in file")]
    Remaining,
    #[error("Invalid record: {0}")]
    Malformed(&'static str),
}

/// Where one record sits in its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordPosition {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
}

/// Window of decompressed bytes read at a time.
const STREAM_WINDOW: usize = 32 * 1024;

enum Input<'a> {
    Plain(&'a [u8]),
    Stream(BufReader<Limited<'a>>, Compression),
}

impl Input<'_> {
    fn byte(&mut self) -> Result<Option<u8>, RecordsError> {
        match self {
            Input::Plain(data) => Ok(data.split_first().map(|(&b, rest)| {
                *data = rest;
                b
            })),
            Input::Stream(reader, codec) => {
                let codec = *codec;
                let buf = reader
                    .fill_buf()
                    .map_err(|e| DecompressError::from_io(codec, e))?;
                let Some(&b) = buf.first() else {
                    return Ok(None);
                };
                reader.consume(1);
                Ok(Some(b))
            }
        }
    }

    fn skip(&mut self, mut n: usize) -> Result<(), RecordsError> {
        match self {
            Input::Plain(data) => {
                *data = data.get(n..).ok_or(RecordsError::PrematureEnd)?;
                Ok(())
            }
            Input::Stream(reader, codec) => {
                let codec = *codec;
                while n > 0 {
                    let available = reader
                        .fill_buf()
                        .map_err(|e| DecompressError::from_io(codec, e))?
                        .len();
                    if available == 0 {
                        return Err(RecordsError::PrematureEnd);
                    }
                    let step = available.min(n);
                    reader.consume(step);
                    n -= step;
                }
                Ok(())
            }
        }
    }

    /// A zigzag varint of at most `max_bytes` bytes; the count of bytes read is added to `used`.
    fn varint(&mut self, max_bytes: usize, used: &mut usize) -> Result<i64, RecordsError> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let b = self.byte()?.ok_or(RecordsError::PrematureEnd)?;
            *used += 1;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err(RecordsError::Malformed("varint longer than its type"))
    }
}

/// The records of one batch, in order, as many as its header counts.
pub struct RecordWalk<'a> {
    input: Input<'a>,
    left: usize,
}

impl<'a> RecordWalk<'a> {
    /// Walks `batch` (a whole batch, `header` its parsed header), decompressing at most `limit`
    /// bytes of records.
    pub fn new(batch: &'a [u8], header: &BatchHeader, limit: usize) -> Result<Self, RecordsError> {
        let codec = Compression::from_attribute_bits(header.attributes)
            .ok_or(RecordsError::UnknownCodec(header.compression()))?;
        let body = batch.get(HEADER_LEN..).unwrap_or_default();
        let input = match codec {
            Compression::None => Input::Plain(body),
            codec => Input::Stream(
                BufReader::with_capacity(STREAM_WINDOW, codec.reader(body, limit)?),
                codec,
            ),
        };
        Ok(Self {
            input,
            left: usize::try_from(header.record_count).unwrap_or(0),
        })
    }

    /// The body length of the next record; `None` once the header's count is reached.
    fn length(&mut self) -> Result<Option<usize>, RecordsError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let length = self.input.varint(5, &mut 0)?;
        usize::try_from(length)
            .map(Some)
            .map_err(|_| RecordsError::Malformed("negative record length"))
    }

    /// Steps over the next record, reading only its length; false after the last one.
    pub fn skip(&mut self) -> Result<bool, RecordsError> {
        let Some(length) = self.length()? else {
            return Ok(false);
        };
        self.input.skip(length)?;
        Ok(true)
    }

    /// The next record's deltas, stepping over the rest of it.
    pub fn next_position(&mut self) -> Result<Option<RecordPosition>, RecordsError> {
        let Some(length) = self.length()? else {
            return Ok(None);
        };
        let mut used = 0;
        self.input.byte()?.ok_or(RecordsError::PrematureEnd)?; // attributes
        used += 1;
        let timestamp_delta = self.input.varint(10, &mut used)?;
        let offset_delta = self.input.varint(5, &mut used)? as i32;
        let rest = length
            .checked_sub(used)
            .ok_or(RecordsError::Malformed("record fields run past its length"))?;
        self.input.skip(rest)?;
        Ok(Some(RecordPosition {
            offset_delta,
            timestamp_delta,
        }))
    }

    /// Whether the next record has a key (a non-null one), stepping over the rest of it.
    pub fn next_has_key(&mut self) -> Result<Option<bool>, RecordsError> {
        let Some(length) = self.length()? else {
            return Ok(None);
        };
        let mut used = 0;
        self.input.byte()?.ok_or(RecordsError::PrematureEnd)?; // attributes
        used += 1;
        self.input.varint(10, &mut used)?; // timestamp delta
        self.input.varint(5, &mut used)?; // offset delta
        let key_length = self.input.varint(5, &mut used)?;
        let rest = length
            .checked_sub(used)
            .ok_or(RecordsError::Malformed("record fields run past its length"))?;
        self.input.skip(rest)?;
        Ok(Some(key_length >= 0))
    }

    /// Checks that nothing follows the counted records.
    pub fn finish(mut self) -> Result<(), RecordsError> {
        match self.input.byte()? {
            None => Ok(()),
            Some(_) => Err(RecordsError::Remaining),
        }
    }
}

/// Checks that `batch` holds exactly the records its header counts, decompressing at most `limit`
/// bytes; uncompressed, this reads one varint per record.
pub fn check_records(batch: &[u8], header: &BatchHeader, limit: usize) -> Result<(), RecordsError> {
    if header.compression() == 0 {
        // The produce hot path: a tight loop over the slice.
        return check_plain(
            batch.get(HEADER_LEN..).unwrap_or_default(),
            header.record_count,
        );
    }
    let mut walk = RecordWalk::new(batch, header, limit)?;
    while walk.skip()? {}
    walk.finish()
}

/// [`check_records`] for a compacted topic, which also refuses a record without a key: Kafka's
/// cleaner keeps the last record of each key, so a record without one could never be kept.
/// `Ok(false)` when some record has no key.
pub fn check_records_keyed(
    batch: &[u8],
    header: &BatchHeader,
    limit: usize,
) -> Result<bool, RecordsError> {
    let mut walk = RecordWalk::new(batch, header, limit)?;
    let mut keyed = true;
    while let Some(has_key) = walk.next_has_key()? {
        keyed &= has_key;
    }
    walk.finish()?;
    Ok(keyed)
}

/// Where one record lies in a batch's uncompressed records, and what the log cleaner reads of
/// it: its key and whether its value is null (a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSlice {
    /// The whole record, its length prefix included: what a rewritten batch copies.
    pub raw: std::ops::Range<usize>,
    /// `None` for a null key.
    pub key: Option<std::ops::Range<usize>>,
    pub tombstone: bool,
    pub offset_delta: i32,
    pub timestamp_delta: i64,
}

/// The `count` records of uncompressed record bytes, sliced.
pub fn slice_records(records: &[u8], count: i32) -> Result<Vec<RecordSlice>, RecordsError> {
    let mut slices = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(1 << 16));
    let mut at = 0;
    for _ in 0..count.max(0) {
        let (length, used) = slice_varint(records.get(at..).unwrap_or_default())?;
        let body_start = at + used;
        let length = usize::try_from(length)
            .map_err(|_| RecordsError::Malformed("negative record length"))?;
        let end = body_start
            .checked_add(length)
            .filter(|end| *end <= records.len())
            .ok_or(RecordsError::PrematureEnd)?;
        let body = &records[body_start..end];
        let mut input = Input::Plain(body.get(1..).ok_or(RecordsError::PrematureEnd)?);
        let mut used = 1;
        let timestamp_delta = input.varint(10, &mut used)?;
        let offset_delta = input.varint(5, &mut used)? as i32;
        let key_length = input.varint(5, &mut used)?;
        let key = match usize::try_from(key_length) {
            Ok(len) => {
                let from = body_start + used;
                used += len;
                Some(from..from + len)
            }
            Err(_) => None,
        };
        let mut rest = Input::Plain(body.get(used..).ok_or(RecordsError::PrematureEnd)?);
        let value_length = rest.varint(5, &mut 0)?;
        slices.push(RecordSlice {
            raw: at..end,
            key,
            tombstone: value_length < 0,
            offset_delta,
            timestamp_delta,
        });
        at = end;
    }
    if at != records.len() {
        return Err(RecordsError::Remaining);
    }
    Ok(slices)
}

fn check_plain(mut records: &[u8], count: i32) -> Result<(), RecordsError> {
    for _ in 0..count.max(0) {
        let (length, used) = slice_varint(records)?;
        let length = usize::try_from(length)
            .map_err(|_| RecordsError::Malformed("negative record length"))?;
        records = records
            .get(used..)
            .and_then(|rest| rest.get(length..))
            .ok_or(RecordsError::PrematureEnd)?;
    }
    if records.is_empty() {
        Ok(())
    } else {
        Err(RecordsError::Remaining)
    }
}

/// A zigzag varint of at most 5 bytes at the start of `data`, and its length.
fn slice_varint(data: &[u8]) -> Result<(i64, usize), RecordsError> {
    slice_zigzag(data, 5)
}

/// A zigzag varint of at most `max_bytes` bytes (5 for an int, 10 for a long) at the start of
/// `data`, and its length.
fn slice_zigzag(data: &[u8], max_bytes: usize) -> Result<(i64, usize), RecordsError> {
    let mut value: u64 = 0;
    for (i, &b) in data.iter().take(max_bytes).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(((value >> 1) as i64 ^ -((value & 1) as i64), i + 1));
        }
    }
    Err(if data.len() < max_bytes {
        RecordsError::PrematureEnd
    } else {
        RecordsError::Malformed("varint longer than its type")
    })
}

/// Writes `value` as a zigzag varint (a record's varint and varlong fields), at most 10 bytes.
pub fn put_zigzag(out: &mut impl bytes::BufMut, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Appends to `out` the record `slice` of `records` with its timestamp delta replaced by
/// `timestamp_delta`, and its length prefix re-encoded (a delta of another size changes the
/// record's length). For a batch whose base timestamp changes, as when the log cleaner sets a
/// delete horizon: each record keeps its own timestamp.
pub fn put_restamped(
    records: &[u8],
    slice: &RecordSlice,
    timestamp_delta: i64,
    out: &mut Vec<u8>,
) -> Result<(), RecordsError> {
    let raw = records
        .get(slice.raw.clone())
        .ok_or(RecordsError::PrematureEnd)?;
    let (_, length_len) = slice_varint(raw)?;
    let body = &raw[length_len..];
    let attributes = *body.first().ok_or(RecordsError::PrematureEnd)?;
    let (_, delta_len) = slice_zigzag(&body[1..], 10)?;
    let rest = &body[1 + delta_len..];
    let mut restamped = Vec::with_capacity(body.len() + 10);
    restamped.push(attributes);
    put_zigzag(&mut restamped, timestamp_delta);
    restamped.extend_from_slice(rest);
    put_zigzag(out, restamped.len() as i64);
    out.extend_from_slice(&restamped);
    Ok(())
}

/// `(timestamp, offset)` of the first record of `batch` stamped at or after `timestamp`, as
/// Kafka answers ListOffsets; `None` when there is none. At most `limit` bytes are decompressed.
pub fn first_at_or_after(
    batch: &[u8],
    header: &BatchHeader,
    timestamp: i64,
    limit: usize,
) -> Result<Option<(i64, i64)>, RecordsError> {
    if header.log_append_time() {
        // The broker's time is in the header, and it is every record's timestamp.
        return Ok((header.max_timestamp >= timestamp)
            .then_some((header.max_timestamp, header.base_offset)));
    }
    let mut walk = RecordWalk::new(batch, header, limit)?;
    while let Some(record) = walk.next_position()? {
        let at = header.base_timestamp.saturating_add(record.timestamp_delta);
        if at >= timestamp {
            let offset = header
                .base_offset
                .saturating_add(record.offset_delta.into());
            return Ok(Some((at, offset)));
        }
    }
    Ok(None)
}

/// The timestamp of the first record of `batch` at or after `offset` (the oldest record a
/// reader at `offset` has yet to read), as a consumer would see it; `None` when every record of
/// the batch is before `offset`. At most `limit` bytes are decompressed.
pub fn timestamp_at_or_after_offset(
    batch: &[u8],
    header: &BatchHeader,
    offset: i64,
    limit: usize,
) -> Result<Option<i64>, RecordsError> {
    if header.log_append_time() {
        return Ok((header.last_offset() >= offset).then_some(header.max_timestamp));
    }
    let mut walk = RecordWalk::new(batch, header, limit)?;
    while let Some(record) = walk.next_position()? {
        let at = header
            .base_offset
            .saturating_add(record.offset_delta.into());
        if at >= offset {
            return Ok(Some(
                header.base_timestamp.saturating_add(record.timestamp_delta),
            ));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::tests::test_record;
    use crate::batch::validate_single_batch;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::records::{
        Compression as Codec, Record, RecordBatchEncoder, RecordEncodeOptions,
    };

    fn encoded(timestamps: &[i64], compression: Codec) -> BytesMut {
        let records: Vec<Record> = timestamps
            .iter()
            .enumerate()
            .map(|(i, &t)| test_record(i, t, Bytes::from(vec![b'v'; i * 10])))
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
        buf
    }

    const CODECS: [Codec; 5] = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];

    #[test]
    fn a_restamped_record_keeps_its_fields_and_takes_the_new_delta_and_length() {
        let batch = encoded(&[100, 300, 200], Codec::None);
        let records = &batch[crate::batch::HEADER_LEN..];
        let slices = slice_records(records, 3).unwrap();
        // From one byte of delta to nine (a base timestamp moved a day past the records).
        let shift = -86_400_000_000_000;
        let mut out = Vec::new();
        for s in &slices {
            put_restamped(records, s, s.timestamp_delta + shift, &mut out).unwrap();
        }
        let restamped = slice_records(&out, 3).unwrap();
        assert!(out.len() > records.len());
        for (before, after) in slices.iter().zip(&restamped) {
            assert_eq!(after.timestamp_delta, before.timestamp_delta + shift);
            assert_eq!(after.offset_delta, before.offset_delta);
            assert_eq!(after.tombstone, before.tombstone);
            let key = |r: &[u8], s: &RecordSlice| s.key.clone().map(|k| r[k].to_vec());
            assert_eq!(key(&out, after), key(records, before));
            // Past the key, the value and headers are the same bytes.
            let tail =
                |r: &[u8], s: &RecordSlice| r[s.key.clone().unwrap().end..s.raw.end].to_vec();
            assert_eq!(tail(&out, after), tail(records, before));
        }
    }

    #[test]
    fn finds_the_first_record_at_or_after_a_time_in_every_codec() {
        // Out of order on purpose: CreateTime is the producer's, and Kafka answers the first
        // record in offset order whose timestamp reaches the target.
        let stamps = [100, 300, 200, 400, 400];
        for codec in CODECS {
            let mut batch = encoded(&stamps, codec);
            crate::batch::set_base_offset(&mut batch, 1000);
            let header = validate_single_batch(&batch).unwrap();
            let find = |t| first_at_or_after(&batch, &header, t, 1 << 20).unwrap();
            assert_eq!(find(0), Some((100, 1000)), "{codec:?}");
            assert_eq!(find(150), Some((300, 1001)), "{codec:?}");
            assert_eq!(find(300), Some((300, 1001)), "{codec:?}");
            assert_eq!(find(301), Some((400, 1003)), "{codec:?}");
            assert_eq!(find(401), None, "{codec:?}");
            check_records(&batch, &header, 1 << 20).unwrap();
        }
    }

    #[test]
    fn reads_the_timestamp_of_the_record_at_an_offset_in_every_codec() {
        let stamps = [100, 300, 200, 400, 400];
        for codec in CODECS {
            let mut batch = encoded(&stamps, codec);
            crate::batch::set_base_offset(&mut batch, 1000);
            let header = validate_single_batch(&batch).unwrap();
            let at = |o| timestamp_at_or_after_offset(&batch, &header, o, 1 << 20).unwrap();
            assert_eq!(
                at(0),
                Some(100),
                "{codec:?}: before the batch, its first record"
            );
            assert_eq!(at(1000), Some(100), "{codec:?}");
            assert_eq!(
                at(1002),
                Some(200),
                "{codec:?}: the record's own, not the max"
            );
            assert_eq!(at(1004), Some(400), "{codec:?}");
            assert_eq!(at(1005), None, "{codec:?}: past the batch");
        }
        // Past the decompression limit: an error, never a larger allocation.
        let mut batch = encoded(&[1; 50], Codec::Gzip);
        crate::batch::set_base_offset(&mut batch, 0);
        let header = validate_single_batch(&batch).unwrap();
        assert!(matches!(
            timestamp_at_or_after_offset(&batch, &header, 49, 64),
            Err(RecordsError::Decompress(DecompressError::TooLarge { .. }))
        ));
    }

    /// Rewrites the record count and fixes the CRC, as a hostile producer would.
    fn with_count(mut batch: BytesMut, count: i32) -> BytesMut {
        batch[57..61].copy_from_slice(&count.to_be_bytes());
        let crc = crate::batch::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        batch
    }

    #[test]
    fn a_count_that_does_not_match_the_records_is_refused() {
        for codec in CODECS {
            let more = with_count(encoded(&[1, 2, 3], codec), 4);
            let header = validate_single_batch(&more).unwrap();
            assert_eq!(
                check_records(&more, &header, 1 << 20),
                Err(RecordsError::PrematureEnd),
                "{codec:?}"
            );
            let fewer = with_count(encoded(&[1, 2, 3], codec), 2);
            let header = validate_single_batch(&fewer).unwrap();
            assert_eq!(
                check_records(&fewer, &header, 1 << 20),
                Err(RecordsError::Remaining),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn a_compressed_batch_is_walked_within_its_limit() {
        let stamps: Vec<i64> = (0..2000).collect();
        let batch = encoded(&stamps, Codec::Gzip);
        let header = validate_single_batch(&batch).unwrap();
        // About 20 MB of values: walked within 32 MiB, refused at 1 MiB before the end.
        check_records(&batch, &header, 32 << 20).unwrap();
        assert!(matches!(
            check_records(&batch, &header, 1 << 20),
            Err(RecordsError::Decompress(DecompressError::TooLarge { .. }))
        ));
        assert!(matches!(
            first_at_or_after(&batch, &header, 1999, 1 << 20),
            Err(RecordsError::Decompress(DecompressError::TooLarge { .. }))
        ));
        // A record found before the limit is reached is answered.
        assert_eq!(
            first_at_or_after(&batch, &header, 10, 1 << 20),
            Ok(Some((10, 10)))
        );
    }

    #[test]
    fn a_negative_or_overrunning_record_length_is_malformed() {
        let mut batch = encoded(&[5], Codec::None);
        batch[HEADER_LEN] = 0x01; // zigzag -1
        let header = crate::batch::BatchHeader::parse(&batch).unwrap();
        assert_eq!(
            check_records(&batch, &header, 1 << 20),
            Err(RecordsError::Malformed("negative record length"))
        );
        batch[HEADER_LEN] = 0x02; // a length of 1: too short for its own fields
        assert_eq!(
            first_at_or_after(&batch, &header, 0, 1 << 20),
            Err(RecordsError::Malformed("record fields run past its length"))
        );
    }

    #[test]
    fn keys_are_found_in_every_codec_and_records_are_sliced() {
        for codec in CODECS {
            let batch = encoded(&[1, 2, 3], codec);
            let header = validate_single_batch(&batch).unwrap();
            assert_eq!(
                check_records_keyed(&batch, &header, 1 << 20),
                Ok(true),
                "{codec:?}"
            );
        }
        let mut records: Vec<Record> = (0..3)
            .map(|i| test_record(i, 100 + i as i64, Bytes::from(vec![b'v'; i])))
            .collect();
        records[1].key = None;
        records[2].value = None;
        let mut batch = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Codec::None,
        };
        RecordBatchEncoder::encode(&mut batch, &records, &options).unwrap();
        let header = validate_single_batch(&batch).unwrap();
        assert_eq!(check_records_keyed(&batch, &header, 1 << 20), Ok(false));
        let body = &batch[HEADER_LEN..];
        let slices = slice_records(body, 3).unwrap();
        let keys: Vec<Option<&[u8]>> = slices
            .iter()
            .map(|s| s.key.clone().map(|k| &body[k]))
            .collect();
        assert_eq!(keys, vec![Some(&b"k0"[..]), None, Some(&b"k2"[..])]);
        let tombstones: Vec<bool> = slices.iter().map(|s| s.tombstone).collect();
        assert_eq!(tombstones, vec![false, false, true]);
        assert_eq!(slices[2].offset_delta, 2);
        assert_eq!(slices[2].timestamp_delta, 2);
        assert_eq!(slices.last().unwrap().raw.end, body.len());
        assert_eq!(slice_records(body, 2), Err(RecordsError::Remaining));
        assert_eq!(slice_records(body, 4), Err(RecordsError::PrematureEnd));
    }

    #[test]
    fn log_append_time_answers_from_the_header() {
        let mut batch = encoded(&[1, 2], Codec::Zstd);
        batch[22] |= 0x08;
        batch[35..43].copy_from_slice(&777i64.to_be_bytes());
        let header = crate::batch::BatchHeader::parse(&batch).unwrap();
        assert_eq!(
            first_at_or_after(&batch, &header, 700, 0),
            Ok(Some((777, 0)))
        );
        assert_eq!(first_at_or_after(&batch, &header, 778, 0), Ok(None));
    }
}
