//! `startup`: what a test suite or a workshop pays per broker (performance.md C.2): spawn to
//! the first ApiVersions answer, resident memory once idle, and resident memory per idle
//! partition (after creating 1,000 and 10,000). The ceilings are the same figures for the raw
//! tokio server (this binary in `--serve-raw` mode: spawn to the first echo, its idle RSS),
//! spawned and pinned the same way.
//!
//! Not available under `--bootstrap`: the bench can only time a broker it starts itself.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::cluster::connect_admin;
use super::process::{find_broker, own_binary, Kind, Spawned};
use super::report::{Better, Ceiling, Figure, Goal};
use super::stats::Runs;
use super::{Bench, BenchError, Plan};

const BROKER_ARGS: [&str; 2] = ["--listen", "127.0.0.1:0"];
const RAW_ARGS: [&str; 2] = ["bench", "--serve-raw"];

pub async fn run(bench: &mut Bench) -> Result<(), BenchError> {
    if bench.plan.bootstrap.is_some() {
        bench.reporter.skipped(
            "startup",
            "--bootstrap: only a broker the bench starts can be timed",
        );
        return Ok(());
    }
    let plan = &bench.plan;
    let broker_bin = find_broker(plan.broker_bin.as_deref())?;
    let raw = spawn_series(Kind::Raw, &own_binary()?, &RAW_ARGS, plan).await?;
    let broker = spawn_series(Kind::Broker, &broker_bin, &BROKER_ARGS, plan).await?;

    let mut ready = Figure::new("startup", "spawn to first ApiVersions answer", "ms");
    ready.better = Better::Lower;
    ready.params = json!({"binary": broker_bin.display().to_string(), "spawns": plan.runs});
    ready.runs = broker.ready_ms;
    ready.ceiling = Some(Ceiling {
        name: "raw tokio server, spawn to first echo".into(),
        value: raw.ready_ms.median(),
        unit: "ms",
    });
    ready.goal = Some(Goal::at_most(ready.median(), 10.0, "ms"));
    bench.reporter.emit(&ready);

    let mut idle = Figure::new("startup", "idle RSS", "MB");
    idle.better = Better::Lower;
    idle.params = json!({"settle_ms": settle(plan).as_millis() as u64, "spawns": plan.runs});
    idle.runs = broker.idle_mb;
    idle.ceiling = Some(Ceiling {
        name: "raw tokio server idle RSS".into(),
        value: raw.idle_mb.median(),
        unit: "MB",
    });
    idle.goal = Some(Goal::at_most(idle.median(), 8.0, "MB"));
    bench.reporter.emit(&idle);

    for partitions in [1_000, 10_000] {
        let mut runs = Runs::default();
        for _ in 0..plan.runs {
            runs.push(rss_per_partition(&broker_bin, partitions, plan).await?);
        }
        let mut figure = Figure::new(
            "startup",
            format!("RSS per idle partition, {partitions} partitions"),
            "KiB",
        );
        figure.better = Better::Lower;
        figure.params =
            json!({"partitions": partitions, "settle_ms": settle(plan).as_millis() as u64});
        figure.runs = runs;
        figure.goal = Some(Goal::at_most(figure.median(), 4.0, "KiB"));
        bench.reporter.emit(&figure);
    }
    Ok(())
}

/// How long a fresh process is left alone before its RSS is read (C.2: 1 s).
fn settle(plan: &Plan) -> Duration {
    Duration::from_millis(if plan.quick { 300 } else { 1_000 })
}

struct Series {
    ready_ms: Runs,
    idle_mb: Runs,
}

/// Spawns the server once per scheduled run (the warm-up brings the binary into the page
/// cache): start-to-ready, and RSS after settling, in MB (10^6 bytes, as the goal is written).
async fn spawn_series(
    kind: Kind,
    program: &Path,
    args: &[&str],
    plan: &Plan,
) -> Result<Series, BenchError> {
    let mut series = Series {
        ready_ms: Runs::default(),
        idle_mb: Runs::default(),
    };
    for counts in plan.schedule() {
        let server = Spawned::start(kind, program, args, plan.placement).await?;
        tokio::time::sleep(settle(plan)).await;
        let usage = server.usage().ok_or_else(|| {
            BenchError::new(format!("cannot read /proc for {}", program.display()))
        })?;
        if counts {
            series
                .ready_ms
                .push(server.start_to_ready.as_secs_f64() * 1e3);
            series.idle_mb.push(usage.rss_kib as f64 * 1024.0 / 1e6);
        }
    }
    Ok(series)
}

/// KiB of RSS that `partitions` idle partitions add to a fresh broker. The admin connection is
/// open before the first reading, so only the partitions make the difference.
async fn rss_per_partition(
    broker_bin: &Path,
    partitions: i32,
    plan: &Plan,
) -> Result<f64, BenchError> {
    let broker = Spawned::start(Kind::Broker, broker_bin, &BROKER_ARGS, plan.placement).await?;
    let admin = connect_admin(&broker.addr.to_string()).await?;
    tokio::time::sleep(settle(plan)).await;
    let rss = || {
        broker
            .usage()
            .map(|u| u.rss_kib)
            .ok_or_else(|| BenchError::new("cannot read the broker's /proc entry"))
    };
    let before = rss()?;
    admin
        .create_topic(&client::NewTopic::new("bench-idle", partitions))
        .await
        .map_err(|e| BenchError::new(format!("cannot create {partitions} partitions: {e}")))?;
    tokio::time::sleep(settle(plan)).await;
    let after = rss()?;
    Ok(after.saturating_sub(before) as f64 / f64::from(partitions))
}
