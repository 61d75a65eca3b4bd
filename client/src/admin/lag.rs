//! Per-partition consumer lag, computed as kafka-consumer-groups.sh computes it: log end offset
//! (ListOffsets latest) minus the group's committed offset, with no lag at all ("-") where the
//! group committed nothing. Rows come in the tool's order: members with the most partitions
//! first, each member's partitions by topic and partition, then committed partitions nobody owns.

use std::collections::{BTreeMap, BTreeSet};

use super::groups::GroupDescription;
use super::Admin;
use crate::consumer::TopicPartition;
use crate::error::Result;
use crate::offsets::{list_offsets, OffsetSpec};

/// The member consuming a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub member_id: String,
    pub host: String,
    pub client_id: String,
}

/// One row of `kafka-consumer-groups.sh --describe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// The committed offset; `None` when nothing is committed.
    pub current_offset: Option<i64>,
    /// `None` when the log end could not be read (no leader, topic gone).
    pub log_end_offset: Option<i64>,
    /// `log_end_offset - current_offset`, when both are known and the commit is not past the
    /// end ([`PartitionLag::impossible`]).
    pub lag: Option<i64>,
    /// `None` for a committed partition no member owns.
    pub owner: Option<Owner>,
    /// The timestamp (epoch ms) of the oldest record not consumed yet, the one at the committed
    /// offset; filled by [`Admin::group_time_lag`] for partitions with lag, else `None`.
    pub oldest_unconsumed: Option<i64>,
}

impl PartitionLag {
    /// The committed offset is past the log end: no consumer can have read that far, so the log
    /// was truncated under it (an unclean leader election) or the broker's figures are wrong.
    /// Kafka's tool prints the difference as a negative lag; it is no lag at all.
    pub fn impossible(&self) -> bool {
        matches!((self.current_offset, self.log_end_offset), (Some(c), Some(end)) if c > end)
    }

