//! Lab `migrate`: the binary's default run (its JSON figures, exactly, and its narration as a
//! room sees it), another seed's exact figures, the same seed twice, and a run with
//! `--bootstrap` against a broker binary started separately, which must decide exactly what the
//! embedded run decides and leave nothing behind.

mod support;

use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::{assert_figures_follow_the_seed, leftovers, run_json, BrokerProcess};

/// `workshop migrate --json` as a user runs it: (exit code, the JSON document, the narration).
fn default_run() -> &'static (i32, Value, String) {
    static RUN: OnceLock<(i32, Value, String)> = OnceLock::new();
    RUN.get_or_init(|| {
        let out = Command::new(env!("CARGO_BIN_EXE_workshop"))
            .args(["migrate", "--json"])
            .env("NO_COLOR", "1")
            .output()
            .expect("the workshop binary runs");
        let json = serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");
        let narration = String::from_utf8(out.stderr).expect("UTF-8 narration");
        (out.status.code().unwrap_or(-1), json, narration)
    })
}

/// The figures every run of the lab shares, whatever the seed.
fn assert_seed_004(f: &Value) {
    assert_eq!(f["ring_v7"], "A:20 B:50 C:80");
    assert_eq!(f["ring_v8"], "A:20 D:40 B:50 C:80");
    assert_eq!(f["moved_range"], "(20, 40]");
    assert_eq!(
        (f["users"].as_u64(), f["moved_users"].as_u64()),
        (Some(201), Some(37))
    );
    assert_eq!(f["ben_position"], 28);
    let t = &f["hot_tenant"];
    assert_eq!(
        (&t["tenant"], &t["bucket_count"], &t["route_version"]),
        (&json!(42), &json!(64), &json!(2))
    );
    assert_eq!(t["migration_state"], "dual_write");
    assert_eq!(
        t["writes_per_100ms_before"],
        json!({"A": 0, "B": 0, "C": 300, "D": 0})
    );
    assert_eq!(
        (&t["naive_state"], &t["keyed_state"]),
        (&json!("aborted"), &json!("cleaned_up"))
    );
    for run in f["runs"].as_array().unwrap() {
        assert_eq!(run["commands_lag_at_end"], 0, "{run}");
    }
}

/// The protocol's zeros, on every seed.
fn assert_nothing_lost(f: &Value) {
    for figure in [
        "lost_writes_protocol",
        "missed_reads_protocol",
        "duplicated_effects_protocol",
        "writes_since_handover_fenced",
        "replay_twice_changes",
        "lost_after_failure",
        "duplicated_after_failure",
        "missed_reads_after_failure",
        "lost_writes_rollback",
        "missed_reads_rollback",
    ] {
        assert_eq!(f[figure], 0, "{figure}");
    }
    let t = &f["hot_tenant"];
    assert_eq!(
        (&t["divergent_orders_keyed"], &t["duplicated_effects_keyed"]),
        (&json!(0), &json!(0))
    );
    let v = &f["validation"];
    assert_eq!(v["differing_rows"], 0);
    assert_eq!(v["source_checksum"], v["destination_checksum"]);
    assert_eq!(v["source_key_set"], v["destination_key_set"]);
}

fn assert_default_figures(f: &Value) {
    assert_seed_004(f);
    assert_nothing_lost(f);
    assert_eq!(f["seed"], 5);
    // 1. Routers only.
    assert_eq!(f["missed_reads_routers_only"], 176);
    assert_eq!(f["users_missing_routers_only"], 14);
    assert_eq!(f["lost_writes_routers_only"], 82);
    // 2. Copy once, then switch: Ben's email change at 213 ms is one of the losses.
    assert_eq!(f["lost_writes_copy_once"], 14);
    assert_eq!(
        (&f["copied_rows_copy_once"], &f["copy_ms"]),
        (&json!(37), &json!(37))
    );
    assert_eq!(
        f["lost_write_example"],
        json!({"key": "Ben", "command": "cmd-000435", "command_partition": 1,
               "command_offset": 225, "shard": "B", "changelog_offset": 137, "at_ms": 213})
    );
    // 3. No fencing: counted in B's changelog and by B itself, all of them lost.
    assert_eq!(f["writes_since_handover_unfenced"], 67);
    assert_eq!(f["writes_since_handover_counted_by_b"], 67);
    assert_eq!(f["lost_writes_unfenced"], 67);
    // 4. The protocol.
    assert_eq!(
        (
            &f["refused_stale_writes_fenced"],
            &f["refused_stale_reads_fenced"]
        ),
        (&json!(1), &json!(0))
    );
    assert_eq!(f["snapshot_offset"], 131);
    assert_eq!(
        (&f["copied_rows"], &f["replayed_records"]),
        (&json!(37), &json!(21))
    );
    assert_eq!(
        (&f["changelog_records_read"], &f["replayed_twice"]),
        (&json!(34), &json!(15))
    );
    assert_eq!(
        (&f["write_block_ms"], &f["held_writes"]),
        (&json!(2), &json!(0))
    );
    assert_eq!(f["validation"]["source_rows"], 37);
    assert_eq!(f["routing_records"], 13);
    // 5. D fails halfway, then the rollbacks.
    assert_eq!(
        (&f["restored_records"], &f["resumed_from_offset"]),
        (&json!(50), &json!(131))
    );
    assert_eq!(
        (&f["skipped_already_applied"], &f["replayed_after_failure"]),
        (&json!(13), &json!(43))
    );
    assert_eq!(f["lost_writes_rollback_routers_only"], 57);
    assert_eq!(f["rollback_replayed_records"], 70);
    // 6. Tenant 42.
    let t = &f["hot_tenant"];
    assert_eq!(
        (&t["backfill_rows"], &t["backfill_ms"]),
        (&json!(167), &json!(167))
    );
    assert_eq!(t["backfill_peak_rows_per_ms"], 1);
    assert_eq!(
        t["writes_per_100ms_after"],
        json!({"A": 145, "B": 38, "C": 69, "D": 48})
    );
    assert_eq!(
        (
            &t["dual_write_failures_naive"],
            &t["dual_write_failures_keyed"]
        ),
        (&json!(30), &json!(18))
    );
    assert_eq!(
        (&t["divergent_orders_naive"], &t["duplicated_effects_naive"]),
        (&json!(8), &json!(30))
    );
}

