//! The lab's figures as the `--json` report carries them, and the verdict drawn from them.

use serde::Serialize;

use super::compare::Spec;
use super::measure::Measurement;
use super::worked::{Cycle, JumpProbe, RingExample};
use crate::lab::report::{round, Checks};

/// A consistent scheme moves "about" the minimum when it is within this share of it: a quarter
/// leaves room for a ring's random arcs (a 256-token ring's new node takes its 20 % give or take
/// about 6 % of that), and none for mod N's 80 % against 20 %.
pub const ABOUT: f64 = 0.25;

/// One scheme's row of the side-by-side table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemeRow {
    /// `mod-n`, `ring`, `rendezvous`, `jump` or `fixed-slots`.
    pub scheme: &'static str,
    /// Tokens per node, for the ring; null elsewhere.
    pub vnodes: Option<u32>,
    /// Slots (or Kafka partitions), for fixed slots; null elsewhere.
    pub slots: Option<u32>,
    /// The key hash: `crc16` for Redis Cluster's slots, `murmur2` for Kafka's partitions,
    /// `xxh3` for the rest.
    pub hash: &'static str,
    pub moved_fraction: f64,
    /// Keys that moved between two nodes present before and after: never necessary.
    pub moved_between_survivors: f64,
    /// Keys per unit of capacity, most loaded node over the mean, after the change.
    pub max_over_avg: f64,
    /// Keys per unit of capacity, population standard deviation over the mean, after the change.
    pub stddev_over_avg: f64,
    pub state_bytes: usize,
}

impl SchemeRow {
    /// The scheme with its parameter, for sentences: `ring (256 vnodes)`, `fixed-slots (60, murmur2)`.
    pub fn name(&self) -> String {
        match (self.vnodes, self.slots) {
            (Some(v), _) => format!("{} ({v} vnodes)", self.scheme),
            (_, Some(s)) => format!("{} ({s}, {})", self.scheme, self.hash),
            _ => self.scheme.to_string(),
        }
    }

    /// Whether the verdict judges this row: every scheme but mod N, and of the rings only the one
    /// with the most tokens. Rings with fewer are contrast: a one-token ring's move is one random
    /// arc, which is the lesson of that row.
    pub fn judged(&self, max_vnodes: Option<u32>) -> bool {
        self.scheme != "mod-n" && (self.vnodes.is_none() || self.vnodes == max_vnodes)
    }

    pub fn new(spec: Spec, m: &Measurement) -> Self {
        SchemeRow {
            scheme: spec.scheme(),
            vnodes: spec.vnodes(),
            slots: spec.slots(),
            hash: spec.hash(),
            moved_fraction: round(m.moved_fraction(), 6),
            moved_between_survivors: round(m.moved_between_survivors_fraction(), 6),
            max_over_avg: round(m.spread.max_over_avg, 6),
            stddev_over_avg: round(m.spread.stddev_over_avg, 6),
            state_bytes: m.state_bytes,
        }
    }
}

/// One scheme's wall time per lookup after the change, for the `measured` object: it depends on
/// the machine and the build, and varies from run to run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LookupTime {
    /// The scheme as the table labels it (`ring, 256 vnodes`).
    pub scheme: String,
    pub lookup_ns: f64,
}

impl LookupTime {
    pub fn new(spec: Spec, m: &Measurement) -> Self {
        LookupTime {
            scheme: spec.label(),
            lookup_ns: round(m.lookup_ns, 1),
        }
    }
}

/// The lab's `measured` object: lookup times of the line-up and of the weighted comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub lookup_ns: Vec<LookupTime>,
    pub weighted_lookup_ns: Vec<LookupTime>,
}

/// A key as Redis Cluster hashes it: the part hashed (its hash tag, or the whole key) and its
/// slot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HashTag {
    pub key: String,
    pub hashed: String,
    pub slot: u16,
}

/// A scheme that could not express the change (jump hash losing a middle bucket) or the weights.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub scheme: &'static str,
    pub vnodes: Option<u32>,
    pub slots: Option<u32>,
    pub reason: String,
}

impl Refusal {
    pub fn new(spec: Spec, reason: String) -> Self {
        Refusal {
            scheme: spec.scheme(),
            vnodes: spec.vnodes(),
            slots: spec.slots(),
            reason,
        }
    }
}

/// A row of the weighted comparison: the row, plus the heavy node's share of all keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeightedRow {
    #[serde(flatten)]
    pub row: SchemeRow,
    pub heavy_share: f64,
}

/// The same change with one node of twice the capacity, for the schemes that take weights.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Weighted {
    pub node: String,
    pub weight: u32,
    /// The heavy node's fair share after the change: its weight over the total.
    pub expected_share: f64,
    pub ideal_moved_fraction: f64,
    pub schemes: Vec<WeightedRow>,
    pub refused: Vec<Refusal>,
}

/// The ring's spread law for one token count: this run's ring against the mean of many.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpreadLaw {
    pub vnodes: u32,
    /// `stddev_over_avg` of this run's ring (the row in `schemes`): one draw.
    pub this_ring: f64,
    /// `stddev_over_avg` averaged over `placements` token placements, from exact arc lengths.
    pub mean_stddev_over_avg: f64,
    pub placements: u32,
    pub one_over_sqrt_v: f64,
}

