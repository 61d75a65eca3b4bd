//! The sources' worked examples, computed rather than quoted.
//!
//! - Source 004 (and source 003, section 3.3): `hash % 3` then `hash % 4` over a full cycle of twelve
//!   values keeps only three; in general N to M buckets over a full cycle of lcm(N, M) values.
//! - Source 004's ring: positions 0..99, A at 20, B at 50, C at 80; D joins at 40.
//! - Source 003, section 4.1: jump hash cannot remove a bucket from the middle.
//! - Redis Cluster's hash tags (LABS.md): a key's slot is the CRC16 of the part inside its first
//!   non-empty `{...}`, so keys tagged alike share a slot.

use serde::Serialize;

use super::figures::HashTag;
use crate::kit::schemes::{
    hash_tag, redis_slot, Jump, Membership, ModN, NodeId, Ring, Scheme, SchemeError,
};

/// Redis Cluster's hash-tag rule on `key`: the key, two keys tagged with it, the same suffix
/// without a tag, and empty braces (which are no tag).
pub fn redis_hash_tags(key: &str) -> Vec<HashTag> {
    [
        key.to_string(),
        format!("{{{key}}}.profile"),
        format!("{{{key}}}.orders"),
        format!("{key}.profile"),
        "foo{}{bar}".to_string(),
    ]
    .into_iter()
    .map(|k| HashTag {
        hashed: String::from_utf8_lossy(hash_tag(k.as_bytes())).into_owned(),
        slot: redis_slot(k.as_bytes()),
        key: k,
    })
    .collect()
}

/// Going from `from` to `to` buckets with `hash % buckets`, over every residue class at once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cycle {
    pub from: u32,
    pub to: u32,
    /// lcm(from, to): after that many consecutive hash values the pattern repeats.
    pub cycle: u64,
    /// Values in one cycle whose bucket is the same before and after.
    pub kept: u64,
    pub moved_fraction: f64,
}

/// The exact share of keys mod N moves from `from` to `to` buckets, for uniform hashes.
pub fn mod_cycle(from: u32, to: u32) -> Cycle {
    let cycle = lcm(u64::from(from), u64::from(to));
    let kept = (0..cycle)
        .filter(|&v| ModN::bucket(v, from) == ModN::bucket(v, to))
        .count() as u64;
    Cycle {
        from,
        to,
        cycle,
        kept,
        moved_fraction: 1.0 - kept as f64 / cycle as f64,
    }
}

/// The twelve values of source 004's table: value, bucket of 3, bucket of 4.
pub fn twelve_values() -> Vec<(u64, u32, u32)> {
    (0..12)
        .map(|v| (v, ModN::bucket(v, 3), ModN::bucket(v, 4)))
        .collect()
}

fn lcm(a: u64, b: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    a / gcd(a, b) * b
}

/// Source 004's ring, as the lab reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RingExample {
    /// The hashes D owns after joining, as an interval.
    pub d_owns: String,
    pub owner_of_35: String,
    pub owner_of_90: String,
    pub owner_of_40: String,
    pub owner_of_20: String,
    /// Positions 0..99 whose owner changed when D joined.
    pub moved_positions: u32,
    /// Whether every one of them moved to D.
    pub moved_only_to_d: bool,
    /// Rows for narration: a position, its owner before D, its owner after.
    #[serde(skip)]
    pub samples: Vec<(u64, String, String)>,
}

const NAMES: [&str; 4] = ["A", "B", "C", "D"];
const D: NodeId = 3;

fn name(id: NodeId) -> String {
    NAMES.get(id as usize).copied().unwrap_or("?").to_string()
}

