//! Lab `partitions` run in-process, as `--json` reports it, and once more with `--bootstrap`
//! against a broker binary started separately, as against a real cluster.
//!
//! Exact where the figures are exact (the key, its partitions, the keys of the run and how many
//! move, recomputed here from Kafka's partitioner, the store's line, the broker's refusal), and
//! the phenomenon itself: violations after the increase, none after either fix.

mod support;

use std::process::Command;
use std::sync::OnceLock;

use protocol::partitioner::partition_for_key;
use serde_json::Value;
use support::{
    assert_figures_follow_the_seed, narrated, narrated_against, run_json, unwrapped,
    workspace_binary, BrokerProcess,
};
use workshop::LabReport;

const SEED_LINE: &str = "ERROR aggregate not found: order 8842 (expected version 6, store empty)";

fn run(args: &[&str]) -> LabReport {
    run_json("partitions", args)
}

/// The default run, once for all tests: parsed back from the JSON document, as a machine reads it.
fn default_run() -> &'static (LabReport, Value) {
    static RUN: OnceLock<(LabReport, Value)> = OnceLock::new();
    RUN.get_or_init(|| {
        let report = run(&[]);
        let json: Value = serde_json::from_str(&report.to_json()).expect("one JSON object");
        (report, json)
    })
}

/// The run's keys and how many change partition from `from` to `to`, by Kafka's partitioner.
fn moved(first: u64, last: u64, from: i32, to: i32) -> (usize, usize) {
    let keys: Vec<String> = (first..=last).map(|id| format!("order-{id}")).collect();
    let moved = keys
        .iter()
        .filter(|k| partition_for_key(k.as_bytes(), from) != partition_for_key(k.as_bytes(), to))
        .count();
    (keys.len(), moved)
}

fn assert_seed_figures(json: &Value) {
    assert_eq!(json["lab"], "partitions");
    assert_eq!(json["shown"], true, "{json}");
    let f = &json["figures"];
    assert_eq!(f["key"], "order-8842");
    assert_eq!(f["partitions_before"], 12);
    assert_eq!(f["partitions_after"], 24);
    assert_eq!(f["partition_before"], 4);
    assert_eq!(f["partition_after"], 16);

    // 240 orders around 8842, recomputed here.
    let (first, last) = (
        f["first_order_id"].as_u64().unwrap(),
        f["last_order_id"].as_u64().unwrap(),
    );
    assert_eq!((first, last), (8842 - 120, 8842 - 120 + 239));
    let (total, moved) = moved(first, last, 12, 24);
    assert_eq!(f["keys_total"].as_u64(), Some(total as u64));
    assert_eq!(f["keys_moved"].as_u64(), Some(moved as u64));
    assert!(
        (0.4..0.6).contains(&(moved as f64 / total as f64)),
        "about half move"
    );

    assert!(f["violations"].as_u64().unwrap() > 0, "{f}");
    assert_eq!(f["violations_after_fix"], 0, "{f}");
    assert_eq!(f["fixes"]["provisioned"]["violations"], 0);
    assert_eq!(f["fixes"]["migration"]["violations"], 0);
    assert_eq!(f["first_violation"], SEED_LINE);
    let detail = f["first_violation_detail"].as_str().unwrap();
    assert!(
        detail.starts_with("order-8842: version 7 read from ")
            && detail.contains("-16@0 before version 1, written to ")
            && detail.ends_with(
                "went from 12 to 24 partitions, which moved order-8842 from partition 4 to 16"
            ),
        "{detail}"
    );

    // Source 003's three lines, in this order, in the store's log of order 8842.
    let log: Vec<&str> = f["key_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(
        log[..2],
        [
            "INFO  applying event order.cancelled  order_id=8842 version=7",
            SEED_LINE
        ]
    );
    assert_eq!(
        log[2],
        "INFO  applying event order.created    order_id=8842 version=1"
    );

    // The over-provisioned topic never falls behind; the migration drained the old topic.
    assert_eq!(f["fixes"]["provisioned"]["partitions"], 48);
    let steps = &f["fixes"]["migration_steps"];
    assert_eq!(steps["to_partitions"], 24);
    assert_eq!(steps["routing_version"], 2);
    assert_eq!(steps["old_topic_max_lag_at_switch"], 0);
    assert!(steps["blocked_rounds"].as_u64().unwrap() > 0);

    // A group left with Kafka's default auto.offset.reset=latest never reads the cancellation,
    // the one record orders-16 held when that group took it over.
    assert_eq!(f["skipped_with_latest"], 1, "{f}");

    let shrink = &f["shrink"];
    assert_eq!(shrink["refused"], true);
    assert_eq!(shrink["error"], "INVALID_PARTITIONS");
    assert_eq!(shrink["code"], 37);
    let topic = f["failure"]["topic"].as_str().unwrap();
    assert_eq!(
        shrink["message"].as_str().unwrap(),
        format!("The topic {topic} currently has 24 partition(s); 12 would not be an increase.")
    );
}