/// Everything the lab measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub seed: u64,
    pub keys: usize,
    pub from: u32,
    pub to: u32,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// The fewest keys any scheme must move for this change.
    pub ideal_moved_fraction: f64,
    /// Source 004: hash values 0..11, 3 buckets then 4: how many keep their bucket.
    pub mod_3_to_4_kept_of_12: u64,
    /// Mod N over a full cycle of hash values: the sources' cases and this run's change.
    pub mod_n_cycles: Vec<Cycle>,
    pub ring_example: RingExample,
    pub schemes: Vec<SchemeRow>,
    pub refused: Vec<Refusal>,
    pub ring_spread_law: Vec<SpreadLaw>,
    pub jump_middle_removal: Option<JumpProbe>,
    pub weighted: Weighted,
    /// Redis Cluster's CRC16 of "123456789", the specification's check value (`0x31C3`).
    pub redis_crc16_check: String,
    /// Redis Cluster's hash-tag rule on one of the lab's keys: the key alone, two keys tagged
    /// with it, the same untagged, and empty braces (no tag).
    pub redis_hash_tags: Vec<HashTag>,
}

/// The sentence the lab sets out to show, for this change.
pub fn expected(from: u32, to: u32, mod_n: &Cycle, ideal: f64, max_vnodes: Option<u32>) -> String {
    let ring = max_vnodes.map_or(String::new(), |v| {
        format!("a ring with {v} virtual nodes, ")
    });
    format!(
        "Going from {from} to {to} nodes, mod N moves most keys ({:.0} %), while the consistent \
         schemes ({ring}rendezvous, jump hash, fixed slots) each move about the minimum, {:.0} %.",
        mod_n.moved_fraction * 100.0,
        ideal * 100.0
    )
}

/// Shown when mod N moves most keys and every judged consistent scheme ([`SchemeRow::judged`])
/// moves about the minimum.
pub fn verdict(ideal: f64, schemes: &[SchemeRow]) -> Checks {
    let max_vnodes = schemes.iter().filter_map(|r| r.vnodes).max();
    let mut checks = Checks::new();

    match schemes.iter().find(|r| r.scheme == "mod-n") {
        Some(row) => {
            // "Most" is more than half and clearly more than any scheme must move: doubling the
            // nodes moves half the keys under mod N, which is also the minimum, so it shows nothing.
            let most = row.moved_fraction > 0.5 && row.moved_fraction > (1.0 + ABOUT) * ideal;
            checks.check(
                "mod N moves most",
                most,
                format!(
                    "mod N moved {:.1} % of keys: {}",
                    row.moved_fraction * 100.0,
                    if most {
                        "most of them, far above the minimum"
                    } else {
                        "not most of them, or no more than the minimum"
                    }
                ),
            );
        }
        None => {
            checks.check("mod N moves most", false, "mod N was not measured");
        }
    }

    let judged: Vec<&SchemeRow> = schemes.iter().filter(|r| r.judged(max_vnodes)).collect();
    if judged.is_empty() {
        checks.check(
            "consistent schemes move the minimum",
            false,
            "no consistent scheme could be measured",
        );
    }
    for row in judged {
        let close = (row.moved_fraction - ideal).abs() <= ABOUT * ideal;
        checks.check(
            &format!("{} moves the minimum", row.name()),
            close,
            format!(
                "{} moved {:.1} % against a minimum of {:.1} %: {}",
                row.name(),
                row.moved_fraction * 100.0,
                ideal * 100.0,
                if close {
                    "about the minimum"
                } else {
                    "not close to the minimum"
                }
            ),
        );
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(scheme: &'static str, vnodes: Option<u32>, moved: f64) -> SchemeRow {
        SchemeRow {
            scheme,
            vnodes,
            slots: None,
            hash: "xxh3",
            moved_fraction: moved,
            moved_between_survivors: 0.0,
            max_over_avg: 1.0,
            stddev_over_avg: 0.0,
            state_bytes: 0,
        }
    }

    #[test]
    fn shown_when_mod_n_moves_most_and_the_others_about_the_minimum() {
        let rows = [
            row("mod-n", None, 0.8),
            row("ring", Some(1), 0.45),
            row("ring", Some(256), 0.21),
            row("jump", None, 0.2),
        ];
        let v = verdict(0.2, &rows);
        assert!(v.shown(), "{v:?}");
        // The one-token ring is contrast, not judged.
        assert_eq!(v.iter().count(), 3);
    }

    #[test]
    fn not_shown_when_mod_n_moves_no_more_than_needed_or_a_scheme_moves_too_much() {
        // Doubling: mod N keeps half, as every scheme must move half; sampled keys may tip it
        // just over one half, which is still no more than the minimum.
        assert!(!verdict(0.5, &[row("mod-n", None, 0.503), row("jump", None, 0.5)]).shown());
        // A "ring" that moves 40 % is not a ring (source 003).
        let not_a_ring = verdict(0.2, &[row("mod-n", None, 0.8), row("ring", Some(256), 0.4)]);
        assert_eq!(
            not_a_ring.failed().collect::<Vec<_>>(),
            ["ring (256 vnodes) moves the minimum"]
        );
        assert!(!verdict(0.2, &[row("mod-n", None, 0.8)]).shown());
        assert!(!verdict(0.2, &[row("ring", Some(256), 0.2)]).shown());
    }

    #[test]
    fn the_expected_sentence_names_the_change() {
        let cycle = super::super::worked::mod_cycle(4, 5);
        let sentence = expected(4, 5, &cycle, 0.2, Some(256));
        assert!(
            sentence.starts_with("Going from 4 to 5 nodes, mod N moves most keys (80 %)"),
            "{sentence}"
        );
        assert!(sentence.contains("a ring with 256 virtual nodes") && sentence.ends_with("20 %."));
    }
}