    /// The time lag at `now_ms`: how old the oldest record not consumed yet is
    /// ([`protocol::lag`]); `None` when the lag or that record's timestamp is unknown.
    pub fn time_lag_ms(&self, now_ms: i64) -> Option<i64> {
        protocol::lag::time_lag_ms(self.lag?, self.oldest_unconsumed, now_ms)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLag {
    pub description: GroupDescription,
    pub partitions: Vec<PartitionLag>,
}

impl GroupLag {
    /// The sum over partitions with a known lag.
    pub fn total(&self) -> i64 {
        self.partitions.iter().filter_map(|p| p.lag).sum()
    }
}

impl Admin {
    /// The group's state, members and per-partition lag, from DescribeGroups, OffsetFetch (all
    /// committed partitions) and ListOffsets, as Kafka's tool gathers them.
    pub async fn group_lag(&self, group: &str) -> Result<GroupLag> {
        let description = self.describe_group(group).await?;
        if description.state == "Dead" {
            return Ok(GroupLag {
                description,
                partitions: Vec::new(),
            });
        }
        let committed: BTreeMap<TopicPartition, i64> = self
            .list_group_offsets(group, None)
            .await?
            .into_iter()
            .filter_map(|(tp, offset)| Some((tp, offset?)))
            .collect();
        let mut wanted: BTreeSet<&TopicPartition> = committed.keys().collect();
        wanted.extend(description.members.iter().flat_map(|m| &m.assignment));
        let log_ends = self.log_ends(wanted).await;
        let partitions = lag_rows(&description, &committed, &log_ends);
        Ok(GroupLag {
            description,
            partitions,
        })
    }

    /// Latest offsets, topic by topic; a topic that cannot be read is left out (shown as "-").
    async fn log_ends(
        &self,
        partitions: BTreeSet<&TopicPartition>,
    ) -> BTreeMap<TopicPartition, i64> {
        let mut by_topic: BTreeMap<&str, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
        for tp in partitions {
            by_topic
                .entry(tp.topic.as_str())
                .or_default()
                .push((tp.partition, OffsetSpec::Latest));
        }
        let mut out = BTreeMap::new();
        for (topic, asks) in by_topic {
            match list_offsets(self.client(), topic, &asks).await {
                Ok(found) => out.extend(
                    found
                        .into_iter()
                        .map(|o| (TopicPartition::new(topic, o.partition), o.offset)),
                ),
                Err(e) => tracing::debug!(topic, %e, "log end offsets unknown"),
            }
        }
        out
    }
}

/// The rows of the describe table, in Kafka's order.
pub fn lag_rows(
    description: &GroupDescription,
    committed: &BTreeMap<TopicPartition, i64>,
    log_ends: &BTreeMap<TopicPartition, i64>,
) -> Vec<PartitionLag> {
    let row = |tp: &TopicPartition, owner: Option<Owner>| {
        let current_offset = committed.get(tp).copied();
        let log_end_offset = log_ends.get(tp).copied();
        let lag = match (current_offset, log_end_offset) {
            (Some(c), Some(end)) if c <= end => Some(end - c),
            _ => None,
        };
        PartitionLag {
            topic: tp.topic.clone(),
            partition: tp.partition,
            current_offset,
            log_end_offset,
            lag,
            owner,
            oldest_unconsumed: None,
        }
    };
    let mut members: Vec<_> = description
        .members
        .iter()
        .filter(|m| !m.assignment.is_empty())
        .collect();
    // Stable: members with as many partitions keep the coordinator's order.
    members.sort_by_key(|m| std::cmp::Reverse(m.assignment.len()));
    let mut rows = Vec::new();
    let mut owned: BTreeSet<&TopicPartition> = BTreeSet::new();
    for m in members {
        let owner = Owner {
            member_id: m.member_id.clone(),
            host: m.client_host.clone(),
            client_id: m.client_id.clone(),
        };
        let mine: BTreeSet<&TopicPartition> = m.assignment.iter().collect();
        for tp in mine {
            owned.insert(tp);
            rows.push(row(tp, Some(owner.clone())));
        }
    }
    for tp in committed.keys().filter(|tp| !owned.contains(tp)) {
        rows.push(row(tp, None));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::groups::MemberDescription;
    use crate::metadata::BrokerInfo;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    fn member(id: &str, assignment: Vec<TopicPartition>) -> MemberDescription {
        MemberDescription {
            member_id: id.into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            assignment,
            subscription: vec![],
        }
    }

    #[test]
    fn rows_follow_the_tools_order_and_lag_needs_a_commit() {
        let description = GroupDescription {
            group_id: "g".into(),
            state: "Stable".into(),
            protocol_type: "consumer".into(),
            assignment_strategy: "range".into(),
            coordinator: BrokerInfo {
                id: 1,
                host: "h".into(),
                port: 1,
                rack: None,
            },
            members: vec![
                member("small", vec![tp("t", 3)]),
                member("big", vec![tp("u", 0), tp("t", 1), tp("t", 0)]),
                member("idle", vec![]),
            ],
        };
        let committed = BTreeMap::from([(tp("t", 0), 40), (tp("t", 3), 9), (tp("old", 0), 5)]);
        let log_ends = BTreeMap::from([(tp("t", 0), 42), (tp("t", 1), 17), (tp("t", 3), 7)]);
        let rows = lag_rows(&description, &committed, &log_ends);
        let shown: Vec<String> = rows
            .iter()
            .map(|r| {
                let owner = r.owner.as_ref().map_or("-", |o| o.member_id.as_str());
                format!(
                    "{}-{} {:?} {:?} {owner}",
                    r.topic, r.partition, r.current_offset, r.lag
                )
            })
            .collect();
        assert!(rows[3].impossible(), "committed 9, log end 7");
        assert!(!rows[0].impossible() && !rows[1].impossible());
        assert_eq!(
            shown,
            [
                "t-0 Some(40) Some(2) big",
                "t-1 None None big",
                "u-0 None None big",
                "t-3 Some(9) None small",
                "old-0 Some(5) None -",
            ]
        );
    }
}
