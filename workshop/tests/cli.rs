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
fn list_shows_one_line_per_lab() {
    let out = workshop(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), workshop::labs::LABS.len());
    assert!(lines[0].starts_with("rehash "), "{stdout}");
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
