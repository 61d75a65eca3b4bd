//! Transaction markers: the control batches a transaction coordinator writes to each partition
//! of a transaction when it ends, and how a reader tells a commit from an abort.
//!
//! A marker is a batch with attribute bits 4 (transactional) and 5 (control), the transaction's
//! producer id and epoch, base sequence -1 and one record: key = version (i16, 0) and type (i16:
//! 0 abort, 1 commit), value = version (i16, 0) and the coordinator epoch (i32). Kafka's
//! `EndTransactionMarker`; consumers never see it as a record.

use bytes::{BufMut, BytesMut};

use crate::batch::{crc32c, BatchHeader, HEADER_LEN};

/// Attribute bits of a marker batch: transactional and control, uncompressed, CreateTime.
pub const MARKER_ATTRIBUTES: i16 = 0x30;

const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// How a transaction ended, as its marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Abort,
    Commit,
}

/// The marker batch (base offset 0: the log assigns it) ending `producer_id`'s transaction.
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: Marker,
    coordinator_epoch: i32,
    timestamp: i64,
) -> BytesMut {
    let kind = match marker {
        Marker::Abort => ABORT,
        Marker::Commit => COMMIT,
    };
    let mut record = BytesMut::with_capacity(20);
    record.put_u8(0); // attributes
    record.put_u8(0); // timestamp delta (varlong 0)
    record.put_u8(0); // offset delta (varint 0)
    record.put_u8(4 << 1); // key length 4, zigzag
    record.put_i16(0); // key version
    record.put_i16(kind);
    record.put_u8(6 << 1); // value length 6, zigzag
    record.put_i16(0); // value version
    record.put_i32(coordinator_epoch);
    record.put_u8(0); // no headers
    let mut batch = BytesMut::with_capacity(HEADER_LEN + record.len() + 1);
    batch.put_i64(0); // base offset
    batch.put_i32((HEADER_LEN - 12 + 1 + record.len()) as i32);
    batch.put_i32(-1); // partition leader epoch
    batch.put_i8(2);
    batch.put_u32(0); // crc, below
    batch.put_i16(MARKER_ATTRIBUTES);
    batch.put_i32(0); // last offset delta
    batch.put_i64(timestamp);
    batch.put_i64(timestamp);
    batch.put_i64(producer_id);
    batch.put_i16(producer_epoch);
    batch.put_i32(-1); // base sequence
    batch.put_i32(1); // records
    batch.put_u8((record.len() as u8) << 1); // record length, zigzag
    batch.put_slice(&record);
    let crc = crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// The marker a control batch holds; `None` for a batch that is not a (readable) marker.
pub fn marker_of(batch: &[u8], header: &BatchHeader) -> Option<Marker> {
    if !header.is_control() || header.compression() != 0 || header.record_count < 1 {
        return None;
    }
    let record = batch.get(HEADER_LEN..)?;
    let key_len_at = after_fixed_fields(record)?;
    let key_len = record.get(key_len_at)?;
    if *key_len != 4 << 1 {
        return None;
    }
    let key = record.get(key_len_at + 1..key_len_at + 5)?;
    match i16::from_be_bytes([key[2], key[3]]) {
        ABORT => Some(Marker::Abort),
        COMMIT => Some(Marker::Commit),
        _ => None,
    }
}

/// The position of the key length in a record: after its length (varint), attributes (one
/// byte), timestamp delta and offset delta (varints).
fn after_fixed_fields(record: &[u8]) -> Option<usize> {
    let at = skip_varint(record, 0)?;
    let at = at + 1; // attributes
    let at = skip_varint(record, at)?;
    skip_varint(record, at)
}

fn skip_varint(data: &[u8], from: usize) -> Option<usize> {
    (from..data.len().min(from + 10))
        .find(|&i| data[i] & 0x80 == 0)
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_single_batch;
    use kafka_protocol::records::RecordBatchDecoder;

    #[test]
    fn markers_are_valid_control_batches_the_crate_reads() {
        for marker in [Marker::Abort, Marker::Commit] {
            let mut batch = marker_batch(42, 3, marker, 7, 1_700_000_000_000);
            crate::batch::set_base_offset(&mut batch, 99);
            let header = validate_single_batch(&batch).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!(
                (
                    header.base_offset,
                    header.producer_id,
                    header.producer_epoch
                ),
                (99, 42, 3)
            );
            assert_eq!((header.record_count, header.base_sequence), (1, -1));
            assert_eq!(marker_of(&batch, &header), Some(marker));
            let mut bytes = batch.freeze();
            let decoded = RecordBatchDecoder::decode(&mut bytes).unwrap();
            let record = &decoded.records[0];
            assert!(record.control && record.transactional);
            let key = record.key.as_ref().unwrap();
            let kind = if marker == Marker::Commit { 1 } else { 0 };
            assert_eq!(&key[..], &[0, 0, 0, kind]);
            assert_eq!(&record.value.as_ref().unwrap()[..], &[0, 0, 0, 0, 0, 7]);
        }
    }
}
