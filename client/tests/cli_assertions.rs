//! The assertions a test suite makes with `client` cannot pass by accident: `groups wait` and
//! `groups lag` see every partition of the topics a group reads, `check order` fails when it
//! checked nothing, a sequence number going back is a violation, and the exit code tells "the
//! check failed" (1) from "it could not be checked" (2). Against an in-process broker.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use client::{Admin, Client, ClientConfig, TopicPartition};
use serde_json::Value;
use support::{broker, client, Run};

async fn cli(addr: SocketAddr, args: &[&str]) -> Run {
    client(Some(addr), args, "").await
}

async fn admin(addr: SocketAddr) -> Admin {
    Admin::new(
        Client::connect(ClientConfig::new(&addr.to_string()))
            .await
            .unwrap(),
    )
}

async fn commit(addr: SocketAddr, group: &str, offsets: &[(&str, i32, i64)]) {
    let offsets: BTreeMap<TopicPartition, i64> = offsets
        .iter()
        .map(|&(t, p, o)| (TopicPartition::new(t, p), o))
        .collect();
    for (tp, result) in admin(addr)
        .await
        .commit_offsets(group, &offsets)
        .await
        .unwrap()
    {
        result.unwrap_or_else(|e| panic!("{tp}: {e}"));
    }
}

