//! Kafka's `CooperativeStickyAssignor` (KIP-429): a balanced assignment that keeps as much of
//! what each member owns as balance allows, handed out cooperatively.
//!
//! The balanced sticky assignment is computed in three steps:
//!
//! 1. **Claims.** Members list what they own. As in Kafka's `AbstractStickyAssignor`, only
//!    members of the highest generation reported are believed (an older generation's view is
//!    stale), a partition claimed twice in that generation belongs to neither, and a claim on a
//!    partition that no longer exists or is no longer subscribed is dropped. Members keep their
//!    valid claims.
//! 2. **Free partitions** go, those with the fewest possible takers first, to the least loaded
//!    member that subscribes to their topic.
//! 3. **Balance.** While some member could hand a partition, possibly through a chain of members
//!    each passing one on, to a member with at least two fewer, the shortest such chain is
//!    shifted. Each shift lowers the sum of squared counts, so this ends; when it ends no member
//!    can be relieved by any sequence of moves, which for equal subscriptions means counts
//!    differ by at most one. Members pass on partitions they did not own before first, so the
//!    moves needed cost as little stickiness as possible.
//!
//! Cooperative hand-over: a partition the target gives to a member other than its current owner
//! is left out of this round's assignment. The owner sees it missing, revokes it and rejoins;
//! in the next round nobody owns it and step 2 gives it to the new member. So no partition is
//! ever consumed by two members at once, and only partitions that change owner are revoked.
//! With unequal subscriptions a chain may make a member pass on a partition in the first round
//! and get it back in the second (balance is reached either way); Kafka calls the general case
//! best effort too.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use bytes::Bytes;

use super::{
    empty_assignment, sorted_members, Assignor, GroupAssignment, MemberSubscription,
    PartitionCounts, RebalanceProtocol,
};
use crate::consumer::TopicPartition;

pub const NAME: &str = "cooperative-sticky";

#[derive(Debug, Clone, Copy, Default)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &'static str {
        NAME
    }

    fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    /// Kafka's assignor puts the generation in the user data too, for leaders that read
    /// subscriptions older than v2 (which have no generation field).
    fn user_data(&self, generation: i32) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(&generation.to_be_bytes()))
    }

    fn generation_from_user_data(&self, user_data: &[u8]) -> Option<i32> {
        let bytes: [u8; 4] = user_data.get(..4)?.try_into().ok()?;
        Some(i32::from_be_bytes(bytes))
    }

    fn assign(&self, counts: &PartitionCounts, members: &[MemberSubscription]) -> GroupAssignment {
        withhold_transfers(balanced_sticky(counts, members), members)
    }
}

/// The assignment the group converges to: balanced, and as close to current ownership as that
/// allows (steps 1 to 3 above).
pub fn balanced_sticky(
    counts: &PartitionCounts,
    members: &[MemberSubscription],
) -> GroupAssignment {
    let mut balancer = Balancer::new(counts, members);
    balancer.place_free_partitions(counts);
    balancer.balance();
    balancer.into_assignment(members)
}

/// KIP-429's adjustment: drops from each member's new assignment the partitions another member
/// owns now and must revoke first (Java's `partitionsTransferringOwnership`).
pub fn withhold_transfers(
    mut assignment: GroupAssignment,
    members: &[MemberSubscription],
) -> GroupAssignment {
    let mut revoked: HashSet<TopicPartition> = HashSet::new();
    for m in members {
        let Some(assigned) = assignment.get(&m.member_id) else {
            continue;
        };
        revoked.extend(
            m.owned
                .iter()
                .filter(|tp| assigned.binary_search(tp).is_err())
                .cloned(),
        );
    }
    for m in members {
        if let Some(assigned) = assignment.get_mut(&m.member_id) {
            assigned.retain(|tp| m.owned.contains(tp) || !revoked.contains(tp));
        }
    }
    assignment
}

struct Balancer<'a> {
    /// In member order; indexes below refer to this.
    members: Vec<&'a MemberSubscription>,
    held: Vec<BTreeSet<TopicPartition>>,
    /// Valid claims: what each member owned and may keep.
    claimed: Vec<BTreeSet<TopicPartition>>,
    /// Topic to the members subscribed to it.
    subscribers: BTreeMap<&'a str, Vec<usize>>,
}

