//! The `client` command line: arguments, and one module per verb.

mod check;
mod consume;
mod format;
mod groups;
mod json;
mod partition;
mod produce;
mod reassign;
mod report;
mod table;
mod topics;
mod waiting;
mod words;

use std::io::Write;
use std::time::Duration;

use clap::{Parser, Subcommand};
use client::{Admin, Client, ClientConfig, OffsetSpec};
use serde_json::json;

use json::Output;

pub use report::Failure;
pub use waiting::{Waited, Waiting};

#[derive(Debug, Parser)]
#[command(
    name = "client",
    version,
    // Wrapped to the terminal, but never wider than 100 columns: long lines are hard to read.
    max_term_width = 100,
    about = "A Kafka client for the partitioned-log workshop: topics, produce, consume, groups, offsets, partitions",
    after_help = "Examples:
  client topics create orders --partitions 12
  printf 'order-8842:paid\\n' | client produce orders -K :
  client consume orders --exit
  client consume orders --group billing
  client groups describe billing
  client groups wait billing --max-lag 0
  client check order orders --seq header:seq
  client partition order-8842 --partitions 12 --to 24
  client reassign move orders 7 --to 2"
)]
pub struct Cli {
    /// Broker to start from, HOST:PORT (several: comma-separated)
    #[arg(
        short,
        long,
        global = true,
        env = "KAFKA_BOOTSTRAP",
        default_value = "127.0.0.1:9092",
        value_name = "HOST:PORT"
    )]
    pub bootstrap: String,
    /// Seconds any wait on the cluster may take (a request with its retries, a poll, a redraw;
    /// all of `groups wait`): 30, 30s or 2m
    #[arg(long, global = true, default_value = "30", value_name = "SECONDS", value_parser = seconds)]
    pub timeout: u64,
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Debug, Subcommand)]
pub enum Verb {
    /// List, describe, create, grow or delete topics
    #[command(subcommand)]
    Topics(topics::TopicsVerb),
    /// Send stdin lines as records, one per line
    Produce(produce::ProduceArgs),
    /// Print records to stdout
    Consume(consume::ConsumeArgs),
    /// Consumer groups: list, describe (as kafka-consumer-groups.sh), lag, wait, reset offsets,
    /// delete
    #[command(subcommand)]
    Groups(groups::GroupsVerb),
    /// Earliest and latest offset of each partition
    #[command(
        after_help = "Examples:\n  client offsets orders\n  client offsets orders --format json"
    )]
    Offsets {
        /// Topic to look up
        topic: String,
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
    /// Checks on a topic's records: per-key order
    #[command(subcommand)]
    Check(check::CheckVerb),
    /// Which partition keys go to under Kafka's partitioner, and which move when a topic grows
    Partition(partition::PartitionArgs),
    /// Move partitions between brokers, as kafka-reassign-partitions.sh: execute a plan, move
    /// one partition, verify, list those in progress
    #[command(subcommand)]
    Reassign(reassign::ReassignVerb),
}

/// `--timeout`: whole seconds, optionally with `s`, or minutes with `m`.
fn seconds(s: &str) -> Result<u64, String> {
    let (digits, scale) = match s.strip_suffix('m') {
        Some(minutes) => (minutes, 60),
        None => (s.strip_suffix('s').unwrap_or(s), 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("'{s}' is not a number of seconds: use 30, 30s or 2m"))
}

pub async fn run(cli: Cli) -> Result<(), Failure> {
    if let Verb::Partition(args) = &cli.verb {
        return partition::run(args);
    }
    let timeout = Duration::from_secs(cli.timeout.max(1));
    let waiting = Waiting {
        timeout,
        bootstrap: cli.bootstrap.clone(),
        stop: waiting::Stop::listen()?,
    };
    let mut config = ClientConfig::new(&cli.bootstrap);
    config.request_timeout = timeout;
    let client = match waiting.on(Client::connect(config)).await? {
        Waited::Done(client) => client,
        Waited::Stopped => return Err(Failure::interrupted()),
    };
    match cli.verb {
        Verb::Topics(verb) => {
            let admin = Admin::new(client);
            waiting.finish(topics::run(&admin, verb)).await
        }
        Verb::Produce(args) => produce::run(client, args, &waiting).await,
        Verb::Consume(args) => consume::run(client, args, &waiting).await,
        Verb::Groups(verb) => groups::run(&Admin::new(client), verb, &waiting).await,
        Verb::Offsets { topic, format } => {
            let admin = Admin::new(client);
            waiting.finish(offsets(&admin, &topic, format)).await
        }
        Verb::Check(verb) => check::run(&client, verb, &waiting).await,
        Verb::Reassign(verb) => {
            let admin = Admin::new(client);
            waiting.finish(reassign::run(&admin, verb)).await
        }
        Verb::Partition(_) => unreachable!("handled without a broker"),
    }
}

async fn offsets(admin: &Admin, topic: &str, format: Output) -> Result<(), Failure> {
    let earliest = admin.list_offsets(topic, OffsetSpec::Earliest).await?;
    let latest = admin.list_offsets(topic, OffsetSpec::Latest).await?;
    if format == Output::Json {
        let partitions: Vec<serde_json::Value> = earliest
            .iter()
            .zip(&latest)
            .map(|(e, l)| json!({"partition": e.partition, "earliest": e.offset, "latest": l.offset}))
            .collect();
        return json::print(&json!({"topic": topic, "partitions": partitions}));
    }
    let rows: Vec<Vec<String>> = earliest
        .iter()
        .zip(&latest)
        .map(|(e, l)| {
            vec![
                topic.to_string(),
                e.partition.to_string(),
                e.offset.to_string(),
                l.offset.to_string(),
            ]
        })
        .collect();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    table::write(
        &mut out,
        &["TOPIC", "PARTITION", "EARLIEST", "LATEST"],
        &rows,
    )?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn timeouts_in_seconds_or_minutes() {
        assert_eq!(seconds("30"), Ok(30));
        assert_eq!(seconds("30s"), Ok(30));
        assert_eq!(seconds("2m"), Ok(120));
        assert!(seconds("2h").is_err());
        assert!(seconds("-1").is_err());
    }

    #[test]
    fn the_argument_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    /// Help wraps at 100 columns (clap's `wrap_help`; `max_term_width` caps it there on a wider
    /// terminal), and usage lines, which clap does not wrap, are written short.
    #[test]
    fn every_help_line_fits_in_100_columns() {
        fn check(cmd: &mut clap::Command, path: &str, wide: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            for help in [cmd.render_help(), cmd.render_long_help()] {
                for line in help.to_string().lines() {
                    let width = line.chars().count();
                    if width > 100 {
                        wide.push(format!("{path}: {width} columns: {line}"));
                    }
                }
            }
            for sub in cmd.get_subcommands_mut() {
                check(sub, &path, wide);
            }
        }
        let mut cli = Cli::command().term_width(100);
        cli.build();
        let mut wide = Vec::new();
        check(&mut cli, "", &mut wide);
        assert!(wide.is_empty(), "{}", wide.join("\n"));
    }

    #[test]
    fn every_verb_has_an_example_in_its_help() {
        fn check(cmd: &clap::Command, path: &str) {
            let path = format!("{path} {}", cmd.get_name());
            if cmd.has_subcommands() {
                for sub in cmd.get_subcommands() {
                    check(sub, &path);
                }
            } else {
                let help = cmd
                    .get_after_help()
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                assert!(help.contains("client "), "{path} has no example");
            }
        }
        check(&Cli::command(), "");
    }
}
