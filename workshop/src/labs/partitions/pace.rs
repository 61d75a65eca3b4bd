//! The lab's clock: consumers apply records in rounds, a fixed number per partition per round,
//! so the order in which events reach the store is a function of the seed and the flags, never
//! of thread timing.
//!
//! Within a round, slot by slot: the first record of every partition (in partition order), then
//! the second of every partition, and so on up to the capacity. That is how partitions consumed
//! in parallel interleave, written down once so that every run interleaves them the same way.

use std::collections::{BTreeMap, VecDeque};

/// A partition of a topic, ordered by topic then partition.
pub type PartitionId = (String, i32);

/// Records waiting per partition, each queue in offset order.
pub type Queues<T> = BTreeMap<PartitionId, VecDeque<T>>;

/// Takes this round's records out of `queues`, at most `capacity` per partition, in the order
/// they are applied.
pub fn round<T>(queues: &mut Queues<T>, capacity: u32) -> Vec<T> {
    let mut out = Vec::new();
    for _ in 0..capacity {
        let before = out.len();
        for queue in queues.values_mut() {
            if let Some(record) = queue.pop_front() {
                out.push(record);
            }
        }
        if out.len() == before {
            break;
        }
    }
    out
}

/// How many records of each partition a round takes, given what is waiting: the lab waits
/// until the consumers have fetched at least this much before it runs the round.
pub fn wanted(waiting: i64, capacity: u32) -> i64 {
    waiting.clamp(0, i64::from(capacity))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_interleave_partitions_in_order() {
        let mut queues: Queues<&str> = BTreeMap::new();
        queues.insert(("t".into(), 1), VecDeque::from(["b0", "b1", "b2"]));
        queues.insert(("t".into(), 0), VecDeque::from(["a0"]));
        queues.insert(("t".into(), 2), VecDeque::from(["c0", "c1"]));
        assert_eq!(round(&mut queues, 2), ["a0", "b0", "c0", "b1", "c1"]);
        assert_eq!(round(&mut queues, 2), ["b2"]);
        assert!(round(&mut queues, 2).is_empty());
        assert_eq!((wanted(5, 2), wanted(1, 2), wanted(-3, 2)), (2, 1, 0));
    }
}
