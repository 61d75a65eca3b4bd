//! What one membership change costs under one scheme, measured on real keys.
//!
//! - Movement: keys whose owner differs before and after, and among them the ones that moved
//!   between two nodes present on both sides (never necessary: the lesson of mod N).
//! - Spread, after the change, on keys per unit of capacity (keys / weight), so that a node of
//!   weight 2 holding twice the keys counts as even. `max_over_avg` is the most loaded node over
//!   the mean; `stddev_over_avg` is the population standard deviation over the mean (the
//!   coefficient of variation). Source 003's "spread falls as 1/sqrt(v)" is about the latter: with
//!   v tokens a node's share is a sum of v random arcs, whose relative deviation is 1/sqrt(v).
//! - Lookup time: the wall time of routing every key after the change, per key. It is reported,
//!   never asserted (it depends on the machine and the build; timing belongs in benchmarks).
//! - State: the bytes of routing state the scheme holds after the change.

use std::time::Instant;

use super::keys::KeySet;
use crate::kit::schemes::{salted_hash, Membership, NodeId, RingScheme, Scheme, SchemeError};

/// Keys held by one node after the change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeLoad {
    pub id: NodeId,
    pub weight: u32,
    pub keys: usize,
}

/// How unevenly keys per unit of capacity fall on the nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub max_over_avg: f64,
    pub stddev_over_avg: f64,
}

impl Spread {
    pub fn of(loads: &[NodeLoad]) -> Spread {
        Self::of_shares(loads.iter().map(|l| (l.keys as f64, l.weight)))
    }

    /// The spread of any per-node load (keys, or a share of the hash space) with its weight.
    pub fn of_shares(loads: impl IntoIterator<Item = (f64, u32)>) -> Spread {
        let per_capacity: Vec<f64> = loads
            .into_iter()
            .map(|(load, weight)| load / f64::from(weight))
            .collect();
        let n = per_capacity.len() as f64;
        let avg = per_capacity.iter().sum::<f64>() / n;
        if avg == 0.0 {
            // No keys at all: nothing is uneven.
            return Spread {
                max_over_avg: 1.0,
                stddev_over_avg: 0.0,
            };
        }
        let max = per_capacity.iter().copied().fold(f64::MIN, f64::max);
        let variance = per_capacity.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / n;
        Spread {
            max_over_avg: max / avg,
            stddev_over_avg: variance.sqrt() / avg,
        }
    }
}

/// One scheme, one change, every key.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub keys: usize,
    pub moved: usize,
    pub moved_between_survivors: usize,
    /// The nodes after the change, in membership order.
    pub loads: Vec<NodeLoad>,
    pub spread: Spread,
    pub lookup_ns: f64,
    pub state_bytes: usize,
}

impl Measurement {
    pub fn moved_fraction(&self) -> f64 {
        self.moved as f64 / self.keys as f64
    }

    pub fn moved_between_survivors_fraction(&self) -> f64 {
        self.moved_between_survivors as f64 / self.keys as f64
    }

    /// The share of all keys that `id` holds after the change.
    pub fn share_of(&self, id: NodeId) -> f64 {
        let keys = self.loads.iter().find(|l| l.id == id).map_or(0, |l| l.keys);
        keys as f64 / self.keys as f64
    }
}

/// Routes every key with `before` (over `from`) and `after` (over `to`) and compares.
pub fn measure<S: Scheme>(
    before: &S,
    after: &S,
    keys: &KeySet,
    from: &Membership,
    to: &Membership,
) -> Measurement {
    let owners_before: Vec<NodeId> = keys.iter().map(|key| before.route(key)).collect();
    let start = Instant::now();
    let owners_after: Vec<NodeId> = keys.iter().map(|key| after.route(key)).collect();
    let elapsed = start.elapsed();

    let positions = to.positions();
    let mut loads: Vec<NodeLoad> = to
        .members()
        .iter()
        .map(|m| NodeLoad {
            id: m.id,
            weight: m.weight,
            keys: 0,
        })
        .collect();
    let (mut moved, mut moved_between_survivors) = (0, 0);
    for (&old, &new) in owners_before.iter().zip(&owners_after) {
        if let Some(p) = positions.get(new as usize).copied().flatten() {
            loads[p].keys += 1;
        }
        if old != new {
            moved += 1;
            let survivor = |id: NodeId| from.contains(id) && to.contains(id);
            if survivor(old) && survivor(new) {
                moved_between_survivors += 1;
            }
        }
    }
    Measurement {
        keys: keys.len(),
        moved,
        moved_between_survivors,
        spread: Spread::of(&loads),
        loads,
        lookup_ns: elapsed.as_nanos() as f64 / keys.len().max(1) as f64,
        state_bytes: after.state_bytes(),
    }
}