/// Creates `topic` with `partitions`, and writes `lines` to it (on `partition`, if given).
async fn topic_with(addr: SocketAddr, topic: &str, partitions: i32, at: Option<i32>, lines: &str) {
    let count = partitions.to_string();
    let run = cli(addr, &["topics", "create", topic, "-p", &count]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    if lines.is_empty() {
        return;
    }
    let mut args = vec!["produce", topic, "-K", ":"];
    let partition = at.map(|p| p.to_string());
    if let Some(p) = &partition {
        args.extend(["-p", p]);
    }
    let run = client(Some(addr), &args, lines).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// Writes `key:x` records with header seq=N, one per `(key, seq)`.
async fn sequenced(addr: SocketAddr, topic: &str, records: &[(&str, i64)]) {
    for (key, seq) in records {
        let header = format!("seq={seq}");
        let line = format!("{key}:x\n");
        let args = ["produce", topic, "-K", ":", "-H", &header];
        let run = client(Some(addr), &args, &line).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
}

fn json(run: &Run) -> Value {
    assert_eq!(
        run.stdout.lines().count(),
        1,
        "one document: {}",
        run.stdout
    );
    serde_json::from_str(&run.stdout).expect("JSON")
}

/// A group that committed one partition of twelve is not caught up on the other eleven, for
/// `groups wait` and `groups lag` alike, with or without `--topic`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_and_lag_count_every_partition_of_a_committed_topic() {
    let b = broker().await;
    let addr = b.addr();
    topic_with(addr, "orders", 12, None, "").await;
    for p in 0..12 {
        let lines: String = (0..50).map(|i| format!("k{i}:v\n")).collect();
        let partition = p.to_string();
        let run = client(Some(addr), &["produce", "orders", "-p", &partition], &lines).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    commit(addr, "billing", &[("orders", 8, 50)]).await;

    let wait = [
        "groups",
        "wait",
        "billing",
        "--max-lag",
        "0",
        "--timeout",
        "1",
    ];
    let run = cli(addr, &wait).await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.lines().count(), 13, "{}", run.stdout);
    assert_eq!(
        run.stderr,
        "error: group billing did not catch up within 1 s (--timeout): 11 of 12 partitions have \
         more than 0 records not consumed, 550 in all\n"
    );
    let lag = json(&cli(addr, &["groups", "lag", "billing", "--format", "json"]).await);
    assert_eq!(lag["total_lag"], 550);
    let rows = lag["partitions"].as_array().unwrap();
    assert_eq!(rows.len(), 12);
    let lags: Vec<i64> = rows.iter().map(|r| r["lag"].as_i64().unwrap()).collect();
    assert_eq!(lags.iter().filter(|&&l| l == 50).count(), 11);
    // A partition without a commit has no committed offset, and its whole log as lag.
    let uncommitted = rows.iter().find(|r| r["partition"] == 0).unwrap();
    assert_eq!(
        (&uncommitted["current_offset"], &uncommitted["lag"]),
        (&Value::Null, &Value::from(50))
    );
    let run = cli(addr, &["groups", "lag", "billing", "--topic", "orders"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("group billing: Empty, 0 members, total lag 550\n"),
        "{}",
        run.stdout
    );

    commit(
        addr,
        "billing",
        &(0..12).map(|p| ("orders", p, 50)).collect::<Vec<_>>(),
    )
    .await;
    let run = cli(addr, &wait).await;
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert!(
        run.stdout.starts_with(
            "group billing caught up: at most 0 records not consumed on each of 12 partitions"
        ),
        "{}",
        run.stdout
    );
    let mut as_json = wait.to_vec();
    as_json.extend(["--format", "json"]);
    let doc = json(&cli(addr, &as_json).await);
    assert_eq!(
        (
            &doc["caught_up"],
            &doc["total_lag"],
            doc["partitions"].as_array().map(Vec::len)
        ),
        (&Value::Bool(true), &Value::from(0), Some(12))
    );
    b.shutdown().await;
}

/// A group that does not exist: `groups lag` cannot check it, nor can `groups wait` once the
/// timeout passes with nothing to look at; a topic that does not exist is no partition to wait on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_groups_and_topics_cannot_be_checked() {
    let b = broker().await;
    let addr = b.addr();
    let run = cli(addr, &["groups", "lag", "nosuch"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = cli(
        addr,
        &[
            "groups",
            "wait",
            "nosuch",
            "--max-lag",
            "0",
            "--timeout",
            "1",
        ],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("has no partitions"), "{}", run.stderr);
    let args = ["groups", "wait", "g", "--max-lag", "0", "--topic", "nosuch"];
    let run = cli(addr, &args).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("topic 'nosuch' does not exist"),
        "{}",
        run.stderr
    );
    let run = cli(addr, &["groups", "wait", "g", "--max-lag", "-1"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    b.shutdown().await;
}

/// Reading no record is no proof of order: it fails unless `--allow-empty`; `--min-records`
/// asks for more; an unknown `--group` is an error, not a read from the beginning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_order_fails_when_it_checked_nothing() {
    let b = broker().await;
    let addr = b.addr();
    topic_with(addr, "empty", 2, None, "").await;
    let check = |topic: &'static str, more: &'static [&'static str]| async move {
        let mut args = vec!["check", "order", topic, "--seq", "header:seq"];
        args.extend_from_slice(more);
        cli(addr, &args).await
    };
    let run = check("empty", &[]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "error: checked 0 records of 0 keys (0 without a key, 0 repeated) in nothing to read: no \
         keyed record to check (--allow-empty to accept that)\n"
    );
    let run = check("empty", &["--allow-empty"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    topic_with(addr, "events", 1, None, "").await;
    sequenced(addr, "events", &[("a", 1), ("a", 2), ("b", 1)]).await;
    let run = check("events", &[]).await;
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert_eq!(
        run.stdout,
        "checked 3 records of 2 keys (0 without a key, 0 repeated) in events-0@0..3: every key in \
         order\n"
    );
    let run = check("events", &["--min-records", "4"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .ends_with(": 3 records, fewer than --min-records 4\n"),
        "{}",
        run.stderr
    );
    let run = check("events", &["--min-records", "3"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    // A group that has read everything leaves nothing to check.
    commit(addr, "done", &[("events", 0, 3)]).await;
    let run = check("events", &["--group", "done"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    let run = check("events", &["--group", "nosuch"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("consumer group 'nosuch' does not exist"),
        "{}",
        run.stderr
    );
    b.shutdown().await;
}

/// Versions 1, 2, 2, 3, 1 of one key: the second 2 is a duplicate, the last 1 goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_going_back_is_a_violation() {
    let b = broker().await;
    let addr = b.addr();
    topic_with(addr, "events", 1, None, "").await;
    sequenced(
        addr,
        "events",
        &[("a", 1), ("a", 2), ("a", 2), ("a", 3), ("a", 1)],
    )
    .await;
    let args = [
        "check",
        "order",
        "events",
        "--seq",
        "header:seq",
        "--format",
        "json",
    ];
    let run = cli(addr, &args).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["duplicates"], 1);
    let violations = doc["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{doc}");
    assert_eq!(
        (&violations[0]["kind"], &violations[0]["arrived_version"]),
        (&Value::from("went_back"), &Value::from(1))
    );
    let run = cli(addr, &args[..5]).await;
    assert_eq!(
        run.stdout,
        "a: version 1 read from events-0@4 after version 3 at events-0@3\n"
    );
    b.shutdown().await;
}

/// Exit 2 whenever the check could not run: no broker, an unknown topic, a sequence number that
/// cannot be read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_checked_exits_2() {
    let b = broker().await;
    let addr = b.addr();
    topic_with(addr, "events", 1, None, "a:x\n").await;
    let run = cli(addr, &["check", "order", "events", "--seq", "value"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not a whole number"), "{}", run.stderr);
    let run = cli(addr, &["check", "order", "nosuch", "--seq", "value"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = cli(addr, &["topics", "describe", "nosuch"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    b.shutdown().await;

    // Nothing listens on a port just released.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    for args in [
        &["check", "order", "events", "--seq", "value"][..],
        &["groups", "wait", "g", "--max-lag", "0"],
        &["groups", "lag", "g"],
        &["topics", "list"],
    ] {
        let run = cli(free, args).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.starts_with("error: no broker listening"),
            "{}",
            run.stderr
        );
    }
}
