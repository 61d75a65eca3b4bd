//! The long-running verbs (`groups lag --watch`, `consume --group`) when the broker dies under
//! them and when they are told to stop: each ends within its `--timeout` with one line, Ctrl-C
//! ends them whatever they wait on, and SIGTERM commits and leaves the group as Ctrl-C does.
//!
//! The binary runs as a child process; the tests wait on what it prints (a table, records, a
//! debug line saying the broker is unreachable), never on fixed sleeps. A broker shut down
//! refuses connections, as a killed one does.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use broker::Broker;
use support::{broker, client};

/// Longest any step of these tests may take before it counts as hung.
const HUNG: Duration = Duration::from_secs(30);

/// A running `client` with its stdout and stderr read line by line in the background.
struct Running {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    seen_stderr: Vec<String>,
}

impl Running {
    /// `client args` pointed at `addr`; `debug` turns the client's debug logs on (on stderr).
    fn start(addr: SocketAddr, args: &[&str], debug: bool) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_client"));
        cmd.args(args)
            .env("KAFKA_BOOTSTRAP", addr.to_string())
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match debug {
            true => cmd.env("RUST_LOG", "client=debug"),
            false => cmd.env_remove("RUST_LOG"),
        };
        let mut child = cmd.spawn().expect("the binary runs");
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        Self {
            child,
            stdout,
            stderr,
            seen_stderr: Vec::new(),
        }
    }

    /// Stdout lines until one contains `text` (all of them, in order).
    fn stdout_until(&mut self, text: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.stdout.recv_timeout(HUNG) {
                Ok(line) => {
                    let found = line.contains(text);
                    seen.push(line);
                    if found {
                        return seen;
                    }
                }
                Err(e) => panic!("no stdout line with {text:?} ({e}): {seen:?}"),
            }
        }
    }

    /// Waits for a stderr line containing `text`.
    fn stderr_until(&mut self, text: &str) {
        loop {
            match self.stderr.recv_timeout(HUNG) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.seen_stderr.push(line);
                    if found {
                        return;
                    }
                }
                Err(e) => panic!("no stderr line with {text:?} ({e}): {:?}", self.seen_stderr),
            }
        }
    }

    fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits for the exit (at most `HUNG`): the exit code, the rest of stderr, and how long the
    /// wait took.
    fn exit(mut self) -> (Option<i32>, Vec<String>, Duration) {
        let started = Instant::now();
        let pid = self.child.id();
        // The wait blocks in its own thread, so the bound is a channel's timeout.
        let (exited, exit) = mpsc::channel();
        let mut child = self.child;
        std::thread::spawn(move || {
            let _ = exited.send(child.wait());
        });
        let status = match exit.recv_timeout(HUNG) {
            Ok(status) => status.unwrap(),
            Err(_) => {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                panic!("still running after {HUNG:?}: {:?}", self.seen_stderr);
            }
        };
        let waited = started.elapsed();
        let mut stderr = std::mem::take(&mut self.seen_stderr);
        stderr.extend(self.stderr.iter());
        (status.code(), stderr, waited)
    }
}

