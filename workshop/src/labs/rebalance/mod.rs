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
mod evidence;
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
use std::sync::Arc;

use futures_util::future::join_all;

use crate::kit::rebalance_time;
use crate::lab::report::{LabReport, Progress, SkippedPhase};
use crate::lab::stop::Stop;
use crate::lab::target::Cluster;
use crate::lab::{Lab, LabContext, LabError, Target};
use capture::{Capture, Journals};
use journal::{Clock, Journal};
pub use plan::RebalanceArgs;
use plan::{Kind, Plan, Timing};
use scenario::Outcome;

pub struct Rebalance;

impl Lab for Rebalance {
    const NAME: &'static str = "rebalance";
    const SUMMARY: &'static str =
        "A stalled consumer is dropped: rebalance, CommitFailed, payments applied twice; what helps";
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
            rt.block_on(run_all(&ctx.target, &ctx.stop, plan, &journals, &progress))
        });
        progress.finish();
        // What ran, even when a run failed: its events are how to find out why.
        if let Some((file, path)) = timeline {
            write_timeline(file, path, &journals.every())?;
        }
        let (target, plan, runs) = ran?;
        let (outcomes, eos) = runs.finished()?;
        let figures =
            figures::build(&plan, &outcomes, eos.as_ref().ok()).map_err(LabError::Internal)?;
        let skipped = eos.as_ref().err().map(String::as_str);
        n.say(&format!("Ran against {target}."));
        story::tell(
            n,
            &plan,
            &figures,
            &outcomes,
            ctx.target == Target::Embedded,
        );
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

/// What the lab ran: each at-least-once run, and the transactional one (or why the cluster
/// could not run it), each as it ended.
struct Runs {
    outcomes: Vec<(Kind, Result<Outcome, LabError>)>,
    eos: Result<Result<eos::EosOutcome, String>, LabError>,
}

impl Runs {
    /// Every run's outcome; or, when one failed, its error, naming the run and those that
    /// finished (a stop asked for is reported as it is).
    fn finished(self) -> Result<(Vec<Outcome>, Result<eos::EosOutcome, String>), LabError> {
        let mut finished = Vec::new();
        let mut failed = Vec::new();
        let mut outcomes = Vec::new();
        for (kind, ran) in self.outcomes {
            match ran {
                Ok(outcome) => {
                    finished.push(kind.key());
                    outcomes.push(outcome);
                }
                Err(e) => failed.push((kind.key(), e)),
            }
        }
        let eos = match self.eos {
            Ok(eos) => {
                finished.extend(eos.is_ok().then_some(Kind::Eos.key()));
                eos
            }
            Err(e) => {
                failed.push((Kind::Eos.key(), e));
                Err(String::new())
            }
        };
        match failure(&finished, failed) {
            Some(e) => Err(e),
            None => Ok((outcomes, eos)),
        }
    }
}

/// The lab's error when runs failed: the first failure's own message, then which run it was,
/// which others failed and which finished (a stop asked for is reported as it is).
fn failure(finished: &[&str], mut failed: Vec<(&str, LabError)>) -> Option<LabError> {
    if let Some(at) = failed
        .iter()
        .position(|(_, e)| matches!(e, LabError::Interrupted(_)))
    {
        return Some(failed.swap_remove(at).1);
    }
    let mut failed = failed.into_iter();
    let (kind, first) = failed.next()?;
    let also: Vec<&str> = failed.map(|(kind, _)| kind).collect();
    let also = match also.is_empty() {
        true => String::new(),
        false => format!("; the {} failed too", runs_named(&also)),
    };
    let finished = match finished.is_empty() {
        true => "no run finished".to_string(),
        false => format!("the {} finished", runs_named(finished)),
    };
    Some(in_context(
        first,
        &format!(" (the {kind} run{also}; {finished}; --timeline FILE writes what every run did)"),
    ))
}

/// `baseline run`, `baseline and static runs`, `baseline, static and eos runs`.
fn runs_named(kinds: &[&str]) -> String {
    match kinds {
        [one] => format!("{one} run"),
        [rest @ .., last] => format!("{} and {last} runs", rest.join(", ")),
        [] => "no run".to_string(),
    }
}

/// The same error, with `context` after its message.
fn in_context(e: LabError, context: &str) -> LabError {
    match e {
        LabError::Broker(m) => LabError::Broker(m + context),
        LabError::TooSlow(m) => LabError::TooSlow(m + context),
        LabError::Internal(m) => LabError::Internal(m + context),
        LabError::InvalidInput(m) => LabError::InvalidInput(m + context),
        other => other,
    }
}

