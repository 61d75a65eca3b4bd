//! `client check order TOPIC --seq SOURCE`: is a topic in order per key? Each record read ahead
//! of a lower sequence number of its key, or after a higher one, is printed as lab `partitions`
//! prints it, and the exit code is 1 when there is any (see [`client::check::check_order`] for
//! the reading order), or when fewer records were read than asked for: a check that read nothing
//! proves nothing, so it fails unless `--allow-empty` says that is expected. The summary goes to
//! stdout when the check holds, as the error line when it does not.

use std::io::Write;

use clap::Subcommand;
use client::check::{check_order, SeqSource, StartAt};
use client::Client;

use super::json::{self, Output};
use super::words::count;
use super::{Failure, Waited, Waiting};

#[derive(Debug, Subcommand)]
pub enum CheckVerb {
    /// Per key, sequence numbers must increase; prints each record read ahead of a lower one
    #[command(after_help = "Examples:
  client check order orders --seq header:seq
  client check order orders --seq json:version --group billing
  client check order numbers --seq value --format json

Exits 0 when every key is in order, 1 when a record could be read ahead of a lower sequence number
of its key (a later one in its partition, or one in another partition the key was also written
to: a consumer may read partitions in any order, and the partition with the key's newest records
is taken first, as a consumer lagging on the older one reads them), when a key goes back below a
number already read, or when no keyed record was read (unless --allow-empty) or fewer than
--min-records; 2 when it cannot check (no broker, no such topic or group, a number not readable).")]
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
        /// Pass when there is no keyed record to check (by default that fails: nothing proven)
        #[arg(long)]
        allow_empty: bool,
        /// Fail unless at least N keyed records were checked
        #[arg(long, value_name = "N")]
        min_records: Option<u64>,
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
}

pub async fn run(client: &Client, verb: CheckVerb, waiting: &Waiting) -> Result<(), Failure> {
    let CheckVerb::Order {
        topic,
        seq,
        group,
        allow_empty,
        min_records,
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
        "checked {} of {} ({} without a key, {} repeated) in {}",
        count(report.records, "record"),
        count(report.keys as u64, "key"),
        report.unkeyed,
        report.duplicates,
        if read.is_empty() {
            "nothing to read".to_string()
        } else {
            read.join(" ")
        }
    );
    if !report.violations.is_empty() {
        return Err(Failure::check_failed(format!(
            "{summary}: {} out of order over {}",
            count(report.violations.len() as u64, "record"),
            count(report.keys_out_of_order as u64, "key")
        )));
    }
    if report.records == 0 && !allow_empty {
        return Err(Failure::check_failed(format!(
            "{summary}: no keyed record to check (--allow-empty to accept that)"
        )));
    }
    if let Some(min) = min_records.filter(|&min| report.records < min) {
        return Err(Failure::check_failed(format!(
            "{summary}: {}, fewer than --min-records {min}",
            count(report.records, "record")
        )));
    }
    if format == Output::Text {
        println!("{summary}: every key in order");
    }
    Ok(())
}
