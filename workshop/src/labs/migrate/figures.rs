//! The lab's figures as `--json` carries them, each counted from a run's stores, changelogs
//! and ledger, and the verdict drawn from them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::engine::keys::{position, LabTime, RowKey, ShardId};
use super::engine::ledger::{Ack, ReadRecord};
use super::engine::machine::{MigrationRecord, Phase};
use super::engine::routing::{RoutingRecord, RoutingTable};
use super::engine::store::{ChangeBody, Digest};
use super::plan::SPLIT_AT;
use super::scenario::{ring_v7, ring_v8, Run, Scenario, MOVED, MOVED_ARC};
use super::traffic::{Traffic, BEN, HOT_TENANT};
use crate::lab::LabError;

/// A write the service acknowledged that its key's owner does not have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LostWrite {
    pub key: String,
    pub command: String,
    /// Where the command was read: the commands topic's partition and offset.
    pub command_partition: Option<i32>,
    pub command_offset: Option<i64>,
    /// The shard that applied it, and the offset of its change in that shard's changelog.
    pub shard: String,
    pub changelog_offset: Option<u64>,
    pub at_ms: u64,
}

impl LostWrite {
    fn of(ack: &Ack) -> Self {
        let (shard, offset) = ack.applied.first().copied().unzip();
        LostWrite {
            key: ack.key.to_string(),
            command: ack.cmd.to_string(),
            command_partition: ack.source.map(|s| s.partition),
            command_offset: ack.source.map(|s| s.offset),
            shard: shard.map_or(String::new(), |s| s.to_string()),
            changelog_offset: offset.flatten(),
            at_ms: ack.at.ms(),
        }
    }
}

/// A validation's two sides, as the migration record holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compared {
    pub source_rows: u64,
    pub destination_rows: u64,
    pub source_key_set: String,
    pub destination_key_set: String,
    pub source_checksum: String,
    pub destination_checksum: String,
    pub differing_rows: u64,
}

/// Source 001's hot tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HotTenant {
    pub tenant: u32,
    pub bucket_count: u32,
    pub route_version: u32,
    /// The tenant's route while rows move, as the routing topic holds it.
    pub migration_state: String,
    pub backfill_rows: u64,
    pub backfill_ms: u64,
    pub backfill_peak_rows_per_ms: u64,
    /// Tenant 42's writes per shard in the 100 ms before the split and the 100 ms after it.
    pub writes_per_100ms_before: BTreeMap<String, u64>,
    pub writes_per_100ms_after: BTreeMap<String, u64>,
    pub dual_write_failures_naive: u64,
    pub divergent_orders_naive: u64,
    pub duplicated_effects_naive: usize,
    pub naive_state: String,
    pub dual_write_failures_keyed: u64,
    pub divergent_orders_keyed: u64,
    pub duplicated_effects_keyed: usize,
    pub keyed_state: String,
}

/// One run's audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunFigures {
    pub run: &'static str,
    pub acknowledged: usize,
    pub reads: usize,
    pub lost_writes: usize,
    pub duplicated_effects: usize,
    pub missed_reads: usize,
    pub held_writes: u64,
    pub refused_stale: usize,
    /// The state each migration of the run ended in.
    pub ended: Vec<&'static str>,
    /// The service's consumer group's lag on the commands topic at the end: 0, every
    /// command handled and committed.
    pub commands_lag_at_end: Option<i64>,
}

/// Source 004's ring and who moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RingFigures {
    pub ring_v7: String,
    pub ring_v8: String,
    pub moved_range: String,
    pub users: usize,
    pub moved_users: usize,
    pub ben_position: u64,
}