/// A ring's `stddev_over_avg` averaged over `placements` independent token placements, from
/// exact arc lengths: the 1/sqrt(v) law without the luck of one placement. With a handful of
/// nodes, one ring's spread is itself a draw (five nodes give it four degrees of freedom, about
/// ±35 %); the mean over placements is not.
pub fn mean_ring_spread(
    members: &Membership,
    vnodes: u32,
    placements: u32,
    salt: u64,
) -> Result<f64, SchemeError> {
    let mut total = 0.0;
    for placement in 0..placements {
        let salt = salted_hash(&placement.to_le_bytes(), salt);
        let ring = RingScheme::new(members, vnodes, salt)?;
        let shares = ring.ring().arc_shares();
        let weighted = shares
            .iter()
            .map(|&(id, share)| (share, members.weight_of(id).unwrap_or(1)));
        total += Spread::of_shares(weighted).stddev_over_avg;
    }
    Ok(total / f64::from(placements.max(1)))
}

/// The fewest keys any scheme must move for this change, as a fraction: each node's expected
/// share by weight before and after, and the total of the shares that shrink (the total
/// variation distance). Adding one standard node to N gives 1/(N+1).
pub fn ideal_moved_fraction(from: &Membership, to: &Membership) -> f64 {
    let share = |m: &Membership, id: NodeId| {
        m.weight_of(id)
            .map_or(0.0, |w| f64::from(w) / m.total_weight() as f64)
    };
    from.ids()
        .map(|id| (share(from, id) - share(to, id)).max(0.0))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(id: NodeId, weight: u32, keys: usize) -> NodeLoad {
        NodeLoad { id, weight, keys }
    }

    #[test]
    fn spread_is_per_unit_of_capacity() {
        let even = Spread::of(&[load(0, 2, 200), load(1, 1, 100), load(2, 1, 100)]);
        assert_eq!(even.max_over_avg, 1.0);
        assert_eq!(even.stddev_over_avg, 0.0);
        let skewed = Spread::of(&[load(0, 1, 150), load(1, 1, 50)]);
        assert_eq!(skewed.max_over_avg, 1.5);
        assert_eq!(skewed.stddev_over_avg, 0.5);
    }

    #[test]
    fn the_ring_spread_falls_as_one_over_the_root_of_the_tokens() {
        let five = Membership::uniform(5).unwrap();
        let spread = |v| mean_ring_spread(&five, v, 64, 1).unwrap();
        let (one, sixteen, many) = (spread(1), spread(16), spread(256));
        assert!(one > sixteen && sixteen > many, "{one} {sixteen} {many}");
        // Five nodes: 1/sqrt(v) scaled by sqrt(4/5) for the population deviation over 5 nodes,
        // and a little lower again for the mean of a sample deviation.
        assert!((0.045..0.06).contains(&many), "{many}");
        assert!((0.17..0.24).contains(&sixteen), "{sixteen}");
    }

    #[test]
    fn the_ideal_is_one_over_n_plus_one_for_one_standard_node() {
        let four = Membership::uniform(4).unwrap();
        assert!((ideal_moved_fraction(&four, &four.grown(1)) - 0.2).abs() < 1e-12);
        let ten = Membership::uniform(10).unwrap();
        assert!((ideal_moved_fraction(&ten, &ten.grown(1)) - 1.0 / 11.0).abs() < 1e-12);
        let eight = Membership::uniform(8).unwrap();
        let seven = eight.without(&[7]).unwrap();
        assert!((ideal_moved_fraction(&eight, &seven) - 0.125).abs() < 1e-12);
        // Node 0 has twice the capacity: adding a standard node moves 1/6, not 1/5.
        let heavy = four.with_weight(0, 2).unwrap();
        assert!((ideal_moved_fraction(&heavy, &heavy.grown(1)) - 1.0 / 6.0).abs() < 1e-12);
    }
}
