//! The migration worker: drives one [`Migration`] through its steps, a millisecond's work at a
//! time, against the world's shards and logs. It runs beside the destination and dies with it:
//! what survives a failure is what it recorded in the routing topic.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use super::backend::{Backend, Reader};
use super::keys::{LabTime, RowKey, Scope, ShardId};
use super::machine::{
    Destination, Handover, Migration, Mode, Phase, Plan, Start, Validation, Variant,
};
use super::routing::{RingVersion, RoutingRecord, RoutingTable, TenantRoute, TenantState};
use super::store::{Digest, Outcome, Row};
use super::world::{check_contiguous, illegal, World};
use crate::lab::LabError;

/// The routing a migration puts in force when it commits.
#[derive(Debug, Clone, PartialEq)]
pub enum Switch {
    /// A new ring version.
    Ring(RingVersion),
    /// A tenant's bucketed route (its migration state follows the migration's steps).
    Tenant(TenantRoute),
}

/// What a worker did, counted as it went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkerStats {
    pub copied_rows: u64,
    pub copy_started: Option<LabTime>,
    pub copy_ended: Option<LabTime>,
    /// The most rows the copy wrote to one shard in one millisecond (the throttle's effect).
    pub copy_peak_per_ms: u64,
    /// Changelog records the catch-up read, and those of the scope it applied.
    pub records_read: u64,
    pub replayed: u64,
    /// Replayed records whose command the destination already had: skipped, nothing changed.
    pub already_applied: u64,
    /// The second replay of everything (`replay_twice`): records, and rows it changed.
    pub replayed_twice: u64,
    pub replay_twice_changes: u64,
    pub interruptions: u64,
    pub blocked_at: Option<LabTime>,
    pub committed_at: Option<LabTime>,
    /// Rows the old owner dropped at the cleanup.
    pub dropped_rows: u64,
}

impl WorkerStats {
    /// How long writes to the scope were blocked, in lab milliseconds.
    pub fn block_ms(&self) -> Option<u64> {
        Some(self.committed_at?.ms() - self.blocked_at?.ms())
    }
}

/// One migration's worker.
#[derive(Debug)]
pub struct Worker {
    pub(super) machine: Migration,
    switch: Switch,
    /// The routing as it will be after the commit: where each row goes.
    target: RoutingTable,
    pending: VecDeque<RowKey>,
    /// A changelog-mode snapshot: the scope's rows as of the snapshot offset.
    snapshot: BTreeMap<RowKey, Row>,
    has_snapshot: bool,
    next: u64,
    /// Blocked, and the changelog replayed to its end: the commit comes next.
    drained: bool,
    last_checkpoint: LabTime,
    /// When the current timed step (validation, read switch, retention) ends.
    until: LabTime,
    copied_this_ms: BTreeMap<ShardId, (LabTime, u64)>,
    pub(super) stats: WorkerStats,
}

impl Worker {
    pub fn machine(&self) -> &Migration {
        &self.machine
    }

    pub fn stats(&self) -> &WorkerStats {
        &self.stats
    }
}

impl<B: Backend> World<B> {
    /// Starts a migration; its worker takes its first step at the next [`World::advance`].
    pub fn start(&mut self, plan: Plan, switch: Switch) -> Result<(), LabError> {
        if self.worker.is_some() {
            return Err(LabError::Internal(format!(
                "migration {} started while another runs",
                plan.id
            )));
        }
        let current = self
            .backend
            .routing(Reader::Worker)?
            .table()
            .map_err(LabError::Broker)?;
        let target = match &switch {
            Switch::Ring(ring) => RoutingTable::new(ring.clone(), BTreeMap::new()),
            Switch::Tenant(route) => {
                let done = TenantRoute {
                    migration_state: TenantState::Done,
                    ..*route
                };
                RoutingTable::new(
                    current.ring().clone(),
                    BTreeMap::from([(route.tenant, done)]),
                )
            }
        }
        .map_err(LabError::Internal)?;
        self.worker = Some(Worker {
            machine: Migration::new(plan),
            switch,
            target,
            pending: VecDeque::new(),
            snapshot: BTreeMap::new(),
            has_snapshot: false,
            next: 0,
            drained: false,
            last_checkpoint: self.now,
            until: self.now,
            copied_this_ms: BTreeMap::new(),
            stats: WorkerStats::default(),
        });
        Ok(())
    }

