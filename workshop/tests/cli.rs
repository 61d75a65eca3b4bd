//! The `workshop` binary as a user runs it: what goes to stdout and stderr, and the exit code.

use std::process::{Command, Output, Stdio};

fn workshop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workshop"))
        .args(args)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("the workshop binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

#[test]
fn list_shows_one_entry_per_lab() {
    let out = workshop(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    // A summary too long for the line continues, indented, under itself.
    let entries: Vec<&str> = stdout.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(entries.len(), workshop::labs::LABS.len());
    assert!(entries[0].starts_with("rehash "), "{stdout}");
}

/// On a terminal 300 columns wide, the help and the list still fit in 100 (clap's
/// `max_term_width`; clap reads the width from COLUMNS).
#[test]
fn help_and_list_fit_in_100_columns_on_a_wide_terminal() {
    let mut pages = vec![vec!["--help"], vec!["list"]];
    for lab in workshop::labs::LABS {
        pages.push(vec![lab.name, "--help"]);
        pages.push(vec![lab.name, "-h"]);
    }
    let mut wide = Vec::new();
    for args in pages {
        let out = Command::new(env!("CARGO_BIN_EXE_workshop"))
            .args(&args)
            .env("COLUMNS", "300")
            .env("LINES", "50")
            .stdin(Stdio::null())
            .output()
            .expect("the workshop binary runs");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        for line in text(&out.stdout).lines() {
            if line.chars().count() > 100 {
                wide.push(format!("{args:?}: {line}"));
            }
        }
    }
    assert!(wide.is_empty(), "{}", wide.join("\n"));
}

#[test]
fn json_is_the_only_thing_on_stdout() {
    let out = workshop(&["rehash", "--json", "--keys", "20000"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    let keys: Vec<&String> = report.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        vec!["expected", "figures", "lab", "measured", "shown"]
    );
    assert!(report["measured"]["lookup_ns"].is_array(), "{report}");
    assert_eq!(report["lab"], "rehash");
    assert_eq!(report["shown"], true);
    // Narration went to stderr, plain because stderr is not a terminal here.
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Summary") && stderr.contains("Verdict: SHOWN"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "escape codes on a pipe");
}

#[test]
fn check_is_quiet_and_the_verdict_is_the_exit_code() {
    let shown = workshop(&["rehash", "--check", "--keys", "20000"]);
    assert_eq!(shown.status.code(), Some(0));
    assert!(shown.stdout.is_empty() && shown.stderr.is_empty());

    let not_shown = workshop(&[
        "rehash", "--check", "--keys", "20000", "--from", "4", "--to", "8",
    ]);
    assert_eq!(not_shown.status.code(), Some(1));
    assert!(not_shown.stdout.is_empty() && not_shown.stderr.is_empty());
}

#[test]
fn step_without_a_terminal_does_not_hang() {
    // stdin is closed: each pause reads end-of-input and goes on.
    let out = workshop(&["rehash", "--step", "--keys", "5000"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("press Enter"));
}

#[test]
fn narration_is_on_stdout_for_people() {
    let out = workshop(&["rehash", "--keys", "5000"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("workshop rehash\n") && stdout.contains("Verdict: SHOWN"),
        "{stdout}"
    );
    assert!(!stdout.contains('\x1b'), "escape codes on a pipe");
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn errors_are_one_line_and_exit_2() {
    for args in [
        &["rehash", "--keys", "lots"][..],
        &["rehash", "--from", "3", "--to", "3"],
        &["rehash", "--from", "4", "--to", "3", "--remove", "9"],
        &["rehash", "--bootstrap", "nowhere"],
        &["no-such-lab"],
    ] {
        let out = workshop(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("workshop: error: "), "{stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn help_is_not_an_error() {
    let out = workshop(&["rehash", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    for flag in [
        "--bootstrap",
        "--seed",
        "--step",
        "--json",
        "--check",
        "--keys",
        "--from",
        "--to",
        "--vnodes",
    ] {
        assert!(stdout.contains(flag), "{flag} missing from help");
    }
}

/// A lab that cannot reach its cluster prints its error alone: no header or expectation first.
#[test]
fn a_cluster_that_cannot_be_reached_gets_the_error_line_only() {
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    for args in [
        vec!["partitions", "--bootstrap", &addr],
        vec!["hot-tenant", "--bootstrap", &addr],
        vec!["hot-tenant", "--steps", "--bootstrap", &addr],
    ] {
        let out = workshop(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&out.stdout), "", "{args:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with(&format!(
                "workshop: error: cannot reach a Kafka broker at {addr}"
            )),
            "{args:?}: {stderr}"
        );
    }
}
