//! Shared by the workshop's integration tests: the broker binary, started as a user would
//! start it, for the `--bootstrap` runs (the lab then sees it as any Kafka cluster).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// `broker --listen 127.0.0.1:0`, killed by its PID when dropped (also when an assertion fails).
pub struct BrokerProcess {
    child: Child,
    /// Where it listens: the last word of its first line on stdout.
    pub addr: String,
}

impl BrokerProcess {
    pub fn start() -> Self {
        let mut child = Command::new(broker_binary())
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the broker binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("the broker prints its address");
        let addr = first
            .split_whitespace()
            .last()
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_string();
        BrokerProcess { child, addr }
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `target/<profile>/broker` next to this test's own binary (`target/<profile>/deps/...`), built
/// first if this test run did not build it.
fn broker_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("tests run from target/<profile>/deps");
    let binary = dir.join(format!("broker{}", std::env::consts::EXE_SUFFIX));
    if !binary.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "broker", "--bin", "broker"])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build -p broker failed");
    }
    binary
}
