//! Kafka's default partitioner for keyed records, bit for bit as Java computes it:
//! `toPositive(murmur2(key)) % numPartitions`, murmur2 seeded with `0x9747b28c`.

use murmur2::{murmur2, KAFKA_SEED};

/// Java's `Utils.murmur2(key)`, as the signed int Java returns.
pub fn murmur2_i32(key: &[u8]) -> i32 {
    murmur2(key, KAFKA_SEED) as i32
}

/// Java's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows on `i32::MIN`).
pub fn to_positive(hash: i32) -> i32 {
    hash & 0x7fff_ffff
}

/// The partition Kafka's producer picks for `key` among `partitions` (which must be > 0).
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    assert!(partitions > 0, "a topic has at least one partition");
    to_positive(murmur2_i32(key)) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_utils_test_vectors() {
        // Kafka's UtilsTest.testMurmur2.
        let cases: [(&str, i32); 6] = [
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            ("abc", 479470107),
        ];
        for (key, hash) in cases {
            assert_eq!(murmur2_i32(key.as_bytes()), hash, "{key}");
        }
    }

    #[test]
    fn librdkafka_and_kafkajs_vectors() {
        assert_eq!(murmur2_i32(b"kafka") as u32, 0xd067cf64);
        assert_eq!(murmur2_i32(b"giberish123456789") as u32, 0x8f552b0c);
        assert_eq!(murmur2_i32(b"") as u32, 0x106e08d9);
        assert_eq!(murmur2_i32(b"0"), 971027396);
        assert_eq!(murmur2_i32(b"1"), -1993445489);
    }

    #[test]
    fn partitions_of_known_keys() {
        assert_eq!(partition_for_key(b"kafka", 3), 1);
        assert_eq!(partition_for_key(b"key1", 3), 2);
        assert_eq!(partition_for_key(b"key3", 3), 1);
        assert_eq!(partition_for_key(b"1", 3), 0);
        // The workshop's key (LABS.md, lab partitions).
        assert_eq!(partition_for_key(b"order-8842", 12), 4);
        assert_eq!(partition_for_key(b"order-8842", 24), 16);
    }

    #[test]
    fn doubling_keeps_a_key_iff_its_hash_mod_2p_is_below_p() {
        for i in 0..2000 {
            let key = format!("order-{i}");
            let h = to_positive(murmur2_i32(key.as_bytes()));
            let kept =
                partition_for_key(key.as_bytes(), 12) == partition_for_key(key.as_bytes(), 24);
            assert_eq!(kept, h % 24 < 12, "{key}");
        }
    }
}
