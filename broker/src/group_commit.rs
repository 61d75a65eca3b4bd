//! Group commit for the whole data directory: one round of syncs covers every append made
//! before it started, in every partition, from every connection.
//!
//! An append queues its file for the next round (once per file per round: an append to a file
//! already queued only reads that file's round number) and gets that round's number, its ticket.
//! A round takes the whole queue, syncs each file on a blocking thread (never on the runtime's
//! workers) and publishes its number. Appends made while a round runs queue for the next one,
//! which starts as soon as the running one ends: so under load each round covers everything
//! that arrived during the previous sync, and the number of syncs follows the disk, not the
//! number of produces.
//!
//! Rounds are started by whoever needs one first: a produce that must be synced before it is
//! answered (`flush.messages`, or a transaction marker), or the background loop, once the
//! oldest queued file has waited its `flush.ms` ([`UNSET_FLUSH_WITHIN`] when unset). A failed sync takes the
//! whole data directory offline, as Kafka's `LogDirFailureChannel` does with a log directory:
//! after a failed fsync the kernel may have dropped the dirty pages, so nothing written to it
//! can be acknowledged any more.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// A file a round can sync: the segment files of [`crate::file_pool`].
pub trait Syncable: Send + Sync + std::fmt::Debug {
    /// The round this file is queued for, 0 when none.
    fn queued_round(&self) -> &AtomicU64;
    /// fdatasync; `Ok` when the file was deleted since (nothing left to make durable).
    fn sync_data(self: Arc<Self>) -> io::Result<()>;
}

/// What the next round will sync.
#[derive(Debug)]
struct Queue {
    /// The number of the round that will take this queue; rounds count from 1.
    round: u64,
    files: Vec<Arc<dyn Syncable>>,
    /// Directories with a new entry (a segment created at a roll): the entry is durable only
    /// once the directory is synced.
    dirs: Vec<PathBuf>,
    /// When the background loop must start the round at the latest (the earliest `flush.ms`).
    due: Option<Instant>,
}

/// How soon the background syncs a write when `flush.ms` is unset (Kafka's default). Kafka
/// leaves such writes to the kernel's writeback; syncing them as soon as the previous round ended
/// kept an fdatasync running beside any steady stream of writes and cost 1 MiB batches two
/// fifths of their throughput. Within a second, a power cut takes at most about the last second
/// of acknowledged writes, against the kernel's 30 s.
pub const UNSET_FLUSH_WITHIN: Duration = Duration::from_secs(1);

/// The broker's `log.flush.interval.messages` and `log.flush.interval.ms`, the defaults of
/// the topic configs `flush.messages` and `flush.ms`; `None` is Kafka's default (unset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushDefaults {
    pub messages: Option<u64>,
    pub ms: Option<u64>,
}

#[derive(Debug)]
pub struct GroupCommit {
    pub defaults: FlushDefaults,
    queue: Mutex<Queue>,
    /// The last round finished.
    done: watch::Sender<u64>,
    failed: AtomicBool,
    /// A round is running; at most one at a time.
    leading: AtomicBool,
    /// Wakes the background loop when the queue gets its first file or an earlier due time.
    queued: Notify,
    rounds: AtomicU64,
    file_syncs: AtomicU64,
}

impl GroupCommit {
    pub fn new(defaults: FlushDefaults) -> Self {
        Self {
            defaults,
            queue: Mutex::new(Queue {
                round: 1,
                files: Vec::new(),
                dirs: Vec::new(),
                due: None,
            }),
            done: watch::Sender::new(0),
            failed: AtomicBool::new(false),
            leading: AtomicBool::new(false),
            queued: Notify::new(),
            rounds: AtomicU64::new(0),
            file_syncs: AtomicU64::new(0),
        }
    }
}

/// Ends a round however it ends (a cancelled leader included), so the next one can start:
/// without it, a connection closed mid-sync would leave every later produce waiting.
struct Leading<'a>(&'a GroupCommit);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.0.leading.store(false, Ordering::Release);
        self.0.done.send_modify(|_| {});
    }
}

