//! The lab's figures (the `--json` document's `figures`) from the five runs, and the verdict.

use std::collections::BTreeMap;

use client::COMMIT_FAILED_NOT_IN_GROUP;
use serde::Serialize;

use super::accounting::{self, Redelivery, Revocations};
use super::eos::EosOutcome;
use super::eos_figures::{self, EosFigures};
use super::journal::Event;
use super::plan::{Incident, Kind, Plan, MEMBERS, PARTITIONS};
use super::scenario::Outcome;
use crate::lab::report::{count, thousands, Checks};

/// One run, measured the same way as every other.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioFigures {
    pub topic: String,
    pub group: String,
    pub assignor: &'static str,
    pub max_poll_records: usize,
    pub static_members: bool,
    /// What happened to whom, in words.
    pub incident: String,
    /// Deliveries processed (every application, duplicates included).
    pub processed: u64,
    /// Records covered by the group's committed offsets at the end (the broker's view).
    pub committed: u64,
    /// Payments the ledger applied more than once (applications beyond the first).
    pub duplicates: u64,
    /// Records processed that no commit of the member that processed them covered.
    pub processed_uncommitted: u64,
    pub failed_commits: u64,
    /// Partitions revoked from members that kept running, and how long they waited.
    pub revoked: Revocations,
    /// Generations the group went through after the incident began.
    pub rebalances: u64,
    /// Newly assigned partitions whose next batch started at the committed offset.
    pub resumptions_checked: u64,
    pub resumption_errors: Vec<String>,
    /// From the gate opening until everything was applied and committed.
    pub run_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub topic: String,
    pub group: String,
    pub partitions: i32,
    pub members: Vec<&'static str>,
    pub payments: usize,
    pub stalled_member: &'static str,
    pub stall_after_payments: usize,
    pub stall_ms: u64,
    pub max_poll_interval_ms: u64,
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    /// The time one payment takes to apply.
    pub processing_ms: u64,
    pub max_poll_records: usize,
    pub processed: u64,
    pub committed: u64,
    pub duplicates: u64,
    pub processed_uncommitted: u64,
    pub double_charged_cents: i64,
    pub failed_commits: u64,
    /// The member's own error for its late commit.
    pub commit_failed_error: Option<String>,
    /// The coordinator's answer to the same commit with the member's old identity.
    pub late_commit_broker_answer: Option<String>,
    pub resumed_at_committed: bool,
    pub redeliveries: Vec<Redelivery>,
    pub partitions_revoked_eager: u64,
    pub partitions_revoked_cooperative: u64,
    pub pause_ms_eager: u64,
    pub pause_ms_cooperative: u64,
    pub paused_partition_ms_eager: u64,
    pub paused_partition_ms_cooperative: u64,
    pub duplicates_cooperative: u64,
    pub restarted_member: &'static str,
    pub restart_downtime_ms: u64,
    pub static_membership_rebalances: u64,
    pub dynamic_restart_rebalances: u64,
    pub static_restart_partitions_revoked: u64,
    pub small_max_poll_records: usize,
    pub duplicates_small_poll_batch: u64,
    pub duplicate_effects_colocated_dedup: u64,
    pub redeliveries_refused_colocated_dedup: u64,
    /// Balances over what was paid: 0 when every payment was charged once.
    pub double_charged_cents_colocated_dedup: i64,
    pub dedup_ttl_ms: u64,
    pub shortest_replay_ms: Option<u64>,
    pub duplicates_ttl_dedup: u64,
    pub double_charged_cents_ttl_dedup: i64,
    /// The baseline's stall in Kafka transactions; `null` where the cluster offers none.
    pub eos: Option<EosFigures>,
    pub scenarios: BTreeMap<&'static str, ScenarioFigures>,
}

pub fn expected() -> String {
    "A member of group billing that stalls longer than max.poll.interval.ms is removed and its \
     commit fails; the new owners of its partitions start from the committed offsets and apply \
     again exactly the payments it processed but could not commit; cooperative rebalancing, \
     static membership and smaller batches limit the disruption but not the duplicates, and only \
     dedup recorded in the ledger's own transaction removes them; in Kafka transactions the output \
     topic holds each payment once under read_committed, while the payment gateway is still \
     called twice for the redelivered batch"
        .to_string()
}

