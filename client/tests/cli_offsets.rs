//! What Kafka users and integration tests reach for, run as they would run it: resetting and
//! deleting a group's offsets, waiting for a group to catch up, checking a topic's order per key,
//! time lag, the watch's status, and JSON output; against an in-process broker.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use broker::Broker;
use client::{Admin, Client, ClientConfig, NewTopic};
use client::{Producer, ProducerConfig, ProducerRecord, TopicPartition};
use serde_json::Value;
use support::{broker, client, member, Run};

async fn cli(addr: SocketAddr, args: &[&str]) -> Run {
    client(Some(addr), args, "").await
}

fn json(run: &Run) -> Value {
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "one document on one line");
    serde_json::from_str(&run.stdout).expect("JSON")
}

async fn admin(addr: SocketAddr) -> Admin {
    Admin::new(
        Client::connect(ClientConfig::new(&addr.to_string()))
            .await
            .unwrap(),
    )
}

/// "orders" (3 partitions) holding 5, 7 and 9 records, and group "billing", without members,
/// at 2 on partition 0 and 7 on partition 1.
async fn broker_with_billing() -> (Broker, Admin) {
    let b = broker().await;
    let run = cli(b.addr(), &["topics", "create", "orders", "-p", "3"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    for (p, n) in [5, 7, 9].into_iter().enumerate() {
        let lines: String = (0..n).map(|i| format!("v{i}\n")).collect();
        let partition = p.to_string();
        let run = client(
            Some(b.addr()),
            &["produce", "orders", "-p", &partition],
            &lines,
        )
        .await;
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let admin = admin(b.addr()).await;
    commit(&admin, "billing", &[("orders", 0, 2), ("orders", 1, 7)]).await;
    (b, admin)
}

async fn commit(admin: &Admin, group: &str, offsets: &[(&str, i32, i64)]) {
    let offsets: BTreeMap<TopicPartition, i64> = offsets
        .iter()
        .map(|&(t, p, o)| (TopicPartition::new(t, p), o))
        .collect();
    for (tp, result) in admin.commit_offsets(group, &offsets).await.unwrap() {
        result.unwrap_or_else(|e| panic!("{tp}: {e}"));
    }
}

/// The group's committed offsets as `groups describe --format json` shows them, by partition.
async fn committed(addr: SocketAddr, group: &str) -> Vec<(String, i64, Value)> {
    let doc = json(&cli(addr, &["groups", "describe", group, "--format", "json"]).await);
    doc["groups"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["topic"].as_str().unwrap().to_string(),
                p["partition"].as_i64().unwrap(),
                p["current_offset"].clone(),
            )
        })
        .collect()
}

fn offsets(list: &[(i64, i64)]) -> Vec<(String, i64, Value)> {
    list.iter()
        .map(|&(p, o)| ("orders".to_string(), p, Value::from(o)))
        .collect()
}

/// Topic "stamped" of `partitions`, with a record per `(partition, timestamp)`, in that order.
async fn stamped(addr: SocketAddr, partitions: i32, records: &[(i32, i64)]) -> Admin {
    let admin = admin(addr).await;
    let topic = NewTopic::new("stamped", partitions);
    admin.create_topic(&topic).await.unwrap();
    let producer = Producer::new(admin.client().clone(), ProducerConfig::default()).unwrap();
    for &(p, stamp) in records {
        let record = ProducerRecord::new("stamped")
            .partition(p)
            .value("v")
            .timestamp(stamp);
        producer.send_and_wait(record).await.unwrap();
    }
    admin
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_offsets_to_each_target_and_describe_shows_them() {
    let (b, _admin) = broker_with_billing().await;
    let addr = b.addr();
    let reset = |args: &'static [&'static str]| async move {
        let mut all = vec!["groups", "reset-offsets", "billing"];
        all.extend_from_slice(args);
        cli(addr, &all).await
    };

    // Without --execute: the plan, Kafka's warning, and nothing changed.
    let run = reset(&["--topic", "orders", "--to-earliest"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\
         \nbilling         orders          0          0\
         \nbilling         orders          1          0\
         \nbilling         orders          2          0\n"
    );
    assert!(run.stderr.starts_with("WARN: No action will be performed"));
    let run = reset(&["--topic", "orders", "--to-latest", "--dry-run"]).await;
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert_eq!(committed(addr, "billing").await, offsets(&[(0, 2), (1, 7)]));

    let run = reset(&["--topic", "orders", "--to-earliest", "--execute"]).await;
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert_eq!(
        committed(addr, "billing").await,
        offsets(&[(0, 0), (1, 0), (2, 0)])
    );
    reset(&["--topic", "orders", "--to-latest", "--execute"]).await;
    assert_eq!(
        committed(addr, "billing").await,
        offsets(&[(0, 5), (1, 7), (2, 9)])
    );
    // Negative shifts are typable; a shift is kept inside the log.
    reset(&["--all-topics", "--shift-by", "-6", "--execute"]).await;
    assert_eq!(
        committed(addr, "billing").await,
        offsets(&[(0, 0), (1, 1), (2, 3)])
    );
    // Only the partitions named; an offset past the end is the end.
    reset(&["--topic", "orders:0,2", "--to-offset", "100", "--execute"]).await;
    assert_eq!(
        committed(addr, "billing").await,
        offsets(&[(0, 5), (1, 1), (2, 9)])
    );
    reset(&["--topic", "orders:1", "--to-offset", "4", "--execute"]).await;
    let run = reset(&["--topic", "orders", "--shift-by", "2", "--format", "json"]).await;
    let plan = json(&run);
    assert_eq!(plan["executed"], false);
    let news: Vec<i64> = plan["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["new_offset"].as_i64().unwrap())
        .collect();
    assert_eq!(news, [5, 6, 9]);

    // A partition that does not exist, and a topic without a reset target.
    let run = reset(&["--topic", "orders:7", "--to-earliest"]).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("partition 7"), "{}", run.stderr);
    let run = reset(&["--topic", "orders"]).await;
    assert_eq!(run.code, 2, "clap asks for a target: {}", run.stderr);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_by_time_finds_the_first_record_at_or_after_it() {
    let b = broker().await;
    let addr = b.addr();
    let now = now_ms();
    let hour = 3_600_000;
    // 1970-01-01T00:00:01, 00:00:02, 00:00:03, then two and one hours ago.
    let stamps = [1_000, 2_000, 3_000, now - 2 * hour, now - hour].map(|stamp| (0, stamp));
    stamped(addr, 1, &stamps).await;
    let plan = |args: &'static [&'static str]| async move {
        let mut all = vec!["groups", "reset-offsets", "fresh", "--topic", "stamped"];
        all.extend_from_slice(args);
        all.push("--execute");
        let run = cli(addr, &all).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        let last = run.stdout.lines().last().unwrap().to_string();
        (
            last.split_whitespace().last().unwrap().to_string(),
            run.stderr,
        )
    };
    assert_eq!(
        plan(&["--to-datetime", "1970-01-01T00:00:02.000"]).await.0,
        "1"
    );
    assert_eq!(
        plan(&["--to-datetime", "1970-01-01T01:00:01.500+01:00"])
            .await
            .0,
        "1"
    );
    assert_eq!(plan(&["--by-duration", "PT90M"]).await.0, "4");
    assert_eq!(plan(&["--by-duration", "P1D"]).await.0, "3");
    // After the last record: the log end, with Kafka's warning.
    let (offset, warning) = plan(&["--to-datetime", "2999-01-01T00:00:00.000"]).await;
    assert_eq!(offset, "5");
    assert_eq!(
        warning,
        "Warn: Partition 0 from topic stamped is empty. Falling back to latest known offset.\n"
    );
    let run = cli(
        addr,
        &[
            "groups",
            "reset-offsets",
            "fresh",
            "--all-topics",
            "--to-datetime",
            "yesterday",
        ],
    )
    .await;
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("bad date-time 'yesterday'"),
        "{}",
        run.stderr
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_and_deletes_are_refused_while_the_group_has_members() {
    let (b, admin) = broker_with_billing().await;
    let addr = b.addr();
    let m = member(addr, "billing", "orders", 3).await;
    let run = cli(
        addr,
        &[
            "groups",
            "reset-offsets",
            "billing",
            "--all-topics",
            "--to-earliest",
            "--execute",
        ],
    )
    .await;
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "error: Assignments can only be reset if the group 'billing' is inactive, but the \
         current state is Stable. Stop its consumers (see `client groups describe billing \
         --members`) and try again.\n"
    );
    let run = cli(
        addr,
        &["groups", "delete-offsets", "billing", "--topic", "orders:0"],
    )
    .await;
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stdout,
        "\nTOPIC           PARTITION       STATUS         \
         \norders          0               Error: GROUP_SUBSCRIBED_TO_TOPIC\n"
    );
    assert!(run.stderr.contains("stop them first"), "{}", run.stderr);
    m.close().await.unwrap();
    let offsets_now = admin.list_group_offsets("billing", None).await.unwrap();
    assert_eq!(offsets_now[&TopicPartition::new("orders", 0)], Some(2));

    // Without members, the offsets of partition 0 go and those of 1 stay.
    let run = cli(
        addr,
        &["groups", "delete-offsets", "billing", "--topic", "orders:0"],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "\nTOPIC           PARTITION       STATUS         \
         \norders          0               Successful     \n"
    );
    assert_eq!(committed(addr, "billing").await, offsets(&[(1, 7)]));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_all_groups_and_json_documents() {
    let (b, admin) = broker_with_billing().await;
    let addr = b.addr();
    commit(&admin, "audit", &[("orders", 2, 9)]).await;
    let run = cli(addr, &["groups", "describe", "--all-groups"]).await;
    assert_eq!(run.code, 0);
    let groups: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("GROUP"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(groups, ["audit", "billing", "billing"]);

    let doc = json(&cli(addr, &["groups", "describe", "billing", "--format", "json"]).await);
    let g = &doc["groups"][0];
    assert_eq!(
        (g["group"].as_str(), g["state"].as_str()),
        (Some("billing"), Some("Empty"))
    );
    assert_eq!(g["total_lag"], 3);
    assert_eq!(
        g["partitions"][0],
        serde_json::json!({
            "topic": "orders", "partition": 0, "current_offset": 2, "log_end_offset": 5,
            "lag": 3, "impossible": false, "consumer_id": null, "host": null, "client_id": null,
            "oldest_unconsumed_timestamp_ms": null, "time_lag_ms": null,
        })
    );
    let doc = json(&cli(addr, &["groups", "list", "--format", "json"]).await);
    let names: Vec<&str> = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["audit", "billing"]);
    // describe has Kafka's rows (3 of lag); lag counts partition 2's 9 records, never committed.
    let doc = json(&cli(addr, &["groups", "lag", "billing", "--format", "json"]).await);
    assert_eq!(doc["total_lag"], 12);
    let doc = json(&cli(addr, &["offsets", "orders", "--format", "json"]).await);
    assert_eq!(
        doc["partitions"][2],
        serde_json::json!({"partition": 2, "earliest": 0, "latest": 9})
    );
    let run = cli(
        addr,
        &[
            "topics",
            "create",
            "audit-log",
            "--partitions",
            "-1",
            "--config",
            "retention.ms=86400000",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(
        &cli(
            addr,
            &["topics", "describe", "audit-log", "--format", "json"],
        )
        .await,
    );
    let t = &doc["topics"][0];
    assert_eq!(
        t["configs"],
        serde_json::json!({"retention.ms": "86400000"})
    );
    assert_eq!(t["partition_count"], 1, "the broker's default");
    let run = cli(addr, &["topics", "describe", "audit-log"]).await;
    assert!(
        run.stdout
            .lines()
            .next()
            .unwrap()
            .ends_with("\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: retention.ms=86400000"),
        "{}",
        run.stdout
    );
    let doc = json(&cli(addr, &["topics", "list", "--format", "json"]).await);
    assert_eq!(doc, serde_json::json!({"topics": ["audit-log", "orders"]}));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_lag_is_the_age_of_the_oldest_record_not_consumed() {
    let b = broker().await;
    let addr = b.addr();
    let hour = 3_600_000;
    let base = now_ms() - 2 * hour;
    // Partition 0: stamped two hours ago, then one hour ago; partition 1: one record.
    let admin = stamped(addr, 2, &[(0, base), (0, base + hour), (1, base)]).await;
    // Partition 0 read its first record: the oldest waiting is an hour old; 1 is caught up.
    commit(&admin, "g", &[("stamped", 0, 1), ("stamped", 1, 1)]).await;
    let before = now_ms();
    let args = ["groups", "describe", "g", "--time-lag", "--format", "json"];
    let doc = json(&cli(addr, &args).await);
    let after = now_ms();
    let rows = &doc["groups"][0]["partitions"];
    assert_eq!(rows[0]["oldest_unconsumed_timestamp_ms"], base + hour);
    let age = rows[0]["time_lag_ms"].as_i64().unwrap();
    assert!(
        (before - base - hour..=after - base - hour).contains(&age),
        "{age}"
    );
    assert_eq!(rows[1]["time_lag_ms"], 0, "no lag, no time lag");
    assert_eq!(rows[1]["oldest_unconsumed_timestamp_ms"], Value::Null);

    let run = cli(addr, &["groups", "describe", "g", "--time-lag"]).await;
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[1].contains(" LAG             TIME-LAG        CONSUMER-ID "));
    assert!(
        lines[2].starts_with("g               stamped         0          1               2               1               1h00m           - "),
        "{}",
        lines[2]
    );
    let run = cli(addr, &["groups", "lag", "g", "--time-lag"]).await;
    assert_eq!(
        run.stdout.lines().nth(2),
        Some("TOPIC    PARTITION  COMMITTED  LOG-END  LAG  TIME-LAG")
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_returns_once_a_consumer_drains_and_fails_on_a_stuck_group() {
    let (b, _admin) = broker_with_billing().await;
    let addr = b.addr();
    let run = cli(
        addr,
        &[
            "groups",
            "wait",
            "billing",
            "--max-lag",
            "0",
            "--timeout",
            "1",
        ],
    )
    .await;
    assert_eq!(run.code, 1);
    // Partition 2 of the topic the group committed on counts too, all its records unread.
    assert_eq!(
        run.stdout,
        "TOPIC   PARTITION  COMMITTED  LOG-END  UNREAD\n\
         orders  0          2          5        3\n\
         orders  1          7          7        0\n\
         orders  2          -          9        9\n"
    );
    assert_eq!(
        run.stderr,
        "error: group billing did not catch up within 1 s (--timeout): 2 of 3 partitions have \
         more than 0 records not consumed, 12 in all\n"
    );
    // Naming the topic is the same.
    let run = cli(
        addr,
        &[
            "groups",
            "wait",
            "billing",
            "--max-lag",
            "3",
            "--topic",
            "orders",
            "--timeout",
            "1",
        ],
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .ends_with("orders  2          -          9        9\n"),
        "{}",
        run.stdout
    );

    // A wait started before the consumer, which then reads everything.
    let waiter = tokio::spawn(client(
        Some(addr),
        &[
            "groups",
            "wait",
            "billing",
            "--max-lag",
            "0",
            "--topic",
            "orders",
            "--timeout",
            "30s",
        ],
        "",
    ));
    let run = cli(addr, &["consume", "orders", "--group", "billing", "--exit"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let waited = waiter.await.unwrap();
    assert_eq!(waited.code, 0, "{}", waited.stderr);
    assert!(
        waited
            .stdout
            .starts_with("group billing caught up: at most 0 records not consumed on each of 3 partitions after "),
        "{}",
        waited.stdout
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_order_finds_exactly_the_records_read_too_early() {
    let b = broker().await;
    let addr = b.addr();
    let run = cli(addr, &["topics", "create", "events", "-p", "1"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Key a: 1, 3, 2, 4 (3 is read before 2); key b in order.
    let produce = |seq: &'static str, line: &'static str| {
        let header = format!("seq={seq}");
        async move {
            let args = ["produce", "events", "-K", ":", "-H", &header];
            let run = client(Some(addr), &args, line).await;
            assert_eq!(run.code, 0, "{}", run.stderr);
        }
    };
    for (seq, line) in [
        ("1", "a:x\n"),
        ("1", "b:x\n"),
        ("3", "a:x\n"),
        ("2", "a:x\n"),
        ("2", "b:x\n"),
        ("4", "a:x\n"),
    ] {
        produce(seq, line).await;
    }
    let run = cli(addr, &["check", "order", "events", "--seq", "header:seq"]).await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stdout,
        "a: version 3 read from events-0@2 before version 2, written to events-0@3\n"
    );
    assert_eq!(
        run.stderr,
        "error: checked 6 records of 2 keys (0 without a key, 0 repeated) in events-0@0..6: 1 \
         record out of order over 1 key\n"
    );
    let run = cli(
        addr,
        &[
            "check",
            "order",
            "events",
            "--seq",
            "header:seq",
            "--format",
            "json",
        ],
    )
    .await;
    assert_eq!(run.code, 1);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["violations"].as_array().unwrap().len(), 1);
    assert_eq!(doc["records"], 6);

    // From a group that has read past the swap: in order.
    commit(&admin(addr).await, "late", &[("events", 0, 3)]).await;
    let run = cli(
        addr,
        &[
            "check",
            "order",
            "events",
            "--seq",
            "header:seq",
            "--group",
            "late",
        ],
    )
    .await;
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert_eq!(
        run.stdout,
        "checked 3 records of 2 keys (0 without a key, 0 repeated) in events-0@3..6: every key in \
         order\n"
    );
    // The headers as kcat shows them.
    let run = cli(addr, &["consume", "events", "-J", "--count", "1"]).await;
    let envelope: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(envelope["headers"], serde_json::json!(["seq", "1"]));
    assert_eq!(
        (envelope["key"].as_str(), envelope["offset"].as_i64()),
        (Some("a"), Some(0))
    );
    let run = cli(addr, &["check", "order", "events", "--seq", "json:n"]).await;
    assert_eq!(run.code, 2, "a number that cannot be read: not checked");
    assert!(run.stderr.contains("not JSON"), "{}", run.stderr);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_judges_a_group_where_nothing_moves_stopped() {
    let (b, _admin) = broker_with_billing().await;
    let addr = b.addr().to_string();
    let docs = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_client"))
            .args(["groups", "lag", "billing", "--watch", "--window", "2"])
            .args(["--interval", "1", "--format", "json"])
            .env("KAFKA_BOOTSTRAP", addr)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut docs = Vec::new();
        while docs.len() < 2 {
            let mut line = String::new();
            let read = std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
            assert!(read > 0, "the watch ended by itself");
            docs.push(serde_json::from_str::<Value>(&line).unwrap());
        }
        let interrupt = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(interrupt.success());
        assert_eq!(child.wait().unwrap().code(), Some(0));
        docs
    })
    .await
    .unwrap();
    assert_eq!(docs[0]["status"], "OK");
    assert_eq!(
        docs[0]["partitions"][0]["rule"],
        "window filling (1 of 2 observations)"
    );
    assert_eq!(docs[1]["status"], "STOP");
    let rule = docs[1]["rule"].as_str().unwrap();
    assert!(
        rule.starts_with("orders-0: no commit and no new record for ")
            && rule.ends_with(" s: committed offset 2, lag 3"),
        "{rule}"
    );
    assert_eq!(docs[1]["partitions"][1]["rule"], "lag 0");
    b.shutdown().await;
}
