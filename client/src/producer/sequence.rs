//! Sequence numbers of an idempotent producer, per partition.
//!
//! A batch gets its base sequence when it is first sent and keeps it (and its bytes) through
//! every retry: that is what lets the broker recognise a retry of a batch it already appended
//! and answer it with the original offset instead of appending it again. The broker also wants
//! each new batch to follow the previous one exactly, so the producer remembers which batches
//! are still unacknowledged: an OUT_OF_ORDER_SEQUENCE_NUMBER answer to a batch with an older
//! one still unacknowledged only means that older one has not reached the log yet (it failed
//! and will be retried first), while the same answer to the oldest one means the broker lost
//! track of this producer, which is fatal.

use std::collections::VecDeque;

/// The sequence `by` records after `sequence`, wrapping past `i32::MAX` to 0 as Kafka does
/// (`DefaultRecordBatch.incrementSequence`).
pub fn increment_sequence(sequence: i32, by: i32) -> i32 {
    if sequence > i32::MAX - by {
        by - (i32::MAX - sequence) - 1
    } else {
        sequence + by
    }
}

/// One partition's sequences.
#[derive(Debug, Default)]
pub struct PartitionSequences {
    /// The base sequence of the next new batch.
    next: i32,
    /// Base sequences handed out and not yet settled, oldest first. Bounded by the batches in
    /// flight plus those waiting for a retry: a handful.
    unacked: VecDeque<i32>,
}

impl PartitionSequences {
    /// Hands the next `records` sequences to a new batch and returns its base sequence.
    pub fn assign(&mut self, records: i32) -> i32 {
        let base = self.next;
        self.next = increment_sequence(base, records);
        self.unacked.push_back(base);
        base
    }

    /// The batch starting at `base` is settled (acknowledged, or failed for good).
    pub fn settled(&mut self, base: i32) {
        if let Some(at) = self.unacked.iter().position(|&s| s == base) {
            self.unacked.remove(at);
        }
    }

    /// True when no batch sent before the one starting at `base` is still unacknowledged.
    pub fn is_oldest_unacked(&self, base: i32) -> bool {
        self.unacked.front() == Some(&base)
    }

    pub fn next(&self) -> i32 {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_get_consecutive_ranges() {
        let mut seq = PartitionSequences::default();
        assert_eq!(seq.assign(3), 0);
        assert_eq!(seq.assign(1), 3);
        assert_eq!(seq.assign(5), 4);
        assert_eq!(seq.next(), 9);
    }

    #[test]
    fn sequences_wrap_past_i32_max_to_zero() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX - 2, 2), i32::MAX);
        assert_eq!(increment_sequence(i32::MAX - 1, 2), 0);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX, 5), 4);
        // A batch of 3 starting at MAX - 1 covers MAX - 1, MAX, 0; the next starts at 1, which
        // is what the broker expects after a batch whose last sequence is 0.
        let mut seq = PartitionSequences {
            next: i32::MAX - 1,
            ..PartitionSequences::default()
        };
        assert_eq!(seq.assign(3), i32::MAX - 1);
        assert_eq!(seq.assign(1), 1);
    }

    #[test]
    fn the_oldest_unacknowledged_batch_is_tracked_through_out_of_order_settling() {
        let mut seq = PartitionSequences::default();
        let (a, b, c) = (seq.assign(2), seq.assign(2), seq.assign(2));
        assert!(seq.is_oldest_unacked(a));
        assert!(!seq.is_oldest_unacked(b));
        // b's answer is handled before a's: a is still the oldest.
        seq.settled(b);
        assert!(seq.is_oldest_unacked(a));
        seq.settled(a);
        assert!(seq.is_oldest_unacked(c));
        seq.settled(c);
        assert!(!seq.is_oldest_unacked(c));
        seq.settled(c); // settling twice is harmless
    }
}