impl<'a> Balancer<'a> {
    /// Step 1: every member starts with its valid claims.
    fn new(counts: &'a PartitionCounts, members: &'a [MemberSubscription]) -> Self {
        let members = sorted_members(members);
        let mut subscribers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, m) in members.iter().enumerate() {
            for topic in &m.topics {
                if counts.get(topic).is_some_and(|&c| c > 0) {
                    subscribers.entry(topic.as_str()).or_default().push(i);
                }
            }
        }
        let claimed = valid_claims(&members, counts);
        Self {
            held: claimed.clone(),
            members,
            claimed,
            subscribers,
        }
    }

    /// Step 2: unowned partitions, hardest to place first, to the least loaded taker.
    fn place_free_partitions(&mut self, counts: &PartitionCounts) {
        let owned: HashSet<&TopicPartition> = self.held.iter().flatten().collect();
        let mut free: Vec<(usize, TopicPartition)> = Vec::new();
        for (topic, takers) in &self.subscribers {
            for p in 0..counts[*topic] {
                let tp = TopicPartition::new(*topic, p);
                if !owned.contains(&tp) {
                    free.push((takers.len(), tp));
                }
            }
        }
        free.sort();
        for (_, tp) in free {
            let takers = &self.subscribers[tp.topic.as_str()];
            let least = *takers
                .iter()
                .min_by_key(|&&i| (self.held[i].len(), i))
                .expect("only subscribed topics are listed");
            self.held[least].insert(tp);
        }
    }

    /// Step 3: shift along augmenting chains until none relieves anyone.
    fn balance(&mut self) {
        loop {
            let counts: Vec<usize> = self.held.iter().map(BTreeSet::len).collect();
            let Some(&min) = counts.iter().min() else {
                return;
            };
            let mut sources: Vec<usize> = (0..counts.len()).collect();
            sources.sort_by_key(|&i| (std::cmp::Reverse(counts[i]), i));
            let path = sources
                .into_iter()
                .take_while(|&s| counts[s] >= min + 2)
                .find_map(|s| self.augmenting_path(s, &counts));
            match path {
                Some(path) => self.shift(&path),
                None => return,
            }
        }
    }

    /// The shortest chain from `source` to the least loaded member it can reach, if that one
    /// has at least two fewer partitions. A member reaches another when it holds a partition of
    /// a topic the other subscribes to.
    fn augmenting_path(&self, source: usize, counts: &[usize]) -> Option<Vec<usize>> {
        let n = self.members.len();
        let mut parent: Vec<Option<usize>> = vec![None; n];
        let mut seen = vec![false; n];
        seen[source] = true;
        let mut queue = VecDeque::from([source]);
        let mut best: Option<usize> = None;
        while let Some(u) = queue.pop_front() {
            let topics: BTreeSet<&str> = self.held[u].iter().map(|tp| tp.topic.as_str()).collect();
            for topic in topics {
                for &v in &self.subscribers[topic] {
                    if seen[v] {
                        continue;
                    }
                    seen[v] = true;
                    parent[v] = Some(u);
                    queue.push_back(v);
                    // BFS order: on equal counts the nearer member wins.
                    if best.is_none_or(|b| counts[v] < counts[b]) {
                        best = Some(v);
                    }
                }
            }
        }
        let target = best.filter(|&b| counts[source] >= counts[b] + 2)?;
        let mut path = vec![target];
        while let Some(p) = parent[*path.last().expect("not empty")] {
            path.push(p);
        }
        path.reverse();
        Some(path)
    }

    /// Each member on the path passes one partition to the next, preferring one it did not
    /// own before the rebalance.
    fn shift(&mut self, path: &[usize]) {
        for pair in path.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            let takes = |tp: &&TopicPartition| self.members[to].subscribes_to(&tp.topic);
            let pick = self.held[from]
                .iter()
                .filter(takes)
                .find(|tp| !self.claimed[from].contains(*tp))
                .or_else(|| self.held[from].iter().find(takes))
                .cloned()
                .expect("the path only follows members that can take a partition");
            self.held[from].remove(&pick);
            self.held[to].insert(pick);
        }
    }

    fn into_assignment(self, all: &[MemberSubscription]) -> GroupAssignment {
        let mut out = empty_assignment(all);
        for (m, held) in self.members.iter().zip(self.held) {
            out.insert(m.member_id.clone(), held.into_iter().collect());
        }
        out
    }
}

