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
//! - [`store`], [`movement`], [`events`], [`traffic`]: library code with its own tests. The
//!   ordering checker is the client library's ([`client::check`]), which `client check order`
//!   uses too.
//! - `plan`: flags; `pace`: the rounds; `group`: the consumer group's members; `lag`: the
//!   kafka-consumer-groups view; `run`: one scenario end to end; `figures`: JSON and verdict;
//!   `story`: narration.

pub mod events;
mod figures;
mod group;
mod lag;
pub mod movement;
mod pace;
mod plan;
mod run;
pub mod store;
mod story;
pub mod traffic;

use std::time::Duration;

use client::{ClientConfig, Error as ClientError};

use crate::lab::{Lab, LabContext, LabError};
use crate::report::{LabReport, Narrator};
use crate::target::{broker_error, runtime, Cluster};
use events::order_key;
use figures::{Figures, Fixes, MigrationFigures, Scenario, Shrink};
use movement::Movement;
pub use plan::PartitionsArgs;
use plan::Plan;
use run::{Change, Env, Outcome, Run, Spec};
use traffic::{Traffic, FEATURED_ORDER};

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
        n.intro(Self::NAME, &expected);
        let rt = runtime()?;
        let cluster = rt.block_on(Cluster::open(&ctx.target, &ctx.stop, Self::NAME))?;
        n.say(&format!("Running against {}.", cluster.describe()));
        let measured =
            rt.block_on(cluster.until_stopped(phases(&cluster, &plan, &traffic, ctx.seed, n)));
        rt.block_on(cluster.close());
        let figures = measured?;

        let checks = figures::verdict(&figures);
        n.summary(&story::summary(&plan, &figures));
        let report = LabReport::new(Self::NAME, expected, checks.shown(), &figures)?;
        n.verdict(&report, &checks);
        Ok(report)
    }
}

/// The failure, both fixes and the refusal to shrink, narrated as they happen.
async fn phases(
    cluster: &Cluster,
    plan: &Plan,
    traffic: &Traffic,
    seed: u64,
    n: &mut Narrator,
) -> Result<Figures, LabError> {
    let mut service = ClientConfig::new(cluster.addr());
    service.client_id = GROUP.to_string();
    service.metadata_max_age = METADATA_MAX_AGE;
    let env = Env {
        cluster,
        service,
        tail: n.tail(),
    };
    let rounds = estimated_rounds(plan, traffic);

    // The failure: 12 partitions, a backlog, CreatePartitions to 24.
    story::backlog_opening(n, plan, &cluster.name(TOPIC), traffic.orders());
    let spec = Spec {
        topic: TOPIC.to_string(),
        partitions: plan.before,
        group: GROUP.to_string(),
        change: Change::Grow { to: plan.after },
    };
    let mut run = Run::start(&env, plan, spec, traffic).await?;
    let progress = n.progress(rounds / 2, "applying orders, round by round");
    let lag = run.until_change(&progress).await?.to_vec();
    progress.finish();
    story::backlog_evidence(n, plan, run.featured_written(), &lag);

    story::increase_opening(n, run.topic(), plan, METADATA_MAX_AGE.as_millis(), &lag);
    let progress = n.progress(1, "the increase");
    run.change(&progress).await?;
    progress.finish();
    story::increase_evidence(
        n,
        plan,
        run.featured_written(),
        run.assignment_after(),
        &run.featured_log(),
        (run.featured_overtaken(), run.featured_version()),
    );

    story::count_opening(n, plan);
    let progress = n.progress(rounds / 2, "the rest of the traffic");
    run.after_change(&progress).await?;
    progress.finish();
    let failure = run.finish().await?;
    let movement =
        Movement::count(traffic.keys(), plan.before, plan.after).map_err(LabError::Internal)?;
    story::count_evidence(n, plan, &failure, &movement, &lag);

    // Fix 1: enough partitions from the start.
    let provisioned_topic = format!("{TOPIC}-{}", plan.provisioned);
    story::provisioned_opening(n, plan, &cluster.name(&provisioned_topic));
    let provisioned = scenario(
        &env,
        plan,
        traffic,
        n,
        Spec {
            topic: provisioned_topic,
            partitions: plan.provisioned,
            group: format!("{GROUP}-{}", plan.provisioned),
            change: Change::Nothing,
        },
    )
    .await?;
    story::provisioned_evidence(n, plan, &provisioned, &failure);

    // Fix 2: a new topic, drained before keys switch.
    let (old, new) = (format!("{TOPIC}-v1"), format!("{TOPIC}-v2"));
    story::migration_opening(n, plan, &cluster.name(&old), &cluster.name(&new));
    let migration = scenario(
        &env,
        plan,
        traffic,
        n,
        Spec {
            topic: old,
            partitions: plan.before,
            group: format!("{GROUP}-v1"),
            change: Change::Migrate {
                topic: new,
                partitions: plan.after,
            },
        },
    )
    .await?;
    story::migration_evidence(n, &migration);

    // Kafka cannot shrink.
    let shrink = shrink(cluster, &failure.spec.topic, plan).await?;
    story::shrink_opening(n, &shrink);
    story::shrink_evidence(n, &shrink);

    Ok(figures(
        seed,
        cluster,
        plan,
        traffic,
        movement,
        &failure,
        &provisioned,
        &migration,
        shrink,
    ))
}

