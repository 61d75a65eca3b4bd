//! `client groups lag G [--watch]`: the group's per-partition lag with a bar each, scaled to the
//! largest lag, redrawn every interval until Ctrl-C or SIGTERM when watching. Every partition of
//! every topic the group reads (and of `--topic`) has a row, one without a commit behind by its
//! whole log ([`client::Admin::group_unread`]), so a total of 0 means nothing is left to read. Each refresh gets
//! `--timeout` to come back: a watch on a broker that died ends with an error, not a stale table.
//! Watching, every look is an observation of each partition, and a Burrow-style status
//! ([`client::lag_status`]) is judged over the last `--window` of them, with the rule that fired.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use client::admin::GroupLag;
use client::lag_status::{group_status, Judgement, LagWindow, Observation};
use client::{Admin, TopicPartition};
use serde_json::{json, Value};

use super::super::json::{self, Output};
use super::super::words::count;
use super::super::{table, Failure, Waited, Waiting};
use super::describe::{age, impossible_note, lag_cell, lag_json};
use super::when::now_ms;

/// The longest bar, in characters.
const BAR_WIDTH: usize = 40;

/// How `groups lag` shows the lag.
#[derive(Debug, Clone)]
pub struct View {
    /// Topics whose every partition counts, read by the group or not yet.
    pub topics: Vec<String>,
    pub watch: bool,
    pub every: Duration,
    pub time_lag: bool,
    /// Observations a status is judged over.
    pub window: usize,
    pub format: Output,
}

/// The statuses of one look: each partition's, in the rows' order, and the group's.
pub struct Statuses {
    pub partitions: Vec<Judgement>,
    pub group: Judgement,
}

/// Every partition's window of observations, fed one look at a time.
pub struct Watcher {
    size: usize,
    started: Instant,
    windows: HashMap<TopicPartition, LagWindow>,
}

impl Watcher {
    pub fn new(size: usize) -> Self {
        Self {
            size,
            started: Instant::now(),
            windows: HashMap::new(),
        }
    }

    /// Adds the look `lag`, taken `at` after the first, and judges every partition.
    pub fn observe(&mut self, lag: &GroupLag, at: Duration) -> Statuses {
        let mut partitions = Vec::with_capacity(lag.partitions.len());
        for p in &lag.partitions {
            let tp = TopicPartition::new(&p.topic, p.partition);
            let window = self
                .windows
                .entry(tp)
                .or_insert_with(|| LagWindow::new(self.size));
            window.observe(Observation {
                at,
                committed: p.current_offset,
                log_end: p.log_end_offset,
            });
            partitions.push(window.evaluate());
        }
        let named = lag
            .partitions
            .iter()
            .map(|p| format!("{}-{}", p.topic, p.partition))
            .zip(&partitions);
        let group = group_status(named);
        Statuses { partitions, group }
    }
}