fn scenario(plan: &Plan, o: &Outcome) -> ScenarioFigures {
    let entries = o.journal.entries();
    let effects = o.stores.plain.effects();
    let incident_ms = entries
        .iter()
        .find(|e| {
            matches!(
                e.event,
                Event::StallStarted { .. } | Event::Restarting { .. }
            )
        })
        .map_or(o.settled_ms, |e| e.at_ms);
    let (resumptions_checked, resumption_errors) = accounting::resumed_at_committed(&entries);
    ScenarioFigures {
        topic: o.topic.clone(),
        group: o.group.clone(),
        assignor: o.spec.assignor,
        max_poll_records: o.spec.max_poll_records,
        static_members: o.spec.static_members,
        incident: match &o.spec.incident {
            Incident::Stall {
                member, duration, ..
            } => format!(
                "{member} stops for {} ms before committing the batch that reaches {} payments",
                duration.as_millis(),
                plan.stall_after
            ),
            Incident::Restart {
                member, downtime, ..
            } => format!(
                "{member} restarts for {} ms after the batch that reaches {} payments",
                downtime.as_millis(),
                plan.restart_after
            ),
        },
        processed: accounting::processed(&entries),
        committed: o
            .lag_after
            .iter()
            .filter_map(|r| r.current_offset)
            .map(|c| c.max(0) as u64)
            .sum(),
        duplicates: accounting::duplicates(&effects),
        processed_uncommitted: accounting::processed_uncommitted(&entries),
        failed_commits: entries
            .iter()
            .filter(|e| matches!(e.event, Event::CommitFailed { .. }))
            .count() as u64,
        revoked: accounting::revocations(
            &entries,
            o.started_ms,
            o.settled_ms,
            o.spec.incident.member(),
        ),
        rebalances: accounting::rebalances_after(&entries, incident_ms),
        resumptions_checked,
        resumption_errors,
        run_ms: o.settled_ms.saturating_sub(o.started_ms),
    }
}

/// The figures of the runs; `outcomes` holds one of each at-least-once kind, `eos` the
/// transactional run if the cluster could run it.
pub fn build(
    plan: &Plan,
    outcomes: &[Outcome],
    eos: Option<&EosOutcome>,
) -> Result<Figures, String> {
    let scenarios: BTreeMap<&'static str, ScenarioFigures> = outcomes
        .iter()
        .chain(eos.map(|e| &e.run))
        .map(|o| (o.spec.kind.key(), scenario(plan, o)))
        .collect();
    let run = |kind: Kind| {
        let outcome = outcomes.iter().find(|o| o.spec.kind == kind);
        let figures = scenarios.get(kind.key());
        outcome
            .zip(figures)
            .ok_or_else(|| format!("the {} run is missing", kind.key()))
    };
    let (base, b) = run(Kind::Baseline)?;
    let (_, c) = run(Kind::Cooperative)?;
    let (_, small) = run(Kind::SmallBatch)?;
    let (restarted, st) = run(Kind::Static)?;
    let (_, d) = run(Kind::Dynamic)?;

    let entries = base.journal.entries();
    let failed = entries.iter().find_map(|e| match &e.event {
        Event::CommitFailed { error, .. } => Some(error.clone()),
        _ => None,
    });
    let answered = entries.iter().find_map(|e| match &e.event {
        Event::LateCommitAnswered { answer, .. } => Some(answer.clone()),
        _ => None,
    });
    let stores = &base.stores;
    let effects = stores.plain.effects();
    let paid: i64 = plan.payments.iter().map(|p| p.amount_cents).sum();
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    Ok(Figures {
        topic: base.topic.clone(),
        group: base.group.clone(),
        partitions: PARTITIONS,
        members: MEMBERS.to_vec(),
        payments: plan.payments.len(),
        stalled_member: base.spec.incident.member(),
        stall_after_payments: plan.stall_after,
        stall_ms: ms(plan.timing.stall),
        max_poll_interval_ms: ms(plan.timing.max_poll_interval),
        session_timeout_ms: ms(plan.timing.session),
        heartbeat_interval_ms: ms(plan.timing.heartbeat),
        processing_ms: ms(plan.timing.processing),
        max_poll_records: b.max_poll_records,
        processed: b.processed,
        committed: b.committed,
        duplicates: b.duplicates,
        processed_uncommitted: b.processed_uncommitted,
        double_charged_cents: stores.plain.total_cents() - paid,
        failed_commits: b.failed_commits,
        commit_failed_error: failed,
        late_commit_broker_answer: answered,
        resumed_at_committed: b.resumptions_checked > 0 && b.resumption_errors.is_empty(),
        redeliveries: accounting::redeliveries(&effects),
        partitions_revoked_eager: b.revoked.partitions,
        partitions_revoked_cooperative: c.revoked.partitions,
        pause_ms_eager: b.revoked.longest_pause_ms,
        pause_ms_cooperative: c.revoked.longest_pause_ms,
        paused_partition_ms_eager: b.revoked.total_pause_ms,
        paused_partition_ms_cooperative: c.revoked.total_pause_ms,
        duplicates_cooperative: c.duplicates,
        restarted_member: restarted.spec.incident.member(),
        restart_downtime_ms: ms(plan.timing.downtime),
        static_membership_rebalances: st.rebalances,
        dynamic_restart_rebalances: d.rebalances,
        static_restart_partitions_revoked: st.revoked.partitions,
        small_max_poll_records: small.max_poll_records,
        duplicates_small_poll_batch: small.duplicates,
        duplicate_effects_colocated_dedup: accounting::duplicates(&stores.colocated.effects()),
        redeliveries_refused_colocated_dedup: stores.colocated.suppressed().len() as u64,
        double_charged_cents_colocated_dedup: stores.colocated.total_cents() - paid,
        dedup_ttl_ms: ms(stores.cache.ttl()),
        shortest_replay_ms: accounting::shortest_replay_ms(&effects),
        duplicates_ttl_dedup: accounting::duplicates(&stores.behind_cache.effects()),
        double_charged_cents_ttl_dedup: stores.behind_cache.total_cents() - paid,
        eos: eos.map(|e| eos_figures::build(e, plan.payments.len())),
        scenarios,
    })
}