impl GroupCommit {
    /// Records that `slot`'s file was just written (the write has returned) and that the data
    /// must be synced within `within`; returns the round whose end covers that write.
    pub fn written<F: Syncable + 'static>(&self, file: &Arc<F>, within: Duration) -> u64 {
        // Rounds clear a file's mark before syncing it: a mark seen here is that of a round
        // whose sync has not started yet, so it covers the write made before.
        let mark = file.queued_round();
        let round = mark.load(Ordering::SeqCst);
        if round != 0 {
            return round;
        }
        let mut queue = self.queue.lock();
        let round = mark.load(Ordering::SeqCst);
        if round != 0 {
            return round;
        }
        queue.files.push(file.clone());
        mark.store(queue.round, Ordering::SeqCst);
        self.due_within(&mut queue, within);
        queue.round
    }

    /// Records that an entry was created in `dir`; returns the round that makes it durable.
    pub fn entry_created(&self, dir: &Path, within: Duration) -> u64 {
        let mut queue = self.queue.lock();
        if !queue.dirs.iter().any(|d| d == dir) {
            queue.dirs.push(dir.to_path_buf());
        }
        self.due_within(&mut queue, within);
        queue.round
    }

    fn due_within(&self, queue: &mut Queue, within: Duration) {
        let due = Instant::now() + within;
        if queue.due.is_none_or(|d| due < d) {
            queue.due = Some(due);
            self.queued.notify_one();
        }
    }

    /// The round that covers everything written so far.
    pub fn pending(&self) -> u64 {
        self.queue.lock().round
    }

    /// True once a sync failed: nothing more is appended or acknowledged.
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Returns once round `ticket` has ended, starting rounds while none is running.
    pub async fn wait(&self, ticket: u64) -> io::Result<()> {
        let mut changes = self.done.subscribe();
        loop {
            let done = *changes.borrow_and_update();
            if self.is_failed() {
                return Err(io::Error::other(
                    "an earlier sync of the data directory failed",
                ));
            }
            if done >= ticket {
                return Ok(());
            }
            if !self.lead().await {
                // The sender lives as long as `self`: `changed` only returns on a new value.
                let _ = changes.changed().await;
            }
        }
    }

    /// Runs one round if none is running and the queue holds anything; false when another
    /// round was running.
    async fn lead(&self) -> bool {
        if self
            .leading
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        let running = Leading(self);
        let (round, files, dirs) = {
            let mut queue = self.queue.lock();
            let round = queue.round;
            queue.round += 1;
            queue.due = None;
            (
                round,
                std::mem::take(&mut queue.files),
                std::mem::take(&mut queue.dirs),
            )
        };
        for file in &files {
            file.queued_round().store(0, Ordering::SeqCst);
        }
        let count = files.len() as u64;
        let synced = tokio::task::spawn_blocking(move || sync_all(files, &dirs)).await;
        self.rounds.fetch_add(1, Ordering::Relaxed);
        self.file_syncs.fetch_add(count, Ordering::Relaxed);
        match synced.map_err(io::Error::other).and_then(|r| r) {
            Ok(()) => self.done.send_modify(|d| *d = round),
            Err(e) => {
                tracing::error!("data directory sync failed, no more appends: {e}");
                self.failed.store(true, Ordering::Release);
            }
        }
        drop(running);
        true
    }

    /// The background loop: starts a round once the queue's due time has come, until dropped
    /// (the broker selects it against its shutdown).
    pub async fn run_background(&self) {
        loop {
            let notified = self.queued.notified();
            let due = self.queue.lock().due;
            match due {
                None => notified.await,
                Some(at) if at > Instant::now() => {
                    // A file queued meanwhile may be due earlier: look again when told.
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = notified => {}
                    }
                }
                Some(_) => {
                    let mut changes = self.done.subscribe();
                    if !self.lead().await {
                        let _ = changes.changed().await;
                    }
                }
            }
            if self.is_failed() {
                return;
            }
        }
    }

    /// Returns once round `round` has ended, starting none.
    #[cfg(test)]
    pub async fn ended(&self, round: u64) {
        let mut changes = self.done.subscribe();
        while *changes.borrow_and_update() < round {
            let _ = changes.changed().await;
        }
    }

    /// Rounds run so far.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// File syncs issued so far (each round syncs each of its files once).
    pub fn file_syncs(&self) -> u64 {
        self.file_syncs.load(Ordering::Relaxed)
    }
}

/// fdatasync of each file, then fsync of each directory with a new entry.
fn sync_all(files: Vec<Arc<dyn Syncable>>, dirs: &[PathBuf]) -> io::Result<()> {
    for file in files {
        file.sync_data()?;
    }
    for dir in dirs {
        match crate::durable::sync_dir(dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}
