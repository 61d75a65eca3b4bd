//! How long the cluster takes to rebalance a group, measured before a lab relies on it.
//!
//! A lab whose incident must outlast a rebalance (lab rebalance's stall: the group has to settle
//! without the stalled member before it comes back) cannot assume a fast broker: a cluster may
//! answer SyncGroup seconds late, or run other brokers' group coordinators. So it measures: a
//! member joins a group of its own (the first join, which may wait out
//! `group.initial.rebalance.delay.ms`, is not counted), a second one joins, and the time until
//! both share a new generation, each owning one partition, is the cluster's rebalance: the first
//! member learns of it from a heartbeat, rejoins, and both go through JoinGroup and SyncGroup,
//! as the members of any rebalance do.

use std::time::Duration;

use client::{GroupConfig, GroupConsumer, Record, TopicPartition};
use tokio::time::Instant;

use super::members::{Members, View};
use crate::lab::deadline::{Deadline, Work};
use crate::lab::target::Cluster;
use crate::lab::LabError;

/// The probe's topic and group, as the lab calls them (a cluster suffixes them, and the lab's
/// cleanup deletes them).
const PROBE: &str = "rebalance-probe";

/// Measures one rebalance of a group of two on `cluster`; `config(group)` is the members'
/// configuration, the lab's own, so heartbeats and timeouts are those the lab will run with.
pub async fn measure(
    cluster: &Cluster,
    config: impl Fn(&str) -> GroupConfig,
) -> Result<Duration, LabError> {
    let topic = cluster.create_topic(PROBE, 2).await?;
    let group = cluster.group(PROBE);
    let deadline = Deadline::start(
        format!("measuring how long group {group} takes to rebalance"),
        Work {
            round_trips: 4,
            rebalances: 2,
            ..Work::default()
        },
    );
    let mut members: Members<()> = Members::new();
    let measured = async {
        join(cluster, &mut members, &config(&group), &topic)?;
        members
            .wait(|views| settled(views, 2))
            .await
            .map_err(member_failed)?;
        let started = Instant::now();
        join(cluster, &mut members, &config(&group), &topic)?;
        members
            .wait(|views| settled(views, 1))
            .await
            .map_err(member_failed)?;
        Ok(started.elapsed())
    };
    let result = deadline
        .wait("waiting for the members to share a generation", measured)
        .await;
    members.leave().await;
    result
}

fn join(
    cluster: &Cluster,
    members: &mut Members<()>,
    config: &GroupConfig,
    topic: &str,
) -> Result<(), LabError> {
    let mut consumer = GroupConsumer::new(cluster.client().clone(), config.clone())
        .map_err(|e| LabError::Internal(format!("the probe's member: {e}")))?;
    consumer
        .subscribe([topic])
        .map_err(|e| LabError::Internal(format!("the probe's subscription: {e}")))?;
    let name = format!("{PROBE}-{}", members.count() + 1);
    members.add(name, consumer, ignore);
    Ok(())
}

fn ignore(_: &TopicPartition, _: &Record) {}

fn member_failed(why: String) -> LabError {
    LabError::Broker(format!(
        "a member of the rebalance probe stopped: {why}; check that the cluster runs consumer \
         groups"
    ))
}

/// Every member in one generation, each owning `each` partitions.
fn settled(views: &[View<()>], each: usize) -> Option<()> {
    let generation = views.first()?.generation;
    let all = views
        .iter()
        .all(|v| generation >= 0 && v.generation == generation && v.owned.len() == each);
    all.then_some(())
}
