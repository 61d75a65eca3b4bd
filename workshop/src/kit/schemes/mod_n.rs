//! `hash(key) % N`: the divisor is the number of nodes, so changing it re-deals almost every key.
//!
//! Source 003, section 3.3: a key stays only if `h % N == h % (N+1)`, true for about 1/(N+1) of
//! keys, so N/(N+1) of the data moves: 80 % at 4 nodes, 91 % at 10.

use super::{key_hash, require_uniform, Membership, NodeId, Scheme, SchemeError};

/// Routes to `nodes[hash(key) % N]`.
#[derive(Debug, Clone)]
pub struct ModN {
    nodes: Vec<NodeId>,
}

impl ModN {
    pub fn new(members: &Membership) -> Result<Self, SchemeError> {
        require_uniform(members, "mod N")?;
        Ok(ModN {
            nodes: members.ids().collect(),
        })
    }

    /// The bucket of a hash among `n` buckets: what the scheme computes, exposed so that the
    /// sources' worked examples (twelve values, 3 then 4 buckets) run through the same code.
    pub fn bucket(hash: u64, n: u32) -> u32 {
        (hash % u64::from(n)) as u32
    }
}

impl Scheme for ModN {
    fn route(&self, key: &[u8]) -> NodeId {
        self.nodes[Self::bucket(key_hash(key), self.nodes.len() as u32) as usize]
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of_val(self.nodes.as_slice())
    }

    fn change(&self, to: &Membership) -> Result<Self, SchemeError> {
        ModN::new(to)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{movement, test_keys};
    use super::*;

    #[test]
    fn three_to_four_buckets_keeps_three_of_twelve() {
        let kept = (0..12u64)
            .filter(|&v| ModN::bucket(v, 3) == ModN::bucket(v, 4))
            .count();
        assert_eq!(kept, 3);
    }

    #[test]
    fn n_to_n_plus_one_moves_n_over_n_plus_one() {
        let keys = test_keys(20_000, 3);
        for (from, to, expected) in [(4, 5, 0.8), (10, 11, 10.0 / 11.0), (8, 7, 0.875)] {
            let before = ModN::new(&Membership::uniform(from).unwrap()).unwrap();
            let after = before.change(&Membership::uniform(to).unwrap()).unwrap();
            let moved = movement(&before, &after, &keys, &[]).moved_fraction();
            assert!((moved - expected).abs() < 0.01, "{from} to {to}: {moved}");
        }
    }

    #[test]
    fn keys_move_between_nodes_that_stay() {
        let keys = test_keys(2_000, 4);
        let before = ModN::new(&Membership::uniform(4).unwrap()).unwrap();
        let after = before.change(&Membership::uniform(5).unwrap()).unwrap();
        // The lesson of mod N: most moves are between nodes that were there all along.
        assert!(movement(&before, &after, &keys, &[4]).between_old_nodes > 1_000);
    }

    #[test]
    fn weights_are_refused() {
        let heavy = Membership::uniform(3).unwrap().with_weight(0, 2).unwrap();
        assert!(matches!(
            ModN::new(&heavy),
            Err(SchemeError::WeightsUnsupported { .. })
        ));
    }
}
