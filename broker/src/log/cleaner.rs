//! The log cleaner of a compacted topic (`cleanup.policy=compact`): keeps the last record of each
//! key, drops tombstones (records with a null value) once their batch's delete horizon has
//! passed, and drops the records of aborted transactions.
//!
//! The delete horizon is Kafka's (KIP-534): the first cleaning that keeps a tombstone rewrites its
//! batch with the horizon, that cleaning's time plus `delete.retention.ms`, in the base
//! timestamp and the delete-horizon attribute bit, the records' timestamp deltas re-based so
//! each keeps its own timestamp. A later cleaning past the horizon drops the tombstones. So a
//! reader gets `delete.retention.ms` from the first cleaning to see a delete, however old the
//! tombstone's own timestamp, and the horizon survives a restart because it is in the batch.
//! (Tombstones went by their record timestamp, so a day-old delete vanished in the first
//! cleaning.) A transaction marker is kept while a batch of its transaction is left; the first
//! cleaning that finds none stamps the marker's batch with a horizon in the same way, and a
//! cleaning past it removes the marker (Kafka's `containsMarkerForEmptyTxn`). (Markers were kept
//! for ever.)
//!
//! It runs from the broker's background task, never from a produce or a fetch, and one pass is
//! bounded in memory: it streams the cleanable part of the log (below the last stable offset and
//! `min.compaction.lag.ms`; on disk the closed segments only, as Kafka never cleans the active
//! one) a few MiB at a time into a map of each key's 128-bit hash to its last offset, within
//! `dedupe_buffer_bytes` (Kafka's `log.cleaner.dedupe.buffer.size` and its `SkimpyOffsetMap` of
//! key hashes; a log with more keys is cleaned in several passes), then reads again and rewrites
//! one segment at a time; it decompresses no batch past the broker's limit. (The pass read the
//! whole cleanable part into memory: 300 MB of data took 295 MiB.) The partition's lock is held
//! only to plan the pass and to install each result; appends and fetches go on meanwhile.
//!
//! A record kept keeps its offset: a rewritten batch keeps its base offset and offset range and
//! holds fewer records, so consumers see gaps, as in Kafka. On disk each cleaned segment is
//! written as the next generation of its file and swapped in; the old file goes after
//! `file.delete.delay.ms`, so a fetch that found a batch in it a moment before still reads it.
//! A pass starts once the share of the cleanable bytes not yet cleaned reaches
//! `min.cleanable.dirty.ratio`, or once its earliest dirty record is older than
//! `max.compaction.lag.ms`.

use std::collections::HashMap;
use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use protocol::batch::DELETE_HORIZON_BIT;
use protocol::batch::{crc32c, BatchHeader, HEADER_LEN};
use protocol::compression::Compression;
use protocol::records::{put_restamped, slice_records};
use tracing::{debug, warn};

use super::txn_index::AbortedTxn;
use super::{IndexedBatch, LogState, PartitionLog};
use crate::disk_log::ClosedSegment;
use crate::segment::Segment;
use crate::stored::{self, Stored};

/// What bounds one pass.
#[derive(Debug, Clone, Copy)]
pub struct CleanerConfig {
    /// The most one batch's records are decompressed to (the broker's own limit).
    pub max_batch_bytes: usize,
    /// Kafka's `log.cleaner.dedupe.buffer.size`: memory for the map of keys to offsets.
    pub dedupe_buffer_bytes: usize,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            max_batch_bytes: 64 << 20,
            dedupe_buffer_bytes: 128 << 20,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub batches_read: usize,
    pub records_removed: usize,
    pub bytes_before: usize,
    pub bytes_after: usize,
}

/// What one key costs the map: its hash, its offset and the hash table's slot at its load.
const MAP_ENTRY_BYTES: usize = 32;

/// How much of the log the map's pass reads at once.
const READ_CHUNK_BYTES: usize = 4 << 20;

/// A key as the map holds it: a 128-bit hash, as unlikely to collide as Kafka's MD5.
fn key_hash(key: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(key)
}