/// Opens the broker, measures its rebalances when time is real, runs the six scenarios, and
/// cleans up whatever happened. Returns the plan as run (its stall fitted to the cluster).
async fn run_all(
    target: &Target,
    stop: &Stop,
    mut plan: Plan,
    journals: &Journals,
    progress: &Progress,
) -> Result<(String, Plan, Runs), LabError> {
    let clock = Clock::start();
    let cluster = Cluster::open(target, stop, Rebalance::NAME).await?;
    let runs = cluster
        .until_stopped(async {
            fit_to_cluster(&cluster, &mut plan).await?;
            Ok(scenarios(&cluster, &plan, journals, clock, progress).await)
        })
        .await;
    let described = cluster.describe();
    cluster.close().await;
    Ok((described, plan, runs?))
}

/// In real time (against a cluster) the stall must outlast the cluster's own rebalance, which
/// is measured first; on the paused clock the embedded broker's is known and the plan stands.
async fn fit_to_cluster(cluster: &Cluster, plan: &mut Plan) -> Result<(), LabError> {
    if plan.timing == Timing::PAUSED {
        return Ok(());
    }
    let timing = plan.timing;
    let rebalance =
        rebalance_time::measure(cluster, |group| member::timed_config(group, &timing)).await?;
    plan.fit_to_rebalance(rebalance);
    Ok(())
}

