//! A partition's log on disk (`--data-dir`): segment files `<partition>-<base offset>.log`, each
//! holding stored batches back to back, exactly as fetch serves them.
//!
//! Recovery reads each segment through the same header view and CRC check the broker validates
//! produces with. What it cannot read is never deleted, with one exception: a power loss can
//! tear the last write of the last segment (a kill -9 cannot: the kernel keeps every write that
//! returned), and with syncs before each answer that tail was never acknowledged, so it is cut.
//! A damaged region followed by readable batches is corruption, not a torn write: the file is
//! kept as it is, and the batches on both sides of the damage are served (its offsets are a gap,
//! as a compacted log has). Zeros after the last batch are no damage: an append that syncs before
//! its answer writes them ahead of itself (see [`Segment::append`]).

use std::fs::OpenOptions;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use protocol::batch::{validate_single_batch, BatchHeader, HEADER_LEN};

use crate::file_pool::{FilePool, FileSlot};

/// The name of partition `partition`'s segment starting at `base_offset`. Twenty digits, as
/// Kafka's, so that names sort as offsets do.
pub fn file_name(partition: i32, base_offset: i64) -> String {
    generation_file_name(partition, base_offset, 0)
}

/// The name of the `generation`th copy of a segment: the log cleaner writes a segment's cleaned
/// copy beside it rather than over it, so a reader still holding the old one is never handed the
/// new bytes at old positions, and a crash leaves one whole copy or the other.
pub fn generation_file_name(partition: i32, base_offset: i64, generation: u32) -> String {
    match generation {
        0 => format!("{partition}-{base_offset:020}.log"),
        g => format!("{partition}-{base_offset:020}.{g}.log"),
    }
}

/// `(partition, base offset, generation)` of a segment file name.
pub fn parse_file_name(name: &str) -> Option<(i32, i64, u32)> {
    let (partition, rest) = name.strip_suffix(".log")?.split_once('-')?;
    let (base, generation) = match rest.split_once('.') {
        Some((base, generation)) => (base, generation.parse().ok().filter(|g| *g > 0)?),
        None => (rest, 0),
    };
    if base.len() != 20 {
        return None;
    }
    Some((partition.parse().ok()?, base.parse().ok()?, generation))
}

/// Where a cleaned copy is written before it is renamed to its generation's name.
pub const CLEANING_SUFFIX: &str = ".cleaning";

#[derive(Debug)]
pub struct Segment {
    pub base_offset: i64,
    pub slot: Arc<FileSlot>,
    /// Bytes of batches in the file; the next append goes here.
    pub size: u64,
    /// The file's length: `size`, or more where zeros were written ahead (see
    /// [`Segment::append`]).
    length: u64,
    /// 0 as written; each cleaning makes the next.
    pub generation: u32,
}

/// How many zeros an append writes ahead of its batch when asked to (see [`Segment::append`]).
/// Each extension costs one journal commit, in the round that syncs it, and the zeros' own write
/// to the disk: with 1 MiB, that comes once in about thirteen rounds of five 16 KiB batches.
/// Steps of 3 MiB and more made every sync of the rounds after them slower here, about half as
/// many a second as with 1 MiB.
pub const ZERO_AHEAD: u64 = 1 << 20;

/// What an append does for the sync that will follow it (see [`Segment::append`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AheadOfSync {
    /// Nothing: with Kafka's default flush policy no answer waits for the sync.
    Nothing,
    /// A small batch: this many zeros are written past it when it would pass those already
    /// written, so that the syncs of the appends after it commit no journal.
    Zeros(u64),
    /// A large batch: its writeback starts as soon as it is written, so that the disk writes it
    /// while the round's other batches arrive, and the round's fdatasync finds it written or on
    /// its way instead of sending every batch of the round then.
    StartWriteback,
}

