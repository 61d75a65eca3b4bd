//! Starting the kernel's writeback of part of a file without waiting for it.
//!
//! The one call the workspace makes through `unsafe`: neither std nor rustix wraps
//! `sync_file_range`, and the call touches no memory of ours.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;

/// `sync_file_range(SYNC_FILE_RANGE_WRITE)` over `len` bytes from `offset`: the dirty pages
/// there are sent to the disk now, and the call returns without waiting for them. It makes
/// nothing durable (no device cache flush, no metadata): a later fdatasync still must run, and
/// finds those pages written or on their way.
#[cfg(target_os = "linux")]
pub fn start(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (
        libc::off64_t::try_from(offset),
        libc::off64_t::try_from(len),
    ) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: a system call on a descriptor that `file` keeps open for its duration; it reads
    // and writes no memory of this process.
    let ret = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Elsewhere there is no such call: the fdatasync that follows sends the pages itself.
#[cfg(not(target_os = "linux"))]
pub fn start(_file: &File, offset: u64, len: u64) -> io::Result<()> {
    match i64::try_from(offset).and(i64::try_from(len)) {
        Ok(_) => Ok(()),
        Err(_) => Err(io::Error::from(io::ErrorKind::InvalidInput)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn writeback_starts_on_a_written_range_and_refuses_a_range_past_i64() {
        let path = std::env::temp_dir().join(format!("writeback-test-{}", std::process::id()));
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.write_all_at(&[7; 64 << 10], 0).unwrap();
        start(&file, 0, 64 << 10).unwrap();
        let mut back = vec![0; 64 << 10];
        file.read_exact_at(&mut back, 0).unwrap();
        assert!(back.iter().all(|b| *b == 7));
        let refused = start(&file, u64::MAX, 1).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
        std::fs::remove_file(&path).unwrap();
    }
}
