//! Which keys change partition when a topic's partition count changes, by Kafka's own
//! partitioner (`protocol::partitioner`, the function the producer and `client partition` use,
//! so the three always agree).
//!
//! Going from P to 2P, a key keeps its partition iff `h % 2P < P`: about half of all keys move.
//! Going from N to N+1, about N/(N+1) move. A key that moves has its old records in one
//! partition and its new ones in another, read by different consumers at their own pace.

use protocol::partitioner::partition_for_key;
use serde::Serialize;

/// Keys counted over one change of partition count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Movement {
    pub from: i32,
    pub to: i32,
    pub keys_total: usize,
    pub keys_moved: usize,
}

impl Movement {
    /// Counts the keys whose partition differs between `from` and `to` partitions. Counts below
    /// 1 are refused (the partitioner divides by them).
    pub fn count<K: AsRef<[u8]>>(
        keys: impl IntoIterator<Item = K>,
        from: i32,
        to: i32,
    ) -> Result<Self, String> {
        if from < 1 || to < 1 {
            return Err(format!(
                "partition counts must be at least 1, not {from} and {to}"
            ));
        }
        let mut movement = Movement {
            from,
            to,
            keys_total: 0,
            keys_moved: 0,
        };
        for key in keys {
            movement.keys_total += 1;
            let key = key.as_ref();
            if partition_for_key(key, from) != partition_for_key(key, to) {
                movement.keys_moved += 1;
            }
        }
        Ok(movement)
    }

    pub fn moved_fraction(&self) -> f64 {
        if self.keys_total == 0 {
            0.0
        } else {
            self.keys_moved as f64 / self.keys_total as f64
        }
    }
}

/// The partition of `key` under `from` and under `to` partitions (both at least 1).
pub fn partitions_of(key: &str, from: i32, to: i32) -> Option<(i32, i32)> {
    (from >= 1 && to >= 1).then(|| {
        (
            partition_for_key(key.as_bytes(), from),
            partition_for_key(key.as_bytes(), to),
        )
    })
}

/// The partition librdkafka's default partitioner (`consistent_random`: CRC-32 as zlib computes
/// it, modulo the count) gives `key` among `partitions` (at least 1): what confluent-kafka, kcat
/// and node-rdkafka producers on their defaults write, where Java's producer uses murmur2.
pub fn librdkafka_partition(key: &str, partitions: i32) -> Option<i32> {
    const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    let partitions = u32::try_from(partitions).ok().filter(|p| *p >= 1)?;
    // Below `partitions`, which is an i32: the cast back cannot wrap.
    Some((CRC32.checksum(key.as_bytes()) % partitions) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::partitioner::{murmur2_i32, to_positive};

    #[test]
    fn the_seeds_key_moves_from_4_to_16() {
        // The same figures `client partition order-8842 --partitions 12 --to 24` prints.
        assert_eq!(partitions_of("order-8842", 12, 24), Some((4, 16)));
        assert_eq!(partitions_of("order-8842", 0, 24), None);
    }

    #[test]
    fn librdkafka_s_default_puts_the_seeds_key_elsewhere() {
        // LABS.md: at 12 partitions order-8842 is on 4 under murmur2 and on 9 under
        // consistent_random.
        assert_eq!(librdkafka_partition("order-8842", 12), Some(9));
        assert_eq!(librdkafka_partition("order-8842", 0), None);
    }

    #[test]
    fn doubling_moves_a_key_iff_its_hash_mod_2p_is_at_least_p() {
        let keys: Vec<String> = (8000..10_000).map(|i| format!("order-{i}")).collect();
        let m = Movement::count(&keys, 12, 24).unwrap();
        let by_hash = keys
            .iter()
            .filter(|k| to_positive(murmur2_i32(k.as_bytes())) % 24 >= 12)
            .count();
        assert_eq!((m.keys_total, m.keys_moved), (2000, by_hash));
        assert!((0.45..0.55).contains(&m.moved_fraction()), "{m:?}");
    }

    #[test]
    fn bad_counts_are_errors() {
        assert!(Movement::count(["a"], 0, 24).is_err());
        assert!(Movement::count(["a"], 12, -1).is_err());
        let none: [&str; 0] = [];
        assert_eq!(Movement::count(none, 12, 24).unwrap().moved_fraction(), 0.0);
    }
}
