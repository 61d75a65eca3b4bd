//! `client groups lag G [--watch]`: the group's per-partition lag with a bar each, scaled to the
//! largest lag, redrawn every interval until Ctrl-C or SIGTERM when watching. Each refresh gets
//! `--timeout` to come back: a watch on a broker that died ends with an error, not a stale table.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use client::admin::GroupLag;
use client::Admin;

use super::super::{table, Failure, Waited, Waiting};

/// The longest bar, in characters.
const BAR_WIDTH: usize = 40;

pub async fn run(
    admin: &Admin,
    group: &str,
    watch: bool,
    every: Duration,
    waiting: &Waiting,
) -> Result<(), Failure> {
    // Redraw in place on a terminal; into a pipe, one table after another.
    let redraw = watch && io::stdout().is_terminal();
    loop {
        let lag = match waiting.on(admin.group_lag(group)).await? {
            Waited::Done(lag) => lag,
            Waited::Stopped if watch => return Ok(()),
            Waited::Stopped => return Err(Failure::interrupted()),
        };
        if !watch && lag.description.state == "Dead" {
            return Err(Failure::new(format!(
                "consumer group '{group}' does not exist: see `client groups list`"
            )));
        }
        let text = render(&lag)?;
        let mut out = io::stdout().lock();
        if redraw {
            // Cursor home, clear screen.
            write!(out, "\x1b[H\x1b[2J")?;
        } else if watch {
            writeln!(out)?;
        }
        out.write_all(text.as_bytes())?;
        out.flush()?;
        drop(out);
        if !watch || !waiting.pause(every).await {
            return Ok(());
        }
    }
}

/// A summary line, then TOPIC PARTITION COMMITTED LOG-END LAG and a bar per partition.
pub fn render(lag: &GroupLag) -> io::Result<String> {
    let d = &lag.description;
    let mut out = Vec::new();
    if d.state == "Dead" {
        writeln!(out, "consumer group '{}' does not exist (yet)", d.group_id)?;
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
    writeln!(
        out,
        "group {}: {}, {} member(s), total lag {}",
        d.group_id,
        d.state,
        d.members.len(),
        lag.total()
    )?;
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
        .map(|p| {
            vec![
                p.topic.clone(),
                p.partition.to_string(),
                dash(p.current_offset),
                dash(p.log_end_offset),
                dash(p.lag),
                bar(p.lag, most),
            ]
        })
        .collect();
    table::write(
        &mut out,
        &["TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", ""],
        &rows,
    )?;
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
        let part = |p: i32, committed: Option<i64>, end: i64| PartitionLag {
            topic: "orders".into(),
            partition: p,
            current_offset: committed,
            log_end_offset: Some(end),
            lag: committed.map(|c| end - c),
            owner: None,
        };
        let lag = GroupLag {
            description: GroupDescription {
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
                members: vec![],
            },
            partitions: vec![part(0, Some(2), 6), part(1, None, 3)],
        };
        let text = render(&lag).unwrap();
        assert_eq!(
            text,
            format!(
                "group g: Stable, 0 member(s), total lag 4\n\n\
                 TOPIC   PARTITION  COMMITTED  LOG-END  LAG\n\
                 orders  0          2          6        4    {}\n\
                 orders  1          -          3        -\n",
                "█".repeat(BAR_WIDTH)
            )
        );
    }
}
