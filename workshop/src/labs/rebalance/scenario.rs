//! One run of the group, end to end, against the lab's broker:
//!
//! 1. a topic of 12 partitions; members join one at a time, until all four share a generation
//!    and every partition has one owner (the joins of a real deployment rolling out);
//! 2. the members are held at a gate, the payments are produced, the gate opens: each member's
//!    first fetch finds its partitions' whole backlog, so its batches are the same every run;
//! 3. the members process and commit; the incident happens to one of them (the stall, or the
//!    restart); in a stall, the lag table is read while the member is still in the group, with
//!    what the members applied past each committed offset beside it;
//! 4. the run is over when every payment is applied and committed and the group is whole and
//!    stable again; then the members leave.
//!
//! Everything the members did is in the [`Outcome`]'s journal and stores.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::accounting;
use super::capture::Journals;
use super::eos::Transactional;
use super::journal::{Clock, Event, Journal, View};
use super::ledger::Stores;
use super::member::{self, Control, Setup};
use super::payments;
use super::plan::{Incident, Plan, Spec, MEMBERS, PARTITIONS};
use crate::kit::offsets::GroupOffsets;
use crate::lab::deadline::Deadline;
use crate::lab::report::LagRow;
use crate::lab::target::Cluster;
use crate::lab::LabError;

/// What one run left behind.
pub struct Outcome {
    pub spec: Spec,
    /// As named on the broker.
    pub topic: String,
    pub group: String,
    pub journal: Arc<Journal>,
    pub stores: Arc<Stores>,
    /// Per partition: the offset after the last payment.
    pub log_end: BTreeMap<i32, i64>,
    /// When the gate opened, and when the group had applied, committed and settled.
    pub started_ms: u64,
    pub settled_ms: u64,
    /// kafka-consumer-groups.sh's view in the middle of a stall; empty for a restart.
    pub lag_during: Vec<LagRow>,
    /// The same view once settled.
    pub lag_after: Vec<LagRow>,
}

/// Runs `spec`; its journal is registered with `journals` meanwhile, so the client's log lines
/// of its group reach it. With `transactional`, the members process in Kafka transactions.
pub async fn run(
    cluster: &Cluster,
    plan: &Plan,
    spec: &Spec,
    journals: &Journals,
    clock: Clock,
    transactional: Option<&Transactional>,
) -> Result<Outcome, LabError> {
    let topic = cluster.create_topic(&spec.topic, PARTITIONS).await?;
    let group = cluster.group(&spec.group);
    let journal = Journal::new(spec.kind.key(), &group, &topic, clock);
    journals.register(&journal);
    let outcome = drive(cluster, plan, spec, &journal, transactional).await;
    journals.unregister(&journal);
    outcome
}