    /// Undoes the committed migration by a migration back, from the destination's changelog
    /// at the handover (`variant` RoutersOnly: only the routers are set back).
    pub fn roll_back(&mut self, variant: Variant, ring: RingVersion) -> Result<(), LabError> {
        let Some(mut forward) = self.worker.take() else {
            return Err(LabError::Internal("nothing to roll back".into()));
        };
        let (Some(handover), Destination::Shard(destination)) = (
            forward.machine.handover().copied(),
            forward.machine.plan().destination,
        ) else {
            self.worker = Some(forward);
            return Err(LabError::Internal(
                "only a committed shard move rolls back".into(),
            ));
        };
        let record = forward.machine.roll_back(self.now).map_err(illegal)?;
        self.publish(record)?;
        let plan = forward.machine.plan().clone();
        self.finished.push(forward);
        let back = Plan {
            id: format!("{}-back", plan.id),
            source: destination,
            destination: Destination::Shard(plan.source),
            from_version: plan.target_version,
            target_version: ring.version,
            variant,
            start: Start::Retained {
                offset: handover.destination_end,
            },
            ..plan
        };
        self.start(back, Switch::Ring(ring))
    }

    /// Every worker of the run, finished ones first.
    pub fn workers(&self) -> impl Iterator<Item = &Worker> {
        self.finished.iter().chain(self.worker.as_ref())
    }

    pub(super) fn step_worker(&mut self) -> Result<(), LabError> {
        let Some(mut worker) = self.worker.take() else {
            return Ok(());
        };
        let result = self.step(&mut worker);
        if worker.machine.phase().is_final() {
            self.finished.push(worker);
        } else {
            self.worker = Some(worker);
        }
        result
    }

    pub(super) fn interrupt_worker_of(&mut self, id: ShardId) -> Result<(), LabError> {
        let Some(w) = self.worker.as_mut() else {
            return Ok(());
        };
        let running = matches!(
            w.machine.phase(),
            Phase::Copying | Phase::CatchingUp | Phase::Validating | Phase::Blocked
        );
        if w.machine.plan().destination != Destination::Shard(id) || !running {
            return Ok(());
        }
        let record = w.machine.interrupt(self.now).map_err(illegal)?;
        // The worker's memory goes with it; a freeze on the source runs out with its lease.
        w.pending.clear();
        w.snapshot.clear();
        w.has_snapshot = false;
        w.drained = false;
        w.stats.interruptions += 1;
        self.publish(record)
    }

    /// The worker restarts beside the recovered destination from its durable record.
    pub(super) fn resume_worker_of(&mut self, id: ShardId) -> Result<(), LabError> {
        let Some(mut w) = self.worker.take() else {
            return Ok(());
        };
        if w.machine.phase() != Phase::Interrupted
            || w.machine.plan().destination != Destination::Shard(id)
        {
            self.worker = Some(w);
            return Ok(());
        }
        let plan = w.machine.plan().clone();
        let routing = self.backend.routing(Reader::Worker)?;
        let Some(record) = routing.migration(&plan.id).cloned() else {
            self.worker = Some(w);
            return Err(LabError::Broker(format!(
                "migration {} has no record in the routing topic to resume from",
                plan.id
            )));
        };
        w.machine = Migration::recover(plan, &record);
        let resumed = w.machine.resume(self.now).map_err(illegal);
        if let Some(next) = w.machine.checkpoint() {
            w.next = next;
        }
        w.last_checkpoint = self.now;
        let result = resumed.and_then(|r| self.publish(r));
        self.worker = Some(w);
        result
    }

