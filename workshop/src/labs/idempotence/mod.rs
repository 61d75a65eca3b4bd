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
//! - `plan`: flags and their checks; `copies`: counting copies in a topic read back;
//!   `lost_acks`, `resize`, `restart`, `zombie`: the phases; `figures`: the JSON figures and
//!   the verdict; `story`: the narration.

mod copies;
mod figures;
mod lost_acks;
mod plan;
mod resize;
mod restart;
mod story;
mod zombie;

use std::time::Duration;

use client::{AckLoss, ApiKey, ProducerConfig, RetryPolicy};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::lab::report::{LabReport, Narrator, SkippedPhase};
use crate::lab::target::{self, Cluster};
use crate::lab::{Lab, LabContext, LabError};
use figures::{Figures, Runs, Zombies};
use lost_acks::LossRun;
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
        let runs = runtime.block_on(cluster.until_stopped(phases(&cluster, &plan, ctx)));
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

async fn phases(cluster: &Cluster, plan: &Plan, ctx: &mut LabContext) -> Result<Runs, LabError> {
    let n = &mut ctx.narrator;
    story::intro(n, Idempotence::NAME, EXPECTED, &cluster.describe());
    // Every random choice comes from the seed: which acknowledgements are lost (the same ones
    // in phases 1 and 2), which orders are re-sent, where the relay dies.
    let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
    let loss_seed: u64 = rng.gen();

    // Every phase but the first needs a producer id, and so does phase 1's producer on Kafka's
    // defaults; a cluster without InitProducerId runs phase 1 without it.
    let no_ids = cluster.lacks_producer_ids().await?;
    let records = u64::from(plan.records);
    story::lost_acks_opening(n, plan, &cluster.name("payments"));
    let runs = if no_ids.is_some() { 1 } else { 2 };
    let progress = n.progress(records * runs, "sending payments");
    let deadline = n.deadline(plan.sends(runs, plan.payments()));
    let plain = deadline
        .run(
            &progress,
            lost_acks::run(cluster, plan, false, loss_seed, &progress),
        )
        .await;
    let defaults = match (&plain, &no_ids) {
        (Ok(_), None) => {
            let again = lost_acks::run_on_defaults(cluster, plan, loss_seed, &progress);
            Some(deadline.run(&progress, again).await)
        }
        _ => None,
    };
    progress.finish();
    let plain = plain?;
    let defaults = defaults.transpose()?;
    story::lost_acks_evidence(n, &plain, &figures::loss_rows(&plain));
    story::on_defaults(n, defaults.as_ref(), no_ids.as_deref());

    story::idempotent_opening(
        n,
        plan,
        &cluster.name("payments-idempotent"),
        no_ids.as_deref(),
    );
    let (idempotent, broker_side) = match &no_ids {
        Some(reason) => (Err(reason.clone()), None),
        None => {
            let (run, broker_side) = idempotent_phase(cluster, plan, loss_seed, n).await?;
            (Ok(run), broker_side)
        }
    };

    let lacking = match &no_ids {
        Some(reason) => Some(reason.clone()),
        None => cluster.lacks(ApiKey::CreatePartitions).await?,
    };
    story::resize_opening(n, plan, &cluster.name("orders"), lacking.as_deref());
    let chosen = resize::choose_resends(plan, &mut rng);
    let resize = match lacking {
        Some(reason) => Err(reason),
        None => {
            let progress = n.progress(records, "sending orders");
            // The orders, the re-sends, and the partition change with its metadata.
            let mut work = plan.sends(1, records + u64::from(plan.resends));
            work.round_trips += 2;
            let deadline = n.deadline(work);
            let resize = deadline
                .run(&progress, resize::run(cluster, plan, chosen, &progress))
                .await;
            progress.finish();
            let resize = resize?;
            story::resize_evidence(n, &resize, &figures::resize_rows(&resize));
            Ok(resize)
        }
    };

    story::restart_opening(n, plan, &cluster.name("events"), no_ids.as_deref());
    let restart = match &no_ids {
        Some(reason) => Err(reason.clone()),
        None => {
            let progress = n.progress(records, "relaying events");
            // Each instance starts with its own InitProducerId and re-sends the event it died on.
            let mut work = plan.sends(1, records + u64::from(plan.restarts));
            work.round_trips += u64::from(plan.restarts);
            let deadline = n.deadline(work);
            let restart = deadline
                .run(&progress, restart::run(cluster, plan, &mut rng, &progress))
                .await;
            progress.finish();
            let restart = restart?;
            story::restart_evidence(n, &restart, &figures::restart_rows(&restart));
            Ok(restart)
        }
    };

    let lacking = match &no_ids {
        Some(reason) => Some(reason.clone()),
        None => cluster.lacks_transactional_ids().await?,
    };
    story::zombie_opening(n, plan, lacking.as_deref());
    let zombie = match lacking {
        Some(reason) => Err(reason),
        None => {
            let deadline = n.deadline(plan.zombie_work());
            let writing = "writing balances as the zombie and its successor";
            let unfenced = deadline
                .wait(writing, zombie::run(cluster, plan, false))
                .await?;
            let fenced = deadline
                .wait(writing, zombie::run(cluster, plan, true))
                .await?;
            story::zombie_evidence(n, &unfenced, &fenced);
            Ok(Zombies { unfenced, fenced })
        }
    };

    Ok(Runs {
        seed: ctx.seed,
        partitions: plan.partitions,
        plain,
        defaults,
        idempotent,
        broker_side,
        resize,
        restart,
        zombie,
    })
}

