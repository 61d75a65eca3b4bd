//! What a partition knows of transactions: which producers have one open here (and from which
//! offset), and which ended in an abort, the two things the last stable offset and a
//! read_committed fetch need.
//!
//! The last stable offset (LSO) is the first offset of the oldest transaction still open, or the
//! log end when none is: a read_committed consumer reads below it only, since what lies above
//! may still be aborted. Each aborted transaction is kept as (producer id, first offset, offset
//! of its abort marker), Kafka's `AbortedTxn` of the `.txnindex` file; a fetch sends those that
//! overlap the batches it returns, and the consumer drops that producer's batches from the first
//! offset up to the marker. Both are rebuilt from batch headers and markers at recovery.

use std::collections::VecDeque;

use protocol::control::Marker;

/// One aborted transaction of one producer in this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The offset of its abort marker.
    pub last_offset: i64,
}

/// A transaction open in this partition: its producer, the epoch of its latest batch here and
/// the offset of its first.
#[derive(Debug, Clone, Copy)]
struct Ongoing {
    producer_id: i64,
    epoch: i16,
    first_offset: i64,
}

#[derive(Debug, Default)]
pub struct TxnIndex {
    /// The transactions open here: a handful at most, one per transactional producer writing to
    /// the partition.
    ongoing: Vec<Ongoing>,
    /// In the order their markers were written, so by `last_offset`.
    aborted: VecDeque<AbortedTxn>,
}

impl TxnIndex {
    /// A transactional batch of `producer_id` at `epoch` was appended at `offset`.
    pub fn data(&mut self, producer_id: i64, epoch: i16, offset: i64) {
        match self
            .ongoing
            .iter_mut()
            .find(|o| o.producer_id == producer_id)
        {
            Some(open) => open.epoch = epoch,
            None => self.ongoing.push(Ongoing {
                producer_id,
                epoch,
                first_offset: offset,
            }),
        }
    }

    /// True when `producer_id` at `epoch` has a transaction open here: no marker has ended it,
    /// so a further batch of it still belongs to it (KIP-890 verifies only the first batch of a
    /// transaction in a partition).
    pub fn is_open(&self, producer_id: i64, epoch: i16) -> bool {
        self.ongoing
            .iter()
            .any(|o| o.producer_id == producer_id && o.epoch == epoch)
    }

    /// `producer_id`'s marker was appended at `offset`: its transaction here is over. A marker
    /// for a producer with nothing open here (a partition added but never written, or a marker
    /// written again after a coordinator restart) changes nothing.
    pub fn marker(&mut self, producer_id: i64, marker: Marker, offset: i64) {
        let Some(at) = self
            .ongoing
            .iter()
            .position(|o| o.producer_id == producer_id)
        else {
            return;
        };
        let first_offset = self.ongoing.swap_remove(at).first_offset;
        if marker == Marker::Abort {
            self.aborted.push_back(AbortedTxn {
                producer_id,
                first_offset,
                last_offset: offset,
            });
        }
    }

    /// True when `producer_id` has a transaction open here, at any epoch.
    pub fn has_open(&self, producer_id: i64) -> bool {
        self.ongoing.iter().any(|o| o.producer_id == producer_id)
    }

    /// The first offset of the oldest open transaction.
    pub fn first_unstable(&self) -> Option<i64> {
        self.ongoing.iter().map(|o| o.first_offset).min()
    }

    /// The aborted transactions a fetch of `from..to` must tell about: those whose range
    /// overlaps it.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        // Markers come in offset order: those ending before `from` form a prefix.
        let skip = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted
            .range(skip..)
            .filter(|a| a.first_offset < to)
            .copied()
            .collect()
    }

    /// True when `producer_id`'s record at `offset` belongs to an aborted transaction.
    pub fn is_aborted(&self, producer_id: i64, offset: i64) -> bool {
        self.aborted.iter().any(|a| {
            a.producer_id == producer_id && a.first_offset <= offset && offset <= a.last_offset
        })
    }

    /// Forgets aborted transactions wholly below the log start.
    pub fn forget_below(&mut self, start: i64) {
        while self.aborted.front().is_some_and(|a| a.last_offset < start) {
            self.aborted.pop_front();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ongoing.is_empty() && self.aborted.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_transactions_hold_the_stable_offset_and_aborts_are_remembered() {
        let mut index = TxnIndex::default();
        index.data(7, 0, 10);
        index.data(7, 0, 12); // a second batch of the same transaction
        index.data(8, 3, 11);
        assert_eq!(index.first_unstable(), Some(10));
        assert!(index.is_open(7, 0) && index.is_open(8, 3));
        assert!(!index.is_open(8, 2) && !index.is_open(9, 0));
        index.marker(7, Marker::Abort, 14);
        assert_eq!(index.first_unstable(), Some(11));
        assert!(!index.is_open(7, 0));
        index.marker(8, Marker::Commit, 15);
        assert_eq!(index.first_unstable(), None);
        // A marker for a producer with nothing open here changes nothing.
        index.marker(9, Marker::Abort, 16);
        let aborted = AbortedTxn {
            producer_id: 7,
            first_offset: 10,
            last_offset: 14,
        };
        assert_eq!(index.aborted_between(0, 100), vec![aborted]);
        assert_eq!(index.aborted_between(14, 15), vec![aborted]);
        assert!(index.aborted_between(15, 100).is_empty());
        assert!(index.aborted_between(0, 10).is_empty());
        assert!(index.is_aborted(7, 12) && !index.is_aborted(8, 12) && !index.is_aborted(7, 15));
        index.forget_below(14);
        assert!(!index.is_empty());
        index.forget_below(15);
        assert!(index.is_empty());
    }
}
