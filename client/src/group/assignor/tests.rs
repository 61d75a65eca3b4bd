//! Properties of every assignor over many seeded random groups: every partition assigned once,
//! only to members subscribed to its topic; balance; and for cooperative-sticky, stickiness
//! and the two-round hand-over in which only moved partitions are revoked.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::range::RangeAssignor;
use super::roundrobin::RoundRobinAssignor;
use super::sticky::{balanced_sticky, CooperativeStickyAssignor};
use super::{Assignor, GroupAssignment, MemberSubscription, PartitionCounts};
use crate::consumer::TopicPartition;

const CASES: u64 = 400;

/// A random group: 1..=4 topics of 1..=12 partitions, 1..=8 members; with `same_topics` every
/// member subscribes to every topic, else each to a random non-empty subset.
fn random_group(rng: &mut StdRng, same_topics: bool) -> (PartitionCounts, Vec<MemberSubscription>) {
    let topics = rng.gen_range(1..=4);
    let counts: PartitionCounts = (0..topics)
        .map(|t| (format!("topic-{t}"), rng.gen_range(1..=12)))
        .collect();
    let names: Vec<String> = counts.keys().cloned().collect();
    let members = (0..rng.gen_range(1..=8))
        .map(|i| {
            let mut subscribed: Vec<String> = names
                .iter()
                .filter(|_| same_topics || rng.gen_bool(0.5))
                .cloned()
                .collect();
            if subscribed.is_empty() {
                subscribed.push(names[rng.gen_range(0..names.len())].clone());
            }
            let mut m = MemberSubscription::new(format!("member-{i:02}"), subscribed);
            if rng.gen_bool(0.2) {
                m.group_instance_id = Some(format!("instance-{}", rng.gen_range(0..100)));
            }
            m
        })
        .collect();
    (counts, members)
}

/// Every partition of a subscribed topic exactly once, to a member subscribed to it.
fn assert_valid(counts: &PartitionCounts, members: &[MemberSubscription], out: &GroupAssignment) {
    let mut seen = BTreeSet::new();
    for m in members {
        for tp in &out[&m.member_id] {
            assert!(m.subscribes_to(&tp.topic), "{} got {tp}", m.member_id);
            assert!(seen.insert(tp.clone()), "{tp} assigned twice");
        }
    }
    for (topic, &count) in counts {
        if members.iter().any(|m| m.subscribes_to(topic)) {
            for p in 0..count {
                assert!(
                    seen.contains(&TopicPartition::new(topic, p)),
                    "{topic}-{p} unassigned"
                );
            }
        }
    }
    assert_eq!(out.len(), members.len(), "an entry per member");
}

fn spread(members: &[MemberSubscription], out: &GroupAssignment) -> usize {
    let sizes = members.iter().map(|m| out[&m.member_id].len());
    sizes.clone().max().unwrap_or(0) - sizes.min().unwrap_or(0)
}

/// No chain of moves, each to a member subscribed to the moved partition's topic, could take a
/// partition from one member to another holding two fewer.
fn assert_no_relief_possible(members: &[MemberSubscription], out: &GroupAssignment) {
    let count = |i: usize| out[&members[i].member_id].len();
    for source in 0..members.len() {
        let mut seen = vec![false; members.len()];
        seen[source] = true;
        let mut queue = VecDeque::from([source]);
        while let Some(u) = queue.pop_front() {
            for tp in &out[&members[u].member_id] {
                for v in 0..members.len() {
                    if !seen[v] && members[v].subscribes_to(&tp.topic) {
                        seen[v] = true;
                        assert!(
                            count(source) < count(v) + 2,
                            "{} ({}) could relieve itself to {} ({})",
                            members[source].member_id,
                            count(source),
                            members[v].member_id,
                            count(v)
                        );
                        queue.push_back(v);
                    }
                }
            }
        }
    }
}

#[test]
fn range_is_valid_and_balanced_per_topic() {
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..CASES {
        let (counts, members) = {
            let same = rng.gen_bool(0.5);
            random_group(&mut rng, same)
        };
        let out = RangeAssignor.assign(&counts, &members);
        assert_valid(&counts, &members, &out);
        for topic in counts.keys() {
            let shares: Vec<usize> = members
                .iter()
                .filter(|m| m.subscribes_to(topic))
                .map(|m| {
                    out[&m.member_id]
                        .iter()
                        .filter(|tp| &tp.topic == topic)
                        .count()
                })
                .collect();
            let (lo, hi) = (shares.iter().min(), shares.iter().max());
            if let (Some(lo), Some(hi)) = (lo, hi) {
                assert!(hi - lo <= 1, "{topic}: {shares:?}");
            }
        }
    }
}

#[test]
fn roundrobin_is_valid_and_balanced_for_equal_subscriptions() {
    let mut rng = StdRng::seed_from_u64(12);
    for _ in 0..CASES {
        let same = rng.gen_bool(0.5);
        let (counts, members) = random_group(&mut rng, same);
        let out = RoundRobinAssignor.assign(&counts, &members);
        assert_valid(&counts, &members, &out);
        if same {
            assert!(spread(&members, &out) <= 1);
        }
    }
}

