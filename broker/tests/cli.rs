//! The `broker` binary started as a user starts it: where it listens, what it tells clients, and
//! the one line it prints when it cannot start, with the hint for that cause.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

fn broker(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs")
}

/// Runs a broker that must fail to start: its exit code and stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = broker(args).wait_with_output().unwrap();
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn one_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    lines[0]
}

/// The line a started broker prints, then it is stopped; its stderr until then.
fn started(args: &[&str]) -> (String, String) {
    let mut child = broker(args);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (line, stderr)
}

#[test]
fn a_data_dir_that_is_a_file_is_named_with_its_own_hint() {
    let file = std::env::temp_dir().join(format!("broker-cli-file-{}", std::process::id()));
    std::fs::write(&file, b"not a directory").unwrap();
    let path = file.to_str().unwrap();
    let (code, stderr) = refused(&["--listen", "127.0.0.1:0", "--data-dir", path]);
    assert_eq!(code, Some(2));
    let line = one_line(&stderr);
    assert!(line.contains(&format!("--data-dir {path}")), "{line}");
    assert!(line.contains("a file is in the way"), "{line}");
    assert!(!line.contains("another broker"), "{line}");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn a_port_in_use_says_so_and_names_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, stderr) = refused(&["--listen", &addr]);
    assert_eq!(code, Some(2));
    let line = one_line(&stderr);
    assert!(line.contains(&format!("cannot listen on {addr}")), "{line}");
    assert!(line.contains("another broker on that port"), "{line}");
}

#[test]
fn host_names_are_resolved_and_a_name_that_does_not_resolve_is_one_line() {
    let (line, stderr) = started(&["--listen", "localhost:0"]);
    assert!(line.starts_with("broker listening on 127.0.0.1:"), "{line}");
    assert!(
        !stderr.contains('\x1b'),
        "no colour into a pipe: {stderr:?}"
    );
    assert!(
        stderr.contains("clients are told to connect to 127.0.0.1:"),
        "{stderr}"
    );

    let (code, stderr) = refused(&["--listen", "nosuchhost.invalid:9092"]);
    assert_eq!(code, Some(2));
    let line = one_line(&stderr);
    assert!(
        line.contains("nosuchhost.invalid does not resolve"),
        "{line}"
    );
}

#[test]
fn the_advertised_listener_is_what_clients_are_told() {
    let (_, stderr) = started(&[
        "--listen",
        "127.0.0.1:0",
        "--advertised-listener",
        "kafka.example:19092",
    ]);
    assert!(
        stderr.contains("clients are told to connect to kafka.example:19092"),
        "{stderr}"
    );
    let (code, stderr) = refused(&["--advertised-listener", "kafka.example"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("is not HOST:PORT"), "{stderr}");
}

#[test]
fn the_metrics_address_is_printed_like_the_listener() {
    let mut child = broker(&["--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = [String::new(), String::new()];
    for line in &mut lines {
        stdout.read_line(line).unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        lines[0].starts_with("broker listening on 127.0.0.1:"),
        "{lines:?}"
    );
    let metrics = lines[1]
        .trim()
        .strip_prefix("metrics listening on ")
        .unwrap();
    let addr: std::net::SocketAddr = metrics.parse().unwrap();
    assert_ne!(addr.port(), 0, "the bound port, not the one asked for");
}

/// A test runner killed with SIGKILL cannot stop what it started: with --exit-with-parent the
/// broker stops by itself once its parent is gone. The parent here is a shell killed with -9.
#[test]
fn with_exit_with_parent_a_killed_parent_leaves_no_broker() {
    let script = format!(
        "'{}' --listen 127.0.0.1:0 --exit-with-parent & echo \"pid $!\"; wait",
        env!("CARGO_BIN_EXE_broker")
    );
    let mut parent = Command::new("sh")
        .args(["-c", &script])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The shell's "pid N" and the broker's line, in either order.
    let mut stdout = BufReader::new(parent.stdout.take().unwrap());
    let (mut pid, mut addr) = (None, None);
    while pid.is_none() || addr.is_none() {
        let mut line = String::new();
        assert_ne!(
            stdout.read_line(&mut line).unwrap(),
            0,
            "the broker did not start"
        );
        let last = line.trim().rsplit(' ').next().unwrap().to_string();
        match line.starts_with("pid ") {
            true => pid = Some(last),
            false => addr = Some(last.parse::<std::net::SocketAddr>().unwrap()),
        }
    }
    let (pid, addr) = (pid.unwrap(), addr.unwrap());
    assert!(std::net::TcpStream::connect(addr).is_ok(), "it serves");
    parent.kill().unwrap();
    parent.wait().unwrap();
    // The broker holds the shell's stdout until it exits: the end of that pipe is its exit. A
    // minute without it is a broker left behind (then stopped here).
    let (ended, end) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        let _ = ended.send(());
    });
    if end
        .recv_timeout(std::time::Duration::from_secs(60))
        .is_err()
    {
        let _ = Command::new("kill").arg(&pid).status();
        panic!("the broker outlived its parent");
    }
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "nothing serves once the broker is gone"
    );
}
