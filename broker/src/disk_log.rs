//! One partition's segments on disk: appends to the active segment, a new segment once it is
//! full, whole old segments deleted by retention (as Kafka deletes them) and swapped for their
//! cleaned copies by the log cleaner, the log start that DeleteRecords moved, and recovery of all
//! of it at start.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use protocol::batch::BatchHeader;
use protocol::control::{marker_of, Marker};
use tracing::{error, warn};

use crate::durable::write_atomically;
use crate::file_pool::{FilePool, FileSlot};
use crate::group_commit::UNSET_FLUSH_WITHIN;
use crate::segment::{scan, AheadOfSync, Segment, ZERO_AHEAD};
use crate::stored::Stored;

/// When the partition syncs before it answers (`flush.messages` set), appends smaller than this
/// write zeros ahead, larger ones start their own writeback (see [`AheadOfSync`]). Measured here,
/// five appends and one fdatasync at a time: with 16 KiB appends 2,200-2,400 syncs a second,
/// 2,850-3,400 with zeros written ahead; with 64 KiB appends 7 % more; with 1 MiB appends no
/// gain, while the disk writes every byte twice (the zeros, then the batch). Starting a 16 KiB
/// append's writeback costs the appending thread about 30 us, as much as it saves the sync;
/// a 1 MiB append's about 50 us, against 2 ms of the sync of five.
const AHEAD_OF_SYNC_SPLIT: usize = 64 << 10;

/// The file beside a partition's segments recording where DeleteRecords moved its log start.
pub fn start_file_name(partition: i32) -> String {
    format!("{partition}.start")
}

#[derive(Debug)]
pub struct DiskLog {
    dir: PathBuf,
    partition: i32,
    pool: Arc<FilePool>,
    /// Oldest first; the last one is the active segment, and there is always one.
    segments: VecDeque<Segment>,
    /// Kafka's `segment.bytes`: a segment is closed once the next batch would pass it.
    segment_bytes: u64,
    /// Kafka's `segment.ms`: a segment is closed once the next batch's max timestamp is more
    /// than this past the max timestamp of the segment's first batch.
    segment_ms: i64,
    /// The max timestamp of the active segment's first batch; `None` while it is empty, or when
    /// that batch has no timestamp (-1).
    active_first_timestamp: Option<i64>,
    /// Bytes in all segments.
    total: u64,
    /// The group commit round that covers the last append (0: nothing appended yet).
    pub ticket: u64,
    /// Records appended since an append last waited for its sync (Kafka's unflushed messages).
    unflushed_messages: u64,
    /// The partition's `flush.messages`: the append that brings `unflushed_messages` to it is
    /// answered only once synced. `None` (Kafka's default): no answer waits for the disk.
    flush_messages: Option<u64>,
    /// The partition's `flush.ms`: how long a write may wait for its background sync.
    flush_within: Duration,
    /// A write or sync failed: nothing more is appended or acknowledged (Kafka takes the log
    /// directory offline; after a failed fsync the kernel may have dropped the pages).
    pub failed: bool,
    /// Files of segments the cleaner replaced, and when they may go (Kafka's
    /// `file.delete.delay.ms`): a fetch that found a batch in one just before may still read it.
    doomed: Vec<(PathBuf, i64)>,
}

/// A closed segment as the cleaner reads it.
#[derive(Debug, Clone)]
pub struct ClosedSegment {
    pub base_offset: i64,
    pub generation: u32,
    pub slot: Arc<FileSlot>,
}

/// A partition read back from its segments.
#[derive(Debug)]
pub struct Recovered {
    pub disk: DiskLog,
    /// Each readable batch, where it is, and the marker it holds if it is one.
    pub batches: Vec<(BatchHeader, Stored, Option<Marker>)>,
    /// The first segment's base offset, and the offset after the last readable batch.
    pub start: i64,
    pub end: i64,
}

