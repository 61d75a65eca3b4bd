//! Lab `routing` run in-process as `--json` reports it: embedded on `broker --nodes 3`, on one
//! node (the phases that need a leader move are skipped, with the reason), and with
//! `--bootstrap` against a broker binary started separately. The default seed's figures are
//! asserted exactly: each is counted from the run (the producer's NOT_LEADER_OR_FOLLOWER answers
//! and metadata requests, the topic read back, the raw client's refused requests, the model's
//! hops).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};
use support::{
    narrated, narrated_against, run_json, run_lab, unwrapped, workspace_binary, BrokerProcess,
};

#[test]
fn the_default_seed_gives_these_figures_on_three_nodes() {
    let (report, text) = narrated("routing", &["--json"]);
    assert!(report.shown, "{text}");
    assert!(report.skipped.is_empty());
    let f = &report.figures;
    assert_eq!(
        f,
        &json!({
            "nodes": 3,
            "fresh_map_not_leader_errors": 0,
            "leader_moves": 1,
            "stale_map_not_leader_errors": 1,
            "metadata_refreshes": 1,
            "records_lost_refreshing_client": 0,
            "records_failed_never_refreshing_client": 14,
            "redirect_ratio_never_refreshing_client": 0.1167,
            "redis_slot_user_42_cart": 12984,
            "redis_hash_tag_slot_user_42": 8000,
            "ask_treated_as_moved_flaps": 352,
            "moved_ignored_latency_multiple": 1.9802,
        })
    );
    // 14 of the 120 keys are in partition 7, whose leader moved: 14 / 120 = 0.1167. In the
    // model, 100 requests by a client ignoring MOVED cost 200 hops, by one that updates 101.
    let text = unwrapped(&text);
    assert!(
        text.contains(
            "Received invalid metadata error in produce request on partition orders-7 \
                       due to NotLeaderOrFollowerException"
        ),
        "{text}"
    );
    assert!(text.contains("[Producer clientId=orders-api]"), "{text}");
    // The cluster's own counter names the old leader, and counts what the client was refused.
    let metrics = &report.measured["never_refreshing_node_metrics"];
    let refused: u64 = metrics
        .as_object()
        .expect("the embedded cluster's metrics are read")
        .values()
        .map(|node| node["not_leader"].as_u64().unwrap())
        .sum();
    assert_eq!(refused, f["records_failed_never_refreshing_client"]);
}

/// `broker --nodes 3 --metrics 127.0.0.1:0`, as a user would start it: its first node's address
/// and its metrics address; killed by its PID when dropped.
struct ThreeNodes {
    child: Child,
    addr: String,
    metrics: String,
}

impl ThreeNodes {
    fn start() -> Self {
        let mut child = Command::new(workspace_binary("broker"))
            .args([
                "--nodes",
                "3",
                "--listen",
                "127.0.0.1:0",
                "--metrics",
                "127.0.0.1:0",
            ])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the broker binary starts");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        // Three `broker listening on ADDR` lines, then `metrics listening on ADDR`.
        let mut last_word = || {
            let line = lines.next().expect("a line").expect("readable");
            line.split_whitespace()
                .last()
                .expect("an address")
                .to_string()
        };
        let addr = last_word();
        let (_, _, metrics) = (last_word(), last_word(), last_word());
        ThreeNodes {
            child,
            addr,
            metrics,
        }
    }
}

impl Drop for ThreeNodes {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn with_bootstrap_on_three_nodes_the_figures_are_the_embedded_ones() {
    let cluster = ThreeNodes::start();
    let (report, text) = narrated_against(
        "routing",
        &cluster.addr,
        &["--json", "--metrics", &cluster.metrics],
    );
    assert!(report.shown, "{text}");
    let embedded = run_json("routing", &[]);
    assert_eq!(report.figures, embedded.figures, "{text}");
    let refused: u64 = report.measured["never_refreshing_node_metrics"]
        .as_object()
        .expect("read from --metrics")
        .values()
        .map(|node| node["not_leader"].as_u64().unwrap())
        .sum();
    assert_eq!(refused, 14);
}

#[test]
fn on_one_node_the_leader_move_is_skipped_with_its_reason() {
    let report = run_json("routing", &["--nodes", "1"]);
    let f = &report.figures;
    assert!(report.shown, "the checks that ran held");
    assert_eq!(f["nodes"], 1);
    assert_eq!(f["leader_moves"], 0);
    assert_eq!(f["stale_map_not_leader_errors"], Value::Null);
    let reasons: Vec<&str> = report.skipped.iter().map(|s| s.reason.as_str()).collect();
    assert_eq!(
        reasons, ["this cluster has one node: no leader can move"; 2],
        "{:?}",
        report.skipped
    );
}

#[test]
fn with_bootstrap_on_a_single_broker_it_skips_the_move_and_cleans_up() {
    let broker = BrokerProcess::start();
    let (report, text) = narrated_against("routing", &broker.addr, &[]);
    assert_eq!(report.figures["leader_moves"], 0, "{text}");
    assert_eq!(report.figures["redis_hash_tag_slot_user_42"], 8000);
    assert!(unwrapped(&text).contains("no leader can move"), "{text}");
}

#[test]
fn metrics_without_bootstrap_is_refused_in_one_line() {
    let err = run_lab("routing", &["--metrics", "127.0.0.1:9"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--metrics 127.0.0.1:9 reads the metrics of a cluster given with --bootstrap; the \
         embedded cluster's are read without it"
    );
}
