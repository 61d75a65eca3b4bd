//! `client reassign execute | move | verify | list`, as kafka-reassign-partitions.sh --execute,
//! --verify and --list: a plan in that tool's JSON
//! (`{"version":1,"partitions":[{"topic":"orders","partition":7,"replicas":[2]}]}`), from a file
//! or stdin; or, with `move`, one partition named on the command line. The first replica of each
//! partition becomes its leader.

use std::io::Read;

use clap::Subcommand;
use client::admin::{OngoingReassignment, Reassignment};
use client::Admin;
use serde_json::{json, Value};

use super::json::{self, Output};
use super::Failure;

#[derive(Debug, Subcommand)]
pub enum ReassignVerb {
    /// Start the reassignments of a plan (kafka-reassign-partitions.sh's JSON; - reads stdin)
    #[command(after_help = "Example:
  echo '{\"version\":1,\"partitions\":[{\"topic\":\"orders\",\"partition\":7,\"replicas\":[2]}]}' \\
    | client reassign execute -")]
    Execute { plan: String },
    /// Reassign one partition: its new replicas, the first of which becomes its leader
    #[command(after_help = "Example:\n  client reassign move orders 7 --to 2")]
    Move {
        topic: String,
        partition: i32,
        /// Node ids, comma-separated
        #[arg(
            long,
            value_name = "NODE[,NODE]",
            value_delimiter = ',',
            required = true
        )]
        to: Vec<i32>,
    },
    /// Whether each reassignment of a plan is complete (exit code 1 if one is not)
    #[command(after_help = "Example:\n  client reassign verify plan.json")]
    Verify { plan: String },
    /// Reassignments in progress
    #[command(
        after_help = "Examples:\n  client reassign list\n  client reassign list --format json"
    )]
    List {
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
}

pub async fn run(admin: &Admin, verb: ReassignVerb) -> Result<(), Failure> {
    match verb {
        ReassignVerb::Execute { plan } => execute(admin, &read_plan(&plan)?).await,
        ReassignVerb::Move {
            topic,
            partition,
            to,
        } => {
            let one = Reassignment {
                topic,
                partition,
                replicas: to,
            };
            execute(admin, &[one]).await
        }
        ReassignVerb::Verify { plan } => verify(admin, &read_plan(&plan)?).await,
        ReassignVerb::List { format } => list(admin, format).await,
    }
}

async fn execute(admin: &Admin, plan: &[Reassignment]) -> Result<(), Failure> {
    let results = admin.alter_partition_reassignments(plan).await?;
    let (started, failed): (Vec<_>, Vec<_>) = results.iter().partition(|(_, r)| r.is_ok());
    if !started.is_empty() {
        let names: Vec<String> = started.iter().map(|(m, _)| name(m)).collect();
        println!(
            "Successfully started partition reassignments for {}",
            names.join(",")
        );
    }
    match failed.len() {
        0 => Ok(()),
        n => {
            let lines: Vec<String> = failed
                .iter()
                .filter_map(|(m, r)| Some(format!("{}: {}", name(m), r.as_ref().err()?)))
                .collect();
            Err(Failure::new(format!(
                "{n} of {} reassignments refused:\n{}",
                results.len(),
                lines.join("\n")
            )))
        }
    }
}

/// As kafka-reassign-partitions.sh --verify: in progress, complete (the replicas are the plan's),
/// or neither.
async fn verify(admin: &Admin, plan: &[Reassignment]) -> Result<(), Failure> {
    let ongoing = admin.list_partition_reassignments().await?;
    let mut incomplete = 0;
    for wanted in plan {
        let in_progress = ongoing
            .iter()
            .any(|o| o.topic == wanted.topic && o.partition == wanted.partition);
        let topic = admin.describe_topic(&wanted.topic).await?;
        let now = topic
            .partition(wanted.partition)
            .map(|p| p.replicas.clone());
        let line = match now {
            _ if in_progress => "is still in progress.".to_string(),
            Some(replicas) if replicas == wanted.replicas => "is completed.".to_string(),
            Some(replicas) => format!(
                "is not active, but its replica set is {replicas:?} rather than {:?}.",
                wanted.replicas
            ),
            None => "names a partition the topic does not have.".to_string(),
        };
        if line != "is completed." {
            incomplete += 1;
        }
        println!("Reassignment of partition {} {line}", name(wanted));
    }
    match incomplete {
        0 => Ok(()),
        n => Err(Failure::check_failed(format!(
            "{n} of {} reassignments not complete",
            plan.len()
        ))),
    }
}

