//! Jump consistent hash (Lamping and Veach, Google, 2014, arXiv:1406.2294).
//!
//! A loop that advances the key through a 64-bit linear congruential generator and jumps to
//! ever higher bucket numbers while they stay below the bucket count: O(ln n) time, no state,
//! and an even split. Going from n to n+1 buckets moves exactly the keys that now jump to n.
//!
//! The limit is hard (source 003, section 4.1): buckets are numbered 0..n-1, so only the last one
//! can be removed. Removing a middle bucket would renumber every bucket after it, and the keys
//! of all of them would move. Jump hash suits a fixed set of logical buckets mapped to machines
//! by a directory, not a ring replacement under arbitrary failures; [`Jump::change`] refuses.

use std::num::NonZeroU32;

use super::{key_hash, node_name, require_uniform, Membership, NodeId, Scheme, SchemeError};

/// The bucket of `key` among `buckets`, as the paper's C++ computes it.
pub fn jump_bucket(mut key: u64, buckets: NonZeroU32) -> u32 {
    let buckets = i64::from(buckets.get());
    let (mut b, mut j) = (-1i64, 0i64);
    while j < buckets {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        // The next bucket at which this key would jump, drawn from the generator's top 31 bits.
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    // The loop runs at least once (buckets >= 1), so b is a bucket number in 0..buckets.
    b as u32
}

/// Jump hash over the nodes of a membership: bucket b is the b-th node in join order.
#[derive(Debug, Clone)]
pub struct Jump {
    buckets: Vec<NodeId>,
}

impl Jump {
    pub fn new(members: &Membership) -> Result<Self, SchemeError> {
        require_uniform(members, "jump hash")?;
        Ok(Jump {
            buckets: members.ids().collect(),
        })
    }

    fn bucket_count(&self) -> NonZeroU32 {
        // A membership has at least one node, and node counts fit in u32.
        NonZeroU32::new(self.buckets.len() as u32).unwrap_or(NonZeroU32::MIN)
    }
}

impl Scheme for Jump {
    fn route(&self, key: &[u8]) -> NodeId {
        self.buckets[jump_bucket(key_hash(key), self.bucket_count()) as usize]
    }

    fn state_bytes(&self) -> usize {
        // The algorithm needs only the bucket count; the list maps bucket numbers to nodes.
        std::mem::size_of_val(self.buckets.as_slice())
    }

    /// Accepts buckets added or removed at the end only.
    fn change(&self, to: &Membership) -> Result<Self, SchemeError> {
        let next = Jump::new(to)?;
        let kept = self.buckets.len().min(next.buckets.len());
        // Every bucket both sides have must keep its number, or keys renumber with it.
        if let Some(bucket) = (0..kept).find(|&b| self.buckets[b] != next.buckets[b]) {
            return Err(SchemeError::NotLastBucket {
                bucket: bucket as u32,
                buckets: self.buckets.len() as u32,
                node: node_name(self.buckets[bucket]),
            });
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{assert_only_necessary_moves, test_keys};
    use super::*;

    fn n(buckets: u32) -> NonZeroU32 {
        NonZeroU32::new(buckets).unwrap()
    }

    #[test]
    fn published_vectors() {
        // From the reference implementations' tests (C++ port in Go, Python's `jump` package).
        assert_eq!(jump_bucket(123_456, n(1000)), 984);
        assert_eq!(jump_bucket(256, n(1024)), 520);
        assert_eq!(jump_bucket(u64::MAX, n(1)), 0);
    }

    #[test]
    fn growing_one_bucket_moves_keys_only_to_the_new_bucket() {
        for key in 0..10_000u64 {
            let key = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for buckets in 1..40 {
                let (before, after) = (
                    jump_bucket(key, n(buckets)),
                    jump_bucket(key, n(buckets + 1)),
                );
                assert!(
                    after == before || after == buckets,
                    "{key}: {before} -> {after}"
                );
            }
        }
    }

    #[test]
    fn adding_and_removing_the_last_node_moves_only_its_keys() {
        let keys = test_keys(5_000, 5);
        let four = Membership::uniform(4).unwrap();
        let jump = Jump::new(&four).unwrap();
        let grown = jump.change(&four.grown(1)).unwrap();
        let m = assert_only_necessary_moves(&jump, &grown, &keys, &[4]);
        assert!(m.new_owners.iter().all(|&n| n == 4));
        let shrunk = jump.change(&four.without(&[3]).unwrap()).unwrap();
        assert_only_necessary_moves(&jump, &shrunk, &keys, &[3]);
    }

    #[test]
    fn removing_a_middle_bucket_is_refused() {
        let four = Membership::uniform(4).unwrap();
        let jump = Jump::new(&four).unwrap();
        let err = jump.change(&four.without(&[1]).unwrap()).unwrap_err();
        assert_eq!(
            err,
            SchemeError::NotLastBucket {
                bucket: 1,
                buckets: 4,
                node: "node-1".into()
            }
        );
        assert!(err.to_string().contains("only the last one can be removed"));
    }

    #[test]
    fn weights_are_refused() {
        let heavy = Membership::uniform(3).unwrap().with_weight(1, 2).unwrap();
        assert!(matches!(
            Jump::new(&heavy),
            Err(SchemeError::WeightsUnsupported { .. })
        ));
    }
}
