//! The group's lag per partition, as kafka-consumer-groups.sh --describe shows it: the admin
//! client's DescribeGroups, OffsetFetch and ListOffsets (`client::Admin::group_lag`), from
//! outside the group, as the tool reads it.

use client::Admin;

use crate::lab::report::LagRow;
use crate::lab::target::broker_error;
use crate::lab::LabError;

/// The rows of `topic`, in partition order (the tool orders by member; here the partition is
/// the point).
pub async fn describe(admin: &Admin, group: &str, topic: &str) -> Result<Vec<LagRow>, LabError> {
    let lag = admin
        .group_lag(group)
        .await
        .map_err(|e| broker_error(&format!("describing group {group}"), &e))?;
    let mut rows: Vec<LagRow> = lag
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
