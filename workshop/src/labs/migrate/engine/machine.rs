//! The migration as a state machine: its phases, which transitions each kind of migration
//! allows, and the record each step writes to the routing topic (source 004's five steps, source
//! 001's stages).
//!
//! Moving a scope by the change log (source 004): `prepared` (source, destination, scope and
//! target version recorded, the source still leading), `copying` (a consistent snapshot at a
//! recorded changelog offset, copied at a throttled rate), `catching_up` (the source's changelog
//! replayed from that offset, idempotently, with checkpoints), `validating` (counts, key sets,
//! checksums; the source still serves), `blocked` (writes to the scope wait, the rest of the
//! changelog is applied), `committed` (ownership at the target version; the source refuses older
//! versions), `retained` (the source's old copy kept for a recovery period), `cleaned_up`.
//!
//! Moving a tenant by dual write (source 001): `prepared` (the new route, writes to both
//! placements), `copying` (a throttled backfill), `validating`, `reads_switched`, `committed`
//! (old writes stopped), `retained`, `cleaned_up`.
//!
//! A failure of the destination `interrupted`s a migration before it commits; it resumes from
//! the last checkpoint recorded in the routing topic. After a commit, going back is a migration
//! of its own in the other direction (`rolled_back` ends this one), which replays the
//! destination's changes since the handover: setting routers back is not enough (source 004).
//!
//! The naive variants are the same machine with steps left out: routers only (no data moved),
//! copy once (no catch-up, no block), no fencing (every step, but the old owner does not check
//! versions). The machine records what they do; what they lose is counted by
//! [`super::audit`].

use serde::{Deserialize, Serialize};

use super::keys::{LabTime, Scope, ShardId};
use super::store::Digest;

/// Which migration protocol runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Switch the routing to the target version without moving data.
    RoutersOnly,
    /// Copy the scope once, then switch.
    CopyOnce,
    /// Every step, but the old owner does not check fencing tokens.
    NoFencing,
    /// Every step.
    Protocol,
}

impl Variant {
    /// Whether shards check fencing tokens: each naive variant leaves out one thing, and only
    /// this one leaves out the fence.
    pub fn fences(self) -> bool {
        self != Variant::NoFencing
    }
}

/// How changes made during the move reach the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Replaying the source's changelog (source 004).
    Changelog,
    /// Writing both placements (source 001's controlled dual write).
    DualWrite,
}

/// Where the destination's state starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// A snapshot of the source, copied.
    Snapshot,
    /// The destination already holds the scope as of this offset of the source's changelog: the
    /// old owner's retained copy, when a migration is undone.
    Retained { offset: u64 },
}

/// Where a migration moves its scope to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Destination {
    Shard(ShardId),
    /// A tenant's rows to the shards of its buckets.
    Buckets {
        bucket_count: u32,
    },
}

/// What a migration is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub id: String,
    pub source: ShardId,
    pub destination: Destination,
    pub scope: Scope,
    pub from_version: u32,
    pub target_version: u32,
    pub mode: Mode,
    pub variant: Variant,
    pub start: Start,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Planned,
    Prepared,
    Copying,
    CatchingUp,
    Validating,
    Blocked,
    ReadsSwitched,
    Committed,
    Retained,
    CleanedUp,
    Interrupted,
    Aborted,
    RolledBack,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Planned => "planned",
            Phase::Prepared => "prepared",
            Phase::Copying => "copying",
            Phase::CatchingUp => "catching_up",
            Phase::Validating => "validating",
            Phase::Blocked => "blocked",
            Phase::ReadsSwitched => "reads_switched",
            Phase::Committed => "committed",
            Phase::Retained => "retained",
            Phase::CleanedUp => "cleaned_up",
            Phase::Interrupted => "interrupted",
            Phase::Aborted => "aborted",
            Phase::RolledBack => "rolled_back",
        }
    }

    /// Whether the migration has ended (successfully or not).
    pub fn is_final(self) -> bool {
        matches!(self, Phase::CleanedUp | Phase::Aborted | Phase::RolledBack)
    }
}

/// Both sides of a validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    pub source: Digest,
    pub destination: Digest,
    /// Rows whose checksums differ between the two sides.
    pub differing_rows: u64,
}

impl Validation {
    pub fn matches(&self) -> bool {
        self.source == self.destination && self.differing_rows == 0
    }
}

/// Where ownership changed hands: both changelogs' end offsets at the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handover {
    pub at: LabTime,
    pub source_end: u64,
    pub destination_end: u64,
}

