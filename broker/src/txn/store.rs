//! The transaction state file, `DIR/@transactions`: every transactional id with its producer,
//! epoch, timeout and state, and an open transaction's partitions, groups and offsets. Small
//! (one entry per transactional id), so each change rewrites it whole, atomically and synced,
//! before it is answered: a kill -9 leaves the state before the change or after it.
//!
//! One line per item, fields separated by spaces, strings in hex (a transactional id or a group
//! id may hold any character):
//!
//! ```text
//! txn <id> <producer id> <epoch> <timeout ms> <state> <started ms>
//! p <topic> <partition>
//! g <group>
//! o <group> <topic> <partition> <offset> <leader epoch> <metadata>
//! ```

use std::collections::HashMap;
use std::io;
use std::path::Path;

use super::{TxnMeta, TxnState};
use crate::durable::write_atomically;
use crate::group::messages::OffsetCommit;

/// What a parse error says of the line it stopped at.
fn bad(line: usize, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("transaction state, line {line}: {what}"),
    )
}

fn hex(text: &str) -> String {
    if text.is_empty() {
        return "-".to_string();
    }
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(field: &str) -> Option<String> {
    if field == "-" {
        return Some(String::new());
    }
    if !field.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..field.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(field.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn state_name(state: TxnState) -> &'static str {
    match state {
        TxnState::Empty => "Empty",
        TxnState::Ongoing => "Ongoing",
        TxnState::PrepareCommit => "PrepareCommit",
        TxnState::PrepareAbort => "PrepareAbort",
        TxnState::CompleteCommit => "CompleteCommit",
        TxnState::CompleteAbort => "CompleteAbort",
    }
}

fn parse_state(name: &str) -> Option<TxnState> {
    Some(match name {
        "Empty" => TxnState::Empty,
        "Ongoing" => TxnState::Ongoing,
        "PrepareCommit" => TxnState::PrepareCommit,
        "PrepareAbort" => TxnState::PrepareAbort,
        "CompleteCommit" => TxnState::CompleteCommit,
        "CompleteAbort" => TxnState::CompleteAbort,
        _ => return None,
    })
}

pub fn encode(txns: &HashMap<String, TxnMeta>) -> String {
    let mut ids: Vec<&String> = txns.keys().collect();
    ids.sort();
    let mut out = String::new();
    for id in ids {
        let m = &txns[id];
        out += &format!(
            "txn {} {} {} {} {} {}\n",
            hex(id),
            m.producer_id,
            m.epoch,
            m.timeout_ms,
            state_name(m.state),
            m.started_ms
        );
        for (topic, partition) in &m.partitions {
            out += &format!("p {} {partition}\n", hex(topic));
        }
        for group in &m.groups {
            out += &format!("g {}\n", hex(group));
        }
        for (group, offsets) in &m.offsets {
            for c in offsets.values() {
                let metadata = c.metadata.as_deref().unwrap_or_default();
                out += &format!(
                    "o {} {} {} {} {} {}\n",
                    hex(group),
                    hex(&c.topic),
                    c.partition,
                    c.offset,
                    c.leader_epoch,
                    hex(metadata)
                );
            }
        }
    }
    out
}

pub fn parse(text: &str) -> io::Result<HashMap<String, TxnMeta>> {
    let mut txns: HashMap<String, TxnMeta> = HashMap::new();
    let mut current: Option<String> = None;
    for (at, line) in text.lines().enumerate() {
        let n = at + 1;
        let fields: Vec<&str> = line.split(' ').collect();
        let text = |i: usize| {
            fields
                .get(i)
                .and_then(|f| unhex(f))
                .ok_or_else(|| bad(n, "text"))
        };
        let number = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<i64>().ok())
                .ok_or_else(|| bad(n, "number"))
        };
        match fields.first().copied() {
            Some("txn") if fields.len() == 7 => {
                let id = text(1)?;
                let state = parse_state(fields[5]).ok_or_else(|| bad(n, "state"))?;
                let meta = TxnMeta {
                    producer_id: number(2)?,
                    epoch: i16::try_from(number(3)?).map_err(|_| bad(n, "epoch"))?,
                    timeout_ms: i32::try_from(number(4)?).map_err(|_| bad(n, "timeout"))?,
                    state,
                    started_ms: number(6)?,
                    ..TxnMeta::fresh(0, 0, 0)
                };
                txns.insert(id.clone(), meta);
                current = Some(id);
            }
            Some("p") if fields.len() == 3 => {
                let item = (
                    text(1)?,
                    i32::try_from(number(2)?).map_err(|_| bad(n, "partition"))?,
                );
                entry(&mut txns, &current, n)?.partitions.insert(item);
            }
            Some("g") if fields.len() == 2 => {
                let group = text(1)?;
                entry(&mut txns, &current, n)?.groups.insert(group);
            }
            Some("o") if fields.len() == 7 => {
                let group = text(1)?;
                let commit = OffsetCommit {
                    topic: text(2)?,
                    partition: i32::try_from(number(3)?).map_err(|_| bad(n, "partition"))?,
                    offset: number(4)?,
                    leader_epoch: i32::try_from(number(5)?).map_err(|_| bad(n, "epoch"))?,
                    metadata: Some(text(6)?),
                };
                entry(&mut txns, &current, n)?
                    .offsets
                    .entry(group)
                    .or_default()
                    .insert((commit.topic.clone(), commit.partition), commit);
            }
            Some("") | None => {}
            _ => return Err(bad(n, "unknown line")),
        }
    }
    Ok(txns)
}

/// The transactional id the item lines belong to: the last `txn` line's.
fn entry<'a>(
    txns: &'a mut HashMap<String, TxnMeta>,
    current: &Option<String>,
    line: usize,
) -> io::Result<&'a mut TxnMeta> {
    current
        .as_ref()
        .and_then(|id| txns.get_mut(id))
        .ok_or_else(|| bad(line, "item before any txn line"))
}

/// The state in `path`; none when there is no file yet.
pub fn load(path: &Path) -> io::Result<HashMap<String, TxnMeta>> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(HashMap::new()),
        Err(e) => Err(e),
    }
}

pub fn save(path: &Path, txns: &HashMap<String, TxnMeta>) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(super::TXN_FILE);
    write_atomically(dir, name, encode(txns).as_bytes())
}
