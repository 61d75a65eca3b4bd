//! Group commit for the whole data directory: one round of syncs covers every append made
//! before it started, in every partition, from every connection.
//!
//! An append queues its file for the next round (once per file per round: an append to a file
//! already queued only reads that file's round number) and gets that round's number, its ticket.
//! A round takes the whole queue, syncs each file and publishes its number. Rounds run on one
//! blocking thread at a time, the syncer, never on the runtime's workers; the syncer goes on
//! with the next round while anyone waits for it, so back-to-back rounds cost no trip through
//! the runtime.
//!
//! Before such a next round the syncer gathers: it waits until as many appends are queued as
//! were waiting when the last round ended, at most as long as that round's sync took (and at
//! most [`GATHER_AT_MOST`]). Without it, a producer with five batches in flight splits them
//! over two rounds (the answered ones come back just after the next round started), so each
//! sync covers two or three batches instead of five; this is PostgreSQL's `commit_delay`,
//! sized by what the last round saw.
//!
//! Rounds are started by whoever needs one first: a produce that must be synced before it is
//! answered (`flush.messages`, or a transaction marker), or the background loop, once the
//! oldest queued file has waited its `flush.ms` ([`UNSET_FLUSH_WITHIN`] when unset). A failed
//! sync takes the whole data directory offline, as Kafka's `LogDirFailureChannel` does with a
//! log directory: after a failed fsync the kernel may have dropped the dirty pages, so nothing
//! written to it can be acknowledged any more.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};
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
    /// The highest round someone waits for: the syncer goes on while it is not yet taken.
    requested: u64,
    /// Left by the last round, `None` before the first.
    gather: Option<Gather>,
}

/// How soon the background syncs a write when `flush.ms` is unset (Kafka's default): within the
/// age at which the kernel writes a dirty page back by itself (`vm.dirty_expire_centisecs`, 30 s
/// by default), which is all Kafka's default relies on (Kafka syncs no write on a timer, only a
/// segment it rolls). A tighter bound kept an fdatasync beside any steady stream of writes: 1 s
/// cost 1 MiB batches a fifth to a third of their throughput, and a round as soon as the previous
/// one ended two fifths. A power cut takes what the kernel has not written back, as with Kafka.
pub const UNSET_FLUSH_WITHIN: Duration = Duration::from_secs(30);

/// The longest a round gathers. Large batches take a good part of a sync just to arrive (five
/// of 1 MiB about 3 ms against a 5 ms sync here): gathering all of them before syncing cost
/// such producers a sixth of their throughput, syncing while the rest arrives does not.
const GATHER_AT_MOST: Duration = Duration::from_millis(1);

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
    /// A syncer is running; at most one at a time.
    leading: AtomicBool,
    /// Appends since the queue was last taken, files already queued included.
    appends: AtomicU64,
    /// The syncer waits for appends on `arrived` (with the queue's lock).
    gathering: AtomicBool,
    arrived: Condvar,
    /// Wakes the background loop when the queue gets its first file or an earlier due time.
    queued: Notify,
    rounds: AtomicU64,
    file_syncs: AtomicU64,
    /// How long the next round may gather after a sync that took the given time.
    gather_for: fn(Duration) -> Duration,
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
                requested: 0,
                gather: None,
            }),
            done: watch::Sender::new(0),
            failed: AtomicBool::new(false),
            leading: AtomicBool::new(false),
            appends: AtomicU64::new(0),
            gathering: AtomicBool::new(false),
            arrived: Condvar::new(),
            queued: Notify::new(),
            rounds: AtomicU64::new(0),
            file_syncs: AtomicU64::new(0),
            gather_for: |sync| sync.min(GATHER_AT_MOST),
        }
    }
}

/// Ends a syncer however it ends (a panicked sync, or a blocking task the runtime dropped
/// unrun), so that the next one can start: without it every later produce would wait for a
/// round that never comes.
struct Leading(Arc<GroupCommit>);

