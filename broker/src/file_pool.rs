//! A bounded set of open partition files (`--data-dir`).
//!
//! A partition does not hold a file descriptor of its own: each segment has a [`FileSlot`] that
//! opens its file on first use and keeps it until the pool, full, closes the slot that was
//! opened longest ago. The pool also holds the [`GroupCommit`] that syncs its files. So a broker with more segments than the open-files limit allows still
//! creates, appends to and recovers every one of them. A use of a slot that is open takes only
//! that slot's lock; the pool's lock is taken when a file is opened, never on the hot path.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tracing::warn;

use crate::group_commit::{FlushDefaults, GroupCommit, Syncable};

/// The share of the process's open-files limit (RLIMIT_NOFILE) that partition files may take
/// by default; the rest stays for connections, the listener and the runtime.
const DEFAULT_SHARE: u64 = 2;
/// Fewer than this many files kept open would make every append reopen its file.
const MIN_OPEN: usize = 8;

#[derive(Debug)]
pub struct FilePool {
    capacity: usize,
    /// Files open now (a closed slot's `Drop` counts itself out without the lock).
    open: AtomicUsize,
    /// Slots in the order they were opened; stale entries (closed or dropped) are skipped.
    order: Mutex<VecDeque<Weak<FileSlot>>>,
    commit: Arc<GroupCommit>,
}

impl FilePool {
    /// A pool keeping at most `capacity` files open; `None`: half the soft open-files limit.
    /// Its files are synced by Kafka's default flush policy (see [`GroupCommit`]).
    pub fn new(capacity: Option<usize>) -> Arc<Self> {
        Self::with_flush(capacity, FlushDefaults::default())
    }

    /// A pool whose files are synced by the broker's `log.flush.interval.*` `defaults`.
    pub fn with_flush(capacity: Option<usize>, defaults: FlushDefaults) -> Arc<Self> {
        let capacity = capacity.unwrap_or_else(default_capacity).max(MIN_OPEN);
        Arc::new(Self {
            capacity,
            open: AtomicUsize::new(0),
            order: Mutex::new(VecDeque::new()),
            commit: Arc::new(GroupCommit::new(defaults)),
        })
    }

    /// The group commit that syncs the pool's files.
    pub fn commit(&self) -> &Arc<GroupCommit> {
        &self.commit
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Files open at this moment.
    pub fn open_files(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Opens `slot`'s file, first closing the oldest slots while the pool is full. When the
    /// system refuses a descriptor anyway (the limit is shared with sockets), half the pool is
    /// closed and the open tried once more.
    fn open(&self, slot: &Arc<FileSlot>) -> io::Result<Arc<File>> {
        let mut order = self.order.lock();
        if let Some(file) = slot.file.lock().clone() {
            return Ok(file);
        }
        while self.open.load(Ordering::Relaxed) >= self.capacity && !order.is_empty() {
            close_oldest(&mut order);
        }
        let file = match open_rw(&slot.path) {
            Err(e) if is_out_of_descriptors(&e) && !order.is_empty() => {
                let keep = self.open.load(Ordering::Relaxed) / 2;
                warn!(
                    open = self.open.load(Ordering::Relaxed),
                    "out of file descriptors; closing half of the partition files"
                );
                while self.open.load(Ordering::Relaxed) > keep && !order.is_empty() {
                    close_oldest(&mut order);
                }
                open_rw(&slot.path)?
            }
            other => other?,
        };
        let file = Arc::new(file);
        *slot.file.lock() = Some(file.clone());
        self.open.fetch_add(1, Ordering::Relaxed);
        if order.len() > 2 * self.capacity {
            order.retain(|weak| weak.upgrade().is_some_and(|s| s.file.lock().is_some()));
        }
        order.push_back(Arc::downgrade(slot));
        Ok(file)
    }
}

fn close_oldest(order: &mut VecDeque<Weak<FileSlot>>) {
    if let Some(slot) = order.pop_front().and_then(|weak| weak.upgrade()) {
        slot.close();
    }
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    // EMFILE (this process) and ENFILE (the whole system).
    matches!(e.raw_os_error(), Some(24) | Some(23))
}

fn default_capacity() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1 << 20);
    usize::try_from(limit / DEFAULT_SHARE).unwrap_or(usize::MAX)
}

/// One segment file, open while it is in use and the pool has room for it.
#[derive(Debug)]
pub struct FileSlot {
    path: PathBuf,
    file: Mutex<Option<Arc<File>>>,
    pool: Arc<FilePool>,
    /// The group commit round that will sync this file, 0 when none (see [`Syncable`]).
    queued_round: AtomicU64,
}

impl FileSlot {
    pub fn new(pool: &Arc<FilePool>, path: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            path,
            file: Mutex::new(None),
            pool: pool.clone(),
            queued_round: AtomicU64::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, opened (and counted in the pool) if it is not. A reader keeps its `Arc`
    /// while it reads, so a slot closed meanwhile closes its descriptor only afterwards.
    pub fn file(self: &Arc<Self>) -> io::Result<Arc<File>> {
        if let Some(file) = self.file.lock().clone() {
            return Ok(file);
        }
        self.pool.open(self)
    }

    /// Gives the descriptor back to the pool; the next use opens the file again.
    pub fn close(&self) {
        if self.file.lock().take().is_some() {
            self.pool.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Syncable for FileSlot {
    fn queued_round(&self) -> &AtomicU64 {
        &self.queued_round
    }

    /// A file deleted since it was written (retention, a deleted topic) is skipped.
    fn sync_data(self: Arc<Self>) -> io::Result<()> {
        match self.file() {
            Ok(file) => file.sync_data(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for FileSlot {
    fn drop(&mut self) {
        if self.file.get_mut().take().is_some() {
            self.pool.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_at_most_its_capacity_open_and_reopens_on_use() {
        let dir = std::env::temp_dir().join(format!("file-pool-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pool = FilePool::new(Some(MIN_OPEN));
        let slots: Vec<Arc<FileSlot>> = (0..3 * MIN_OPEN)
            .map(|i| {
                let path = dir.join(format!("{i}.log"));
                File::create(&path).unwrap();
                FileSlot::new(&pool, path)
            })
            .collect();
        for slot in &slots {
            use std::os::unix::fs::FileExt;
            slot.file().unwrap().write_all_at(b"x", 0).unwrap();
            assert!(pool.open_files() <= MIN_OPEN);
        }
        assert_eq!(pool.open_files(), MIN_OPEN);
        // The first slot was closed long ago; using it opens it again.
        let mut byte = [0u8; 1];
        use std::os::unix::fs::FileExt;
        slots[0]
            .file()
            .unwrap()
            .read_exact_at(&mut byte, 0)
            .unwrap();
        assert_eq!(&byte, b"x");
        assert_eq!(pool.open_files(), MIN_OPEN);
        drop(slots);
        assert_eq!(pool.open_files(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
