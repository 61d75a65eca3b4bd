//! Lab `rebalance`: at-least-once, duplicates, and where dedup must live (LABS.md, "Lab
//! rebalance"; source 003, section 10: group `billing`, topic `payments`).
//!
//! Four members of group `billing` apply payments to a ledger and commit after each batch. One
//! of them stalls between processing a batch and committing it, longer than max.poll.interval:
//! its own client leaves the group, the group rebalances, the partitions' new owners start from
//! the committed offsets and apply that batch again, and the late commit fails with
//! CommitFailed. The lab counts the duplicates in the ledger and, independently, the records
//! processed but never committed, and they must agree. Then the same group runs again to
//! compare: cooperative-sticky, static membership, a smaller max.poll.records; and the same
//! deliveries reach two more ledgers, one with dedup in its own transaction, one behind a cache
//! with a TTL. Last, the stall once more with every member in Kafka transactions
//! (read_committed downstream): the output topic holds each payment once, the payment gateway
//! is still called twice for the redelivered batch.
//!
//! Everything goes through a real broker (embedded, or `--bootstrap`) and our client's group
//! member; the lab chooses only when a member stalls or restarts. On the embedded broker the
//! whole lab runs on one thread with tokio's clock paused: broker and members share it, timeouts
//! elapse instantly and exactly, and a seed always gives the same figures. Against a cluster it
//! runs in real time with the shortest timeouts a broker accepts, the five runs side by side.
//!
//! - [`ledger`], [`accounting`]: the stores and the counting, with their own tests.
//! - `plan`: flag, names, timings, the five runs; `payments`: what is produced;
//!   `member`: one member's task; `scenario`: one run end to end; `journal`: what happened;
//!   `capture`: the client's own log lines; `figures`: JSON and verdict; `story`: narration;
//!   `eos`, `eos_figures`, `eos_story`: the transactional run, its figures, its narration.

pub mod accounting;
mod capture;
mod eos;
mod eos_figures;
mod eos_story;
mod figures;
mod journal;
pub mod ledger;
mod member;
mod payments;
mod plan;
mod scenario;
mod story;

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::lab::report::{LabReport, Narrator, Progress, SkippedPhase};
use crate::lab::stop::Stop;
use crate::lab::target::Cluster;
use crate::lab::{Lab, LabContext, LabError, Target};
use capture::{Capture, Journals};
use journal::Clock;
pub use plan::RebalanceArgs;
use plan::{Kind, Plan};
use scenario::Outcome;

pub struct Rebalance;

impl Lab for Rebalance {
    const NAME: &'static str = "rebalance";
    const SUMMARY: &'static str =
        "A consumer stalls past max.poll.interval.ms: rebalance, CommitFailed, payments applied twice; what helps";
    type Args = RebalanceArgs;

    fn run(args: &RebalanceArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
        let plan = Plan::new(ctx.seed, &ctx.target);
        // Created first, so a path that cannot be written fails before the run, not after.
        let timeline = args.timeline.as_deref().map(create_timeline).transpose()?;
        let expected = figures::expected();
        let n = &mut ctx.narrator;
        n.intro(Self::NAME, &expected);
        let rt = runtime(&ctx.target)?;
        let journals = Journals::default();
        let capture = tracing::Dispatch::new(Capture::new(journals.clone()));
        let progress = n.progress(Kind::ALL.len() as u64 + 1, "running the group");
        let ran = tracing::dispatcher::with_default(&capture, || {
            rt.block_on(run_all(&ctx.target, &ctx.stop, &plan, &journals, &progress))
        });
        progress.finish();
        let (target, Runs { outcomes, eos }) = ran?;
        if let Some((file, path)) = timeline {
            let eos_run = eos.as_ref().ok().map(|e| &e.run);
            write_timeline(file, path, outcomes.iter().chain(eos_run))?;
        }
        let figures =
            figures::build(&plan, &outcomes, eos.as_ref().ok()).map_err(LabError::Internal)?;
        let skipped = eos.as_ref().err().map(String::as_str);
        tell(n, &plan, &figures, &outcomes, &target, &ctx.target);
        eos_story::tell(n, &figures, eos.as_ref().ok(), skipped);

        let checks = figures::verdict(&figures, skipped);
        let mut summary = story::summary(&figures);
        if let Some((happened, why)) = eos_story::summary(&figures) {
            summary.happened.push(happened);
            summary.why.push(why);
        }
        n.summary(&summary);
        let skipped: Vec<SkippedPhase> = skipped
            .map(|reason| SkippedPhase {
                phase: eos_story::TITLE.to_string(),
                reason: reason.to_string(),
            })
            .into_iter()
            .collect();
        let report =
            LabReport::new(Self::NAME, expected, checks.shown(), &figures)?.skipping(skipped);
        n.verdict(&report, &checks);
        Ok(report)
    }
}