async fn drive(
    cluster: &Cluster,
    plan: &Plan,
    spec: &Spec,
    journal: &Arc<Journal>,
    transactional: Option<&Transactional>,
) -> Result<Outcome, LabError> {
    let timing = &plan.timing;
    // The whole run under one deadline, from its work: against a cluster too slow for it, the
    // lab ends with a line naming the run and what it was waiting for.
    let deadline = Deadline::start(
        format!("the {} run (group {})", spec.kind.key(), journal.group),
        plan.work(spec),
    );
    let stores = Arc::new(Stores::new(PARTITIONS, timing.dedup_ttl));
    let mut members = Members::new();
    for (i, &name) in MEMBERS.iter().enumerate() {
        let config = Setup::group_config(spec, &journal.group, name, timing)
            .map_err(|e| LabError::Internal(format!("the members' configuration: {e}")))?;
        members.spawn(Setup {
            name,
            addr: cluster.addr().to_string(),
            topic: journal.topic.clone(),
            group: journal.group.clone(),
            config,
            incident: (spec.incident.member() == name).then(|| spec.incident.clone()),
            processing: timing.processing,
            journal: journal.clone(),
            stores: stores.clone(),
            transactional: transactional.cloned(),
            control: members.control.subscribe(),
        });
        let joined = &MEMBERS[..=i];
        let what = format!("{name} joining group {}", journal.group);
        wait_until(journal, &deadline, &what, |j| formed(&j.views(), joined)).await?;
    }

    members.control.send_replace(Control::Hold);
    wait_until(
        journal,
        &deadline,
        "the members stopping at the gate",
        |j| {
            let views = j.views();
            MEMBERS
                .iter()
                .all(|m| views.get(*m).is_some_and(|v| v.parked))
        },
    )
    .await?;
    let producing = payments::produce(cluster.client(), &journal.topic, &plan.payments);
    let log_end = deadline.wait("producing the payments", producing).await?;
    journal.record(
        None,
        Event::ProcessingStarted {
            payments: plan.payments.len(),
        },
    );
    let started_ms = journal.clock().ms();
    members.control.send_replace(Control::Run);

    // kafka-consumer-groups.sh --describe's view of the group, read twice.
    let offsets = GroupOffsets::new(cluster.client(), &journal.group);
    let lag_during = match spec.incident {
        Incident::Stall { member, .. } => {
            let what = format!("{member}'s stall");
            wait_until(journal, &deadline, &what, |j| {
                j.entries()
                    .iter()
                    .any(|e| matches!(e.event, Event::StallStarted { .. }))
            })
            .await?;
            // Into the stall, before the poll timeout: the member still owns its partitions.
            tokio::time::sleep(timing.lag_snapshot).await;
            let reading = offsets.lag_rows(&journal.topic, PARTITIONS);
            let mut rows = deadline.wait("reading the group's lag", reading).await?;
            add_processed(&mut rows, &stores);
            rows
        }
        Incident::Restart { .. } => Vec::new(),
    };

    let what = format!(
        "group {} applying and committing every payment, whole again",
        journal.group
    );
    wait_until(journal, &deadline, &what, |j| settled(j, &log_end)).await?;
    journal.record(None, Event::Settled);
    let settled_ms = journal.clock().ms();
    let reading = offsets.lag_rows(&journal.topic, PARTITIONS);
    let lag_after = deadline.wait("reading the group's lag", reading).await?;
    deadline.wait("the members leaving", members.stop()).await?;
    Ok(Outcome {
        spec: spec.clone(),
        topic: journal.topic.clone(),
        group: journal.group.clone(),
        journal: journal.clone(),
        stores,
        log_end,
        started_ms,
        settled_ms,
        lag_during,
        lag_after,
    })
}

/// The member tasks of one run; aborted if the run is dropped before [`Members::stop`].
struct Members {
    control: watch::Sender<Control>,
    tasks: Vec<JoinHandle<()>>,
}

impl Members {
    fn new() -> Members {
        Members {
            control: watch::Sender::new(Control::Run),
            tasks: Vec::new(),
        }
    }

    fn spawn(&mut self, setup: Setup) {
        self.tasks.push(tokio::spawn(member::run(setup)));
    }

