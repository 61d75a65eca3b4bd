//! `client groups ...` and `client consume --group` run as a user would, against an in-process
//! broker and a group member of known identity, so the kafka-consumer-groups.sh output can be
//! compared character for character.

mod support;

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use broker::Broker;
use client::{GroupConsumer, TopicPartition};
use support::{broker, client, member, Run};

/// The binary with `args` and `stdin`, pointed at `addr`.
async fn cli(addr: SocketAddr, args: &[&str], stdin: &str) -> Run {
    client(Some(addr), args, stdin).await
}

/// A broker with "orders" (3 partitions) holding 5, 7 and 9 records.
async fn broker_with_orders() -> Broker {
    let b = broker().await;
    let run = cli(b.addr(), &["topics", "create", "orders", "-p", "3"], "").await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    for (p, n) in [5, 7, 9].into_iter().enumerate() {
        let lines: String = (0..n).map(|i| format!("v{i}\n")).collect();
        let partition = p.to_string();
        let run = cli(b.addr(), &["produce", "orders", "-p", &partition], &lines).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    b
}

/// A member of `group` owning all of "orders", that committed 2 on partition 0 and 7 on 1.
async fn member_with_commits(addr: SocketAddr, group: &str) -> GroupConsumer {
    let mut member = member(addr, group, "orders", 3).await;
    member
        .commit_offsets_sync(
            [
                (TopicPartition::new("orders", 0), 2),
                (TopicPartition::new("orders", 1), 7),
            ]
            .into(),
        )
        .await
        .unwrap();
    member
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_prints_exactly_what_kafka_consumer_groups_prints() {
    let b = broker_with_orders().await;
    let member = member_with_commits(b.addr(), "billing").await;
    let id = member.generation().member_id;
    assert!(id.starts_with("workshop-client-"), "{id}");
    let w = id.len();

    let run = cli(b.addr(), &["groups", "describe", "billing"], "").await;
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let head = format!(
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             {:<w$} HOST            CLIENT-ID",
        "CONSUMER-ID"
    );
    let row = |p: i32, current: &str, end: i64, lag: &str| {
        format!(
            "\nbilling         orders          {p:<10} {current:<15} {end:<15} {lag:<15} {id} /127.0.0.1      workshop-client"
        )
    };
    let expected = [
        head.clone(),
        row(0, "2", 5, "3"),
        row(1, "7", 7, "0"),
        row(2, "-", 9, "-"),
        "\n".to_string(),
    ]
    .concat();
    assert_eq!(run.stdout, expected);

    let run = cli(
        b.addr(),
        &["groups", "describe", "billing", "--members"],
        "",
    )
    .await;
    assert_eq!(
        run.stdout,
        format!(
            "\nGROUP           {:<w$} HOST            CLIENT-ID       #PARTITIONS     \n\
             billing         {id} /127.0.0.1      workshop-client 3               \n",
            "CONSUMER-ID"
        )
    );
    let run = cli(b.addr(), &["groups", "describe", "billing", "--state"], "").await;
    let coordinator = format!("127.0.0.1:{}  (1)", b.addr().port());
    assert_eq!(
        run.stdout,
        format!(
            "\nGROUP           {:<25} ASSIGNMENT-STRATEGY  STATE                #MEMBERS\
             \nbilling         {coordinator:<25} range                Stable               1\n",
            "COORDINATOR (ID)"
        )
    );

    // Without members: a note on stderr, committed partitions with no owner.
    member.close().await.unwrap();
    let run = cli(b.addr(), &["groups", "describe", "billing"], "").await;
    assert_eq!(
        run.stderr,
        "\nConsumer group 'billing' has no active members.\n"
    );
    let dash = |p: i32, current: &str, end: i64, lag: &str| {
        format!(
            "\nbilling         orders          {p:<10} {current:<15} {end:<15} {lag:<15} -               -               -"
        )
    };
    let expected = [
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID".to_string(),
        dash(0, "2", 5, "3"),
        dash(1, "7", 7, "0"),
        "\n".to_string(),
    ]
    .concat();
    assert_eq!(run.stdout, expected);

    // The tool prints this on stdout and exits 0; a script needs the exit code.
    let run = cli(b.addr(), &["groups", "describe", "nope"], "").await;
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (
            2,
            "",
            "error: consumer group 'nope' does not exist: see `client groups list`\n"
        )
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_lag_consume_with_a_group_and_delete() {
    let b = broker_with_orders().await;
    let member = member_with_commits(b.addr(), "billing").await;

    let run = cli(b.addr(), &["groups", "list"], "").await;
    assert_eq!(run.stdout, "billing\n");
    let run = cli(b.addr(), &["groups", "list", "--state"], "").await;
    assert_eq!(
        run.stdout,
        format!(
            "{:<25} {:<20}\n{:<25} {:<20}\n",
            "GROUP", "STATE", "billing", "Stable"
        )
    );
    let run = cli(b.addr(), &["groups", "list", "--state", "empty"], "").await;
    assert_eq!(run.stdout, format!("{:<25} {:<20}\n", "GROUP", "STATE"));
    let run = cli(b.addr(), &["groups", "list", "--state", "sleepy"], "").await;
    assert_eq!(run.code, 2, "{}", run.stderr);

    let run = cli(b.addr(), &["groups", "lag", "billing"], "").await;
    let lines: Vec<&str> = run.stdout.lines().collect();
    // Partition 2, committed on by nobody, is behind by its whole log.
    assert_eq!(lines[0], "group billing: Stable, 1 member, total lag 12");
    assert_eq!(lines[2], "TOPIC   PARTITION  COMMITTED  LOG-END  LAG");
    assert!(lines[3].starts_with("orders  0          2          5        3    █"));
    assert!(lines[5].starts_with("orders  2          -          9        9    █"));
    member.close().await.unwrap();

    // A second group reads everything and commits on the way out.
    let run = cli(
        b.addr(),
        &[
            "consume", "orders", "--group", "audit", "--exit", "--format", "%p:%o\\n",
        ],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 21);
    assert!(run
        .stderr
        .contains("consumed 21 records from orders in group audit"));
    let run = cli(b.addr(), &["groups", "describe", "audit"], "").await;
    let lags: Vec<&str> = run
        .stdout
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().nth(5).unwrap())
        .collect();
    assert_eq!(lags, ["0", "0", "0"]);

    // --count stops mid-way; what was not printed is not committed.
    let run = cli(
        b.addr(),
        &[
            "consume", "orders", "-G", "sampler", "--count", "4", "--format", "%p:%o\\n",
        ],
        "",
    )
    .await;
    assert_eq!(run.stdout.lines().count(), 4, "{}", run.stderr);
    let run = cli(b.addr(), &["groups", "lag", "sampler"], "").await;
    assert!(
        run.stdout
            .starts_with("group sampler: Empty, 0 members, total lag 17\n"),
        "{}",
        run.stdout
    );

    let run = cli(b.addr(), &["groups", "delete", "audit", "sampler"], "").await;
    assert_eq!(
        run.stdout,
        "Deletion of requested consumer groups ('audit', 'sampler') was successful.\n"
    );
    let run = cli(b.addr(), &["groups", "list"], "").await;
    assert_eq!(run.stdout, "billing\n");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_watch_redraws_every_interval_until_interrupted() {
    let b = broker_with_orders().await;
    let member = member_with_commits(b.addr(), "billing").await;
    let addr = b.addr().to_string();
    let (status, stdout) = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_client"))
            .args(["groups", "lag", "billing", "--watch"])
            .env("KAFKA_BOOTSTRAP", addr)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Interrupt once the third table has started: the watch is seen redrawing, without
        // guessing how long that takes.
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut stdout = String::new();
        let mut line = String::new();
        while stdout.matches("group billing: Stable").count() < 3 {
            line.clear();
            let read = std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
            assert!(read > 0, "the watch ended by itself: {stdout}");
            stdout.push_str(&line);
        }
        let interrupt = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(interrupt.success());
        std::io::Read::read_to_string(&mut reader, &mut stdout).unwrap();
        (child.wait().unwrap(), stdout)
    })
    .await
    .unwrap();
    assert_eq!(status.code(), Some(0), "Ctrl-C ends the watch cleanly");
    let tables = stdout.matches("group billing: Stable").count();
    assert!((3..=4).contains(&tables), "one table per redraw: {stdout}");
    // Into a pipe, tables follow each other, no terminal escapes.
    assert!(!stdout.contains('\x1b'));
    member.close().await.unwrap();
    b.shutdown().await;
}
