//! Consumer lag as Kafka's tools define it: per group and partition, the log end offset minus the
//! committed offset (kafka-consumer-groups.sh's LAG column, kafka-lag-exporter's gauge).
//!
//! Read from the group coordinator and the partition logs one lock at a time, so computing lag
//! never holds up a produce, a fetch or a rebalance.

use std::collections::HashMap;

use crate::state::BrokerState;

/// One partition of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// `None` when the group never committed an offset here (or committed -1).
    pub committed: Option<i64>,
    /// `None` when the partition does not exist (any more).
    pub log_end: Option<i64>,
}

impl PartitionLag {
    /// LOG-END-OFFSET minus CURRENT-OFFSET; `None` ("-" in the tool) when either is unknown.
    pub fn lag(&self) -> Option<i64> {
        Some(self.log_end? - self.committed?)
    }
}

/// Lag of every partition a group has committed, by topic then partition; `None` for an unknown
/// group.
pub fn committed_lag(state: &BrokerState, group_id: &str) -> Option<Vec<PartitionLag>> {
    let committed = state.groups.committed_offsets(group_id)?;
    Some(
        committed
            .into_iter()
            .map(|(topic, partition, offset)| {
                let log_end = log_end(state, &topic, partition);
                PartitionLag {
                    topic,
                    partition,
                    committed: (offset >= 0).then_some(offset),
                    log_end,
                }
            })
            .collect(),
    )
}

/// Lag of the given partitions (for example a member's assignment), committed or not.
pub fn partitions_lag(
    state: &BrokerState,
    group_id: &str,
    partitions: &[(String, i32)],
) -> Vec<PartitionLag> {
    let committed: HashMap<(String, i32), i64> = state
        .groups
        .committed_offsets(group_id)
        .unwrap_or_default()
        .into_iter()
        .map(|(topic, partition, offset)| ((topic, partition), offset))
        .collect();
    partitions
        .iter()
        .map(|(topic, partition)| PartitionLag {
            topic: topic.clone(),
            partition: *partition,
            committed: committed
                .get(&(topic.clone(), *partition))
                .copied()
                .filter(|&offset| offset >= 0),
            log_end: log_end(state, topic, *partition),
        })
        .collect()
}

/// Every group's committed lag, groups sorted by id.
pub fn all_groups_lag(state: &BrokerState) -> Vec<(String, Vec<PartitionLag>)> {
    state
        .groups
        .group_ids()
        .into_iter()
        .filter_map(|group| {
            let lag = committed_lag(state, &group)?;
            Some((group, lag))
        })
        .collect()
}

fn log_end(state: &BrokerState, topic: &str, partition: i32) -> Option<i64> {
    let log = state.topics.get(topic)?.partition(partition)?;
    Some(log.offsets().end)
}
