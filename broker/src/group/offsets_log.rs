//! Committed offsets on disk (`--data-dir`), so a restarted broker still knows where each group
//! stopped. Kafka keeps them in the compacted topic `__consumer_offsets`; here one append-only
//! file plays that part, rewritten compactly at every start.
//!
//! Each entry is a `u32` length, then a kind byte and its fields (strings as a `u32` length and
//! UTF-8 bytes). Replay checks every length against what is left before reading it, and stops
//! at the first entry that does not parse: a torn tail left by a kill -9 was never acknowledged,
//! because a commit is answered only after its entry is synced.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use bytes::{Buf, BufMut};
use parking_lot::Mutex;
use tracing::warn;

use super::offsets::CommittedOffset;

const COMMIT: u8 = 1;
const DELETE_GROUP: u8 = 2;
const DELETE_OFFSET: u8 = 3;

/// One change to the committed offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetChange {
    Commit {
        group: String,
        topic: String,
        partition: i32,
        committed: CommittedOffset,
    },
    DeleteGroup {
        group: String,
    },
    /// OffsetDelete: one partition's offset forgotten (Kafka writes a tombstone for it).
    DeleteOffset {
        group: String,
        topic: String,
        partition: i32,
    },
}

/// Every group's committed offsets, as replayed: group, then (topic, partition).
pub type ReplayedOffsets = BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>;

#[derive(Debug)]
pub struct OffsetsLog {
    file: Mutex<File>,
}