async fn list(admin: &Admin, format: Output) -> Result<(), Failure> {
    let ongoing = admin.list_partition_reassignments().await?;
    if format == Output::Json {
        let rows: Vec<Value> = ongoing.iter().map(ongoing_json).collect();
        return json::print(&json!({ "reassignments": rows }));
    }
    if ongoing.is_empty() {
        println!("No partition reassignments found.");
    }
    for o in &ongoing {
        println!(
            "{}-{}: replicas: {:?}. adding: {:?}. removing: {:?}.",
            o.topic, o.partition, o.replicas, o.adding, o.removing
        );
    }
    Ok(())
}

fn ongoing_json(o: &OngoingReassignment) -> Value {
    json!({"topic": o.topic, "partition": o.partition, "replicas": o.replicas,
           "adding": o.adding, "removing": o.removing})
}

fn name(m: &Reassignment) -> String {
    format!("{}-{}", m.topic, m.partition)
}

/// The plan at `path` (`-`: stdin).
fn read_plan(path: &str) -> Result<Vec<Reassignment>, Failure> {
    let text = if path == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        text
    } else {
        std::fs::read_to_string(path).map_err(|e| Failure::usage(format!("{path}: {e}")))?
    };
    parse_plan(&text).map_err(|e| Failure::usage(format!("{path}: {e}")))
}

/// kafka-reassign-partitions.sh's plan: `partitions`, each with `topic`, `partition` and
/// `replicas` (other fields, such as `log_dirs`, are ignored).
fn parse_plan(text: &str) -> Result<Vec<Reassignment>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let partitions = doc
        .get("partitions")
        .and_then(Value::as_array)
        .ok_or("no \"partitions\" list")?;
    partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let bad = |field: &str| format!("partitions[{i}] has no valid \"{field}\"");
            let topic = p
                .get("topic")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("topic"))?;
            let partition = p
                .get("partition")
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| bad("partition"))?;
            let replicas = p
                .get("replicas")
                .and_then(Value::as_array)
                .and_then(|ids| {
                    ids.iter()
                        .map(|id| id.as_i64().and_then(|n| i32::try_from(n).ok()))
                        .collect::<Option<Vec<i32>>>()
                })
                .filter(|ids| !ids.is_empty())
                .ok_or_else(|| bad("replicas"))?;
            Ok(Reassignment {
                topic: topic.to_string(),
                partition,
                replicas,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_read_as_kafka_reassign_partitions_writes_them() {
        let plan = r#"{"version":1,"partitions":[
            {"topic":"orders","partition":7,"replicas":[2],"log_dirs":["any"]},
            {"topic":"orders","partition":3,"replicas":[3,1]}]}"#;
        assert_eq!(
            parse_plan(plan).unwrap(),
            vec![
                Reassignment {
                    topic: "orders".into(),
                    partition: 7,
                    replicas: vec![2]
                },
                Reassignment {
                    topic: "orders".into(),
                    partition: 3,
                    replicas: vec![3, 1]
                },
            ]
        );
        assert_eq!(
            parse_plan(r#"{"partitions":[{"topic":"orders","partition":7,"replicas":[]}]}"#),
            Err("partitions[0] has no valid \"replicas\"".to_string())
        );
        assert_eq!(parse_plan("{}"), Err("no \"partitions\" list".to_string()));
        assert!(parse_plan("nope").unwrap_err().starts_with("not JSON"));
    }
}
