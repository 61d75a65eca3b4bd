//! The `client` binary run as a user would, against a broker started in-process on port 0:
//! output, exit codes, and the one-line errors.

mod support;

use support::{broker, client, Run};

/// A failure is one line, prefixed `error:`, with no panic or backtrace.
fn assert_one_line_error(run: &Run, code: i32, contains: &str) {
    assert_eq!(run.code, code, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", run.stderr);
    assert!(lines[0].starts_with("error: "), "{}", lines[0]);
    assert!(lines[0].contains(contains), "{} lacks {contains}", lines[0]);
    assert!(!run.stderr.contains("panicked") && !run.stderr.contains("backtrace"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_lifecycle() {
    let b = broker().await;
    let addr = Some(b.addr());
    let run = client(
        addr,
        &["topics", "create", "orders", "--partitions", "3"],
        "",
    )
    .await;
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "Created topic orders.\n")
    );
    client(addr, &["topics", "create", "audit", "-p", "1"], "").await;

    let run = client(addr, &["topics", "list"], "").await;
    assert_eq!(run.stdout, "audit\norders\n");
    let run = client(addr, &["topics", "describe", "orders"], "").await;
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].starts_with("Topic: orders\tTopicId: "),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with("\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: "));
    assert_eq!(
        lines[3],
        "\tTopic: orders\tPartition: 2\tLeader: 1\tReplicas: 1\tIsr: 1"
    );

    let run = client(
        addr,
        &["topics", "alter", "orders", "--partitions", "6"],
        "",
    )
    .await;
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "Topic orders now has 6 partitions.\n")
    );
    let run = client(
        addr,
        &["topics", "alter", "orders", "--partitions", "2"],
        "",
    )
    .await;
    assert_one_line_error(&run, 2, "INVALID_PARTITIONS");
    assert!(
        run.stderr.contains("a topic can only grow"),
        "{}",
        run.stderr
    );
    // The same code on a create asks for another fix.
    let run = client(addr, &["topics", "create", "none", "--partitions", "0"], "").await;
    assert_one_line_error(&run, 2, "INVALID_PARTITIONS");
    assert!(
        run.stderr
            .contains("give --partitions 1 or more, or -1 for the broker's default"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("grow"), "{}", run.stderr);
    let run = client(
        addr,
        &["topics", "create", "orders", "--partitions", "3"],
        "",
    )
    .await;
    assert_one_line_error(&run, 2, "TOPIC_ALREADY_EXISTS");

    let run = client(addr, &["topics", "delete", "audit"], "").await;
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "Deleted topic audit.\n")
    );
    let run = client(addr, &["topics", "describe", "audit"], "").await;
    assert_one_line_error(&run, 2, "client topics create audit");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_then_consume_with_keys_and_formats() {
    let b = broker().await;
    let addr = Some(b.addr());
    client(
        addr,
        &["topics", "create", "orders", "--partitions", "12"],
        "",
    )
    .await;
    // A line without the delimiter has no key and lands on a sticky random partition, which
    // could be 4: it goes to partition 7 explicitly, so partition 4 holds exactly order-8842's.
    let unkeyed = client(
        addr,
        &["produce", "orders", "-K", ":", "--partition", "7"],
        "no key here\n",
    )
    .await;
    assert_eq!(unkeyed.code, 0, "{}", unkeyed.stderr);
    let input = "order-8842:paid\norder-1:new\norder-8842:shipped\n";
    let run = client(
        addr,
        &["produce", "orders", "-K", ":", "--compression", "gzip"],
        input,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.starts_with("produced 3 records to orders in "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("partition 4: 2"),
        "order-8842 goes to 4: {}",
        run.stderr
    );

    let run = client(
        addr,
        &["consume", "orders", "--partition", "4", "--exit"],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "orders/4@0 key=order-8842 value=paid\norders/4@1 key=order-8842 value=shipped\n"
    );
    assert_eq!(run.stderr, "consumed 2 records from orders\n");

    let run = client(
        addr,
        &[
            "consume",
            "orders",
            "--exit",
            "--format",
            "%k|%s|%p|%o|%K\\n",
        ],
        "",
    )
    .await;
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    assert!(lines.contains(&"order-8842|paid|4|0|10"));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("|no key here|") && l.ends_with("|-1")));

    let run = client(
        addr,
        &[
            "consume", "orders", "-p", "4", "-o", "-1", "--count", "1", "-f", "%s\\n",
        ],
        "",
    )
    .await;
    assert_eq!(run.stdout, "shipped\n");
    let run = client(
        addr,
        &["consume", "orders", "-p", "4", "-o", "end", "--exit"],
        "",
    )
    .await;
    assert_eq!((run.code, run.stdout.as_str()), (0, ""));

    let run = client(addr, &["offsets", "orders"], "").await;
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "TOPIC   PARTITION  EARLIEST  LATEST");
    assert_eq!(lines.len(), 13);
    assert!(
        lines.contains(&"orders  4          0         2"),
        "{}",
        run.stdout
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_to_one_partition_with_every_acks_setting() {
    let b = broker().await;
    let addr = Some(b.addr());
    client(addr, &["topics", "create", "t", "--partitions", "2"], "").await;
    for acks in ["0", "1", "all"] {
        let run = client(
            addr,
            &["produce", "t", "--partition", "1", "--acks", acks],
            "x\n",
        )
        .await;
        assert_eq!(run.code, 0, "acks={acks}: {}", run.stderr);
        assert!(run.stderr.contains("(partition 1: 1)"), "{}", run.stderr);
    }
    let run = client(
        addr,
        &["consume", "t", "-p", "1", "--exit", "-f", "%o\\n"],
        "",
    )
    .await;
    assert_eq!(run.stdout, "0\n1\n2\n");
    let run = client(addr, &["produce", "t", "--partition", "7"], "x\n").await;
    assert_one_line_error(&run, 2, "partition below 2");
    let run = client(addr, &["produce", "missing"], "x\n").await;
    assert_one_line_error(&run, 2, "topic 'missing' does not exist");
    b.shutdown().await;
}

#[tokio::test]
async fn partition_shows_where_keys_go_without_a_broker() {
    let run = client(
        None,
        &[
            "partition",
            "order-8842",
            "--partitions",
            "12",
            "--to",
            "24",
        ],
        "",
    )
    .await;
    assert_eq!(run.code, 0);
    assert_eq!(
        run.stdout,
        "KEY         PARTITION(12)  PARTITION(24)  MOVES\norder-8842  4              16             yes\n"
    );
    let keys: String = (0..1000).map(|i| format!("order-{i}\n")).collect();
    let run = client(
        None,
        &["partition", "--partitions", "12", "--to", "24"],
        &keys,
    )
    .await;
    assert!(
        run.stdout.starts_with("1000 keys, 12 -> 24 partitions: "),
        "{}",
        run.stdout
    );
    let run = client(None, &["partition", "k", "--partitions", "0"], "").await;
    assert_one_line_error(&run, 2, "at least 1");
}

#[tokio::test]
async fn no_broker_gives_one_line_saying_how_to_start_one() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let run = client(Some(addr), &["topics", "list"], "").await;
    assert_one_line_error(&run, 2, &format!("no broker listening at {addr}"));
    assert!(run.stderr.contains(&format!("broker --listen {addr}")));
    // The flag wins over the environment.
    let run = client(
        None,
        &["--bootstrap", &addr.to_string(), "consume", "t"],
        "",
    )
    .await;
    assert_one_line_error(&run, 2, "no broker listening");
    // A name that does not resolve says so, at once.
    let args = ["--bootstrap", "nosuchhost.invalid:9092", "topics", "list"];
    let run = client(None, &args, "").await;
    assert_one_line_error(&run, 2, "cannot resolve nosuchhost.invalid:9092");
    assert!(run.stderr.contains("check the host name"), "{}", run.stderr);
}

