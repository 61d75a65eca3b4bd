//! `client groups describe`, printed exactly as kafka-consumer-groups.sh --describe prints it
//! (Kafka 4.x `ConsumerGroupCommand`): the same columns, widths and padding, each line started
//! with a newline as the tool's printf formats start with "\n", and the same notes on stderr.
//! Everything here but [`run`] builds text; nothing else prints, so the tests compare exact
//! output. `--time-lag` adds a TIME-LAG column after LAG (the tool has none); `--format json`
//! prints one document for all the groups.

use std::io::Write;

use client::admin::{GroupDescription, GroupLag, PartitionLag};
use client::Admin;
use serde_json::{json, Value};

use super::super::json::{self, Output};
use super::super::report::explain;
use super::super::Failure;
use super::when::now_ms;

/// What `groups describe` shows.
#[derive(Debug, Clone, Copy)]
pub struct View {
    pub members: bool,
    pub state: bool,
    pub time_lag: bool,
    pub format: Output,
}

/// Describes `groups` (every consumer group with `all`), in name order as the tool does (a
/// TreeMap).
pub async fn run(admin: &Admin, groups: Vec<String>, all: bool, view: View) -> Result<(), Failure> {
    let mut groups = if all {
        super::consumer_groups(admin, &[])
            .await?
            .into_iter()
            .map(|g| g.group_id)
            .collect()
    } else {
        groups
    };
    groups.sort();
    groups.dedup();
    if view.format == Output::Json {
        let mut docs = Vec::with_capacity(groups.len());
        for group in &groups {
            docs.push(group_json(admin, group, view.time_lag).await?);
        }
        return json::print(&json!({ "groups": docs }));
    }
    for group in &groups {
        let printed = if view.members {
            members(&admin.describe_group(group).await?)
        } else if view.state {
            state(&admin.describe_group(group).await?)
        } else if view.time_lag {
            offsets(&admin.group_time_lag(group).await?, Some(now_ms()))
        } else {
            offsets(&admin.group_lag(group).await?, None)
        }
        .map_err(Failure::new)?;
        // stderr first: the tool prints its note before the table.
        eprint!("{}", printed.stderr);
        let mut out = std::io::stdout().lock();
        out.write_all(printed.stdout.as_bytes())?;
        out.flush()?;
    }
    Ok(())
}

/// One group of `describe --format json`: its description, and its partitions as rows.
async fn group_json(admin: &Admin, group: &str, time_lag: bool) -> Result<Value, Failure> {
    let lag = if time_lag {
        admin.group_time_lag(group).await?
    } else {
        admin.group_lag(group).await?
    };
    if lag.description.state == "Dead" {
        return Err(client::Error::UnknownGroup {
            group: group.to_string(),
        }
        .into());
    }
    Ok(lag_json(&lag, time_lag.then(now_ms)))
}

/// A group's lag as JSON: the group's fields, `total_lag` and `partitions`.
pub fn lag_json(lag: &GroupLag, now_ms: Option<i64>) -> Value {
    let mut doc = json::group(&lag.description);
    let rows: Vec<Value> = lag
        .partitions
        .iter()
        .map(|p| json::partition(p, now_ms))
        .collect();
    doc.insert("total_lag".into(), json!(lag.total()));
    doc.insert("partitions".into(), json!(rows));
    Value::Object(doc)
}

/// A time lag for a column: milliseconds under a second, then seconds, minutes, hours.
pub fn age(ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return MISSING.to_string();
    };
    match ms {
        ..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1_000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms % 60_000 / 1_000),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// What one view prints, per stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}

/// The tool's `MISSING_COLUMN_VALUE`.
const MISSING: &str = "-";

/// Java's `%-Ns`: left-aligned, padded with spaces to at least `width` characters.
fn pad(text: &str, width: usize) -> String {
    format!("{text:<width$}")
}

/// A LAG cell: the lag, `-` where it is unknown, IMPOSSIBLE where the commit is past the log end.
pub fn lag_cell(p: &PartitionLag) -> String {
    if p.impossible() {
        return "IMPOSSIBLE".to_string();
    }
    opt(p.lag)
}

/// Why a row's LAG is IMPOSSIBLE, in one line.
pub fn impossible_note(p: &PartitionLag) -> String {
    format!(
        "{}-{}: committed offset {} is past the log end {}: no consumer can have read that far \
         (the log was truncated under the group, or the broker reports a wrong end)",
        p.topic,
        p.partition,
        opt(p.current_offset),
        opt(p.log_end_offset)
    )
}

fn opt(value: Option<i64>) -> String {
    value.map_or_else(|| MISSING.to_string(), |v| v.to_string())
}

