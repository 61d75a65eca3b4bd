//! Lab `rebalance` run in-process, as `--json` reports it, and once more with `--bootstrap`
//! against a broker binary started separately, as against a real cluster.
//!
//! In-process the lab runs on the paused clock, so its counts are exact and asserted exactly,
//! each with the reason it must be that number. Against the broker binary time is real: only
//! what does not depend on timing is asserted there.

mod support;

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::Value;
use support::{assert_figures_follow_the_seed, run_json, BrokerProcess};
use workshop::lab::report::{lag_lines, Event, Gate, Recorder};

/// The default run, once for all tests, parsed back from its JSON document.
fn default_run() -> &'static Value {
    static RUN: OnceLock<Value> = OnceLock::new();
    RUN.get_or_init(|| {
        let report = run_json("rebalance", &[]);
        serde_json::from_str(&report.to_json()).expect("one JSON object")
    })
}

fn n(f: &Value, key: &str) -> u64 {
    f[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a count: {}", f[key]))
}

/// What holds on any broker, whatever the timing.
fn assert_the_phenomenon(json: &Value) {
    assert_eq!(json["lab"], "rebalance");
    assert_eq!(json["shown"], true, "{json}");
    let f = &json["figures"];
    let duplicates = n(f, "duplicates");
    assert!(duplicates > 0);
    assert_eq!(n(f, "processed_uncommitted"), duplicates);
    assert_eq!(n(f, "processed"), n(f, "committed") + duplicates);
    assert_eq!(
        n(f, "committed"),
        n(f, "payments"),
        "everything committed in the end"
    );
    assert!(n(f, "failed_commits") >= 1);
    // The stalled member's consumer had left the group: it fails the commit itself, as Java's
    // consumer does, with Java's words.
    assert_eq!(
        f["commit_failed_error"],
        "Offset commit cannot be completed since the consumer is not part of an active group for \
         auto partition assignment; it is likely that the consumer was kicked out of the group."
    );
    assert_eq!(f["late_commit_broker_answer"], "UNKNOWN_MEMBER_ID");
    assert_eq!(f["resumed_at_committed"], true);

    // Every redelivered range: billing-3's work, applied again by another member in a later
    // generation; together they are the duplicates.
    let redeliveries = f["redeliveries"].as_array().unwrap();
    let mut total = 0;
    for r in redeliveries {
        assert_eq!(r["first"]["member"], "billing-3", "{r}");
        assert_ne!(r["second"]["member"], "billing-3", "{r}");
        assert!(r["second"]["generation"].as_i64() > r["first"]["generation"].as_i64());
        assert_eq!(
            n(r, "count"),
            n(r, "last_offset") - n(r, "first_offset") + 1
        );
        total += n(r, "count");
    }
    assert_eq!(total, duplicates);

    assert!(n(f, "partitions_revoked_cooperative") < n(f, "partitions_revoked_eager"));
    assert_eq!(n(f, "static_membership_rebalances"), 0);
    assert!(n(f, "dynamic_restart_rebalances") > 0);
    assert!(n(f, "duplicates_small_poll_batch") > 0);
    assert!(n(f, "duplicates_small_poll_batch") < duplicates);
    assert_eq!(n(f, "duplicate_effects_colocated_dedup"), 0);
    assert_eq!(f["double_charged_cents_colocated_dedup"], 0);
    assert_eq!(n(f, "redeliveries_refused_colocated_dedup"), duplicates);
    assert!(n(f, "duplicates_ttl_dedup") > 0);
    assert!(n(f, "dedup_ttl_ms") < n(f, "shortest_replay_ms"));
    for (name, s) in f["scenarios"].as_object().unwrap() {
        assert_eq!(
            s["duplicates"], s["processed_uncommitted"],
            "run {name}: {s}"
        );
    }
}

#[test]
fn the_stall_applies_exactly_the_uncommitted_batch_twice() {
    let json = default_run();
    assert_the_phenomenon(json);
    let f = &json["figures"];
    assert_eq!(f["topic"], "payments");
    assert_eq!(f["group"], "billing");
    assert_eq!(f["stalled_member"], "billing-3");
    // The stall comes after billing-3's second batch, and each member owns more than two
    // batches' worth of payments, so the uncommitted batch is a whole max.poll.records.
    assert_eq!(n(f, "max_poll_records"), 100);
    assert!((101..=200).contains(&n(f, "stall_after_payments")));
    assert_eq!(n(f, "duplicates"), 100);
    assert_eq!(n(f, "processed"), 1300);
    assert_eq!(n(f, "committed"), 1200);
    assert_eq!(n(f, "failed_commits"), 1);
    // The members join one by one (generations 1-4); the stall's rebalance is generation 5.
    for r in f["redeliveries"].as_array().unwrap() {
        assert_eq!(r["first"]["generation"], 4, "{r}");
        assert_eq!(r["second"]["generation"], 5, "{r}");
    }
    // Payments are charged twice by exactly the sum of the redelivered amounts: positive.
    assert!(f["double_charged_cents"].as_i64().unwrap() > 0);
}

/// kafka-consumer-groups.sh's view 5 s into the stall, with what each owner processed past the
/// committed offset beside it: `payments-5` has no commit yet (lag "-"), but billing-3 has
/// processed 37 of its payments; with `payments-4`'s 63, exactly what is applied again later.
/// The others are 5 s into the batch they will commit: 33 payments at 150 ms each.
#[test]
fn the_lag_table_in_the_stall_shows_what_billing_3_processed_and_did_not_commit() {
    let recorder = Recorder::new();
    let view = recorder.clone();
    let outcome = workshop::run_with(["rebalance", "--check"], |n| {
        n.subscribe(Box::new(view));
        n.pace(Gate::opened());
    })
    .unwrap();
    let workshop::Outcome::Lab { report, .. } = outcome else {
        panic!("rebalance listed the labs");
    };
    let figures: Value = serde_json::from_str(&report.to_json()).unwrap();
    let rows = recorder
        .events()
        .into_iter()
        .find_map(|e| match e {
            Event::Lag { rows } => Some(rows),
            _ => None,
        })
        .expect("a lag table");
    let uncommitted = |p: i32| {
        let row = rows.iter().find(|r| r.partition == p).unwrap();
        (
            row.client_id.clone().unwrap(),
            row.current_offset,
            row.processed_uncommitted,
        )
    };
    let billing_3 = |offset, n| ("billing-3".to_string(), offset, Some(n));
    assert_eq!(uncommitted(3), billing_3(Some(94), 0));
    assert_eq!(uncommitted(4), billing_3(Some(6), 63));
    assert_eq!(uncommitted(5), billing_3(None, 37));
    for r in figures["figures"]["redeliveries"].as_array().unwrap() {
        let p = r["partition"].as_i64().unwrap() as i32;
        assert_eq!(uncommitted(p).2, Some(n(r, "count")), "{r}");
    }
    let mut per_member = std::collections::BTreeMap::new();
    for r in &rows {
        *per_member.entry(r.client_id.clone().unwrap()).or_insert(0) +=
            r.processed_uncommitted.unwrap();
    }
    let expected = [
        ("billing-1", 33),
        ("billing-3", 100),
        ("billing-5", 33),
        ("billing-7", 33),
    ];
    let expected: std::collections::BTreeMap<String, u64> =
        expected.iter().map(|(m, n)| (m.to_string(), *n)).collect();
    assert_eq!(per_member, expected);

    // As the room sees it: the partition without a commit shows its 37.
    let (_, body) = lag_lines(&rows, 96, false);
    let five: Vec<&str> = body
        .iter()
        .find(|l| l.split_whitespace().nth(1) == Some("5"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(five, ["payments", "5", "-", "116", "-", "billing-3", "37"]);
}

#[test]
fn each_comparison_has_its_exact_figure() {
    let f = &default_run()["figures"];
    // Eager: the rebalance that removes billing-3 revokes the 3 partitions of each of the
    // 3 members still running, the one that lets it back their 4 each: 9 + 12.
    assert_eq!(n(f, "partitions_revoked_eager"), 21);
    // Cooperative-sticky: nothing when billing-3 leaves (its partitions were lost, not
    // revoked); one partition from each running member when it comes back.
    assert_eq!(n(f, "partitions_revoked_cooperative"), 3);
    assert_eq!(n(f, "duplicates_cooperative"), 100, "the same batch");
    assert!(n(f, "paused_partition_ms_cooperative") < n(f, "paused_partition_ms_eager"));
    // Static: no generation changes at all; dynamic: LeaveGroup, then the rejoin.
    assert_eq!(n(f, "static_membership_rebalances"), 0);
    assert_eq!(n(f, "static_restart_partitions_revoked"), 0);
    assert_eq!(n(f, "dynamic_restart_rebalances"), 2);
    assert!(n(f, "restart_downtime_ms") < n(f, "session_timeout_ms"));
    // A batch of 10 instead of 100.
    assert_eq!(n(f, "small_max_poll_records"), 10);
    assert_eq!(n(f, "duplicates_small_poll_batch"), 10);
    // The same 100 redeliveries reach all three ledgers.
    assert_eq!(n(f, "duplicate_effects_colocated_dedup"), 0);
    assert_eq!(n(f, "redeliveries_refused_colocated_dedup"), 100);
    assert_eq!(n(f, "duplicates_ttl_dedup"), 100);
    assert_eq!(
        f["double_charged_cents_ttl_dedup"],
        f["double_charged_cents"]
    );
    let scenarios: BTreeSet<&str> = f["scenarios"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        scenarios,
        BTreeSet::from([
            "baseline",
            "cooperative",
            "dynamic",
            "small-batch",
            "static",
            "eos"
        ])
    );
    assert_eq!(f["scenarios"]["static"]["duplicates"], 0);
    assert_eq!(f["scenarios"]["cooperative"]["rebalances"], 3);
}

/// What holds for the transactional run on any broker that offers transactions.
fn assert_exactly_once_in_kafka_only(f: &Value) {
    let eos = &f["eos"];
    assert!(eos.is_object(), "no transactional run: {f}");
    let payments = n(f, "payments");
    // read_committed downstream: every payment once, none twice, none missing.
    assert_eq!(n(eos, "output_read_committed"), payments);
    assert_eq!(n(eos, "output_duplicates_read_committed"), 0);
    assert_eq!(n(eos, "output_missing_read_committed"), 0);
    // billing-3's batch is refused (its member id is gone from the group) and aborted; its
    // records stay in the log, where read_uncommitted reads them.
    assert_eq!(n(&f["scenarios"]["eos"], "failed_commits"), 1);
    assert_eq!(n(eos, "aborted_transactions"), 1);
    assert!(eos["offsets_refused_with"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_MEMBER_ID (25)"));
    let batch = n(f, "max_poll_records");
    assert_eq!(n(eos, "processed_uncommitted"), batch);
    assert_eq!(n(eos, "output_in_log"), payments + batch);
    assert_eq!(n(eos, "output_duplicates_in_log"), batch);
    // The gateway, called in the loop, outside Kafka: the redelivered batch twice.
    assert_eq!(n(eos, "gateway_calls"), payments + batch);
    assert_eq!(n(eos, "gateway_duplicates"), batch);
    assert_eq!(f["scenarios"]["eos"]["duplicates"], batch);
    // While billing-3's transaction was open, committed output behind it waited for its abort.
    assert!(n(eos, "output_held_by_open_transaction") > 0);
}

#[test]
fn in_kafka_transactions_the_output_holds_each_payment_once_and_the_gateway_sees_the_batch_twice() {
    let f = &default_run()["figures"];
    assert_exactly_once_in_kafka_only(f);
    let eos = &f["eos"];
    assert_eq!(eos["topic"], "payments-eos");
    assert_eq!(eos["group"], "billing-eos");
    assert_eq!(eos["output_topic"], "payments-applied");
    // The same stall and the same batch as the baseline: the same 100 payments.
    assert_eq!(n(eos, "gateway_duplicates"), n(f, "duplicates"));
    // On the paused clock: the new owners' 100 redelivered records, committed while billing-3
    // still stalled, became readable 7 s later, when it aborted.
    assert_eq!(n(eos, "output_held_by_open_transaction"), 100);
    assert_eq!(n(eos, "longest_hold_ms"), 7000);
    assert_eq!(default_run()["shown"], true, "the verdict's checks held");
}

/// A cluster with idempotent producers but no transactional ids: the transactional run is
/// skipped and says why, the at-least-once runs keep their figures and verdict.
#[test]
fn on_a_cluster_without_transactional_ids_the_transactional_run_is_skipped() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cluster = rt.block_on(::tests::WithoutApi::without_transactional_ids(
        ::tests::BrokerConfig::default(),
    ));
    let addr = cluster.addr.to_string();
    let report = run_json("rebalance", &["--bootstrap", &addr]);
    let reason = "this cluster does not offer transactional ids (it answered UNSUPPORTED_VERSION)";
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].reason, reason);
    assert_eq!(
        report.skipped[0].phase,
        "Kafka's exactly-once: does the gateway see each payment once?"
    );
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_the_phenomenon(&json);
    assert!(json["figures"]["eos"].is_null());
    assert!(json["figures"]["scenarios"].get("eos").is_none());
    drop(cluster);
}

#[test]
fn a_seed_gives_the_same_figures_every_run_and_the_timeline_holds_the_group_events() {
    let path = std::env::temp_dir().join(format!(
        "workshop-rebalance-timeline-{}.jsonl",
        std::process::id()
    ));
    let path_arg = path.to_str().unwrap();
    let again = run_json("rebalance", &["--timeline", path_arg]);
    let again: Value = serde_json::from_str(&again.to_json()).unwrap();
    assert_eq!(again, *default_run(), "the same seed, the same document");

    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    // README.md shows two of these lines.
    let shown =
        support::readme::assert_blocks_of("workshop rebalance --timeline rebalance.jsonl", &text);
    assert_eq!(shown, 1);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let times: Vec<u64> = lines.iter().map(|l| l["t_ms"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in time order");
    let kinds: BTreeSet<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    for kind in [
        "joined",
        "generation",
        "assigned",
        "revoked",
        "lost",
        "commit",
        "commit_failed",
        "poll_timeout",
        "left",
        "setting_offset",
        "batch",
        "stall_started",
        "restarting",
        "settled",
        "transaction_aborted",
    ] {
        assert!(kinds.contains(kind), "no {kind} event in the timeline");
    }
    let baseline: Vec<&Value> = lines
        .iter()
        .filter(|l| l["scenario"] == "baseline")
        .collect();
    // The stall's sequence, in source 003's order: poll timeout, revocations, commit failed.
    let at = |event: &str, member: Option<&str>| {
        baseline
            .iter()
            .position(|l| l["event"] == event && member.is_none_or(|m| l["member"] == m))
            .unwrap_or_else(|| panic!("no {event} in the baseline run"))
    };
    let timeout = at("poll_timeout", Some("billing-3"));
    assert!(timeout > at("stall_started", Some("billing-3")));
    let revoked_after = baseline[timeout..]
        .iter()
        .any(|l| l["event"] == "revoked" && l["member"] != "billing-3");
    assert!(revoked_after);
    assert!(at("commit_failed", Some("billing-3")) > timeout);
    assert!(baseline.iter().all(|l| l["group"] == "billing"));
    // Generations are stamped on assignments the way the members joined them.
    let joined: BTreeSet<i64> = baseline
        .iter()
        .filter(|l| l["event"] == "joined")
        .map(|l| l["generation"].as_i64().unwrap())
        .collect();
    assert!(baseline
        .iter()
        .filter(|l| l["event"] == "assigned")
        .all(|l| joined.contains(&l["generation"].as_i64().unwrap())));
}

#[test]
fn the_same_seed_gives_the_same_figures() {
    assert_figures_follow_the_seed("rebalance", &[], Some(&default_run()["figures"]));
}

#[test]
fn an_unwritable_timeline_is_one_line_and_exit_code_2() {
    let err = support::run_lab(
        "rebalance",
        &["--timeline", "/nonexistent-dir/timeline.jsonl"],
    )
    .map(|r| r.shown)
    .unwrap_err()
    .to_string();
    assert!(err.contains("--timeline"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn against_a_broker_binary_with_bootstrap() {
    let broker = BrokerProcess::start();
    let report = run_json("rebalance", &["--bootstrap", &broker.addr]);
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_the_phenomenon(&json);
    let f = &json["figures"];
    // Names carry the run's id, so runs on a shared cluster never collide.
    let topic = f["topic"].as_str().unwrap();
    assert!(topic.starts_with("payments-") && topic.len() > "payments-".len());
    assert!(f["group"].as_str().unwrap().starts_with("billing-"));
    // Timing-independent even in real time: which batch is uncommitted depends on the data and
    // max.poll.records only.
    assert_eq!(n(f, "duplicates"), n(f, "max_poll_records"));
    assert_eq!(
        n(f, "duplicates_small_poll_batch"),
        n(f, "small_max_poll_records")
    );
    assert_eq!(n(f, "partitions_revoked_eager"), 21);
    assert_eq!(n(f, "partitions_revoked_cooperative"), 3);
    assert_exactly_once_in_kafka_only(f);
    drop(broker);
}