/// Owned partitions as a previous generation left them: the sticky target for a random earlier
/// membership, so claims are disjoint and valid, with some members new (owning nothing).
fn with_history(rng: &mut StdRng, counts: &PartitionCounts, members: &mut [MemberSubscription]) {
    let earlier: Vec<MemberSubscription> = members
        .iter()
        .filter(|_| rng.gen_bool(0.7))
        .cloned()
        .collect();
    let before = balanced_sticky(counts, &earlier);
    for m in members.iter_mut() {
        m.owned = before.get(&m.member_id).cloned().unwrap_or_default();
        // A member that never had an assignment reports -1, as Kafka's do.
        m.generation = Some(if m.owned.is_empty() { -1 } else { 9 });
    }
}

#[test]
fn sticky_is_valid_and_balanced() {
    let mut rng = StdRng::seed_from_u64(13);
    for _ in 0..CASES {
        let same = rng.gen_bool(0.5);
        let (counts, mut members) = random_group(&mut rng, same);
        with_history(&mut rng, &counts, &mut members);
        let out = balanced_sticky(&counts, &members);
        assert_valid(&counts, &members, &out);
        assert_no_relief_possible(&members, &out);
        if same {
            assert!(spread(&members, &out) <= 1);
        }
    }
}

#[test]
fn sticky_keeps_as_much_as_balance_allows_for_equal_subscriptions() {
    let mut rng = StdRng::seed_from_u64(14);
    for _ in 0..CASES {
        let (counts, mut members) = random_group(&mut rng, true);
        with_history(&mut rng, &counts, &mut members);
        let out = balanced_sticky(&counts, &members);
        let kept: usize = members
            .iter()
            .map(|m| {
                m.owned
                    .iter()
                    .filter(|tp| out[&m.member_id].contains(tp))
                    .count()
            })
            .sum();
        // The best possible: everyone keeps up to the base share, and the members owning more
        // than that take the extra slots while they last.
        let total: usize = counts.values().map(|&c| c as usize).sum();
        let (base, extra) = (total / members.len(), total % members.len());
        let best = members
            .iter()
            .map(|m| m.owned.len().min(base))
            .sum::<usize>()
            + extra.min(members.iter().filter(|m| m.owned.len() > base).count());
        assert_eq!(kept, best, "counts {counts:?}");
    }
}

#[test]
fn sticky_changes_nothing_when_nothing_changed() {
    let mut rng = StdRng::seed_from_u64(15);
    for _ in 0..CASES {
        let (counts, mut members) = {
            let same = rng.gen_bool(0.5);
            random_group(&mut rng, same)
        };
        let first = balanced_sticky(&counts, &members);
        for m in &mut members {
            m.owned = first[&m.member_id].clone();
            m.generation = Some(3);
        }
        assert_eq!(balanced_sticky(&counts, &members), first);
        assert_eq!(CooperativeStickyAssignor.assign(&counts, &members), first);
    }
}

/// Runs the cooperative protocol as members would: assign, let owners revoke what they lost,
/// rejoin, until an assignment revokes nothing.
#[test]
fn cooperative_rounds_revoke_only_what_moves_and_never_share_a_partition() {
    let mut rng = StdRng::seed_from_u64(16);
    for _ in 0..CASES {
        let same = rng.gen_bool(0.5);
        let (counts, mut members) = random_group(&mut rng, same);
        with_history(&mut rng, &counts, &mut members);
        let start: BTreeMap<String, Vec<TopicPartition>> = members
            .iter()
            .map(|m| (m.member_id.clone(), m.owned.clone()))
            .collect();
        let mut revoked_total: BTreeMap<String, BTreeSet<TopicPartition>> = BTreeMap::new();
        for (round, generation) in (0..).zip(10..) {
            assert!(round < 3, "the hand-over takes at most two rounds");
            let target = balanced_sticky(&counts, &members);
            let out = CooperativeStickyAssignor.assign(&counts, &members);
            let mut any_revoked = false;
            for m in &mut members {
                let now = &out[&m.member_id];
                let lost: Vec<TopicPartition> = m
                    .owned
                    .iter()
                    .filter(|tp| !now.contains(tp))
                    .cloned()
                    .collect();
                // Only what this round's target gives to another member is revoked.
                for tp in &lost {
                    assert!(!target[&m.member_id].contains(tp), "{tp} revoked but kept");
                }
                any_revoked |= !lost.is_empty();
                revoked_total
                    .entry(m.member_id.clone())
                    .or_default()
                    .extend(lost);
                m.owned = now.clone();
                m.generation = Some(generation);
            }
            // No partition is held by two members at any point.
            let held: usize = members.iter().map(|m| m.owned.len()).sum();
            let distinct: BTreeSet<&TopicPartition> =
                members.iter().flat_map(|m| &m.owned).collect();
            assert_eq!(held, distinct.len());
            if !any_revoked {
                break;
            }
        }
        let last: GroupAssignment = members
            .iter()
            .map(|m| (m.member_id.clone(), m.owned.clone()))
            .collect();
        assert_valid(&counts, &members, &last);
        assert_no_relief_possible(&members, &last);
        if !same {
            // With unequal subscriptions a chain of moves may make a member pass a partition
            // on in the first round and get it back in the second.
            continue;
        }
        for m in &members {
            // Revoked over both rounds: exactly what the member owned and ended up elsewhere.
            let moved: BTreeSet<TopicPartition> = start[&m.member_id]
                .iter()
                .filter(|tp| !m.owned.contains(tp))
                .cloned()
                .collect();
            assert_eq!(revoked_total[&m.member_id], moved, "{}", m.member_id);
        }
    }
}
