//! Fixed slots: decouple the number of slots from the number of nodes (source 003, section 3.4).
//!
//! A key always maps to the same slot; nodes hold whole slots through a [`PlacementTable`], and a
//! node change moves whole slots, never re-hashes a key. Three ways to pick the slot:
//! - [`SlotHash::Xxh3`]: `hash(key) % slots`, source 004's 4096 logical buckets.
//! - [`SlotHash::RedisCrc16`]: Redis Cluster's `HASH_SLOT = CRC16(key) mod 16384`, CRC16 being
//!   XMODEM's, of the key's hash tag when it has one ([`hash_tag`]).
//! - [`SlotHash::KafkaMurmur2`]: Java's producer's default partitioner, `toPositive(murmur2(key)) % P`:
//!   a topic's partitions are fixed slots, and brokers hold whole partitions. Adding a broker
//!   and reassigning partitions moves no key to another partition; raising P would (lab
//!   `partitions`).

use super::{key_hash, Membership, NodeId, PlacementTable, Scheme, SchemeError};

/// How a key finds its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotHash {
    Xxh3,
    RedisCrc16,
    KafkaMurmur2,
}

impl SlotHash {
    /// The hash's name, as figures report it.
    pub fn name(self) -> &'static str {
        match self {
            SlotHash::Xxh3 => "xxh3",
            SlotHash::RedisCrc16 => "crc16",
            SlotHash::KafkaMurmur2 => "murmur2",
        }
    }
}

/// Redis Cluster's slot count: `HASH_SLOT = CRC16(key) mod 16384`.
pub const REDIS_SLOTS: u32 = 16384;

/// The CRC16 of the Redis Cluster specification: XMODEM (polynomial 0x1021, initial value 0, no
/// reflection, no final xor).
const REDIS_CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The part of `key` Redis Cluster hashes: the bytes between the first `{` and the first `}`
/// after it, when there is at least one byte between them; otherwise the whole key. So
/// `{user1000}.following` and `{user1000}.followers` share a slot, and `foo{}{bar}` hashes whole.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    let rest = &key[open + 1..];
    match rest.iter().position(|&b| b == b'}') {
        Some(close) if close > 0 => &rest[..close],
        _ => key,
    }
}

/// Redis Cluster's CRC16 of `bytes` as they are (no hash tag taken).
pub fn redis_slot_crc(bytes: &[u8]) -> u16 {
    REDIS_CRC16.checksum(bytes)
}

/// Redis Cluster's slot of `key`, in 0..16384.
pub fn redis_slot(key: &[u8]) -> u16 {
    redis_slot_crc(hash_tag(key)) % REDIS_SLOTS as u16
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
            // Redis fixes the slot count; any other count takes the CRC modulo that count.
            SlotHash::RedisCrc16 => (REDIS_CRC16.checksum(hash_tag(key)) as usize) % slots,
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

    /// The Redis Cluster specification: "The CRC16 ... Output for "123456789": 31C3".
    #[test]
    fn redis_crc16_is_xmodem_with_the_specifications_check_value() {
        assert_eq!(REDIS_CRC16.checksum(b"123456789"), 0x31C3);
        assert_eq!(REDIS_CRC16.checksum(b""), 0);
        // The check value is below 16384, so it is its own slot.
        assert_eq!(redis_slot(b"123456789"), 0x31C3);
        // CLUSTER KEYSLOT of the Redis documentation's examples.
        assert_eq!(redis_slot(b"foo"), 12182);
        assert_eq!(redis_slot(b"hello"), 866);
        assert_eq!(redis_slot(b"somekey"), 11058);
    }

    /// The specification's hash-tag examples.
    #[test]
    fn a_hash_tag_is_the_first_non_empty_braces() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(
            redis_slot(b"{user1000}.following"),
            redis_slot(b"{user1000}.followers")
        );
        assert_eq!(redis_slot(b"{user1000}.following"), redis_slot(b"user1000"));
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        // Empty braces: the whole key is hashed.
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{bar"), b"foo{bar");
        assert_eq!(hash_tag(b"foo}bar{"), b"foo}bar{");
        assert_eq!(hash_tag(b"plain"), b"plain");
        let fixed = FixedSlots::new(
            SlotHash::RedisCrc16,
            REDIS_SLOTS,
            &Membership::uniform(3).unwrap(),
        )
        .unwrap();
        assert_eq!(
            fixed.slot_of(b"{user1000}.followers"),
            redis_slot(b"user1000") as usize
        );
    }

    #[test]
    fn adding_a_node_moves_keys_only_to_it_and_removing_one_only_moves_its_keys() {
        let keys = test_keys(5_000, 6);
        for (hash, slots) in [
            (SlotHash::Xxh3, 4096),
            (SlotHash::RedisCrc16, REDIS_SLOTS),
            (SlotHash::KafkaMurmur2, 60),
        ] {
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
