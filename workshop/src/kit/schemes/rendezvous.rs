//! Rendezvous hashing, or highest random weight (Thaler and Ravishankar, 1996).
//!
//! No ring: every (key, node) pair gets a pseudo-random score and the highest score wins. A new
//! node takes exactly the keys where it now scores highest, from whichever node held them; a
//! leaving node's keys go to their second choice, spread over all survivors. Weights are honest:
//! with `score = -w / ln(x)`, x uniform in (0, 1), a node of weight w wins a share w/W of the keys
//! (source 003, section 4.1). The price is O(n) hashes per lookup, against O(log(n·v)) for a ring.

use super::{node_name, salted_hash, Membership, NodeId, Scheme, SchemeError};

/// One node as the scorer sees it.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    id: NodeId,
    /// Seeds the node's hash of each key: derived from the node's name, so it is stable.
    seed: u64,
    weight: f64,
}

#[derive(Debug, Clone)]
pub struct Rendezvous {
    candidates: Vec<Candidate>,
    salt: u64,
}

impl Rendezvous {
    pub fn new(members: &Membership, salt: u64) -> Result<Self, SchemeError> {
        let candidates = members
            .members()
            .iter()
            .map(|m| Candidate {
                id: m.id,
                seed: salted_hash(node_name(m.id).as_bytes(), salt),
                weight: f64::from(m.weight),
            })
            .collect();
        Ok(Rendezvous { candidates, salt })
    }

    /// Every node, best first: the preference list (replicas, fallbacks) comes for free.
    pub fn ranking(&self, key: &[u8]) -> Vec<NodeId> {
        let mut scored: Vec<(f64, NodeId)> = self
            .candidates
            .iter()
            .map(|c| (score(key, c), c.id))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().map(|(_, id)| id).collect()
    }
}

/// The weighted score of `candidate` for `key`.
fn score(key: &[u8], candidate: &Candidate) -> f64 {
    let hash = salted_hash(key, candidate.seed);
    // 53 random bits, centred in their interval, give x strictly inside (0, 1): ln(x) is then
    // finite and negative, and the score positive (x = 1 would give -w/0, an infinite tie).
    let x = ((hash >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -candidate.weight / x.ln()
}

impl Scheme for Rendezvous {
    fn route(&self, key: &[u8]) -> NodeId {
        // One hash per node: source 003's version hashes `node|key` per pair; seeding the key's
        // hash with a per-node seed is the same idea without building a string per pair.
        let mut best = self.candidates[0];
        let mut best_score = score(key, &best);
        for candidate in &self.candidates[1..] {
            let s = score(key, candidate);
            if s > best_score {
                best = *candidate;
                best_score = s;
            }
        }
        best.id
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of_val(self.candidates.as_slice())
    }

    fn change(&self, to: &Membership) -> Result<Self, SchemeError> {
        Rendezvous::new(to, self.salt)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{assert_only_necessary_moves, test_keys};
    use super::*;

    #[test]
    fn adding_a_node_moves_keys_only_to_it_and_removing_one_only_moves_its_keys() {
        let keys = test_keys(5_000, 2);
        for seed in 0..5 {
            let four = Membership::uniform(4).unwrap();
            let hrw = Rendezvous::new(&four, seed).unwrap();
            let grown = hrw.change(&four.grown(1)).unwrap();
            let m = assert_only_necessary_moves(&hrw, &grown, &keys, &[4]);
            assert!(m.new_owners.iter().all(|&n| n == 4));
            let shrunk = hrw.change(&four.without(&[2]).unwrap()).unwrap();
            assert_only_necessary_moves(&hrw, &shrunk, &keys, &[2]);
        }
    }

    #[test]
    fn a_node_of_weight_two_wins_twice_the_share() {
        let keys = test_keys(30_000, 3);
        let members = Membership::uniform(4).unwrap().with_weight(0, 2).unwrap();
        let hrw = Rendezvous::new(&members, 9).unwrap();
        let share = keys.iter().filter(|k| hrw.route(k) == 0).count() as f64 / keys.len() as f64;
        assert!((share - 2.0 / 5.0).abs() < 0.015, "{share}");
    }

    #[test]
    fn the_ranking_starts_with_the_owner_and_names_every_node() {
        let hrw = Rendezvous::new(&Membership::uniform(5).unwrap(), 1).unwrap();
        for key in test_keys(100, 4) {
            let ranking = hrw.ranking(&key);
            assert_eq!(ranking[0], hrw.route(&key));
            let mut sorted = ranking.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
        }
    }
}
