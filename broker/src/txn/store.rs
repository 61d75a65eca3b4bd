//! Transaction state on disk: a snapshot, `DIR/@transactions`, and journals after it,
//! `DIR/@transactions.<n>`. A change is appended to the current journal and synced before it
//! takes effect (and so before it is answered), so a change costs what it holds, whatever else
//! the coordinator keeps (the whole state rewritten at every change cost seconds once it grew).
//! When the journal outgrows twice the snapshot, a background task starts the next journal and
//! writes a new snapshot that covers the ones before it, then deletes them.
//!
//! Text, one line per item, fields separated by spaces, strings in hex (a transactional id or a
//! group id may hold any character). A change is a record between `begin` and `end`:
//!
//! ```text
//! begin
//! txn <id> <producer id> <epoch> <timeout ms> <state> <started ms> <updated ms>
//! clear <all|offsets|id>
//! p <topic> <partition>
//! g <group>
//! o <group> <topic> <partition> <offset> <leader epoch> <metadata>
//! end
//! ```
//!
//! A `txn` line sets the header of its transactional id and makes it the one the lines after it
//! are about; `clear` forgets its items (all, or the offsets only), the others add one. The
//! snapshot starts with `covers <n>` (the journals it holds) and holds a record per
//! transactional id. Replay applies a record once its `end` is read (or the next `begin`, when
//! the `end` could not be read): a journal's torn tail, never answered, is dropped. A line that
//! cannot be read (not even UTF-8) is skipped, said on stderr, and the rest kept: one bad line
//! costs one item, not the broker's start.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use tracing::warn;

use super::{Change, Header, Item, Reset, TxnState, Txns, TXN_FILE};
use crate::durable::{sync_dir, write_atomically};
use crate::group::messages::OffsetCommit;
use crate::log::now_millis;

/// A journal may grow to this size before the snapshot is rewritten, however small it is.
const MIN_COMPACT_BYTES: u64 = 1 << 20;

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

/// Appends `change` as one record.
pub fn encode(change: &Change, out: &mut String) {
    let h = &change.header;
    out.push_str("begin\n");
    out.push_str(&format!(
        "txn {} {} {} {} {} {} {}\n",
        hex(&change.transactional_id),
        h.producer_id,
        h.epoch,
        h.timeout_ms,
        state_name(h.state),
        h.started_ms,
        h.updated_ms
    ));
    match change.reset {
        Reset::Nothing => {}
        Reset::Offsets => out.push_str("clear offsets\n"),
        Reset::All => out.push_str("clear all\n"),
        Reset::Forget => out.push_str("clear id\n"),
    }
    for item in &change.items {
        match item {
            Item::Partition(topic, partition) => {
                out.push_str(&format!("p {} {partition}\n", hex(topic)));
            }
            Item::Group(group) => out.push_str(&format!("g {}\n", hex(group))),
            Item::Offset(group, c) => {
                let metadata = c.metadata.as_deref().unwrap_or_default();
                out.push_str(&format!(
                    "o {} {} {} {} {} {}\n",
                    hex(group),
                    hex(&c.topic),
                    c.partition,
                    c.offset,
                    c.leader_epoch,
                    hex(metadata)
                ));
            }
        }
    }
    out.push_str("end\n");
}

/// Every transactional id as one record each, after `covers <n>`.
fn encode_snapshot(txns: &Txns, covers: u64) -> String {
    let mut ids: Vec<&String> = txns.by_id.keys().collect();
    ids.sort();
    let mut out = format!("covers {covers}\n");
    for id in ids {
        encode(&Change::whole(id, &txns.by_id[id]), &mut out);
    }
    out
}

/// One line read.
enum Line {
    Covers(u64),
    Begin,
    End,
    Header(String, Header),
    Clear(Reset),
    Item(Item),
    Blank,
}

