//! Lab `idempotence` run in-process as `--json` reports it, on the embedded broker, and once
//! with `--bootstrap` against a broker binary started separately, as against a real cluster.
//! The figures are asserted exactly where they are exact: every lost acknowledgement is one
//! duplicate without idempotence and none with it, every re-send and every restart is one
//! duplicate, and the partition change moves exactly the keys Kafka's partitioner moves.

mod support;

use std::sync::OnceLock;

use protocol::partitioner::partition_for_key;
use serde_json::Value;
use support::{assert_figures_follow_the_seed, run_lab, BrokerProcess};
use workshop::{LabReport, RunError};

fn run(args: &[&str]) -> Result<LabReport, RunError> {
    run_lab("idempotence", args)
}

/// The default run, once for all tests that read it.
fn default_run() -> &'static LabReport {
    static REPORT: OnceLock<LabReport> = OnceLock::new();
    REPORT.get_or_init(|| run(&[]).expect("the default run succeeds"))
}

fn n(f: &Value, key: &str) -> u64 {
    f[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a count: {}", f[key]))
}

/// Sums a column of one per-partition table.
fn column(f: &Value, table: &str, field: &str) -> u64 {
    f["per_partition"][table]
        .as_array()
        .unwrap_or_else(|| panic!("no table {table}"))
        .iter()
        .map(|row| row[field].as_u64().unwrap())
        .sum()
}

/// Asserts the figures of a run with these settings, exactly.
fn assert_exact(
    f: &Value,
    records: u64,
    lost: u64,
    partitions: i32,
    resends: u64,
    restarts: u64,
    accounts: u64,
) {
    assert_eq!(n(f, "records_sent"), records);
    assert_eq!(f["partitions"], partitions);
    // Phases 1 and 2: the configured losses, each one duplicate without idempotence, none with.
    assert_eq!(n(f, "acks_lost"), lost);
    assert_eq!(n(f, "duplicates_without_idempotence"), lost);
    assert_eq!(n(f, "acks_lost_with_idempotence"), lost);
    assert_eq!(n(f, "duplicates_with_idempotence"), 0);
    // Phase 1 on Kafka's defaults, idempotent since 3.0: the same losses, no duplicate.
    assert_eq!(n(f, "duplicates_with_defaults"), 0);
    assert_eq!(column(f, "without_idempotence", "in_log"), records + lost);
    assert_eq!(column(f, "without_idempotence", "acks_lost"), lost);
    assert_eq!(column(f, "without_idempotence", "duplicates"), lost);
    assert_eq!(column(f, "with_idempotence", "in_log"), records);
    assert_eq!(column(f, "with_idempotence", "sent"), records);
    // Phase 3: every re-send is a duplicate; those whose key Kafka's partitioner moves from P to
    // 2P partitions sit in another partition than their first copy.
    assert_eq!(f["partitions_after_change"], partitions * 2);
    assert_eq!(n(f, "resends_after_partition_change"), resends);
    assert_eq!(n(f, "duplicates_after_partition_change"), resends);
    let resent = f["resent_orders"].as_array().unwrap();
    assert_eq!(resent.len() as u64, resends);
    let moved = resent
        .iter()
        .map(|id| id.as_str().unwrap().as_bytes())
        .filter(|key| partition_for_key(key, partitions) != partition_for_key(key, partitions * 2))
        .count() as u64;
    assert_eq!(n(f, "duplicates_in_another_partition"), moved);
    assert_eq!(
        column(f, "after_partition_change", "in_log"),
        records + resends
    );
    assert_eq!(column(f, "after_partition_change", "split"), 2 * moved);
    // Phase 4: one duplicate per restart, one new producer id per instance.
    assert_eq!(n(f, "producer_restarts"), restarts);
    assert_eq!(n(f, "producer_ids_after_restarts"), restarts + 1);
    assert_eq!(n(f, "duplicates_after_producer_restart"), restarts);
    assert_eq!(
        column(f, "after_producer_restart", "in_log"),
        records + restarts
    );
    // Phase 5: without fencing every late write of the zombie lands and wipes a deposit; with
    // the epoch none does, and the zombie gets the error Java's producer raises as
    // ProducerFencedException (the coordinator's answer to its AddPartitionsToTxn).
    assert_eq!(n(f, "zombie_writes_accepted_without_fencing"), accounts);
    assert_eq!(n(f, "updates_lost_without_fencing"), accounts);
    assert_eq!(f["zombie_fenced"], true);
    assert_eq!(f["zombie_fenced_with"], "PRODUCER_FENCED");
    assert_eq!(n(f, "zombie_writes_accepted_with_fencing"), 0);
    assert_eq!(n(f, "updates_lost_with_fencing"), 0);
}

#[test]
fn the_default_run_shows_every_phenomenon_with_exact_figures() {
    let report = default_run();
    assert_eq!(report.lab, "idempotence");
    assert!(report.shown, "{}", report.figures);
    assert_eq!(report.exit_code(), 0);
    let f = &report.figures;
    assert_eq!(f["seed"], 5);
    assert_exact(f, 200, 12, 3, 12, 3, 4);
    assert!(n(f, "duplicates_in_another_partition") > 0);
    // On the embedded broker, phase 2 once more with the broker dropping the answers itself.
    assert!(n(f, "broker_side_acks_dropped") > 0);
    assert_eq!(n(f, "broker_side_duplicates"), 0);
}

/// The default run's narration as a room reads it, words only (wrapping does not matter).
fn default_words() -> &'static str {
    static WORDS: OnceLock<String> = OnceLock::new();
    WORDS.get_or_init(|| {
        let recorder = workshop::lab::report::Recorder::new();
        let view = recorder.clone();
        workshop::run_with(["idempotence", "--check"], |n| n.subscribe(Box::new(view))).unwrap();
        let text = workshop::view::terminal::Terminal::render(
            &recorder.events(),
            workshop::view::terminal::TerminalOptions::plain(100),
        );
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    })
}

