//! `rebalance` (performance.md C.2), on a broker whose initial rebalance delay is 0, range
//! assignor, heartbeat 100 ms, each member with a client of its own as members in separate
//! processes would (connecting is done before any clock starts):
//! - (a) ten members join a brand-new group at once, ten partitions: from the members' first
//!   poll to the moment the last of them holds its share of a complete assignment;
//! - (b) an eleventh member joins the stable group of ten, eleven partitions: from its first
//!   poll until all eleven hold one partition each;
//! - (c) one of the eleven leaves (LeaveGroup on close): from the close until the ten left hold
//!   all eleven partitions again.
//!
//! In (b) and (c) the members already in the group learn of the rebalance from a heartbeat, so
//! C.3's goal is a heartbeat interval plus 10 ms. The moment a member holds its partitions is
//! taken inside its rebalance listener, so the time its next fetch takes does not count. The
//! ceiling is the raw ping-pong round trip: the ratio says how many bare round trips a
//! rebalance costs (C.3 reckons ~20 requests for (a)).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use client::{GroupConfig, GroupConsumer, RebalanceListener, TopicPartition};
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::cluster::{with_target, Cluster};
use super::raw::PingPong;
use super::report::{Better, Ceiling, Figure, Goal};
use super::stats::Runs;
use super::{Bench, BenchError, Plan};

