//! The labs in front of a room: each question before its answer, every line within 100 columns,
//! every `--step` screen within 40 lines, and the narration agreeing with the figures.
//!
//! Each lab runs once per seed (the default, and 7) at its default settings, in-process, with a
//! recorder on its event stream and an open gate (so the stream has `--step`'s pauses without
//! waiting); the terminal view then renders the recording at 100 columns. `--step` itself is
//! tested on the binary, with a pipe for stdin that stays open.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use workshop::lab::report::{thousands, Event, Gate, Level, Recorder};
use workshop::view::terminal::{Terminal, TerminalOptions};
use workshop::{LabReport, Outcome};

const WIDTH: usize = 100;
const SCREEN: usize = 40;

/// `workshop <lab> --seed <seed>` at its defaults: its report and every event it emitted.
fn record(lab: &str, seed: &str) -> (LabReport, Vec<Event>) {
    let recorder = Recorder::new();
    let view = recorder.clone();
    let outcome = workshop::run_with([lab, "--check", "--seed", seed], |n| {
        n.subscribe(Box::new(view));
        n.pace(Gate::opened());
    })
    .unwrap_or_else(|e| panic!("{lab} --seed {seed} failed: {e}"));
    let Outcome::Lab { report, .. } = outcome else {
        panic!("{lab} listed the labs");
    };
    (report, recorder.events())
}

/// Every phase asks its question, and nothing answers it before its answer begins: between a
/// question and its answer only progress and the pause may come.
fn assert_questions_before_answers(lab: &str, events: &[Event]) {
    let mut phases = 0;
    let mut asked: Option<usize> = None;
    let mut answered = 0;
    for event in events {
        match event {
            Event::Phase { number, .. } => {
                assert_eq!(asked, None, "{lab}: phase {number} began before an answer");
                phases += 1;
                assert_eq!(*number, phases);
            }
            Event::Question { phase, .. } => {
                assert_eq!(*phase, phases, "{lab}: a question outside its phase");
                asked = Some(*phase);
            }
            Event::Answer { phase } => {
                assert_eq!(
                    asked,
                    Some(*phase),
                    "{lab}: answer {phase} before its question"
                );
                asked = None;
                answered += 1;
            }
            Event::Progress { .. }
            | Event::Live { .. }
            | Event::Done { .. }
            | Event::Waiting { .. } => {}
            other => assert!(
                asked.is_none(),
                "{lab}: {other:?} between a question and its answer"
            ),
        }
    }
    assert!(phases >= 3, "{lab}: {phases} phases");
    assert_eq!(answered, phases, "{lab}: every phase answers its question");
}

/// The rendering at 100 columns: no line wider, and no `--step` screen (what stands between two
/// "next screen" pauses) longer than 40 lines. Returns the rendering.
fn assert_fits_a_projector(lab: &str, events: &[Event]) -> String {
    let text = Terminal::render(events, TerminalOptions::plain(WIDTH));
    for line in text.lines() {
        assert!(
            line.chars().count() <= WIDTH,
            "{lab}: {} columns: {line}",
            line.chars().count()
        );
    }
    let mut screen = 0;
    for line in text.lines() {
        screen += 1;
        assert!(
            screen <= SCREEN,
            "{lab}: a screen runs past {SCREEN} lines:\n{text}"
        );
        if line.contains("press Enter for the next screen") {
            screen = 0;
        }
    }
    text
}