/// What the room is told about Kafka is what Kafka 4 and Java's producer do, at the figures
/// the run measured.
#[test]
fn the_narration_says_what_kafka_does_in_the_runs_figures() {
    let words = default_words();
    for said in [
        // Phase 1 turns off what Kafka's producer does by default, and shows the default.
        "acks=all, through a producer with enable.idempotence=false: the lab turns off what \
         Kafka's producer does by default since 3.0 (KIP-679)",
        "The same payments through a producer left on Kafka's defaults (since 3.0: \
         enable.idempotence=true, acks=all), losing 12 acknowledgements the same way: 200 \
         records for 200 payments, 0 duplicates.",
        // Phase 3: every re-send is new, wherever it lands; the change only decides where.
        "All 12 re-sends are duplicates, the 7 that went to their first copy's partition too: a \
         record the application sends again is new to the broker",
        "The partition change decided only where the copies are: 5 of them in another partition \
         than their first copy, where no deduplication kept per partition downstream",
        // Phase 4: what transactions would change.
        "the next instance's initTransactions() aborts the dead one's open transaction, so a \
         read_committed consumer sees one copy",
        // Phase 5: real transactions, and the error as Java's producer raises it.
        "A's late transaction carried the old one and its first write was refused \
         (PRODUCER_FENCED), the transaction coordinator's answer when A added the partition to \
         its transaction; Java's producer raises it as ProducerFencedException, fatal: the \
         producer can only be closed (a batch with the old epoch that reaches a partition leader \
         gets INVALID_PRODUCER_EPOCH instead, in Java InvalidProducerEpochException, which is \
         abortable",
        "acct-01 p0@0 p0@3 refused: PRODUCER_FENCED 150 150",
        "12 lost acknowledgements gave 12 duplicate payments without idempotence, 0 on Kafka's \
         defaults and 0 with it.",
    ] {
        assert!(words.contains(said), "{said:?} not in {words}");
    }
    assert!(
        !words.contains("only a consumer-side check can recognise it"),
        "{words}"
    );
    assert!(!words.contains("brings duplicates back"), "{words}");
}

