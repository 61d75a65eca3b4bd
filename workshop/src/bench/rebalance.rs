//! `rebalance`: ten members join a brand-new group at once (performance.md C.2 case (a)), on a
//! broker whose initial rebalance delay is 0; the figure is the time from the members' first
//! poll to the moment the last of them holds its share of a complete assignment (ten partitions,
//! one each, range assignor, heartbeat 100 ms). Each member has a client of its own, as members
//! in separate processes would; connecting is done before the clock starts.
//!
//! The moment a member holds its partitions is taken inside its rebalance listener, so the time
//! its next fetch takes does not count. The ceiling is the raw ping-pong round trip: the ratio
//! says how many bare round trips the whole rebalance costs (C.3 reckons ~20 requests).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use client::{GroupConfig, GroupConsumer, RebalanceListener, TopicPartition};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::cluster::{with_target, Cluster};
use super::report::{Better, Ceiling, Figure, Goal};
use super::stats::Runs;
use super::{Bench, BenchError, Plan};

const MEMBERS: usize = 10;
static GROUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub async fn run(bench: &mut Bench) -> Result<(), BenchError> {
    let mut cluster = Cluster::start(&bench.plan).await?;
    let raw = bench
        .raw
        .ping_pong(&bench.plan, &mut bench.reporter)
        .await?;
    let topic = cluster
        .create_topic("rebalance", MEMBERS as i32, &[])
        .await?;
    cluster.reset_usage();
    let mut runs = Runs::default();
    let mut result = Ok(());
    for counts in bench.plan.schedule() {
        match join_new_group(&cluster, &topic, &bench.plan).await {
            Ok(took) if counts => runs.push(took.as_secs_f64() * 1e3),
            Ok(_) => {}
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    cluster.delete_topic(&topic).await;
    result?;
    let mut figure = Figure::new("rebalance", "new group of 10, first poll to assigned", "ms");
    figure.better = Better::Lower;
    figure.params = with_target(
        json!({
            "members": MEMBERS,
            "partitions": MEMBERS,
            "assignor": "range",
            "heartbeat_ms": 100,
            "initial_rebalance_delay_ms": 0,
        }),
        &bench.plan,
    );
    figure.runs = runs;
    figure.ceiling = Some(Ceiling {
        name: "raw ping-pong 64 B p50".into(),
        value: raw.p50_us / 1e3,
        unit: "ms",
    });
    figure.broker = cluster.usage_since_last();
    figure.goal = Some(Goal::at_most(figure.median(), 10.0, "ms"));
    bench.reporter.emit(&figure);
    Ok(())
}

/// Reports each member's partition changes, stamped when they happen.
struct Stamp {
    member: usize,
    events: mpsc::UnboundedSender<(usize, Instant, Change)>,
}

enum Change {
    Add(Vec<TopicPartition>),
    Remove(Vec<TopicPartition>),
}

impl RebalanceListener for Stamp {
    fn on_partitions_revoked(&mut self, revoked: &[TopicPartition]) -> Vec<(TopicPartition, i64)> {
        let change = Change::Remove(revoked.to_vec());
        let _ = self.events.send((self.member, Instant::now(), change));
        Vec::new()
    }

    fn on_partitions_assigned(&mut self, assigned: &[TopicPartition]) {
        let change = Change::Add(assigned.to_vec());
        let _ = self.events.send((self.member, Instant::now(), change));
    }

    fn on_partitions_lost(&mut self, lost: &[TopicPartition]) {
        let change = Change::Remove(lost.to_vec());
        let _ = self.events.send((self.member, Instant::now(), change));
    }
}

/// True when every member owns exactly one partition and together they own all of them.
fn complete(owned: &[BTreeSet<TopicPartition>]) -> bool {
    let all: BTreeSet<&TopicPartition> = owned.iter().flatten().collect();
    owned.iter().all(|o| o.len() == 1) && all.len() == owned.len()
}

async fn join_new_group(
    cluster: &Cluster,
    topic: &str,
    plan: &Plan,
) -> Result<Duration, BenchError> {
    let group = format!(
        "bench-group-{}-{}",
        std::process::id(),
        GROUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let (events, mut changes) = mpsc::unbounded_channel();
    let (stop, stopped) = watch::channel(false);
    let mut members = Vec::with_capacity(MEMBERS);
    for member in 0..MEMBERS {
        let mut config = GroupConfig::new(&group)
            .assignors_named(&["range"])
            .map_err(|e| BenchError::new(e.to_string()))?;
        config.heartbeat_interval = Duration::from_millis(100);
        config.session_timeout = Duration::from_secs(10);
        config.max_poll_interval = Duration::from_secs(30);
        config.auto_commit = false;
        // Polls come back quickly once assigned, so each member soon sees a stop.
        config.consumer.max_wait = Duration::from_millis(20);
        let mut consumer = GroupConsumer::new(cluster.client().await?, config)
            .map_err(|e| BenchError::new(e.to_string()))?;
        consumer
            .subscribe([topic])
            .map_err(|e| BenchError::new(e.to_string()))?;
        consumer.set_listener(Stamp {
            member,
            events: events.clone(),
        });
        members.push(consumer);
    }
    let started = Instant::now();
    let tasks: Vec<_> = members
        .into_iter()
        .map(|member| tokio::spawn(poll_until_stopped(member, stopped.clone())))
        .collect();
    let mut owned = vec![BTreeSet::new(); MEMBERS];
    let waited = tokio::time::timeout(plan.deadline, async {
        while let Some((member, at, change)) = changes.recv().await {
            match change {
                Change::Add(tps) => owned[member].extend(tps),
                Change::Remove(tps) => tps.iter().for_each(|tp| {
                    owned[member].remove(tp);
                }),
            }
            if complete(&owned) {
                return Some(at);
            }
        }
        None
    })
    .await;
    let _ = stop.send(true);
    let mut failure = None;
    for task in tasks {
        match tokio::time::timeout(plan.deadline, task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => failure = failure.or(Some(e)),
            Ok(Err(e)) => failure = failure.or(Some(format!("member task: {e}"))),
            Err(_) => failure = failure.or(Some("a member did not stop".to_string())),
        }
    }
    match waited {
        Ok(Some(at)) => Ok(at - started),
        _ => Err(BenchError::new(match failure {
            Some(why) => format!("the group was not assigned: {why}"),
            None => format!(
                "the group of {MEMBERS} was not assigned within {:?}",
                plan.deadline
            ),
        })),
    }
}

async fn poll_until_stopped(
    mut member: GroupConsumer,
    mut stopped: watch::Receiver<bool>,
) -> Result<(), String> {
    while !*stopped.borrow() {
        tokio::select! {
            polled = member.poll() => { polled.map_err(|e| format!("poll: {e}"))?; }
            _ = stopped.changed() => break,
        }
    }
    member.close().await.map_err(|e| format!("close: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_means_one_each_and_all_covered() {
        let tp = |p| TopicPartition::new("t", p);
        let one_each: Vec<BTreeSet<_>> = (0..3).map(|p| BTreeSet::from([tp(p)])).collect();
        assert!(complete(&one_each));
        let twice = vec![
            BTreeSet::from([tp(0)]),
            BTreeSet::from([tp(0)]),
            BTreeSet::from([tp(1)]),
        ];
        assert!(!complete(&twice));
        let missing = vec![BTreeSet::from([tp(0), tp(1)]), BTreeSet::new()];
        assert!(!complete(&missing));
    }
}