    fn step(&mut self, w: &mut Worker) -> Result<(), LabError> {
        let now = self.now;
        let plan = w.machine.plan().clone();
        match w.machine.phase() {
            Phase::Planned => {
                let record = w.machine.prepare(now).map_err(illegal)?;
                self.publish(record)?;
                if let Switch::Tenant(route) = w.switch {
                    self.route_tenant(route, TenantState::DualWrite)?;
                }
            }
            Phase::Prepared => match (plan.variant, plan.start) {
                (Variant::RoutersOnly, _) => self.commit(w)?,
                (_, Start::Retained { offset }) => {
                    w.next = offset;
                    w.last_checkpoint = now;
                    let record = w.machine.catch_up(now).map_err(illegal)?;
                    self.publish(record)?;
                }
                (_, Start::Snapshot) => self.snapshot(w)?,
            },
            Phase::Copying if !w.has_snapshot => self.snapshot(w)?,
            Phase::Copying => {
                self.copy_batch(w)?;
                if w.pending.is_empty() {
                    w.stats.copy_ended = Some(now);
                    match (plan.variant, plan.mode) {
                        (Variant::CopyOnce, _) => self.commit(w)?,
                        (_, Mode::DualWrite) => self.start_validation(w)?,
                        (_, Mode::Changelog) => {
                            w.next = w.machine.snapshot_offset().unwrap_or(0);
                            w.last_checkpoint = now;
                            let record = w.machine.catch_up(now).map_err(illegal)?;
                            self.publish(record)?;
                        }
                    }
                }
            }
            Phase::CatchingUp => {
                let caught_up = self.replay_batch(w)?;
                if caught_up {
                    self.replay_twice(w)?;
                    self.start_validation(w)?;
                }
            }
            Phase::Validating => {
                let caught_up = plan.mode == Mode::DualWrite || self.replay_batch(w)?;
                if caught_up && now >= w.until {
                    self.validated(w)?;
                }
            }
            Phase::Blocked => {
                let lease = now.plus(self.settings.block_lease_ms);
                self.store(plan.source).freeze(plan.scope, lease);
                if !w.drained {
                    // Writing the commit takes the next millisecond: only the freeze keeps
                    // writes from reaching the source after this last replay.
                    w.drained = self.replay_batch(w)?;
                    return Ok(());
                }
                let validation = self.compare(w);
                let record = w.machine.validated(now, validation).map_err(illegal)?;
                self.publish(record)?;
                if w.machine.phase() == Phase::Aborted {
                    self.store(plan.source).unfreeze(&plan.scope);
                } else {
                    self.commit(w)?;
                }
            }
            Phase::ReadsSwitched if now >= w.until => self.commit(w)?,
            Phase::Committed if w.machine.path().contains(&Phase::Retained) => {
                w.until = now.plus(self.settings.retention_ms);
                let record = w.machine.retain(now).map_err(illegal)?;
                self.publish(record)?;
            }
            Phase::Retained if now >= w.until => self.clean_up(w)?,
            _ => {}
        }
        Ok(())
    }

    /// Step 2: the snapshot's offset is the source's changelog end, with every change before
    /// it in the snapshot (the world makes one change at a time, so the two agree exactly).
    fn snapshot(&mut self, w: &mut Worker) -> Result<(), LabError> {
        let plan = w.machine.plan().clone();
        let offset = match plan.mode {
            Mode::Changelog => Some(self.end_offset(plan.source)?),
            Mode::DualWrite => None,
        };
        let rows: Vec<(RowKey, Row)> = self.shards[&plan.source]
            .rows()
            .filter(|(key, _)| plan.scope.contains(key) && destination(w, key) != plan.source)
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        w.pending = rows.iter().map(|(k, _)| k.clone()).collect();
        // A backfill copies each row as it is when its turn comes; a snapshot as it was.
        w.snapshot = match plan.mode {
            Mode::Changelog => rows.into_iter().collect(),
            Mode::DualWrite => BTreeMap::new(),
        };
        w.has_snapshot = true;
        w.stats.copy_started.get_or_insert(self.now);
        let record = w.machine.snapshot(self.now, offset).map_err(illegal)?;
        self.publish(record)
    }

    fn copy_batch(&mut self, w: &mut Worker) -> Result<(), LabError> {
        let source = w.machine.plan().source;
        for _ in 0..self.settings.copy_rate {
            let Some(key) = w.pending.pop_front() else {
                break;
            };
            let row = match w.snapshot.remove(&key) {
                Some(row) => row,
                None => match self.shards[&source].row(&key) {
                    Some(row) => row.clone(),
                    None => continue,
                },
            };
            let to = destination(w, &key);
            let now = self.now;
            let outcome = self.store(to).copy(&key, &row, source, now);
            self.append(to, outcome)?;
            w.stats.copied_rows += 1;
            let (at, count) = w.copied_this_ms.entry(to).or_insert((self.now, 0));
            if *at != self.now {
                *at = self.now;
                *count = 0;
            }
            *count += 1;
            w.stats.copy_peak_per_ms = w.stats.copy_peak_per_ms.max(*count);
        }
        Ok(())
    }