impl OffsetsLog {
    /// Replays the file at `path` (if any), then rewrites it holding only the current offsets
    /// of topics for which `topic_exists`: a topic deleted by a broker that stopped before its
    /// offsets' removal was written takes them with it here.
    pub fn open(
        path: &Path,
        topic_exists: impl Fn(&str) -> bool,
    ) -> io::Result<(Self, ReplayedOffsets)> {
        let mut content = Vec::new();
        match File::open(path) {
            Ok(mut file) => {
                file.read_to_end(&mut content)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let (changes, parsed) = parse(&content);
        if parsed < content.len() {
            warn!(
                path = %path.display(),
                dropped = content.len() - parsed,
                "cutting a torn or corrupt tail from the committed offsets"
            );
        }
        let mut offsets = ReplayedOffsets::new();
        for change in changes {
            match change {
                OffsetChange::Commit {
                    group,
                    topic,
                    partition,
                    committed,
                } => {
                    offsets
                        .entry(group)
                        .or_default()
                        .insert((topic, partition), committed);
                }
                OffsetChange::DeleteGroup { group } => {
                    offsets.remove(&group);
                }
                OffsetChange::DeleteOffset {
                    group,
                    topic,
                    partition,
                } => {
                    if let Some(partitions) = offsets.get_mut(&group) {
                        partitions.remove(&(topic, partition));
                        if partitions.is_empty() {
                            offsets.remove(&group);
                        }
                    }
                }
            }
        }
        for partitions in offsets.values_mut() {
            partitions.retain(|(topic, _), _| topic_exists(topic));
        }
        offsets.retain(|_, partitions| !partitions.is_empty());
        let file = compact(path, &offsets)?;
        Ok((
            Self {
                file: Mutex::new(file),
            },
            offsets,
        ))
    }

    /// Appends `changes` and returns once they are on disk.
    pub fn append(&self, changes: &[OffsetChange]) -> io::Result<()> {
        let mut buf = Vec::new();
        for change in changes {
            encode(change, &mut buf);
        }
        let mut file = self.file.lock();
        file.write_all(&buf)?;
        file.sync_data()
    }
}

/// Writes the current offsets to a new file and moves it over the old one.
fn compact(path: &Path, offsets: &ReplayedOffsets) -> io::Result<File> {
    let mut buf = Vec::new();
    for (group, partitions) in offsets {
        for ((topic, partition), committed) in partitions {
            encode(
                &OffsetChange::Commit {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    committed: committed.clone(),
                },
                &mut buf,
            );
        }
    }
    let fresh: PathBuf = path.with_extension("compacting");
    {
        let mut file = File::create(&fresh)?;
        file.write_all(&buf)?;
        file.sync_all()?;
    }
    std::fs::rename(&fresh, path)?;
    OpenOptions::new().append(true).open(path)
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.put_u32(s.len() as u32);
    buf.put_slice(s.as_bytes());
}

fn encode(change: &OffsetChange, buf: &mut Vec<u8>) {
    let mut body = Vec::new();
    match change {
        OffsetChange::Commit {
            group,
            topic,
            partition,
            committed,
        } => {
            body.put_u8(COMMIT);
            put_str(&mut body, group);
            put_str(&mut body, topic);
            body.put_i32(*partition);
            body.put_i64(committed.offset);
            body.put_i32(committed.leader_epoch);
            put_str(&mut body, &committed.metadata);
        }
        OffsetChange::DeleteGroup { group } => {
            body.put_u8(DELETE_GROUP);
            put_str(&mut body, group);
        }
        OffsetChange::DeleteOffset {
            group,
            topic,
            partition,
        } => {
            body.put_u8(DELETE_OFFSET);
            put_str(&mut body, group);
            put_str(&mut body, topic);
            body.put_i32(*partition);
        }
    }
    buf.put_u32(body.len() as u32);
    buf.put_slice(&body);
}

/// The entries that parse, and how many bytes they took.
fn parse(content: &[u8]) -> (Vec<OffsetChange>, usize) {
    let mut changes = Vec::new();
    let mut rest = content;
    while rest.len() >= 4 {
        let len = (&rest[..4]).get_u32() as usize;
        let Some(body) = rest.get(4..4 + len) else {
            break;
        };
        let Some(change) = decode(body) else {
            break;
        };
        changes.push(change);
        rest = &rest[4 + len..];
    }
    (changes, content.len() - rest.len())
}

fn get_str(buf: &mut &[u8]) -> Option<String> {
    if buf.len() < 4 {
        return None;
    }
    let len = buf.get_u32() as usize;
    let bytes = buf.get(..len)?;
    let s = String::from_utf8(bytes.to_vec()).ok()?;
    buf.advance(len);
    Some(s)
}

fn decode(mut body: &[u8]) -> Option<OffsetChange> {
    let buf = &mut body;
    if buf.is_empty() {
        return None;
    }
    let change = match buf.get_u8() {
        COMMIT => {
            let group = get_str(buf)?;
            let topic = get_str(buf)?;
            if buf.len() < 16 {
                return None;
            }
            let partition = buf.get_i32();
            let offset = buf.get_i64();
            let leader_epoch = buf.get_i32();
            let metadata = get_str(buf)?;
            OffsetChange::Commit {
                group,
                topic,
                partition,
                committed: CommittedOffset {
                    offset,
                    leader_epoch,
                    metadata,
                },
            }
        }
        DELETE_GROUP => OffsetChange::DeleteGroup {
            group: get_str(buf)?,
        },
        DELETE_OFFSET => {
            let group = get_str(buf)?;
            let topic = get_str(buf)?;
            if buf.len() < 4 {
                return None;
            }
            OffsetChange::DeleteOffset {
                group,
                topic,
                partition: buf.get_i32(),
            }
        }
        _ => return None,
    };
    buf.is_empty().then_some(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(group: &str, partition: i32, offset: i64) -> OffsetChange {
        OffsetChange::Commit {
            group: group.into(),
            topic: "orders".into(),
            partition,
            committed: CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: "m".into(),
            },
        }
    }

    #[test]
    fn replays_commits_and_deletions_and_cuts_a_torn_tail() {
        let dir = std::env::temp_dir().join(format!("offsets-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("consumer_offsets");
        let _ = std::fs::remove_file(&path);
        {
            let (log, replayed) = OffsetsLog::open(&path, |_| true).unwrap();
            assert!(replayed.is_empty());
            log.append(&[commit("billing", 0, 5), commit("billing", 1, 7)])
                .unwrap();
            log.append(&[commit("billing", 0, 9), commit("gone", 0, 1)])
                .unwrap();
            log.append(&[OffsetChange::DeleteGroup {
                group: "gone".into(),
            }])
            .unwrap();
            log.append(&[commit("billing", 3, 4), commit("emptied", 0, 2)])
                .unwrap();
            let forget = |group: &str, partition| OffsetChange::DeleteOffset {
                group: group.into(),
                topic: "orders".into(),
                partition,
            };
            log.append(&[
                forget("billing", 3),
                forget("emptied", 0),
                forget("none", 0),
            ])
            .unwrap();
        }
        // A commit cut short by a crash.
        let mut torn = Vec::new();
        encode(&commit("billing", 2, 3), &mut torn);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(&torn[..torn.len() - 3]).unwrap();
        drop(file);
        let (_, replayed) = OffsetsLog::open(&path, |_| true).unwrap();
        let billing = &replayed["billing"];
        assert_eq!(billing.len(), 2);
        assert_eq!(billing[&("orders".to_string(), 0)].offset, 9);
        assert_eq!(billing[&("orders".to_string(), 1)].offset, 7);
        assert!(!replayed.contains_key("gone"));
        assert!(
            !replayed.contains_key("emptied"),
            "its last offset was deleted"
        );
        // Compacted: one entry per committed partition.
        let (changes, _) = parse(&std::fs::read(&path).unwrap());
        assert_eq!(changes.len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn offsets_of_topics_that_no_longer_exist_are_dropped_at_open() {
        let dir = std::env::temp_dir().join(format!("offsets-log-gone-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("consumer_offsets");
        let _ = std::fs::remove_file(&path);
        let (log, _) = OffsetsLog::open(&path, |_| true).unwrap();
        let mut other = commit("billing", 0, 4);
        if let OffsetChange::Commit { topic, .. } = &mut other {
            *topic = "other".into();
        }
        log.append(&[commit("billing", 0, 5), other, commit("audit", 1, 2)])
            .unwrap();
        drop(log);
        let (_, replayed) = OffsetsLog::open(&path, |topic| topic == "other").unwrap();
        assert_eq!(
            replayed.len(),
            1,
            "audit had offsets of the deleted topic only"
        );
        assert_eq!(replayed["billing"][&("other".to_string(), 0)].offset, 4);
        let (changes, _) = parse(&std::fs::read(&path).unwrap());
        assert_eq!(changes.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_absurd_length_is_a_tail_to_cut_not_an_allocation() {
        let mut bytes = u32::MAX.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[1, 0, 0]);
        assert_eq!(parse(&bytes), (Vec::new(), 0));
        let mut inner = Vec::new();
        inner.put_u8(COMMIT);
        inner.put_u32(u32::MAX); // group name length
        let mut framed = (inner.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&inner);
        assert_eq!(parse(&framed).0, Vec::new());
    }
}