impl DiskLog {
    /// A new partition: one empty segment at offset 0 in `dir`, which must not hold one yet.
    pub fn create(
        pool: &Arc<FilePool>,
        dir: &Path,
        partition: i32,
        segment_bytes: u64,
    ) -> io::Result<Self> {
        let segment = Segment::create(pool, dir, partition, 0)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            partition,
            pool: pool.clone(),
            segments: VecDeque::from([segment]),
            segment_bytes,
            segment_ms: i64::MAX,
            active_first_timestamp: None,
            total: 0,
            ticket: 0,
            unflushed_messages: 0,
            flush_messages: None,
            flush_within: UNSET_FLUSH_WITHIN,
            failed: false,
            doomed: Vec::new(),
        })
    }

    /// A partition whose one empty segment at offset 0 is already in `dir`.
    pub fn existing_empty(
        pool: &Arc<FilePool>,
        dir: &Path,
        partition: i32,
        segment_bytes: u64,
    ) -> Self {
        let path = dir.join(crate::segment::file_name(partition, 0));
        Self {
            dir: dir.to_path_buf(),
            partition,
            pool: pool.clone(),
            segments: VecDeque::from([Segment::existing(pool, &path, 0, 0, 0)]),
            segment_bytes,
            segment_ms: i64::MAX,
            active_first_timestamp: None,
            total: 0,
            ticket: 0,
            unflushed_messages: 0,
            flush_messages: None,
            flush_within: UNSET_FLUSH_WITHIN,
            failed: false,
            doomed: Vec::new(),
        }
    }

    /// Replays partition `partition`'s segment `files` (base offset, generation, path). Of two
    /// copies of a segment the cleaner's newer one is kept and the older removed; whole old
    /// segments beyond `retention` go next, by their sizes, before anything is read. The log
    /// starts at the first segment, or where DeleteRecords last moved it (`recorded_start`).
    pub fn recover(
        pool: &Arc<FilePool>,
        dir: &Path,
        partition: i32,
        mut copies: Vec<(i64, u32, PathBuf)>,
        retention: Option<usize>,
        segment_bytes: u64,
        recorded_start: Option<i64>,
    ) -> io::Result<Recovered> {
        copies.sort();
        let mut files: Vec<(i64, u32, PathBuf)> = Vec::with_capacity(copies.len());
        for copy in copies {
            match files.last_mut() {
                Some(kept) if kept.0 == copy.0 => {
                    // Sorted by generation too: this copy is newer; the older one was replaced.
                    std::fs::remove_file(&kept.2)?;
                    *kept = copy;
                }
                _ => files.push(copy),
            }
        }
        if let Some(keep) = retention {
            let mut sizes = files
                .iter()
                .map(|(_, _, path)| Ok(std::fs::metadata(path)?.len()))
                .collect::<io::Result<VecDeque<u64>>>()?;
            // The last segment may end in zeros written ahead (see `AHEAD_OF_SYNC_SPLIT`): counting
            // at most its batches, this pass never deletes a segment that retention kept while
            // the broker ran; the exact sizes are known once the files are read.
            if let Some(last) = sizes.back_mut() {
                *last = last.saturating_sub(ZERO_AHEAD);
            }
            let mut total: u64 = sizes.iter().sum();
            while files.len() > 1 && total - sizes[0] >= keep as u64 {
                let (_, _, path) = files.remove(0);
                total -= sizes.pop_front().unwrap_or(0);
                std::fs::remove_file(&path)?;
            }
        }
        let mut batches = Vec::new();
        let mut segments = VecDeque::new();
        let mut next_offset = 0;
        let mut damaged_active = false;
        // A cleaned segment may end before the next one starts: the cleaner removed its last
        // records. Only after an uncleaned one is a gap data gone missing.
        let mut previous_cleaned = false;
        let mut active_first_timestamp = None;
        let count = files.len();
        for (i, (base_offset, generation, path)) in files.into_iter().enumerate() {
            // Read whole for the scan, then dropped: only the index stays in memory.
            let content = std::fs::read(&path)?;
            if i > 0 && base_offset > next_offset && !previous_cleaned {
                error!(
                    file = %path.display(),
                    missing = ?(next_offset..base_offset),
                    "MISSING DATA: no segment holds these offsets (a file was removed?); the \
                     other segments are served"
                );
            }
            next_offset = next_offset.max(base_offset);
            let scanned = scan(&content, next_offset);
            let mut segment =
                Segment::existing(pool, &path, base_offset, content.len() as u64, generation);
            let last = i + 1 == count;
            for range in &scanned.damaged {
                error!(
                    file = %path.display(),
                    bytes = ?range,
                    "CORRUPT DATA: these bytes hold no readable batch; the file is kept as it is, \
                     the batches around them are served and their offsets are skipped"
                );
            }
            match scanned.unreadable_tail {
                Some(at) if content[at as usize..].iter().all(|byte| *byte == 0) => {
                    segment.zeros_from(at);
                }
                Some(at) if last => {
                    warn!(
                        file = %path.display(),
                        kept = at,
                        cut = content.len() as u64 - at,
                        "cutting a torn last write (one a power loss cut short)"
                    );
                    segment.truncate(at)?;
                }
                Some(at) => {
                    error!(
                        file = %path.display(),
                        bytes = ?(at..content.len() as u64),
                        "CORRUPT DATA: unreadable end of a closed segment; the file is kept as it \
                         is and the next segment is served"
                    );
                }
                None => {}
            }
            damaged_active = last && !scanned.damaged.is_empty();
            if last {
                active_first_timestamp = scanned.batches.first().map(|(h, _)| h.max_timestamp);
                active_first_timestamp = active_first_timestamp.filter(|t| *t >= 0);
            }
            if let Some((header, _)) = scanned.batches.last() {
                next_offset = header.last_offset() + 1;
            }
            batches.extend(scanned.batches.into_iter().map(|(header, position)| {
                let slot = segment.slot.clone();
                let marker = header
                    .is_control()
                    .then(|| {
                        let at = position as usize;
                        let len = header.total_len() as usize;
                        marker_of(&content[at..at + len], &header)
                    })
                    .flatten();
                (header, Stored::File { slot, position }, marker)
            }));
            segments.push_back(segment);
            previous_cleaned = generation > 0;
        }
        let first = segments.front().map_or(0, |s| s.base_offset);
        let start = recorded_start
            .map_or(first, |s| s.max(first))
            .min(next_offset);
        let total = segments.iter().map(|s| s.size).sum();
        let mut disk = Self {
            dir: dir.to_path_buf(),
            partition,
            pool: pool.clone(),
            segments,
            segment_bytes,
            segment_ms: i64::MAX,
            active_first_timestamp,
            total,
            ticket: 0,
            unflushed_messages: 0,
            flush_messages: None,
            flush_within: UNSET_FLUSH_WITHIN,
            failed: false,
            doomed: Vec::new(),
        };
        if damaged_active || disk.segments.is_empty() {
            // New batches go to a file of their own: the damaged one stays exactly as found.
            disk.roll(next_offset)?;
        }
        Ok(Recovered {
            disk,
            batches,
            start,
            end: next_offset,
        })
    }

    /// Appends one batch of `records` records, with `base_offset` as its base offset (whatever
    /// its first bytes say) and `max_timestamp` as its max timestamp, in a new segment if the
    /// active one is full or old; returns where it went, and whether its answer must wait for
    /// the sync (`flush.messages` reached).
    pub fn append(
        &mut self,
        batch: &[u8],
        base_offset: i64,
        records: u64,
        max_timestamp: i64,
    ) -> io::Result<(Stored, bool)> {
        if self.pool.commit().is_failed() {
            return Err(io::Error::other("a sync of the data directory failed"));
        }
        // Kafka's `LogSegment.shouldRoll`: by size, or by time, the batch's max timestamp
        // against the segment's first batch's (KIP-33), so a replayed or restarted log rolls
        // where it did.
        let size = self.active().size;
        let aged = self
            .active_first_timestamp
            .is_some_and(|first| max_timestamp.saturating_sub(first) > self.segment_ms);
        let full = size > 0 && (size + batch.len() as u64 > self.segment_bytes || aged);
        if full {
            // The closed segment needs no sync here: its last write queued it for a group
            // commit round no later than the one that will cover the new segment's appends.
            self.roll(base_offset)?;
        }
        let position = self.active().size;
        let ahead = self.ahead_of_sync(position + batch.len() as u64, batch.len());
        let active = self
            .segments
            .back_mut()
            .expect("a partition always has an active segment");
        active.append(batch, base_offset, ahead)?;
        if position == 0 {
            self.active_first_timestamp = Some(max_timestamp).filter(|t| *t >= 0);
        }
        self.total += batch.len() as u64;
        self.ticket = self.pool.commit().written(&active.slot, self.flush_within);
        self.unflushed_messages += records;
        let sync_first = self
            .flush_messages
            .is_some_and(|every| self.unflushed_messages >= every);
        if sync_first {
            self.unflushed_messages = 0;
        }
        let stored = Stored::File {
            slot: active.slot.clone(),
            position,
        };
        Ok((stored, sync_first))
    }

    /// How an append of `len` bytes ending at `end` prepares the sync after it. Only a
    /// partition that syncs before it answers (`flush.messages` set) has a round waiting on the
    /// disk; with Kafka's default the background sync has time to spare.
    fn ahead_of_sync(&self, end: u64, len: usize) -> AheadOfSync {
        if self.flush_messages.is_none() {
            AheadOfSync::Nothing
        } else if len < AHEAD_OF_SYNC_SPLIT {
            AheadOfSync::Zeros(ZERO_AHEAD.min(self.segment_bytes.saturating_sub(end)))
        } else {
            AheadOfSync::StartWriteback
        }
    }

    /// The group commit that syncs this partition's files.
    pub fn commit(&self) -> &Arc<crate::group_commit::GroupCommit> {
        self.pool.commit()
    }

    /// The partition's `flush.messages` and `flush.ms` (`None`: unset, as Kafka's defaults).
    pub fn set_flush(&mut self, messages: Option<u64>, ms: Option<u64>) {
        self.flush_messages = messages;
        self.flush_within = ms.map_or(UNSET_FLUSH_WITHIN, Duration::from_millis);
    }

    fn active(&self) -> &Segment {
        self.segments
            .back()
            .expect("a partition always has an active segment")
    }

    /// A new active segment at `base_offset`. Its directory entry is made durable by the next
    /// group commit round, which every append to the new file waits for when it waits at all.
    fn roll(&mut self, base_offset: i64) -> io::Result<()> {
        if let Some(closing) = self.segments.back_mut() {
            closing.cut_zeros();
        }
        let segment = Segment::create(&self.pool, &self.dir, self.partition, base_offset)?;
        self.ticket = self
            .pool
            .commit()
            .entry_created(&self.dir, self.flush_within);
        self.segments.push_back(segment);
        self.active_first_timestamp = None;
        Ok(())
    }

    /// Deletes the oldest segments while the log would still hold `keep` bytes without them;
    /// the active segment always stays. Returns the new first offset if it moved.
    pub fn apply_retention(&mut self, keep: usize) -> Option<i64> {
        let mut count = 0;
        let mut total = self.total;
        while count + 1 < self.segments.len() && total - self.segments[count].size >= keep as u64 {
            total -= self.segments[count].size;
            count += 1;
        }
        self.delete_oldest(count)
    }

    /// Deletes the `count` oldest segments, never the active one; returns the new first offset
    /// if it moved.
    pub fn delete_oldest(&mut self, count: usize) -> Option<i64> {
        let count = count.min(self.segments.len() - 1);
        for _ in 0..count {
            let oldest = self.segments.pop_front()?;
            self.total -= oldest.size;
            let path = oldest.slot.path().to_path_buf();
            if let Err(e) = oldest.delete() {
                warn!(file = %path.display(), "segment past retention not deleted: {e}");
            }
        }
        (count > 0).then(|| self.segments.front().map(|s| s.base_offset))?
    }

    /// Deletes the segments that hold only offsets below `offset` (DeleteRecords).
    pub fn delete_segments_below(&mut self, offset: i64) -> Option<i64> {
        let count = self
            .segments
            .iter()
            .skip(1)
            .take_while(|next| next.base_offset <= offset)
            .count();
        self.delete_oldest(count)
    }

    /// Records that the log starts at `offset` from now on, across restarts.
    pub fn record_start(&self, offset: i64) -> io::Result<()> {
        write_atomically(
            &self.dir,
            &start_file_name(self.partition),
            format!("{offset}\n").as_bytes(),
        )
    }

    /// The base offset of each segment, oldest first.
    pub fn segment_bases(&self) -> Vec<i64> {
        self.segments.iter().map(|s| s.base_offset).collect()
    }

    /// Starts a new active segment at `end` if the active one holds anything.
    pub fn roll_at(&mut self, end: i64) -> io::Result<()> {
        if self.active().size == 0 {
            return Ok(());
        }
        self.roll(end)
    }

    /// Kafka's `segment.bytes` changed: the next segment is rolled by the new size.
    pub fn set_segment_bytes(&mut self, bytes: u64) {
        self.segment_bytes = bytes;
    }

    /// The topic's `segment.ms`, from the next append on.
    pub fn set_segment_ms(&mut self, ms: i64) {
        self.segment_ms = ms;
    }

    /// Every segment but the active one.
    pub fn closed_segments(&self) -> Vec<ClosedSegment> {
        self.segments
            .iter()
            .take(self.segments.len() - 1)
            .map(|s| ClosedSegment {
                base_offset: s.base_offset,
                generation: s.generation,
                slot: s.slot.clone(),
            })
            .collect()
    }

    /// What a cleaned copy is written with, outside the partition's lock.
    pub fn location(&self) -> (Arc<FilePool>, PathBuf, i32) {
        (self.pool.clone(), self.dir.clone(), self.partition)
    }

    /// Puts `cleaned` in the place of the segment whose file is `replaced`; the old file goes
    /// after `delay_ms`. False (and the copy removed) when that segment is gone meanwhile
    /// (retention deleted it).
    pub fn install_cleaned(
        &mut self,
        replaced: &Arc<FileSlot>,
        cleaned: Segment,
        now_ms: i64,
        delay_ms: i64,
    ) -> bool {
        let Some(at) = self
            .segments
            .iter()
            .position(|s| Arc::ptr_eq(&s.slot, replaced))
        else {
            let _ = std::fs::remove_file(cleaned.slot.path());
            return false;
        };
        // A segment the cleaner emptied goes, but the first, whose base offset is the log start
        // a restart reads (352 of 711 segment files were empty after a few rounds).
        if cleaned.size == 0 && at > 0 {
            let _ = std::fs::remove_file(cleaned.slot.path());
            let Some(old) = self.segments.remove(at) else {
                return false;
            };
            self.total -= old.size;
            self.doomed.push((
                old.slot.path().to_path_buf(),
                now_ms.saturating_add(delay_ms),
            ));
            return true;
        }
        let old = std::mem::replace(&mut self.segments[at], cleaned);
        self.total = self.total - old.size + self.segments[at].size;
        self.doomed.push((
            old.slot.path().to_path_buf(),
            now_ms.saturating_add(delay_ms),
        ));
        true
    }

    /// Deletes the replaced files whose delay has passed.
    pub fn delete_doomed(&mut self, now_ms: i64) {
        self.doomed.retain(|(path, at)| {
            if *at > now_ms {
                return true;
            }
            if let Err(e) = std::fs::remove_file(path) {
                warn!(file = %path.display(), "replaced segment not deleted: {e}");
            }
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{batch_bytes, batch_bytes_of_len, file_name};

    const GIB: u64 = 1 << 30;

    fn empty_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("disk-log-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    /// Appends `count` batches of two records each to a new log; returns them.
    fn append_batches(log: &mut DiskLog, count: i64) -> Vec<Vec<u8>> {
        let batches: Vec<Vec<u8>> = (0..count).map(|b| batch_bytes(2 * b, 2)).collect();
        for (b, batch) in batches.iter().enumerate() {
            log.append(batch, 2 * b as i64, 2, 1000).unwrap();
        }
        batches
    }

    #[test]
    fn a_batch_is_written_under_the_logs_offset_whatever_the_producer_sent() {
        let dir = empty_dir("offset-written");
        let pool = FilePool::new(None);
        let mut log = DiskLog::create(&pool, &dir, 0, GIB).unwrap();
        // Producers send base offset 0; the log's next offset here is 40.
        let sent = batch_bytes(0, 2);
        log.append(&sent, 40, 2, 1000).unwrap();
        let path = dir.join(file_name(0, 0));
        let content = std::fs::read(&path).unwrap();
        assert_eq!(content.len(), sent.len());
        assert_eq!(content[..8], 40i64.to_be_bytes());
        assert_eq!(content[8..], sent[8..]);
        drop(log);
        let files = vec![(0, 0, path)];
        let recovered = DiskLog::recover(&pool, &dir, 0, files, None, GIB, None).unwrap();
        assert_eq!((recovered.batches.len(), recovered.end), (1, 42));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn synced_small_appends_land_in_zeros_written_ahead_and_recovery_reads_no_batch_in_them() {
        let dir = empty_dir("zeros-ahead");
        let pool = FilePool::new(None);
        let mut log = DiskLog::create(&pool, &dir, 0, GIB).unwrap();
        log.set_flush(Some(1), None);
        let batches = append_batches(&mut log, 3);
        let path = dir.join(file_name(0, 0));
        let first = batches[0].len() as u64;
        assert_eq!(
            file_len(&path),
            first + ZERO_AHEAD,
            "one extension, by the first append"
        );
        drop(log);

        let files = vec![(0, 0, path.clone())];
        let recovered = DiskLog::recover(&pool, &dir, 0, files, None, GIB, None).unwrap();
        assert_eq!((recovered.start, recovered.end), (0, 6));
        assert_eq!(recovered.batches.len(), 3);
        assert_eq!(file_len(&path), first + ZERO_AHEAD, "nothing cut");
        let mut log = recovered.disk;
        log.set_flush(Some(1), None);
        let fourth = batch_bytes(6, 1);
        log.append(&fourth, 6, 1, 1000).unwrap();
        let content = std::fs::read(&path).unwrap();
        let expected: Vec<u8> = batches.iter().flatten().chain(&fourth).copied().collect();
        assert_eq!(
            &content[..expected.len()],
            &expected[..],
            "the fourth right after"
        );
        assert!(content[expected.len()..].iter().all(|byte| *byte == 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_closed_segment_holds_only_its_batches_and_zeros_stop_at_the_segment_size() {
        let dir = empty_dir("zeros-roll");
        let pool = FilePool::new(None);
        let one = batch_bytes(0, 2).len() as u64;
        // Three batches fit in a segment; the fourth rolls.
        let segment_bytes = 3 * one + one / 2;
        let mut log = DiskLog::create(&pool, &dir, 0, segment_bytes).unwrap();
        log.set_flush(Some(1), None);
        append_batches(&mut log, 4);
        assert_eq!(file_len(&dir.join(file_name(0, 0))), 3 * one);
        assert_eq!(file_len(&dir.join(file_name(0, 6))), segment_bytes);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_synced_partition_writes_zeros_ahead_of_small_batches_and_starts_large_ones_writeback() {
        let dir = empty_dir("ahead-of-sync");
        let pool = FilePool::new(None);
        let mut log = DiskLog::create(&pool, &dir, 0, GIB).unwrap();
        let split = AHEAD_OF_SYNC_SPLIT;
        assert_eq!(log.ahead_of_sync(16 << 10, 16 << 10), AheadOfSync::Nothing);
        assert_eq!(log.ahead_of_sync(4 << 20, 1 << 20), AheadOfSync::Nothing);
        log.set_flush(Some(1), None);
        assert_eq!(
            log.ahead_of_sync(16 << 10, 16 << 10),
            AheadOfSync::Zeros(ZERO_AHEAD)
        );
        assert_eq!(
            log.ahead_of_sync(GIB - 100, split - 1),
            AheadOfSync::Zeros(100)
        );
        assert_eq!(
            log.ahead_of_sync(split as u64, split),
            AheadOfSync::StartWriteback
        );
        assert_eq!(
            log.ahead_of_sync(4 << 20, 1 << 20),
            AheadOfSync::StartWriteback
        );
        // A large append starts its writeback and writes no zeros after itself.
        let large = batch_bytes_of_len(0, 2, 1 << 20);
        log.append(&large, 0, 2, 1000).unwrap();
        let path = dir.join(file_name(0, 0));
        assert_eq!(std::fs::read(&path).unwrap(), large);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn without_flush_messages_nothing_is_written_ahead() {
        let dir = empty_dir("no-zeros");
        let pool = FilePool::new(None);
        let mut log = DiskLog::create(&pool, &dir, 0, GIB).unwrap();
        let batches = append_batches(&mut log, 3);
        let data: usize = batches.iter().map(Vec::len).sum();
        assert_eq!(file_len(&dir.join(file_name(0, 0))), data as u64);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
