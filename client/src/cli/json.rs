//! `--format json`: one JSON document per command (per refresh with `--watch`), on one line, with
//! the fields docs/testing.md documents (its `--format json` table, in "Testing your service against
//! this broker"). Built here from the library's types, so the documents stay as documented when
//! those types grow.

use std::io::Write;

use client::admin::{GroupDescription, GroupListing, PartitionLag};
use serde_json::{json, Value};

use super::Failure;

/// How a listing verb prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    /// Kafka's tools' layout
    #[default]
    Text,
    /// One JSON document
    Json,
}

/// Writes `doc` on one line.
pub fn print(doc: &Value) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, doc).map_err(|e| Failure::new(format!("JSON output: {e}")))?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// `groups list`.
pub fn listing(g: &GroupListing) -> Value {
    json!({"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type})
}

/// One row of `groups describe` and `groups lag`; the time fields are null unless the time lag
/// was asked for. `impossible` flags a committed offset past the log end (its lag is null).
pub fn partition(p: &PartitionLag, now_ms: Option<i64>) -> Value {
    let owner = p.owner.as_ref();
    json!({
        "topic": p.topic,
        "partition": p.partition,
        "current_offset": p.current_offset,
        "log_end_offset": p.log_end_offset,
        "lag": p.lag,
        "impossible": p.impossible(),
        "consumer_id": owner.map(|o| &o.member_id),
        "host": owner.map(|o| &o.host),
        "client_id": owner.map(|o| &o.client_id),
        "oldest_unconsumed_timestamp_ms": now_ms.and(p.oldest_unconsumed),
        "time_lag_ms": now_ms.and_then(|now| p.time_lag_ms(now)),
    })
}

/// The group fields `groups describe` and `groups lag` share.
pub fn group(d: &GroupDescription) -> serde_json::Map<String, Value> {
    let c = &d.coordinator;
    let members: Vec<Value> = d
        .members
        .iter()
        .map(|m| {
            json!({
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": m.assignment.iter()
                    .map(|tp| json!({"topic": tp.topic, "partition": tp.partition}))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut doc = serde_json::Map::new();
    doc.insert("group".into(), json!(d.group_id));
    doc.insert("state".into(), json!(d.state));
    doc.insert("protocol_type".into(), json!(d.protocol_type));
    doc.insert("assignment_strategy".into(), json!(d.assignment_strategy));
    doc.insert(
        "coordinator".into(),
        json!({"id": c.id, "host": c.host, "port": c.port}),
    );
    doc.insert("members".into(), json!(members));
    doc
}
