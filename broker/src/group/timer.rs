//! The task that fires a group's timers: session expiries, the initial delay, the rebalance and
//! sync deadlines.
//!
//! One task per group, alive only while the group has a timer pending. It sleeps on tokio time
//! (so tests pause the clock and advance it) until the group's earliest deadline, or until a
//! request makes an earlier one, then fires what is due under the group's lock.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::state::Group;

/// A group behind its lock, with what its timer task needs.
#[derive(Debug)]
pub struct GroupCell {
    slot: Mutex<Slot>,
    /// Rung when a request sets a deadline earlier than the one the task sleeps towards.
    wake: Notify,
}

#[derive(Debug)]
struct Slot {
    group: Group,
    /// The deadline the task sleeps towards; `None` when no task runs.
    armed: Option<Instant>,
}

impl GroupCell {
    pub fn new(group: Group) -> Self {
        Self {
            slot: Mutex::new(Slot { group, armed: None }),
            wake: Notify::new(),
        }
    }

    /// Runs `f` on the group under its lock, then makes sure its timers will fire.
    pub fn with<R>(
        self: &Arc<Self>,
        shutdown: &CancellationToken,
        f: impl FnOnce(&mut Group, Instant) -> R,
    ) -> R {
        let mut slot = self.slot.lock();
        let result = f(&mut slot.group, Instant::now());
        if let Some(next) = slot.group.next_deadline() {
            match slot.armed {
                None if !shutdown.is_cancelled() => {
                    slot.armed = Some(next);
                    tokio::spawn(run(self.clone(), shutdown.clone()));
                }
                Some(armed) if next < armed => {
                    slot.armed = Some(next);
                    self.wake.notify_one();
                }
                _ => {}
            }
        }
        result
    }

    /// Reads the group under its lock, without touching timers.
    pub fn read<R>(&self, f: impl FnOnce(&Group) -> R) -> R {
        f(&self.slot.lock().group)
    }

    /// Changes the group under its lock without touching timers: for state that sets no
    /// deadline (committed offsets restored at start).
    pub fn read_mut<R>(&self, f: impl FnOnce(&mut Group) -> R) -> R {
        f(&mut self.slot.lock().group)
    }
}

async fn run(cell: Arc<GroupCell>, shutdown: CancellationToken) {
    loop {
        let deadline = {
            let mut slot = cell.slot.lock();
            let now = Instant::now();
            slot.group.on_timers(now);
            match slot.group.next_deadline() {
                Some(next) => {
                    slot.armed = Some(next);
                    next
                }
                // Nothing left to time: end, and let the next request start a new task.
                None => {
                    slot.armed = None;
                    return;
                }
            }
        };
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = cell.wake.notified() => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}