/// The tool's `shouldPrintMemberState`: the note for the group's state, and whether a table
/// follows (`rows` is the number of rows it would have). `Err` for a state the tool does not
/// know, which it refuses the same way, and for a group that does not exist: the tool prints
/// that on stdout and exits 0, which a script cannot tell from a group with nothing to show.
fn state_note(group: &str, state: &str, rows: usize, out: &mut Printed) -> Result<bool, String> {
    match state {
        "Dead" => {
            return Err(explain(&client::Error::UnknownGroup {
                group: group.to_string(),
            }))
        }
        "Empty" => out.stderr += &format!("\nConsumer group '{group}' has no active members.\n"),
        "PreparingRebalance" | "CompletingRebalance" | "Assigning" | "Reconciling" => {
            out.stderr += &format!("\nWarning: Consumer group '{group}' is rebalancing.\n")
        }
        "Stable" => {}
        other => {
            return Err(format!(
                "Expected a valid consumer group state, but found '{other}'."
            ))
        }
    }
    Ok(rows > 0)
}

/// The default view: one row per partition with offsets, lag and owner; with `time_lag_at`
/// (now, epoch ms), a TIME-LAG column after LAG.
pub fn offsets(lag: &GroupLag, time_lag_at: Option<i64>) -> Result<Printed, String> {
    let group = lag.description.group_id.as_str();
    let mut out = Printed::default();
    if !state_note(
        group,
        &lag.description.state,
        lag.partitions.len(),
        &mut out,
    )? {
        return Ok(out);
    }
    let owner = |f: fn(&client::admin::Owner) -> &str, r: &client::admin::PartitionLag| {
        r.owner.as_ref().map_or(MISSING, f).to_string()
    };
    let rows: Vec<Vec<String>> = lag
        .partitions
        .iter()
        .map(|r| {
            let mut row = vec![
                group.to_string(),
                r.topic.clone(),
                r.partition.to_string(),
                opt(r.current_offset),
                opt(r.log_end_offset),
                lag_cell(r),
            ];
            if let Some(now) = time_lag_at {
                row.push(age(r.time_lag_ms(now)));
            }
            row.extend([
                owner(|o| &o.member_id, r),
                owner(|o| &o.host, r),
                owner(|o| &o.client_id, r),
            ]);
            row
        })
        .collect();
    let mut header = vec![
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
    ];
    if time_lag_at.is_some() {
        header.push("TIME-LAG");
    }
    header.extend(["CONSUMER-ID", "HOST", "CLIENT-ID"]);
    let columns = header.len();
    let widest = |col: usize| {
        rows.iter()
            .map(|r| r[col].chars().count())
            .fold(15, usize::max)
    };
    // GROUP and TOPIC as wide as their values, PARTITION 10, the figures 15, then CONSUMER-ID
    // and HOST as wide as theirs; CLIENT-ID last, unpadded.
    let widths: Vec<usize> = (0..columns - 1)
        .map(|col| match col {
            0 | 1 => widest(col),
            2 => 10,
            c if c >= columns - 3 => widest(c),
            _ => 15,
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut text = String::from("\n");
        for (cell, width) in cells.iter().zip(&widths) {
            text += &pad(cell, *width);
            text.push(' ');
        }
        text + cells[columns - 1]
    };
    out.stdout += &line(&header);
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        out.stdout += &line(&cells);
    }
    out.stdout.push('\n');
    for p in lag.partitions.iter().filter(|p| p.impossible()) {
        out.stderr += &format!("\nWarning: {}\n", impossible_note(p));
    }
    Ok(out)
}

/// `--members`: one row per member. As in the tool, the header is printed even when the state
/// note says there is nothing to show, and GROUP-INSTANCE-ID appears only when a member is
/// static.
pub fn members(d: &GroupDescription) -> Result<Printed, String> {
    let group = d.group_id.as_str();
    let mut out = Printed::default();
    let rows: Vec<[String; 6]> = d
        .members
        .iter()
        .map(|m| {
            [
                group.to_string(),
                m.member_id.clone(),
                m.group_instance_id.clone().unwrap_or_default(),
                m.client_host.clone(),
                m.client_id.clone(),
                m.assignment.len().to_string(),
            ]
        })
        .collect();
    let show = state_note(group, &d.state, rows.len(), &mut out)?;
    let widest = |col: usize, min: usize| {
        if !show {
            return min;
        }
        rows.iter()
            .map(|r| r[col].chars().count())
            .fold(min, usize::max)
    };
    let widths = [
        widest(0, 15),
        widest(1, 15),
        widest(2, 17),
        widest(3, 15),
        widest(4, 15),
        15,
    ];
    let with_instance = show && rows.iter().any(|r| !r[2].is_empty());
    let line = |cells: [&str; 6]| {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i == 2 && !with_instance {
                continue;
            }
            text += &pad(cell, width);
            text.push(' ');
        }
        text
    };
    out.stdout += "\n";
    out.stdout += &line([
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
    ]);
    out.stdout.push('\n');
    for r in &rows {
        out.stdout += &line(std::array::from_fn(|i| r[i].as_str()));
        out.stdout.push('\n');
    }
    Ok(out)
}