/// Each key's last committed offset, by hash.
type OffsetMap = HashMap<u128, i64>;

/// What a pass works on, taken under the lock.
struct Plan {
    batches: Vec<IndexedBatch>,
    /// The first batch not cleaned yet: the map is built from it on (Kafka's first dirty
    /// offset), and the pass cleans from the log start to where the map ends.
    dirty_from: usize,
    aborted: Vec<AbortedTxn>,
    /// With a data directory: the closed segments wholly below the cut, in order.
    segments: Option<Vec<ClosedSegment>>,
    /// Where each of those segments ends (the next one's base offset).
    segment_ends: Vec<i64>,
    delete_retention_ms: i64,
    /// The topic's `file.delete.delay.ms`: how long a replaced segment file stays.
    file_delete_delay_ms: i64,
}

/// A batch after cleaning: unchanged, rewritten, or gone.
enum Outcome {
    Kept(Bytes),
    Rewritten(Bytes),
    Removed,
}

impl PartitionLog {
    /// One cleaning pass, when the topic is compacted and enough of it is dirty; `None` when
    /// there was nothing to do.
    pub fn clean(&self, now_ms: i64, config: &CleanerConfig) -> Option<CleanStats> {
        let plan = plan(&self.state.lock(), now_ms)?;
        // The map covers at least the first dirty batch, on disk its whole segment (only whole
        // segments are rewritten): past the buffer by at most one segment's keys, as Kafka
        // needs room for one segment too.
        let min_cover = match &plan.segments {
            None => plan.dirty_from + 1,
            Some(_) => {
                let dirty_base = plan.batches[plan.dirty_from].base_offset;
                let end = plan
                    .segment_ends
                    .iter()
                    .find(|&&end| end > dirty_base)
                    .copied()
                    .unwrap_or(i64::MAX);
                plan.batches.partition_point(|b| b.base_offset < end)
            }
        };
        let (latest, covered) = match offset_map(&plan, min_cover, config) {
            Ok(map) => map,
            Err(e) => {
                warn!("log cleaner: cannot read the partition: {e}");
                return None;
            }
        };
        let mut stats = CleanStats {
            batches_read: covered,
            ..CleanStats::default()
        };
        let covered_end = plan.batches[covered - 1].last_offset + 1;
        let cleaned = match &plan.segments {
            // In memory the batches are in memory already: loading them copies no byte.
            None => load(&plan.batches[..covered]).map(|loaded| {
                let mut txns = TxnsSeen::new();
                let outcomes = loaded
                    .iter()
                    .map(|data| {
                        clean_batch(data, &latest, &plan, now_ms, config, &mut txns, &mut stats)
                    })
                    .collect();
                self.install_in_memory(&plan.batches[..covered], outcomes, covered_end);
            }),
            Some(segments) => {
                let cleaning = Cleaning {
                    latest: &latest,
                    covered,
                    now_ms,
                    config,
                };
                self.install_on_disk(&plan, segments, &cleaning, &mut stats)
            }
        };
        if let Err(e) = cleaned {
            warn!("log cleaner: cannot read the partition: {e}");
        }
        debug!(?stats, "log cleaner pass");
        Some(stats)
    }

    fn install_in_memory(&self, cleaned: &[IndexedBatch], outcomes: Vec<Outcome>, end: i64) {
        let mut state = self.state.lock();
        let front = state.batches.front().map_or(i64::MAX, |b| b.base_offset);
        let replaced = state
            .batches
            .iter()
            .take_while(|b| b.last_offset < end)
            .count();
        let kept: Vec<IndexedBatch> = cleaned
            .iter()
            .zip(outcomes)
            .filter(|(b, _)| b.base_offset >= front)
            .filter_map(|(b, outcome)| {
                let data = match outcome {
                    Outcome::Kept(data) | Outcome::Rewritten(data) => data,
                    Outcome::Removed => return None,
                };
                Some(IndexedBatch {
                    len: data.len(),
                    stored: Stored::Memory(data),
                    ..b.clone()
                })
            })
            .collect();
        state.replace_front(replaced, kept);
        state.cleaned_to = state.cleaned_to.max(end);
    }

