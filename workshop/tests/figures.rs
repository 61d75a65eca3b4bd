//! Every lab's `figures`, as `--json` reports them, for the default seed and two others, equal to
//! the ones recorded in `tests/figures/`: the figures a seed decides must not move when the code
//! beneath the labs is rearranged. A run whose figures differ fails with the paths that differ.
//!
//! A lab whose figures change on purpose records them again with
//! `WORKSHOP_RECORD_FIGURES=1 cargo test -p workshop --test figures`, and the diff of the JSON
//! files shows the change in review.

mod support;

use std::path::PathBuf;

use serde_json::Value;
use support::run_json;

/// The default seed (no `--seed`), and two others.
const SEEDS: [Option<&str>; 3] = [None, Some("7"), Some("2024")];

/// hot-tenant's timed run at the scale its own tests use (the default sends 4,000,000 records).
const HOT_TENANT_SMALL: [&str; 4] = ["--records", "400000", "--rate", "200000"];

/// Runs `lab` with `args` under each seed, one after the other (each test runs beside the
/// others, and a lab's phases have deadlines: runs side by side on a loaded machine would make
/// them slow rather than the figures wrong), and compares each run's figures with
/// `tests/figures/<name>-<seed>.json`.
fn assert_recorded(lab: &str, name: &str, args: &[&str]) {
    let runs: Vec<(String, Value)> = SEEDS
        .iter()
        .map(|seed| {
            let mut with_seed: Vec<&str> = args.to_vec();
            if let Some(seed) = seed {
                with_seed.extend(["--seed", seed]);
            }
            let file = format!("{name}-{}.json", seed.unwrap_or("default"));
            (file, run_json(lab, &with_seed).figures)
        })
        .collect();
    let mut differ = Vec::new();
    for (file, figures) in runs {
        let path = recorded(&file);
        // Compared as text: serde_json parses some floats one unit in the last place off, and
        // the text a figure prints as is what a reader of `--json` gets.
        let now = serde_json::to_string_pretty(&figures).expect("figures serialise") + "\n";
        if std::env::var_os("WORKSHOP_RECORD_FIGURES").is_some() {
            std::fs::write(&path, now).expect("the recording is written");
            continue;
        }
        let before = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("no recording {}: {e}", path.display()));
        for line in differing_lines(&before, &now) {
            differ.push(format!("{file}: {line}"));
        }
    }
    assert!(
        differ.is_empty(),
        "figures differ from the recording:\n{}",
        differ.join("\n")
    );
}

fn recorded(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("figures")
        .join(file)
}

/// The lines of the pretty-printed figures that differ, by line number (one figure a line, so
/// the line names the figure); a run longer or shorter than the recording shows the lines only
/// one of them has.
fn differing_lines(recorded: &str, now: &str) -> Vec<String> {
    let (recorded, now): (Vec<&str>, Vec<&str>) =
        (recorded.lines().collect(), now.lines().collect());
    (0..recorded.len().max(now.len()))
        .filter(|&i| recorded.get(i) != now.get(i))
        .map(|i| {
            let show = |line: Option<&&str>| line.map_or("-".to_string(), |l| l.trim().to_string());
            format!(
                "line {}: recorded {}, now {}",
                i + 1,
                show(recorded.get(i)),
                show(now.get(i))
            )
        })
        .collect()
}

#[test]
fn rehash_figures_are_the_recorded_ones() {
    assert_recorded("rehash", "rehash", &[]);
}

#[test]
fn partitions_figures_are_the_recorded_ones() {
    assert_recorded("partitions", "partitions", &[]);
}

#[test]
fn hot_tenant_figures_are_the_recorded_ones() {
    assert_recorded("hot-tenant", "hot-tenant", &HOT_TENANT_SMALL);
    assert_recorded("hot-tenant", "hot-tenant-model", &["--model"]);
    assert_recorded("hot-tenant", "hot-tenant-steps", &["--steps"]);
}

#[test]
fn idempotence_figures_are_the_recorded_ones() {
    assert_recorded("idempotence", "idempotence", &[]);
}

#[test]
fn rebalance_figures_are_the_recorded_ones() {
    assert_recorded("rebalance", "rebalance", &[]);
}

#[test]
fn migrate_figures_are_the_recorded_ones() {
    assert_recorded("migrate", "migrate", &[]);
}

#[test]
fn routing_figures_are_the_recorded_ones() {
    assert_recorded("routing", "routing", &[]);
}

#[test]
fn a_moved_figure_is_named_by_its_line() {
    let recorded = "{\n  \"a\": 1,\n  \"b\": 0.9090909090909092\n}\n";
    let now = "{\n  \"a\": 1,\n  \"b\": 0.9090909090909091,\n  \"c\": true\n}\n";
    assert_eq!(
        differing_lines(recorded, now),
        vec![
            "line 3: recorded \"b\": 0.9090909090909092, now \"b\": 0.9090909090909091,",
            "line 4: recorded }, now \"c\": true",
            "line 5: recorded -, now }",
        ]
    );
    assert!(differing_lines(recorded, recorded).is_empty());
}