fn parse_line(line: &str) -> Result<Line, &'static str> {
    let fields: Vec<&str> = line.split(' ').collect();
    let text = |i: usize| fields.get(i).and_then(|f| unhex(f)).ok_or("text");
    let number = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<i64>().ok())
            .ok_or("number")
    };
    let small = |i: usize| number(i).and_then(|n| i32::try_from(n).map_err(|_| "number"));
    Ok(match (fields[0], fields.len()) {
        ("", 1) => Line::Blank,
        ("begin", 1) => Line::Begin,
        ("end", 1) => Line::End,
        ("covers", 2) => Line::Covers(number(1)?.try_into().map_err(|_| "number")?),
        // Seven fields: written before transactional ids expired; idle from now on.
        ("txn", 7 | 8) => Line::Header(
            text(1)?,
            Header {
                producer_id: number(2)?,
                epoch: i16::try_from(number(3)?).map_err(|_| "epoch")?,
                timeout_ms: small(4)?,
                state: parse_state(fields[5]).ok_or("state")?,
                started_ms: number(6)?,
                updated_ms: if fields.len() == 8 {
                    number(7)?
                } else {
                    now_millis()
                },
            },
        ),
        ("clear", 2) => Line::Clear(match fields[1] {
            "all" => Reset::All,
            "offsets" => Reset::Offsets,
            "id" => Reset::Forget,
            _ => return Err("clear"),
        }),
        ("p", 3) => Line::Item(Item::Partition(text(1)?, small(2)?)),
        ("g", 2) => Line::Item(Item::Group(text(1)?)),
        ("o", 7) => Line::Item(Item::Offset(
            text(1)?,
            OffsetCommit {
                topic: text(2)?,
                partition: small(3)?,
                offset: number(4)?,
                leader_epoch: small(5)?,
                metadata: Some(text(6)?),
            },
        )),
        _ => return Err("unknown line"),
    })
}

/// Reads `file` whole; `None` when it does not exist. Bytes that are not UTF-8 become U+FFFD, so
/// their line fails to parse and is skipped alone (the whole file failed to read).
fn read(file: &Path) -> io::Result<Option<String>> {
    match std::fs::read(file) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replays `text` (the content of `file`) into `txns`: the journals it covers, for a snapshot.
/// `complete`: the file was written whole (a snapshot), so lines after the last `end` count
/// too, as in a file of the format before journals, which had neither `begin` nor `end`.
fn replay(text: &str, file: &Path, complete: bool, txns: &mut Txns) -> Option<u64> {
    let mut covers = None;
    // The record being read: its lines are applied at its `end`.
    let mut record: Vec<Change> = Vec::new();
    // A `txn` line could not be read: the items after it are of an id unknown.
    let mut orphaned = false;
    for (at, line) in text.lines().enumerate() {
        let parsed = match parse_line(line) {
            Ok(parsed) => parsed,
            Err(what) => {
                warn!(
                    file = %file.display(),
                    line = at + 1,
                    "transaction state: skipping a line that cannot be read ({what})"
                );
                orphaned |= line.starts_with("txn ");
                continue;
            }
        };
        match parsed {
            Line::Blank => {}
            Line::Covers(n) => covers = Some(n),
            Line::Begin => {
                orphaned = false;
                // A record followed by another was written whole (a failed write ends its
                // journal): its `end` was the line that could not be read.
                for change in record.drain(..) {
                    txns.apply(change);
                }
            }
            Line::End => {
                orphaned = false;
                for change in record.drain(..) {
                    txns.apply(change);
                }
            }
            Line::Header(id, header) => {
                orphaned = false;
                record.push(Change {
                    transactional_id: id,
                    header,
                    reset: Reset::Nothing,
                    items: Vec::new(),
                })
            }
            Line::Clear(_) | Line::Item(_) if orphaned || record.is_empty() => {
                warn!(
                    file = %file.display(),
                    line = at + 1,
                    "transaction state: an item of no readable txn line, skipped"
                );
            }
            Line::Clear(reset) => record.last_mut().expect("checked").reset = reset,
            Line::Item(item) => record.last_mut().expect("checked").items.push(item),
        }
    }
    if complete {
        for change in record {
            txns.apply(change);
        }
    }
    covers
}

/// The journal being written, and where the next one goes.
#[derive(Debug)]
struct Active {
    file: File,
    number: u64,
    bytes: u64,
    /// The journal is compacted once it passes this.
    compact_at: u64,
    /// A write failed: the journal may end in a partial record, so nothing more is added.
    failed: bool,
    compacting: bool,
}

#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    active: Mutex<Active>,
}

