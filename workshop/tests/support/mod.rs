//! Shared by the workshop's integration tests: a lab run in-process, the workspace's binaries as a
//! user would run them, and the broker binary started for the `--bootstrap` runs (the lab then
//! sees it as any Kafka cluster).
// Each test binary uses its own part of this.
#![allow(dead_code)]

pub mod readme;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use workshop::{LabReport, Outcome, RunError};

/// `workshop <lab> --check <args>`, in-process: the lab's report, or why it reached none.
pub fn run_lab(lab: &str, args: &[&str]) -> Result<LabReport, RunError> {
    let args = [lab, "--check"].into_iter().chain(args.iter().copied());
    match workshop::run(args)? {
        Outcome::Lab { report, .. } => Ok(report),
        Outcome::List(_) | Outcome::Served => panic!("a lab run did not run a lab"),
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
        Ok(Outcome::List(_) | Outcome::Served) => panic!("a lab run did not run a lab"),
        Err(e) => panic!("the lab failed: {e}"),
    }
}

/// `workshop <lab> --check <args>`, in-process, as a room would see it: the report and the
/// terminal's text (plain, 100 columns).
pub fn narrated(lab: &str, args: &[&str]) -> (LabReport, String) {
    let recorder = workshop::lab::report::Recorder::new();
    let view = recorder.clone();
    let args = [&[lab, "--check"][..], args].concat();
    let outcome = workshop::run_with(args, |n| n.subscribe(Box::new(view))).unwrap();
    let report = outcome.report().unwrap().clone();
    let text = workshop::view::terminal::Terminal::render(
        &recorder.events(),
        workshop::view::terminal::TerminalOptions::plain(100),
    );
    (report, text)
}

/// [`narrated`] with `--bootstrap addr`, checking that the run left no topic or group behind.
pub fn narrated_against(lab: &str, addr: &str, args: &[&str]) -> (LabReport, String) {
    let ran = narrated(lab, &[&["--bootstrap", addr][..], args].concat());
    let (topics, groups) = leftovers(addr);
    assert!(
        topics.is_empty() && groups.is_empty(),
        "{topics:?} {groups:?}"
    );
    ran
}

/// `text` with every run of whitespace one space: a sentence wrapped over lines reads whole.
pub fn unwrapped(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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

/// LABS.md: "`figures` holds only what the seed decides (identical on every run)". Runs `lab`
/// with `args` under the default seed and under `--seed 7`, each twice (side by side, to save
/// wall time), and asserts that the two `figures` objects of a seed are equal as a whole.
/// `default_run` is the figures of a run already made with `args` and the default seed (a
/// test file's cached run), which saves one run; `None` runs it here.
pub fn assert_figures_follow_the_seed(
    lab: &str,
    args: &[&str],
    default_run: Option<&serde_json::Value>,
) {
    let seeded: Vec<&str> = args.iter().copied().chain(["--seed", "7"]).collect();
    let figures = |args: &[&str]| run_json(lab, args).figures;
    let (first, again, seven, seven_again) = std::thread::scope(|s| {
        let first = default_run.is_none().then(|| s.spawn(|| figures(args)));
        let again = s.spawn(|| figures(args));
        let seven = s.spawn(|| figures(&seeded));
        let seven_again = figures(&seeded);
        (
            first.map(|t| t.join().expect("the first default run")),
            again.join().expect("the second default run"),
            seven.join().expect("the first --seed 7 run"),
            seven_again,
        )
    });
    let first = first.as_ref().or(default_run).expect("a first default run");
    assert_same_figures(lab, "the default seed", first, &again);
    assert_same_figures(lab, "--seed 7", &seven, &seven_again);
}

/// Equal figures, or the paths of the ones that differ (a whole document is too long to read).
fn assert_same_figures(lab: &str, seed: &str, a: &serde_json::Value, b: &serde_json::Value) {
    fn flat(v: &serde_json::Value, path: String, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, inner) in map {
                    flat(inner, format!("{path}.{k}"), out);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, inner) in items.iter().enumerate() {
                    flat(inner, format!("{path}[{i}]"), out);
                }
            }
            leaf => out.push((path, leaf.to_string())),
        }
    }
    if a == b {
        return;
    }
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    flat(a, String::new(), &mut fa);
    flat(b, String::new(), &mut fb);
    let fb: std::collections::BTreeMap<_, _> = fb.into_iter().collect();
    let differ: Vec<String> = fa
        .iter()
        .filter(|(k, v)| fb.get(k) != Some(v))
        .take(12)
        .map(|(k, v)| format!("{k}: {v} then {}", fb.get(k).map_or("-", |s| s.as_str())))
        .collect();
    let differ = if differ.is_empty() {
        vec![format!("the second run has other fields: {b}")]
    } else {
        differ
    };
    panic!(
        "{lab} with {seed}: two runs gave different figures:\n  {}",
        differ.join("\n  ")
    );
}
