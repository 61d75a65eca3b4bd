//! Lab `partitions`: "cancel before create" (LABS.md, "Lab partitions"; source 003, section 3.4).
//!
//! A consumer group applies order events to an aggregate store that checks versions; the
//! consumers fall behind; the operator raises the topic from 12 to 24 partitions; the producer's
//! refreshed metadata sends order 8842's cancellation to partition 16, whose consumer applies it
//! before order 8842's creation is read from partition 4's backlog. The store logs source 003's
//! lines, the ordering checker counts every such violation over all keys, and the same traffic
//! then runs through the two fixes: enough partitions from the start, and a migration to a new
//! topic (block, drain, switch, with a routing version). Last, Kafka refuses to shrink.
//!
//! Everything goes through a real broker (embedded, or `--bootstrap`), our Kafka client's
//! producer, a real consumer group and a real CreatePartitions; the lab only paces when the
//! members' records are applied ([`pace`]), so a seed always gives the same figures.
//!
//! Read `story` first: the phases in the order a trainer tells them, each one's question, what
//! it causes on the broker and what it shows.
//!
//! - [`store`], [`movement`], [`events`], [`traffic`]: library code with its own tests. The
//!   ordering checker is the client library's ([`client::check`]), which `client check order`
//!   uses too.
//! - `plan`: flags; `pace`: the rounds; `group`: the consumer group's members (driven through
//!   [`crate::kit::members`]); `run`: one scenario end to end (the group's lag read as
//!   kafka-consumer-groups shows it, by [`crate::kit::offsets`]); `work`: each phase's
//!   deadline; `evidence`: what each phase shows; `figures`: JSON and verdict.

pub mod events;
mod evidence;
mod figures;
mod group;
pub mod movement;
mod pace;
mod plan;
mod run;
pub mod store;
mod story;
pub mod traffic;
mod work;

use std::time::Duration;

use client::{ApiKey, Error as ClientError};

use crate::lab::report::{LabReport, Narrator, SkippedPhase};
use crate::lab::target::{broker_error, runtime, Cluster};
use crate::lab::{Lab, LabContext, LabError};
use events::order_key;
use figures::{Figures, Fixes, MigrationFigures, Scenario, Shrink};
use movement::Movement;
pub use plan::PartitionsArgs;
use plan::Plan;
use run::{Env, Outcome, Run, Spec};
use traffic::{Traffic, FEATURED_ORDER};
use work::Phases;

/// The order service's `metadata.max.age.ms`: Kafka's is 5 minutes; short here so the producer
/// and the group see the new partitions within the lab's few seconds, by the same mechanism.
const METADATA_MAX_AGE: Duration = Duration::from_millis(250);

/// The lab's names; under `--bootstrap` the cluster suffixes them with the run's id.
const TOPIC: &str = "orders";
const GROUP: &str = "order-service";

pub struct Partitions;

impl Lab for Partitions {
    const NAME: &'static str = "partitions";
    const SUMMARY: &'static str =
        "Cancel before create: adding partitions to a live topic reorders a key's events; two fixes";
    type Args = PartitionsArgs;

    fn run(args: &PartitionsArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
        let plan = Plan::new(args)?;
        let traffic = Traffic::generate(plan.orders, plan.open, ctx.seed);
        let expected = figures::expected(plan.before, plan.after);
        let n = &mut ctx.narrator;
        // The cluster first: a run that cannot start prints its error alone.
        let rt = runtime()?;
        let cluster = rt.block_on(Cluster::open(&ctx.target, &ctx.stop, Self::NAME))?;
        n.intro(Self::NAME, &expected);
        n.say(&format!("Running against {}.", cluster.describe()));
        let measured =
            rt.block_on(cluster.until_stopped(story::phases(&cluster, &plan, &traffic, n)));
        let target = match cluster.embedded() {
            Some(_) => "embedded".to_string(),
            None => cluster.addr().to_string(),
        };
        rt.block_on(cluster.close());
        let ran = measured?;
        let figures = figures(ctx.seed, target, &plan, &traffic, &ran);

        let checks = figures::verdict(&figures);
        n.summary(&story::summary(&plan, &figures));
        let skipped = ran.lacking.map_or_else(Vec::new, |reason| {
            [story::INCREASE_TITLE, story::SHRINK_TITLE]
                .into_iter()
                .map(|phase| SkippedPhase {
                    phase: phase.to_string(),
                    reason: reason.clone(),
                })
                .collect()
        });
        let report =
            LabReport::new(Self::NAME, expected, checks.shown(), &figures)?.skipping(skipped);
        n.verdict(&report, &checks);
        Ok(report)
    }
}

/// What the phases measured, and why the cluster could not run the ones that need
/// CreatePartitions (the failure and the refusal to shrink), if it could not.
struct Ran {
    movement: Movement,
    failure: Option<Outcome>,
    provisioned: Outcome,
    migration: Outcome,
    shrink: Option<Shrink>,
    lacking: Option<String>,
}

/// A scenario that needs no narration between its steps, under its phase's deadline.
async fn scenario(
    env: &Env<'_>,
    work: &Phases<'_>,
    n: &Narrator,
    spec: Spec,
) -> Result<Outcome, LabError> {
    let label = "applying orders, round by round";
    n.step(
        work.scenario(&spec.change),
        work.rounds(),
        label,
        async |progress| {
            let mut run = Run::start(env, work.plan, spec, work.traffic).await?;
            run.until_change(progress).await?;
            run.change(progress).await?;
            run.after_change(progress).await?;
            run.finish().await
        },
    )
    .await
}

