//! How a command waits on the cluster: every wait ends within `--timeout` with one line, and
//! Ctrl-C or SIGTERM ends it whatever it is waiting on (a request and its retries, a poll, a
//! refresh, the sleep between two), not only between waits.
//!
//! The library retries what may pass (a broker restarting, a coordinator moving), some of it in
//! nested loops; only the command knows how long its user is willing to wait, so the bound is
//! put around each wait here.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use client::signals::Signals;
use client::{Client, Error};

use super::Failure;

/// SIGINT and SIGTERM, watched for the whole run. The first asks the command to stop (a group
/// consumer then commits and leaves); a second ends the process at once.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Listens from now on. Must run inside the runtime.
    pub fn listen() -> std::io::Result<Self> {
        let (asked, rx) = watch::channel(false);
        let mut signals = Signals::new()?;
        tokio::spawn(async move {
            signals.next().await;
            asked.send_replace(true);
            signals.next().await;
            eprintln!("error: stopped again: exiting without committing or leaving");
            std::process::exit(130);
        });
        Ok(Self(rx))
    }

    /// Returns once a stop was asked for.
    pub async fn asked(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|asked| *asked).await.is_err() {
            // The signal task never ends; without it, no stop can come.
            std::future::pending::<()>().await;
        }
    }
}

/// What a wait ended with.
pub enum Waited<T> {
    Done(T),
    /// Ctrl-C or SIGTERM came first.
    Stopped,
}

/// A command's patience: its `--timeout`, the bootstrap its errors name, and the stop signal.
#[derive(Clone)]
pub struct Waiting {
    pub timeout: Duration,
    pub bootstrap: String,
    pub stop: Stop,
}

impl Waiting {
    /// One wait on the cluster: its result, `Stopped` on a signal, or a failure once the timeout
    /// passes.
    pub async fn on<T, E>(
        &self,
        wait: impl Future<Output = Result<T, E>>,
    ) -> Result<Waited<T>, Failure>
    where
        Failure: From<E>,
    {
        tokio::select! {
            biased;
            _ = self.stop.asked() => Ok(Waited::Stopped),
            done = tokio::time::timeout(self.timeout, wait) => match done {
                Ok(result) => Ok(Waited::Done(result?)),
                Err(_) => Err(self.timed_out()),
            },
        }
    }

    /// A wait after a stop was asked for (leaving a group, say): bounded by the timeout only,
    /// since the stop already came; a second signal still ends the process.
    pub async fn within<T, E>(&self, wait: impl Future<Output = Result<T, E>>) -> Result<T, Failure>
    where
        Failure: From<E>,
    {
        match tokio::time::timeout(self.timeout, wait).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(self.timed_out()),
        }
    }

    /// A command that does one thing: done, or stopped (exit 130), or timed out.
    pub async fn finish(
        &self,
        command: impl Future<Output = Result<(), Failure>>,
    ) -> Result<(), Failure> {
        match self.on(command).await? {
            Waited::Done(()) => Ok(()),
            Waited::Stopped => Err(Failure::interrupted()),
        }
    }

    /// Sleeps `how_long`; false when a stop came first.
    pub async fn pause(&self, how_long: Duration) -> bool {
        tokio::select! {
            _ = self.stop.asked() => false,
            _ = tokio::time::sleep(how_long) => true,
        }
    }

    pub fn timed_out(&self) -> Failure {
        Failure::new(format!(
            "no answer from the cluster within {} s (--timeout): is the broker at {} still \
             running?",
            self.timeout.as_secs(),
            self.bootstrap
        ))
    }
}

/// How often a group consumer's command checks that some broker still answers.
const PROBE_EVERY: Duration = Duration::from_secs(2);

/// Refusals in a row after which the cluster counts as gone: about as long as a plain consumer's
/// fetch retries take to give up on a dead broker (about 7 s).
const REFUSALS_FOR_GOOD: u32 = 3;

/// Returns the refusal once every broker the client knows, and the bootstrap list, refused a
/// connection `REFUSALS_FOR_GOOD` probes in a row. A group member looks for its coordinator for
/// ever, as Java's does; a command run from a script should say within seconds that nothing
/// listens any more, as it does without a group.
pub async fn refused_for_good(client: &Client) -> Error {
    let mut refusals = 0;
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        match client.any_connection().await {
            Err(Error::Transport(refused)) if refused.is_connection_refused() => {
                refusals += 1;
                if refusals >= REFUSALS_FOR_GOOD {
                    return Error::Transport(refused);
                }
            }
            _ => refusals = 0,
        }
    }
}