#[tokio::test]
async fn a_port_that_answers_http_is_not_taken_for_a_broker() {
    // A web server answers anything with a status line, as most do to a request they cannot
    // parse.
    let web = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = web.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in web.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 512];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let answer = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
            let _ = std::io::Write::write_all(&mut stream, answer);
        }
    });
    let run = client(Some(addr), &["topics", "list"], "").await;
    let expected = format!("{addr} is not a Kafka broker: it answered \"HTTP");
    assert_one_line_error(&run, 2, &expected);
    assert!(!run.stderr.contains("frame size"), "{}", run.stderr);
    assert!(run.stderr.contains("at a Kafka listener"), "{}", run.stderr);
}

#[tokio::test]
async fn usage_errors_exit_2_and_every_verb_has_help_with_an_example() {
    let run = client(None, &["topics", "create", "x", "--partitions", "many"], "").await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--partitions"));
    let run = client(None, &["consume", "t", "--format", "%q"], "").await;
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("unknown placeholder %q"),
        "{}",
        run.stderr
    );
    let verbs: [&[&str]; 14] = [
        &[],
        &["topics", "list"],
        &["topics", "describe"],
        &["topics", "create"],
        &["topics", "alter"],
        &["topics", "delete"],
        &["produce"],
        &["consume"],
        &["offsets"],
        &["partition"],
        &["groups", "reset-offsets"],
        &["groups", "delete-offsets"],
        &["groups", "wait"],
        &["check", "order"],
    ];
    for verb in verbs {
        let mut args = verb.to_vec();
        args.push("--help");
        let run = client(None, &args, "").await;
        assert_eq!(run.code, 0, "{verb:?}");
        assert!(
            run.stdout.contains("Example"),
            "{verb:?} help has an example"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_read_committed_skips_what_an_open_transaction_wrote() {
    use client::{Producer, ProducerConfig, ProducerRecord};
    let b = broker().await;
    let addr = Some(b.addr());
    client(
        addr,
        &["topics", "create", "orders", "--partitions", "1"],
        "",
    )
    .await;
    let connection = client::Client::connect(client::ClientConfig::new(&b.addr().to_string()))
        .await
        .unwrap();
    let config = ProducerConfig {
        enable_idempotence: true,
        transactional_id: Some("cli-test".into()),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(connection.clone(), config).unwrap();
    producer.begin_transaction().await.unwrap();
    let record = ProducerRecord::new("orders").partition(0).value("pending");
    producer.send_and_wait(record).await.unwrap();
    let run = client(addr, &["produce", "orders", "--partition", "0"], "after\n").await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let committed = [
        "consume",
        "orders",
        "--exit",
        "--isolation-level",
        "read_committed",
    ];
    let run = client(addr, &committed, "").await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    let run = client(addr, &["consume", "orders", "--exit", "-f", "%o %s\\n"], "").await;
    assert_eq!(run.stdout, "0 pending\n1 after\n");
    producer.abort_transaction().await.unwrap();
    let run = client(addr, &committed, "").await;
    assert_eq!(
        run.stdout, "orders/0@1 key=(null) value=after\n",
        "{}",
        run.stderr
    );
}

/// `topics alter --config / --delete-config`, as kafka-configs.sh `--alter --add-config /
/// --delete-config` does: only the configs named change, and the broker's refusals are one
/// line with Kafka's error name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_alter_sets_and_deletes_configs() {
    let b = broker().await;
    let addr = Some(b.addr());
    let create = [
        "topics",
        "create",
        "orders",
        "-p",
        "1",
        "--config",
        "cleanup.policy=compact",
    ];
    assert_eq!(client(addr, &create, "").await.code, 0);
    let set_on = |run: Run| -> serde_json::Value {
        assert_eq!(run.code, 0, "{}", run.stderr);
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        doc["topics"][0]["configs"].clone()
    };
    let describe = ["topics", "describe", "orders", "--format", "json"];

    let alter = [
        "topics",
        "alter",
        "orders",
        "--config",
        "retention.ms=86400000",
        "--config",
        "max.message.bytes=2048",
        "--delete-config",
        "cleanup.policy",
    ];
    let run = client(addr, &alter, "").await;
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "Completed updating config for topic orders.\n"),
        "{}",
        run.stderr
    );
    assert_eq!(
        set_on(client(addr, &describe, "").await),
        serde_json::json!({"max.message.bytes": "2048", "retention.ms": "86400000"})
    );
    // One config changed, the other kept; partitions and configs in one alter.
    let run = client(
        addr,
        &[
            "topics",
            "alter",
            "orders",
            "--partitions",
            "2",
            "--config",
            "retention.ms=1000",
        ],
        "",
    )
    .await;
    assert_eq!(
        run.stdout,
        "Completed updating config for topic orders.\nTopic orders now has 2 partitions.\n"
    );
    assert_eq!(
        set_on(client(addr, &describe, "").await),
        serde_json::json!({"max.message.bytes": "2048", "retention.ms": "1000"})
    );

    let run = client(
        addr,
        &["topics", "alter", "orders", "--config", "retention.ms=soon"],
        "",
    )
    .await;
    assert_one_line_error(&run, 2, "INVALID_CONFIG");
    assert!(run.stderr.contains("retention.ms"), "{}", run.stderr);
    let run = client(
        addr,
        &["topics", "alter", "orders", "--config", "retention.msec=1"],
        "",
    )
    .await;
    assert_one_line_error(&run, 2, "INVALID_CONFIG");
    let run = client(
        addr,
        &["topics", "alter", "nosuch", "--config", "retention.ms=1"],
        "",
    )
    .await;
    assert_one_line_error(&run, 2, "UNKNOWN_TOPIC_OR_PARTITION");
    // The refusals changed nothing.
    assert_eq!(
        set_on(client(addr, &describe, "").await),
        serde_json::json!({"max.message.bytes": "2048", "retention.ms": "1000"})
    );
    // Nothing to change is a usage error.
    let run = client(addr, &["topics", "alter", "orders"], "").await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = client(
        addr,
        &["topics", "alter", "orders", "--config", "retention.ms"],
        "",
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    b.shutdown().await;
}
