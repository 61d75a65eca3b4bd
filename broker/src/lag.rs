//! Consumer lag as Kafka's tools define it: per group and partition, the log end offset minus the
//! committed offset (kafka-consumer-groups.sh's LAG column, kafka-lag-exporter's gauge); and the
//! time lag, the age of the oldest record not yet consumed, read from that record's timestamp
//! rather than interpolated from offset history as kafka-lag-exporter does.
//!
//! Read from the group coordinator and the partition logs one lock at a time, so computing lag
//! never holds up a produce, a fetch or a rebalance. A time lag reads one stored batch per lagging
//! partition, walking its records without decoding them and decompressing at most
//! `max_uncompressed_batch_bytes`.

use std::collections::HashMap;

use protocol::batch::BatchHeader;
use protocol::compression::DecompressError;
use protocol::records::{timestamp_at_or_after_offset, RecordsError};

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
    /// The timestamp (ms) of the oldest record the group has not consumed: the one at the
    /// committed offset, or at the log start when retention removed that one. `None` when
    /// nothing is waiting, or the record cannot be read.
    pub oldest_unconsumed: Option<i64>,
}

impl PartitionLag {
    /// LOG-END-OFFSET minus CURRENT-OFFSET; `None` ("-" in the tool) when either is unknown.
    pub fn lag(&self) -> Option<i64> {
        Some(self.log_end? - self.committed?)
    }

    /// How old, at `now_ms`, the oldest record not yet consumed is ([`protocol::lag`]);
    /// `None` when the lag is unknown.
    pub fn time_lag_ms(&self, now_ms: i64) -> Option<i64> {
        protocol::lag::time_lag_ms(self.lag()?, self.oldest_unconsumed, now_ms)
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
                let committed = (offset >= 0).then_some(offset);
                lag_of(state, topic, partition, committed)
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
        .map(|(topic, partition)| {
            let offset = committed.get(&(topic.clone(), *partition)).copied();
            lag_of(state, topic.clone(), *partition, offset.filter(|&o| o >= 0))
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

fn lag_of(
    state: &BrokerState,
    topic: String,
    partition: i32,
    committed: Option<i64>,
) -> PartitionLag {
    let log = state
        .topics
        .get(&topic)
        .and_then(|t| t.partition(partition));
    let offsets = log.as_ref().map(|log| log.offsets());
    let oldest_unconsumed = match (&log, offsets, committed) {
        (Some(log), Some(offsets), Some(committed)) if committed < offsets.end => {
            let limit = state.config.max_uncompressed_batch_bytes;
            oldest_timestamp(log, committed.max(offsets.start), limit)
        }
        _ => None,
    };
    PartitionLag {
        topic,
        partition,
        committed,
        log_end: offsets.map(|o| o.end),
        oldest_unconsumed,
    }
}

/// The timestamp of the first record at or after `offset`. A batch stored before the
/// decompression limit was lowered is answered by its first record's timestamp, which is at
/// most as recent.
fn oldest_timestamp(log: &crate::log::PartitionLog, offset: i64, limit: usize) -> Option<i64> {
    let batch = log.batch_at_or_after(offset)?;
    let header = BatchHeader::parse(&batch.data).ok()?;
    match timestamp_at_or_after_offset(&batch.data, &header, offset, limit) {
        Ok(found) => found,
        Err(RecordsError::Decompress(DecompressError::TooLarge { .. })) => {
            tracing::warn!(
                base_offset = batch.base_offset,
                limit,
                "time lag: batch decompresses past the limit; using its first timestamp"
            );
            Some(header.base_timestamp)
        }
        Err(e) => {
            tracing::warn!(base_offset = batch.base_offset, "time lag: {e}");
            None
        }
    }
}
