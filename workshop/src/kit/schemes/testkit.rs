//! Helpers for the schemes' tests: seeded keys, and a count of who moved where.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{NodeId, Scheme};

/// `count` distinct keys from `seed`.
pub fn test_keys(count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|i| format!("key-{i}-{:x}", rng.gen::<u32>()).into_bytes())
        .collect()
}

/// Where the keys went between two routings.
#[derive(Debug, Default)]
pub struct Movement {
    pub keys: usize,
    pub moved: usize,
    /// Moves between two nodes that were not part of the change: never necessary.
    pub between_old_nodes: usize,
    /// Every new owner of a moved key.
    pub new_owners: Vec<NodeId>,
}

impl Movement {
    pub fn moved_fraction(&self) -> f64 {
        self.moved as f64 / self.keys as f64
    }
}

/// Routes `keys` before and after; `changed` are the nodes added or removed.
pub fn movement<S: Scheme>(
    before: &S,
    after: &S,
    keys: &[Vec<u8>],
    changed: &[NodeId],
) -> Movement {
    let mut m = Movement {
        keys: keys.len(),
        ..Movement::default()
    };
    for key in keys {
        let (old, new) = (before.route(key), after.route(key));
        if old != new {
            m.moved += 1;
            m.new_owners.push(new);
            if !changed.contains(&old) && !changed.contains(&new) {
                m.between_old_nodes += 1;
            }
        }
    }
    m
}

/// The property of every consistent scheme: adding nodes moves keys only to the new nodes,
/// removing nodes moves only the removed nodes' keys. Returns the movement for further checks.
pub fn assert_only_necessary_moves<S: Scheme>(
    before: &S,
    after: &S,
    keys: &[Vec<u8>],
    changed: &[NodeId],
) -> Movement {
    let m = movement(before, after, keys, changed);
    assert_eq!(
        m.between_old_nodes, 0,
        "keys moved between nodes that did not change"
    );
    assert!(m.moved > 0, "nothing moved at all");
    m
}