    /// Tells every member to leave, and waits until they have.
    async fn stop(mut self) -> Result<(), LabError> {
        self.control.send_replace(Control::Stop);
        for task in std::mem::take(&mut self.tasks) {
            task.await
                .map_err(|e| LabError::Internal(format!("a member's task ended badly: {e}")))?;
        }
        Ok(())
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Waits until `ready` holds for the journal, re-checking on every change; fails on a
/// member's error, or at the run's deadline, saying where each member was.
async fn wait_until(
    journal: &Journal,
    deadline: &Deadline,
    what: &str,
    ready: impl Fn(&Journal) -> bool,
) -> Result<(), LabError> {
    let mut changes = journal.watch();
    let wait = async {
        loop {
            if let Some(failure) = journal.failure() {
                return Err(LabError::Broker(format!(
                    "{what}: a member stopped: {failure}"
                )));
            }
            if ready(journal) {
                return Ok(());
            }
            // The journal owns the sender, so this only ends with it.
            if changes.changed().await.is_err() {
                return Err(LabError::Internal(format!("{what}: the journal went away")));
            }
        }
    };
    let doing = || {
        format!(
            "waiting for {what} (members: {})",
            describe(&journal.views())
        )
    };
    deadline.within(doing, wait).await
}

/// `members` share one generation and own every partition exactly once, none of them away.
fn formed(views: &BTreeMap<String, View>, members: &[&str]) -> bool {
    let mut owned = BTreeSet::new();
    let mut generation = None;
    for member in members {
        let Some(v) = views.get(*member) else {
            return false;
        };
        if v.generation < 0 || v.partitions.is_empty() || v.away {
            return false;
        }
        if *generation.get_or_insert(v.generation) != v.generation {
            return false;
        }
        if !v.partitions.iter().all(|p| owned.insert(*p)) {
            return false;
        }
    }
    owned.len() == PARTITIONS as usize
}

/// The incident is over, the whole group formed again, and the group committed every
/// partition up to its log end.
fn settled(journal: &Journal, log_end: &BTreeMap<i32, i64>) -> bool {
    if !formed(&journal.views(), &MEMBERS) {
        return false;
    }
    let entries = journal.entries();
    let incident_over = entries
        .iter()
        .any(|e| matches!(e.event, Event::StallEnded | Event::Restarted));
    let committed = accounting::committed(&entries);
    incident_over
        && log_end
            .iter()
            .all(|(p, end)| committed.get(p).is_some_and(|c| c >= end))
}

fn describe(views: &BTreeMap<String, View>) -> String {
    let list: Vec<String> = views
        .iter()
        .map(|(m, v)| {
            format!(
                "{m} generation {} partitions {:?}{}{}",
                v.generation,
                v.partitions,
                if v.parked { " parked" } else { "" },
                if v.away { " away" } else { "" }
            )
        })
        .collect();
    if list.is_empty() {
        return "none has joined yet".to_string();
    }
    list.join("; ")
}

/// Beside each partition's committed offset, what the members applied to the ledger at or past
/// it: what kafka-consumer-groups.sh cannot see, and what a new owner would apply again.
fn add_processed(rows: &mut [LagRow], stores: &Stores) {
    let effects = stores.plain.effects();
    for row in rows {
        // A fresh topic: where nothing is committed, a new owner starts at offset 0.
        let from = row.current_offset.unwrap_or(0);
        row.processed_uncommitted = Some(accounting::applied_from(&effects, row.partition, from));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::Target;
    use client::ApiKey;
    use std::time::Duration;

    /// A broker that answers every JoinGroup an hour late: the run ends at its deadline,
    /// derived from its work and the timeouts its incident waits out, with one line naming the
    /// run and where each member was (paused clock, as the lab runs on the embedded broker).
    #[tokio::test(start_paused = true)]
    async fn a_stuck_run_ends_at_its_deadline_and_says_where() {
        let cluster = Cluster::slowed(ApiKey::JoinGroup, Duration::from_secs(3600)).await;
        let plan = Plan::new(5, &Target::Embedded);
        let started = tokio::time::Instant::now();
        let spec = plan.spec(super::super::plan::Kind::Baseline);
        let ran = run(
            &cluster,
            &plan,
            spec,
            &Journals::default(),
            Clock::start(),
            None,
        )
        .await;
        let elapsed = started.elapsed();
        cluster.close().await;
        // 1200 payments of 150 ms, a 30 s poll interval, a 40 s stall, the lag 5 s into it.
        crate::lab::deadline::assert_too_slow(
            ran,
            elapsed,
            Duration::from_millis(399_060),
            "the baseline run (group billing) was too slow: not done within 6 min 39 s (29 round \
             trips x 1 s + 2400 records x 25 µs + 7 rebalances x 15 s + 4 min 15 s of the \
             scenario's own waits + 10 s); it was waiting for billing-1 joining group billing \
             (members: none has joined yet). Is the broker overloaded or slowed down? A smaller \
             run (fewer records) needs less time",
        );
    }

    fn view(generation: i32, partitions: &[i32]) -> View {
        View {
            generation,
            partitions: partitions.iter().copied().collect(),
            ..View::default()
        }
    }

    #[test]
    fn a_group_is_formed_when_one_generation_owns_every_partition_once() {
        let mut views = BTreeMap::new();
        views.insert("a".to_string(), view(4, &[0, 1, 2, 3, 4, 5]));
        views.insert("b".to_string(), view(4, &[6, 7, 8, 9, 10, 11]));
        assert!(formed(&views, &["a", "b"]));
        assert!(!formed(&views, &["a"]), "half the partitions");
        assert!(!formed(&views, &["a", "b", "c"]), "c has not joined");
        views.insert("b".to_string(), view(5, &[6, 7, 8, 9, 10, 11]));
        assert!(!formed(&views, &["a", "b"]), "two generations");
        views.insert("b".to_string(), view(4, &[5, 6, 7, 8, 9, 10, 11]));
        assert!(!formed(&views, &["a", "b"]), "partition 5 twice");
        views.insert("b".to_string(), view(4, &[6, 7, 8, 9, 10, 11]));
        views.get_mut("b").unwrap().away = true;
        assert!(!formed(&views, &["a", "b"]), "b is away");
    }
}