    fn install_on_disk(
        &self,
        plan: &Plan,
        segments: &[ClosedSegment],
        cleaning: &Cleaning<'_>,
        stats: &mut CleanStats,
    ) -> std::io::Result<()> {
        let Some((pool, dir, partition)) = self.state.lock().disk.as_ref().map(|d| d.location())
        else {
            return Ok(());
        };
        let Cleaning {
            latest,
            covered,
            now_ms,
            config,
        } = *cleaning;
        let mut at = 0;
        let mut txns = TxnsSeen::new();
        for (segment, &end) in segments.iter().zip(&plan.segment_ends) {
            let in_segment = plan.batches[at..]
                .iter()
                .take_while(|b| b.base_offset < end)
                .count();
            let (from, to) = (at, at + in_segment);
            at = to;
            if to > covered {
                // The map did not reach the end of this segment: the next pass cleans it.
                return Ok(());
            }
            // One segment in memory at a time (at most `segment.bytes`), never the partition.
            let results: Vec<Outcome> = load(&plan.batches[from..to])?
                .iter()
                .map(|data| clean_batch(data, latest, plan, now_ms, config, &mut txns, stats))
                .collect();
            if results.iter().all(|o| matches!(o, Outcome::Kept(_))) {
                let mut state = self.state.lock();
                state.cleaned_to = state.cleaned_to.max(end);
                continue;
            }
            let mut content = BytesMut::new();
            let mut fresh = Vec::with_capacity(in_segment);
            for (batch, result) in plan.batches[from..to].iter().zip(&results) {
                if let Outcome::Kept(data) | Outcome::Rewritten(data) = result {
                    fresh.push((batch, content.len() as u64, data.len()));
                    content.put_slice(data);
                }
            }
            let written = Segment::write_generation(
                &pool,
                &dir,
                partition,
                segment.base_offset,
                segment.generation + 1,
                &content,
            );
            let copy = match written {
                Ok(copy) => copy,
                Err(e) => {
                    warn!(
                        segment = segment.base_offset,
                        "log cleaner: cannot write: {e}"
                    );
                    return Ok(());
                }
            };
            let slot = copy.slot.clone();
            let mut state = self.state.lock();
            let Some(disk) = state.disk.as_mut() else {
                return Ok(());
            };
            if !disk.install_cleaned(&segment.slot, copy, now_ms, plan.file_delete_delay_ms) {
                continue;
            }
            let fresh: Vec<IndexedBatch> = fresh
                .into_iter()
                .map(|(batch, position, len)| IndexedBatch {
                    len,
                    stored: Stored::File {
                        slot: slot.clone(),
                        position,
                    },
                    ..batch.clone()
                })
                .collect();
            state.replace_range(segment.base_offset, end, fresh);
            state.cleaned_to = state.cleaned_to.max(end);
        }
        Ok(())
    }

    /// Deletes the files of segments the cleaner replaced once their delay has passed.
    pub fn delete_replaced_files(&self, now_ms: i64) {
        if let Some(disk) = self.state.lock().disk.as_mut() {
            disk.delete_doomed(now_ms);
        }
    }
}

impl LogState {
    /// Replaces the first `count` batches with `batches`.
    fn replace_front(&mut self, count: usize, batches: Vec<IndexedBatch>) {
        let removed: usize = self.batches.drain(..count).map(|b| b.len).sum();
        self.bytes = self.bytes - removed + batches.iter().map(|b| b.len).sum::<usize>();
        for batch in batches.into_iter().rev() {
            self.batches.push_front(batch);
        }
    }