/// What a step writes to the routing topic, under `migration/<id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationRecord {
    pub id: String,
    pub state: Phase,
    pub at: LabTime,
    pub source: ShardId,
    pub destination: Destination,
    pub scope: Scope,
    pub from_version: u32,
    pub target_version: u32,
    pub variant: Variant,
    pub snapshot_offset: Option<u64>,
    /// The checkpoint: the next offset of the source's changelog to replay.
    pub next_offset: Option<u64>,
    pub validation: Option<Validation>,
    pub handover: Option<Handover>,
    /// The phase a failure interrupted.
    pub interrupted: Option<Phase>,
}

/// A step the machine does not allow from where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("migration {id}: {why} ({from} -> {to})")]
pub struct Illegal {
    pub id: String,
    pub from: &'static str,
    pub to: &'static str,
    pub why: &'static str,
}

/// One migration in progress.
#[derive(Debug, Clone)]
pub struct Migration {
    plan: Plan,
    phase: Phase,
    snapshot_offset: Option<u64>,
    checkpoint: Option<u64>,
    validation: Option<Validation>,
    handover: Option<Handover>,
    interrupted: Option<Phase>,
    records: Vec<MigrationRecord>,
}

impl Migration {
    pub fn new(plan: Plan) -> Self {
        let snapshot_offset = match plan.start {
            Start::Retained { offset } => Some(offset),
            Start::Snapshot => None,
        };
        Migration {
            plan,
            phase: Phase::Planned,
            snapshot_offset,
            checkpoint: snapshot_offset,
            validation: None,
            handover: None,
            interrupted: None,
            records: Vec::new(),
        }
    }

