//! Lab `idempotence`: deduplication is per (producer, partition) (LABS.md, "Lab idempotence";
//! source 003, sections 5 and 10).
//!
//! Phases, each against the real broker (embedded, or `--bootstrap`) through our client:
//! payments sent while the producer loses acknowledgements, without idempotence and with it;
//! then where the guarantee ends: an application's re-sends after a real CreatePartitions, a
//! relay whose restarted instances get new producer ids, and a zombie writer without fencing
//! and with a transactional id's epoch. Every duplicate is counted by reading the topic back.
//!
//! Acknowledgements are lost on the client side ([`client::AckLoss`]), so the lab causes the
//! failure against any broker, a real Kafka cluster included.
//!
//! - `story`: the lab as a trainer tells it, phase by phase (opening, question, run,
//!   evidence), and the summary; `evidence`: how each phase's evidence is laid out.
//! - `lost_acks`, `resize`, `restart`, `zombie`: what each phase causes and measures;
//!   `copies`: counting copies in a topic read back; `plan`: flags and their checks;
//!   `figures`: the JSON figures and the verdict.

mod copies;
mod evidence;
mod figures;
mod lost_acks;
mod plan;
mod resize;
mod restart;
mod story;
mod zombie;

use std::time::Duration;

use client::{AckLoss, Producer, ProducerConfig, ProducerIdAndEpoch, RetryPolicy};

use crate::lab::report::{LabReport, SkippedPhase};
use crate::lab::target::{self, broker_error, Cluster};
use crate::lab::{Lab, LabContext, LabError};
use figures::Figures;
pub use plan::IdempotenceArgs;
use plan::Plan;

pub struct Idempotence;

const EXPECTED: &str =
    "lost acknowledgements duplicate records unless the producer is idempotent (Kafka's default \
     since 3.0); idempotence only deduplicates a producer's own retries per (producer, \
     partition): a record the application or a restarted producer sends again is a new record, \
     after a partition change possibly in another partition than its first copy, and only a \
     transactional id's epoch fences a zombie writer";

impl Lab for Idempotence {
    const NAME: &'static str = "idempotence";
    const SUMMARY: &'static str =
        "Lost acks and retries: duplicates, the idempotent producer, and where its dedup ends";
    type Args = IdempotenceArgs;

    fn run(args: &IdempotenceArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
        let plan = Plan::new(args)?;
        let runtime = target::runtime()?;
        let cluster = runtime.block_on(Cluster::open(&ctx.target, &ctx.stop, Self::NAME))?;
        let runs = runtime.block_on(cluster.until_stopped(story::phases(&cluster, &plan, ctx)));
        // Cleanup happens whatever the phases did, so a failed run leaves nothing on a cluster.
        runtime.block_on(cluster.close());
        let runs = runs?;
        let figures = Figures::new(&runs);
        let skips = runs.skips();
        let skipped: Vec<SkippedPhase> = [
            (story::IDEMPOTENT_TITLE, skips.idempotent),
            (story::RESIZE_TITLE, skips.resize),
            (story::RESTART_TITLE, skips.restart),
            (story::ZOMBIE_TITLE, skips.zombie),
        ]
        .into_iter()
        .filter_map(|(phase, reason)| {
            reason.map(|reason| SkippedPhase {
                phase: phase.to_string(),
                reason: reason.to_string(),
            })
        })
        .collect();
        let checks = figures::verdict(&figures, &skips);
        let n = &mut ctx.narrator;
        n.summary(&story::summary(&figures, &skips));
        let report = LabReport::new(Self::NAME, EXPECTED.to_string(), checks.shown(), &figures)?
            .skipping(skipped);
        n.verdict(&report, &checks);
        Ok(report)
    }
}

/// The lab's producers: no linger (each record is its own request, so one lost acknowledgement
/// is one record), and short backoffs, so that a dozen retries cost milliseconds, not seconds.
fn producer_config(idempotent: bool, lose_acks: Option<AckLoss>) -> ProducerConfig {
    ProducerConfig {
        enable_idempotence: idempotent,
        linger: Duration::ZERO,
        retry: RetryPolicy {
            retries: 10,
            backoff: Duration::from_millis(10),
            backoff_max: Duration::from_millis(200),
        },
        lose_acks,
        ..target::producer_config()
    }
}

/// Starts a producer and asks for its producer id (`None` when it is not idempotent); a failure
/// of either is one line saying `what` was being done.
async fn start(
    cluster: &Cluster,
    config: ProducerConfig,
    what: &str,
) -> Result<(Producer, Option<ProducerIdAndEpoch>), LabError> {
    let producer =
        Producer::new(cluster.client().clone(), config).map_err(|e| broker_error(what, &e))?;
    let id = producer
        .producer_id()
        .await
        .map_err(|e| broker_error(what, &e))?;
    Ok((producer, id))
}

/// [`start`] for an idempotent producer, which has an id.
async fn start_idempotent(
    cluster: &Cluster,
    config: ProducerConfig,
    what: &str,
) -> Result<(Producer, ProducerIdAndEpoch), LabError> {
    let (producer, id) = start(cluster, config, what).await?;
    let id = id.ok_or_else(|| LabError::Internal("an idempotent producer without an id".into()))?;
    Ok((producer, id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::report::Narrator;
    use crate::lab::stop::Stop;
    use crate::lab::Target;
    use client::ApiKey;

    /// A broker that answers every produce a minute late: phase 1 (its two producers) ends at its
    /// deadline, derived from their requests, with one line naming the phase and how far it got
    /// (paused clock).
    #[tokio::test(start_paused = true)]
    async fn a_stuck_phase_ends_at_its_deadline_and_says_where() {
        let mut ctx = LabContext {
            seed: 5,
            target: Target::Embedded,
            narrator: Narrator::new(),
            stop: Stop::never(),
        };
        let plan = Plan::new(&IdempotenceArgs {
            records: 2,
            lost_acks: 0,
            partitions: 1,
            resends: 0,
            restarts: 1,
            accounts: 1,
        })
        .unwrap();
        let cluster = Cluster::slowed(ApiKey::Produce, Duration::from_secs(60)).await;
        let started = tokio::time::Instant::now();
        let ran = story::phases(&cluster, &plan, &mut ctx).await;
        crate::lab::deadline::assert_too_slow(
            ran,
            started.elapsed(),
            Duration::from_secs(22),
            "phase 1 (Lost acknowledgements, no idempotence) was too slow: not done within 22 s \
             (12 round trips x 1 s + 4 records x 25 µs + 10 s); it was sending payments, 0 of 4 \
             done. Is the broker overloaded or slowed down? A smaller run (fewer records) needs \
             less time",
        );
        cluster.close().await;
    }
}