#[test]
fn the_same_seed_gives_the_same_figures_at_the_default_scale() {
    assert_figures_follow_the_seed("idempotence", &[], Some(&default_run().figures));
}

#[test]
fn the_same_seed_gives_the_same_figures_and_another_seed_other_ones() {
    let args = ["--records", "60", "--lost-acks", "6", "--resends", "8"];
    let first = run(&args).unwrap();
    let again = run(&args).unwrap();
    assert_eq!(first.figures, again.figures);
    let other = run(&[&args[..], &["--seed", "6"]].concat()).unwrap();
    assert_ne!(
        first.figures["resent_orders"],
        other.figures["resent_orders"]
    );
    assert_ne!(
        first.figures["per_partition"]["without_idempotence"],
        other.figures["per_partition"]["without_idempotence"],
        "other acknowledgements are lost"
    );
    // The counts the flags fix stay exact whatever the seed.
    assert_exact(&other.figures, 60, 6, 3, 8, 3, 4);
}

#[test]
fn other_settings_keep_the_figures_exact() {
    let report = run(&[
        "--records",
        "40",
        "--lost-acks",
        "5",
        "--partitions",
        "4",
        "--resends",
        "10",
        "--restarts",
        "2",
        "--accounts",
        "3",
    ])
    .unwrap();
    assert_exact(&report.figures, 40, 5, 4, 10, 2, 3);
    assert!(report.shown, "{}", report.figures);
}

#[test]
fn without_lost_acknowledgements_the_lab_does_not_pass() {
    // No failure caused, so nothing shown: the verdict checks that the failure happened.
    let report = run(&["--records", "30", "--lost-acks", "0", "--resends", "6"]).unwrap();
    assert!(!report.shown);
    assert_eq!(report.exit_code(), 1);
    assert_eq!(report.figures["acks_lost"], 0);
    assert_eq!(report.figures["duplicates_without_idempotence"], 0);
}

#[test]
fn impossible_settings_are_one_line_errors() {
    for args in [
        &["--records", "10", "--lost-acks", "11"][..],
        &["--records", "10", "--resends", "11"],
        &["--records", "10", "--restarts", "10"],
        &["--partitions", "0"],
    ] {
        let err = run(args).unwrap_err().to_string();
        assert!(!err.contains('\n'), "{err}");
    }
}

#[test]
fn against_a_separately_started_broker_the_figures_are_the_same() {
    let broker = BrokerProcess::start();
    let remote = run(&["--bootstrap", &broker.addr]).expect("the lab runs against the broker");
    assert!(remote.shown, "{}", remote.figures);
    // Only public Kafka APIs, unique names, and the same seed: the same figures, except the
    // embedded broker's own fault injection, which a cluster does not offer.
    let mut embedded = default_run().figures.clone();
    for only_embedded in ["broker_side_acks_dropped", "broker_side_duplicates"] {
        assert_eq!(remote.figures[only_embedded], Value::Null);
        embedded[only_embedded] = Value::Null;
    }
    assert_eq!(remote.figures, embedded);

    // Everything the lab created is gone again.
    let (topics, groups) = support::leftovers(&broker.addr);
    assert!(
        topics.is_empty() && groups.is_empty(),
        "left behind: {topics:?} {groups:?}"
    );
}