/// The paragraphs the lab told.
fn prose(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Text { text } => Some(text.replace('\n', " ")),
            Event::Summary { happened, .. } => Some(happened.join(" ")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn figures(report: &LabReport) -> Value {
    serde_json::from_str::<Value>(&report.to_json()).unwrap()["figures"].clone()
}

/// `1 event`, `14 events`: a count as the labs narrate it.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The narration says each of `sentences`, word for word.
fn assert_says(lab: &str, prose: &str, sentences: &[String]) {
    for sentence in sentences {
        assert!(
            prose.contains(sentence.as_str()),
            "{lab} does not say {sentence:?}:\n{prose}"
        );
    }
}

/// Every number the narration puts before `words` is one of `allowed`.
fn assert_counts(lab: &str, prose: &str, words: &str, allowed: &[u64]) {
    let mut found = 0;
    for (at, _) in prose.match_indices(words) {
        let before = prose[..at].trim_end();
        let digits: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .filter(char::is_ascii_digit)
            .collect();
        if let Ok(n) = digits.parse::<u64>() {
            found += 1;
            assert!(
                allowed.contains(&n),
                "{lab} says {n} {words}, the figures {allowed:?}"
            );
        }
    }
    assert!(found > 0, "{lab} never says a number of {words:?}");
}

fn lab(lab: &str, seed: &str, agrees: impl Fn(&str, &Value)) {
    let (report, events) = record(lab, seed);
    assert_questions_before_answers(lab, &events);
    let text = assert_fits_a_projector(lab, &events);
    if seed == "5" {
        // The README shows the default run: its blocks are lines of this one.
        support::readme::assert_blocks_of(&format!("workshop {lab}"), &text);
    }
    agrees(&prose(&events), &figures(&report));
    // The verdict's line names exactly the checks that failed.
    let Some(Event::Verdict { failed, shown, .. }) = events.last() else {
        panic!("{lab}: the verdict is not last");
    };
    assert_eq!(*shown, report.shown);
    let failing: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Check { check } if !check.ok => Some(check.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(failed, &failing, "{lab}");
}

/// The backlog, the keys moved and the violations, as the figures have them.
fn partitions_agrees(prose: &str, f: &Value) {
    let (failure, provisioned) = (&f["failure"], &f["fixes"]["provisioned"]);
    let (moved, total) = (u(&f["keys_moved"]), u(&f["keys_total"]));
    let backlog = |s: &Value| {
        format!(
            "up to {} records ({:.0} on average)",
            u(&s["max_lag_at_change"]),
            s["average_lag_at_change"].as_f64().unwrap()
        )
    };
    assert_says(
        "partitions",
        prose,
        &[
            format!("{moved} of {total} order keys moved"),
            format!("moved {moved} of {total} keys"),
            format!(
                "{} of {} reached the store before an earlier version",
                count(u(&f["violations"]), "event", "events"),
                count(u(&failure["keys_out_of_order"]), "order", "orders")
            ),
            format!(
                "With auto.offset.reset=latest, Kafka's default, {} never read: a loss, next to the \
                 reordering.",
                count(u(&f["skipped_with_latest"]), "event was", "events were")
            ),
            format!("a backlog, {}", backlog(failure)),
            backlog(provisioned),
        ],
    );
    assert_counts(
        "partitions",
        prose,
        " violation",
        &[
            u(&provisioned["violations"]),
            u(&f["fixes"]["migration"]["violations"]),
            u(&f["violations_after_fix"]),
        ],
    );
}

#[test]
fn partitions_in_front_of_a_room() {
    lab("partitions", "5", partitions_agrees);
}

#[test]
fn partitions_in_front_of_a_room_seed_7() {
    lab("partitions", "7", partitions_agrees);
}

fn idempotence_agrees(prose: &str, f: &Value) {
    assert_says(
        "idempotence",
        prose,
        &[
            format!(
                "{} duplicates for {} lost acknowledgements. Every lost acknowledgement is a payment \
                 charged twice",
                u(&f["duplicates_without_idempotence"]),
                u(&f["acks_lost"])
            ),
            format!(
                "{} duplicates for {} lost acknowledgements. Each retry carried",
                u(&f["duplicates_with_idempotence"]),
                u(&f["acks_lost_with_idempotence"])
            ),
            format!(
                "All {} re-sends are duplicates",
                u(&f["duplicates_after_partition_change"])
            ),
            format!(
                "{} of them in another partition than their first copy",
                u(&f["duplicates_in_another_partition"])
            ),
            format!(
                "losing {} acknowledgements the same way: {} records for {} payments, {} \
                 duplicates",
                u(&f["acks_lost"]),
                u(&f["records_sent"]),
                u(&f["records_sent"]),
                u(&f["duplicates_with_defaults"])
            ),
            format!(
                "its first write was refused ({})",
                f["zombie_fenced_with"].as_str().unwrap()
            ),
            format!(
                "{} duplicates. Each of the {} instances",
                u(&f["duplicates_after_producer_restart"]),
                u(&f["producer_ids_after_restarts"])
            ),
        ],
    );
}

#[test]
fn idempotence_in_front_of_a_room() {
    lab("idempotence", "5", idempotence_agrees);
}

#[test]
fn idempotence_in_front_of_a_room_seed_7() {
    lab("idempotence", "7", idempotence_agrees);
}

fn rebalance_agrees(prose: &str, f: &Value) {
    let duplicates = u(&f["duplicates"]);
    assert_says(
        "rebalance",
        prose,
        &[
            format!("The ledger applied {duplicates} payments twice"),
            // Counts in the one thousands style every lab prints.
            format!(
                "processed {}, committed {}, duplicates {duplicates} (processed = committed + \
                 duplicates)",
                workshop::lab::report::thousands(u(&f["processed"])),
                workshop::lab::report::thousands(u(&f["committed"])),
            ),
            format!("only {} stopped", u(&f["partitions_revoked_cooperative"])),
            format!(
                "each payment reached `{}` exactly once ({} duplicates, {} missing)",
                f["eos"]["output_topic"].as_str().unwrap(),
                u(&f["eos"]["output_duplicates_read_committed"]),
                u(&f["eos"]["output_missing_read_committed"]),
            ),
            format!(
                "no abort takes a charge back: {} payments charged twice",
                u(&f["eos"]["gateway_duplicates"])
            ),
        ],
    );
}

#[test]
fn rebalance_in_front_of_a_room() {
    lab("rebalance", "5", rebalance_agrees);
}

#[test]
fn rebalance_in_front_of_a_room_seed_7() {
    lab("rebalance", "7", rebalance_agrees);
}

fn hot_tenant_agrees(prose: &str, f: &Value) {
    assert_says(
        "hot-tenant",
        prose,
        &[
            format!(
                "Partition {} is behind, the busiest by {} records",
                u(&f["hot_partition"]),
                thousands(u(&f["max_lag"]))
            ),
            format!(
                "the group's average shows {}",
                thousands(f["avg_lag"].as_f64().unwrap().round() as u64)
            ),
            format!(
                "The sketch's top tenant, {}",
                f["hot_tenant"].as_str().unwrap()
            ),
        ],
    );
}

#[test]
fn hot_tenant_in_front_of_a_room() {
    lab("hot-tenant", "5", hot_tenant_agrees);
}

#[test]
fn hot_tenant_in_front_of_a_room_seed_7() {
    lab("hot-tenant", "7", hot_tenant_agrees);
}

fn rehash_agrees(prose: &str, f: &Value) {
    let mod_n = f["schemes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scheme"] == "mod-n")
        .unwrap();
    assert_says(
        "rehash",
        prose,
        &[
            format!("{} of 12 keep their shard", u(&f["mod_3_to_4_kept_of_12"])),
            format!(
                "mod N moved {:.1} % of",
                mod_n["moved_fraction"].as_f64().unwrap() * 100.0
            ),
        ],
    );
}

#[test]
fn rehash_in_front_of_a_room() {
    lab("rehash", "5", rehash_agrees);
}

#[test]
fn rehash_in_front_of_a_room_seed_7() {
    lab("rehash", "7", rehash_agrees);
}

/// Each run's counts, as the figures have them.
fn migrate_agrees(prose: &str, f: &Value) {
    let t = &f["hot_tenant"];
    assert_says(
        "migrate",
        prose,
        &[
            format!("{} of {} users move", u(&f["moved_users"]), u(&f["users"])),
            format!(
                "{} reads missed acknowledged writes; {} users appeared missing",
                u(&f["missed_reads_routers_only"]),
                u(&f["users_missing_routers_only"])
            ),
            format!(
                "{} writes to B in that time never reached D",
                u(&f["lost_writes_copy_once"])
            ),
            format!(
                "B's changelog holds {} writes to (20, 40] tagged version 7 after the handover",
                u(&f["writes_since_handover_unfenced"])
            ),
            format!(
                "{} records of B's changelog applied to D, from the snapshot's offset through \
                 validation and the block; replaying a second time the {} of the range up to \
                 where the catch-up first reached B's end changed {} rows",
                u(&f["replayed_records"]),
                u(&f["replayed_twice"]),
                u(&f["replay_twice_changes"])
            ),
            format!("B refused {} write", u(&f["refused_stale_writes_fenced"])),
            format!(
                "blocked {} ms, {} held meanwhile",
                u(&f["write_block_ms"]),
                u(&f["held_writes"])
            ),
            format!(
                "{} writes lost, {} reads missed, {} duplicated",
                u(&f["lost_writes_protocol"]),
                u(&f["missed_reads_protocol"]),
                u(&f["duplicated_effects_protocol"])
            ),
            format!(
                "with the {} records of its changelog",
                u(&f["restored_records"])
            ),
            format!(
                "{} records D already had were skipped",
                u(&f["skipped_already_applied"])
            ),
            format!(
                "The backfill copied {} rows in {} ms",
                u(&t["backfill_rows"]),
                u(&t["backfill_ms"])
            ),
            format!(
                "{} orders diverged without idempotency keys, {} with them",
                u(&t["divergent_orders_naive"]),
                u(&t["divergent_orders_keyed"])
            ),
        ],
    );
}

#[test]
fn migrate_in_front_of_a_room() {
    lab("migrate", "5", migrate_agrees);
}

#[test]
fn migrate_in_front_of_a_room_seed_7() {
    lab("migrate", "7", migrate_agrees);
}

#[test]
fn hot_tenant_models_fit_a_projector_too() {
    for mode in ["--model", "--steps"] {
        let recorder = Recorder::new();
        let view = recorder.clone();
        workshop::run_with(["hot-tenant", "--check", mode], |n| {
            n.subscribe(Box::new(view));
            n.pace(Gate::opened());
        })
        .unwrap();
        let events = recorder.events();
        assert_questions_before_answers(mode, &events);
        let text = assert_fits_a_projector(mode, &events);
        support::readme::assert_blocks_of(&format!("workshop hot-tenant {mode}"), &text);
    }
}

/// Every block of the README and the docs that looks like output names its command, and is checked: the labs' by
/// the tests above (each lab's default run), the client's here.
#[test]
fn every_output_block_of_the_readme_is_checked_against_its_command() {
    let checked_above = [
        "workshop partitions",
        "workshop rebalance",
        // Checked by workshop/tests/rebalance.rs, which writes a timeline.
        "workshop rebalance --timeline rebalance.jsonl",
        "workshop hot-tenant",
        "workshop hot-tenant --steps",
        "workshop hot-tenant --model",
        "workshop idempotence",
        "workshop rehash",
        "workshop migrate",
    ];
    for (command, _) in support::readme::blocks() {
        if checked_above.contains(&command.as_str()) {
            continue;
        }
        let argv: Vec<&str> = command.split_whitespace().collect();
        let (program, args) = match argv.split_first() {
            Some((&"client", args)) => (support::workspace_binary("client"), args),
            _ => panic!("README.md or docs/: no test runs `{command}`"),
        };
        let out = Command::new(program).args(args).output().unwrap();
        assert!(out.status.success(), "{command}: {out:?}");
        let printed = String::from_utf8(out.stdout).unwrap();
        assert!(support::readme::assert_blocks_of(&command, &printed) >= 1);
    }
}

/// `workshop partitions --capacity 1000`: the group keeps up, nothing is reordered, and the
/// lab says so, then exits 1 (the phenomenon did not appear).
#[test]
fn when_the_group_keeps_up_the_lab_narrates_no_violation_and_exits_1() {
    let recorder = Recorder::new();
    let view = recorder.clone();
    let outcome = workshop::run_with(["partitions", "--check", "--capacity", "1000"], |n| {
        n.subscribe(Box::new(view))
    })
    .unwrap();
    let report = outcome.report().unwrap();
    assert_eq!(report.exit_code(), 1);
    let events = recorder.events();
    assert!(
        !events.iter().any(|e| matches!(e, Event::Violations { .. })),
        "violations narrated"
    );
    let store_errors = events.iter().any(|e| match e {
        Event::Log { lines } => lines
            .iter()
            .any(|l| l.level == Level::Error && l.text.contains("aggregate")),
        _ => false,
    });
    assert!(!store_errors, "the store logged a refusal");
    let prose = prose(&events);
    for wrong in [
        "builds a backlog",
        "the order is what broke",
        "cancelled before it was created",
        "can't keep up",
    ] {
        assert!(!prose.contains(wrong), "says {wrong:?}:\n{prose}");
    }
    let right = [
        "No partition has a backlog: the group kept up, applying up to 12000 a round against the 36 \
         produced",
        "No event reached the store before an earlier version of its order",
        "this group (earliest) lost, repeated and reordered nothing",
    ]
    .map(String::from);
    assert_says("partitions --capacity 1000", &prose, &right);
    // The binary exits 1 for the same run, and its narration is on stdout.
    let out = Command::new(env!("CARGO_BIN_EXE_workshop"))
        .args(["partitions", "--capacity", "1000"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("Verdict: NOT SHOWN (exit code 1), failed: violations after the increase")
    );
}

/// `--step` with a stdin that stays open and sends nothing: the first question is on screen,
/// its answer is not; one newline brings the answer; the end of input lets the rest run.
#[test]
fn step_waits_for_enter_between_a_question_and_its_answer() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_workshop"))
        .args(["rehash", "--step"])
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, seen) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let until = |wanted: &str, lines: &mut Vec<String>| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !lines.iter().any(|l| l.contains(wanted)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match seen.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(_) => panic!("no {wanted:?} in:\n{}", lines.join("\n")),
            }
        }
    };
    let question = "Predict: how many of the twelve keep their shard?";
    let answer = "3 of 12 keep their shard";
    let mut shown = Vec::new();
    until(question, &mut shown);
    until("press Enter for the answer", &mut shown);
    // Nothing more comes while nobody presses Enter.
    std::thread::sleep(Duration::from_millis(500));
    while let Ok(line) = seen.try_recv() {
        shown.push(line);
    }
    assert!(
        !shown
            .iter()
            .any(|l| l.contains(answer) || l.contains("hash  % 3")),
        "the answer came before Enter:\n{}",
        shown.join("\n")
    );
    assert!(shown.last().unwrap().contains("press Enter for the answer"));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
    until(answer, &mut shown);
    until("press Enter for the next screen", &mut shown);
    assert!(
        !shown.iter().any(|l| l.contains("── 2.")),
        "the next phase came before Enter"
    );
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    while let Ok(line) = seen.recv_timeout(Duration::from_secs(10)) {
        shown.push(line);
    }
    assert!(shown.iter().any(|l| l.starts_with("Verdict: SHOWN")));
    assert!(
        !shown.iter().any(|l| l.contains('\x1b')),
        "escape codes on a pipe"
    );
}
