//! The `broker` binary in a process of its own, for the tests that kill it (SIGKILL, not a
//! graceful shutdown) or start it under a lowered open-files limit.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

/// A running `broker --data-dir DIR`, killed when dropped (also when an assertion fails).
pub struct BrokerProcess {
    child: Child,
    /// Where it listens: the last word of its one line on stdout.
    pub addr: SocketAddr,
    /// Its stderr (the log), appended to across restarts.
    pub log: PathBuf,
}

/// How to start one.
#[derive(Debug, Clone)]
pub struct BrokerArgs<'a> {
    pub data_dir: &'a Path,
    pub listen: SocketAddr,
    /// Run under this RLIMIT_NOFILE (soft and hard), through `prlimit`.
    pub open_files: Option<u64>,
    pub extra: Vec<String>,
}

impl<'a> BrokerArgs<'a> {
    pub fn new(data_dir: &'a Path) -> Self {
        Self {
            data_dir,
            listen: "127.0.0.1:0".parse().unwrap(),
            open_files: None,
            extra: Vec::new(),
        }
    }
}

impl BrokerProcess {
    /// Starts the broker and waits for its address; `None` when it exits without one (it
    /// refused to start: the reason is in [`BrokerProcess::log`]'s file).
    pub fn try_start(args: &BrokerArgs<'_>) -> Option<Self> {
        let log = args.data_dir.with_extension("broker.log");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("the broker's log file");
        let broker = workspace_binary("broker");
        let mut command = match args.open_files {
            Some(limit) => {
                let mut command = Command::new("prlimit");
                command
                    .arg(format!("--nofile={limit}:{limit}"))
                    .arg("--")
                    .arg(&broker);
                command
            }
            None => Command::new(&broker),
        };
        let mut child = command
            .arg("--listen")
            .arg(args.listen.to_string())
            .arg("--data-dir")
            .arg(args.data_dir)
            .args(&args.extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("the broker binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("read the broker's stdout");
        // `broker listening on ADDR`: the address is the last word.
        match first.split_whitespace().last().map(str::parse) {
            Some(Ok(addr)) => Some(BrokerProcess { child, addr, log }),
            _ => {
                let _ = child.wait();
                None
            }
        }
    }

    pub fn start(args: &BrokerArgs<'_>) -> Self {
        Self::try_start(args).unwrap_or_else(|| {
            let log = std::fs::read_to_string(args.data_dir.with_extension("broker.log"));
            panic!("the broker did not start: {}", log.unwrap_or_default())
        })
    }

    /// SIGKILL, as `kill -9` does, then reaps the process.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary `package` of the workspace next to this test's own binary
/// (`target/<profile>/deps/...`), built first (or found up to date) by cargo, since `cargo test
/// -p tests` does not build the broker's binary. Built once per test binary: a restart loop
/// must not pay for a cargo run each time.
pub fn workspace_binary(package: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    built
        .entry(package.to_string())
        .or_insert_with(|| build_binary(package))
        .clone()
}

fn build_binary(package: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("tests run from target/<profile>/deps");
    let target_dir = dir.parent().expect("target/<profile> has a parent");
    // The `dev` profile builds into `debug`; every other profile into its own name.
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", package, "--bin", package])
        .args(["--profile", profile])
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build -p {package} failed");
    dir.join(format!("{package}{}", std::env::consts::EXE_SUFFIX))
}
