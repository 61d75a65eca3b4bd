//! A consumer group's committed offsets and lag, read the way `kafka-consumer-groups.sh
//! --describe` reads them (the client's admin: DescribeGroups, OffsetFetch, ListOffsets), so LAG
//! is the broker's log end offset minus the group's committed offset, never a counter kept by
//! the lab. Commits without a generation (an assign-mode consumer committing for its group, as
//! Kafka allows while the group has no members: the admin's `commit_offsets`) go through here
//! too. The group itself is named, and deleted at the end, by [`crate::lab::target::Cluster::group`].

use std::collections::BTreeMap;

use client::{Admin, Client, OffsetSpec, TopicPartition};

use crate::lab::report::LagRow;
use crate::lab::target::broker_error;
use crate::lab::LabError;

/// One group's view of one topic.
#[derive(Clone)]
pub struct GroupOffsets {
    group: String,
    admin: Admin,
}

impl GroupOffsets {
    pub fn new(client: &Client, group: &str) -> Self {
        GroupOffsets {
            group: group.to_string(),
            admin: Admin::new(client.clone()),
        }
    }

    /// Commits `offsets` (partition, next offset to read) for the group as an assign-mode
    /// consumer does: generation -1, no member id.
    pub async fn commit_unassigned(
        &self,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<(), LabError> {
        let offsets: BTreeMap<TopicPartition, i64> = offsets
            .iter()
            .map(|&(p, o)| (TopicPartition::new(topic, p), o))
            .collect();
        let what = format!("committing offsets for group {}", self.group);
        let results = self
            .admin
            .commit_offsets(&self.group, &offsets)
            .await
            .map_err(|e| broker_error(&what, &e))?;
        match results
            .into_iter()
            .find_map(|(tp, r)| r.err().map(|e| (tp, e)))
        {
            None => Ok(()),
            Some((tp, e)) => Err(LabError::Broker(format!(
                "{what}: {tp} refused with error code {}",
                e.code
            ))),
        }
    }

    /// The group's committed offset per partition of `topic` (`None`: nothing committed).
    pub async fn committed(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Result<Vec<Option<i64>>, LabError> {
        let tps: Vec<TopicPartition> = (0..partitions)
            .map(|p| TopicPartition::new(topic, p))
            .collect();
        let what = format!("reading the committed offsets of group {}", self.group);
        let committed = self
            .admin
            .list_group_offsets(&self.group, Some(&tps))
            .await
            .map_err(|e| broker_error(&what, &e))?;
        Ok(tps
            .iter()
            .map(|tp| committed.get(tp).copied().flatten())
            .collect())
    }

    /// Every partition's log end offset, in partition order.
    pub async fn log_ends(&self, topic: &str, partitions: i32) -> Result<Vec<i64>, LabError> {
        let what = format!("listing the end offsets of {topic}");
        let listed = self
            .admin
            .list_offsets(topic, OffsetSpec::Latest)
            .await
            .map_err(|e| broker_error(&what, &e))?;
        let mut ends = vec![0; partitions.max(0) as usize];
        for l in listed {
            if let Some(slot) = usize::try_from(l.partition)
                .ok()
                .and_then(|p| ends.get_mut(p))
            {
                *slot = l.offset;
            }
        }
        Ok(ends)
    }

    /// The group's lag on `topic` as kafka-consumer-groups.sh --describe shows it, one row per
    /// partition in partition order (see [`described_rows`]). A partition the group neither owns
    /// nor committed still gets a row, with "-".
    pub async fn lag_rows(&self, topic: &str, partitions: i32) -> Result<Vec<LagRow>, LabError> {
        let mut rows: Vec<Option<LagRow>> = vec![None; partitions.max(0) as usize];
        for row in described_rows(&self.admin, &self.group, topic).await? {
            if let Some(slot) = usize::try_from(row.partition)
                .ok()
                .and_then(|i| rows.get_mut(i))
            {
                *slot = Some(row);
            }
        }
        if rows.iter().any(Option::is_none) {
            let ends = self.log_ends(topic, partitions).await?;
            for (p, slot) in rows.iter_mut().enumerate() {
                slot.get_or_insert_with(|| LagRow {
                    group: self.group.clone(),
                    topic: topic.to_string(),
                    partition: p as i32,
                    current_offset: None,
                    log_end_offset: Some(ends[p]),
                    consumer_id: None,
                    host: None,
                    client_id: None,
                    processed_uncommitted: None,
                });
            }
        }
        Ok(rows.into_iter().flatten().collect())
    }
}

/// The rows of `topic` the group's description has (partitions it owns or committed on), in
/// partition order: the tool orders by member; here the partition is the point.
pub async fn described_rows(
    admin: &Admin,
    group: &str,
    topic: &str,
) -> Result<Vec<LagRow>, LabError> {
    let described = admin
        .group_lag(group)
        .await
        .map_err(|e| broker_error(&format!("describing group {group}"), &e))?;
    let mut rows: Vec<LagRow> = described
        .partitions
        .iter()
        .filter(|p| p.topic == topic)
        .map(|p| LagRow::from_admin(group, p))
        .collect();
    rows.sort_by_key(|r| r.partition);
    Ok(rows)
}

/// True when the group has read every partition to its end: lag 0, or nothing to read.
pub fn all_zero(rows: &[LagRow]) -> bool {
    rows.iter().all(|r| match r.lag() {
        Some(lag) => lag == 0,
        None => r.log_end_offset.unwrap_or(0) == 0,
    })
}

/// The title over a lag table in a room, `when` ending it (`just before the change`): the
/// offsets are the ones kafka-consumer-groups.sh --describe reads, but the table is ours (no
/// GROUP, HOST or CLIENT-ID column, members by short name, runs of idle partitions folded into
/// one row), so it does not claim to be the tool's output.
pub fn lag_title(group: &str, when: &str) -> String {
    format!(
        "Group {group}'s lag per partition {when} (offsets as kafka-consumer-groups.sh --describe \
         reads them; the table is the lab's):"
    )
}

/// Lag per partition from rows: unknown counts as 0.
pub fn lags(rows: &[LagRow]) -> Vec<u64> {
    rows.iter().map(|r| r.lag().unwrap_or(0) as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(current: Option<i64>, end: i64) -> LagRow {
        LagRow {
            group: "g".into(),
            topic: "orders".into(),
            partition: 0,
            current_offset: current,
            log_end_offset: Some(end),
            consumer_id: None,
            host: None,
            client_id: None,
            processed_uncommitted: None,
        }
    }

    #[test]
    fn drained_means_every_partition_read_to_its_end() {
        assert!(all_zero(&[row(Some(5), 5), row(None, 0)]));
        assert!(!all_zero(&[row(Some(5), 5), row(Some(4), 5)]));
        assert!(
            !all_zero(&[row(None, 3)]),
            "nothing committed, records waiting"
        );
        assert!(all_zero(&[]));
    }
}