#[test]
fn the_default_run_loses_with_each_naive_move_and_not_with_the_protocol() {
    let (code, json, _) = default_run();
    assert_eq!(*code, 0, "{json}");
    assert_eq!(json["lab"], "migrate");
    assert_eq!(json["shown"], true);
    assert_eq!(json["figures"]["target"], "embedded");
    assert_default_figures(&json["figures"]);
}

#[test]
fn another_seed_gives_its_own_figures_and_the_same_verdict() {
    let report = run_json("migrate", &["--seed", "7"]);
    assert!(report.shown);
    let f = &report.figures;
    assert_seed_004(f);
    assert_nothing_lost(f);
    assert_eq!(f["missed_reads_routers_only"], 192);
    assert_eq!(f["lost_writes_routers_only"], 75);
    assert_eq!(f["lost_writes_copy_once"], 9);
    assert_eq!(f["lost_write_example"]["changelog_offset"], 128);
    assert_eq!(f["writes_since_handover_unfenced"], 63);
    assert_eq!(f["lost_writes_unfenced"], 63);
    // Here the stale instance's first requests after the handover are reads: refused and sent
    // on to D, the instance still stale until its first write is refused too.
    assert_eq!(
        (
            &f["refused_stale_writes_fenced"],
            &f["refused_stale_reads_fenced"]
        ),
        (&json!(1), &json!(2))
    );
    assert_eq!(
        (&f["write_block_ms"], &f["held_writes"]),
        (&json!(2), &json!(1))
    );
    assert_eq!(
        (&f["snapshot_offset"], &f["replayed_records"]),
        (&json!(126), &json!(16))
    );
    assert_eq!(
        (&f["restored_records"], &f["skipped_already_applied"]),
        (&json!(46), &json!(9))
    );
    assert_eq!(f["lost_writes_rollback_routers_only"], 76);
    assert_eq!(f["hot_tenant"]["divergent_orders_naive"], 7);
}

#[test]
fn the_same_seed_gives_the_same_figures() {
    let (_, json, _) = default_run();
    assert_figures_follow_the_seed("migrate", &[], Some(&json["figures"]));
}

/// The room view itself (widths, screens, questions before answers, sentences agreeing with
/// the figures) is tested with every other lab in `room.rs`; here, the binary's own output.
#[test]
fn the_binary_narrates_in_the_seeds_terms() {
    let (_, _, narration) = default_run();
    for shown in [
        "00:00:00.257 INFO  [shard-b] range (20, 40]: serving writes (owner since 00:00:00.000)",
        "00:00:00.257 INFO  [shard-d] range (20, 40]: serving writes (owner since 00:00:00.257)",
        "00:00:00.558 INFO  [shard-b] range (20, 40]: relinquishing ownership, 67 writes since \
         handover",
        "[instance 2] read Ben with ring version 8 from shard D: not found",
        "[shard-b] refused write to user-194 at version 7 (handed over at 8)",
        "    migration_state: dual_write",
        "Verdict: SHOWN (exit code 0)",
    ] {
        assert!(
            narration.contains(shown),
            "{shown:?} missing from:\n{narration}"
        );
    }
    assert!(!narration.contains("NOT:"));
    // Sentences, whatever their wrapping: the routing topic as the lab creates it, the stale
    // instance's refusals and the two counts of replayed records as the run counted them.
    let words = narration.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        "the routing table is versioned records in a topic that keeps every one \
         (cleanup.policy=delete, retention.ms=-1): the latest per key is in force, and the rest \
         is the audit trail.",
        "21 records of B's changelog applied to D, from the snapshot's offset through validation \
         and the block; replaying a second time the 15 of the range up to where the catch-up \
         first reached B's end changed 0 rows.",
        "B refused 1 write and 0 reads of the stale instance: its first refused write made it \
         refresh and write to D.",
        "Every run: 1,000 lab ms,",
    ] {
        assert!(words.contains(said), "{said:?} missing from:\n{narration}");
    }
    assert!(!words.contains("(s)"), "{narration}");
    assert!(!words.contains("cleanup.policy=compact"), "{narration}");
}

#[test]
fn with_bootstrap_the_lab_decides_the_same_against_a_separate_broker_and_cleans_up() {
    let broker = BrokerProcess::start();
    let addr = broker.addr.clone();
    let report = run_json("migrate", &["--bootstrap", &addr]);
    assert!(report.shown);
    let mut figures = report.figures.clone();
    assert_eq!(figures["target"], addr.as_str());
    figures["target"] = json!("embedded");
    let (_, json, _) = default_run();
    assert_eq!(figures, json["figures"]);

    // Nothing the lab created is left on the broker: no topic, no group.
    let (topics, groups) = leftovers(&addr);
    assert!(topics.is_empty(), "topics left behind: {topics:?}");
    assert!(groups.is_empty(), "groups left behind: {groups:?}");
    drop(broker);
}