impl Drop for Leading {
    fn drop(&mut self) {
        self.0.leading.store(false, Ordering::SeqCst);
        // A waiter whose request came after this syncer's last look starts the next one.
        self.0.done.send_modify(|_| {});
    }
}

/// What a round leaves the next: how many appends to gather before starting, until when.
#[derive(Debug, Clone, Copy)]
struct Gather {
    /// The appends the round took and those made while it synced: with every answer synced
    /// first, the producers it answered (who send again as soon as they read the answer) and
    /// those still waiting. Appends nobody waits on count too; the time bound covers them.
    appends: u64,
    /// The round's end plus its own duration, at most [`GATHER_AT_MOST`] more: waiting longer
    /// than one sync for a producer that may not come back costs more than the sync it saves.
    until: std::time::Instant,
}

impl GroupCommit {
    /// Records that `file` was just written (the write has returned) and that the data must be
    /// synced within `within`; returns the round whose end covers that write.
    pub fn written<F: Syncable + 'static>(&self, file: &Arc<F>, within: Duration) -> u64 {
        self.appends.fetch_add(1, Ordering::SeqCst);
        let round = self.queue_file(file, within);
        if self.gathering.load(Ordering::SeqCst) {
            // Under the lock, so the gathering syncer is either waiting or yet to look.
            let _queue = self.queue.lock();
            self.arrived.notify_one();
        }
        round
    }

    /// Queues `file` for the next round unless it is queued already; returns its round.
    fn queue_file<F: Syncable + 'static>(&self, file: &Arc<F>, within: Duration) -> u64 {
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

    /// Returns once round `ticket` has ended, starting a syncer while none runs.
    pub async fn wait(self: &Arc<Self>, ticket: u64) -> io::Result<()> {
        self.wait_gathering(ticket, true).await
    }

    async fn wait_gathering(self: &Arc<Self>, ticket: u64, gather: bool) -> io::Result<()> {
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
            self.request(ticket, gather);
            // The sender lives as long as `self`: `changed` only returns on a new value.
            let _ = changes.changed().await;
        }
    }

    /// Asks for round `ticket` and starts a syncer if none runs. A running one sees the
    /// request when its round ends and goes on with the next.
    fn request(self: &Arc<Self>, ticket: u64, gather: bool) {
        let mut queue = self.queue.lock();
        queue.requested = queue.requested.max(ticket);
        if self
            .leading
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return;
        }
        let leading = Leading(self.clone());
        // Taken here when nothing is worth gathering, so a round asked for has started (and
        // holds what was written before the ask) by the time this returns.
        let taken = (!gather || self.gathered(&queue)).then(|| self.take(&mut queue));
        drop(queue);
        // The guard moves along: it ends the syncer when the closure ends or is dropped unrun.
        tokio::task::spawn_blocking(move || leading.0.sync_rounds(taken));
    }

    /// True when the next round need not wait for more appends.
    fn gathered(&self, queue: &Queue) -> bool {
        queue.gather.is_none_or(|gather| {
            self.appends.load(Ordering::SeqCst) >= gather.appends
                || std::time::Instant::now() >= gather.until
        })
    }

    /// Takes the queue for its round.
    fn take(&self, queue: &mut Queue) -> Taken {
        let round = queue.round;
        queue.round += 1;
        queue.due = None;
        let files = std::mem::take(&mut queue.files);
        for file in &files {
            file.queued_round().store(0, Ordering::SeqCst);
        }
        Taken {
            round,
            appends: self.appends.swap(0, Ordering::SeqCst),
            files,
            dirs: std::mem::take(&mut queue.dirs),
        }
    }

    /// The syncer, on a blocking thread: runs `first` (or gathers a round), then the next
    /// round for as long as someone waits for it, so that back-to-back rounds cost no trip
    /// through the async runtime.
    fn sync_rounds(&self, first: Option<Taken>) {
        let mut next = first;
        loop {
            let taken = match next.take() {
                Some(taken) => taken,
                None => {
                    let mut queue = self.queue.lock();
                    self.gather_appends(&mut queue);
                    self.take(&mut queue)
                }
            };
            let Taken {
                round,
                appends,
                files,
                dirs,
            } = taken;
            let started = std::time::Instant::now();
            let count = files.len() as u64;
            let synced = sync_all(files, &dirs);
            let ended = std::time::Instant::now();
            self.rounds.fetch_add(1, Ordering::Relaxed);
            self.file_syncs.fetch_add(count, Ordering::Relaxed);
            if let Err(e) = synced {
                tracing::error!("data directory sync failed, no more appends: {e}");
                self.failed.store(true, Ordering::Release);
                return;
            }
            let go_on = {
                let mut queue = self.queue.lock();
                queue.gather = Some(Gather {
                    appends: appends + self.appends.load(Ordering::SeqCst),
                    until: ended + (self.gather_for)(ended - started),
                });
                queue.requested >= queue.round
            };
            self.done.send_modify(|d| *d = round);
            if !go_on {
                return;
            }
        }
    }

    /// Waits, holding `queue` between looks, until the appends of the last round's producers
    /// are back or the wait would cost more than a sync.
    fn gather_appends(&self, queue: &mut MutexGuard<'_, Queue>) {
        let Some(gather) = queue.gather else {
            return;
        };
        self.gathering.store(true, Ordering::SeqCst);
        while self.appends.load(Ordering::SeqCst) < gather.appends {
            let now = std::time::Instant::now();
            if now >= gather.until {
                break;
            }
            self.arrived.wait_for(queue, gather.until - now);
        }
        self.gathering.store(false, Ordering::SeqCst);
    }

    /// The background loop: starts a round once the queue's due time has come, until dropped
    /// (the broker selects it against its shutdown).
    pub async fn run_background(self: &Arc<Self>) {
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
                // Nobody waits on these writes: no gathering.
                Some(_) => {
                    let _ = self.wait_gathering(self.pending(), false).await;
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

/// A round's share of the queue.
struct Taken {
    round: u64,
    appends: u64,
    files: Vec<Arc<dyn Syncable>>,
    dirs: Vec<PathBuf>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct File {
        mark: AtomicU64,
    }

    impl Syncable for File {
        fn queued_round(&self) -> &AtomicU64 {
            &self.mark
        }

        fn sync_data(self: Arc<Self>) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_next_round_waits_for_the_appends_the_last_one_answered() {
        // A gathering window of an hour instead of one sync's time (microseconds for this
        // file), so that what is tested is what ends the wait, never how fast this machine is.
        let commit = Arc::new(GroupCommit {
            gather_for: |_| Duration::from_secs(3600),
            ..GroupCommit::new(FlushDefaults::default())
        });
        let file = Arc::new(File::default());
        let within = Duration::from_secs(60);
        // A producer's three batches in flight, synced by one round.
        let first: Vec<u64> = (0..3).map(|_| commit.written(&file, within)).collect();
        commit.wait(1).await.unwrap();
        // The syncer has ended (its round answered, nobody waiting for the next), so the next
        // round is started by the waiter below, as after any pause between rounds.
        while commit.leading.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        // Its answers bring two batches back at once and the third a moment later: the next
        // round waits for the third instead of leaving it for a round of its own.
        let early: Vec<u64> = (0..2).map(|_| commit.written(&file, within)).collect();
        let waiting = {
            let commit = commit.clone();
            tokio::spawn(async move { commit.wait(2).await })
        };
        tokio::task::yield_now().await;
        let late = commit.written(&file, within);
        waiting.await.unwrap().unwrap();
        assert_eq!((first, early, late), (vec![1; 3], vec![2; 2], 2));
        assert_eq!(commit.rounds(), 2);
    }
}
