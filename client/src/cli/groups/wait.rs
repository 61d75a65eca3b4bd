//! `client groups wait GROUP --max-lag N`: what an integration test runs between "produce" and
//! "assert on what my consumer did". Exits 0 as soon as the group has at most N records not
//! consumed on each partition of the topics it reads ([`client::Admin::catch_up`]), 1 with the
//! table of what is left once `--timeout` has passed, 2 when there was nothing to wait on (no
//! partition at all: an unknown group, and no `--topic`). The result goes to stdout, as a line
//! and a table or as one JSON document.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::Args;
use client::admin::CatchUp;
use client::Admin;
use serde_json::{json, Value};

use super::super::json::{self, Output};
use super::super::words::count;
use super::super::{table, Failure, Waited, Waiting};
use super::describe::{impossible_note, lag_cell, lag_json};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  client groups wait billing --max-lag 0
  client groups wait billing --max-lag 100 --topic orders --timeout 60
  client groups wait billing --max-lag 0 --format json

Every partition of every topic the group subscribes to or committed on counts, and one the group
committed nothing on counts all its records as not consumed, so a consumer that has not started
yet, or has read one partition of many, is not taken for one that is done. Exit codes: 0 caught
up, 1 not within --timeout (seconds, the whole wait), 2 nothing to wait on or no broker.")]
pub struct WaitArgs {
    pub group: String,
    /// Records a partition may still have to consume
    #[arg(long, value_name = "N")]
    pub max_lag: i64,
    /// Also every partition of this topic, committed or not (repeatable): a consumer that has
    /// not joined yet then counts as behind
    #[arg(long = "topic", value_name = "TOPIC")]
    pub topics: Vec<String>,
    /// Milliseconds between two looks
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub interval: u64,
    #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
    pub format: Output,
}

pub async fn run(admin: &Admin, args: &WaitArgs, waiting: &Waiting) -> Result<(), Failure> {
    if args.max_lag < 0 {
        return Err(Failure::usage("--max-lag must be 0 or more"));
    }
    let started = Instant::now();
    let deadline = started + waiting.timeout;
    let every = Duration::from_millis(args.interval.max(10));
    let look: CatchUp = loop {
        let look = match waiting
            .on(admin.catch_up(&args.group, args.max_lag, &args.topics))
            .await?
        {
            Waited::Done(look) => look,
            Waited::Stopped => return Err(Failure::interrupted()),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        // A commit past the log end will not come right by waiting: nothing to wait on.
        let impossible = look.lag.partitions.iter().any(|p| p.impossible());
        if look.caught_up || left.is_zero() || impossible {
            break look;
        }
        if !waiting.pause(every.min(left)).await {
            return Err(Failure::interrupted());
        }
    };
    let waited = started.elapsed();
    let mut out = std::io::stdout().lock();
    if args.format == Output::Json {
        drop(out);
        json::print(&wait_json(&look, args.max_lag, waited))?;
    } else if look.caught_up {
        writeln!(
            out,
            "group {} caught up: at most {} not consumed on {} after {:.1} s",
            args.group,
            count(args.max_lag, "record"),
            each_of(look.lag.partitions.len()),
            waited.as_secs_f64()
        )?;
    } else {
        out.write_all(unread_table(&look)?.as_bytes())?;
        out.flush()?;
    }
    if look.caught_up {
        return Ok(());
    }
    if let Some(p) = look.lag.partitions.iter().find(|p| p.impossible()) {
        return Err(Failure::new(format!(
            "group {} cannot be checked: {}",
            args.group,
            impossible_note(p)
        )));
    }
    let line = not_caught_up(&args.group, args.max_lag, &look, waiting.timeout);
    if look.lag.partitions.is_empty() {
        return Err(Failure::new(line));
    }
    Err(Failure::check_failed(line))
}

/// "each of 12 partitions", "its 1 partition".
fn each_of(partitions: usize) -> String {
    match partitions {
        1 => "its 1 partition".to_string(),
        n => format!("each of {n} partitions"),
    }
}

/// The last look: the group's lag document, with `caught_up` and `max_lag`.
fn wait_json(look: &CatchUp, max_lag: i64, waited: Duration) -> Value {
    let mut doc = lag_json(&look.lag, None);
    doc["caught_up"] = json!(look.caught_up);
    doc["max_lag"] = json!(max_lag);
    doc["waited_ms"] = json!(waited.as_millis() as u64);
    doc
}

/// What the last look found, in one line.
fn not_caught_up(group: &str, max_lag: i64, look: &CatchUp, waited: Duration) -> String {
    let partitions = &look.lag.partitions;
    if partitions.is_empty() {
        return format!(
            "group {group} has no partitions after {} s: it committed nothing and has no \
             members; name the topic it reads with --topic",
            waited.as_secs()
        );
    }
    let behind = partitions
        .iter()
        .filter(|p| p.lag.is_none_or(|l| l > max_lag))
        .count();
    format!(
        "group {group} did not catch up within {} s (--timeout): {behind} of {} have more than \
         {} not consumed, {} in all",
        waited.as_secs(),
        count(partitions.len() as u64, "partition"),
        count(max_lag, "record"),
        look.lag.total()
    )
}

/// TOPIC PARTITION COMMITTED LOG-END UNREAD, one row per partition of the last look.
fn unread_table(look: &CatchUp) -> std::io::Result<String> {
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let rows: Vec<Vec<String>> = look
        .lag
        .partitions
        .iter()
        .map(|p| {
            vec![
                p.topic.clone(),
                p.partition.to_string(),
                dash(p.current_offset),
                dash(p.log_end_offset),
                lag_cell(p),
            ]
        })
        .collect();
    let mut out = Vec::new();
    table::write(
        &mut out,
        &["TOPIC", "PARTITION", "COMMITTED", "LOG-END", "UNREAD"],
        &rows,
    )?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
