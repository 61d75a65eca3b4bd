//! `client reassign` against `broker --nodes 3` in-process: a move, a plan from stdin, verify,
//! list, and a refused partition, as kafka-reassign-partitions.sh users would run them.

mod support;

use broker::{Broker, BrokerConfig};
use support::client;

async fn three_nodes() -> Broker {
    Broker::start(BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        nodes: 3,
        ..BrokerConfig::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn partitions_move_verify_and_refusals_are_one_line() {
    let b = three_nodes().await;
    let addr = Some(b.addr());
    let run = client(addr, &["topics", "create", "orders", "-p", "3"], "").await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let run = client(addr, &["reassign", "move", "orders", "0", "--to", "1"], "").await;
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (
            0,
            "Successfully started partition reassignments for orders-0\n"
        ),
        "{}",
        run.stderr
    );
    let plan = r#"{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1]},
                   {"topic":"orders","partition":1,"replicas":[3]}]}"#;
    let run = client(addr, &["reassign", "verify", "-"], plan).await;
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (
            1,
            "Reassignment of partition orders-0 is completed.\n\
             Reassignment of partition orders-1 is not active, but its replica set is [1] \
             rather than [3].\n"
        )
    );
    let run = client(addr, &["reassign", "execute", "-"], plan).await;
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (
            0,
            "Successfully started partition reassignments for orders-0,orders-1\n"
        ),
        "{}",
        run.stderr
    );
    let run = client(addr, &["reassign", "verify", "-"], plan).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);

    let run = client(addr, &["reassign", "list", "--format", "json"], "").await;
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "{\"reassignments\":[]}\n")
    );

    let run = client(addr, &["reassign", "move", "orders", "2", "--to", "9"], "").await;
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("orders-2: INVALID_REPLICA_ASSIGNMENT (39)")
            && run
                .stderr
                .contains("node 9 does not exist (nodes: 1, 2, 3)"),
        "{}",
        run.stderr
    );
    b.shutdown().await;
}
