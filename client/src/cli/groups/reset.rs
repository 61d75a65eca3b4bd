//! `client groups reset-offsets` and `groups delete-offsets`, as kafka-consumer-groups.sh
//! `--reset-offsets` and `--delete-offsets` (Kafka 4.x `ConsumerGroupCommand`): the plan is
//! printed with the tool's columns, and only committed with `--execute`.

use std::collections::BTreeMap;
use std::io::Write;

use clap::{ArgGroup, Args};
use client::admin::{ResetPlan, ResetScope, ResetTo};
use client::{Admin, Error, TopicPartition};
use kafka_protocol::ResponseError;
use serde_json::json;

use super::super::json::{self, Output};
use super::super::words::count;
use super::super::Failure;
use super::when;

#[derive(Debug, Args)]
#[command(
    // clap lists both required groups in full: 212 columns.
    override_usage = "client groups reset-offsets <GROUP> (--topic <TOPIC[:P,..]> | --all-topics)\n         \
                      <TARGET> [--execute | --dry-run] [--format <FORMAT>]\n       \
                      TARGET: --to-earliest | --to-latest | --to-current | --to-offset <N> |\n               \
                      --shift-by <N> | --to-datetime <DATETIME> | --by-duration <DURATION>",
    group(ArgGroup::new("scope").required(true).args(["topics", "all_topics"])),
    group(ArgGroup::new("target").required(true).args([
        "to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime",
        "by_duration",
    ])),
    after_help = "Examples:
  client groups reset-offsets billing --topic orders --to-earliest
  client groups reset-offsets billing --topic orders --to-earliest --execute
  client groups reset-offsets billing --topic orders:0,1 --shift-by -10 --execute
  client groups reset-offsets billing --all-topics --to-datetime 2026-12-01T09:00:00.000
  client groups reset-offsets billing --all-topics --by-duration PT15M --execute

Refused while the group has members: they would commit over the reset. Offsets past either end of
a log are brought back inside it; a time after a partition's last record gives its log end."
)]
pub struct ResetArgs {
    pub group: String,
    /// A topic (every partition) or TOPIC:P,P.. ; repeatable
    #[arg(long = "topic", value_name = "TOPIC[:P,..]", value_parser = topic_arg)]
    pub topics: Vec<(String, Option<Vec<i32>>)>,
    /// Every partition the group has an offset for
    #[arg(long)]
    pub all_topics: bool,
    /// The log start
    #[arg(long)]
    pub to_earliest: bool,
    /// The log end
    #[arg(long)]
    pub to_latest: bool,
    /// The committed offset (the log end where there is none)
    #[arg(long)]
    pub to_current: bool,
    /// This offset
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub to_offset: Option<i64>,
    /// The committed offset plus N (negative: back)
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
    /// The first record at or after YYYY-MM-DDTHH:mm:SS.sss (UTC unless it ends in Z or ±HH:MM)
    #[arg(long, value_name = "DATETIME", value_parser = when::datetime_ms)]
    pub to_datetime: Option<i64>,
    /// The first record at or after this long ago, as ISO 8601 PnDTnHnMnS
    #[arg(long, value_name = "DURATION", value_parser = when::duration_ms)]
    pub by_duration: Option<i64>,
    /// Print the plan only (the default)
    #[arg(long, conflicts_with = "execute")]
    pub dry_run: bool,
    /// Commit the plan
    #[arg(long)]
    pub execute: bool,
    #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
    pub format: Output,
}

impl ResetArgs {
    fn scope(&self) -> ResetScope {
        if self.all_topics {
            ResetScope::AllTopics
        } else {
            ResetScope::Topics(self.topics.clone())
        }
    }

    /// The target; clap's group guarantees exactly one is given.
    fn target(&self) -> ResetTo {
        if self.to_earliest {
            ResetTo::Earliest
        } else if self.to_latest {
            ResetTo::Latest
        } else if self.to_current {
            ResetTo::Current
        } else if let Some(n) = self.to_offset {
            ResetTo::Offset(n)
        } else if let Some(n) = self.shift_by {
            ResetTo::ShiftBy(n)
        } else if let Some(ms) = self.to_datetime {
            ResetTo::Timestamp(ms)
        } else if let Some(ago) = self.by_duration {
            ResetTo::Timestamp(when::now_ms().saturating_sub(ago))
        } else {
            unreachable!("clap requires one reset target")
        }
    }
}