    /// Step 3: up to `replay_rate` records of the source's changelog, the scope's applied to
    /// the destination; a checkpoint when one is due. Returns whether the replay reached the
    /// changelog's end.
    fn replay_batch(&mut self, w: &mut Worker) -> Result<bool, LabError> {
        let plan = w.machine.plan().clone();
        let Destination::Shard(to) = plan.destination else {
            return Ok(true);
        };
        let end = self.end_offset(plan.source)?;
        let upto = end.min(w.next + self.settings.replay_rate as u64);
        if w.next < upto {
            let records = self.backend.read(plan.source, w.next, upto)?;
            check_contiguous(plan.source, w.next, upto, &records)?;
            for (offset, change) in records {
                w.stats.records_read += 1;
                if !plan.scope.contains(&change.key) {
                    continue;
                }
                let now = self.now;
                match self.store(to).replay(&change, plan.source, offset, now) {
                    Outcome::AlreadyApplied => w.stats.already_applied += 1,
                    applied => {
                        w.stats.replayed += 1;
                        self.append(to, applied)?;
                    }
                }
            }
            w.next = upto;
        }
        if self.now.ms() >= w.last_checkpoint.ms() + self.settings.checkpoint_ms {
            // Only what the destination has made durable may be recorded as done.
            self.end_offset(to)?;
            let record = w.machine.checkpoint_at(self.now, w.next).map_err(illegal)?;
            self.publish(record)?;
            w.last_checkpoint = self.now;
        }
        Ok(w.next >= end)
    }

    /// Replays everything from the snapshot offset a second time: idempotent apply makes it
    /// change nothing, which the digests before and after confirm.
    fn replay_twice(&mut self, w: &mut Worker) -> Result<(), LabError> {
        let plan = w.machine.plan().clone();
        let (Destination::Shard(to), Some(from)) = (plan.destination, w.machine.snapshot_offset())
        else {
            return Ok(());
        };
        if !self.settings.replay_twice || w.stats.replayed_twice > 0 {
            return Ok(());
        }
        let before = self.shards[&to].digest(&plan.scope, |_| true);
        let records = self.backend.read(plan.source, from, w.next)?;
        check_contiguous(plan.source, from, w.next, &records)?;
        for (offset, change) in records.iter().filter(|(_, c)| plan.scope.contains(&c.key)) {
            w.stats.replayed_twice += 1;
            let now = self.now;
            let outcome = self.store(to).replay(change, plan.source, *offset, now);
            if outcome != Outcome::AlreadyApplied {
                w.stats.replay_twice_changes += 1;
                self.append(to, outcome)?;
            }
        }
        if self.shards[&to].digest(&plan.scope, |_| true) != before {
            w.stats.replay_twice_changes = w.stats.replay_twice_changes.max(1);
        }
        Ok(())
    }

    /// Validation takes lab time in proportion to the rows it compares, while the source
    /// keeps serving (and the catch-up keeps replaying).
    fn start_validation(&mut self, w: &mut Worker) -> Result<(), LabError> {
        let plan = w.machine.plan();
        let rows = self.shards[&plan.source].digest(&plan.scope, |_| true).rows;
        let rate = self.settings.validate_rate.max(1) as u64;
        w.until = self.now.plus(rows.div_ceil(rate));
        let record = w.machine.validate(self.now).map_err(illegal)?;
        self.publish(record)
    }

    /// The validation's answer: a match blocks the scope (by changelog) or switches reads
    /// (by dual write); a mismatch aborts, and the source stays the owner.
    fn validated(&mut self, w: &mut Worker) -> Result<(), LabError> {
        let now = self.now;
        let plan = w.machine.plan().clone();
        let validation = self.compare(w);
        let record = w.machine.validated(now, validation).map_err(illegal)?;
        self.publish(record)?;
        if w.machine.phase() == Phase::Aborted {
            return Ok(());
        }
        match (plan.mode, w.switch.clone()) {
            (Mode::DualWrite, Switch::Tenant(route)) => {
                self.route_tenant(route, TenantState::ReadNew)?;
                w.until = now.plus(self.settings.read_switch_ms);
                let record = w.machine.switch_reads(now).map_err(illegal)?;
                self.publish(record)
            }
            _ => {
                let lease = now.plus(self.settings.block_lease_ms);
                self.store(plan.source).freeze(plan.scope, lease);
                w.stats.blocked_at = Some(now);
                let record = w.machine.block(now).map_err(illegal)?;
                self.publish(record)
            }
        }
    }

