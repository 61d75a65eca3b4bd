//! Shared by the `client` binary's tests: the binary run as a user would run it, against a
//! broker started in-process on port 0.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use broker::{Broker, BrokerConfig};
use client::{Client, ClientConfig, GroupConfig, GroupConsumer, OffsetReset};

/// What one run of the binary left: its exit code and everything it printed.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the binary with `args`, `stdin` as its input and KAFKA_BOOTSTRAP pointing at `addr`
/// (unset with `None`). Logs and backtraces are off, as a user without RUST_LOG sees it.
pub async fn client(addr: Option<SocketAddr>, args: &[&str], stdin: &str) -> Run {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_client"));
        cmd.args(&args)
            .env_remove("RUST_LOG")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match addr {
            Some(addr) => cmd.env("KAFKA_BOOTSTRAP", addr.to_string()),
            None => cmd.env_remove("KAFKA_BOOTSTRAP"),
        };
        let mut child = cmd.spawn().expect("the binary runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

/// A broker on 127.0.0.1:0 with the default settings.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub async fn broker() -> Broker {
    Broker::start(BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..BrokerConfig::default()
    })
    .await
    .unwrap()
}

/// A member of `group` subscribed to `topic`, once it owns `partitions` of it; it commits only
/// when told to.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub async fn member(
    addr: SocketAddr,
    group: &str,
    topic: &str,
    partitions: usize,
) -> GroupConsumer {
    let client = Client::connect(ClientConfig::new(&addr.to_string()))
        .await
        .unwrap();
    let mut config = GroupConfig::new(group);
    config.auto_commit = false;
    config.consumer.max_wait = Duration::from_millis(50);
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let mut member = GroupConsumer::new(client, config).unwrap();
    member.subscribe([topic]).unwrap();
    let joined = async {
        while member.assignment().len() < partitions {
            member.poll().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(20), joined)
        .await
        .expect("the member joins");
    member
}
