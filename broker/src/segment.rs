//! A partition's log on disk (`--data-dir`): the stored batches, back to back, in one file.
//!
//! The bytes are exactly what fetch serves (batches with their assigned base offsets), so a
//! restart replays the file through the same header view the broker validates produces with. A
//! kill -9 can leave a torn last batch; it was never acknowledged with `acks=all` (those are
//! synced before the answer), so replay cuts the file back to the last whole, CRC-valid batch.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use protocol::batch::{split_batches, validate_single_batch, BatchHeader};
use tracing::warn;

#[derive(Debug)]
pub struct SegmentFile {
    file: File,
    path: PathBuf,
}

impl SegmentFile {
    /// A new, empty file (an existing one is emptied: the topic is new).
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Opens an existing file and returns its whole batches in order, cutting off anything after
    /// the last valid one.
    pub fn open(path: &Path) -> io::Result<(Self, Vec<(BatchHeader, Bytes)>)> {
        let mut content = Vec::new();
        File::open(path)?.read_to_end(&mut content)?;
        let content = Bytes::from(content);
        let mut batches = Vec::new();
        let mut valid_len = 0;
        for (_, batch) in split_batches(content.clone()) {
            let Ok(header) = validate_single_batch(&batch) else {
                break;
            };
            valid_len += batch.len();
            batches.push((header, batch));
        }
        let file = OpenOptions::new().append(true).open(path)?;
        if valid_len < content.len() {
            warn!(
                path = %path.display(),
                kept = valid_len,
                dropped = content.len() - valid_len,
                "cutting a torn or corrupt tail from a partition file"
            );
            file.set_len(valid_len as u64)?;
        }
        Ok((
            Self {
                file,
                path: path.to_path_buf(),
            },
            batches,
        ))
    }

    /// Appends one stored batch; with `sync`, returns only once it is on disk.
    pub fn append(&mut self, batch: &[u8], sync: bool) -> io::Result<()> {
        self.file.write_all(batch)?;
        if sync {
            self.file.sync_data()?;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_bytes(count: i32) -> Vec<u8> {
        let mut bytes = vec![0u8; protocol::batch::HEADER_LEN];
        let len = bytes.len() as i32 - 12;
        bytes[8..12].copy_from_slice(&len.to_be_bytes());
        bytes[16] = 2;
        bytes[23..27].copy_from_slice(&(count - 1).to_be_bytes());
        bytes[57..61].copy_from_slice(&count.to_be_bytes());
        let crc = protocol::batch::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    #[test]
    fn replays_whole_batches_and_cuts_a_torn_tail() {
        let dir = std::env::temp_dir().join(format!("segment-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("0.log");
        let mut file = SegmentFile::create(&path).unwrap();
        file.append(&batch_bytes(2), true).unwrap();
        file.append(&batch_bytes(3), false).unwrap();
        file.append(&batch_bytes(1)[..30], false).unwrap(); // a write cut short by kill -9
        drop(file);
        let (_, batches) = SegmentFile::open(&path).unwrap();
        let counts: Vec<i32> = batches.iter().map(|(h, _)| h.record_count).collect();
        assert_eq!(counts, vec![2, 3]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * 61);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