    /// Counts, key sets and checksums of the scope on the source and where the target
    /// routing puts each row.
    fn compare(&self, w: &Worker) -> Validation {
        let plan = w.machine.plan();
        let source = &self.shards[&plan.source];
        let mut keys: Vec<&RowKey> = source
            .rows()
            .map(|(k, _)| k)
            .filter(|k| plan.scope.contains(k) && destination(w, k) != plan.source)
            .collect();
        for (id, store) in &self.shards {
            let theirs = store.rows().map(|(k, _)| k);
            keys.extend(theirs.filter(|k| plan.scope.contains(k) && destination(w, k) == *id));
        }
        keys.sort();
        keys.dedup();
        let (mut ours, mut theirs, mut differing) = (Digest::default(), Digest::default(), 0);
        for key in keys {
            let copy = self.shards[&destination(w, key)].row(key);
            let original = source.row(key);
            if let Some(row) = original {
                ours.add(key, row);
            }
            if let Some(row) = copy {
                theirs.add(key, row);
            }
            let same = match (original, copy) {
                (Some(a), Some(b)) => a.checksum(key) == b.checksum(key),
                _ => false,
            };
            differing += u64::from(!same);
        }
        Validation {
            source: ours,
            destination: theirs,
            differing_rows: differing,
        }
    }

    /// Step 4's end: the new routing in force, the old owner fenced at the target version.
    fn commit(&mut self, w: &mut Worker) -> Result<(), LabError> {
        let now = self.now;
        let plan = w.machine.plan().clone();
        let source_end = self.end_offset(plan.source)?;
        let destination_end = match plan.destination {
            Destination::Shard(to) => self.end_offset(to)?,
            Destination::Buckets { .. } => 0,
        };
        let handover = Handover {
            at: now,
            source_end,
            destination_end,
        };
        let record = w.machine.commit(handover).map_err(illegal)?;
        self.publish(record)?;
        w.stats.committed_at = Some(now);
        match (&w.switch, plan.destination) {
            (Switch::Ring(ring), Destination::Shard(to)) => {
                self.publish(RoutingRecord::Ring(ring.clone()))?;
                let source = self.store(plan.source);
                source.hand_over(plan.scope, plan.target_version);
                source.unfreeze(&plan.scope);
                self.store(to).take_back(&plan.scope);
                self.owners.push((plan.scope, to, now));
                self.notify()
            }
            (Switch::Tenant(route), _) => self.route_tenant(*route, TenantState::Done),
            (Switch::Ring(_), Destination::Buckets { .. }) => Err(LabError::Internal(
                "a bucket move switches a tenant's route, not the ring".into(),
            )),
        }
    }

    /// Step 5's end: the old copy goes. The old owner says how many writes it took since the
    /// handover (source 003's "relinquishing ownership" line).
    fn clean_up(&mut self, w: &mut Worker) -> Result<(), LabError> {
        let now = self.now;
        let plan = w.machine.plan().clone();
        let record = w.machine.clean_up(now).map_err(illegal)?;
        self.publish(record)?;
        let old = plan.source;
        let keep = |key: &RowKey| destination(w, key) == old;
        let dropped = self.store(old).drop_rows(&plan.scope, now, keep);
        w.stats.dropped_rows = dropped.len() as u64;
        for outcome in dropped {
            self.append(old, outcome)?;
        }
        if let Scope::Arc(_) = plan.scope {
            let writes = self.shards[&old].writes_since_handover(&plan.scope);
            let text = format!(
                "{}: relinquishing ownership, {writes} writes since handover",
                plan.scope
            );
            self.store(old).log(now, "INFO", text);
        }
        Ok(())
    }

    fn route_tenant(&mut self, route: TenantRoute, state: TenantState) -> Result<(), LabError> {
        let route = TenantRoute {
            migration_state: state,
            ..route
        };
        self.publish(RoutingRecord::Tenant(route))?;
        self.notify()
    }

    fn append(&mut self, id: ShardId, outcome: Outcome) -> Result<(), LabError> {
        match outcome {
            Outcome::Applied { offset, change } => self.backend.append(id, offset, &change),
            Outcome::AlreadyApplied => Ok(()),
        }
    }

    fn store(&mut self, id: ShardId) -> &mut super::store::ShardStore {
        self.shards.get_mut(&id).expect("every shard exists")
    }
}

/// Where the target routing puts `key`.
fn destination(w: &Worker, key: &RowKey) -> ShardId {
    match w.machine.plan().destination {
        Destination::Shard(to) => to,
        Destination::Buckets { .. } => w.target.route_read(key).shard,
    }
}
