//! Topics in the data directory: `DIR/<topic>/topic.meta` (id, partition count, configs) and
//! each partition's segments, `<partition>-<base offset>.log` (`.<generation>.log` once the
//! log cleaner has rewritten one), with `<partition>.start` where DeleteRecords moved its start.
//!
//! A topic is created whole or not at all: its folder is prepared under a name no topic can
//! have (`@creating-<topic>`), synced, then renamed into place. A deletion renames the folder
//! away first. Recovery never refuses to start because of one topic: a topic that cannot be
//! read (no or unreadable `topic.meta`, a partition without files, an I/O error) is moved to
//! `DIR/@quarantine/<topic>.<unix ms>` with an error in the log, nothing in it deleted, and its
//! name is free again.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::{error, info, warn};
use uuid::Uuid;

use crate::disk_log::{DiskLog, Recovered};
use crate::durable::{is_temporary, sync_dir, write_atomically};
use crate::file_pool::FilePool;
use crate::segment::{parse_file_name, Segment, CLEANING_SUFFIX};

const META_FILE: &str = "topic.meta";
const CREATING: &str = "@creating-";
const DELETING: &str = "@deleting-";
pub const QUARANTINE: &str = "@quarantine";

/// What `topic.meta` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub id: Uuid,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
}

impl TopicMeta {
    fn encode(&self) -> String {
        let mut meta = format!("id={}\npartitions={}\n", self.id, self.partitions);
        for (key, value) in &self.configs {
            meta.push_str(&format!("config.{key}={value}\n"));
        }
        meta
    }

    fn parse(text: &str) -> Result<Self, String> {
        let (mut id, mut partitions) = (None, None);
        let mut configs = BTreeMap::new();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("id", value)) => id = value.parse().ok(),
                Some(("partitions", value)) => partitions = value.parse().ok(),
                Some((key, value)) if key.starts_with("config.") => {
                    configs.insert(key["config.".len()..].to_string(), value.to_string());
                }
                _ => {}
            }
        }
        Ok(Self {
            id: id.ok_or("topic.meta has no id")?,
            partitions: partitions
                .filter(|p| *p > 0)
                .ok_or("topic.meta has no partition count")?,
            configs,
        })
    }
}

/// How a partition's segments are sized and kept.
#[derive(Debug, Clone, Copy)]
pub struct SegmentPolicy {
    pub segment_bytes: u64,
    pub retention_bytes: Option<usize>,
}

/// Creates `DIR/<topic>` whole: meta and one empty segment per partition, prepared aside and
/// renamed into place. On failure nothing is left behind.
pub fn create(
    data_dir: &Path,
    name: &str,
    meta: &TopicMeta,
    pool: &Arc<FilePool>,
    policy: SegmentPolicy,
) -> io::Result<Vec<DiskLog>> {
    let staging = data_dir.join(format!("{CREATING}{name}"));
    let _ = std::fs::remove_dir_all(&staging);
    let prepared = (|| {
        std::fs::create_dir(&staging)?;
        write_atomically(&staging, META_FILE, meta.encode().as_bytes())?;
        for partition in 0..meta.partitions {
            Segment::create(pool, &staging, partition, 0)?;
        }
        sync_dir(&staging)?;
        // Fails if a folder of that name is there (a quarantine that could not move it).
        std::fs::rename(&staging, data_dir.join(name))?;
        sync_dir(data_dir)
    })();
    if let Err(e) = prepared {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let dir = data_dir.join(name);
    (0..meta.partitions)
        .map(|partition| {
            Ok(DiskLog::existing_empty(
                pool,
                &dir,
                partition,
                policy.segment_bytes,
            ))
        })
        .collect()
}

/// Adds partitions `from..meta.partitions` to an existing topic folder, then records the new
/// count. A file already there (an interrupted earlier attempt) is never emptied: an empty one
/// is reused, any other refuses the change.
pub fn add_partitions(
    dir: &Path,
    from: i32,
    meta: &TopicMeta,
    pool: &Arc<FilePool>,
    policy: SegmentPolicy,
) -> io::Result<Vec<DiskLog>> {
    let mut logs = Vec::new();
    for partition in from..meta.partitions {
        match DiskLog::create(pool, dir, partition, policy.segment_bytes) {
            Ok(log) => logs.push(log),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let path = dir.join(crate::segment::file_name(partition, 0));
                if std::fs::metadata(&path)?.len() != 0 {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{} holds data; refusing to replace it", path.display()),
                    ));
                }
                logs.push(DiskLog::existing_empty(
                    pool,
                    dir,
                    partition,
                    policy.segment_bytes,
                ));
            }
            Err(e) => return Err(e),
        }
    }
    sync_dir(dir)?;
    write_atomically(dir, META_FILE, meta.encode().as_bytes())?;
    Ok(logs)
}

/// Replaces the topic's `topic.meta` (its configs were altered).
pub fn write_meta(dir: &Path, meta: &TopicMeta) -> io::Result<()> {
    write_atomically(dir, META_FILE, meta.encode().as_bytes())
}

