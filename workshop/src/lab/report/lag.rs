//! Consumer lag as every lab shows it: per partition, in the columns of
//! `kafka-consumer-groups.sh --describe`, with a bar per partition and the group's average
//! underneath, because the average alone hides the skew (LABS.md, "What every lab has in
//! common"). A partition the group never committed on has no lag ("-"): it is left out of the
//! average, which then says how many partitions it is over.
//!
//! Where a lab knows what the members processed, a column beside the lag (PROCESSED) says how
//! much of it no commit covers yet: what the tool cannot see, and what a new owner would process
//! again.
//!
//! For a room ([`lag_lines`]) the member is its short name (its client id, or `consumer-N` when
//! members share one) instead of the tool's UUID, runs of idle partitions collapse into one line,
//! and a table still too long for a screen becomes a grid of partition and lag; `--all-partitions`
//! shows every row.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{bar, Align, Table};

/// Rows at most, collapsed runs included, before a lag table becomes a grid.
const MAX_ROWS: usize = 16;
/// The widest bar drawn.
const MAX_BAR: usize = 20;

/// One partition of a group, as `kafka-consumer-groups.sh --describe` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// Records the owner processed at or past the committed offset, as the members counted them;
    /// `None` where the lab does not know (the tool never does: only the application knows what
    /// it processed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processed_uncommitted: Option<u64>,
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
            processed_uncommitted: None,
        }
    }

    /// LOG-END-OFFSET minus CURRENT-OFFSET; `None` ("-") when either is unknown.
    pub fn lag(&self) -> Option<i64> {
        Some((self.log_end_offset? - self.current_offset?).max(0))
    }

    /// Nothing waiting: lag 0, or an empty partition nobody committed on.
    fn idle(&self) -> bool {
        match self.lag() {
            Some(lag) => lag == 0,
            None => self.current_offset.is_none() && self.log_end_offset.unwrap_or(0) == 0,
        }
    }
}

/// The largest lag of the rows and their mean over the rows that have one: a partition nobody
/// committed on ("-") is not a lag of 0, so it is left out (0 when no row has a lag).
pub fn max_and_average(rows: &[LagRow]) -> (u64, f64) {
    let lags: Vec<u64> = rows
        .iter()
        .filter_map(|r| r.lag())
        .map(|l| l as u64)
        .collect();
    let max = lags.iter().copied().max().unwrap_or(0);
    let avg = if lags.is_empty() {
        0.0
    } else {
        lags.iter().sum::<u64>() as f64 / lags.len() as f64
    };
    (max, avg)
}

/// How many partitions the average is over, when not all: `of N` (read after `(average)`).
fn average_over(rows: &[LagRow]) -> Option<String> {
    let known = rows.iter().filter(|r| r.lag().is_some()).count();
    (known < rows.len()).then(|| format!("of {known}"))
}

/// Each owner's short name: its client id when every owner has its own, else `consumer-N` in
/// the order they first own a partition.
fn short_names(rows: &[LagRow]) -> BTreeMap<&str, String> {
    let mut owners: Vec<(&str, Option<&str>)> = Vec::new();
    for r in rows {
        if let Some(id) = r.consumer_id.as_deref() {
            if !owners.iter().any(|(o, _)| *o == id) {
                owners.push((id, r.client_id.as_deref()));
            }
        }
    }
    let mut client_ids: Vec<Option<&str>> = owners.iter().map(|(_, c)| *c).collect();
    client_ids.sort_unstable();
    client_ids.dedup();
    let distinct = client_ids.len() == owners.len() && client_ids.iter().all(Option::is_some);
    owners
        .iter()
        .enumerate()
        .map(|(i, (id, client))| match client {
            Some(client) if distinct => (*id, client.to_string()),
            _ => (*id, format!("consumer-{}", i + 1)),
        })
        .collect()
}