/// A cluster without CreatePartitions (tansu offers none): the partition change is skipped and
/// says why, every other phase runs with its exact figures, and the verdict covers those.
#[test]
fn on_a_cluster_without_create_partitions_that_phase_is_skipped_and_the_rest_runs() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cluster = rt.block_on(::tests::WithoutApi::start(
        ::tests::BrokerConfig::default(),
        client::ApiKey::CreatePartitions as i16,
    ));
    let (report, text) = support::narrated_against("idempotence", &cluster.addr.to_string(), &[]);
    let reason = "this cluster does not offer CreatePartitions";
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].reason, reason);
    assert_eq!(
        report.skipped[0].phase,
        "Where it ends (1): the partition count changes"
    );
    assert!(report.shown, "{}", report.figures);
    let f = &report.figures;
    assert_eq!(f["partitions_after_change"], Value::Null);
    assert_eq!(f["per_partition"]["after_partition_change"], Value::Null);
    // The other phases as on any cluster: the seed's same losses, restarts and zombie.
    assert_eq!(n(f, "acks_lost"), 12);
    assert_eq!(n(f, "duplicates_without_idempotence"), 12);
    assert_eq!(n(f, "duplicates_with_idempotence"), 0);
    assert_eq!(n(f, "duplicates_after_producer_restart"), 3);
    assert_eq!(f["zombie_fenced_with"], "PRODUCER_FENCED");
    let mut expected = default_run().figures.clone();
    for only_embedded in ["broker_side_acks_dropped", "broker_side_duplicates"] {
        expected[only_embedded] = Value::Null;
    }
    for phase_3 in [
        "partitions_after_change",
        "resends_after_partition_change",
        "resent_orders",
        "duplicates_after_partition_change",
        "duplicates_in_another_partition",
    ] {
        expected.as_object_mut().unwrap().remove(phase_3);
    }
    expected["per_partition"]["after_partition_change"] = Value::Null;
    assert_eq!(*f, expected);

    assert!(
        text.contains("3. Where it ends (1): the partition count changes"),
        "{text}"
    );
    assert!(
        text.contains("Skipped: this cluster does not offer CreatePartitions."),
        "{text}"
    );
    assert!(
        text.contains("skipped: the partition change was not made: this cluster does not offer CreatePartitions"),
        "{text}"
    );
    assert!(
        text.contains(
            "for the phases that ran (skipped: duplicates after the partition\n  change)"
        ),
        "{text}"
    );
    assert!(!text.contains("Kafka 2.1"), "{text}");
}

/// A cluster with idempotent producers but no transactional ids (InitProducerId naming one is
/// refused): the zombie writer's phase is skipped and says why, every other phase runs with
/// its exact figures, and the verdict covers those.
#[test]
fn on_a_cluster_without_transactional_ids_the_zombie_phase_is_skipped_and_the_rest_runs() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cluster = rt.block_on(::tests::WithoutApi::without_transactional_ids(
        ::tests::BrokerConfig::default(),
    ));
    let scale = ["--records", "40", "--lost-acks", "5", "--resends", "8"];
    let (report, text) =
        support::narrated_against("idempotence", &cluster.addr.to_string(), &scale);
    let reason = "this cluster does not offer transactional ids (it answered UNSUPPORTED_VERSION)";
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].reason, reason);
    assert_eq!(
        report.skipped[0].phase,
        "Where it ends (3): a zombie writer, without fencing and with it"
    );
    assert!(report.shown, "{}", report.figures);
    let f = &report.figures;
    for phase_5 in [
        "zombie_fenced",
        "zombie_fenced_with",
        "zombie_writes_accepted_without_fencing",
        "updates_lost_without_fencing",
        "zombie_writes_accepted_with_fencing",
        "updates_lost_with_fencing",
    ] {
        assert!(f.get(phase_5).is_none(), "{phase_5} in {f}");
    }
    // The other phases as on any cluster, with the exact figures of this scale.
    assert_eq!(n(f, "records_sent"), 40);
    assert_eq!(n(f, "acks_lost"), 5);
    assert_eq!(n(f, "duplicates_without_idempotence"), 5);
    assert_eq!(n(f, "duplicates_with_idempotence"), 0);
    assert_eq!(n(f, "duplicates_after_partition_change"), 8);
    assert_eq!(n(f, "producer_restarts"), 3);
    assert_eq!(n(f, "duplicates_after_producer_restart"), 3);

    assert!(
        text.contains("5. Where it ends (3): a zombie writer, without fencing and with it"),
        "{text}"
    );
    assert!(text.contains(&format!("Skipped: {reason}.")), "{text}");
    assert!(
        text.contains(
            "skipped: the zombie writer did not run: this cluster does not offer transactional ids"
        ),
        "{text}"
    );
    assert!(
        text.contains("for the phases that ran (skipped: zombie accepted without fencing;"),
        "{text}"
    );
}

