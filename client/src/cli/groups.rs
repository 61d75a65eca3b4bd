//! `client groups list | describe | lag | delete`, printed as kafka-consumer-groups.sh prints
//! them, and `client consume TOPIC --group G`, which consumes as a group member.

mod describe;
mod lag;

use std::io::{self, BufWriter, Write};
use std::time::Duration;

use clap::Subcommand;
use client::admin::{parse_group_state, GroupListing};
use client::{Admin, Client, GroupConfig, GroupConsumer, OffsetReset, PolledRecords, SeekTo};

use super::consume::ConsumeArgs;
use super::format::Format;
use super::{Failure, Waited, Waiting};

#[derive(Debug, Subcommand)]
pub enum GroupsVerb {
    /// List consumer groups, one per line (with --state, a table of groups and states)
    #[command(after_help = "Examples:
  client groups list
  client groups list --state
  client groups list --state stable,empty")]
    List {
        /// Show each group's state; with STATES (comma-separated), only groups in those states
        #[arg(long, value_name = "STATES", num_args = 0..=1, default_missing_value = "")]
        state: Option<String>,
    },
    /// Describe groups as kafka-consumer-groups.sh --describe: offsets and lag per partition
    #[command(after_help = "Examples:
  client groups describe billing
  client groups describe billing --members
  client groups describe billing --state")]
    Describe {
        /// Groups to describe
        #[arg(required = true, value_name = "GROUP")]
        groups: Vec<String>,
        /// One row per member: id, host, client id, partition count
        #[arg(long, conflicts_with = "state")]
        members: bool,
        /// The coordinator, assignor, state and member count
        #[arg(long)]
        state: bool,
    },
    /// Per-partition lag with a bar per partition; --watch redraws it until Ctrl-C
    #[command(after_help = "Examples:
  client groups lag billing
  client groups lag billing --watch")]
    Lag {
        group: String,
        /// Redraw every --interval seconds until interrupted
        #[arg(short, long)]
        watch: bool,
        /// Seconds between redraws
        #[arg(long, default_value_t = 1, value_name = "SECONDS")]
        interval: u64,
    },
    /// Delete groups that have no members, with their committed offsets
    #[command(after_help = "Example:\n  client groups delete billing")]
    Delete {
        #[arg(required = true, value_name = "GROUP")]
        groups: Vec<String>,
    },
}

pub async fn run(admin: &Admin, verb: GroupsVerb, waiting: &Waiting) -> Result<(), Failure> {
    match verb {
        GroupsVerb::List { state } => waiting.finish(list(admin, state.as_deref())).await,
        GroupsVerb::Describe {
            groups,
            members,
            state,
        } => {
            let mut groups = groups;
            // The tool describes groups in name order (a TreeMap).
            groups.sort();
            groups.dedup();
            for group in &groups {
                waiting
                    .finish(describe_one(admin, group, members, state))
                    .await?;
            }
            Ok(())
        }
        GroupsVerb::Lag {
            group,
            watch,
            interval,
        } => {
            let every = Duration::from_secs(interval.max(1));
            lag::run(admin, &group, watch, every, waiting).await
        }
        GroupsVerb::Delete { groups } => waiting.finish(delete(admin, &groups)).await,
    }
}

async fn list(admin: &Admin, state: Option<&str>) -> Result<(), Failure> {
    let filter: Vec<&str> = match state {
        None | Some("") => Vec::new(),
        Some(states) => states
            .split(',')
            .map(parse_group_state)
            .collect::<client::Result<_>>()
            .map_err(|e| Failure::usage(e.to_string()))?,
    };
    let groups: Vec<GroupListing> = admin
        .list_groups(&filter)
        .await?
        .into_iter()
        .filter(GroupListing::is_consumer_group)
        .collect();
    let mut out = io::stdout().lock();
    let Some(_) = state else {
        for g in &groups {
            writeln!(out, "{}", g.group_id)?;
        }
        return Ok(());
    };
    // The tool's printGroupInfo: GROUP padded to its widest plus 10, then STATE padded to 20.
    let width = groups
        .iter()
        .map(|g| g.group_id.chars().count().max(15))
        .max()
        .unwrap_or(15)
        + 10;
    writeln!(out, "{:<width$} {:<20}", "GROUP", "STATE")?;
    for g in &groups {
        let state = g.state.as_deref().unwrap_or("Unknown");
        writeln!(out, "{:<width$} {state:<20}", g.group_id)?;
    }
    Ok(())
}

async fn describe_one(
    admin: &Admin,
    group: &str,
    members: bool,
    state: bool,
) -> Result<(), Failure> {
    let printed = if members {
        describe::members(&admin.describe_group(group).await?)
    } else if state {
        describe::state(&admin.describe_group(group).await?)
    } else {
        describe::offsets(&admin.group_lag(group).await?)
    }
    .map_err(Failure::new)?;
    // stderr first: the tool prints its note before the table.
    eprint!("{}", printed.stderr);
    let mut out = io::stdout().lock();
    out.write_all(printed.stdout.as_bytes())?;
    out.flush()?;
    Ok(())
}

