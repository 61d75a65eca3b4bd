//! Ctrl-C and SIGTERM during a lab: the lab stops where it is, and what it created on a cluster
//! is deleted before the process ends.
//!
//! The binary listens for both signals on a thread of its own ([`Stop::on_signals`]) for the
//! whole run; a lab's phases race against [`Stop::requested`] (see [`crate::lab::target::on_cluster`]),
//! so a signal ends whatever the lab waits on: a request and its retries, a rebalance, a
//! `--step` pause (the gates it holds are opened). A second signal ends the process at once,
//! without cleaning up, for a user who would rather leave a topic behind than wait.
//!
//! While no lab watches the stop (a pure computation like `rehash`, before a cluster is
//! opened), a signal ends the process at once, as if no handler were installed.
//!
//! In-process runs (tests, a browser view) get [`Stop::never`], or a `Stop` they trigger with
//! [`Stop::request`]: the library never installs signal handlers by itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use client::signals::Signals;

use crate::lab::report::Gate;

/// A stop that every clone sees.
#[derive(Clone)]
pub struct Stop(Arc<Inner>);

struct Inner {
    asked: watch::Sender<bool>,
    /// Opened when a stop is asked for, so a narrator waiting at one lets the lab go on to
    /// where the stop is seen.
    gates: Mutex<Vec<Gate>>,
    /// Labs watching for the stop right now ([`Stop::watch`]).
    watchers: AtomicUsize,
}

/// A lab watching for the stop, until dropped.
pub struct Watching(Stop);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0 .0.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Stop {
    /// A stop that only [`request`](Self::request) triggers.
    pub fn never() -> Self {
        Stop(Arc::new(Inner {
            asked: watch::Sender::new(false),
            gates: Mutex::new(Vec::new()),
            watchers: AtomicUsize::new(0),
        }))
    }

    /// A stop triggered by SIGINT or SIGTERM (Ctrl-C only, off Unix). The second signal exits
    /// with 130 at once. If the signals cannot be watched the lab still runs, unstoppable but
    /// by the shell's own means.
    pub fn on_signals() -> Self {
        let stop = Self::never();
        let asked = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let Ok(runtime) = runtime else {
                    return;
                };
                runtime.block_on(async move {
                    let Ok(mut signals) = Signals::new() else {
                        return;
                    };
                    signals.next().await;
                    if asked.0.watchers.load(Ordering::SeqCst) == 0 {
                        // Nothing to clean up: end as the signal would without a handler.
                        std::process::exit(130);
                    }
                    asked.request();
                    signals.next().await;
                    eprintln!("workshop: error: stopped again: exiting without cleaning up");
                    std::process::exit(130);
                });
            });
        if let Err(e) = spawned {
            tracing::warn!(%e, "cannot watch for Ctrl-C; the lab runs to its end");
        }
        stop
    }

    /// Declares that a lab watches for the stop (and will clean up when it comes) until the
    /// guard is dropped.
    pub fn watch(&self) -> Watching {
        self.0.watchers.fetch_add(1, Ordering::SeqCst);
        Watching(self.clone())
    }

    /// Asks the lab to stop; what waits at a gate is let go.
    pub fn request(&self) {
        self.0.asked.send_replace(true);
        for gate in self.gates().iter() {
            gate.open();
        }
    }

    pub fn is_requested(&self) -> bool {
        *self.0.asked.borrow()
    }

    /// Returns once a stop was asked for (at once if it already was).
    pub async fn requested(&self) {
        let mut asked = self.0.asked.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = asked.wait_for(|asked| *asked).await;
    }

    /// Opens `gate` when a stop is asked for.
    pub fn opens(&self, gate: Gate) {
        if self.is_requested() {
            gate.open();
        }
        self.gates().push(gate);
    }

    fn gates(&self) -> std::sync::MutexGuard<'_, Vec<Gate>> {
        self.0.gates.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("requested", &self.is_requested())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_reaches_every_clone_and_opens_the_gates() {
        let stop = Stop::never();
        let gate = Gate::new();
        stop.opens(gate.clone());
        let waiter = stop.clone();
        let waiting = tokio::spawn(async move { waiter.requested().await });
        assert!(!stop.is_requested());
        stop.request();
        waiting.await.unwrap();
        assert!(stop.is_requested());
        // An opened gate never blocks again.
        gate.wait();
        gate.wait();
        // A gate added after the request is opened at once.
        let late = Gate::new();
        stop.opens(late.clone());
        late.wait();
        stop.requested().await;
    }
}
