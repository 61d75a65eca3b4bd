//! Leaders moved by a reassignment, and their leader epochs, kept in the data directory so a
//! restart keeps them. A partition nobody moved is not listed: its leader is derived
//! ([`super::placement`]) and its epoch is 0.
//!
//! Keyed by topic id, not name: a topic deleted and created again is a new topic, with the
//! default placement. The file is small (one line per moved partition) and replaced whole
//! ([`write_atomically`]) at each move.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use uuid::Uuid;

use crate::durable::write_atomically;

/// '@' is not allowed in topic names, so no topic's folder can collide with it.
const MOVES_FILE: &str = "@partition-leaders";

/// Where a moved partition's leader is now, and how many times it moved (its leader epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub leader: i32,
    pub epoch: i32,
}

#[derive(Debug, Default)]
pub struct Moves {
    dir: Option<PathBuf>,
    moved: Mutex<BTreeMap<(Uuid, i32), Moved>>,
}

impl Moves {
    /// The moves recorded in `dir` (none in a new directory), persisted there from now on.
    pub fn open(dir: &Path) -> io::Result<Moves> {
        let moved = match std::fs::read_to_string(dir.join(MOVES_FILE)) {
            Ok(text) => parse(&text).map_err(|line| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} cannot be read (line '{line}' is not TOPIC-ID PARTITION LEADER \
                         EPOCH); restore it, or remove it to put every leader back in its \
                         default place",
                        dir.join(MOVES_FILE).display()
                    ),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e),
        };
        Ok(Moves {
            dir: Some(dir.to_path_buf()),
            moved: Mutex::new(moved),
        })
    }

    pub fn get(&self, topic: Uuid, partition: i32) -> Option<Moved> {
        self.lock().get(&(topic, partition)).copied()
    }

    /// Records that the partition is now led by `leader`, one epoch later than `epoch`; with a
    /// data directory, returns once that is on disk (the move is not made if it cannot be).
    pub fn record(&self, topic: Uuid, partition: i32, leader: i32, epoch: i32) -> io::Result<()> {
        let mut moved = self.lock();
        let before = moved.insert(
            (topic, partition),
            Moved {
                leader,
                epoch: epoch.saturating_add(1),
            },
        );
        if let Some(dir) = &self.dir {
            if let Err(e) = write_atomically(dir, MOVES_FILE, render(&moved).as_bytes()) {
                match before {
                    Some(before) => moved.insert((topic, partition), before),
                    None => moved.remove(&(topic, partition)),
                };
                return Err(e);
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(Uuid, i32), Moved>> {
        // A panic while holding it cannot leave the map half-changed (each change is one insert).
        self.moved.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn render(moved: &BTreeMap<(Uuid, i32), Moved>) -> String {
    moved
        .iter()
        .map(|((topic, partition), m)| format!("{topic} {partition} {} {}\n", m.leader, m.epoch))
        .collect()
}

/// The moves, or the first line that is not one.
fn parse(text: &str) -> Result<BTreeMap<(Uuid, i32), Moved>, String> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| parse_line(line).ok_or_else(|| line.to_string()))
        .collect()
}

/// `TOPIC-ID PARTITION LEADER EPOCH`.
fn parse_line(line: &str) -> Option<((Uuid, i32), Moved)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [topic, partition, leader, epoch] = fields[..] else {
        return None;
    };
    let moved = Moved {
        leader: leader.parse().ok()?,
        epoch: epoch.parse().ok()?,
    };
    Some((
        (Uuid::parse_str(topic).ok()?, partition.parse().ok()?),
        moved,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_survive_a_reopen_and_a_bad_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("moves-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let topic = Uuid::new_v4();
        let moves = Moves::open(&dir).unwrap();
        assert_eq!(moves.get(topic, 7), None);
        moves.record(topic, 7, 3, 0).unwrap();
        moves.record(topic, 7, 2, 1).unwrap();
        let reopened = Moves::open(&dir).unwrap();
        assert_eq!(
            reopened.get(topic, 7),
            Some(Moved {
                leader: 2,
                epoch: 2
            })
        );
        assert_eq!(reopened.get(topic, 6), None);
        std::fs::write(dir.join(MOVES_FILE), "not a move\n").unwrap();
        let err = Moves::open(&dir).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("'not a move'"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
