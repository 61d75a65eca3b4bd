//! Kafka's `RoundRobinAssignor`: every partition of every subscribed topic, sorted by topic and
//! partition, dealt to the members in turn (in member order), skipping members not subscribed
//! to the partition's topic. kafkajs uses only this one.

use super::{
    empty_assignment, normalise, sorted_members, Assignor, GroupAssignment, MemberSubscription,
    PartitionCounts,
};
use crate::consumer::TopicPartition;

pub const NAME: &str = "roundrobin";

#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        NAME
    }

    fn assign(&self, counts: &PartitionCounts, members: &[MemberSubscription]) -> GroupAssignment {
        let mut assignment = empty_assignment(members);
        let members = sorted_members(members);
        // Java's circular iterator: it stays on the member after the last one served.
        let mut next = 0;
        for (topic, &count) in counts {
            if !members.iter().any(|m| m.subscribes_to(topic)) {
                continue;
            }
            for partition in 0..count {
                while !members[next % members.len()].subscribes_to(topic) {
                    next += 1;
                }
                let member = members[next % members.len()];
                next += 1;
                assignment
                    .get_mut(&member.member_id)
                    .expect("every member has an entry")
                    .push(TopicPartition::new(topic, partition));
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
    fn dealt_in_turn_across_topics() {
        let counts = PartitionCounts::from([("x".to_string(), 3), ("y".to_string(), 2)]);
        let members = [member("b", &["x", "y"]), member("a", &["x", "y"])];
        let out = RoundRobinAssignor.assign(&counts, &members);
        assert_eq!(partitions(&out, "a"), ["x-0", "x-2", "y-1"]);
        assert_eq!(partitions(&out, "b"), ["x-1", "y-0"]);
    }

    #[test]
    fn members_not_subscribed_are_skipped() {
        // Kafka's own example: C0 on t0, C1 on t0 and t1, C2 on t0, t1 and t2.
        let counts = PartitionCounts::from([
            ("t0".to_string(), 1),
            ("t1".to_string(), 2),
            ("t2".to_string(), 3),
        ]);
        let members = [
            member("C0", &["t0"]),
            member("C1", &["t0", "t1"]),
            member("C2", &["t0", "t1", "t2"]),
        ];
        let out = RoundRobinAssignor.assign(&counts, &members);
        assert_eq!(partitions(&out, "C0"), ["t0-0"]);
        assert_eq!(partitions(&out, "C1"), ["t1-0"]);
        assert_eq!(partitions(&out, "C2"), ["t1-1", "t2-0", "t2-1", "t2-2"]);
    }

    #[test]
    fn topics_nobody_wants_are_left_out() {
        let counts = PartitionCounts::from([("x".to_string(), 2), ("z".to_string(), 5)]);
        let out = RoundRobinAssignor.assign(&counts, &[member("a", &["x"])]);
        assert_eq!(partitions(&out, "a"), ["x-0", "x-1"]);
    }
}