/// `--topic orders` or `--topic orders:0,2`.
pub fn topic_arg(s: &str) -> Result<(String, Option<Vec<i32>>), String> {
    let Some((topic, list)) = s.split_once(':') else {
        return Ok((s.to_string(), None));
    };
    if topic.is_empty() {
        return Err(format!("'{s}' names no topic: use TOPIC or TOPIC:P,P"));
    }
    let partitions = list
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<i32>()
                .ok()
                .filter(|p| *p >= 0)
                .ok_or_else(|| format!("'{p}' in '{s}' is not a partition number"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((topic.to_string(), Some(partitions)))
}

pub async fn run(admin: &Admin, args: &ResetArgs) -> Result<(), Failure> {
    if !args.dry_run && !args.execute {
        eprintln!(
            "WARN: No action will be performed as the --execute option is missing. Add \
             --dry-run to say so, or --execute to commit the plan."
        );
    }
    let plan = match admin
        .reset_offsets(&args.group, &args.scope(), args.target(), args.execute)
        .await
    {
        Ok(plan) => plan,
        Err(e @ Error::GroupActive { .. }) => {
            return Err(Failure::new(format!(
                "{e} Stop its consumers (see `client groups describe {} --members`) and try \
                 again.",
                args.group
            )))
        }
        Err(e) => return Err(e.into()),
    };
    for warning in &plan.warnings {
        eprintln!("{warning}");
    }
    if args.format == Output::Json {
        return json::print(&plan_json(&plan));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(plan_table(&plan).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The tool's `printOffsetsToReset`: GROUP and TOPIC as wide as their longest value (15 at
/// least), each line started with a newline, a newline at the end; nothing but that newline for
/// an empty plan.
pub fn plan_table(plan: &ResetPlan) -> String {
    let group_width = plan.group.chars().count().max(15);
    let topic_width = plan
        .offsets
        .keys()
        .map(|tp| tp.topic.chars().count())
        .fold(15, usize::max);
    let line = |group: &str, topic: &str, partition: &str, offset: &str| {
        format!("\n{group:<group_width$} {topic:<topic_width$} {partition:<10} {offset}")
    };
    let mut out = String::new();
    if !plan.offsets.is_empty() {
        out += &line("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET");
    }
    for (tp, offset) in &plan.offsets {
        out += &line(
            &plan.group,
            &tp.topic,
            &tp.partition.to_string(),
            &offset.to_string(),
        );
    }
    out.push('\n');
    out
}

fn plan_json(plan: &ResetPlan) -> serde_json::Value {
    let partitions: Vec<serde_json::Value> = plan
        .offsets
        .iter()
        .map(|(tp, offset)| json!({"topic": tp.topic, "partition": tp.partition, "new_offset": offset}))
        .collect();
    json!({
        "group": plan.group,
        "executed": plan.executed,
        "partitions": partitions,
        "warnings": plan.warnings,
    })
}

/// `delete-offsets`: the tool's table of each partition's answer, and its summary line.
pub async fn delete_offsets(
    admin: &Admin,
    group: &str,
    topics: &[(String, Option<Vec<i32>>)],
) -> Result<(), Failure> {
    let scope = ResetScope::Topics(topics.to_vec());
    let partitions = admin.reset_partitions(group, &scope).await?;
    let answers = admin.delete_group_offsets(group, &partitions).await?;
    let results: BTreeMap<TopicPartition, String> = answers
        .iter()
        .map(|(tp, result)| {
            let shown = match result {
                Ok(()) => "Successful".to_string(),
                Err(e) => format!("Error: {}", e.name()),
            };
            (tp.clone(), shown)
        })
        .collect();
    let mut out = std::io::stdout().lock();
    out.write_all(delete_table(&results).as_bytes())?;
    out.flush()?;
    let failed = answers.iter().filter(|(_, r)| r.is_err()).count();
    if failed == 0 {
        return Ok(());
    }
    let subscribed = answers.iter().any(|(_, r)| {
        r.as_ref()
            .is_err_and(|e| e.is(ResponseError::GroupSubscribedToTopic))
    });
    let hint = if subscribed {
        ": the group's members read these topics; stop them first"
    } else {
        ""
    };
    Err(Failure::new(format!(
        "{failed} of {} kept their offsets{hint}",
        count(answers.len() as u64, "partition")
    )))
}

/// The tool's `--delete-offsets` output: TOPIC PARTITION STATUS, as wide as the longest topic.
pub fn delete_table(results: &BTreeMap<TopicPartition, String>) -> String {
    let topic_width = results
        .keys()
        .map(|tp| tp.topic.chars().count())
        .fold(15, usize::max);
    let line = |topic: &str, partition: &str, status: &str| {
        format!("\n{topic:<topic_width$} {partition:<15} {status:<15}")
    };
    let mut out = line("TOPIC", "PARTITION", "STATUS");
    for (tp, status) in results {
        out += &line(&tp.topic, &tp.partition.to_string(), status);
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_with_and_without_partitions() {
        assert_eq!(topic_arg("orders"), Ok(("orders".into(), None)));
        assert_eq!(
            topic_arg("orders:0, 2"),
            Ok(("orders".into(), Some(vec![0, 2])))
        );
        assert!(topic_arg("orders:x").unwrap_err().contains("'x'"));
        assert!(topic_arg("orders:-1").is_err());
        assert!(topic_arg(":1").is_err());
    }

    #[test]
    fn the_plan_prints_as_the_tool_prints_it() {
        let plan = ResetPlan {
            group: "billing".into(),
            offsets: BTreeMap::from([
                (TopicPartition::new("orders", 0), 0),
                (TopicPartition::new("orders", 10), 1234),
            ]),
            warnings: vec![],
            executed: false,
        };
        assert_eq!(
            plan_table(&plan),
            "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\
             \nbilling         orders          0          0\
             \nbilling         orders          10         1234\n"
        );
        let empty = ResetPlan {
            offsets: BTreeMap::new(),
            ..plan.clone()
        };
        assert_eq!(plan_table(&empty), "\n");
        assert_eq!(
            plan_json(&plan)["partitions"][1],
            json!({"topic": "orders", "partition": 10, "new_offset": 1234})
        );
    }

    #[test]
    fn the_delete_table() {
        let results = BTreeMap::from([(TopicPartition::new("orders", 1), "Successful".into())]);
        assert_eq!(
            delete_table(&results),
            "\nTOPIC           PARTITION       STATUS         \
             \norders          1               Successful     \n"
        );
    }
}
