//! Shared by the workshop's integration tests: a lab run in-process, the workspace's binaries as a
//! user would run them, and the broker binary started for the `--bootstrap` runs (the lab then
//! sees it as any Kafka cluster).
// Each test binary uses its own part of this.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use workshop::{LabReport, Outcome, RunError};

/// `workshop <lab> --check <args>`, in-process: the lab's report, or why it reached none.
pub fn run_lab(lab: &str, args: &[&str]) -> Result<LabReport, RunError> {
    let args = [lab, "--check"].into_iter().chain(args.iter().copied());
    match workshop::run(args)? {
        Outcome::Lab { report, .. } => Ok(report),
        Outcome::List(_) => panic!("a lab run listed the labs"),
    }
}

/// `workshop <lab> --json --check <args>`, in-process; the lab must reach its report.
pub fn run_json(lab: &str, args: &[&str]) -> LabReport {
    let args = [lab, "--json", "--check"]
        .into_iter()
        .chain(args.iter().copied());
    match workshop::run(args) {
        Ok(Outcome::Lab { report, json }) => {
            assert!(json);
            report
        }
        Ok(Outcome::List(_)) => panic!("a lab run listed the labs"),
        Err(e) => panic!("the lab failed: {e}"),
    }
}

/// `broker --listen 127.0.0.1:0`, killed by its PID when dropped (also when an assertion fails).
pub struct BrokerProcess {
    child: Child,
    /// Where it listens: the last word of its first line on stdout.
    pub addr: String,
}

impl BrokerProcess {
    pub fn start() -> Self {
        let mut child = Command::new(workspace_binary("broker"))
            .args(["--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the broker binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("the broker prints its address");
        // `broker listening on ADDR`: the address is the last word.
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

/// The topics and consumer groups on the broker at `addr`: what a lab run with `--bootstrap`
/// left behind, which should be nothing.
pub fn leftovers(addr: &str) -> (Vec<String>, Vec<client::admin::GroupListing>) {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let kafka = client::Client::connect(client::ClientConfig::new(addr))
            .await
            .unwrap();
        let admin = client::Admin::new(kafka);
        (
            admin.list_topics().await.unwrap(),
            admin.list_groups(&[]).await.unwrap(),
        )
    })
}

/// The workspace's binaries (`broker`, `client`), built once by cargo.
pub use ::tests::workspace_binary;