fn journal_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{TXN_FILE}.{number}"))
}

/// The journals in `dir` by number.
fn journals(dir: &Path) -> io::Result<Vec<u64>> {
    let prefix = format!("{TXN_FILE}.");
    let mut numbers = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let number = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|n| n.parse::<u64>().ok());
        numbers.extend(number);
    }
    numbers.sort_unstable();
    Ok(numbers)
}

fn create_journal(dir: &Path, number: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(journal_path(dir, number))?;
    sync_dir(dir)?;
    Ok(file)
}

impl Journal {
    /// Reads the state `dir` holds (none yet: empty), writes it as one snapshot, and starts a
    /// journal after it.
    pub fn open(dir: &Path) -> io::Result<(Self, Txns)> {
        let mut txns = Txns::default();
        let snapshot = dir.join(TXN_FILE);
        let covers = read(&snapshot)?.and_then(|text| replay(&text, &snapshot, true, &mut txns));
        let found = journals(dir)?;
        for &number in found.iter().filter(|&&n| covers.is_none_or(|c| n > c)) {
            let path = journal_path(dir, number);
            if let Some(text) = read(&path)? {
                replay(&text, &path, false, &mut txns);
            }
        }
        let last = found.last().copied().max(covers).unwrap_or(0);
        let snapshot_text = encode_snapshot(&txns, last);
        write_atomically(dir, TXN_FILE, snapshot_text.as_bytes())?;
        for number in found {
            std::fs::remove_file(journal_path(dir, number))?;
        }
        let number = last + 1;
        let active = Active {
            file: create_journal(dir, number)?,
            number,
            bytes: 0,
            compact_at: compact_at(snapshot_text.len()),
            failed: false,
            compacting: false,
        };
        let journal = Self {
            dir: dir.to_path_buf(),
            active: Mutex::new(active),
        };
        Ok((journal, txns))
    }

    /// Appends `record` and syncs it, then runs `apply` before another record can be written
    /// or a snapshot taken, so that a snapshot holds every record of the journals it covers.
    /// True when the journal is due for compaction (and this caller should start it).
    pub fn append(&self, record: &str, apply: impl FnOnce()) -> io::Result<bool> {
        let mut active = self.active.lock();
        if active.failed {
            return Err(io::Error::other(
                "an earlier transaction state write failed",
            ));
        }
        let written = active
            .file
            .write_all(record.as_bytes())
            .and_then(|()| active.file.sync_data());
        if let Err(e) = written {
            active.failed = true;
            return Err(e);
        }
        active.bytes += record.len() as u64;
        apply();
        let due = !active.compacting && active.bytes > active.compact_at;
        active.compacting |= due;
        Ok(due)
    }

    /// Starts the next journal, then writes `snapshot` (taken, by the caller's function, once
    /// no record can be written) as covering the ones before, and deletes them. Runs on a
    /// blocking thread, never while a change waits: only the switch holds the journal.
    pub fn compact(&self, snapshot: impl FnOnce() -> Txns) -> io::Result<()> {
        let (covers, taken) = {
            let mut active = self.active.lock();
            let next = active.number + 1;
            match create_journal(&self.dir, next) {
                Ok(file) => {
                    let covers = active.number;
                    active.file = file;
                    active.number = next;
                    active.bytes = 0;
                    (covers, snapshot())
                }
                Err(e) => {
                    active.compacting = false;
                    return Err(e);
                }
            }
        };
        let text = encode_snapshot(&taken, covers);
        let written = write_atomically(&self.dir, TXN_FILE, text.as_bytes()).and_then(|()| {
            for number in journals(&self.dir)?.into_iter().filter(|&n| n <= covers) {
                std::fs::remove_file(journal_path(&self.dir, number))?;
            }
            Ok(())
        });
        let mut active = self.active.lock();
        active.compacting = false;
        active.compact_at = compact_at(text.len());
        written
    }
}

