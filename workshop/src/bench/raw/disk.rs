//! The disk's own limit for the broker's write pattern, measured in the directory the broker
//! writes to: appends of one group commit round's bytes to a new file, each followed by
//! fdatasync. No broker can acknowledge synced writes of that size faster than this loop makes
//! them durable, so it is the ceiling of the produce lines synced before each answer.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// What one run moved.
#[derive(Debug, Clone, Copy)]
pub struct Synced {
    pub bytes: u64,
    pub syncs: u64,
    pub elapsed: Duration,
}

impl Synced {
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / (1u64 << 20) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn syncs_per_s(&self) -> f64 {
        self.syncs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Appends `write` bytes then fdatasync, until `total` bytes or `deadline`, to a file in `dir`
/// that is removed afterwards.
pub fn append_and_sync(
    dir: &Path,
    write: usize,
    total: u64,
    deadline: Duration,
) -> io::Result<Synced> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("disk-probe-{write}.log"));
    let mut file = File::create(&path)?;
    // Not zeros: a file system that compresses or skips zeroed blocks would flatter the disk.
    let block: Vec<u8> = (0..write).map(|i| (i * 31 + 7) as u8).collect();
    let started = Instant::now();
    let mut synced = Synced {
        bytes: 0,
        syncs: 0,
        elapsed: Duration::ZERO,
    };
    let result = (|| {
        while synced.bytes < total && started.elapsed() < deadline {
            file.write_all(&block)?;
            file.sync_data()?;
            synced.bytes += write as u64;
            synced.syncs += 1;
        }
        Ok(())
    })();
    synced.elapsed = started.elapsed();
    drop(file);
    let _ = std::fs::remove_file(&path);
    result.map(|()| synced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_is_counted_and_the_file_removed() {
        let dir = std::env::temp_dir().join(format!("disk-probe-test-{}", std::process::id()));
        let run = append_and_sync(&dir, 4096, 5 * 4096, Duration::from_secs(600)).unwrap();
        assert_eq!((run.bytes, run.syncs), (5 * 4096, 5));
        assert!(!dir.join("disk-probe-4096.log").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
