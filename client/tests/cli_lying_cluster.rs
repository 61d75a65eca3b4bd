//! The CLI against groups that do not exist, offsets that cannot be, resets past a log's ends and
//! a listener that never answers: each is said on stderr with exit code 2 (or warned, for a reset
//! brought inside the log, as kafka-consumer-groups.sh warns), never computed into a figure.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use client::{Admin, Client, ClientConfig, TopicPartition};
use serde_json::Value;
use support::{broker, client, Run};

async fn cli(addr: SocketAddr, args: &[&str]) -> Run {
    client(Some(addr), args, "").await
}

/// Topic t5 (1 partition) with 10 records, and group `group` committed at `committed` on it
/// (OffsetCommit takes any offset, as Kafka's does: nothing stops a commit past the end).
async fn committed_at(addr: SocketAddr, group: &str, committed: i64) {
    let run = cli(addr, &["topics", "create", "t5", "-p", "1"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: String = (0..10).map(|i| format!("k:{i}\n")).collect();
    let run = client(Some(addr), &["produce", "t5", "-K", ":"], &lines).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let admin = Admin::new(
        Client::connect(ClientConfig::new(&addr.to_string()))
            .await
            .unwrap(),
    );
    let offsets = BTreeMap::from([(TopicPartition::new("t5", 0), committed)]);
    for (_, result) in admin.commit_offsets(group, &offsets).await.unwrap() {
        result.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describing_a_group_that_does_not_exist_is_an_error() {
    let b = broker().await;
    for view in [&[][..], &["--members"], &["--state"], &["--format", "json"]] {
        let mut args = vec!["groups", "describe", "nosuchgroup"];
        args.extend_from_slice(view);
        let run = cli(b.addr(), &args).await;
        assert_eq!(
            (run.code, run.stdout.as_str(), run.stderr.as_str()),
            (
                2,
                "",
                "error: consumer group 'nosuchgroup' does not exist: see `client groups list`\n"
            ),
            "{view:?}"
        );
    }
    b.shutdown().await;
}

/// Log end 10 below the committed offset 20: flagged, never a lag of -10; not caught up; and
/// check order does not start at the log end and pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_past_the_log_end_is_flagged_not_computed() {
    let b = broker().await;
    let addr = b.addr();
    committed_at(addr, "liar", 20).await;
    let note = "t5-0: committed offset 20 is past the log end 10: no consumer can have read that \
                far (the log was truncated under the group, or the broker reports a wrong end)";

    let run = cli(addr, &["groups", "describe", "liar"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let row = run.stdout.lines().nth(2).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[..6],
        ["liar", "t5", "0", "20", "10", "IMPOSSIBLE"],
        "{row}"
    );
    assert!(
        run.stderr.ends_with(&format!("\nWarning: {note}\n")),
        "{}",
        run.stderr
    );

    let run = cli(addr, &["groups", "lag", "liar", "--format", "json"]).await;
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let p = &doc["partitions"][0];
    assert_eq!(
        (&p["lag"], &p["impossible"]),
        (&Value::Null, &Value::Bool(true))
    );
    assert_eq!(doc["total_lag"], 0);
    let run = cli(addr, &["groups", "lag", "liar"]).await;
    assert!(run.stdout.contains("IMPOSSIBLE"), "{}", run.stdout);
    assert!(
        run.stdout.ends_with(&format!("warning: {note}\n")),
        "{}",
        run.stdout
    );

    let run = cli(addr, &["groups", "wait", "liar", "--max-lag", "0"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!("error: group liar cannot be checked: {note}\n")
    );
    let run = cli(
        addr,
        &["check", "order", "t5", "--seq", "value", "--group", "liar"],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("group liar's committed offset 20 is past the log end 10"),
        "{}",
        run.stderr
    );
    b.shutdown().await;
}

/// Targets past either end are brought inside the log with Kafka's warning; a negative
/// `--to-offset` parses, as `--to-offset=-5` did, and is warned the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_past_the_log_are_clamped_with_kafkas_warning() {
    let b = broker().await;
    let addr = b.addr();
    committed_at(addr, "billing", 4).await;
    let reset = |target: &'static [&'static str]| async move {
        let mut args = vec![
            "groups",
            "reset-offsets",
            "billing",
            "--topic",
            "t5",
            "--dry-run",
        ];
        args.extend_from_slice(target);
        cli(addr, &args).await
    };
    let run = reset(&["--to-offset", "1000"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "New offset (1000) is higher than latest offset for topic partition t5-0. Value will be \
         set to 10\n"
    );
    assert!(
        run.stdout.ends_with("t5              0          10\n"),
        "{}",
        run.stdout
    );
    for target in [&["--to-offset", "-5"][..], &["--to-offset=-5"]] {
        let run = reset(target).await;
        assert_eq!(run.code, 0, "{target:?}: {}", run.stderr);
        assert_eq!(
            run.stderr,
            "New offset (-5) is lower than earliest offset for topic partition t5-0. Value will \
             be set to 0\n"
        );
    }
    let run = reset(&["--shift-by", "100"]).await;
    assert!(
        run.stderr.starts_with("New offset (104) is higher"),
        "{}",
        run.stderr
    );
    let run = reset(&["--shift-by", "-3"]).await;
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    b.shutdown().await;
}

/// A listener that accepts and never answers is not taken for a slow broker: the handshake is
/// bounded as the connect is (5 s), not by the 30 s of --timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_never_answers_is_reported_after_the_connect_timeout() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming() {
            held.push(stream);
        }
    });
    let run = cli(addr, &["topics", "list"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "error: {addr} accepted the connection but did not answer ApiVersions within 5s: \
             point --bootstrap (or KAFKA_BOOTSTRAP) at a Kafka listener\n"
        )
    );
}
