//! `client check order TOPIC --seq SOURCE`: is a topic in order per key? Each record read ahead
//! of a lower sequence number of its key is printed as lab `partitions` prints it, and the exit
//! code is 1 when there is any (see [`client::check::check_order`] for the reading order).

use std::io::Write;

use clap::Subcommand;
use client::check::{check_order, SeqSource, StartAt};
use client::Client;

use super::json::{self, Output};
use super::{Failure, Waited, Waiting};

#[derive(Debug, Subcommand)]
pub enum CheckVerb {
    /// Per key, sequence numbers must increase; prints each record read ahead of a lower one
    #[command(after_help = "Examples:
  client check order orders --seq header:seq
  client check order orders --seq json:version --group billing
  client check order numbers --seq value --format json

Exits 0 when every key is in order, 1 when a record could be read ahead of a lower sequence number
of its key: a later one in its partition, or one in another partition the key was also written to
(a consumer may read partitions in any order; the partition with the key's newest records is
taken first, as a consumer lagging on the older one reads them).")]
    Order {
        /// Topic to read
        topic: String,
        /// Where each record's sequence number is: header:NAME, json:FIELD (a.b nested) or value
        #[arg(long, value_name = "SOURCE")]
        seq: SeqSource,
        /// Start at this group's committed offsets (what it has yet to read) instead of the
        /// beginning
        #[arg(short = 'G', long, value_name = "GROUP")]
        group: Option<String>,
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
}

pub async fn run(client: &Client, verb: CheckVerb, waiting: &Waiting) -> Result<(), Failure> {
    let CheckVerb::Order {
        topic,
        seq,
        group,
        format,
    } = verb;
    let from = group.map_or(StartAt::Beginning, StartAt::Committed);
    let report = match waiting.on(check_order(client, &topic, &seq, &from)).await? {
        Waited::Done(report) => report,
        Waited::Stopped => return Err(Failure::interrupted()),
    };
    if format == Output::Json {
        let doc =
            serde_json::to_value(&report).map_err(|e| Failure::new(format!("JSON output: {e}")))?;
        json::print(&doc)?;
    } else {
        let mut out = std::io::stdout().lock();
        for v in &report.violations {
            writeln!(out, "{v}")?;
        }
        out.flush()?;
    }
    let read: Vec<String> = report
        .ranges
        .iter()
        .filter(|r| r.from < r.to)
        .map(|r| format!("{}-{}@{}..{}", topic, r.partition, r.from, r.to))
        .collect();
    let summary = format!(
        "checked {} records of {} keys ({} without a key, {} repeated) in {}",
        report.records,
        report.keys,
        report.unkeyed,
        report.duplicates,
        if read.is_empty() {
            "nothing to read".to_string()
        } else {
            read.join(" ")
        }
    );
    if report.violations.is_empty() {
        eprintln!("{summary}: every key in order");
        return Ok(());
    }
    Err(Failure::new(format!(
        "{summary}: {} records out of order over {} keys",
        report.violations.len(),
        report.keys_out_of_order
    )))
}