fn compact_at(snapshot_bytes: usize) -> u64 {
    (2 * snapshot_bytes as u64).max(MIN_COMPACT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::TxnMeta;

    fn meta(state: TxnState) -> TxnMeta {
        TxnMeta {
            state,
            ..TxnMeta::fresh(7, 2, 60_000)
        }
    }

    #[test]
    fn a_bad_line_is_skipped_and_the_rest_kept() {
        let mut txns = Txns::default();
        let mut good = meta(TxnState::Ongoing);
        good.partitions.insert(("orders".into(), 0));
        txns.insert("pay", good.clone());
        let mut other = TxnMeta::fresh(8, 0, 1_000);
        other.groups.insert("readers".into());
        txns.insert("ship", other);
        let text = encode_snapshot(&txns, 0);
        // One item garbled, one header garbled: the item is lost, the other id's record too.
        let broken = text
            .replace("p 6f7264657273 0", "p 6f72646572 zero")
            .replace("txn 73686970 8", "txn 73686970 eight");
        let mut replayed = Txns::default();
        replay(&broken, Path::new("test"), true, &mut replayed);
        let pay = replayed.get("pay").unwrap();
        assert_eq!(
            (pay.producer_id, pay.epoch, pay.state),
            (7, 2, TxnState::Ongoing)
        );
        assert!(pay.partitions.is_empty() && pay.groups.is_empty());
        assert!(replayed.get("ship").is_none());
        let mut whole = Txns::default();
        replay(&text, Path::new("test"), true, &mut whole);
        assert_eq!(whole.get("pay"), Some(&good));
    }

    #[test]
    fn a_journal_tail_without_its_end_is_dropped() {
        let mut text = String::new();
        let mut change = Change::whole("pay", &meta(TxnState::Ongoing));
        change.items.push(Item::Partition("orders".into(), 3));
        encode(&change, &mut text);
        let mut next = Change::whole("pay", &meta(TxnState::PrepareCommit));
        next.reset = Reset::All;
        let mut torn = String::new();
        encode(&next, &mut torn);
        text.push_str(&torn[..torn.len() - 4]);
        let mut txns = Txns::default();
        replay(&text, Path::new("journal"), false, &mut txns);
        let pay = txns.get("pay").unwrap();
        assert_eq!(pay.state, TxnState::Ongoing);
        assert!(pay.partitions.contains(&("orders".to_string(), 3)));
    }

    #[test]
    fn a_record_whose_end_cannot_be_read_is_applied_at_the_next_begin() {
        let mut text = String::new();
        encode(&Change::whole("pay", &meta(TxnState::Ongoing)), &mut text);
        encode(&Change::whole("ship", &meta(TxnState::Empty)), &mut text);
        let garbled = text.replacen("end\n", "e\u{fffd}d\n", 1);
        let mut txns = Txns::default();
        replay(&garbled, Path::new("journal"), false, &mut txns);
        assert_eq!(txns.get("pay").map(|m| m.state), Some(TxnState::Ongoing));
        assert_eq!(txns.get("ship").map(|m| m.state), Some(TxnState::Empty));
    }

    #[test]
    fn a_compaction_covers_the_journals_before_it_and_a_restart_replays_the_ones_after() {
        let dir = std::env::temp_dir().join(format!("txn-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (journal, mut txns) = Journal::open(&dir).unwrap();
        let first = Change::whole("pay", &meta(TxnState::Ongoing));
        let mut record = String::new();
        encode(&first, &mut record);
        journal.append(&record, || txns.apply(first)).unwrap();
        journal.compact(|| txns.clone()).unwrap();
        assert_eq!(
            journals(&dir).unwrap(),
            vec![2],
            "journal 1 is in the snapshot"
        );
        let second = Change::to("ship", TxnMeta::fresh(9, 0, 1_000).header());
        let mut record = String::new();
        encode(&second, &mut record);
        journal.append(&record, || txns.apply(second)).unwrap();
        drop(journal);
        let (_, replayed) = Journal::open(&dir).unwrap();
        assert_eq!(replayed.get("pay"), txns.get("pay"));
        assert_eq!(replayed.get("ship").map(|m| m.producer_id), Some(9));
        assert_eq!(journals(&dir).unwrap(), vec![3]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
