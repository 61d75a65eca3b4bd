//! Ctrl-C and SIGTERM as one stream of stop requests, for the CLI and for programs built on the
//! library (the workshop binary) alike: both treat the two signals the same, and a second one as
//! "now".

/// SIGINT and SIGTERM (Ctrl-C only, off Unix), from [`new`](Self::new) on.
#[cfg(unix)]
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Starts listening. Must run inside a tokio runtime.
    pub fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Returns at the next signal.
    pub async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// SIGINT and SIGTERM (Ctrl-C only, off Unix), from [`new`](Self::new) on.
#[cfg(not(unix))]
pub struct Signals;

#[cfg(not(unix))]
impl Signals {
    pub fn new() -> std::io::Result<Self> {
        Ok(Self)
    }

    pub async fn next(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}