/// Why this cluster cannot add partitions to a topic, or `None` when it can: first its
/// ApiVersions, then the call itself on a scratch topic of one partition, since a broker may
/// list an API it refuses (a policy, a missing implementation). A refusal names the error.
async fn lacks_create_partitions(cluster: &Cluster) -> Result<Option<String>, LabError> {
    if let Some(reason) = cluster.lacks(ApiKey::CreatePartitions).await? {
        return Ok(Some(reason));
    }
    let probe = cluster.create_topic("partitions-probe", 1).await?;
    match cluster.admin().create_partitions(&probe, 2).await {
        Ok(()) => Ok(None),
        Err(ClientError::Server(e)) => Ok(Some(format!(
            "this cluster refused CreatePartitions on a scratch topic ({}{})",
            e.name(),
            e.message
                .as_ref()
                .map_or(String::new(), |m| format!(": {m}"))
        ))),
        Err(e) => Err(broker_error("adding a partition to a scratch topic", &e)),
    }
}

/// Asks the broker to take the topic back to its old count: Kafka answers INVALID_PARTITIONS.
async fn shrink(cluster: &Cluster, topic: &str, plan: &Plan) -> Result<Shrink, LabError> {
    let mut shrink = Shrink {
        topic: topic.to_string(),
        from: plan.after,
        to: plan.before,
        refused: false,
        error: None,
        code: None,
        message: None,
    };
    match cluster.admin().create_partitions(topic, plan.before).await {
        Ok(()) => {}
        Err(ClientError::Server(e)) => {
            // Kafka's answer to a count that is not an increase.
            shrink.refused = e.name() == "INVALID_PARTITIONS";
            shrink.error = Some(e.name());
            shrink.code = Some(e.code);
            shrink.message = e.message.clone();
        }
        Err(e) => return Err(broker_error(&format!("asking {topic} to shrink"), &e)),
    }
    Ok(shrink)
}

/// Every figure of the run, from what its phases measured; `target`: `embedded` or the
/// bootstrap address.
fn figures(seed: u64, target: String, plan: &Plan, traffic: &Traffic, ran: &Ran) -> Figures {
    let (failure, migration, movement) = (ran.failure.as_ref(), &ran.migration, ran.movement);
    let (partition_before, partition_after) = Figures::key_partitions(failure);
    let first = failure.and_then(|f| f.seen.first());
    let fixes = Fixes {
        provisioned: Scenario::of(&ran.provisioned),
        migration: Scenario::of(migration),
        migration_steps: migration.migration.as_ref().map(|m| MigrationFigures {
            to_topic: m.topic.clone(),
            to_partitions: m.partitions,
            routing_version: m.routing_version,
            blocked_rounds: m.blocked_rounds,
            held_events: m.held_events,
            old_topic_max_lag_at_switch: crate::lab::report::max_and_average(&m.old_topic_lag).0,
        }),
    };
    Figures {
        seed,
        target,
        key: order_key(FEATURED_ORDER),
        partitions_before: plan.before,
        partitions_after: plan.after,
        partition_before,
        partition_after,
        keys_total: movement.keys_total,
        keys_moved: movement.keys_moved,
        violations: failure.map(|f| f.seen.len()),
        skipped_with_latest: failure.map(|f| f.latest.as_ref().map_or(0, |l| l.skipped())),
        violations_after_fix: fixes.provisioned.violations + fixes.migration.violations,
        first_violation: first.map(|s| s.line.clone()),
        first_violation_detail: first.map(|s| s.violation.to_string()),
        key_log: failure.map_or_else(Vec::new, |f| {
            f.featured_log.iter().map(ToString::to_string).collect()
        }),
        first_order_id: *traffic.order_ids.start(),
        last_order_id: *traffic.order_ids.end(),
        events: traffic.events.len(),
        failure: failure.map(Scenario::of),
        fixes,
        shrink: ran.shrink.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A broker that answers every produce ten minutes late: phase 1 ends at its deadline,
    /// derived from its rounds and the group forming, with one line naming the phase and how
    /// far it got (paused clock).
    #[tokio::test(start_paused = true)]
    async fn a_stuck_phase_ends_at_its_deadline_and_says_where() {
        let plan = Plan::new(&PartitionsArgs {
            orders: 8,
            open: 2,
            partitions: 2,
            to: 4,
            provisioned: None,
            members: 2,
            rate: 6,
            capacity: 1,
        })
        .unwrap();
        let traffic = Traffic::generate(plan.orders, plan.open, 5);
        let cluster = Cluster::slowed(ApiKey::Produce, Duration::from_secs(600)).await;
        let started = tokio::time::Instant::now();
        let ran = story::phases(&cluster, &plan, &traffic, &mut Narrator::new()).await;
        // 56 events in 21 rounds; the 10 before the change move 30 of them, each produced and
        // consumed.
        crate::lab::deadline::assert_too_slow(
            ran,
            started.elapsed(),
            Duration::from_secs(55),
            "phase 1 (Consumers that cannot keep up) was too slow: not done within 55 s (30 round \
             trips x 1 s + 60 records x 25 µs + 1 rebalance x 15 s + 10 s); it was applying \
             orders, round by round, 0 of 10 done. Is the broker overloaded or slowed down? A \
             smaller run (fewer records) needs less time",
        );
        cluster.close().await;
    }
}
