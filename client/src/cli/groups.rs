//! `client groups list | describe | lag | wait | reset-offsets | delete-offsets | delete`,
//! printed as kafka-consumer-groups.sh prints them (or as JSON with `--format json`), and
//! `client consume TOPIC --group G`, which consumes as a group member.

mod describe;
mod lag;
mod reset;
mod wait;
mod when;

use std::io::{self, BufWriter, Write};
use std::time::Duration;

use clap::Subcommand;
use client::admin::{parse_group_state, GroupListing};
use client::lag_status::DEFAULT_WINDOW;
use client::{Admin, Client, GroupConfig, GroupConsumer, OffsetReset, PolledRecords, SeekTo};
use serde_json::json;

use super::consume::ConsumeArgs;
use super::format::Format;
use super::json::{self, Output};
use super::waiting::refused_for_good;
use super::words::count;
use super::{Failure, Waited, Waiting};

#[derive(Debug, Subcommand)]
pub enum GroupsVerb {
    /// List consumer groups, one per line (with --state, a table of groups and states)
    #[command(after_help = "Examples:
  client groups list
  client groups list --state
  client groups list --state stable,empty
  client groups list --format json")]
    List {
        /// Show each group's state; with STATES (comma-separated), only groups in those states
        #[arg(long, value_name = "STATES", num_args = 0..=1, default_missing_value = "")]
        state: Option<String>,
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
    /// Describe groups as kafka-consumer-groups.sh --describe: offsets and lag per partition
    #[command(after_help = "Examples:
  client groups describe billing
  client groups describe billing --members
  client groups describe billing --state
  client groups describe --all-groups --time-lag
  client groups describe billing --format json")]
    Describe {
        /// Groups to describe
        #[arg(required_unless_present = "all_groups", value_name = "GROUP")]
        groups: Vec<String>,
        /// Every consumer group
        #[arg(long, conflicts_with = "groups")]
        all_groups: bool,
        /// One row per member: id, host, client id, partition count
        #[arg(long, conflicts_with = "state")]
        members: bool,
        /// The coordinator, assignor, state and member count
        #[arg(long)]
        state: bool,
        /// A TIME-LAG column: the age of the oldest record not consumed yet
        #[arg(long, conflicts_with_all = ["members", "state"])]
        time_lag: bool,
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
    /// Per-partition lag with a bar per partition; --watch redraws it until Ctrl-C, with a
    /// Burrow-style status (OK, WARN, STALL, STOP) judged over the last --window looks
    #[command(after_help = "Examples:
  client groups lag billing
  client groups lag billing --time-lag
  client groups lag billing --topic orders
  client groups lag billing --watch --window 10
  client groups lag billing --format json

Every partition of every topic the group subscribes to or committed on has a row; one without a
commit is behind by its whole log.")]
    Lag {
        group: String,
        /// Also every partition of this topic, committed or not (repeatable): a consumer that has
        /// not joined yet then counts as behind
        #[arg(long = "topic", value_name = "TOPIC")]
        topics: Vec<String>,
        /// Redraw every --interval seconds until interrupted
        #[arg(short, long)]
        watch: bool,
        /// Seconds between redraws
        #[arg(long, default_value_t = 1, value_name = "SECONDS")]
        interval: u64,
        /// A TIME-LAG column: the age of the oldest record not consumed yet
        #[arg(long)]
        time_lag: bool,
        /// With --watch: looks a status is judged over (Burrow's intervals)
        #[arg(long, default_value_t = DEFAULT_WINDOW, value_name = "N")]
        window: usize,
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
    /// Wait until every partition of the topics the group reads (and of --topic) has at most
    /// --max-lag records not consumed; exit 0 then, or 1 with the lag table after --timeout
    #[command(after_help = "Examples:
  client groups wait billing --max-lag 0
  client groups wait billing --max-lag 100 --topic orders --timeout 60")]
    Wait(wait::WaitArgs),
    /// Plan or make a reset of a group's committed offsets, as kafka-consumer-groups.sh
    /// --reset-offsets (--dry-run, the default, only prints the plan)
    #[command(name = "reset-offsets")]
    ResetOffsets(reset::ResetArgs),
    /// Delete a group's committed offsets of topics (OffsetDelete), as kafka-consumer-groups.sh
    /// --delete-offsets
    #[command(
        name = "delete-offsets",
        after_help = "Examples:
  client groups delete-offsets billing --topic orders
  client groups delete-offsets billing --topic orders:0,1"
    )]
    DeleteOffsets {
        group: String,
        /// A topic (every partition) or TOPIC:P,P.. ; repeatable
        #[arg(long = "topic", required = true, value_name = "TOPIC[:P,..]", value_parser = reset::topic_arg)]
        topics: Vec<(String, Option<Vec<i32>>)>,
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
        GroupsVerb::List { state, format } => {
            waiting.finish(list(admin, state.as_deref(), format)).await
        }
        GroupsVerb::Describe {
            groups,
            all_groups,
            members,
            state,
            time_lag,
            format,
        } => {
            let view = describe::View {
                members,
                state,
                time_lag,
                format,
            };
            waiting
                .finish(describe::run(admin, groups, all_groups, view))
                .await
        }
        GroupsVerb::Lag {
            group,
            topics,
            watch,
            interval,
            time_lag,
            window,
            format,
        } => {
            let view = lag::View {
                topics,
                watch,
                every: Duration::from_secs(interval.max(1)),
                time_lag,
                window,
                format,
            };
            lag::run(admin, &group, &view, waiting).await
        }
        GroupsVerb::Wait(args) => wait::run(admin, &args, waiting).await,
        GroupsVerb::ResetOffsets(args) => waiting.finish(reset::run(admin, &args)).await,
        GroupsVerb::DeleteOffsets { group, topics } => {
            waiting
                .finish(reset::delete_offsets(admin, &group, &topics))
                .await
        }
        GroupsVerb::Delete { groups } => waiting.finish(delete(admin, &groups)).await,
    }
}

/// The consumer groups, sorted, optionally only those in `states`.
async fn consumer_groups(admin: &Admin, states: &[&str]) -> Result<Vec<GroupListing>, Failure> {
    Ok(admin
        .list_groups(states)
        .await?
        .into_iter()
        .filter(GroupListing::is_consumer_group)
        .collect())
}

async fn list(admin: &Admin, state: Option<&str>, format: Output) -> Result<(), Failure> {
    let filter: Vec<&str> = match state {
        None | Some("") => Vec::new(),
        Some(states) => states
            .split(',')
            .map(parse_group_state)
            .collect::<client::Result<_>>()
            .map_err(|e| Failure::usage(e.to_string()))?,
    };
    let groups = consumer_groups(admin, &filter).await?;
    if format == Output::Json {
        let docs: Vec<serde_json::Value> = groups.iter().map(json::listing).collect();
        return json::print(&json!({ "groups": docs }));
    }
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
        "{} of {} not deleted",
        failed.len(),
        count(results.len() as u64, "group")
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
    let probe = client.clone();
    let mut member = GroupConsumer::new(client, config)?;
    member.subscribe([args.topic.as_str()])?;
    let format = args.output();
    let printed = match consume_loop(&mut member, &probe, args, &format, waiting).await {
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
            "consumed {} from {} in group {group}",
            count(printed, "record"),
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
    probe: &Client,
    args: &ConsumeArgs,
    format: &Format,
    waiting: &Waiting,
) -> LoopEnd {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    let done = |printed: u64| args.count.is_some_and(|n| printed >= n);
    // One probe for the whole loop: its count of refusals in a row survives polls that return.
    let refused = refused_for_good(probe);
    tokio::pin!(refused);
    while !done(printed) {
        // As `Waiting::on`, but a poll left unanswered is told apart from a poll that failed.
        let polled = tokio::select! {
            biased;
            _ = waiting.stop.asked() => break,
            refusal = &mut refused => {
                let _ = out.flush();
                return LoopEnd::Unanswered(refusal.into());
            }
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