/// A scenario that needs no narration between its steps.
async fn scenario(
    env: &Env<'_>,
    plan: &Plan,
    traffic: &Traffic,
    n: &Narrator,
    spec: Spec,
) -> Result<Outcome, LabError> {
    let progress = n.progress(
        estimated_rounds(plan, traffic),
        "applying orders, round by round",
    );
    let mut run = Run::start(env, plan, spec, traffic).await?;
    run.until_change(&progress).await?;
    run.change(&progress).await?;
    run.after_change(&progress).await?;
    progress.finish();
    run.finish().await
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

/// Rounds of one scenario, roughly, for the progress bar: the traffic's rounds, then the
/// backlog drained at the larger count.
fn estimated_rounds(plan: &Plan, traffic: &Traffic) -> u64 {
    let events = traffic.events.len() as u64;
    let produce = events.div_ceil(u64::from(plan.rate));
    let backlog = events.saturating_sub(plan.throughput(plan.before) * produce / 2);
    produce + backlog / plan.throughput(plan.after).max(1)
}

#[allow(clippy::too_many_arguments)]
fn figures(
    seed: u64,
    cluster: &Cluster,
    plan: &Plan,
    traffic: &Traffic,
    movement: Movement,
    failure: &Outcome,
    provisioned: &Outcome,
    migration: &Outcome,
    shrink: Shrink,
) -> Figures {
    let (partition_before, partition_after) = Figures::key_partitions(failure);
    let first = failure.seen.first();
    let fixes = Fixes {
        provisioned: Scenario::of(provisioned),
        migration: Scenario::of(migration),
        migration_steps: migration.migration.as_ref().map(|m| MigrationFigures {
            to_topic: m.topic.clone(),
            to_partitions: m.partitions,
            routing_version: m.routing_version,
            blocked_rounds: m.blocked_rounds,
            held_events: m.held_events,
            old_topic_max_lag_at_switch: crate::report::max_and_average(&m.old_topic_lag).0,
        }),
    };
    Figures {
        seed,
        target: match cluster.embedded() {
            Some(_) => "embedded".to_string(),
            None => cluster.addr().to_string(),
        },
        key: order_key(FEATURED_ORDER),
        partitions_before: plan.before,
        partitions_after: plan.after,
        partition_before,
        partition_after,
        keys_total: movement.keys_total,
        keys_moved: movement.keys_moved,
        violations: failure.seen.len(),
        violations_after_fix: fixes.provisioned.violations + fixes.migration.violations,
        first_violation: first.map(|s| s.line.clone()),
        first_violation_detail: first.map(|s| s.violation.to_string()),
        key_log: failure
            .featured_log
            .iter()
            .map(ToString::to_string)
            .collect(),
        first_order_id: *traffic.order_ids.start(),
        last_order_id: *traffic.order_ids.end(),
        events: traffic.events.len(),
        failure: Scenario::of(failure),
        fixes,
        shrink,
    }
}
