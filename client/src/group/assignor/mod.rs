//! Partition assignors: the group leader runs one over every member's subscription and the
//! topics' current partition counts, and sends each member its share in SyncGroup.
//!
//! As in Kafka, assignment is the client's job, not the broker's: the broker only picks the
//! protocol (assignor name) every member supports. The names are Kafka's, so a group may mix
//! this client with Java, librdkafka, kafka-python or kafkajs members:
//!
//! - [`range`] (`"range"`): per topic, consecutive partitions to members in order.
//! - [`roundrobin`] (`"roundrobin"`): all partitions of all topics dealt out in turn.
//! - [`sticky`] (`"cooperative-sticky"`, KIP-429): balanced, keeps what members own, and moves a
//!   partition in two rebalances (revoke, then assign) so nobody consumes it twice.
//!
//! Members are ordered as Java's `MemberInfo` orders them, static members (by instance id) first
//! and then by member id, so every leader, of whatever client, computes the same answer.

pub mod range;
pub mod roundrobin;
pub mod sticky;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::consumer::TopicPartition;

/// How members give up partitions when the group rebalances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RebalanceProtocol {
    /// Every member revokes everything before rejoining (range, roundrobin).
    Eager,
    /// Members keep consuming what they own; only partitions that move are revoked (KIP-429).
    Cooperative,
}

/// One member's subscription, as the leader reads it from JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// Subscribed topics, sorted, without duplicates.
    pub topics: Vec<String>,
    /// What the member consumed in its last generation (empty for eager members).
    pub owned: Vec<TopicPartition>,
    /// The generation `owned` belongs to, when the member says (subscription v2+, or the
    /// cooperative-sticky user data of older versions).
    pub generation: Option<i32>,
}

impl MemberSubscription {
    pub fn new(member_id: impl Into<String>, topics: impl IntoIterator<Item = String>) -> Self {
        let topics: BTreeSet<String> = topics.into_iter().collect();
        Self {
            member_id: member_id.into(),
            group_instance_id: None,
            topics: topics.into_iter().collect(),
            owned: Vec::new(),
            generation: None,
        }
    }

    pub fn subscribes_to(&self, topic: &str) -> bool {
        self.topics
            .binary_search_by(|t| t.as_str().cmp(topic))
            .is_ok()
    }

    /// Java's `MemberInfo` order: static members first, by instance id, then by member id.
    pub fn member_order(&self, other: &Self) -> Ordering {
        match (&self.group_instance_id, &other.group_instance_id) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => self.member_id.cmp(&other.member_id),
        }
    }
}

/// Member id to the partitions it gets, each list sorted. Every member has an entry.
pub type GroupAssignment = BTreeMap<String, Vec<TopicPartition>>;

/// Topic name to partition count, for the topics any member subscribes to and that exist.
pub type PartitionCounts = BTreeMap<String, i32>;

/// A partition assignment strategy (Java's `ConsumerPartitionAssignor`).
pub trait Assignor: Send + Sync + fmt::Debug {
    /// The protocol name sent in JoinGroup, e.g. `"range"`.
    fn name(&self) -> &'static str;

    fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    /// Extra bytes in this member's subscription for this assignor.
    fn user_data(&self, _generation: i32) -> Option<Bytes> {
        None
    }

    /// Reads the owner generation from a subscription that predates the generation field.
    fn generation_from_user_data(&self, _user_data: &[u8]) -> Option<i32> {
        None
    }

    /// Shares out the partitions of `counts` among `members`.
    fn assign(&self, counts: &PartitionCounts, members: &[MemberSubscription]) -> GroupAssignment;
}

/// The built-in assignor called `name`, with Kafka's names.
pub fn by_name(name: &str) -> Option<Arc<dyn Assignor>> {
    match name {
        range::NAME => Some(Arc::new(range::RangeAssignor)),
        roundrobin::NAME => Some(Arc::new(roundrobin::RoundRobinAssignor)),
        sticky::NAME => Some(Arc::new(sticky::CooperativeStickyAssignor)),
        _ => None,
    }
}

/// The names `by_name` knows, for help texts and errors.
pub const BUILT_IN: &[&str] = &[range::NAME, roundrobin::NAME, sticky::NAME];

/// The protocol a member with these assignors follows: cooperative only if every one of them
/// supports it, since the member must revoke before it knows which one the group picks (Java
/// picks the same way).
pub fn common_protocol(assignors: &[Arc<dyn Assignor>]) -> RebalanceProtocol {
    assignors
        .iter()
        .map(|a| a.rebalance_protocol())
        .min()
        .unwrap_or(RebalanceProtocol::Eager)
}

/// Members in Java's `MemberInfo` order.
pub(crate) fn sorted_members(members: &[MemberSubscription]) -> Vec<&MemberSubscription> {
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| a.member_order(b));
    sorted
}

/// An assignment with an empty entry for every member, to fill in.
pub(crate) fn empty_assignment(members: &[MemberSubscription]) -> GroupAssignment {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect()
}

/// Sorts each member's list by topic, then partition.
pub(crate) fn normalise(mut assignment: GroupAssignment) -> GroupAssignment {
    for partitions in assignment.values_mut() {
        partitions.sort();
    }
    assignment
}