/// A line of the room's table: one partition, or a run of idle ones.
enum Line<'a> {
    One(&'a LagRow),
    Idle(&'a [LagRow]),
}

/// Runs of at least two consecutive idle partitions of a topic become one line.
fn collapse(rows: &[LagRow]) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let mut end = i + 1;
        while rows[i].idle()
            && end < rows.len()
            && rows[end].idle()
            && rows[end].topic == rows[i].topic
            && rows[end].partition == rows[end - 1].partition + 1
        {
            end += 1;
        }
        if end - i >= 2 {
            lines.push(Line::Idle(&rows[i..end]));
        } else {
            lines.push(Line::One(&rows[i]));
        }
        i = end;
    }
    lines
}

/// The rows for a room, within `width` columns: the header, then the body (the average last).
pub fn lag_lines(rows: &[LagRow], width: usize, all_partitions: bool) -> (String, Vec<String>) {
    let names = short_names(rows);
    let lines = if all_partitions {
        rows.iter().map(Line::One).collect()
    } else {
        collapse(rows)
    };
    if lines.len() > MAX_ROWS {
        return grid(rows, width);
    }
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let name = |r: &LagRow| {
        r.consumer_id
            .as_deref()
            .and_then(|id| names.get(id))
            .cloned()
            .unwrap_or_else(|| "-".into())
    };
    let (max, avg) = max_and_average(rows);
    let processed = rows.iter().any(|r| r.processed_uncommitted.is_some());
    let build = |bar_width: usize| {
        let mut columns = vec![
            ("TOPIC", Align::Left),
            ("PARTITION", Align::Right),
            ("CURRENT-OFFSET", Align::Right),
            ("LOG-END-OFFSET", Align::Right),
            ("LAG", Align::Right),
            ("CONSUMER", Align::Left),
        ];
        if processed {
            // Short, so the bars keep their room: of the lag, what is processed already.
            columns.push(("PROCESSED", Align::Right));
        }
        columns.push(("", Align::Left));
        let mut table = Table::new(&columns);
        // The processed column, when the table has one: its cell, then the bar's.
        let tail = |uncommitted: String, bar: String| {
            if processed {
                vec![uncommitted, bar]
            } else {
                vec![bar]
            }
        };
        for line in &lines {
            match line {
                Line::One(r) => table.row(
                    [
                        r.topic.clone(),
                        r.partition.to_string(),
                        dash(r.current_offset),
                        dash(r.log_end_offset),
                        dash(r.lag()),
                        name(r),
                    ]
                    .into_iter()
                    .chain(tail(
                        r.processed_uncommitted
                            .map_or_else(|| "-".to_string(), |n| n.to_string()),
                        bar(r.lag().unwrap_or(0) as u64, max, bar_width),
                    )),
                ),
                Line::Idle(run) => {
                    let mut owners: Vec<String> = run.iter().map(name).collect();
                    owners.dedup();
                    let owner = match owners.as_slice() {
                        [one] => one.clone(),
                        _ => format!("{} consumers", owners.len()),
                    };
                    // Nothing waits on an idle partition, so nothing processed is uncommitted.
                    let known = run.iter().all(|r| r.processed_uncommitted.is_some());
                    let uncommitted = if known { "0" } else { "" }.to_string();
                    table.row(
                        [
                            run[0].topic.clone(),
                            format!("{}-{}", run[0].partition, run[run.len() - 1].partition),
                            String::new(),
                            String::new(),
                            "0".to_string(),
                            owner,
                        ]
                        .into_iter()
                        .chain(tail(uncommitted, String::new())),
                    )
                }
            };
        }
        if !rows.is_empty() {
            table.row(
                [
                    "(average)".to_string(),
                    // In the partition column, so the label does not widen the topic's.
                    average_over(rows).unwrap_or_default(),
                    String::new(),
                    String::new(),
                    (avg.round() as u64).to_string(),
                    String::new(),
                ]
                .into_iter()
                .chain(tail(String::new(), bar(avg.round() as u64, max, bar_width))),
            );
        }
        table
    };
    let (header, body) = build(0).lines();
    let used = body
        .iter()
        .chain([&header])
        .map(|l| l.chars().count())
        .max();
    let room = width.saturating_sub(used.unwrap_or(0) + 2).min(MAX_BAR);
    build(room).lines_within(width)
}

