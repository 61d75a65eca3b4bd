//! Kafka's `RangeAssignor`: topic by topic, the members subscribed to it (in member order) get
//! consecutive runs of partitions, the first `partitions % members` of them one extra.
//!
//! Members subscribed to the same topics get the same partition numbers of each, which is what
//! joins of co-partitioned topics rely on; the price is imbalance across many topics, since the
//! first members get the extra partition of every topic.

use super::{
    empty_assignment, normalise, sorted_members, Assignor, GroupAssignment, MemberSubscription,
    PartitionCounts,
};
use crate::consumer::TopicPartition;

pub const NAME: &str = "range";

#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        NAME
    }

    fn assign(&self, counts: &PartitionCounts, members: &[MemberSubscription]) -> GroupAssignment {
        let mut assignment = empty_assignment(members);
        let members = sorted_members(members);
        for (topic, &count) in counts {
            let subscribers: Vec<&MemberSubscription> = members
                .iter()
                .copied()
                .filter(|m| m.subscribes_to(topic))
                .collect();
            if subscribers.is_empty() || count <= 0 {
                continue;
            }
            let n = subscribers.len() as i32;
            let (per_member, with_extra) = (count / n, count % n);
            for (i, member) in (0..).zip(&subscribers) {
                let start = per_member * i + i.min(with_extra);
                let length = per_member + i32::from(i < with_extra);
                let mine = assignment
                    .get_mut(&member.member_id)
                    .expect("every member has an entry");
                mine.extend((start..start + length).map(|p| TopicPartition::new(topic, p)));
            }
        }
        normalise(assignment)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription::new(id, topics.iter().map(|t| t.to_string()))
    }

    fn partitions(assignment: &GroupAssignment, member: &str) -> Vec<String> {
        assignment[member].iter().map(|tp| tp.to_string()).collect()
    }

    #[test]
    fn consecutive_runs_with_the_extra_ones_first() {
        let counts = PartitionCounts::from([("t".to_string(), 7)]);
        let members = [
            member("c", &["t"]),
            member("a", &["t"]),
            member("b", &["t"]),
        ];
        let out = RangeAssignor.assign(&counts, &members);
        assert_eq!(partitions(&out, "a"), ["t-0", "t-1", "t-2"]);
        assert_eq!(partitions(&out, "b"), ["t-3", "t-4"]);
        assert_eq!(partitions(&out, "c"), ["t-5", "t-6"]);
    }

    #[test]
    fn each_topic_among_its_own_subscribers() {
        let counts = PartitionCounts::from([("x".to_string(), 2), ("y".to_string(), 3)]);
        let members = [member("a", &["x", "y"]), member("b", &["y"])];
        let out = RangeAssignor.assign(&counts, &members);
        assert_eq!(partitions(&out, "a"), ["x-0", "x-1", "y-0", "y-1"]);
        assert_eq!(partitions(&out, "b"), ["y-2"]);
    }

    #[test]
    fn static_members_come_first_by_instance_id() {
        let counts = PartitionCounts::from([("t".to_string(), 3)]);
        let mut s = member("zzz", &["t"]);
        s.group_instance_id = Some("instance-1".into());
        let members = [member("aaa", &["t"]), s, member("bbb", &["t"])];
        let out = RangeAssignor.assign(&counts, &members);
        assert_eq!(partitions(&out, "zzz"), ["t-0"]);
        assert_eq!(partitions(&out, "aaa"), ["t-1"]);
        assert_eq!(partitions(&out, "bbb"), ["t-2"]);
    }

    #[test]
    fn more_members_than_partitions_leaves_some_empty() {
        let counts = PartitionCounts::from([("t".to_string(), 1)]);
        let members = [
            member("a", &["t"]),
            member("b", &["t"]),
            member("c", &["u"]),
        ];
        let out = RangeAssignor.assign(&counts, &members);
        assert_eq!(partitions(&out, "a"), ["t-0"]);
        assert!(out["b"].is_empty() && out["c"].is_empty());
    }
}
