//! Servers the bench runs in processes of their own, as workshops and integration tests run a
//! broker: the `broker` binary, and the raw loopback server (this binary in `--serve-raw` mode).
//!
//! Both print one stdout line ending in the address they bound. A server is *ready* when it
//! answers a first request (ApiVersions for the broker, one echo for the raw server), and the
//! time from spawn to that answer is its start-to-ready. A [`Spawned`] server is killed, by its
//! own PID only, when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::host::{Placement, ProcUsage};
use super::BenchError;

/// How long a server may take to print its address and answer; far above the 10 ms goal, so
/// only a broken or starved server trips it.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Which server a process is, and so how to ask whether it is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Broker,
    Raw,
}

pub struct Spawned {
    child: Child,
    pub addr: SocketAddr,
    /// From spawn to the first answered request.
    pub start_to_ready: Duration,
    /// CPU seconds at the last [`Spawned::checkpoint`], to report a case's own share.
    cpu_mark: f64,
}

impl Spawned {
    /// Starts `program args` with the placement's pinning and waits until it answers.
    pub async fn start(
        kind: Kind,
        program: &Path,
        args: &[&str],
        placement: Placement,
    ) -> Result<Self, BenchError> {
        let mut cmd = placement.server_command(program);
        cmd.args(args)
            // The raw server exits when its stdin closes, so it cannot outlive a bench that died.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // The broker's warnings still reach the terminal; its info lines would bury the table.
            .stderr(Stdio::inherit())
            .env("RUST_LOG", "warn")
            .env_remove("RUST_BACKTRACE");
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| BenchError::new(format!("cannot start {}: {e}", program.display())))?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let mut spawned = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            start_to_ready: Duration::ZERO,
            cpu_mark: 0.0,
        };
        let line = first_line(stdout).await.map_err(|why| {
            BenchError::new(format!("{} did not start: {why}", program.display()))
        })?;
        spawned.addr = line
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| {
                BenchError::new(format!(
                    "{} printed `{line}`, not an address",
                    program.display()
                ))
            })?;
        tokio::time::timeout(READY_TIMEOUT, first_answer(kind, spawned.addr))
            .await
            .map_err(|_| BenchError::new(format!("{} did not answer", program.display())))?
            .map_err(|e| BenchError::new(format!("{} did not answer: {e}", program.display())))?;
        spawned.start_to_ready = started.elapsed();
        Ok(spawned)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn usage(&self) -> Option<ProcUsage> {
        ProcUsage::of(self.pid())
    }

    /// The process's usage, with the CPU seconds spent since the previous checkpoint.
    pub fn checkpoint(&mut self) -> Option<(ProcUsage, f64)> {
        let usage = self.usage()?;
        let spent = usage.cpu_s - self.cpu_mark;
        self.cpu_mark = usage.cpu_s;
        Some((usage, spent))
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // SIGKILL to our own child: neither server keeps anything worth a graceful stop here.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the server's one stdout line on a thread (pipes are blocking), then keeps draining
/// stdout so a chatty server can never block on a full pipe.
async fn first_line(stdout: std::process::ChildStdout) -> Result<String, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let first = match reader.read_line(&mut line) {
            Ok(0) => Err("it exited before printing its address".to_string()),
            Ok(_) => Ok(line.trim().to_string()),
            Err(e) => Err(format!("cannot read its output: {e}")),
        };
        let _ = tx.send(first);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    match tokio::time::timeout(READY_TIMEOUT, rx).await {
        Ok(Ok(line)) => line,
        Ok(Err(_)) => Err("its output reader stopped".to_string()),
        Err(_) => Err(format!("no address within {READY_TIMEOUT:?}")),
    }
}

async fn first_answer(kind: Kind, addr: SocketAddr) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    match kind {
        Kind::Broker => api_versions(&mut stream).await,
        Kind::Raw => super::raw::client::echo_once(&mut stream).await,
    }
}

/// ApiVersions v0, written by hand: size, api key 18, version 0, correlation id, client id;
/// v0 has an empty body. The answer must carry our correlation id and error code 0.
pub async fn api_versions(stream: &mut TcpStream) -> std::io::Result<()> {
    const CORRELATION_ID: i32 = 0x0b_e7c4;
    let client_id = b"bench";
    let mut request = Vec::with_capacity(32);
    let size = 2 + 2 + 4 + 2 + client_id.len();
    request.extend_from_slice(&(size as i32).to_be_bytes());
    request.extend_from_slice(&18i16.to_be_bytes());
    request.extend_from_slice(&0i16.to_be_bytes());
    request.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    request.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    request.extend_from_slice(client_id);
    stream.write_all(&request).await?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await?;
    let size = i32::from_be_bytes(size);
    if !(6..=1 << 20).contains(&size) {
        return Err(invalid(format!("ApiVersions answer of {size} bytes")));
    }
    let mut body = vec![0u8; size as usize];
    stream.read_exact(&mut body).await?;
    let correlation_id = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let error_code = i16::from_be_bytes([body[4], body[5]]);
    if correlation_id != CORRELATION_ID || error_code != 0 {
        return Err(invalid(format!(
            "ApiVersions answered correlation id {correlation_id}, error code {error_code}"
        )));
    }
    Ok(())
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// The broker binary: `--broker-bin`, else `broker` next to this binary (where cargo puts both),
/// else `target/release/broker` under the current directory.
pub fn find_broker(explicit: Option<&Path>) -> Result<PathBuf, BenchError> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(BenchError::new(format!(
                "--broker-bin {}: no such file",
                path.display()
            )))
        };
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("broker")));
    let candidates: Vec<PathBuf> = beside
        .into_iter()
        .chain(std::iter::once(PathBuf::from("target/release/broker")))
        .collect();
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            BenchError::new(format!(
                "no broker binary at {}; build it with `cargo build --release -p broker`, or pass --broker-bin PATH",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ))
        })
}

/// This binary, to run the raw server from.
pub fn own_binary() -> Result<PathBuf, BenchError> {
    std::env::current_exe()
        .map_err(|e| BenchError::new(format!("cannot find the workshop binary itself: {e}")))
}