    /// The migration as its last durable record describes it, after the worker that ran it
    /// was lost: an interrupted migration resumes where its record says.
    pub fn recover(plan: Plan, record: &MigrationRecord) -> Self {
        let mut migration = Migration::new(plan);
        migration.phase = record.state;
        migration.snapshot_offset = record.snapshot_offset;
        migration.checkpoint = record.next_offset;
        migration.validation = record.validation;
        migration.handover = record.handover;
        migration.interrupted = record.interrupted;
        migration
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn snapshot_offset(&self) -> Option<u64> {
        self.snapshot_offset
    }

    /// The last checkpoint recorded: where a resumed catch-up starts.
    pub fn checkpoint(&self) -> Option<u64> {
        self.checkpoint
    }

    #[cfg(test)]
    pub fn validation(&self) -> Option<&Validation> {
        self.validation.as_ref()
    }

    pub fn handover(&self) -> Option<&Handover> {
        self.handover.as_ref()
    }

    /// Every record this machine wrote, in order.
    pub fn records(&self) -> &[MigrationRecord] {
        &self.records
    }

    /// Step 1: the migration record, durable before anything moves.
    pub fn prepare(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        self.go(Phase::Prepared, at)
    }

    /// Step 2: a snapshot of the source at changelog offset `offset` (none for a backfill,
    /// which copies rows as they are while dual writes keep both placements current).
    pub fn snapshot(
        &mut self,
        at: LabTime,
        offset: Option<u64>,
    ) -> Result<MigrationRecord, Illegal> {
        if self.phase == Phase::Copying {
            // A copy restarted after a failure takes a fresh snapshot.
            self.snapshot_offset = offset;
            self.checkpoint = offset;
            return Ok(self.record(at));
        }
        let record = self.go(Phase::Copying, at)?;
        self.snapshot_offset = offset;
        self.checkpoint = offset;
        Ok(self.rewrite_last(record))
    }

    /// Step 3: replaying the changelog from the snapshot's offset.
    pub fn catch_up(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        if self.snapshot_offset.is_none() {
            return Err(self.illegal(Phase::CatchingUp, "no snapshot offset to replay from"));
        }
        self.go(Phase::CatchingUp, at)
    }

    /// Records how far the replay got: a resumed catch-up starts here.
    pub fn checkpoint_at(&mut self, at: LabTime, next: u64) -> Result<MigrationRecord, Illegal> {
        if !matches!(
            self.phase,
            Phase::CatchingUp | Phase::Validating | Phase::Blocked
        ) {
            return Err(self.illegal(self.phase, "a checkpoint needs a catch-up in progress"));
        }
        self.checkpoint = Some(next);
        Ok(self.record(at))
    }

    /// Starts validating while the source still serves.
    pub fn validate(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        self.go(Phase::Validating, at)
    }

    /// The validation's result: a mismatch aborts the migration (the source stays the owner).
    pub fn validated(
        &mut self,
        at: LabTime,
        validation: Validation,
    ) -> Result<MigrationRecord, Illegal> {
        if !matches!(self.phase, Phase::Validating | Phase::Blocked) {
            return Err(self.illegal(self.phase, "nothing is being validated"));
        }
        self.validation = Some(validation);
        if validation.matches() {
            Ok(self.record(at))
        } else {
            self.go(Phase::Aborted, at)
        }
    }

    /// Step 4: writes to the scope wait while the rest of the changelog is applied.
    pub fn block(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        self.require_validation(Phase::Blocked)?;
        self.go(Phase::Blocked, at)
    }

    /// Source 001: reads move to the new placement; writes still reach both.
    pub fn switch_reads(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        self.require_validation(Phase::ReadsSwitched)?;
        self.go(Phase::ReadsSwitched, at)
    }

    /// Ownership passes at the target version; `handover` holds both changelogs' ends.
    pub fn commit(&mut self, handover: Handover) -> Result<MigrationRecord, Illegal> {
        if matches!(self.phase, Phase::Blocked) {
            self.require_validation(Phase::Committed)?;
        }
        let record = self.go(Phase::Committed, handover.at)?;
        self.handover = Some(handover);
        Ok(self.rewrite_last(record))
    }

    /// Step 5: the old copy stays for a recovery period.
    pub fn retain(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        self.go(Phase::Retained, at)
    }

    pub fn clean_up(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        self.go(Phase::CleanedUp, at)
    }

    /// The destination failed before the commit.
    pub fn interrupt(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        let was = self.phase;
        let record = self.go(Phase::Interrupted, at)?;
        self.interrupted = Some(was);
        Ok(self.rewrite_last(record))
    }

    /// The destination is back: a copy starts over, anything later resumes its catch-up from
    /// the last checkpoint (validation and the block come again).
    pub fn resume(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        let to = match self.interrupted {
            Some(Phase::Copying) => Phase::Copying,
            Some(_) => Phase::CatchingUp,
            None => return Err(self.illegal(Phase::CatchingUp, "nothing was interrupted")),
        };
        let record = self.go(to, at)?;
        self.interrupted = None;
        self.validation = None;
        Ok(self.rewrite_last(record))
    }

    /// A migration in the other direction took over after this one committed.
    pub fn roll_back(&mut self, at: LabTime) -> Result<MigrationRecord, Illegal> {
        self.go(Phase::RolledBack, at)
    }

    /// Whether the migration has nothing left to do: it ended, or its variant's last step is
    /// behind it (routers only stops at the commit).
    pub fn is_done(&self) -> bool {
        self.phase.is_final() || self.path().last() == Some(&self.phase)
    }

    /// The phases this migration passes through, in order, when nothing fails.
    pub fn path(&self) -> Vec<Phase> {
        use Phase::*;
        let plan = &self.plan;
        let mut path = vec![Planned, Prepared];
        match (plan.mode, plan.variant, plan.start) {
            (Mode::Changelog, Variant::RoutersOnly, _) => {
                return vec![Planned, Prepared, Committed]
            }
            (Mode::Changelog, Variant::CopyOnce, _) => path.extend([Copying, Committed]),
            (Mode::Changelog, _, Start::Snapshot) => {
                path.extend([Copying, CatchingUp, Validating, Blocked, Committed])
            }
            (Mode::Changelog, _, Start::Retained { .. }) => {
                path.extend([CatchingUp, Validating, Blocked, Committed])
            }
            (Mode::DualWrite, _, _) => path.extend([Copying, Validating, ReadsSwitched, Committed]),
        }
        path.extend([Retained, CleanedUp]);
        path
    }

    fn allowed(&self, to: Phase) -> Result<(), &'static str> {
        use Phase::*;
        let path = self.path();
        let next = path
            .iter()
            .position(|p| *p == self.phase)
            .and_then(|i| path.get(i + 1));
        if next == Some(&to) {
            return Ok(());
        }
        let protocol = matches!(self.plan.variant, Variant::Protocol | Variant::NoFencing);
        match (self.phase, to) {
            (Copying | CatchingUp | Validating | Blocked, Interrupted) if protocol => Ok(()),
            (Interrupted, Copying | CatchingUp) if path.contains(&to) => Ok(()),
            (Validating | Blocked, Aborted) => Ok(()),
            (Committed | Retained, RolledBack) => Ok(()),
            _ if self.phase.is_final() => Err("the migration has ended"),
            _ => Err("not the next step of this migration"),
        }
    }