/// Step 1's rules for which ownership claims to believe.
fn valid_claims(
    members: &[&MemberSubscription],
    counts: &PartitionCounts,
) -> Vec<BTreeSet<TopicPartition>> {
    let generation = |m: &MemberSubscription| m.generation.unwrap_or(-1);
    let newest = members.iter().map(|m| generation(m)).max().unwrap_or(-1);
    let mut owner: HashMap<&TopicPartition, usize> = HashMap::new();
    let mut contested: HashSet<&TopicPartition> = HashSet::new();
    for (i, m) in members.iter().enumerate() {
        if generation(m) != newest {
            continue;
        }
        for tp in &m.owned {
            let exists = counts
                .get(&tp.topic)
                .is_some_and(|&c| (0..c).contains(&tp.partition));
            if !exists || !m.subscribes_to(&tp.topic) || contested.contains(tp) {
                continue;
            }
            match owner.insert(tp, i) {
                Some(other) if other != i => {
                    tracing::warn!(
                        %tp,
                        first = %members[other].member_id,
                        second = %m.member_id,
                        "two members claim one partition in the same generation; neither keeps it"
                    );
                    owner.remove(tp);
                    contested.insert(tp);
                }
                _ => {}
            }
        }
    }
    let mut claimed = vec![BTreeSet::new(); members.len()];
    for (tp, i) in owner {
        claimed[i].insert(tp.clone());
    }
    claimed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(
        id: &str,
        topics: &[&str],
        owned: &[(&str, i32)],
        generation: i32,
    ) -> MemberSubscription {
        let mut m = MemberSubscription::new(id, topics.iter().map(|t| t.to_string()));
        m.owned = owned
            .iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect();
        m.generation = Some(generation);
        m
    }

    fn names(assignment: &GroupAssignment, member: &str) -> Vec<String> {
        assignment[member].iter().map(|tp| tp.to_string()).collect()
    }

    #[test]
    fn a_new_member_gets_half_and_the_owner_keeps_the_rest() {
        let counts = PartitionCounts::from([("t".to_string(), 6)]);
        let owned: Vec<(&str, i32)> = (0..6).map(|p| ("t", p)).collect();
        let members = [member("a", &["t"], &owned, 3), member("b", &["t"], &[], -1)];
        let target = balanced_sticky(&counts, &members);
        assert_eq!(target["a"].len(), 3);
        assert_eq!(target["b"].len(), 3);
        // First round: b gets nothing yet, a is told to give up three.
        let first = CooperativeStickyAssignor.assign(&counts, &members);
        assert_eq!(names(&first, "a"), names(&target, "a"));
        assert!(first["b"].is_empty());
        // Second round: a owns only its share; b gets the rest.
        let members = [
            member("a", &["t"], &[("t", 0), ("t", 1), ("t", 2)], 4),
            member("b", &["t"], &[], 4),
        ];
        let second = CooperativeStickyAssignor.assign(&counts, &members);
        assert_eq!(names(&second, "a"), ["t-0", "t-1", "t-2"]);
        assert_eq!(names(&second, "b"), ["t-3", "t-4", "t-5"]);
    }

    #[test]
    fn stale_and_contested_claims_are_ignored() {
        let counts = PartitionCounts::from([("t".to_string(), 4)]);
        let members = [
            member("a", &["t"], &[("t", 0), ("t", 1)], 5),
            member("b", &["t"], &[("t", 1), ("t", 2)], 5),
            // An older generation's view: not believed.
            member("c", &["t"], &[("t", 3), ("t", 0)], 4),
        ];
        let sorted = sorted_members(&members);
        let claims = valid_claims(&sorted, &counts);
        let as_names =
            |i: usize| -> Vec<String> { claims[i].iter().map(|tp| tp.to_string()).collect() };
        assert_eq!(as_names(0), ["t-0"]);
        assert_eq!(as_names(1), ["t-2"]);
        assert!(claims[2].is_empty());
    }

    #[test]
    fn claims_on_vanished_or_unsubscribed_partitions_are_dropped() {
        let counts = PartitionCounts::from([("t".to_string(), 2), ("u".to_string(), 1)]);
        let members = [member("a", &["t"], &[("t", 5), ("u", 0), ("t", 1)], 1)];
        let out = balanced_sticky(&counts, &members);
        assert_eq!(names(&out, "a"), ["t-0", "t-1"]);
    }

    #[test]
    fn chains_relieve_members_no_single_move_can() {
        // a holds x only; b could take x but is as loaded as a allows; c takes only y.
        let counts = PartitionCounts::from([("x".to_string(), 3), ("y".to_string(), 2)]);
        let members = [
            member("a", &["x"], &[("x", 0), ("x", 1), ("x", 2)], 1),
            member("b", &["x", "y"], &[("y", 0), ("y", 1)], 1),
            member("c", &["y"], &[], 1),
        ];
        let out = balanced_sticky(&counts, &members);
        let sizes: Vec<usize> = ["a", "b", "c"].iter().map(|m| out[*m].len()).collect();
        assert_eq!(sizes, [2, 2, 1]);
    }

    #[test]
    fn the_generation_travels_in_user_data() {
        let a = CooperativeStickyAssignor;
        let data = a.user_data(7).unwrap();
        assert_eq!(a.generation_from_user_data(&data), Some(7));
        assert_eq!(a.generation_from_user_data(&[0, 1]), None);
    }
}