/// On the paused clock one after the other (same figures every run); against a cluster side by
/// side, since each costs real seconds of timeouts and they share nothing but the broker. A run
/// that fails does not stop the others.
async fn scenarios(
    cluster: &Cluster,
    plan: &Plan,
    journals: &Journals,
    clock: Clock,
    progress: &Progress,
) -> Runs {
    let one = |kind: Kind| async move {
        let outcome = scenario::run(cluster, plan, plan.spec(kind), journals, clock, None).await;
        progress.inc();
        (kind, outcome)
    };
    let transactional = async {
        let outcome = eos::run(cluster, plan, journals, clock).await;
        progress.inc();
        outcome
    };
    if cluster.embedded().is_some() {
        let mut outcomes = Vec::new();
        for kind in Kind::ALL {
            outcomes.push(one(kind).await);
        }
        let eos = transactional.await;
        return Runs { outcomes, eos };
    }
    let (outcomes, eos) = tokio::join!(join_all(Kind::ALL.map(one)), transactional);
    Runs { outcomes, eos }
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
fn write_timeline(file: File, path: &Path, journals: &[Arc<Journal>]) -> Result<(), LabError> {
    let mut lines: Vec<(u64, String)> = Vec::new();
    for journal in journals {
        lines.extend(journal.timeline());
    }
    lines.sort_by_key(|(at, _)| *at);
    let mut out = std::io::BufWriter::new(file);
    for (_, line) in lines {
        writeln!(out, "{line}").map_err(|e| timeline_error(path, &e))?;
    }
    out.flush().map_err(|e| timeline_error(path, &e))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use client::ApiKey;

    use super::*;
    use crate::lab::args::DEFAULT_SEED;
    use crate::lab::report::Narrator;

    /// The lab in real-time timing (2 s max.poll.interval, as against a cluster) on a broker
    /// that answers every SyncGroup `delay` late, on the paused clock: the plan as fitted to the
    /// broker (its poll interval and stall), and the checks of the verdict that failed.
    fn with_sync_group_late(delay: Duration) -> (Duration, Duration, Vec<String>) {
        let journals = Journals::default();
        let capture = tracing::Dispatch::new(Capture::new(journals.clone()));
        let rt = runtime(&Target::Embedded).unwrap();
        let mut plan = Plan::new(DEFAULT_SEED, &Target::Bootstrap("slow".into()));
        tracing::dispatcher::with_default(&capture, || {
            rt.block_on(async {
                let cluster = Cluster::slowed(ApiKey::SyncGroup, delay).await;
                let progress = Narrator::new().progress(6, "running the group");
                let ran: Result<Runs, LabError> = async {
                    fit_to_cluster(&cluster, &mut plan).await?;
                    Ok(scenarios(&cluster, &plan, &journals, Clock::start(), &progress).await)
                }
                .await;
                cluster.close().await;
                let failed = verdict(&plan, ran.expect("the probe ran"));
                (plan.timing.max_poll_interval, plan.timing.stall, failed)
            })
        })
    }

    fn verdict(plan: &Plan, runs: Runs) -> Vec<String> {
        let (outcomes, eos) = runs.finished().expect("every run finished");
        let figures = figures::build(plan, &outcomes, eos.as_ref().ok()).unwrap();
        let checks = figures::verdict(&figures, eos.as_ref().err().map(String::as_str));
        checks.failed().map(str::to_string).collect()
    }

    /// One run fails: the error is that run's own, then names it and the runs that finished;
    /// the others' failures are named too. A stop asked for (Ctrl-C) is reported as it is.
    #[test]
    fn a_failed_run_is_named_with_its_own_reason_and_the_runs_that_finished() {
        let slow = || {
            LabError::TooSlow("the cooperative run (group billing-cooperative) was too slow".into())
        };
        let e = failure(
            &["baseline", "small-batch", "static", "dynamic", "eos"],
            vec![("cooperative", slow())],
        )
        .unwrap();
        assert_eq!(
            e.to_string(),
            "the cooperative run (group billing-cooperative) was too slow (the cooperative run; the \
             baseline, small-batch, static, dynamic and eos runs finished; --timeline FILE writes \
             what every run did)"
        );
        let e = failure(
            &["baseline"],
            vec![
                ("cooperative", slow()),
                ("static", LabError::Broker("x".into())),
                ("eos", LabError::Broker("y".into())),
            ],
        )
        .unwrap();
        assert!(
            e.to_string()
                .ends_with("(the cooperative run; the static and eos runs failed too; the baseline run finished; --timeline FILE writes what every run did)"),
            "{e}"
        );
        let stopped = failure(
            &[],
            vec![
                ("baseline", slow()),
                ("static", LabError::Interrupted(String::new())),
            ],
        );
        assert!(matches!(stopped, Some(LabError::Interrupted(_))));
        assert!(failure(&["baseline"], Vec::new()).is_none());
    }

    /// A run that failed has left its journal: the timeline still gets its events, beside
    /// those of the runs that finished.
    #[test]
    fn the_timeline_holds_every_run_that_started_finished_or_not() {
        let journals = Journals::default();
        let failed = Journal::new(
            "cooperative",
            "billing-cooperative",
            "payments-cooperative",
            Clock::start(),
        );
        journals.register(&failed);
        failed.record(None, journal::Event::ProcessingStarted { payments: 1200 });
        journals.unregister(&failed);
        let path =
            std::env::temp_dir().join(format!("rebalance-timeline-{}.jsonl", std::process::id()));
        let (file, path) = create_timeline(&path).unwrap();
        write_timeline(file, path, &journals.every()).unwrap();
        let written = std::fs::read_to_string(path).unwrap();
        std::fs::remove_file(path).unwrap();
        assert_eq!(
            written,
            "{\"t_ms\":0,\"scenario\":\"cooperative\",\"group\":\"billing-cooperative\",\
             \"topic\":\"payments-cooperative\",\"event\":\"processing_started\",\
             \"payments\":1200}\n"
        );
    }

    /// Both peers tried answer SyncGroup seconds late. Counting the rebalance against the
    /// 2 s poll interval, every member left the moment its SyncGroup answer came, and the runs
    /// never ended; now the client counts as Java's does, the lab measures the rebalance and
    /// fits its timing to it, and every check holds. The rebalance measured: the first member's
    /// heartbeat (300 ms) tells it, the SyncGroup answers come late, and the members' first fetch
    /// waits 100 ms on the empty probe topic. The poll interval (the rebalance timeout) is two
    /// of those, and the stall two more.
    #[test]
    fn a_cluster_answering_sync_group_seconds_late_still_reaches_the_verdict() {
        let none = Vec::<String>::new();
        // 2 x (0.3 s + 3 s + 0.1 s), and two more.
        let (interval, stall, failed) = with_sync_group_late(Duration::from_secs(3));
        assert_eq!(
            (interval, stall, failed),
            (ms(6_800), ms(13_600), none.clone())
        );
        // 2 x (0.3 s + 1.5 s + 0.1 s), and two more.
        let (interval, stall, failed) = with_sync_group_late(Duration::from_millis(1_500));
        assert_eq!((interval, stall, failed), (ms(3_800), ms(7_600), none));
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
}