fn lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// A broker with "orders" (3 partitions) holding 5, 7 and 9 records.
async fn broker_with_orders() -> Broker {
    let b = broker().await;
    let run = client(
        Some(b.addr()),
        &["topics", "create", "orders", "-p", "3"],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    for (p, n) in [5, 7, 9].into_iter().enumerate() {
        let lines: String = (0..n).map(|i| format!("v{i}\n")).collect();
        let partition = p.to_string();
        let args = ["produce", "orders", "-p", &partition];
        let run = client(Some(b.addr()), &args, &lines).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    b
}

/// Stderr without the log lines a test asked for (a timestamp, then a level).
fn errors(stderr: &[String]) -> Vec<&String> {
    let levels = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
    stderr
        .iter()
        .filter(|l| {
            !l.split_whitespace()
                .nth(1)
                .is_some_and(|w| levels.contains(&w))
        })
        .collect()
}

fn assert_one_error_line(stderr: &[String], contains: &str) {
    let errors = errors(stderr);
    assert_eq!(errors.len(), 1, "one line: {errors:?}");
    assert!(errors[0].starts_with("error: "), "{}", errors[0]);
    assert!(
        errors[0].contains(contains),
        "{} lacks {contains:?}",
        errors[0]
    );
}

/// Shuts the broker down under a command run with `--timeout 3`: it must end with one line.
async fn ends_within_3_s_once_the_broker_dies(b: Broker, running: Running) {
    b.shutdown().await;
    let (code, stderr, waited) = tokio::task::spawn_blocking(|| running.exit())
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{stderr:?}");
    assert_one_error_line(&stderr, "within 3 s");
    // At most the 3 s of --timeout, the 1 s between redraws and a margin for a loaded machine;
    // before, nested retries kept it going for minutes.
    assert!(waited < Duration::from_secs(10), "ended after {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lag_watch_ends_within_its_timeout_when_the_broker_dies() {
    let b = broker_with_orders().await;
    let args = ["--timeout", "3", "groups", "lag", "nobody", "--watch"];
    let mut watch = Running::start(b.addr(), &args, false);
    watch.stdout_until("does not exist (yet)");
    ends_within_3_s_once_the_broker_dies(b, watch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_ends_a_lag_watch_that_waits_on_a_dead_broker() {
    let b = broker_with_orders().await;
    let args = ["--timeout", "60", "groups", "lag", "nobody", "--watch"];
    let mut watch = Running::start(b.addr(), &args, true);
    watch.stdout_until("does not exist (yet)");
    b.shutdown().await;
    // The refresh is now retrying against the dead broker, not sleeping between redraws.
    watch.stderr_until("Connection refused");
    watch.signal("INT");
    let (code, stderr, waited) = tokio::task::spawn_blocking(|| watch.exit()).await.unwrap();
    assert_eq!(
        code,
        Some(0),
        "Ctrl-C ends a watch as usual: {:?}",
        errors(&stderr)
    );
    assert!(errors(&stderr).is_empty(), "{:?}", errors(&stderr));
    assert!(
        !stderr.iter().any(|l| l.contains('\x1b')),
        "logs into a pipe carry no colour codes"
    );
    assert!(waited < Duration::from_secs(10), "ended after {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_consumer_ends_within_its_timeout_when_the_broker_dies() {
    let b = broker_with_orders().await;
    let args = [
        "--timeout",
        "3",
        "consume",
        "orders",
        "--group",
        "g",
        "-f",
        "%p:%o\\n",
    ];
    let mut consume = Running::start(b.addr(), &args, false);
    consume.stdout_until("2:8");
    ends_within_3_s_once_the_broker_dies(b, consume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_commits_and_leaves_as_ctrl_c_does() {
    let b = broker_with_orders().await;
    for (signal, group) in [("TERM", "terminated"), ("INT", "interrupted")] {
        let args = ["consume", "orders", "--group", group, "-f", "%p:%o\\n"];
        let mut consume = Running::start(b.addr(), &args, false);
        // Partition 2 holds the most records; once its last one is out, all 21 are.
        let mut printed = consume.stdout_until("2:8").len();
        while printed < 21 {
            consume
                .stdout
                .recv_timeout(HUNG)
                .expect("the other records");
            printed += 1;
        }
        consume.signal(signal);
        let (code, stderr, _) = tokio::task::spawn_blocking(|| consume.exit())
            .await
            .unwrap();
        assert_eq!(code, Some(0), "SIG{signal}: {stderr:?}");

        // No member left behind, and every record committed.
        let run = client(
            Some(b.addr()),
            &["groups", "describe", group, "--state"],
            "",
        )
        .await;
        let row: Vec<&str> = run
            .stdout
            .lines()
            .nth(2)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            row[row.len() - 2..],
            ["Empty", "0"],
            "SIG{signal}: {}",
            run.stdout
        );
        let run = client(Some(b.addr()), &["groups", "lag", group], "").await;
        let committed: Vec<(&str, &str, &str)> = run
            .stdout
            .lines()
            .skip(3)
            .map(|line| {
                let cells: Vec<&str> = line.split_whitespace().collect();
                (cells[1], cells[2], cells[4])
            })
            .collect();
        assert_eq!(
            committed,
            [("0", "5", "0"), ("1", "7", "0"), ("2", "9", "0")],
            "SIG{signal}: {}",
            run.stdout
        );
    }
    b.shutdown().await;
}

/// A broker that dies under `consume` refuses every reconnect: that is said once the poll's
/// retries are spent (about 7 s), not after the 30 s of `--timeout`, and names the refusal
/// rather than a silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_reports_a_dead_broker_as_refused_before_its_timeout() {
    let b = broker_with_orders().await;
    let mut consume = Running::start(b.addr(), &["consume", "orders", "-f", "%p:%o\\n"], false);
    consume.stdout_until("2:8");
    let addr = b.addr();
    b.shutdown().await;
    let (code, stderr, _) = tokio::task::spawn_blocking(|| consume.exit())
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{stderr:?}");
    assert_one_error_line(&stderr, &format!("no broker listening at {addr}"));
}

/// The same in a group: the member would look for its coordinator for ever (as Java's does),
/// but the command checks that some broker still answers, and says the refusal within seconds,
/// not after `--timeout` (a minute here, so waiting for it fails the test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_in_a_group_reports_a_dead_broker_as_refused_before_its_timeout() {
    let b = broker_with_orders().await;
    let args = [
        "consume",
        "orders",
        "--group",
        "billing",
        "-f",
        "%p:%o\\n",
        "--timeout",
        "60",
    ];
    let mut consume = Running::start(b.addr(), &args, false);
    consume.stdout_until("2:8");
    let addr = b.addr();
    b.shutdown().await;
    let (code, stderr, _) = tokio::task::spawn_blocking(|| consume.exit())
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{stderr:?}");
    assert_one_error_line(&stderr, &format!("no broker listening at {addr}"));
}