    /// Replaces the batches that start in `from..to` with `batches`.
    fn replace_range(&mut self, from: i64, to: i64, batches: Vec<IndexedBatch>) {
        let lo = self.batches.partition_point(|b| b.base_offset < from);
        let hi = self.batches.partition_point(|b| b.base_offset < to);
        let tail = self.batches.split_off(hi);
        let removed: usize = self.batches.drain(lo..).map(|b| b.len).sum();
        self.bytes = self.bytes - removed + batches.iter().map(|b| b.len).sum::<usize>();
        self.batches.extend(batches);
        self.batches.extend(tail);
    }
}

/// What a pass would clean, or `None` when the topic is not compacted or too little is dirty.
fn plan(state: &LogState, now_ms: i64) -> Option<Plan> {
    let policy = state.policy;
    if !policy.compact {
        return None;
    }
    // Never what a transaction still holds open, nor what is younger than the lag.
    let lag_cutoff = now_ms.saturating_sub(policy.min_compaction_lag_ms);
    let mut cut = state.stable();
    if let Some(young) = state.batches.iter().find(|b| b.max_timestamp > lag_cutoff) {
        cut = cut.min(young.base_offset);
    }
    let mut segment_ends = Vec::new();
    let segments = match &state.disk {
        None => None,
        Some(disk) => {
            let bases = disk.segment_bases();
            // A closed segment is cleanable when all of it lies below the cut.
            let cleanable: Vec<ClosedSegment> = disk
                .closed_segments()
                .into_iter()
                .zip(bases.iter().skip(1))
                .take_while(|(_, next)| **next <= cut)
                .map(|(s, next)| {
                    segment_ends.push(*next);
                    s
                })
                .collect();
            cut = segment_ends.last().copied().unwrap_or(i64::MIN);
            Some(cleanable)
        }
    };
    let batches: Vec<IndexedBatch> = state
        .batches
        .iter()
        .take_while(|b| b.last_offset < cut)
        .cloned()
        .collect();
    let total: usize = batches.iter().map(|b| b.len).sum();
    let dirty_batches = || batches.iter().filter(|b| b.base_offset >= state.cleaned_to);
    let dirty: usize = dirty_batches().map(|b| b.len).sum();
    // Kafka's `LogCleanerManager.maxCompactionDelay`: a log whose earliest dirty record (by
    // positive timestamps) is older than `max.compaction.lag.ms` must be cleaned now.
    let clean_until = now_ms.saturating_sub(policy.max_compaction_lag_ms);
    let overdue = dirty_batches()
        .map(|b| b.max_timestamp)
        .filter(|t| *t > 0)
        .min()
        .is_some_and(|earliest| earliest < clean_until);
    let ratio_reached = (dirty as f64) >= policy.min_cleanable_dirty_ratio * total as f64;
    if dirty == 0 || !(ratio_reached || overdue) {
        return None;
    }
    let dirty_from = batches.partition_point(|b| b.base_offset < state.cleaned_to);
    Some(Plan {
        batches,
        dirty_from,
        aborted: state
            .txns
            .as_ref()
            .map(|t| t.aborted_between(i64::MIN, cut))
            .unwrap_or_default(),
        segments,
        segment_ends,
        delete_retention_ms: policy.delete_retention_ms,
        file_delete_delay_ms: policy.file_delete_delay_ms,
    })
}

/// The records of one batch, uncompressed, with the header; `None` when it cannot be read
/// within the limit (it is then kept as it is, and its keys do not count).
fn records_of(data: &Bytes, limit: usize) -> Option<(BatchHeader, Bytes)> {
    let header = BatchHeader::parse(data).ok()?;
    let codec = Compression::from_attribute_bits(header.attributes)?;
    let body = codec.decompress(data.slice(HEADER_LEN..), limit).ok()?;
    Some((header, body))
}

fn is_aborted(aborted: &[AbortedTxn], producer_id: i64, offset: i64) -> bool {
    aborted.iter().any(|a| {
        a.producer_id == producer_id && a.first_offset <= offset && offset <= a.last_offset
    })
}

/// The bytes of `batches`.
fn load(batches: &[IndexedBatch]) -> std::io::Result<Vec<Bytes>> {
    let picked: Vec<(usize, Stored)> = batches.iter().map(|b| (b.len, b.stored.clone())).collect();
    stored::load(&picked)
}