/// Every partition as `PARTITION LAG bar`, in as many columns side by side as fit.
fn grid(rows: &[LagRow], width: usize) -> (String, Vec<String>) {
    let (max, avg) = max_and_average(rows);
    let lag_w = rows
        .iter()
        .map(|r| r.lag().map_or(1, |l| l.to_string().len()))
        .max()
        .unwrap_or(1)
        .max(3);
    // PARTITION, two spaces, LAG, a space, the bar; two spaces between cells.
    let fixed = 9 + 2 + lag_w + 1;
    let columns = ((width + 2) / (fixed + 4 + 2)).clamp(1, rows.len().max(1));
    let bar_w = ((width + 2) / columns - 2 - fixed).min(MAX_BAR);
    let per_column = rows.len().div_ceil(columns);
    let cell = |r: &LagRow| {
        let lag = r.lag().map_or_else(|| "-".to_string(), |l| l.to_string());
        let bar = bar(r.lag().unwrap_or(0) as u64, max, bar_w);
        format!("{:>9}  {lag:>lag_w$} {bar:<bar_w$}", r.partition)
    };
    let head = format!("{:>9}  {:>lag_w$} {:bar_w$}", "PARTITION", "LAG", "");
    let header = vec![head.as_str(); columns.min(rows.len())].join("  ");
    let mut body: Vec<String> = (0..per_column)
        .map(|line| {
            let cells: Vec<String> = (0..columns)
                .filter_map(|c| rows.get(c * per_column + line).map(cell))
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect();
    let label = match average_over(rows) {
        Some(over) => format!("(average {over})"),
        None => "(average)".to_string(),
    };
    // A longer label takes its extra columns from the bar.
    let average_bar = bar_w.saturating_sub(label.chars().count().saturating_sub(9));
    body.push(
        format!(
            "{label:>9}  {:>lag_w$} {}",
            avg.round() as u64,
            bar(avg.round() as u64, max, average_bar)
        )
        .trim_end()
        .to_string(),
    );
    (header.trim_end().to_string(), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(partition: i32, current: Option<i64>, end: i64, member: &str) -> LagRow {
        LagRow {
            group: "g".into(),
            topic: "t".into(),
            partition,
            current_offset: current,
            log_end_offset: Some(end),
            consumer_id: Some(format!("{member}-0c61e815-8f70-4c37-87ba-67f421bb727e")),
            host: Some("/127.0.0.1".into()),
            client_id: Some(member.into()),
            processed_uncommitted: None,
        }
    }

    fn words(line: &str) -> Vec<&str> {
        line.split_whitespace().collect()
    }

    fn assert_fits(header: &str, body: &[String], width: usize) {
        for line in body.iter().map(String::as_str).chain([header]) {
            assert!(line.chars().count() <= width, "{line}");
        }
    }

    #[test]
    fn lag_is_end_minus_committed_or_unknown() {
        assert_eq!(row(0, Some(3), 10, "c").lag(), Some(7));
        assert_eq!(row(0, None, 10, "c").lag(), None);
        assert_eq!(
            max_and_average(&[row(0, Some(0), 1000, "a"), row(1, None, 5, "b")]),
            (1000, 1000.0)
        );
    }

    #[test]
    fn an_unknown_lag_is_left_out_of_the_average() {
        let rows = [
            row(0, Some(0), 10, "a"),
            row(1, None, 7, "a"),
            row(2, Some(5), 25, "b"),
        ];
        assert_eq!(max_and_average(&rows), (20, 15.0));
        let (_, body) = lag_lines(&rows, 100, false);
        let average = body.last().unwrap();
        assert_eq!(words(average)[..4], ["(average)", "of", "2", "15"]);
    }

    #[test]
    fn members_are_named_short_and_idle_runs_collapse() {
        let rows = [
            row(0, Some(0), 1000, "billing-1"),
            row(1, Some(10), 10, "billing-1"),
            row(2, Some(4), 4, "billing-3"),
            row(3, None, 0, "billing-3"),
            row(4, None, 5, "billing-3"),
        ];
        let (header, body) = lag_lines(&rows, 100, false);
        let columns: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(
            columns,
            [
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER"
            ]
        );
        assert_eq!(body.len(), 4, "{body:#?}");
        assert!(body[0].contains("billing-1") && !body[0].contains("0c61e815"));
        assert!(
            body[0].ends_with(&"\u{2588}".repeat(MAX_BAR)),
            "{}",
            body[0]
        );
        assert!(body[1].contains(" 1-3 ") && body[1].contains("2 consumers"));
        assert!(
            body[2].contains(" -  "),
            "unknown lag is a dash: {}",
            body[2]
        );
        // 1000 over the three partitions with a committed offset; 3 and 4 have none.
        assert_eq!(words(&body[3])[..4], ["(average)", "of", "3", "333"]);
        assert_fits(&header, &body, 100);
        let (_, all) = lag_lines(&rows, 100, true);
        assert_eq!(all.len(), 6);
    }

    #[test]
    fn what_the_members_processed_and_did_not_commit_stands_beside_the_lag() {
        let mut rows = vec![
            row(3, Some(94), 94, "billing-3"),
            row(4, Some(6), 69, "billing-3"),
            row(5, None, 116, "billing-3"),
            row(8, Some(10), 112, "billing-5"),
        ];
        for (r, n) in rows.iter_mut().zip([0, 63, 37, 33]) {
            r.processed_uncommitted = Some(n);
        }
        let (header, body) = lag_lines(&rows, 100, false);
        assert!(header.ends_with("CONSUMER   PROCESSED"), "{header}");
        assert_eq!(
            words(&body[1])[..7],
            ["t", "4", "6", "69", "63", "billing-3", "63"]
        );
        // No lag without a commit, yet 37 processed.
        assert_eq!(
            words(&body[2]),
            ["t", "5", "-", "116", "-", "billing-3", "37"]
        );
        assert_eq!(words(&body[4])[..4], ["(average)", "of", "3", "55"]);
        assert_fits(&header, &body, 100);
        // Without the members' count, the tool's columns only.
        rows.iter_mut().for_each(|r| r.processed_uncommitted = None);
        let (header, _) = lag_lines(&rows, 100, false);
        assert!(header.ends_with("CONSUMER"), "{header}");
    }

    #[test]
    fn members_sharing_a_client_id_are_numbered() {
        let mut rows = vec![row(0, Some(0), 5, "a"), row(1, Some(0), 5, "b")];
        for r in &mut rows {
            r.client_id = Some("workshop".into());
        }
        let (_, body) = lag_lines(&rows, 100, false);
        assert!(body[0].contains("consumer-1") && body[1].contains("consumer-2"));
    }

    #[test]
    fn a_long_table_becomes_a_grid_within_the_width() {
        let rows: Vec<LagRow> = (0..48)
            .map(|p| row(p, Some(0), i64::from(p % 5) * 10, "c"))
            .collect();
        let (header, body) = lag_lines(&rows, 96, false);
        assert!(header.starts_with("PARTITION  LAG"), "{header}");
        assert!(body.len() <= MAX_ROWS, "{}", body.len());
        assert!(body
            .iter()
            .chain([&header])
            .all(|l| l.chars().count() <= 96));
        assert!(body.last().unwrap().starts_with("(average)"));
        // Every partition is there, once.
        let shown: usize = body[..body.len() - 1]
            .iter()
            .map(|l| l.split("  ").filter(|c| !c.trim().is_empty()).count())
            .sum();
        assert!(shown >= 48, "{body:#?}");
    }
}