#[test]
fn the_default_run_causes_cancel_before_create_and_both_fixes_remove_it() {
    let (report, json) = default_run();
    assert_eq!(report.exit_code(), 0);
    assert_seed_figures(json);
    let f = &json["figures"];
    assert_eq!(f["target"], "embedded");
    assert_eq!(f["failure"]["topic"], "orders");
    // Every violation is an event the store refused: the checker and the store agree.
    assert_eq!(
        f["failure"]["rejected_by_store"].as_u64(),
        f["violations"].as_u64()
    );
}

#[test]
fn the_same_seed_gives_the_same_figures() {
    let (_, json) = default_run();
    assert_figures_follow_the_seed("partitions", &[], Some(&json["figures"]));
}

#[test]
fn client_partition_agrees_with_the_lab_on_every_key() {
    let (_, json) = default_run();
    let f = &json["figures"];
    let (first, last) = (
        f["first_order_id"].as_u64().unwrap(),
        f["last_order_id"].as_u64().unwrap(),
    );
    let keys: Vec<String> = (first..=last).map(|id| format!("order-{id}")).collect();
    let out = Command::new(workspace_binary("client"))
        .args(["partition", "--partitions", "12", "--to", "24"])
        .args(&keys)
        .output()
        .expect("client partition runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let mut moved = 0;
    // KEY  PARTITION(12)  PARTITION(24)  MOVES, one row per key, in the order given.
    for (row, key) in table.lines().skip(1).zip(&keys) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        let (before, after) = (
            partition_for_key(key.as_bytes(), 12),
            partition_for_key(key.as_bytes(), 24),
        );
        assert_eq!(
            cells,
            [
                key.as_str(),
                &before.to_string(),
                &after.to_string(),
                if before == after { "no" } else { "yes" }
            ]
        );
        moved += usize::from(before != after);
        if key == "order-8842" {
            assert_eq!((before, after), (4, 16));
        }
    }
    assert_eq!(table.lines().count(), keys.len() + 1);
    assert_eq!(f["keys_moved"].as_u64(), Some(moved as u64));
}

#[test]
fn with_bootstrap_the_lab_runs_against_a_separate_broker_and_cleans_up() {
    let broker = BrokerProcess::start();
    let addr = broker.addr.clone();

    let report = run(&["--bootstrap", &addr]);
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_seed_figures(&json);
    let f = &json["figures"];
    assert_eq!(f["target"], addr.as_str());
    // Unique names: another run against the same cluster cannot collide with this one.
    let topic = f["failure"]["topic"].as_str().unwrap();
    assert!(topic.starts_with("orders-") && topic != "orders", "{topic}");

    // Nothing the lab created is left on the broker: no topic, no group.
    let (topics, groups) = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let kafka = client::Client::connect(client::ClientConfig::new(&addr))
            .await
            .unwrap();
        let admin = client::Admin::new(kafka);
        (
            admin.list_topics().await.unwrap(),
            admin.list_groups(&[]).await.unwrap(),
        )
    });
    assert!(topics.is_empty(), "topics left behind: {topics:?}");
    assert!(groups.is_empty(), "groups left behind: {groups:?}");
    drop(broker);
}

