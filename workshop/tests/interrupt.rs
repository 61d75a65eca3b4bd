//! Ctrl-C (SIGINT) and SIGTERM during a lab run with `--bootstrap`: the lab stops, deletes the
//! topics and groups it created on the cluster (its members, killed where they waited, removed
//! first), reports one line and exits with 130. The workshop binary runs against a broker binary,
//! as a trainer runs it against a cluster.

mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{leftovers, BrokerProcess};

/// Starts `workshop <lab> --check --bootstrap <broker>`, waits until what `created` looks for
/// is on the broker, sends `signal`, and returns the exit code and stderr.
fn interrupt(
    lab: &str,
    signal: &str,
    broker: &BrokerProcess,
    created: impl Fn(&[String], &[client::admin::GroupListing]) -> bool,
) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_workshop"))
        .args([lab, "--check", "--bootstrap", &broker.addr])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The lab's own pace decides when its topics and groups exist: polled, with a bound.
    let started = Instant::now();
    loop {
        let (topics, groups) = leftovers(&broker.addr);
        if created(&topics, &groups) {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "{lab} ended before the signal"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{lab} created nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    let sent = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(sent.success());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap().code(), stderr)
}

#[test]
fn ctrl_c_during_rebalance_leaves_no_topic_and_no_group() {
    let broker = BrokerProcess::start();
    // Its five scenarios run side by side: stopped once a group has members.
    let (code, stderr) = interrupt("rebalance", "-INT", &broker, |_, groups| !groups.is_empty());
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains(
            "workshop: error: interrupted: the topics and groups this run created on the \
             cluster are deleted"
        ),
        "{stderr}"
    );
    let (topics, groups) = leftovers(&broker.addr);
    assert!(topics.is_empty(), "left behind: {topics:?}");
    assert!(groups.is_empty(), "left behind: {groups:?}");
}

#[test]
fn sigterm_during_hot_tenant_leaves_no_topic_and_no_group() {
    let broker = BrokerProcess::start();
    let (code, stderr) = interrupt("hot-tenant", "-TERM", &broker, |topics, _| {
        topics.iter().any(|t| t.starts_with("orders-by-tenant-"))
    });
    assert_eq!(code, Some(130), "{stderr}");
    let (topics, groups) = leftovers(&broker.addr);
    assert!(topics.is_empty(), "left behind: {topics:?}");
    assert!(groups.is_empty(), "left behind: {groups:?}");
}