/// The checks the verdict rests on; `eos_skipped` says why the transactional run did not run.
pub fn verdict(f: &Figures, eos_skipped: Option<&str>) -> Checks {
    let mut checks = Checks::new();
    checks.check(
        "duplicates = processed, not committed",
        f.duplicates > 0
            && f.duplicates == f.processed_uncommitted
            && f.processed == f.committed + f.duplicates,
        format!(
            "{} payments applied twice = {} processed but uncommitted by {} (processed {} - committed {})",
            f.duplicates,
            f.processed_uncommitted,
            f.stalled_member,
            thousands(f.processed),
            thousands(f.committed)
        ),
    );
    checks.check(
        "late commit refused",
        f.failed_commits > 0
            && f.commit_failed_error.as_deref() == Some(COMMIT_FAILED_NOT_IN_GROUP)
            && f.late_commit_broker_answer
                .as_deref()
                .is_some_and(|a| !a.starts_with("NONE")),
        format!(
            "{}'s consumer failed its late commit without sending it ({}), as Java's does; sent \
             anyway, the coordinator answered {}",
            f.stalled_member,
            count(f.failed_commits, "failed commit", "failed commits"),
            f.late_commit_broker_answer.as_deref().unwrap_or("nothing")
        ),
    );
    checks.check(
        "resumed at the committed offsets",
        f.resumed_at_committed,
        "the new owners resumed at the committed offsets",
    );
    for (name, s) in &f.scenarios {
        if s.duplicates != s.processed_uncommitted {
            checks.check(
                &format!("run {name} counted"),
                false,
                format!(
                    "run {name}: {} duplicates but {} processed and uncommitted",
                    s.duplicates, s.processed_uncommitted
                ),
            );
        }
    }
    checks.check(
        "cooperative revokes fewer",
        f.partitions_revoked_cooperative < f.partitions_revoked_eager,
        format!(
            "partitions revoked from members that kept running: {} eager, {} cooperative-sticky",
            f.partitions_revoked_eager, f.partitions_revoked_cooperative
        ),
    );
    checks.check(
        "static restart without rebalance",
        f.static_membership_rebalances == 0 && f.dynamic_restart_rebalances > 0,
        format!(
            "a restart within the session timeout: {} as a static member, {} as a dynamic one",
            count(f.static_membership_rebalances, "rebalance", "rebalances"),
            f.dynamic_restart_rebalances
        ),
    );
    checks.check(
        "smaller batches, fewer duplicates",
        f.duplicates_small_poll_batch > 0 && f.duplicates_small_poll_batch < f.duplicates,
        format!(
            "max.poll.records {} instead of {}: {} duplicates instead of {} (fewer, not none)",
            f.small_max_poll_records,
            f.max_poll_records,
            f.duplicates_small_poll_batch,
            f.duplicates
        ),
    );
    checks.check(
        "dedup in the transaction",
        f.duplicate_effects_colocated_dedup == 0
            && f.double_charged_cents_colocated_dedup == 0
            && f.redeliveries_refused_colocated_dedup > 0,
        format!(
            "dedup in the ledger's transaction: {} duplicate effects, {} redeliveries refused",
            f.duplicate_effects_colocated_dedup, f.redeliveries_refused_colocated_dedup
        ),
    );
    checks.check(
        "TTL dedup lets duplicates through",
        f.duplicates_ttl_dedup > 0,
        format!(
            "dedup in a separate store with a {} ms TTL (replay after {} ms): {} duplicates",
            f.dedup_ttl_ms,
            f.shortest_replay_ms
                .map_or_else(|| "-".to_string(), |m| m.to_string()),
            f.duplicates_ttl_dedup
        ),
    );
    let eos = match (&f.eos, eos_skipped) {
        (Some(eos), _) => Ok(eos),
        (None, reason) => Err(reason.unwrap_or("the transactional run did not run")),
    };
    eos_figures::verdict(&mut checks, eos);
    checks
}
