//! `client groups wait GROUP --max-lag N`: what an integration test runs between "produce" and
//! "assert on what my consumer did". Exits 0 as soon as the group has at most N records not
//! consumed on each partition ([`client::Admin::catch_up`]), 1 with the table of what is left
//! once `--timeout` has passed.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::Args;
use client::admin::CatchUp;
use client::Admin;

use super::super::{table, Failure, Waited, Waiting};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  client groups wait billing --max-lag 0
  client groups wait billing --max-lag 100 --topic orders --timeout 60

A partition the group committed nothing on counts all its records as not consumed, so a consumer
that has not started yet is not taken for one that is done. The global --timeout (seconds) bounds
the whole wait.")]
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
}

pub async fn run(admin: &Admin, args: &WaitArgs, waiting: &Waiting) -> Result<(), Failure> {
    if args.max_lag < 0 {
        return Err(Failure::usage("--max-lag must be 0 or more"));
    }
    let started = Instant::now();
    let deadline = started + waiting.timeout;
    let every = Duration::from_millis(args.interval.max(10));
    let last: CatchUp = loop {
        let look = match waiting
            .on(admin.catch_up(&args.group, args.max_lag, &args.topics))
            .await?
        {
            Waited::Done(look) => look,
            Waited::Stopped => return Err(Failure::interrupted()),
        };
        if look.caught_up {
            eprintln!(
                "group {} caught up: at most {} records not consumed on each of {} partitions \
                 after {:.1} s",
                args.group,
                args.max_lag,
                look.unread.len(),
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break look;
        }
        if !waiting.pause(every.min(left)).await {
            return Err(Failure::interrupted());
        }
    };
    let look = last;
    let mut out = std::io::stdout().lock();
    out.write_all(unread_table(&look)?.as_bytes())?;
    out.flush()?;
    Err(Failure::new(not_caught_up(
        &args.group,
        args.max_lag,
        &look,
        waiting.timeout,
    )))
}

/// What the last look found, in one line.
fn not_caught_up(group: &str, max_lag: i64, look: &CatchUp, waited: Duration) -> String {
    if look.unread.is_empty() {
        return format!(
            "group {group} has no partitions after {} s: it committed nothing and has no \
             members; name the topic it reads with --topic",
            waited.as_secs()
        );
    }
    let behind = look
        .unread
        .iter()
        .filter(|u| u.is_none_or(|u| u > max_lag))
        .count();
    let total: i64 = look.unread.iter().flatten().sum();
    format!(
        "group {group} did not catch up within {} s (--timeout): {behind} of {} partitions have \
         more than {max_lag} records not consumed, {total} in all",
        waited.as_secs(),
        look.unread.len()
    )
}

/// TOPIC PARTITION COMMITTED LOG-END UNREAD, one row per partition of the last look.
fn unread_table(look: &CatchUp) -> std::io::Result<String> {
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let rows: Vec<Vec<String>> = look
        .lag
        .partitions
        .iter()
        .zip(&look.unread)
        .map(|(p, unread)| {
            vec![
                p.topic.clone(),
                p.partition.to_string(),
                dash(p.current_offset),
                dash(p.log_end_offset),
                dash(*unread),
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