impl RingFigures {
    pub fn of(profiles: &Traffic) -> Self {
        RingFigures {
            ring_v7: ring_v7().describe(),
            ring_v8: ring_v8().describe(),
            moved_range: MOVED_ARC.to_string(),
            users: profiles.users.len(),
            moved_users: profiles.users.iter().filter(|u| MOVED.contains(u)).count(),
            ben_position: position(BEN),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoutersOnly {
    pub missed_reads_routers_only: usize,
    pub users_missing_routers_only: usize,
    pub lost_writes_routers_only: usize,
}

impl RoutersOnly {
    pub fn of(run: &Run) -> Self {
        RoutersOnly {
            missed_reads_routers_only: run.audit.missed_reads.len(),
            users_missing_routers_only: users_missing(&run.audit.missed_reads),
            lost_writes_routers_only: run.audit.lost.len(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CopyOnce {
    pub lost_writes_copy_once: usize,
    pub lost_write_example: Option<LostWrite>,
    pub copied_rows_copy_once: u64,
    pub copy_ms: u64,
}

impl CopyOnce {
    pub fn of(run: &Run) -> Self {
        let stats = run.migration().map(|m| &m.stats);
        CopyOnce {
            lost_writes_copy_once: run.audit.lost.len(),
            lost_write_example: featured_loss(run).map(LostWrite::of),
            copied_rows_copy_once: stats.map_or(0, |s| s.copied_rows),
            copy_ms: stats.map_or(0, |s| elapsed(s.copy_started, s.copy_ended)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoFencing {
    /// Counted in B's changelog.
    pub writes_since_handover_unfenced: u64,
    /// As B's store counted them.
    pub writes_since_handover_counted_by_b: u64,
    pub lost_writes_unfenced: usize,
}

impl NoFencing {
    pub fn of(run: &Run) -> Self {
        NoFencing {
            writes_since_handover_unfenced: writes_since_handover(run),
            writes_since_handover_counted_by_b: run.writes_since_handover,
            lost_writes_unfenced: run.audit.lost.len(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Protocol {
    pub refused_stale_writes_fenced: usize,
    pub refused_stale_reads_fenced: usize,
    /// Writes B's changelog holds after the handover with version 7: none, the fence held.
    pub writes_since_handover_fenced: u64,
    pub lost_writes_protocol: usize,
    pub missed_reads_protocol: usize,
    pub duplicated_effects_protocol: usize,
    pub snapshot_offset: Option<u64>,
    pub copied_rows: u64,
    pub replayed_records: u64,
    pub changelog_records_read: u64,
    pub replayed_twice: u64,
    pub replay_twice_changes: u64,
    pub validation: Option<Compared>,
    pub write_block_ms: Option<u64>,
    pub held_writes: u64,
    pub routing_records: usize,
}

impl Protocol {
    pub fn of(run: &Run) -> Self {
        let forward = run.migration();
        let stat =
            |f: fn(&super::engine::worker::WorkerStats) -> u64| forward.map_or(0, |m| f(&m.stats));
        Protocol {
            refused_stale_writes_fenced: run.refusals.iter().filter(|r| r.write).count(),
            refused_stale_reads_fenced: run.refusals.iter().filter(|r| !r.write).count(),
            writes_since_handover_fenced: writes_since_handover(run),
            lost_writes_protocol: run.audit.lost.len(),
            missed_reads_protocol: run.audit.missed_reads.len(),
            duplicated_effects_protocol: run.audit.duplicated.len(),
            snapshot_offset: forward.and_then(|m| m.records.iter().find_map(|r| r.snapshot_offset)),
            copied_rows: stat(|s| s.copied_rows),
            replayed_records: stat(|s| s.replayed),
            changelog_records_read: stat(|s| s.records_read),
            replayed_twice: stat(|s| s.replayed_twice),
            replay_twice_changes: stat(|s| s.replay_twice_changes),
            validation: forward.and_then(|m| last_validation(&m.records)),
            write_block_ms: forward.and_then(|m| m.stats.block_ms()),
            held_writes: run.held,
            routing_records: run.routing_log.len(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub lost_after_failure: usize,
    pub duplicated_after_failure: usize,
    pub missed_reads_after_failure: usize,
    pub restored_records: u64,
    /// The checkpoint the interrupted record held: where the catch-up resumed.
    pub resumed_from_offset: Option<u64>,
    pub skipped_already_applied: u64,
    pub replayed_after_failure: u64,
}

impl Failure {
    pub fn of(run: &Run) -> Self {
        let migration = run.migration();
        // The worker that resumed knows only what the routing topic told it: the interrupted
        // record is there.
        let interrupted = run.routing_log.iter().find_map(|(_, r)| match r {
            RoutingRecord::Migration(m) if m.state == Phase::Interrupted => Some(m),
            _ => None,
        });
        Failure {
            lost_after_failure: run.audit.lost.len(),
            duplicated_after_failure: run.audit.duplicated.len(),
            missed_reads_after_failure: run.audit.missed_reads.len(),
            restored_records: run.events.restored_records,
            resumed_from_offset: interrupted.and_then(|r| r.next_offset),
            skipped_already_applied: migration.map_or(0, |m| m.stats.already_applied),
            replayed_after_failure: migration.map_or(0, |m| m.stats.replayed),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rollback {
    pub lost_writes_rollback_routers_only: usize,
    pub lost_writes_rollback: usize,
    pub missed_reads_rollback: usize,
    /// D's changes since the handover the migration back replayed into B.
    pub rollback_replayed_records: u64,
}

impl Rollback {
    pub fn of(routers: &Run, back: &Run) -> Self {
        Rollback {
            lost_writes_rollback_routers_only: routers.audit.lost.len(),
            lost_writes_rollback: back.audit.lost.len(),
            missed_reads_rollback: back.audit.missed_reads.len(),
            rollback_replayed_records: back.rollback().map_or(0, |m| m.stats.replayed),
        }
    }
}

/// Every figure of the lab; the sections' fields sit at the top level of the JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Figures {
    pub seed: u64,
    pub target: String,
    #[serde(flatten)]
    pub ring: RingFigures,
    #[serde(flatten)]
    pub routers_only: RoutersOnly,
    #[serde(flatten)]
    pub copy_once: CopyOnce,
    #[serde(flatten)]
    pub no_fencing: NoFencing,
    #[serde(flatten)]
    pub protocol: Protocol,
    #[serde(flatten)]
    pub failure: Failure,
    #[serde(flatten)]
    pub rollback: Rollback,
    pub hot_tenant: HotTenant,
    pub runs: Vec<RunFigures>,
}

/// The runs by scenario.
pub struct Runs<'r>(pub &'r BTreeMap<Scenario, Run>);

impl Runs<'_> {
    pub fn get(&self, scenario: Scenario) -> Result<&Run, LabError> {
        self.0
            .get(&scenario)
            .ok_or_else(|| LabError::Internal(format!("run {} is missing", scenario.name())))
    }
}

pub fn figures(
    seed: u64,
    target: String,
    profiles: &Traffic,
    runs: &Runs<'_>,
) -> Result<Figures, LabError> {
    Ok(Figures {
        seed,
        target,
        ring: RingFigures::of(profiles),
        routers_only: RoutersOnly::of(runs.get(Scenario::RoutersOnly)?),
        copy_once: CopyOnce::of(runs.get(Scenario::CopyOnce)?),
        no_fencing: NoFencing::of(runs.get(Scenario::NoFencing)?),
        protocol: Protocol::of(runs.get(Scenario::Protocol)?),
        failure: Failure::of(runs.get(Scenario::Failure)?),
        rollback: Rollback::of(
            runs.get(Scenario::RollbackRoutersOnly)?,
            runs.get(Scenario::Rollback)?,
        ),
        hot_tenant: HotTenant::of(
            runs.get(Scenario::DualWriteNaive)?,
            runs.get(Scenario::DualWriteKeyed)?,
        ),
        runs: runs.0.values().map(run_figures).collect(),
    })
}

/// The lost write the narration shows: Ben's first, else the first.
pub fn featured_loss(run: &Run) -> Option<&Ack> {
    let ben = RowKey::user(BEN);
    let lost = &run.audit.lost;
    lost.iter().find(|a| a.key == ben).or(lost.first())
}

/// Users whose profile a read did not find at all.
fn users_missing(missed: &[ReadRecord]) -> usize {
    let mut keys: Vec<&RowKey> = missed.iter().filter(|r| !r.found).map(|r| &r.key).collect();
    keys.sort();
    keys.dedup();
    keys.len()
}

fn elapsed(from: Option<LabTime>, to: Option<LabTime>) -> u64 {
    match (from, to) {
        (Some(a), Some(b)) => b.ms().saturating_sub(a.ms()),
        _ => 0,
    }
}

/// Writes B's changelog holds for the moved range after the handover, tagged with an older
/// version than the one the range was handed over at: counted from the changelog itself.
pub fn writes_since_handover(run: &Run) -> u64 {
    let Some(handover) = run.migration().and_then(|m| {
        let h = m.records.iter().find_map(|r| r.handover)?;
        Some((h.source_end, m.plan.target_version))
    }) else {
        return 0;
    };
    let (from, version) = handover;
    let log = run
        .changelogs
        .get(&ShardId::B)
        .map_or(&[][..], Vec::as_slice);
    log.iter()
        .filter(|(offset, change)| {
            *offset >= from
                && MOVED.contains(&change.key)
                && matches!(change.body, ChangeBody::Write { token, .. } if token < version)
        })
        .count() as u64
}

fn last_validation(records: &[MigrationRecord]) -> Option<Compared> {
    let v = records.iter().rev().find_map(|r| r.validation)?;
    let hex = |d: &Digest, f: fn(&Digest) -> u64| format!("{:016x}", f(d));
    Some(Compared {
        source_rows: v.source.rows,
        destination_rows: v.destination.rows,
        source_key_set: hex(&v.source, |d| d.key_set),
        destination_key_set: hex(&v.destination, |d| d.key_set),
        source_checksum: hex(&v.source, |d| d.checksum),
        destination_checksum: hex(&v.destination, |d| d.checksum),
        differing_rows: v.differing_rows,
    })
}

impl HotTenant {
    pub fn of(naive: &Run, keyed: &Run) -> Self {
        let split = keyed.migration();
        let route = keyed.routing_log.iter().find_map(|(_, r)| match r {
            RoutingRecord::Tenant(t) if t.route_version > 1 => Some(*t),
            _ => None,
        });
        let done_at = split
            .and_then(|m| m.stats.committed_at)
            .map_or(0, LabTime::ms);
        let differing = |run: &Run| {
            run.migration()
                .and_then(|m| m.records.iter().rev().find_map(|r| r.validation))
                .map_or(0, |v| v.differing_rows)
        };
        let state = |run: &Run| run.migration().map_or("", |m| m.phase.name()).to_string();
        HotTenant {
            tenant: HOT_TENANT,
            bucket_count: route.map_or(0, |r| r.bucket_count),
            route_version: route.map_or(0, |r| r.route_version),
            migration_state: route.map_or("", |r| r.migration_state.name()).to_string(),
            backfill_rows: split.map_or(0, |m| m.stats.copied_rows),
            backfill_ms: split.map_or(0, |m| elapsed(m.stats.copy_started, m.stats.copy_ended)),
            backfill_peak_rows_per_ms: split.map_or(0, |m| m.stats.copy_peak_per_ms),
            writes_per_100ms_before: tenant_writes(keyed, SPLIT_AT - 100, SPLIT_AT),
            writes_per_100ms_after: tenant_writes(keyed, done_at, done_at + 100),
            dual_write_failures_naive: naive.dual_write_failures,
            divergent_orders_naive: differing(naive),
            duplicated_effects_naive: naive.audit.duplicated.len(),
            naive_state: state(naive),
            dual_write_failures_keyed: keyed.dual_write_failures,
            divergent_orders_keyed: differing(keyed),
            duplicated_effects_keyed: keyed.audit.duplicated.len(),
            keyed_state: state(keyed),
        }
    }
}

/// Tenant 42's writes in `[from, to)` per shard, from the shards' changelogs.
fn tenant_writes(run: &Run, from: u64, to: u64) -> BTreeMap<String, u64> {
    ShardId::ALL
        .iter()
        .map(|id| {
            let log = run.changelogs.get(id).map_or(&[][..], Vec::as_slice);
            let writes = log
                .iter()
                .filter(|(_, c)| {
                    matches!(c.key, RowKey::Order { tenant, .. } if tenant == HOT_TENANT)
                        && matches!(c.body, ChangeBody::Write { .. })
                        && (from..to).contains(&c.at.ms())
                })
                .count() as u64;
            (id.to_string(), writes)
        })
        .collect()
}

pub fn run_figures(run: &Run) -> RunFigures {
    RunFigures {
        run: run.scenario.name(),
        acknowledged: run.acknowledged,
        reads: run.reads.len(),
        lost_writes: run.audit.lost.len(),
        duplicated_effects: run.audit.duplicated.len(),
        missed_reads: run.audit.missed_reads.len(),
        held_writes: run.held,
        refused_stale: run.refusals.len(),
        ended: run.migrations.iter().map(|m| m.phase.name()).collect(),
        commands_lag_at_end: run.commands_lag,
    }
}

/// How many of `users` each shard owns under the ring of `table`.
pub fn users_per_shard(users: &[RowKey], table: &RoutingTable) -> BTreeMap<ShardId, usize> {
    let mut counts: BTreeMap<ShardId, usize> = ShardId::ALL.iter().map(|s| (*s, 0)).collect();
    for user in users {
        *counts.entry(table.route_read(user).shard).or_default() += 1;
    }
    counts
}
