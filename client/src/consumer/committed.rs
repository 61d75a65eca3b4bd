//! read_committed: dropping the batches of aborted transactions, as Kafka's consumer does with
//! the aborted-transactions list of a Fetch answer.
//!
//! The broker lists each aborted transaction overlapping the answer as (producer id, first
//! offset). Walking the batches in offset order, a producer's transaction counts as aborted
//! from the batch that reaches its first offset until that producer's abort marker; its
//! transactional batches in between are skipped. Markers are never records (see
//! [`crate::record::PartitionRecords::records`]) but are kept, so positions move past them.

use std::collections::HashSet;

use protocol::control::Marker;

use crate::record::FetchedBatch;

/// `batches` without those of the `aborted` transactions (producer id, first offset).
pub fn without_aborted(batches: Vec<FetchedBatch>, aborted: &[(i64, i64)]) -> Vec<FetchedBatch> {
    if aborted.is_empty() {
        return batches;
    }
    let mut pending: Vec<(i64, i64)> = aborted.to_vec();
    // Taken from the end: the earliest first offset last.
    pending.sort_by_key(|&(_, first)| std::cmp::Reverse(first));
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut kept = Vec::with_capacity(batches.len());
    for batch in batches {
        while pending
            .last()
            .is_some_and(|&(_, first)| first <= batch.last_offset())
        {
            if let Some((producer, _)) = pending.pop() {
                aborting.insert(producer);
            }
        }
        let producer = batch.header().producer_id;
        if batch.is_control() {
            if batch.marker() == Some(Marker::Abort) {
                aborting.remove(&producer);
            }
            kept.push(batch);
            continue;
        }
        if batch.header().is_transactional() && aborting.contains(&producer) {
            continue;
        }
        kept.push(batch);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use protocol::batch::set_base_offset;
    use protocol::control::marker_batch;

    use crate::record::{BatchBuilder, Compression, ProducerIdentity};

    /// One transactional data batch of `producer` at `base`, one record.
    fn data(producer: i64, base: i64, transactional: bool) -> Bytes {
        let mut builder = BatchBuilder::new(1 << 10);
        assert!(builder.try_append(0, None, Some(b"v"), &[]));
        let identity = ProducerIdentity {
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: 0,
        };
        let batch = builder
            .finish_with(Compression::None, identity, transactional)
            .unwrap();
        let mut batch = bytes::BytesMut::from(&batch[..]);
        set_base_offset(&mut batch, base);
        let crc = protocol::batch::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        batch.freeze()
    }

    fn marker(producer: i64, base: i64, kind: Marker) -> Bytes {
        let mut batch = marker_batch(producer, 0, kind, 0, 0);
        set_base_offset(&mut batch, base);
        batch.freeze()
    }

    #[test]
    fn aborted_batches_go_and_everything_else_stays() {
        // 0: p7 (aborted), 1: p8 (committed), 2: plain, 3: p7 abort, 4: p8 commit, 5: p7 again.
        let all = [
            data(7, 0, true),
            data(8, 1, true),
            data(-1, 2, false),
            marker(7, 3, Marker::Abort),
            marker(8, 4, Marker::Commit),
            data(7, 5, true),
        ]
        .concat();
        let batches = FetchedBatch::split(Bytes::from(all), "t", 0).unwrap();
        let kept = without_aborted(batches.clone(), &[(7, 0)]);
        let offsets: Vec<i64> = kept.iter().map(|b| b.base_offset()).collect();
        // p7's batch at 5 comes after its abort marker: a new transaction, kept.
        assert_eq!(offsets, vec![1, 2, 3, 4, 5]);
        assert_eq!(without_aborted(batches.clone(), &[]).len(), 6);
        assert_eq!(batches[3].marker(), Some(Marker::Abort));
        assert_eq!(batches[0].marker(), None);
    }
}
