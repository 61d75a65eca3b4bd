//! The keys every scheme routes: distinct, drawn from the seed, stored in one buffer.

use std::collections::HashSet;

use rand::Rng;

/// `user-<16 hex digits>` keys, as a user database would shard them (source 004), packed into one
/// allocation so that 200,000 keys cost one buffer rather than 200,000 strings.
#[derive(Debug, Clone)]
pub struct KeySet {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeySet {
    /// `count` distinct keys drawn from `rng`.
    pub fn generate(count: usize, rng: &mut impl Rng) -> Self {
        let mut seen = HashSet::with_capacity(count);
        let mut bytes = Vec::with_capacity(count * 21);
        let mut ends = Vec::with_capacity(count);
        while ends.len() < count {
            let id: u64 = rng.gen();
            // A repeated id would be one key counted twice; draw again instead.
            if seen.insert(id) {
                bytes.extend_from_slice(format!("user-{id:016x}").as_bytes());
                ends.push(bytes.len());
            }
        }
        KeySet { bytes, ends }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.bytes[start..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn keys_are_distinct_and_follow_the_seed() {
        let keys = KeySet::generate(1_000, &mut ChaCha8Rng::seed_from_u64(1));
        assert_eq!(keys.len(), 1_000);
        let distinct: HashSet<&[u8]> = keys.iter().collect();
        assert_eq!(distinct.len(), 1_000);
        assert!(keys
            .iter()
            .all(|k| k.starts_with(b"user-") && k.len() == 21));
        let again = KeySet::generate(1_000, &mut ChaCha8Rng::seed_from_u64(1));
        assert!(keys.iter().eq(again.iter()));
        let other = KeySet::generate(1_000, &mut ChaCha8Rng::seed_from_u64(2));
        assert!(!keys.iter().eq(other.iter()));
    }
}
