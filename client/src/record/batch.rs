//! Builds one v2 record batch in one buffer: records are encoded into it as they arrive, the
//! header is written in front when the batch is closed. No record value is ever built, which is
//! what keeps the producer's hot path free of per-record allocations.
//!
//! The `kafka-protocol` crate's encoder is not used here: it needs a `Record` value per record
//! and splits non-idempotent records into one batch each unless offsets and sequences are faked
//! (see the reference, section 4). Producer id, epoch and base sequence are parameters of
//! [`BatchBuilder::finish`], so the idempotent producer only has to pass real ones.

use bytes::{BufMut, Bytes, BytesMut};
use protocol::batch::HEADER_LEN;

use super::codec::{Header, RecordFields};
use protocol::compression::Compression;

/// Who wrote a batch, for the broker's duplicate and ordering checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdentity {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Sequence of the batch's first record; the others follow one by one.
    pub base_sequence: i32,
}

impl ProducerIdentity {
    /// A producer without idempotence.
    pub const NONE: Self = Self {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// Bytes of a batch header that `batchLength` does not count (baseOffset and itself).
const LOG_OVERHEAD: usize = 12;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
/// The producer does not know the leader epoch; Kafka's producer writes -1 too.
const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// Attribute bit 4: the batch belongs to a transaction.
const TRANSACTIONAL: i16 = 0x10;

#[derive(Debug)]
pub struct BatchBuilder {
    buf: BytesMut,
    records: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    /// The batch is full once the next record would take it past this many bytes.
    size_limit: usize,
}

impl BatchBuilder {
    pub fn new(size_limit: usize) -> Self {
        Self::reusing(BytesMut::new(), size_limit)
    }

    /// A builder writing into `buf`, the buffer of a batch that is done with (its bytes are
    /// overwritten). Memory written recently costs no page faults and is likelier to be cached.
    pub fn reusing(mut buf: BytesMut, size_limit: usize) -> Self {
        buf.clear();
        buf.reserve(size_limit.max(HEADER_LEN + 64));
        buf.put_bytes(0, HEADER_LEN);
        Self {
            buf,
            records: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            size_limit,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    pub fn record_count(&self) -> i32 {
        self.records
    }

    /// Bytes so far, uncompressed, header included.
    pub fn size(&self) -> usize {
        self.buf.len()
    }

    /// Bytes a record would add to a batch that holds records already (an upper bound for the
    /// first record too, whose deltas are 0).
    pub fn record_size(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> usize {
        self.fields(timestamp, key, value, headers).encoded_len()
    }

    /// Appends a record, unless the batch holds records already and this one would take it
    /// past its size limit; the caller then starts a new batch. A record bigger than the limit
    /// still goes into an empty batch, alone, as Kafka's producer does.
    pub fn try_append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> bool {
        if self.records == 0 {
            self.base_timestamp = timestamp;
            self.max_timestamp = timestamp;
        }
        let fields = self.fields(timestamp, key, value, headers);
        if self.records > 0 && self.buf.len() + fields.encoded_len() > self.size_limit {
            return false;
        }
        fields.encode(&mut self.buf);
        self.records += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp);
        true
    }

    fn fields<'a>(
        &self,
        timestamp: i64,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
        headers: &'a [Header<'a>],
    ) -> RecordFields<'a> {
        let base = if self.records == 0 {
            timestamp
        } else {
            self.base_timestamp
        };
        RecordFields {
            timestamp_delta: timestamp.wrapping_sub(base),
            offset_delta: self.records,
            key,
            value,
            headers,
        }
    }

    /// Compresses the records if asked, writes the header and the CRC-32C, and returns the batch
    /// as it goes on the wire (base offset 0: the broker assigns offsets).
    pub fn finish(
        self,
        compression: Compression,
        identity: ProducerIdentity,
    ) -> Result<Bytes, String> {
        self.finish_with(compression, identity, false)
    }

    /// [`finish`](Self::finish), marking the batch as part of a transaction (attribute bit 4)
    /// when `transactional`.
    pub fn finish_with(
        self,
        compression: Compression,
        identity: ProducerIdentity,
        transactional: bool,
    ) -> Result<Bytes, String> {
        let mut out = match compression {
            Compression::None => self.buf,
            codec => {
                let records = &self.buf[HEADER_LEN..];
                let mut out = BytesMut::with_capacity(HEADER_LEN + records.len() / 2);
                out.put_bytes(0, HEADER_LEN);
                codec.compress(records, &mut out)?;
                out
            }
        };
        let batch_length = i32::try_from(out.len() - LOG_OVERHEAD)
            .map_err(|_| format!("a batch of {} bytes is too large", out.len()))?;
        let mut header = &mut out[..HEADER_LEN];
        header.put_i64(0); // baseOffset
        header.put_i32(batch_length);
        header.put_i32(NO_PARTITION_LEADER_EPOCH);
        header.put_i8(2); // magic
        header.put_u32(0); // crc, below
                           // CreateTime, and the transactional bit.
        header
            .put_i16(compression.attribute_bits() | if transactional { TRANSACTIONAL } else { 0 });
        header.put_i32(self.records - 1); // lastOffsetDelta
        header.put_i64(self.base_timestamp);
        header.put_i64(self.max_timestamp);
        header.put_i64(identity.producer_id);
        header.put_i16(identity.producer_epoch);
        header.put_i32(identity.base_sequence);
        header.put_i32(self.records);
        let crc = protocol::batch::crc32c(&out[ATTRIBUTES_AT..]);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(out.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;
    use protocol::batch::validate_single_batch;

    fn build(n: usize, compression: Compression, identity: ProducerIdentity) -> Bytes {
        let mut b = BatchBuilder::new(1 << 20);
        for i in 0..n {
            let key = format!("key-{i}");
            let value = format!("value-{i}");
            let headers = [Header {
                key: "h",
                value: Some(b"v"),
            }];
            assert!(b.try_append(
                1_700_000_000_000 + i as i64,
                Some(key.as_bytes()),
                Some(value.as_bytes()),
                &headers,
            ));
        }
        b.finish(compression, identity).unwrap()
    }

    #[test]
    fn many_records_make_one_batch_that_the_crate_and_the_broker_accept() {
        for codec in Compression::ALL {
            let batch = build(100, codec, ProducerIdentity::NONE);
            let header = validate_single_batch(&batch).unwrap();
            assert_eq!(header.record_count, 100, "{codec}");
            assert_eq!(header.last_offset_delta, 99);
            assert_eq!(header.base_sequence, -1);
            assert_eq!(header.producer_id, -1);
            assert_eq!(header.compression(), codec.attribute_bits());
            assert_eq!(header.base_timestamp, 1_700_000_000_000);
            assert_eq!(header.max_timestamp, 1_700_000_000_099);

            let mut bytes = batch.clone();
            let decoded = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
            assert_eq!(decoded.len(), 1, "{codec}: exactly one batch");
            let records = &decoded[0].records;
            assert_eq!(records.len(), 100);
            assert_eq!(records[42].offset, 42);
            assert_eq!(records[42].timestamp, 1_700_000_000_042);
            assert_eq!(records[42].key.as_deref(), Some(&b"key-42"[..]));
            assert_eq!(records[42].value.as_deref(), Some(&b"value-42"[..]));
            assert_eq!(records[42].headers.len(), 1);
        }
    }

    #[test]
    fn producer_identity_lands_in_the_header() {
        let id = ProducerIdentity {
            producer_id: 7,
            producer_epoch: 2,
            base_sequence: 40,
        };
        let batch = build(3, Compression::None, id);
        let header = validate_single_batch(&batch).unwrap();
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (7, 2, 40)
        );
        assert_eq!(header.last_sequence(), 42);
        let mut bytes = batch;
        let decoded = RecordBatchDecoder::decode(&mut bytes).unwrap();
        let seqs: Vec<i32> = decoded.records.iter().map(|r| r.sequence).collect();
        assert_eq!(seqs, vec![40, 41, 42]);
    }

    #[test]
    fn a_full_batch_refuses_the_next_record_but_an_empty_one_takes_a_big_record() {
        let mut b = BatchBuilder::new(200);
        let value = [7u8; 50];
        let mut appended = 0;
        while b.try_append(0, None, Some(&value), &[]) {
            appended += 1;
        }
        assert_eq!(appended, 2);
        assert!(b.size() <= 200);
        let mut big = BatchBuilder::new(200);
        assert!(big.try_append(0, None, Some(&[0u8; 1000]), &[]));
        assert!(!big.try_append(0, None, Some(&[0u8; 1]), &[]));
        let batch = big
            .finish(Compression::None, ProducerIdentity::NONE)
            .unwrap();
        assert_eq!(validate_single_batch(&batch).unwrap().record_count, 1);
    }

    #[test]
    fn null_keys_values_and_earlier_timestamps_encode() {
        let mut b = BatchBuilder::new(1024);
        assert!(b.try_append(1000, None, None, &[]));
        assert!(b.try_append(900, Some(b""), Some(b""), &[]));
        let size = b.size();
        assert_eq!(b.record_size(900, None, None, &[]), 8);
        let mut batch = b.finish(Compression::None, ProducerIdentity::NONE).unwrap();
        assert_eq!(batch.len(), size);
        let header = validate_single_batch(&batch).unwrap();
        assert_eq!((header.base_timestamp, header.max_timestamp), (1000, 1000));
        let decoded = RecordBatchDecoder::decode(&mut batch).unwrap();
        assert_eq!(decoded.records[0].key, None);
        assert_eq!(decoded.records[1].key.as_deref(), Some(&b""[..]));
        assert_eq!(decoded.records[1].timestamp, 900);
    }
}
