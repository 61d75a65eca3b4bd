//! A consistent-hash ring (Karger et al. 1997), with virtual nodes (Dynamo, Cassandra).
//!
//! Keys and tokens share one circular space of 64-bit hashes. A key belongs to the first token
//! at or after its hash, wrapping past the end to the first token (source 004: a user at exactly
//! 40 belongs to D at 40, one at 20 stays with A at 20). Source 003's Python takes the first
//! token strictly after the hash (`bisect_right`); the two differ only for a hash equal to a
//! token, and we follow source 004 so that its worked example holds as written.
//!
//! With one token per node, n random points split the ring unevenly (the largest arc grows as
//! O(log n) times the average) and a leaving node's whole arc lands on one neighbour. With v
//! tokens per node the relative spread of node loads falls as 1/sqrt(v), and a leaving node's
//! arcs scatter over all survivors (source 003, section 4).

use super::{key_hash, node_name, salted_hash, Membership, NodeId, Scheme, SchemeError};

/// Tokens on the ring: sorted positions and, in a parallel array, the node owning each.
///
/// Two arrays rather than one array of pairs: the binary search touches only positions, so
/// more of them fit in a cache line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    positions: Vec<u64>,
    owners: Vec<NodeId>,
}

impl Ring {
    /// A ring from explicit `(position, node)` tokens, in any order. Two tokens on one position
    /// are resolved deterministically: the lower node id keeps it (source 004: reject or resolve
    /// collisions deterministically, whatever the order tokens were added in).
    pub fn from_tokens(
        tokens: impl IntoIterator<Item = (u64, NodeId)>,
    ) -> Result<Ring, SchemeError> {
        let mut tokens: Vec<(u64, NodeId)> = tokens.into_iter().collect();
        if tokens.is_empty() {
            return Err(SchemeError::InvalidParameter(
                "a ring needs at least one token".into(),
            ));
        }
        tokens.sort_unstable();
        tokens.dedup_by_key(|(position, _)| *position);
        Ok(Ring {
            positions: tokens.iter().map(|(position, _)| *position).collect(),
            owners: tokens.iter().map(|(_, owner)| *owner).collect(),
        })
    }

    /// The node owning `hash`: the first token at or after it, wrapping to the first token.
    pub fn owner_of_hash(&self, hash: u64) -> NodeId {
        let i = self.positions.partition_point(|&position| position < hash);
        // Past the last token the search wraps around the ring to the first one.
        self.owners[if i == self.positions.len() { 0 } else { i }]
    }

    /// Every token, in ring order.
    pub fn tokens(&self) -> impl Iterator<Item = (u64, NodeId)> + '_ {
        self.positions
            .iter()
            .copied()
            .zip(self.owners.iter().copied())
    }

    /// The arcs `node` owns, each as `(previous token, own token]`: hashes greater than the
    /// first and at most the second, wrapping when the first is larger.
    pub fn arcs_of(&self, node: NodeId) -> Vec<(u64, u64)> {
        let n = self.positions.len();
        (0..n)
            .filter(|&i| self.owners[i] == node)
            .map(|i| (self.positions[(i + n - 1) % n], self.positions[i]))
            .collect()
    }

    /// Each node's share of the hash space: the total length of the arcs it owns, over 2^64.
    /// Exact, where counting keys only samples it.
    pub fn arc_shares(&self) -> Vec<(NodeId, f64)> {
        let n = self.positions.len();
        let mut shares: Vec<(NodeId, f64)> = Vec::new();
        for i in 0..n {
            let previous = self.positions[(i + n - 1) % n];
            // A lone token owns the whole ring; otherwise the arc is the wrapping distance.
            let length = if n == 1 {
                1.0
            } else {
                self.positions[i].wrapping_sub(previous) as f64 / 2f64.powi(64)
            };
            match shares.iter_mut().find(|(id, _)| *id == self.owners[i]) {
                Some((_, share)) => *share += length,
                None => shares.push((self.owners[i], length)),
            }
        }
        shares.sort_unstable_by_key(|(id, _)| *id);
        shares
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of_val(self.positions.as_slice())
            + std::mem::size_of_val(self.owners.as_slice())
    }
}

/// The ring as a scheme: each node places `vnodes × weight` tokens at hashes of its stable
/// token identities `node-3#0`, `node-3#1`, ... (source 004: keep identities like `A:0`, `A:1`
/// stable when adding D; regenerating all tokens would undo the point of the ring).
#[derive(Debug, Clone)]
pub struct RingScheme {
    ring: Ring,
    vnodes: u32,
    /// Where this ring's tokens land: the lab derives it from `--seed`, as Cassandra's token
    /// allocation is a random choice.
    salt: u64,
}

