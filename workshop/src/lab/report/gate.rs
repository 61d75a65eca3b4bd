//! The `--step` gate: where a lab waits, in front of a room, until someone lets it go on.
//!
//! A lab waits at the gate after each question (so the room can predict before the answer) and
//! before each phase. Anything may release it: a line on stdin ([`Gate::stdin`]), a button in a
//! browser, a test. A release that comes before the lab reaches the gate is kept (one, not a
//! count), so Enter pressed while a phase still computes reveals its answer as soon as it is
//! ready. Once the gate is [opened](Gate::open) (end of input) it never waits again, so a script
//! with no more input never hangs.

use std::io::BufRead;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

#[derive(Debug, Default)]
struct State {
    /// A release not yet used by a wait.
    released: bool,
    /// Every wait passes from now on.
    open: bool,
}

/// A gate, shared by every clone.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<(Mutex<State>, Condvar)>);

impl Gate {
    /// A closed gate: the first wait blocks until a release.
    pub fn new() -> Self {
        Self::default()
    }

    /// A gate that never waits (tests that want the `--step` stream without pausing).
    pub fn opened() -> Self {
        let gate = Self::new();
        gate.open();
        gate
    }

    /// A gate released by each line on stdin and opened for good at its end (or on an error).
    pub fn stdin() -> Self {
        let gate = Self::new();
        let feeder = gate.clone();
        // The thread outlives the lab when stdin stays open; it only ever blocks on a read, and
        // the process ends without waiting for it.
        let spawned = std::thread::Builder::new()
            .name("step-gate".into())
            .spawn(move || {
                let stdin = std::io::stdin();
                let mut line = String::new();
                loop {
                    line.clear();
                    match stdin.lock().read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => feeder.release(),
                    }
                }
                feeder.open();
            });
        if spawned.is_err() {
            // Without a reader nothing could release it: a run that cannot pause still runs.
            gate.open();
        }
        gate
    }

    /// Lets the current wait pass, or the next one if nobody waits.
    pub fn release(&self) {
        self.state().released = true;
        self.0 .1.notify_all();
    }

    /// Lets every wait pass, now and later.
    pub fn open(&self) {
        self.state().open = true;
        self.0 .1.notify_all();
    }

    /// Blocks until released (using the release up) or opened.
    pub fn wait(&self) {
        let mut state = self.state();
        while !state.open && !state.released {
            state = self
                .0
                 .1
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.released = false;
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0 .0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_wait_passes_once_per_release() {
        let gate = Gate::new();
        let (done, passed) = mpsc::channel();
        let waiter = gate.clone();
        std::thread::spawn(move || {
            waiter.wait();
            done.send(1).unwrap();
            waiter.wait();
            done.send(2).unwrap();
        });
        assert!(passed.recv_timeout(Duration::from_millis(50)).is_err());
        gate.release();
        assert_eq!(passed.recv_timeout(Duration::from_secs(5)), Ok(1));
        assert!(passed.recv_timeout(Duration::from_millis(50)).is_err());
        gate.release();
        assert_eq!(passed.recv_timeout(Duration::from_secs(5)), Ok(2));
    }

    #[test]
    fn an_early_release_is_kept_but_not_counted() {
        let gate = Gate::new();
        gate.release();
        gate.release();
        gate.wait();
        let (done, passed) = mpsc::channel();
        let waiter = gate.clone();
        std::thread::spawn(move || {
            waiter.wait();
            done.send(()).unwrap();
        });
        assert!(passed.recv_timeout(Duration::from_millis(50)).is_err());
        gate.open();
        assert!(passed.recv_timeout(Duration::from_secs(5)).is_ok());
    }

    #[test]
    fn an_opened_gate_never_waits() {
        let gate = Gate::opened();
        for _ in 0..3 {
            gate.wait();
        }
    }
}
