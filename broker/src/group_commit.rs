//! Group commit: produces with acks=all that wait for the disk at the same moment share one
//! fsync.
//!
//! Each waiter knows the position its append reached. The first one that finds no sync running
//! becomes the leader: it syncs everything written so far (its own append and every append
//! made before it started), publishes the position reached, and wakes the others. A waiter whose
//! append came after the leader had started waits for the next round and may lead it.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::file_pool::FileSlot;

#[derive(Debug, Clone, Copy, Default)]
struct Synced {
    position: u64,
    failed: bool,
}

#[derive(Debug)]
pub struct GroupCommit {
    synced: watch::Sender<Synced>,
    leading: AtomicBool,
    syncs: AtomicU64,
}

impl Default for GroupCommit {
    fn default() -> Self {
        Self {
            synced: watch::Sender::new(Synced::default()),
            leading: AtomicBool::new(false),
            syncs: AtomicU64::new(0),
        }
    }
}

/// Ends a leader's round however it ends (a cancelled waiter included), so the next waiter can
/// lead: without it, a connection closed mid-sync would leave every later produce waiting.
struct Leading<'a>(&'a GroupCommit);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.0.leading.store(false, Ordering::Release);
        self.0.synced.send_modify(|_| {});
    }
}

impl GroupCommit {
    /// Returns once position `target` is on disk. `sync_point` gives the position written so
    /// far and the file whose sync covers it; it is called by the leader only.
    pub async fn wait(
        &self,
        target: u64,
        sync_point: impl Fn() -> (u64, Arc<FileSlot>),
    ) -> io::Result<()> {
        let mut changes = self.synced.subscribe();
        loop {
            let synced = *changes.borrow_and_update();
            if synced.failed {
                return Err(io::Error::other("an earlier sync of this partition failed"));
            }
            if synced.position >= target {
                return Ok(());
            }
            if self
                .leading
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                let round = Leading(self);
                let (position, slot) = sync_point();
                let result = sync_blocking(slot).await;
                self.syncs.fetch_add(1, Ordering::Relaxed);
                self.synced.send_modify(|s| match &result {
                    Ok(()) => s.position = s.position.max(position),
                    Err(_) => s.failed = true,
                });
                drop(round);
                result?;
                continue;
            }
            // The sender lives as long as `self`: `changed` only returns on a new value.
            let _ = changes.changed().await;
        }
    }

    /// Syncs issued so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

/// fdatasync on the blocking pool, so the runtime's workers keep serving other connections.
fn sync_blocking(slot: Arc<FileSlot>) -> impl Future<Output = io::Result<()>> {
    let task = tokio::task::spawn_blocking(move || slot.file()?.sync_data());
    async move { task.await.map_err(io::Error::other)? }
}