    fn require_validation(&self, to: Phase) -> Result<(), Illegal> {
        match &self.validation {
            Some(v) if v.matches() => Ok(()),
            Some(_) => Err(self.illegal(to, "the validation did not match")),
            None => Err(self.illegal(to, "not validated")),
        }
    }

    fn go(&mut self, to: Phase, at: LabTime) -> Result<MigrationRecord, Illegal> {
        self.allowed(to).map_err(|why| self.illegal(to, why))?;
        self.phase = to;
        Ok(self.record(at))
    }

    fn illegal(&self, to: Phase, why: &'static str) -> Illegal {
        Illegal {
            id: self.plan.id.clone(),
            from: self.phase.name(),
            to: to.name(),
            why,
        }
    }

    fn record(&mut self, at: LabTime) -> MigrationRecord {
        let plan = &self.plan;
        let record = MigrationRecord {
            id: plan.id.clone(),
            state: self.phase,
            at,
            source: plan.source,
            destination: plan.destination,
            scope: plan.scope,
            from_version: plan.from_version,
            target_version: plan.target_version,
            variant: plan.variant,
            snapshot_offset: self.snapshot_offset,
            next_offset: self.checkpoint,
            validation: self.validation,
            handover: self.handover,
            interrupted: self.interrupted,
        };
        self.records.push(record.clone());
        record
    }

    /// Replaces the record just written by one that includes what the step set afterwards.
    fn rewrite_last(&mut self, record: MigrationRecord) -> MigrationRecord {
        self.records.pop();
        self.record(record.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labs::migrate::engine::keys::Arc;

    fn plan(variant: Variant) -> Plan {
        Plan {
            id: "b-to-d".into(),
            source: ShardId::B,
            destination: Destination::Shard(ShardId::D),
            scope: Scope::Arc(Arc { from: 20, to: 40 }),
            from_version: 7,
            target_version: 8,
            mode: Mode::Changelog,
            variant,
            start: Start::Snapshot,
        }
    }

    fn matching() -> Validation {
        let d = Digest {
            rows: 3,
            key_set: 9,
            checksum: 12,
            amount: 0,
        };
        Validation {
            source: d,
            destination: d,
            differing_rows: 0,
        }
    }

    fn handover(at: u64) -> Handover {
        Handover {
            at: LabTime(at),
            source_end: 40,
            destination_end: 12,
        }
    }

    #[test]
    fn steps_out_of_order_are_refused() {
        let mut m = Migration::new(plan(Variant::Protocol));
        m.prepare(LabTime(1)).unwrap();
        assert!(m.catch_up(LabTime(2)).is_err(), "no snapshot yet");
        m.snapshot(LabTime(2), Some(3)).unwrap();
        assert!(
            m.commit(handover(3)).is_err(),
            "a protocol commit needs the block"
        );
        m.catch_up(LabTime(3)).unwrap();
        m.validate(LabTime(4)).unwrap();
        let err = m.block(LabTime(5)).unwrap_err();
        assert_eq!(err.why, "not validated");
        let mut bad = matching();
        bad.differing_rows = 2;
        let aborted = m.validated(LabTime(5), bad).unwrap();
        assert_eq!(aborted.state, Phase::Aborted);
        assert!(m.block(LabTime(6)).is_err());
    }

    #[test]
    fn the_naive_variants_leave_steps_out() {
        let mut routers = Migration::new(plan(Variant::RoutersOnly));
        routers.prepare(LabTime(1)).unwrap();
        assert!(routers.snapshot(LabTime(2), Some(0)).is_err());
        routers.commit(handover(2)).unwrap();
        let mut copy = Migration::new(plan(Variant::CopyOnce));
        copy.prepare(LabTime(1)).unwrap();
        copy.snapshot(LabTime(2), Some(5)).unwrap();
        assert!(
            copy.catch_up(LabTime(3)).is_err(),
            "copy once never catches up"
        );
        copy.commit(handover(4)).unwrap();
        assert!(copy.interrupt(LabTime(5)).is_err());
        assert_eq!(
            Migration::new(plan(Variant::NoFencing)).path(),
            Migration::new(plan(Variant::Protocol)).path()
        );
        assert!(!Variant::NoFencing.fences() && Variant::CopyOnce.fences());
    }
}