pub async fn run(
    admin: &Admin,
    group: &str,
    view: &View,
    waiting: &Waiting,
) -> Result<(), Failure> {
    // Redraw in place on a terminal; into a pipe, one table after another.
    let redraw = view.watch && view.format == Output::Text && io::stdout().is_terminal();
    let mut watcher = view.watch.then(|| Watcher::new(view.window));
    loop {
        let look = async {
            let unread = admin.group_unread(group, &view.topics).await?;
            if view.time_lag {
                admin.with_time_lag(unread).await
            } else {
                Ok(unread)
            }
        };
        let lag = match waiting.on(look).await? {
            Waited::Done(lag) => lag,
            Waited::Stopped if view.watch => return Ok(()),
            Waited::Stopped => return Err(Failure::interrupted()),
        };
        if !view.watch && lag.description.state == "Dead" && lag.partitions.is_empty() {
            return Err(Failure::new(format!(
                "consumer group '{group}' does not exist: see `client groups list`, or name the \
                 topic it will read with --topic"
            )));
        }
        let now = view.time_lag.then(now_ms);
        let statuses = watcher
            .as_mut()
            .map(|w| w.observe(&lag, w.started.elapsed()));
        if view.format == Output::Json {
            json::print(&watch_json(&lag, now, statuses.as_ref()))?;
        } else {
            let text = render(&lag, now, statuses.as_ref())?;
            let mut out = io::stdout().lock();
            if redraw {
                // Cursor home, clear screen.
                write!(out, "\x1b[H\x1b[2J")?;
            } else if view.watch {
                writeln!(out)?;
            }
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        if !view.watch || !waiting.pause(view.every).await {
            return Ok(());
        }
    }
}

/// One look as JSON: [`lag_json`], with each partition's `status` and `rule` and the group's
/// `status` when watching.
pub fn watch_json(lag: &GroupLag, now: Option<i64>, statuses: Option<&Statuses>) -> Value {
    let mut doc = lag_json(lag, now);
    if let Some(s) = statuses {
        if let Some(Value::Array(rows)) = doc.get_mut("partitions") {
            for (row, judged) in rows.iter_mut().zip(&s.partitions) {
                row["status"] = json!(judged.status);
                row["rule"] = json!(judged.rule);
            }
        }
        doc["status"] = json!(s.group.status);
        doc["rule"] = json!(s.group.rule);
    }
    doc
}

/// A summary line (with the group's status and its rule when watching), then TOPIC PARTITION
/// COMMITTED LOG-END LAG, TIME-LAG with `now`, STATUS when watching, and a bar per partition.
pub fn render(lag: &GroupLag, now: Option<i64>, statuses: Option<&Statuses>) -> io::Result<String> {
    let d = &lag.description;
    let mut out = Vec::new();
    if d.state == "Dead" && lag.partitions.is_empty() {
        writeln!(out, "consumer group '{}' does not exist (yet)", d.group_id)?;
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
    writeln!(
        out,
        "group {}: {}, {}, total lag {}",
        d.group_id,
        d.state,
        count(d.members.len() as u64, "member"),
        lag.total()
    )?;
    if let Some(s) = statuses {
        writeln!(out, "status {}: {}", s.group.status, s.group.rule)?;
    }
    writeln!(out)?;
    let most = lag
        .partitions
        .iter()
        .filter_map(|p| p.lag)
        .max()
        .unwrap_or(0);
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let rows: Vec<Vec<String>> = lag
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut row = vec![
                p.topic.clone(),
                p.partition.to_string(),
                dash(p.current_offset),
                dash(p.log_end_offset),
                lag_cell(p),
            ];
            if let Some(now) = now {
                row.push(age(p.time_lag_ms(now)));
            }
            if let Some(s) = statuses {
                row.push(s.partitions[i].status.to_string());
            }
            row.push(bar(p.lag, most));
            row
        })
        .collect();
    let mut header = vec!["TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG"];
    if now.is_some() {
        header.push("TIME-LAG");
    }
    if statuses.is_some() {
        header.push("STATUS");
    }
    header.push("");
    table::write(&mut out, &header, &rows)?;
    for p in lag.partitions.iter().filter(|p| p.impossible()) {
        writeln!(out, "warning: {}", impossible_note(p))?;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Proportional to `lag / most`; any lag at all shows at least one block.
fn bar(lag: Option<i64>, most: i64) -> String {
    let Some(lag) = lag.filter(|&l| l > 0 && most > 0) else {
        return String::new();
    };
    let cells = (lag as f64 / most as f64 * BAR_WIDTH as f64).ceil() as usize;
    "█".repeat(cells.clamp(1, BAR_WIDTH))
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::admin::{GroupDescription, PartitionLag};
    use client::BrokerInfo;

    /// A group of no members, in `state`, with these rows.
    fn group(state: &str, partitions: Vec<PartitionLag>) -> GroupLag {
        GroupLag {
            description: GroupDescription {
                group_id: "g".into(),
                state: state.into(),
                protocol_type: "consumer".into(),
                assignment_strategy: "range".into(),
                coordinator: BrokerInfo {
                    id: 1,
                    host: "h".into(),
                    port: 1,
                    rack: None,
                },
                members: vec![],
            },
            partitions,
        }
    }

    /// A row of "orders" without an owner.
    fn part(p: i32, committed: Option<i64>, end: i64) -> PartitionLag {
        PartitionLag {
            topic: "orders".into(),
            partition: p,
            current_offset: committed,
            log_end_offset: Some(end),
            lag: committed.map(|c| end - c),
            owner: None,
            oldest_unconsumed: None,
        }
    }

    #[test]
    fn the_watch_shows_each_partitions_status_and_the_groups_rule() {
        // Partition 0 is stuck at 2 while records arrive; partition 1 has no lag.
        let look = |ends: [i64; 2]| {
            group(
                "Empty",
                vec![part(0, Some(2), ends[0]), part(1, Some(4), ends[1])],
            )
        };
        let mut watcher = Watcher::new(2);
        let first = watcher.observe(&look([5, 4]), Duration::ZERO);
        assert_eq!(first.group.rule, "every partition OK");
        let second = look([8, 4]);
        let statuses = watcher.observe(&second, Duration::from_secs(1));
        let text = render(&second, None, Some(&statuses)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1],
            "status STALL: orders-0: committed offset stuck at 2 for 1.0 s while the log end went \
             5 -> 8 (lag 3 -> 6)"
        );
        assert_eq!(
            lines[3],
            "TOPIC   PARTITION  COMMITTED  LOG-END  LAG  STATUS"
        );
        assert!(lines[4].starts_with("orders  0          2          8        6    STALL   █"));
        assert_eq!(lines[5], "orders  1          4          4        0    OK");
        let doc = watch_json(&second, None, Some(&statuses));
        assert_eq!(doc["status"], "STALL");
        assert_eq!(doc["partitions"][1]["rule"], "lag 0");
    }

    #[test]
    fn bars_scale_to_the_largest_lag() {
        assert_eq!(bar(Some(40), 40).chars().count(), BAR_WIDTH);
        assert_eq!(bar(Some(10), 40).chars().count(), 10);
        assert_eq!(bar(Some(1), 1000).chars().count(), 1);
        assert_eq!(bar(Some(0), 40), "");
        assert_eq!(bar(None, 40), "");
    }

    #[test]
    fn the_table_shows_dashes_before_a_commit() {
        let lag = group("Stable", vec![part(0, Some(2), 6), part(1, None, 3)]);
        let text = render(&lag, None, None).unwrap();
        assert_eq!(
            text,
            format!(
                "group g: Stable, 0 members, total lag 4\n\n\
                 TOPIC   PARTITION  COMMITTED  LOG-END  LAG\n\
                 orders  0          2          6        4    {}\n\
                 orders  1          -          3        -\n",
                "█".repeat(BAR_WIDTH)
            )
        );
    }
}