/// Runs of `batches` of about `READ_CHUNK_BYTES` each (a larger batch is a run of its own).
fn chunks(batches: &[IndexedBatch]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, batch) in batches.iter().enumerate() {
        if i > start && bytes + batch.len > READ_CHUNK_BYTES {
            runs.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += batch.len;
    }
    if start < batches.len() {
        runs.push(start..batches.len());
    }
    runs
}

/// Each key's last offset among the committed records of the plan's dirty batches, read a
/// chunk at a time, and how many of the plan's batches (from the first) that map covers within
/// the dedupe buffer (at least `min_cover`).
fn offset_map(
    plan: &Plan,
    min_cover: usize,
    config: &CleanerConfig,
) -> std::io::Result<(OffsetMap, usize)> {
    let (batches, aborted) = (&plan.batches[..], &plan.aborted[..]);
    let mut latest = OffsetMap::new();
    let mut used = 0;
    for run in chunks(&batches[plan.dirty_from..]) {
        let run = run.start + plan.dirty_from..run.end + plan.dirty_from;
        let first = run.start;
        for (i, data) in load(&batches[run])?.iter().enumerate() {
            let i = first + i;
            let Some((header, body)) = records_of(data, config.max_batch_bytes) else {
                continue;
            };
            if header.is_control() {
                continue;
            }
            let Ok(slices) = slice_records(&body, header.record_count) else {
                continue;
            };
            let cost = slices.iter().filter(|s| s.key.is_some()).count() * MAP_ENTRY_BYTES;
            if i >= min_cover && used + cost > config.dedupe_buffer_bytes {
                return Ok((latest, i));
            }
            used += cost;
            for slice in slices {
                let offset = header.base_offset + i64::from(slice.offset_delta);
                let aborted =
                    header.is_transactional() && is_aborted(aborted, header.producer_id, offset);
                if let (Some(key), false) = (slice.key, aborted) {
                    latest.insert(key_hash(&body[key]), offset);
                }
            }
        }
    }
    Ok((latest, batches.len()))
}

/// What cleaning each batch of a pass needs.
#[derive(Clone, Copy)]
struct Cleaning<'a> {
    latest: &'a OffsetMap,
    /// The batches the map covers, from the first.
    covered: usize,
    now_ms: i64,
    config: &'a CleanerConfig,
}

/// The producers with a transactional batch seen by a pass since their last marker: a pass reads
/// from the log start, so a marker whose producer is not here has no batch of its transaction
/// left before it.
type TxnsSeen = std::collections::HashSet<i64>;

