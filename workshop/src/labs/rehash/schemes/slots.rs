//! Fixed slots: decouple the number of slots from the number of nodes (seed 003, section 3.4).
//!
//! A key always maps to the same slot; nodes hold whole slots through a [`PlacementTable`], and a
//! node change moves whole slots, never re-hashes a key. Two ways to pick the slot:
//! - [`SlotHash::Xxh3`]: `hash(key) % slots`, seed 004's 4096 logical buckets (Redis Cluster
//!   does the same with 16384 slots).
//! - [`SlotHash::KafkaMurmur2`]: Kafka's default partitioner, `toPositive(murmur2(key)) % P`:
//!   a topic's partitions are fixed slots, and brokers hold whole partitions. Adding a broker
//!   and reassigning partitions moves no key to another partition; raising P would (lab
//!   `partitions`).

use super::{key_hash, Membership, NodeId, PlacementTable, Scheme, SchemeError};

/// How a key finds its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotHash {
    Xxh3,
    KafkaMurmur2,
}

impl SlotHash {
    /// The hash's name, as figures report it.
    pub fn name(self) -> &'static str {
        match self {
            SlotHash::Xxh3 => "xxh3",
            SlotHash::KafkaMurmur2 => "murmur2",
        }
    }
}

/// Slots most schemes can afford: a table of 16 Mi entries is already 64 MiB per router.
pub const MAX_SLOTS: u32 = 1 << 24;

#[derive(Debug, Clone)]
pub struct FixedSlots {
    hash: SlotHash,
    table: PlacementTable,
}

impl FixedSlots {
    pub fn new(hash: SlotHash, slots: u32, members: &Membership) -> Result<Self, SchemeError> {
        // Kafka's partitioner takes a positive i32 partition count; the cap keeps both in range.
        if slots == 0 || slots > MAX_SLOTS {
            return Err(SchemeError::InvalidParameter(format!(
                "{slots} slots: a slot table needs 1 to {MAX_SLOTS} slots"
            )));
        }
        Ok(FixedSlots {
            hash,
            table: PlacementTable::new(slots, members),
        })
    }

    /// The slot of `key`: never changes, whatever happens to the nodes.
    pub fn slot_of(&self, key: &[u8]) -> usize {
        let slots = self.table.len();
        match self.hash {
            SlotHash::Xxh3 => (key_hash(key) % slots as u64) as usize,
            // `slots` is at most MAX_SLOTS, so it fits in i32, and the partition is in 0..slots.
            SlotHash::KafkaMurmur2 => {
                protocol::partitioner::partition_for_key(key, slots as i32) as usize
            }
        }
    }

    pub fn table(&self) -> &PlacementTable {
        &self.table
    }
}

impl Scheme for FixedSlots {
    fn route(&self, key: &[u8]) -> NodeId {
        self.table.owner(self.slot_of(key))
    }

    fn state_bytes(&self) -> usize {
        self.table.state_bytes()
    }

    fn change(&self, to: &Membership) -> Result<Self, SchemeError> {
        Ok(FixedSlots {
            hash: self.hash,
            table: self.table.rebalance(to),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{assert_only_necessary_moves, test_keys};
    use super::*;

    #[test]
    fn kafka_slots_are_kafka_partitions() {
        let slots =
            FixedSlots::new(SlotHash::KafkaMurmur2, 12, &Membership::uniform(3).unwrap()).unwrap();
        // LABS.md, lab partitions: order-8842 is partition 4 of 12.
        assert_eq!(slots.slot_of(b"order-8842"), 4);
    }

    #[test]
    fn adding_a_node_moves_keys_only_to_it_and_removing_one_only_moves_its_keys() {
        let keys = test_keys(5_000, 6);
        for (hash, slots) in [(SlotHash::Xxh3, 4096), (SlotHash::KafkaMurmur2, 60)] {
            let four = Membership::uniform(4).unwrap();
            let fixed = FixedSlots::new(hash, slots, &four).unwrap();
            let grown = fixed.change(&four.grown(1)).unwrap();
            let m = assert_only_necessary_moves(&fixed, &grown, &keys, &[4]);
            assert!(m.new_owners.iter().all(|&n| n == 4));
            // A key's slot never changes; only the table does.
            assert!(keys.iter().all(|k| fixed.slot_of(k) == grown.slot_of(k)));
            let shrunk = fixed.change(&four.without(&[0]).unwrap()).unwrap();
            assert_only_necessary_moves(&fixed, &shrunk, &keys, &[0]);
        }
    }

    #[test]
    fn slot_counts_out_of_range_are_refused() {
        let members = Membership::uniform(2).unwrap();
        assert!(FixedSlots::new(SlotHash::Xxh3, 0, &members).is_err());
        assert!(FixedSlots::new(SlotHash::KafkaMurmur2, MAX_SLOTS + 1, &members).is_err());
    }
}