/// Builds source 004's ring before and after D joins, and reads the example off it.
pub fn seed_004_ring() -> Result<RingExample, SchemeError> {
    let abc = [(20, 0), (50, 1), (80, 2)];
    let before = Ring::from_tokens(abc)?;
    let after = Ring::from_tokens(abc.into_iter().chain([(40, D)]))?;
    let moved: Vec<u64> = (0..100)
        .filter(|&h| before.owner_of_hash(h) != after.owner_of_hash(h))
        .collect();
    let d_owns = after
        .arcs_of(D)
        .iter()
        .map(|(start, end)| format!("({start}, {end}]"))
        .collect::<Vec<_>>()
        .join(" ∪ ");
    let owner = |h| name(after.owner_of_hash(h));
    Ok(RingExample {
        d_owns,
        owner_of_35: owner(35),
        owner_of_90: owner(90),
        owner_of_40: owner(40),
        owner_of_20: owner(20),
        moved_positions: moved.len() as u32,
        moved_only_to_d: moved.iter().all(|&h| after.owner_of_hash(h) == D),
        samples: [10, 20, 21, 35, 40, 41, 50, 80, 90, 99]
            .into_iter()
            .map(|h| {
                (
                    h,
                    name(before.owner_of_hash(h)),
                    name(after.owner_of_hash(h)),
                )
            })
            .collect(),
    })
}

/// An attempt to remove a bucket that is not the last from jump hash.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JumpProbe {
    pub buckets: u32,
    pub bucket: u32,
    pub refused: bool,
    pub error: Option<String>,
}

/// Tries to remove a middle bucket (the one at `(buckets - 1) / 2`, a failed machine that is not
/// the newest) from jump hash over `buckets` nodes. `None` with one bucket: there is no middle.
pub fn jump_middle_removal(buckets: u32) -> Result<Option<JumpProbe>, SchemeError> {
    if buckets < 2 {
        return Ok(None);
    }
    let bucket = (buckets - 1) / 2;
    let members = Membership::uniform(buckets)?;
    let attempt = Jump::new(&members)?.change(&members.without(&[bucket])?);
    Ok(Some(JumpProbe {
        buckets,
        bucket,
        refused: attempt.is_err(),
        error: attempt.err().map(|err| err.to_string()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_to_four_keeps_three_of_twelve() {
        let c = mod_cycle(3, 4);
        assert_eq!((c.cycle, c.kept), (12, 3));
        assert_eq!(twelve_values().iter().filter(|(_, a, b)| a == b).count(), 3);
    }

    #[test]
    fn n_to_n_plus_one_moves_n_over_n_plus_one_exactly() {
        assert_eq!(mod_cycle(4, 5).moved_fraction, 0.8);
        assert!((mod_cycle(10, 11).moved_fraction - 10.0 / 11.0).abs() < 1e-12);
        let memcached = mod_cycle(8, 7);
        assert_eq!((memcached.cycle, memcached.kept), (56, 7));
        assert_eq!(memcached.moved_fraction, 0.875);
        // Doubling keeps half: a key stays iff h % 2P < P.
        assert_eq!(mod_cycle(12, 24).moved_fraction, 0.5);
    }

    #[test]
    fn seed_004_example() {
        let ex = seed_004_ring().unwrap();
        assert_eq!(ex.d_owns, "(20, 40]");
        assert_eq!(
            (ex.owner_of_35.as_str(), ex.owner_of_90.as_str()),
            ("D", "A")
        );
        assert_eq!(
            (ex.owner_of_40.as_str(), ex.owner_of_20.as_str()),
            ("D", "A")
        );
        assert_eq!(ex.moved_positions, 20);
        assert!(ex.moved_only_to_d);
    }

    #[test]
    fn jump_refuses_a_middle_bucket() {
        let probe = jump_middle_removal(4).unwrap().unwrap();
        assert_eq!((probe.buckets, probe.bucket, probe.refused), (4, 1, true));
        assert!(probe.error.unwrap().contains("bucket 1 (node-1) of 4"));
        assert_eq!(jump_middle_removal(2).unwrap().unwrap().bucket, 0);
        assert_eq!(jump_middle_removal(1).unwrap(), None);
    }
}