impl Segment {
    /// A new, empty segment file in `dir`; an existing file is never replaced (nor emptied).
    pub fn create(
        pool: &Arc<FilePool>,
        dir: &Path,
        partition: i32,
        base_offset: i64,
    ) -> io::Result<Self> {
        let path = dir.join(file_name(partition, base_offset));
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Self {
            base_offset,
            slot: FileSlot::new(pool, path),
            size: 0,
            length: 0,
            generation: 0,
        })
    }

    /// An existing segment file of `size` bytes.
    pub fn existing(
        pool: &Arc<FilePool>,
        path: &Path,
        base_offset: i64,
        size: u64,
        generation: u32,
    ) -> Self {
        Self {
            base_offset,
            slot: FileSlot::new(pool, path.to_path_buf()),
            size,
            length: size,
            generation,
        }
    }

    /// A cleaned copy of the segment at `base_offset`: `content`, written whole and synced
    /// under generation `generation`'s name; the older copy is left as it is.
    pub fn write_generation(
        pool: &Arc<FilePool>,
        dir: &Path,
        partition: i32,
        base_offset: i64,
        generation: u32,
        content: &[u8],
    ) -> io::Result<Segment> {
        let name = generation_file_name(partition, base_offset, generation);
        let writing = dir.join(format!("{name}{CLEANING_SUFFIX}"));
        {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&writing)?;
            file.write_all_at(content, 0)?;
            file.sync_data()?;
        }
        let path = dir.join(&name);
        std::fs::rename(&writing, &path)?;
        crate::durable::sync_dir(dir)?;
        Ok(Segment::existing(
            pool,
            &path,
            base_offset,
            content.len() as u64,
            generation,
        ))
    }

    /// Writes one batch at the end with `base_offset` as its base offset, preparing the sync that
    /// follows as `ahead` says. With [`AheadOfSync::Zeros`], a batch that would pass the zeros
    /// already in the file first extends it with that many zeros past the batch's end: the
    /// appends that land in them, and the syncs that follow, change neither the file's size nor
    /// its block map, so fdatasync has no journal commit to wait for, only the data (PostgreSQL
    /// fills its WAL files with zeros for the same reason). A failed write leaves `size` where it
    /// was, so the next append overwrites whatever part of it reached the file.
    pub fn append(&mut self, batch: &[u8], base_offset: i64, ahead: AheadOfSync) -> io::Result<()> {
        let file = self.slot.file()?;
        let end = self.size + batch.len() as u64;
        match ahead {
            AheadOfSync::Zeros(zero_ahead) if end > self.length => {
                let zeros = vec![0; usize::try_from(zero_ahead).unwrap_or(usize::MAX)];
                file.write_all_at(&zeros, end)?;
                self.length = end + zero_ahead;
            }
            _ => {}
        }
        // The batch as the producer sent it but for its base offset, in two writes rather than
        // a copy of the whole batch. The offset goes first: a write cut short leaves a batch
        // whose length or CRC fails (a torn tail), never a whole batch under the producer's
        // offset.
        let Some(after_offset) = batch.get(8..) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a batch shorter than its base offset",
            ));
        };
        file.write_all_at(&base_offset.to_be_bytes(), self.size)?;
        file.write_all_at(after_offset, self.size + 8)?;
        if ahead == AheadOfSync::StartWriteback {
            crate::writeback::start(&file, self.size, batch.len() as u64)?;
        }
        self.size = end;
        self.length = self.length.max(end);
        Ok(())
    }

    /// Records that the file's bytes from `at` on are zeros written ahead, not batches.
    pub fn zeros_from(&mut self, at: u64) {
        self.size = at;
    }

    /// Cuts the zeros written ahead off a segment that takes no more appends, so that a closed
    /// segment's file is exactly its batches. A failure leaves them: recovery reads them as
    /// zeros written ahead.
    pub fn cut_zeros(&mut self) {
        if self.length == self.size {
            return;
        }
        match self.slot.file().and_then(|file| file.set_len(self.size)) {
            Ok(()) => self.length = self.size,
            Err(e) => tracing::warn!(
                file = %self.slot.path().display(),
                "could not cut the zeros written ahead of a closed segment: {e}"
            ),
        }
    }

    pub fn sync(&self) -> io::Result<()> {
        self.slot.file()?.sync_data()
    }

    /// Cuts the file back to `len` bytes (a torn tail).
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.slot.file()?.set_len(len)?;
        self.size = len;
        self.length = len;
        Ok(())
    }

    /// Removes the file (retention).
    pub fn delete(self) -> io::Result<()> {
        self.slot.close();
        std::fs::remove_file(self.slot.path())
    }
}

/// What recovery found in one segment's bytes.
#[derive(Debug, Default)]
pub struct Scanned {
    /// The readable batches, in order, with their positions in the content.
    pub batches: Vec<(BatchHeader, u64)>,
    /// Byte ranges that do not hold a readable batch, with readable batches after them.
    pub damaged: Vec<Range<u64>>,
    /// Where an unreadable tail begins: nothing readable follows it.
    pub unreadable_tail: Option<u64>,
}

