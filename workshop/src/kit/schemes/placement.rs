//! A placement table: which node holds each of a fixed number of slots.
//!
//! Source 004: `bucket = hash(userId) % 4096; shard = placementTable[bucket]`. Scaling changes
//! selected entries of the table, never the hash of any key. Which entries change is this
//! module's job, and it changes as few as possible: each node's target is its share of the slots
//! by weight, nodes above their target give up only the excess, and only nodes below their
//! target receive. Adding a node therefore moves slots only to it, and removing one moves only
//! its slots.

use super::{Membership, NodeId};

/// Slot number to owning node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementTable {
    owners: Vec<NodeId>,
}

impl PlacementTable {
    /// A first placement of `slots` slots (at least one) over `members`.
    pub fn new(slots: u32, members: &Membership) -> Self {
        PlacementTable {
            owners: place(vec![None; slots.max(1) as usize], members),
        }
    }

    /// The placement after the nodes change to `members`, moving as few slots as possible.
    pub fn rebalance(&self, members: &Membership) -> Self {
        let current = self
            .owners
            .iter()
            .map(|&owner| members.contains(owner).then_some(owner))
            .collect();
        PlacementTable {
            owners: place(current, members),
        }
    }

    pub fn owner(&self, slot: usize) -> NodeId {
        self.owners[slot]
    }

    pub fn owners(&self) -> &[NodeId] {
        &self.owners
    }

    pub fn len(&self) -> usize {
        self.owners.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    pub fn state_bytes(&self) -> usize {
        std::mem::size_of_val(self.owners.as_slice())
    }
}

/// How many slots each member should hold: its share by weight, rounded by largest remainder.
/// Ties in the remainder go to members already holding more slots (fewer moves), then to the
/// earlier member, so the result is deterministic.
fn targets(slots: usize, members: &Membership, held: &[usize]) -> Vec<usize> {
    let total = members.total_weight() as u128;
    let quota = |w: u32| {
        (
            slots as u128 * u128::from(w) / total,
            slots as u128 * u128::from(w) % total,
        )
    };
    let mut targets: Vec<usize> = members
        .members()
        .iter()
        .map(|m| quota(m.weight).0 as usize)
        .collect();
    let left = slots - targets.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|&i| {
        let remainder = quota(members.members()[i].weight).1;
        (std::cmp::Reverse(remainder), std::cmp::Reverse(held[i]), i)
    });
    for &i in order.iter().take(left) {
        targets[i] += 1;
    }
    targets
}

/// Completes a placement where `current` holds each slot's owner if it is a member, `None` if
/// the slot is free, so that every member holds its target with the fewest changes.
fn place(mut current: Vec<Option<NodeId>>, members: &Membership) -> Vec<NodeId> {
    let positions = members.positions();
    let position = |id: NodeId| positions.get(id as usize).copied().flatten();
    let mut held = vec![0usize; members.len()];
    for owner in current.iter().flatten() {
        if let Some(p) = position(*owner) {
            held[p] += 1;
        }
    }
    let targets = targets(current.len(), members, &held);

    // Members above target free their highest-numbered slots: any choice moves the same number
    // of slots, and slot numbers are hashes, so which ones carries no bias.
    let mut excess: Vec<usize> = held
        .iter()
        .zip(&targets)
        .map(|(&h, &t)| h.saturating_sub(t))
        .collect();
    for slot in current.iter_mut().rev() {
        if let Some(p) = slot.and_then(position) {
            if excess[p] > 0 {
                excess[p] -= 1;
                *slot = None;
            }
        }
    }

    // Free slots go, one at a time, to the member furthest below its target: a first placement
    // comes out interleaved, like Kafka's round-robin assignment of partitions to brokers.
    let mut deficit: Vec<usize> = targets
        .iter()
        .zip(&held)
        .map(|(&t, &h)| t.saturating_sub(h))
        .collect();
    current
        .into_iter()
        .map(|slot| {
            slot.unwrap_or_else(|| {
                let p = (0..deficit.len())
                    .max_by_key(|&p| (deficit[p], std::cmp::Reverse(p)))
                    .unwrap_or(0);
                deficit[p] = deficit[p].saturating_sub(1);
                members.members()[p].id
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(table: &PlacementTable, id: NodeId) -> usize {
        table.owners().iter().filter(|&&o| o == id).count()
    }

    fn changed(a: &PlacementTable, b: &PlacementTable) -> Vec<(NodeId, NodeId)> {
        a.owners()
            .iter()
            .zip(b.owners())
            .filter(|(x, y)| x != y)
            .map(|(x, y)| (*x, *y))
            .collect()
    }

    #[test]
    fn a_first_placement_is_even_and_interleaved() {
        let table = PlacementTable::new(4096, &Membership::uniform(4).unwrap());
        assert!((0..4).all(|id| count(&table, id) == 1024));
        assert_eq!(&table.owners()[..8], &[0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(table.state_bytes(), 4096 * 4);
    }

    #[test]
    fn adding_a_node_moves_the_minimum_and_only_to_it() {
        for from in 1..12u32 {
            let before = Membership::uniform(from).unwrap();
            let table = PlacementTable::new(4096, &before);
            let after = before.grown(1);
            let next = table.rebalance(&after);
            let moves = changed(&table, &next);
            assert!(moves.iter().all(|&(_, to)| to == from), "{from}");
            // The new node gets its share and nothing else changes hands.
            assert_eq!(moves.len(), count(&next, from));
            assert!(count(&next, from) == 4096 / (from as usize + 1));
            let counts: Vec<usize> = (0..=from).map(|id| count(&next, id)).collect();
            assert!(
                counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
                "{counts:?}"
            );
        }
    }

    #[test]
    fn removing_a_node_moves_only_its_slots() {
        let before = Membership::uniform(5).unwrap();
        let table = PlacementTable::new(4096, &before);
        let next = table.rebalance(&before.without(&[2]).unwrap());
        let moves = changed(&table, &next);
        assert_eq!(moves.len(), count(&table, 2));
        assert!(moves.iter().all(|&(from, _)| from == 2));
        assert_eq!(count(&next, 2), 0);
    }

    #[test]
    fn weights_set_the_share() {
        let members = Membership::uniform(4).unwrap().with_weight(0, 2).unwrap();
        let table = PlacementTable::new(4096, &members);
        // 4096 × 2/5 = 1638.4 and 4096/5 = 819.2: largest remainders round the heavy node up.
        assert_eq!(count(&table, 0), 1639);
        assert_eq!(
            (1..4).map(|id| count(&table, id)).sum::<usize>(),
            4096 - 1639
        );
    }

    #[test]
    fn rebalancing_an_unchanged_cluster_moves_nothing() {
        let members = Membership::uniform(7).unwrap();
        let table = PlacementTable::new(4096, &members);
        assert_eq!(table.rebalance(&members), table);
    }
}