impl RingScheme {
    pub fn new(members: &Membership, vnodes: u32, salt: u64) -> Result<Self, SchemeError> {
        if vnodes == 0 {
            return Err(SchemeError::InvalidParameter(
                "a ring needs at least one token per node".into(),
            ));
        }
        let tokens = members.members().iter().flat_map(|m| {
            (0..u64::from(vnodes) * u64::from(m.weight)).map(move |i| {
                let identity = format!("{}#{i}", node_name(m.id));
                (salted_hash(identity.as_bytes(), salt), m.id)
            })
        });
        Ok(RingScheme {
            ring: Ring::from_tokens(tokens)?,
            vnodes,
            salt,
        })
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    pub fn vnodes(&self) -> u32 {
        self.vnodes
    }
}

impl Scheme for RingScheme {
    fn route(&self, key: &[u8]) -> NodeId {
        self.ring.owner_of_hash(key_hash(key))
    }

    fn state_bytes(&self) -> usize {
        self.ring.state_bytes()
    }

    fn change(&self, to: &Membership) -> Result<Self, SchemeError> {
        // Token identities are stable, so the surviving nodes' tokens land where they were.
        RingScheme::new(to, self.vnodes, self.salt)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{assert_only_necessary_moves, test_keys};
    use super::*;

    const A: NodeId = 0;
    const B: NodeId = 1;
    const C: NodeId = 2;
    const D: NodeId = 3;

    /// Source 004: positions 0..99, A at 20, B at 50, C at 80; D joins at 40.
    fn seed_004_rings() -> (Ring, Ring) {
        let abc = [(20, A), (50, B), (80, C)];
        let before = Ring::from_tokens(abc).unwrap();
        let after = Ring::from_tokens(abc.into_iter().chain([(40, D)])).unwrap();
        (before, after)
    }

    #[test]
    fn seed_004_d_takes_the_interval_from_20_to_40() {
        let (before, after) = seed_004_rings();
        assert_eq!(after.owner_of_hash(35), D);
        assert_eq!(
            after.owner_of_hash(90),
            A,
            "past the last token the ring wraps to A"
        );
        assert_eq!(
            after.owner_of_hash(40),
            D,
            "a user exactly at 40 belongs to D"
        );
        assert_eq!(after.owner_of_hash(20), A, "a user at 20 stays with A");
        assert_eq!(after.arcs_of(D), vec![(20, 40)]);
        // Only (20, 40] changes owner, and all of it goes to D; it belonged to B before.
        let moved: Vec<u64> = (0..100)
            .filter(|&h| before.owner_of_hash(h) != after.owner_of_hash(h))
            .collect();
        assert_eq!(moved, (21..=40).collect::<Vec<_>>());
        assert!(moved
            .iter()
            .all(|&h| after.owner_of_hash(h) == D && before.owner_of_hash(h) == B));
    }

    #[test]
    fn arc_shares_add_up_to_the_whole_ring() {
        let (_, after) = seed_004_rings();
        let half = 2f64.powi(63);
        let ring = Ring::from_tokens([(half as u64, 0), (u64::MAX, 1)]).unwrap();
        assert_eq!(ring.arc_shares(), vec![(0, 0.5), (1, 0.5)]);
        assert_eq!(
            Ring::from_tokens([(7, 3)]).unwrap().arc_shares(),
            vec![(3, 1.0)]
        );
        let total: f64 = after.arc_shares().iter().map(|(_, s)| s).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn colliding_tokens_resolve_the_same_way_in_any_order() {
        let one = Ring::from_tokens([(10, 2), (10, 1), (30, 0)]).unwrap();
        let other = Ring::from_tokens([(30, 0), (10, 1), (10, 2)]).unwrap();
        assert_eq!(one, other);
        assert_eq!(one.owner_of_hash(5), 1);
        assert!(Ring::from_tokens([]).is_err());
    }

    #[test]
    fn adding_a_node_moves_keys_only_to_it_and_removing_one_only_moves_its_keys() {
        let keys = test_keys(5_000, 1);
        for seed in 0..5 {
            let four = Membership::uniform(4).unwrap();
            let ring = RingScheme::new(&four, 16, seed).unwrap();
            let grown = ring.change(&four.grown(1)).unwrap();
            let m = assert_only_necessary_moves(&ring, &grown, &keys, &[4]);
            assert!(m.new_owners.iter().all(|&n| n == 4));
            let shrunk = ring.change(&four.without(&[1]).unwrap()).unwrap();
            assert_only_necessary_moves(&ring, &shrunk, &keys, &[1]);
        }
    }

    #[test]
    fn a_weighted_node_places_twice_the_tokens() {
        let members = Membership::uniform(3).unwrap().with_weight(2, 2).unwrap();
        let ring = RingScheme::new(&members, 8, 0).unwrap();
        let per_node = |id| {
            ring.ring()
                .tokens()
                .filter(|(_, owner)| *owner == id)
                .count()
        };
        assert_eq!((per_node(0), per_node(1), per_node(2)), (8, 8, 16));
        assert_eq!(ring.state_bytes(), 32 * (8 + 4));
    }
}