/// `--state`: the group's coordinator, assignor, state and size.
pub fn state(d: &GroupDescription) -> Result<Printed, String> {
    let group = d.group_id.as_str();
    let mut out = Printed::default();
    if !state_note(group, &d.state, 1, &mut out)? {
        return Ok(out);
    }
    let c = &d.coordinator;
    let coordinator = format!("{}:{}  ({})", c.host, c.port, c.id);
    let strategy = if d.assignment_strategy.is_empty() {
        MISSING
    } else {
        d.assignment_strategy.as_str()
    };
    let (gw, cw) = (group.len().max(15), coordinator.chars().count().max(25));
    let line = |cells: [&str; 5]| {
        format!(
            "\n{} {} {} {} {}",
            pad(cells[0], gw),
            pad(cells[1], cw),
            pad(cells[2], 20),
            pad(cells[3], 20),
            cells[4]
        )
    };
    out.stdout += &line([
        "GROUP",
        "COORDINATOR (ID)",
        "ASSIGNMENT-STRATEGY",
        "STATE",
        "#MEMBERS",
    ]);
    out.stdout += &line([
        group,
        &coordinator,
        strategy,
        &d.state,
        &d.members.len().to_string(),
    ]);
    out.stdout.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::admin::{MemberDescription, Owner, PartitionLag};
    use client::{BrokerInfo, TopicPartition};

    const ID_A: &str = "rdkafka-3f2a9c1e-7b4d-4e8a-9c61-2d5f0a7b8e13";
    const ID_B: &str = "rdkafka-0b8e4d2a-51c7-4f0e-8d3b-6a9e2c1f4d57";

    fn description(state: &str, members: Vec<MemberDescription>) -> GroupDescription {
        GroupDescription {
            group_id: "demo".into(),
            state: state.into(),
            protocol_type: "consumer".into(),
            assignment_strategy: "range".into(),
            coordinator: BrokerInfo {
                id: 1,
                host: "127.0.0.1".into(),
                port: 9092,
                rack: None,
            },
            members,
        }
    }

    fn member(id: &str, partitions: &[i32]) -> MemberDescription {
        MemberDescription {
            member_id: id.into(),
            group_instance_id: None,
            client_id: "rdkafka".into(),
            client_host: "/127.0.0.1".into(),
            assignment: partitions
                .iter()
                .map(|&p| TopicPartition::new("orders", p))
                .collect(),
            subscription: vec!["orders".into()],
        }
    }

    fn row(p: i32, committed: Option<i64>, end: i64, owner: Option<&str>) -> PartitionLag {
        PartitionLag {
            topic: "orders".into(),
            partition: p,
            current_offset: committed,
            log_end_offset: Some(end),
            lag: committed.map(|c| end - c),
            owner: owner.map(|id| Owner {
                member_id: id.into(),
                host: "/127.0.0.1".into(),
                client_id: "rdkafka".into(),
            }),
            oldest_unconsumed: None,
        }
    }

    /// The sample of the reference (two kcat consumers, range), byte for byte.
    #[test]
    fn the_offsets_view_matches_kafkas_tool() {
        let lag = GroupLag {
            description: description("Stable", vec![member(ID_A, &[0, 1]), member(ID_B, &[2])]),
            partitions: vec![
                row(0, Some(40), 42, Some(ID_A)),
                row(1, None, 17, Some(ID_A)),
                row(2, Some(33), 33, Some(ID_B)),
            ],
        };
        let out = offsets(&lag, None).unwrap();
        let expected = "
GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID                                  HOST            CLIENT-ID
demo            orders          0          40              42              2               rdkafka-3f2a9c1e-7b4d-4e8a-9c61-2d5f0a7b8e13 /127.0.0.1      rdkafka
demo            orders          1          -               17              -               rdkafka-3f2a9c1e-7b4d-4e8a-9c61-2d5f0a7b8e13 /127.0.0.1      rdkafka
demo            orders          2          33              33              0               rdkafka-0b8e4d2a-51c7-4f0e-8d3b-6a9e2c1f4d57 /127.0.0.1      rdkafka
";
        assert_eq!(out.stdout, expected);
        assert_eq!(out.stderr, "");
    }

    #[test]
    fn time_lag_gets_a_column_after_lag() {
        let mut late = row(0, Some(40), 42, Some(ID_A));
        late.oldest_unconsumed = Some(1_000);
        let lag = GroupLag {
            description: description("Stable", vec![member(ID_A, &[0, 1])]),
            partitions: vec![late, row(1, Some(17), 17, Some(ID_A))],
        };
        let out = offsets(&lag, Some(91_500)).unwrap();
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines[1],
            "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             TIME-LAG        CONSUMER-ID                                  HOST            CLIENT-ID"
        );
        assert_eq!(
            lines[2],
            format!("demo            orders          0          40              42              2               1m30s           {ID_A} /127.0.0.1      rdkafka")
        );
        assert!(lines[3].contains(" 0               0ms             rdkafka-"));
        let doc = lag_json(&lag, Some(91_500));
        assert_eq!(doc["partitions"][0]["time_lag_ms"], 90_500);
        assert_eq!(
            doc["partitions"][0]["oldest_unconsumed_timestamp_ms"],
            1_000
        );
        assert_eq!(doc["total_lag"], 2);
        assert_eq!(
            lag_json(&lag, None)["partitions"][0]["time_lag_ms"],
            Value::Null
        );
    }

    #[test]
    fn ages_read_as_a_person_would_say_them() {
        let shown: Vec<String> = [
            None,
            Some(0),
            Some(999),
            Some(1_000),
            Some(59_949),
            Some(61_000),
            Some(7_380_000),
        ]
        .into_iter()
        .map(age)
        .collect();
        assert_eq!(
            shown,
            ["-", "0ms", "999ms", "1.0s", "59.9s", "1m01s", "2h03m"]
        );
    }

    #[test]
    fn an_empty_group_notes_it_on_stderr_and_lists_committed_partitions() {
        let lag = GroupLag {
            description: description("Empty", vec![]),
            partitions: vec![row(0, Some(40), 42, None)],
        };
        let out = offsets(&lag, None).unwrap();
        assert_eq!(
            out.stderr,
            "\nConsumer group 'demo' has no active members.\n"
        );
        assert_eq!(
            out.stdout,
            "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\
             \ndemo            orders          0          40              42              2               -               -               -\n"
        );
        let nothing = GroupLag {
            description: description("Empty", vec![]),
            partitions: vec![],
        };
        assert_eq!(offsets(&nothing, None).unwrap().stdout, "");
    }

    #[test]
    fn dead_and_rebalancing_groups_get_the_tools_notes() {
        let dead = GroupLag {
            description: description("Dead", vec![]),
            partitions: vec![],
        };
        assert_eq!(
            offsets(&dead, None).unwrap_err(),
            "consumer group 'demo' does not exist: see `client groups list`"
        );
        assert!(
            members(&dead.description).is_err(),
            "no header before the error"
        );
        let busy = GroupLag {
            description: description("PreparingRebalance", vec![]),
            partitions: vec![row(1, Some(1), 1, None)],
        };
        let out = offsets(&busy, None).unwrap();
        assert_eq!(
            out.stderr,
            "\nWarning: Consumer group 'demo' is rebalancing.\n"
        );
        assert!(out.stdout.starts_with("\nGROUP "));
        assert!(offsets(
            &GroupLag {
                description: description("Sleeping", vec![]),
                partitions: vec![],
            },
            None
        )
        .is_err());
    }

    #[test]
    fn the_members_view() {
        let mut d = description("Stable", vec![member(ID_A, &[0, 1]), member(ID_B, &[2])]);
        let out = members(&d).unwrap();
        let expected = "
GROUP           CONSUMER-ID                                  HOST            CLIENT-ID       #PARTITIONS     \n\
demo            rdkafka-3f2a9c1e-7b4d-4e8a-9c61-2d5f0a7b8e13 /127.0.0.1      rdkafka         2               \n\
demo            rdkafka-0b8e4d2a-51c7-4f0e-8d3b-6a9e2c1f4d57 /127.0.0.1      rdkafka         1               \n";
        assert_eq!(out.stdout, expected);
        d.members[1].group_instance_id = Some("b-1".into());
        let out = members(&d).unwrap();
        assert!(out
            .stdout
            .starts_with("\nGROUP           CONSUMER-ID                                  GROUP-INSTANCE-ID HOST "));
        assert!(out.stdout.contains(" b-1               /127.0.0.1 "));
    }

    #[test]
    fn the_state_view() {
        let d = description("Stable", vec![member(ID_A, &[0, 1]), member(ID_B, &[2])]);
        let out = state(&d).unwrap();
        assert_eq!(
            out.stdout,
            "\nGROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS\
             \ndemo            127.0.0.1:9092  (1)       range                Stable               2\n"
        );
    }
}
