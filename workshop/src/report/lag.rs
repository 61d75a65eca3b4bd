//! Consumer lag as every lab shows it: per partition, in the columns of
//! `kafka-consumer-groups.sh --describe`, with a bar per partition and the group's average
//! underneath, because the average alone hides the skew (LABS.md, "What every lab has in
//! common").

use super::{bar, thousands, Align, Table};

/// One partition of a group, as `kafka-consumer-groups.sh --describe` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LagRow {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    /// The committed offset; `None` ("-") when the group never committed here.
    pub current_offset: Option<i64>,
    pub log_end_offset: Option<i64>,
    /// The member that owns the partition, if any ("-" otherwise).
    pub consumer_id: Option<String>,
    pub host: Option<String>,
    pub client_id: Option<String>,
}

impl LagRow {
    /// A row of the admin client's report (`client::Admin::group_lag`) for `group`.
    pub fn from_admin(group: &str, p: &client::admin::PartitionLag) -> Self {
        LagRow {
            group: group.to_string(),
            topic: p.topic.clone(),
            partition: p.partition,
            current_offset: p.current_offset,
            log_end_offset: p.log_end_offset,
            consumer_id: p.owner.as_ref().map(|o| o.member_id.clone()),
            host: p.owner.as_ref().map(|o| o.host.clone()),
            client_id: p.owner.as_ref().map(|o| o.client_id.clone()),
        }
    }

    /// LOG-END-OFFSET minus CURRENT-OFFSET; `None` ("-") when either is unknown.
    pub fn lag(&self) -> Option<i64> {
        Some((self.log_end_offset? - self.current_offset?).max(0))
    }
}

/// The largest lag of the rows and their mean over all rows (unknown lag counts as 0).
pub fn max_and_average(rows: &[LagRow]) -> (u64, f64) {
    let lags: Vec<u64> = rows.iter().map(|r| r.lag().unwrap_or(0) as u64).collect();
    let max = lags.iter().copied().max().unwrap_or(0);
    let avg = if lags.is_empty() {
        0.0
    } else {
        lags.iter().sum::<u64>() as f64 / lags.len() as f64
    };
    (max, avg)
}

/// The rows in kafka-consumer-groups.sh's columns, a bar per partition scaled to the largest
/// lag, and a last row with the group's average lag on the same scale.
pub fn lag_table(rows: &[LagRow], bar_width: usize) -> Table {
    let mut table = Table::new(&[
        ("GROUP", Align::Left),
        ("TOPIC", Align::Left),
        ("PARTITION", Align::Right),
        ("CURRENT-OFFSET", Align::Right),
        ("LOG-END-OFFSET", Align::Right),
        ("LAG", Align::Right),
        ("CONSUMER-ID", Align::Left),
        ("HOST", Align::Left),
        ("CLIENT-ID", Align::Left),
        ("", Align::Left),
    ]);
    let (max, avg) = max_and_average(rows);
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    for r in rows {
        table.row([
            r.group.clone(),
            r.topic.clone(),
            r.partition.to_string(),
            dash(r.current_offset.map(|o| o.to_string())),
            dash(r.log_end_offset.map(|o| o.to_string())),
            dash(r.lag().map(|l| l.to_string())),
            dash(r.consumer_id.clone()),
            dash(r.host.clone()),
            dash(r.client_id.clone()),
            bar(r.lag().unwrap_or(0) as u64, max, bar_width),
        ]);
    }
    if !rows.is_empty() {
        table.row([
            "(group average)".to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            thousands(avg.round() as u64),
            String::new(),
            String::new(),
            String::new(),
            bar(avg.round() as u64, max, bar_width),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(partition: i32, current: Option<i64>, end: i64) -> LagRow {
        LagRow {
            group: "g".into(),
            topic: "t".into(),
            partition,
            current_offset: current,
            log_end_offset: Some(end),
            consumer_id: None,
            host: None,
            client_id: Some("c".into()),
        }
    }

    #[test]
    fn lag_is_end_minus_committed_or_unknown() {
        assert_eq!(row(0, Some(3), 10).lag(), Some(7));
        assert_eq!(row(0, None, 10).lag(), None);
    }

    #[test]
    fn the_table_has_the_tools_columns_a_bar_and_the_average() {
        let rows = [row(0, Some(0), 1000), row(1, Some(10), 10), row(2, None, 5)];
        assert_eq!(max_and_average(&rows), (1000, 1000.0 / 3.0));
        let (header, body) = lag_table(&rows, 10).lines();
        let columns: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(
            columns,
            [
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID"
            ]
        );
        assert_eq!(body.len(), 4);
        assert!(body[0].ends_with(&"\u{2588}".repeat(10)), "{}", body[0]);
        assert!(body[1].ends_with("c"), "no bar for no lag: {}", body[1]);
        assert!(body[2].contains(" -  "), "{}", body[2]);
        assert!(body[3].starts_with("(group average)"), "{}", body[3]);
        assert!(body[3].contains("333"), "{}", body[3]);
        assert!(body[3].ends_with(&"\u{2588}".repeat(3)), "{}", body[3]);
        assert!(lag_table(&[], 10).is_empty());
    }
}