/// One batch after cleaning: the records kept are the last of their key, not aborted, and not a
/// tombstone past its batch's delete horizon; a batch that keeps a tombstone and has no horizon
/// yet is rewritten with one. A transaction marker is treated as Kafka's `LogCleaner` treats it:
/// kept while a batch of its transaction is left (`CleanedTransactionMetadata`); then, as a
/// tombstone, stamped with a horizon by the first cleaning and removed by one past it.
fn clean_batch(
    data: &Bytes,
    latest: &OffsetMap,
    plan: &Plan,
    now_ms: i64,
    config: &CleanerConfig,
    txns: &mut TxnsSeen,
    stats: &mut CleanStats,
) -> Outcome {
    stats.bytes_before += data.len();
    let kept = |outcome: Outcome, stats: &mut CleanStats| {
        if let Outcome::Kept(d) | Outcome::Rewritten(d) = &outcome {
            stats.bytes_after += d.len();
        }
        outcome
    };
    let Some((header, body)) = records_of(data, config.max_batch_bytes) else {
        return kept(Outcome::Kept(data.clone()), stats);
    };
    // Kafka's `CleanedTransactionMetadata`: a marker stays while the pass saw a batch of its
    // transaction before it (aborted batches go in this pass, the marker in a later one).
    let txn_left = if header.is_control() {
        txns.remove(&header.producer_id)
    } else {
        if header.is_transactional() {
            txns.insert(header.producer_id);
        }
        false
    };
    let Ok(slices) = slice_records(&body, header.record_count) else {
        return kept(Outcome::Kept(data.clone()), stats);
    };
    // Kafka's LogCleaner drops a tombstone only once its batch's horizon has passed.
    let tombstones_expired = header.delete_horizon().is_some_and(|h| now_ms >= h);
    let (survivors, sets_horizon): (Vec<_>, bool) = if header.is_control() {
        // A marker with nothing of its transaction left is removable, by its horizon.
        let removable = !txn_left;
        let survivors = if removable && tombstones_expired {
            Vec::new()
        } else {
            slices.iter().collect()
        };
        (survivors, removable && header.delete_horizon().is_none())
    } else {
        let survivors: Vec<_> = slices
            .iter()
            .filter(|s| {
                let offset = header.base_offset + i64::from(s.offset_delta);
                // A key the map does not hold has no newer record in the dirty part: this one,
                // in the part cleaned before, is its last.
                let last_of_key = s.key.as_ref().is_some_and(|k| {
                    latest
                        .get(&key_hash(&body[k.clone()]))
                        .is_none_or(|&last| last == offset)
                });
                let aborted = header.is_transactional()
                    && is_aborted(&plan.aborted, header.producer_id, offset);
                let expired_tombstone = s.tombstone && tombstones_expired;
                last_of_key && !aborted && !expired_tombstone
            })
            .collect();
        let sets_horizon =
            header.delete_horizon().is_none() && survivors.iter().any(|s| s.tombstone);
        (survivors, sets_horizon)
    };
    stats.records_removed += slices.len() - survivors.len();
    if survivors.len() == slices.len() && !sets_horizon {
        return kept(Outcome::Kept(data.clone()), stats);
    }
    if survivors.is_empty() {
        return Outcome::Removed;
    }
    let horizon = sets_horizon.then(|| now_ms.saturating_add(plan.delete_retention_ms));
    let mut records = Vec::with_capacity(body.len() + 10 * survivors.len());
    for s in &survivors {
        match horizon.filter(|_| !header.log_append_time()) {
            // The base timestamp becomes the horizon: each record's delta moves by as much.
            Some(h) => {
                let timestamp = header.base_timestamp.saturating_add(s.timestamp_delta);
                if put_restamped(&body, s, timestamp.saturating_sub(h), &mut records).is_err() {
                    return kept(Outcome::Kept(data.clone()), stats);
                }
            }
            None => records.extend_from_slice(&body[s.raw.clone()]),
        }
    }
    match rebuild(data, &header, &records, survivors.len(), horizon) {
        Some(batch) => kept(Outcome::Rewritten(batch), stats),
        None => kept(Outcome::Kept(data.clone()), stats),
    }
}

/// The batch `original` holding only `records` (uncompressed, `count` of them), compressed with
/// its codec; its header is kept but for the record count, the length, the CRC and, when
/// given, the delete horizon (the attribute bit and the base timestamp).
fn rebuild(
    original: &Bytes,
    header: &BatchHeader,
    records: &[u8],
    count: usize,
    horizon: Option<i64>,
) -> Option<Bytes> {
    let codec = Compression::from_attribute_bits(header.attributes)?;
    let mut batch = BytesMut::with_capacity(HEADER_LEN + records.len());
    batch.put_slice(&original[..HEADER_LEN]);
    if let Some(horizon) = horizon {
        let attributes = header.attributes | DELETE_HORIZON_BIT;
        batch[21..23].copy_from_slice(&attributes.to_be_bytes());
        batch[27..35].copy_from_slice(&horizon.to_be_bytes());
    }
    codec.compress(records, &mut batch).ok()?;
    let batch_length = i32::try_from(batch.len() - 12).ok()?;
    batch[8..12].copy_from_slice(&batch_length.to_be_bytes());
    batch[57..61].copy_from_slice(&(count as i32).to_be_bytes());
    let crc = crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Some(batch.freeze())
}