/// Reads a segment's `content`, whose first batch must not start before `next_offset`.
pub fn scan(content: &[u8], mut next_offset: i64) -> Scanned {
    let mut scanned = Scanned::default();
    let mut at = 0;
    while at < content.len() {
        if let Some(header) = batch_at(content, at, next_offset, None) {
            let len = header.total_len() as usize;
            next_offset = header.last_offset() + 1;
            scanned.batches.push((header, at as u64));
            at += len;
            continue;
        }
        match resync(content, at, next_offset) {
            Some(next) => {
                scanned.damaged.push(at as u64..next as u64);
                at = next;
            }
            None => {
                scanned.unreadable_tail = Some(at as u64);
                break;
            }
        }
    }
    scanned
}

/// The header of a whole, CRC-valid batch at `at` starting at or after `next_offset` (and, when
/// resynchronising, at most `max_gap` offsets after it).
fn batch_at(
    content: &[u8],
    at: usize,
    next_offset: i64,
    max_gap: Option<i64>,
) -> Option<BatchHeader> {
    let rest = &content[at..];
    let header = BatchHeader::parse(rest).ok()?;
    let len = usize::try_from(header.total_len()).ok()?;
    if len < HEADER_LEN || len > rest.len() || header.base_offset < next_offset {
        return None;
    }
    if max_gap.is_some_and(|gap| header.base_offset - next_offset > gap) {
        return None;
    }
    validate_single_batch(&rest[..len]).ok()
}

/// The position of the first readable batch after the unreadable one at `from`. Every record
/// takes more than one byte, so a batch found `n` bytes further on cannot start more than `n`
/// offsets later: that bound, the magic byte and the CRC keep a false match out.
fn resync(content: &[u8], from: usize, next_offset: i64) -> Option<usize> {
    (from + 1..content.len().saturating_sub(HEADER_LEN - 1))
        .filter(|&at| content[at + 16] == 2)
        .find(|&at| batch_at(content, at, next_offset, Some((at - from) as i64)).is_some())
}

/// A stored batch of `count` records at `base_offset` that recovery reads (a valid header and
/// CRC; the records are not decoded).
#[cfg(test)]
pub fn batch_bytes(base_offset: i64, count: i32) -> Vec<u8> {
    batch_bytes_of_len(base_offset, count, HEADER_LEN + 10)
}

/// [`batch_bytes`] padded to `len` bytes.
#[cfg(test)]
pub fn batch_bytes_of_len(base_offset: i64, count: i32, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    let len = bytes.len() as i32 - 12;
    bytes[..8].copy_from_slice(&base_offset.to_be_bytes());
    bytes[8..12].copy_from_slice(&len.to_be_bytes());
    bytes[16] = 2;
    bytes[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    bytes[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = protocol::batch::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(scanned: &Scanned) -> Vec<i64> {
        scanned.batches.iter().map(|(h, _)| h.base_offset).collect()
    }

    #[test]
    fn a_torn_last_write_is_an_unreadable_tail() {
        let mut content = batch_bytes(0, 2);
        content.extend(batch_bytes(2, 3));
        content.extend(&batch_bytes(5, 1)[..30]);
        let scanned = scan(&content, 0);
        assert_eq!(offsets(&scanned), vec![0, 2]);
        assert!(scanned.damaged.is_empty());
        assert_eq!(scanned.unreadable_tail, Some(2 * 71));
    }

    #[test]
    fn damage_in_the_middle_is_skipped_whether_or_not_its_length_survived() {
        for flipped in [20, 9] {
            let mut content = batch_bytes(0, 2);
            content.extend(batch_bytes(2, 3));
            content.extend(batch_bytes(5, 1));
            content[71 + flipped] ^= 0x40; // in the attributes (CRC) or the length field
            let scanned = scan(&content, 0);
            assert_eq!(offsets(&scanned), vec![0, 5], "flipped byte {flipped}");
            assert_eq!(scanned.damaged, vec![71..142]);
            assert_eq!(scanned.unreadable_tail, None);
        }
    }

    #[test]
    fn segment_names_sort_as_offsets() {
        assert_eq!(file_name(3, 42), "3-00000000000000000042.log");
        assert_eq!(
            parse_file_name("3-00000000000000000042.log"),
            Some((3, 42, 0))
        );
        assert_eq!(
            generation_file_name(3, 42, 2),
            "3-00000000000000000042.2.log"
        );
        assert_eq!(
            parse_file_name("3-00000000000000000042.2.log"),
            Some((3, 42, 2))
        );
        assert_eq!(parse_file_name("3-00000000000000000042.0.log"), None);
        assert_eq!(parse_file_name("3.log"), None);
        assert_eq!(parse_file_name("3-42.log"), None);
    }
}
