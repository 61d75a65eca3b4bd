//! The nodes a scheme routes to: stable logical ids with a capacity (weight).
//!
//! Source 004: use stable logical shard ids rather than host names, so that replacing a host does
//! not change the distribution. A node keeps its id (and so its ring tokens, its rendezvous seed,
//! its slots) through every change; new nodes get new ids.

use super::SchemeError;

/// A node's stable logical id. Its name is [`node_name`].
pub type NodeId = u32;

/// The name of a node, as tables and token identities spell it: `node-3`.
pub fn node_name(id: NodeId) -> String {
    format!("node-{id}")
}

/// One node and its capacity, relative to the others (1 is a standard node, 2 twice that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub id: NodeId,
    pub weight: u32,
}

/// The nodes of a cluster, in join order: jump hash numbers its buckets in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    members: Vec<Member>,
}

impl Membership {
    /// `count` standard nodes, `node-0` to `node-{count-1}`.
    pub fn uniform(count: u32) -> Result<Self, SchemeError> {
        Self::new((0..count).map(|id| Member { id, weight: 1 }).collect())
    }

    /// A membership from explicit members: at least one, ids unique, weights at least 1.
    pub fn new(members: Vec<Member>) -> Result<Self, SchemeError> {
        if members.is_empty() {
            return Err(SchemeError::InvalidMembership(
                "a cluster needs at least one node".into(),
            ));
        }
        if let Some(m) = members.iter().find(|m| m.weight == 0) {
            return Err(SchemeError::InvalidMembership(format!(
                "{} has weight 0; a node's weight is at least 1",
                node_name(m.id)
            )));
        }
        let mut ids: Vec<NodeId> = members.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        if let Some(pair) = ids.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(SchemeError::InvalidMembership(format!(
                "{} appears twice",
                node_name(pair[0])
            )));
        }
        Ok(Membership { members })
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.members.iter().map(|m| m.id)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: a membership has at least one node.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.members.iter().any(|m| m.id == id)
    }

    pub fn weight_of(&self, id: NodeId) -> Option<u32> {
        self.members.iter().find(|m| m.id == id).map(|m| m.weight)
    }

    pub fn total_weight(&self) -> u64 {
        self.members.iter().map(|m| u64::from(m.weight)).sum()
    }

    /// Whether every node has the same weight (schemes without weights need this).
    pub fn is_uniform(&self) -> bool {
        self.members
            .iter()
            .all(|m| m.weight == self.members[0].weight)
    }

    /// The same nodes, with `id`'s weight set to `weight` (unchanged if `id` is not a member).
    pub fn with_weight(&self, id: NodeId, weight: u32) -> Result<Self, SchemeError> {
        let members = self
            .members
            .iter()
            .map(|m| Member {
                id: m.id,
                weight: if m.id == id { weight } else { m.weight },
            })
            .collect();
        Self::new(members)
    }

    /// These nodes plus `count` standard ones with fresh ids, joining at the end.
    pub fn grown(&self, count: u32) -> Self {
        let next = self.ids().max().map_or(0, |max| max + 1);
        let mut members = self.members.clone();
        members.extend((next..next + count).map(|id| Member { id, weight: 1 }));
        Membership { members }
    }

    /// These nodes without `ids`, which must all be members, leaving at least one node.
    pub fn without(&self, ids: &[NodeId]) -> Result<Self, SchemeError> {
        if let Some(id) = ids.iter().find(|id| !self.contains(**id)) {
            return Err(SchemeError::InvalidMembership(format!(
                "{} is not a node of this cluster",
                node_name(*id)
            )));
        }
        Self::new(
            self.members
                .iter()
                .filter(|m| !ids.contains(&m.id))
                .copied()
                .collect(),
        )
    }

    /// For each possible id, its position in this membership: a lookup table that costs one
    /// index per key where a search would cost a scan.
    pub fn positions(&self) -> Vec<Option<usize>> {
        let len = self.ids().max().map_or(0, |max| max as usize + 1);
        let mut positions = vec![None; len];
        for (position, m) in self.members.iter().enumerate() {
            positions[m.id as usize] = Some(position);
        }
        positions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_gives_fresh_ids_and_keeps_the_old_ones() {
        let four = Membership::uniform(4).unwrap();
        let five = four.grown(1);
        assert_eq!(five.ids().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        let without = five.without(&[1]).unwrap();
        assert_eq!(without.ids().collect::<Vec<_>>(), vec![0, 2, 3, 4]);
        assert_eq!(without.grown(1).ids().last(), Some(5));
    }

    #[test]
    fn invalid_memberships_are_refused() {
        assert!(Membership::uniform(0).is_err());
        assert!(Membership::new(vec![
            Member { id: 1, weight: 1 },
            Member { id: 1, weight: 2 }
        ])
        .is_err());
        assert!(Membership::new(vec![Member { id: 1, weight: 0 }]).is_err());
        let one = Membership::uniform(1).unwrap();
        assert!(one.without(&[0]).is_err());
        assert!(one.without(&[7]).is_err());
    }

    #[test]
    fn weights() {
        let m = Membership::uniform(3).unwrap();
        assert!(m.is_uniform());
        let heavy = m.with_weight(0, 2).unwrap();
        assert!(!heavy.is_uniform());
        assert_eq!(heavy.total_weight(), 4);
        assert_eq!(heavy.weight_of(0), Some(2));
        assert_eq!(heavy.positions(), vec![Some(0), Some(1), Some(2)]);
    }
}