/// Renames the topic's folder away (atomic), then removes it.
pub fn delete(data_dir: &Path, name: &str) {
    let doomed = data_dir.join(format!("{DELETING}{name}-{}", Uuid::new_v4().simple()));
    let removed = std::fs::rename(data_dir.join(name), &doomed)
        .and_then(|()| sync_dir(data_dir))
        .and_then(|()| std::fs::remove_dir_all(&doomed));
    if let Err(e) = removed {
        warn!(topic = name, "deleted topic's files remain: {e}");
    }
}

/// A topic read back from its folder.
#[derive(Debug)]
pub struct Loaded {
    pub meta: TopicMeta,
    pub partitions: Vec<Recovered>,
}

/// Every topic folder of the data directory, read back; folders left by an interrupted
/// creation or deletion are removed, and topics that cannot be read are quarantined.
pub fn load_all(
    data_dir: &Path,
    pool: &Arc<FilePool>,
    policy: impl Fn(&TopicMeta) -> Result<SegmentPolicy, String>,
) -> io::Result<Vec<(String, Loaded)>> {
    let mut topics = Vec::new();
    for entry in std::fs::read_dir(data_dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !entry.file_type()?.is_dir() {
            continue;
        }
        if name.starts_with(CREATING) || name.starts_with(DELETING) {
            info!(
                folder = name,
                "removing what an interrupted create or delete left"
            );
            std::fs::remove_dir_all(entry.path())?;
            continue;
        }
        if protocol::names::validate_topic_name(&name).is_err() {
            continue;
        }
        match load(&entry.path(), pool, &policy) {
            Ok(loaded) => topics.push((name, loaded)),
            Err(why) => quarantine(data_dir, &name, &why),
        }
    }
    Ok(topics)
}

fn load(
    dir: &Path,
    pool: &Arc<FilePool>,
    policy: &impl Fn(&TopicMeta) -> Result<SegmentPolicy, String>,
) -> Result<Loaded, String> {
    let text = std::fs::read_to_string(dir.join(META_FILE))
        .map_err(|e| format!("cannot read topic.meta: {e}"))?;
    let meta = TopicMeta::parse(&text)?;
    let policy = policy(&meta)?;
    let mut files: BTreeMap<i32, Vec<(i64, u32, PathBuf)>> = BTreeMap::new();
    let mut starts: BTreeMap<i32, i64> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == META_FILE {
            continue;
        }
        // Left by a crash while writing: a small file replaced atomically, or a cleaned copy
        // not yet renamed into place (the segment it copies is still there).
        if is_temporary(&name) || name.ends_with(CLEANING_SUFFIX) {
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        if let Some(partition) = name.strip_suffix(".start").and_then(|p| p.parse().ok()) {
            let text = std::fs::read_to_string(entry.path()).map_err(|e| e.to_string())?;
            let start = text
                .trim()
                .parse()
                .map_err(|_| format!("{name} does not hold an offset"))?;
            starts.insert(partition, start);
            continue;
        }
        match parse_file_name(&name) {
            Some((partition, base, generation)) if partition >= 0 => {
                files
                    .entry(partition)
                    .or_default()
                    .push((base, generation, entry.path()));
            }
            _ => return Err(format!("unexpected file {name}")),
        }
    }
    // Partitions past the count: an interrupted CreatePartitions leaves empty files there.
    let extra: BTreeSet<i32> = files.range(meta.partitions..).map(|(p, _)| *p).collect();
    for partition in extra {
        for (_, _, path) in files.remove(&partition).unwrap_or_default() {
            let len = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
            if len != 0 {
                return Err(format!(
                    "{} holds data of partition {partition}, past the topic's {} partitions",
                    path.display(),
                    meta.partitions
                ));
            }
            std::fs::remove_file(&path).map_err(|e| e.to_string())?;
        }
    }
    let mut partitions = Vec::new();
    for partition in 0..meta.partitions {
        let segments = files
            .remove(&partition)
            .ok_or_else(|| format!("partition {partition} has no files"))?;
        let recovered = DiskLog::recover(
            pool,
            dir,
            partition,
            segments,
            policy.retention_bytes,
            policy.segment_bytes,
            starts.get(&partition).copied(),
        )
        .map_err(|e| format!("partition {partition}: {e}"))?;
        partitions.push(recovered);
    }
    Ok(Loaded { meta, partitions })
}

/// Moves a topic that cannot be read out of the way, keeping every file of it.
fn quarantine(data_dir: &Path, name: &str, why: &str) {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let target = data_dir.join(QUARANTINE).join(format!("{name}.{millis}"));
    let moved = std::fs::create_dir_all(data_dir.join(QUARANTINE))
        .and_then(|()| std::fs::rename(data_dir.join(name), &target))
        .and_then(|()| sync_dir(data_dir));
    match moved {
        Ok(()) => error!(
            topic = name,
            moved_to = %target.display(),
            "TOPIC QUARANTINED, not served: {why}; its files are kept there untouched"
        ),
        Err(e) => error!(
            topic = name,
            "TOPIC NOT SERVED: {why}; moving it to {} failed too: {e}",
            target.display()
        ),
    }
}