/// One thread for everything, so the log capture (a thread's default subscriber) sees every
/// task; on the embedded broker its clock starts paused, so broker and members share virtual
/// time. Against a cluster time must be real: the broker's timeouts run on its own clock.
fn runtime(target: &Target) -> Result<tokio::runtime::Runtime, LabError> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if *target == Target::Embedded {
        builder.start_paused(true);
    }
    builder
        .build()
        .map_err(|e| LabError::Internal(format!("cannot start a tokio runtime: {e}")))
}

/// What the lab ran: the at-least-once runs, and the transactional one (or why the cluster
/// could not run it).
struct Runs {
    outcomes: Vec<Outcome>,
    eos: Result<eos::EosOutcome, String>,
}

/// Opens the broker, runs the six scenarios, and cleans up whatever happened.
async fn run_all(
    target: &Target,
    stop: &Stop,
    plan: &Plan,
    journals: &Journals,
    progress: &Progress,
) -> Result<(String, Runs), LabError> {
    let clock = Clock::start();
    let cluster = Cluster::open(target, stop, Rebalance::NAME).await?;
    let outcomes = cluster
        .until_stopped(scenarios(&cluster, plan, journals, clock, progress))
        .await;
    let described = cluster.describe();
    cluster.close().await;
    Ok((described, outcomes?))
}

/// On the paused clock one after the other (same figures every run); against a cluster side by
/// side, since each costs real seconds of timeouts and they share nothing but the broker.
async fn scenarios(
    cluster: &Cluster,
    plan: &Plan,
    journals: &Journals,
    clock: Clock,
    progress: &Progress,
) -> Result<Runs, LabError> {
    let one = |kind: Kind| async move {
        let outcome = scenario::run(cluster, plan, plan.spec(kind), journals, clock, None).await;
        progress.inc();
        outcome
    };
    let transactional = async {
        let outcome = eos::run(cluster, plan, journals, clock).await;
        progress.inc();
        outcome
    };
    if cluster.embedded().is_some() {
        let mut outcomes = Vec::new();
        for kind in Kind::ALL {
            outcomes.push(one(kind).await?);
        }
        let eos = transactional.await?;
        return Ok(Runs { outcomes, eos });
    }
    let (a, b, c, d, e, eos) = tokio::join!(
        one(Kind::Baseline),
        one(Kind::Cooperative),
        one(Kind::SmallBatch),
        one(Kind::Static),
        one(Kind::Dynamic),
        transactional
    );
    Ok(Runs {
        outcomes: vec![a?, b?, c?, d?, e?],
        eos: eos?,
    })
}

fn tell(
    n: &mut Narrator,
    plan: &Plan,
    figures: &figures::Figures,
    outcomes: &[Outcome],
    target: &str,
    on: &Target,
) {
    let Some(base) = outcomes.iter().find(|o| o.spec.kind == Kind::Baseline) else {
        return;
    };
    n.say(&format!("Ran against {target}."));
    story::setup(n, plan, figures, base, *on == Target::Embedded);
    story::stall(n, figures, base);
    story::redeliveries(n, plan, figures, base);
    story::cooperative(n, figures);
    story::static_membership(n, figures);
    story::small_batch(n, figures);
    story::colocated(n, figures);
    story::ttl(n, figures);
}

fn create_timeline(path: &Path) -> Result<(File, &Path), LabError> {
    File::create(path)
        .map(|file| (file, path))
        .map_err(|e| timeline_error(path, &e))
}

fn timeline_error(path: &Path, e: &std::io::Error) -> LabError {
    LabError::InvalidInput(format!(
        "cannot write the timeline to {}: {e}; give --timeline a file in a writable directory",
        path.display()
    ))
}

/// Every run's journal as JSON lines, in time order (runs side by side interleave).
fn write_timeline<'a>(
    file: File,
    path: &Path,
    outcomes: impl Iterator<Item = &'a Outcome>,
) -> Result<(), LabError> {
    let mut lines: Vec<(u64, String)> = Vec::new();
    for o in outcomes {
        lines.extend(o.journal.timeline());
    }
    lines.sort_by_key(|(at, _)| *at);
    let mut out = std::io::BufWriter::new(file);
    for (_, line) in lines {
        writeln!(out, "{line}").map_err(|e| timeline_error(path, &e))?;
    }
    out.flush().map_err(|e| timeline_error(path, &e))
}