/// What the room is told about Kafka: the group's auto.offset.reset and what Kafka's default
/// would have lost, whose partitioner murmur2 is, and a lag table that does not claim to be the
/// tool's.
#[test]
fn the_room_hears_the_settings_that_differ_from_kafka_s_defaults() {
    let (report, text) = narrated("partitions", &[]);
    assert_eq!(report.exit_code(), 0);
    let text = unwrapped(&text);
    for said in [
        "The group starts a partition nobody committed on at its beginning \
         (auto.offset.reset=earliest; Kafka's default is latest, which the increase puts to the test).",
        "new records follow murmur2(key) % 24 (the partitioner of Java's producer; librdkafka's \
         default, consistent_random, is crc32(key) % P and puts order-8842 on 9 of 12).",
        "A second group with Kafka's default, latest, took the new partitions over after the \
         producer had written to them and started each at its end: orders-16 at offset 1, the \
         other 11 at 0. It never reads order 8842's cancellation: for that group order 8842 is \
         never cancelled. A loss, not a reordering (KAFKA-12261).",
        "this group (earliest) lost and repeated nothing; the order is what broke. With \
         auto.offset.reset=latest, Kafka's default, 1 event was never read: a loss, next to the \
         reordering.",
        "Group order-service's lag per partition just before the change (offsets as \
         kafka-consumer-groups.sh --describe reads them; the table is the lab's):",
    ] {
        assert!(text.contains(said), "does not say {said:?}:\n{text}");
    }
    // "(s)" only in the broker's own words, which are Kafka's.
    let ours = text.replace("currently has 24 partition(s);", "");
    assert!(!ours.contains("(s)"), "{text}");
    assert!(
        !text.contains("kafka-consumer-groups.sh --describe --group"),
        "{text}"
    );
}

/// A cluster without CreatePartitions (tansu offers none): the failure and the refusal to
/// shrink are skipped and say why, both fixes run with the figures they have on any cluster,
/// and the verdict, and so the exit code, covers the fixes.
#[test]
fn on_a_cluster_without_create_partitions_the_fixes_still_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cluster = rt.block_on(::tests::WithoutApi::start(
        ::tests::BrokerConfig::default(),
        client::ApiKey::CreatePartitions as i16,
    ));
    let (report, text) = narrated_against("partitions", &cluster.addr.to_string(), &[]);
    let reason = "this cluster does not offer CreatePartitions";
    let skipped: Vec<(&str, &str)> = report
        .skipped
        .iter()
        .map(|s| (s.phase.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [
            ("The operator adds partitions", reason),
            ("Shrinking back", reason)
        ]
    );
    assert_eq!(report.exit_code(), 0, "{}", report.figures);
    let f = &report.figures;
    for skipped in ["violations", "skipped_with_latest", "failure", "shrink"] {
        assert_eq!(f[skipped], Value::Null, "{skipped}");
    }
    let expected = &default_run().1["figures"];
    assert_eq!(f["keys_moved"], expected["keys_moved"]);
    assert_eq!(f["violations_after_fix"], 0);
    for fix in ["provisioned", "migration"] {
        for figure in ["violations", "rounds", "max_lag_at_change", "partitions"] {
            assert_eq!(
                f["fixes"][fix][figure], expected["fixes"][fix][figure],
                "{fix} {figure}"
            );
        }
    }
    assert!(
        text.contains("1. The operator adds partitions")
            && text.contains("4. Shrinking back")
            && text
                .matches("Skipped: this cluster does not offer CreatePartitions.")
                .count()
                == 2,
        "{text}"
    );
    let text = unwrapped(&text);
    assert!(
        text.contains(
            "The increase did not run on this cluster; by Kafka's partitioner it would move 112 of \
             240 keys (46.7 %)."
        ),
        "{text}"
    );
    assert!(!text.contains("Checks - ok: shrinking"), "{text}");
}