/// Members of the new group in (a), and of the stable group in (b).
const MEMBERS: usize = 10;
const HEARTBEAT: Duration = Duration::from_millis(100);
static GROUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub async fn run(bench: &mut Bench) -> Result<(), BenchError> {
    let mut cluster = Cluster::start(&bench.plan).await?;
    let raw = bench
        .raw
        .ping_pong(&bench.plan, &mut bench.reporter)
        .await?;
    let new_group_topic = cluster
        .create_topic("rebalance", MEMBERS as i32, &[])
        .await?;
    let stable_group_topic = cluster
        .create_topic("rebalance", MEMBERS as i32 + 1, &[])
        .await?;
    cluster.reset_usage();
    let (mut joined_new, mut joined_stable, mut left) =
        (Runs::default(), Runs::default(), Runs::default());
    let mut result = Ok(());
    for counts in bench.plan.schedule() {
        let measured = async {
            let new = new_group(&cluster, &new_group_topic, &bench.plan).await?;
            let (join, leave) = join_and_leave(&cluster, &stable_group_topic, &bench.plan).await?;
            Ok::<_, BenchError>((new, join, leave))
        };
        match measured.await {
            Ok((new, join, leave)) if counts => {
                joined_new.push(ms(new));
                joined_stable.push(ms(join));
                left.push(ms(leave));
            }
            Ok(_) => {}
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    cluster.delete_topic(&new_group_topic).await;
    cluster.delete_topic(&stable_group_topic).await;
    result?;
    let broker = cluster.usage_since_last();
    // C.3: a new group within 10 ms; a stable group within a heartbeat interval plus 10 ms,
    // since its members learn of the rebalance from a heartbeat.
    let after_heartbeat_ms = HEARTBEAT.as_secs_f64() * 1e3 + 10.0;
    let cases = [
        (
            "new group of 10, first poll to assigned",
            "a",
            0,
            MEMBERS,
            joined_new,
            10.0,
        ),
        (
            "1 joins a stable group of 10, to all reassigned",
            "b",
            MEMBERS,
            MEMBERS + 1,
            joined_stable,
            after_heartbeat_ms,
        ),
        (
            "1 of 11 leaves, to the 10 left reassigned",
            "c",
            MEMBERS + 1,
            MEMBERS + 1,
            left,
            after_heartbeat_ms,
        ),
    ];
    for (label, case, members_before, partitions, runs, goal_ms) in cases {
        let mut figure = Figure::new("rebalance", label, "ms");
        figure.better = Better::Lower;
        figure.params = with_target(
            json!({
                "case": case,
                "members_before": members_before,
                "partitions": partitions,
                "assignor": "range",
                "heartbeat_ms": HEARTBEAT.as_millis() as u64,
                "initial_rebalance_delay_ms": 0,
            }),
            &bench.plan,
        );
        figure.runs = runs;
        figure.ceiling = Some(ping_pong_ceiling(&raw));
        figure.broker = broker.clone();
        figure.goal = Some(Goal::at_most(figure.median(), goal_ms, "ms"));
        bench.reporter.emit(&figure);
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ping_pong_ceiling(raw: &PingPong) -> Ceiling {
    Ceiling {
        name: "raw ping-pong 64 B p50".into(),
        value: raw.p50_us / 1e3,
        unit: "ms",
    }
}

/// (a): ten members join a new group at once.
async fn new_group(cluster: &Cluster, topic: &str, plan: &Plan) -> Result<Duration, BenchError> {
    let mut group = Group::new(cluster, topic, MEMBERS);
    let mut ready = Vec::with_capacity(MEMBERS);
    for _ in 0..MEMBERS {
        ready.push(group.member().await?);
    }
    let started = Instant::now();
    for member in ready {
        group.start(member);
    }
    let took = group.until_assigned(plan).await.map(|at| at - started);
    group.stop(took).await
}

/// (b) then (c): an eleventh member joins a stable group of ten, then one of them leaves.
async fn join_and_leave(
    cluster: &Cluster,
    topic: &str,
    plan: &Plan,
) -> Result<(Duration, Duration), BenchError> {
    let mut group = Group::new(cluster, topic, MEMBERS + 1);
    let measured = async {
        for _ in 0..MEMBERS {
            let member = group.member().await?;
            group.start(member);
        }
        group.until_assigned(plan).await?;
        let newcomer = group.member().await?;
        let joined = Instant::now();
        group.start(newcomer);
        let join = group.until_assigned(plan).await? - joined;
        let left = Instant::now();
        group.leave(0);
        let leave = group.until_assigned(plan).await? - left;
        Ok((join, leave))
    }
    .await;
    group.stop(measured).await
}

/// A member polling until told to stop, then closing.
type MemberTask = JoinHandle<Result<(), String>>;

/// The members of one group, each polling in a task of its own, and what each owns as its
/// listener reported it.
struct Group<'a> {
    cluster: &'a Cluster,
    topic: String,
    partitions: usize,
    name: String,
    events: mpsc::UnboundedSender<(usize, Instant, Change)>,
    changes: mpsc::UnboundedReceiver<(usize, Instant, Change)>,
    owned: Vec<BTreeSet<TopicPartition>>,
    /// Each member's stop signal and task; `None` once it was told to leave.
    running: Vec<Option<(watch::Sender<bool>, MemberTask)>>,
    /// Tasks of members that left, to be checked at the end.
    gone: Vec<MemberTask>,
}

impl<'a> Group<'a> {
    fn new(cluster: &'a Cluster, topic: &str, partitions: usize) -> Self {
        let (events, changes) = mpsc::unbounded_channel();
        Self {
            cluster,
            topic: topic.to_string(),
            partitions,
            name: format!(
                "bench-group-{}-{}",
                std::process::id(),
                GROUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
            events,
            changes,
            owned: Vec::new(),
            running: Vec::new(),
            gone: Vec::new(),
        }
    }

    /// A subscribed member, connected but not polling yet.
    async fn member(&mut self) -> Result<GroupConsumer, BenchError> {
        let failed = |e: client::Error| BenchError::new(e.to_string());
        let mut config = GroupConfig::new(&self.name)
            .assignors_named(&["range"])
            .map_err(failed)?;
        config.heartbeat_interval = HEARTBEAT;
        config.session_timeout = Duration::from_secs(10);
        config.max_poll_interval = Duration::from_secs(30);
        config.auto_commit = false;
        // Polls come back quickly once assigned, so each member soon sees a stop.
        config.consumer.max_wait = Duration::from_millis(20);
        let mut consumer =
            GroupConsumer::new(self.cluster.client().await?, config).map_err(failed)?;
        consumer.subscribe([self.topic.as_str()]).map_err(failed)?;
        Ok(consumer)
    }

    /// Starts a member made by [`member`](Self::member) polling; members are numbered in the
    /// order they start.
    fn start(&mut self, mut member: GroupConsumer) {
        member.set_listener(Stamp {
            member: self.owned.len(),
            events: self.events.clone(),
        });
        let (stop, stopped) = watch::channel(false);
        self.owned.push(BTreeSet::new());
        self.running.push(Some((
            stop,
            tokio::spawn(poll_until_stopped(member, stopped)),
        )));
    }

    /// Tells member `index` to leave the group (its close sends LeaveGroup).
    fn leave(&mut self, index: usize) {
        if let Some((stop, task)) = self.running.get_mut(index).and_then(Option::take) {
            let _ = stop.send(true);
            self.gone.push(task);
        }
    }

    /// Waits until the members still running hold every partition, each at least one and none
    /// twice, and those gone hold none; returns when that happened.
    async fn until_assigned(&mut self, plan: &Plan) -> Result<Instant, BenchError> {
        let partitions = self.partitions;
        let waited = tokio::time::timeout(plan.deadline, async {
            while let Some((member, at, change)) = self.changes.recv().await {
                let Some(owned) = self.owned.get_mut(member) else {
                    continue;
                };
                match change {
                    Change::Add(tps) => owned.extend(tps),
                    Change::Remove(tps) => tps.iter().for_each(|tp| {
                        owned.remove(tp);
                    }),
                }
                let live: Vec<bool> = self.running.iter().map(Option::is_some).collect();
                if complete(&self.owned, &live, partitions) {
                    return Some(at);
                }
            }
            None
        })
        .await;
        match waited {
            Ok(Some(at)) => Ok(at),
            _ => Err(BenchError::new(format!(
                "the group of {} was not assigned within {:?}",
                self.running.iter().flatten().count(),
                plan.deadline
            ))),
        }
    }

    /// Stops every member and passes `measured` on, or the first member failure if it failed.
    async fn stop<T>(mut self, measured: Result<T, BenchError>) -> Result<T, BenchError> {
        for index in 0..self.running.len() {
            self.leave(index);
        }
        let mut failure = None;
        for task in self.gone {
            match tokio::time::timeout(Duration::from_secs(10), task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => failure = failure.or(Some(e)),
                Ok(Err(e)) => failure = failure.or(Some(format!("member task: {e}"))),
                Err(_) => failure = failure.or(Some("a member did not stop".to_string())),
            }
        }
        match (measured, failure) {
            (Err(e), Some(why)) => Err(BenchError::new(format!("{e}: {why}"))),
            (measured, _) => measured,
        }
    }
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

/// True when the live members own `partitions` partitions between them, none twice, each live
/// member at least one, and members gone own nothing.
fn complete(owned: &[BTreeSet<TopicPartition>], live: &[bool], partitions: usize) -> bool {
    let mut all = BTreeSet::new();
    for (owns, live) in owned.iter().zip(live) {
        if *live == owns.is_empty() {
            return false;
        }
        for tp in owns {
            if !all.insert(tp) {
                return false;
            }
        }
    }
    all.len() == partitions
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
    fn complete_means_all_covered_once_by_the_live_members_only() {
        let tp = |p| TopicPartition::new("t", p);
        let one_each: Vec<BTreeSet<_>> = (0..3).map(|p| BTreeSet::from([tp(p)])).collect();
        assert!(complete(&one_each, &[true; 3], 3));
        assert!(!complete(&one_each, &[true; 3], 4), "a partition unowned");
        let twice = vec![
            BTreeSet::from([tp(0)]),
            BTreeSet::from([tp(0)]),
            BTreeSet::from([tp(1)]),
        ];
        assert!(!complete(&twice, &[true; 3], 2));
        let idle = vec![BTreeSet::from([tp(0), tp(1)]), BTreeSet::new()];
        assert!(!complete(&idle, &[true, true], 2), "a live member idle");
        assert!(complete(&idle, &[true, false], 2), "the idle one left");
        let leaver_still_owns = vec![BTreeSet::from([tp(0)]), BTreeSet::from([tp(1)])];
        assert!(!complete(&leaver_still_owns, &[true, false], 2));
    }
}