async fn delete(admin: &Admin, groups: &[String]) -> Result<(), Failure> {
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let results = admin.delete_groups(&names).await?;
    let quoted = |names: Vec<&String>| -> String {
        let list: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        list.join(", ")
    };
    let ok: Vec<&String> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(g, _)| g)
        .collect();
    let failed: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
    if failed.is_empty() {
        println!(
            "Deletion of requested consumer groups ({}) was successful.",
            quoted(ok)
        );
        return Ok(());
    }
    println!("\nError: Deletion of some consumer groups failed:");
    for (group, result) in &failed {
        if let Err(e) = result {
            println!("* Group '{group}' could not be deleted due to: {e}");
        }
    }
    if !ok.is_empty() {
        println!(
            "\nThese consumer groups were deleted successfully: {}",
            quoted(ok)
        );
    }
    Err(Failure::new(format!(
        "{} of {} groups not deleted",
        failed.len(),
        results.len()
    )))
}

/// `consume TOPIC --group G`: partitions come from the group and offsets are committed (every
/// 5 s and on exit). `--offset` can only say where to start without a committed offset.
///
/// Ctrl-C and SIGTERM both end it cleanly: the positions are committed and the member leaves, so
/// the group rebalances at once instead of after the session timeout. A poll without an answer
/// within `--timeout` ends it with an error and without either, since the cluster is not
/// answering.
pub async fn consume_in_group(
    client: Client,
    args: &ConsumeArgs,
    group: &str,
    waiting: &Waiting,
) -> Result<(), Failure> {
    let mut config = GroupConfig::new(group);
    config.consumer.read_committed = args.read_committed();
    config.consumer.auto_offset_reset = match args.offset {
        SeekTo::Beginning => OffsetReset::Earliest,
        SeekTo::End => OffsetReset::Latest,
        _ => {
            return Err(Failure::usage(
                "with --group, --offset only says where to start without a committed offset: \
                 beginning or end",
            ))
        }
    };
    // The topic must exist: a typo should fail here, not create a topic.
    if let Waited::Stopped = waiting.on(client.topic(&args.topic, false)).await? {
        return Ok(());
    }
    config.allow_auto_create_topics = false;
    let mut member = GroupConsumer::new(client, config)?;
    member.subscribe([args.topic.as_str()])?;
    let format = args.format.clone().unwrap_or_else(Format::default_format);
    let printed = match consume_loop(&mut member, args, &format, waiting).await {
        LoopEnd::Unanswered(failure) => return Err(failure),
        LoopEnd::Printed(printed) => Ok(printed),
        LoopEnd::Failed(failure) => Err(failure),
    };
    // Leave in every other case, so the group rebalances now rather than after the session
    // timeout.
    let closed = waiting.within(member.close()).await;
    let printed = printed?;
    closed?;
    if args.exit || args.count.is_some() {
        eprintln!(
            "consumed {printed} records from {} in group {group}",
            args.topic
        );
    }
    Ok(())
}

/// How the loop ended: by itself or on a stop (the member then commits and leaves), or with the
/// cluster silent (nothing to commit to or leave).
enum LoopEnd {
    Printed(u64),
    Failed(Failure),
    Unanswered(Failure),
}

async fn consume_loop(
    member: &mut GroupConsumer,
    args: &ConsumeArgs,
    format: &Format,
    waiting: &Waiting,
) -> LoopEnd {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    let done = |printed: u64| args.count.is_some_and(|n| printed >= n);
    while !done(printed) {
        // As `Waiting::on`, but a poll left unanswered is told apart from a poll that failed.
        let polled = tokio::select! {
            biased;
            _ = waiting.stop.asked() => break,
            polled = tokio::time::timeout(waiting.timeout, member.poll()) => match polled {
                Ok(Ok(polled)) => polled,
                Ok(Err(e)) => return LoopEnd::Failed(e.into()),
                Err(_) => {
                    let _ = out.flush();
                    return LoopEnd::Unanswered(Failure::new(format!(
                        "{}; what was printed since the last commit stays uncommitted",
                        waiting.timed_out()
                    )));
                }
            },
        };
        if let Err(e) = print(member, &polled, &mut out, format, &mut printed, &done) {
            return LoopEnd::Failed(e);
        }
        if args.exit && member.at_end() {
            break;
        }
    }
    match out.flush() {
        Ok(()) => LoopEnd::Printed(printed),
        Err(e) => LoopEnd::Failed(e.into()),
    }
}

/// Prints what a poll returned, up to `--count`.
fn print(
    member: &mut GroupConsumer,
    polled: &[PolledRecords],
    out: &mut impl Write,
    format: &Format,
    printed: &mut u64,
    done: &impl Fn(u64) -> bool,
) -> Result<(), Failure> {
    for (i, part) in polled.iter().enumerate() {
        for (j, record) in part.records.iter().enumerate() {
            if done(*printed) {
                // Records polled but not printed must not count as consumed.
                rewind(member, &polled[i..], j)?;
                out.flush()?;
                return Ok(());
            }
            format.write(out, &part.topic, part.partition, record)?;
            *printed += 1;
        }
    }
    out.flush()?;
    Ok(())
}

/// Moves positions back to the first record not printed, so the commit on close leaves them
/// for the group's next reader.
fn rewind(member: &mut GroupConsumer, parts: &[PolledRecords], skip: usize) -> Result<(), Failure> {
    for (k, part) in parts.iter().enumerate() {
        let first = if k == 0 { skip } else { 0 };
        if let Some(record) = part.records.get(first) {
            member.seek(&part.topic_partition(), SeekTo::Offset(record.offset))?;
        }
    }
    Ok(())
}