/// Phase 2: the payments of phase 1 through an idempotent producer, losing the same
/// acknowledgements; on the embedded broker once more with the broker dropping the answers.
async fn idempotent_phase(
    cluster: &Cluster,
    plan: &Plan,
    loss_seed: u64,
    n: &mut Narrator,
) -> Result<(LossRun, Option<LossRun>), LabError> {
    let progress = n.progress(u64::from(plan.records) * 2, "sending payments");
    // Once against any cluster, once more with the embedded broker dropping the answers.
    let deadline = n.deadline(plan.sends(2, plan.payments()));
    let idempotent = deadline
        .run(
            &progress,
            lost_acks::run(cluster, plan, true, loss_seed, &progress),
        )
        .await;
    let broker_side = match idempotent {
        Ok(_) => {
            let again = lost_acks::run_broker_side(cluster, plan, loss_seed, &progress);
            deadline.run(&progress, again).await
        }
        Err(_) => Ok(None),
    };
    progress.finish();
    let (idempotent, broker_side) = (idempotent?, broker_side?);
    story::lost_acks_evidence(n, &idempotent, &figures::loss_rows(&idempotent));
    story::broker_side(n, plan, broker_side.as_ref());
    Ok((idempotent, broker_side))
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

/// A producer error the lab did not cause on purpose, as one line.
fn send_error(what: &str, err: &client::Error) -> LabError {
    target::broker_error(what, err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::stop::Stop;
    use crate::lab::Target;
    use broker::faults::Fault;

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
        let cluster = Cluster::open(&ctx.target, &ctx.stop, "test").await.unwrap();
        cluster.embedded().unwrap().faults().add(Fault::Delay {
            api: Some(ApiKey::Produce),
            delay: Duration::from_secs(60),
        });
        let started = tokio::time::Instant::now();
        let err = match phases(&cluster, &plan, &mut ctx).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("phase 1 finished against a broker that does not answer"),
        };
        // The deadline starts with the phase, a moment after the broker (its first timers).
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_secs(22) && elapsed < Duration::from_secs(23),
            "{elapsed:?}"
        );
        assert_eq!(
            err,
            "phase 1 (Lost acknowledgements, no idempotence) was too slow: not done within 22 s \
             (12 round trips x 1 s + 4 records x 25 µs + 10 s); it was sending payments, 0 of 4 \
             done. Is the broker overloaded or slowed down? A smaller run (fewer records) needs \
             less time"
        );
        cluster.close().await;
    }
}