/// A cluster without InitProducerId at all (no idempotent producers): every phase that needs
/// one is skipped with the same line, phase 1 (a plain producer) runs with the exact figures of
/// any cluster, and the verdict covers it alone.
#[test]
fn on_a_cluster_without_init_producer_id_only_the_plain_producer_runs() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cluster = rt.block_on(::tests::WithoutApi::start(
        ::tests::BrokerConfig::default(),
        client::ApiKey::InitProducerId as i16,
    ));
    let (report, text) = support::narrated_against("idempotence", &cluster.addr.to_string(), &[]);
    let reason = "this cluster does not offer InitProducerId (idempotent producers)";
    let skipped: Vec<(&str, &str)> = report
        .skipped
        .iter()
        .map(|s| (s.phase.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [
            ("The same, with idempotence", reason),
            ("Where it ends (1): the partition count changes", reason),
            ("Where it ends (2): the producer restarts", reason),
            (
                "Where it ends (3): a zombie writer, without fencing and with it",
                reason
            ),
        ]
    );
    assert!(report.shown, "{}", report.figures);
    assert_eq!(report.exit_code(), 0);

    // Phase 1's figures, exactly those of the default run; nothing of the skipped phases.
    let f = &report.figures;
    let default = &default_run().figures;
    let phase_1 = [
        "seed",
        "records_sent",
        "partitions",
        "acks_lost",
        "duplicates_without_idempotence",
    ];
    let mut expected = serde_json::Map::new();
    for key in phase_1 {
        expected.insert(key.to_string(), default[key].clone());
    }
    expected.insert(
        "per_partition".to_string(),
        serde_json::json!({
            "without_idempotence": default["per_partition"]["without_idempotence"],
            "with_idempotence": null,
            "after_partition_change": null,
            "after_producer_restart": null,
        }),
    );
    assert_eq!(*f, Value::Object(expected));
    assert_eq!(n(f, "duplicates_without_idempotence"), 12);

    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // Each skipped phase tells its story, then why it did not run, and asks nothing.
    let sections: Vec<&str> = text.split("── ").collect();
    for phase in [
        "2. The same, with idempotence",
        "3. Where it ends (1): the partition count changes",
        "4. Where it ends (2): the producer restarts",
        "5. Where it ends (3): a zombie writer, without fencing and with it",
    ] {
        let section = sections
            .iter()
            .find(|s| s.starts_with(phase))
            .unwrap_or_else(|| panic!("no phase {phase} in {text}"));
        assert!(
            section.trim_end().ends_with(&format!("Skipped: {reason}.")),
            "{section}"
        );
        assert!(!section.contains("Predict:"), "{section}");
    }
    assert_eq!(words.matches("Skipped: ").count(), 4, "{text}");
    assert!(
        words.contains(&format!(
            "12 duplicate payments without idempotence; the idempotent producer did not run: \
             {reason}."
        )),
        "{text}"
    );
    for check in [
        "skipped: no idempotent producer ran: this cluster does not offer InitProducerId",
        "skipped: the partition change was not made: this cluster does not offer InitProducerId",
        "skipped: the relay's producers did not run: this cluster does not offer InitProducerId",
        "skipped: the zombie writer did not run: this cluster does not offer InitProducerId",
    ] {
        assert!(words.contains(check), "{check} not in {text}");
    }
    assert!(
        words.contains(
            "for the phases that ran (skipped: none on Kafka's defaults; none with idempotence; \
             duplicates after the \
             partition change; duplicates after restarts; zombie accepted without fencing; \
             zombie fenced)"
        ),
        "{text}"
    );
    assert!(!text.contains("Kafka 2.1"), "{text}");
}
