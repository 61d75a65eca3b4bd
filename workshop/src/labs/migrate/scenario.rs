//! The lab's runs: which migration, which stale router, which failure, and the timeline that
//! drives the world one lab millisecond at a time. The timeline decides only *when* things
//! happen; every command it applies comes from its feed (the commands topic, read by the
//! service's consumer group), and every outcome is the world's.

use std::collections::BTreeMap;

use protocol::partitioner::partition_for_key;

use super::engine::backend::{Backend, Memory, Tally};
use super::engine::keys::{Arc, CommandId, LabTime, RowKey, Scope, ShardId};
use super::engine::ledger::{Audit, ReadRecord, Refused, Source};
use super::engine::machine::{Destination, MigrationRecord, Mode, Phase, Plan, Start, Variant};
use super::engine::routing::{
    RingVersion, RoutingRecord, Strategy, TenantRoute, TenantState, Token,
};
use super::engine::store::{Change, Command, LogLine};
use super::engine::worker::{Switch, WorkerStats};
use super::engine::world::{Settings, World};
use super::plan::{self, Plan as LabPlan};
use super::traffic::{Traffic, BEN, HOT_TENANT};
use crate::lab::LabError;

/// Partitions of the commands topics: one per service instance.
pub const COMMAND_PARTITIONS: i32 = 2;
/// Source 004: D at 40 takes (20, 40] from B.
pub const MOVED_ARC: Arc = Arc { from: 20, to: 40 };
pub const MOVED: Scope = Scope::Arc(MOVED_ARC);
/// Validation compares this many rows a lab millisecond.
const VALIDATE_RATE: usize = 4;
/// The consumer group commits what was applied this often (lab time).
const COMMIT_EVERY_MS: u64 = 50;

/// Source 004's ring: version 7 is A at 20, B at 50, C at 80.
pub fn ring_v7() -> RingVersion {
    RingVersion {
        version: 7,
        tokens: [(ShardId::A, 20), (ShardId::B, 50), (ShardId::C, 80)]
            .map(|(shard, position)| Token { shard, position })
            .to_vec(),
    }
}

/// Version 8 adds D at 40.
pub fn ring_v8() -> RingVersion {
    ring_v7().with(ShardId::D, 40, 8)
}

/// Version 9 gives (20, 40] back to B: version 7's tokens under a new number.
pub fn ring_v9() -> RingVersion {
    ring_v7().renumbered(9)
}

/// Tenant 42's route before the split: all its orders on the tenant's own shard.
pub fn tenant_route_v1() -> TenantRoute {
    TenantRoute {
        tenant: HOT_TENANT,
        strategy: Strategy::TenantHash,
        bucket_count: 1,
        route_version: 1,
        migration_state: TenantState::Stable,
    }
}

/// One run of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    RoutersOnly,
    CopyOnce,
    NoFencing,
    Protocol,
    /// The protocol with D failing during its catch-up.
    Failure,
    /// The protocol, then rolled back after D took writes, by a migration back.
    Rollback,
    /// The protocol, then "rolled back" by setting the routers back to B.
    RollbackRoutersOnly,
    /// Tenant 42 split by dual write, without idempotency keys.
    DualWriteNaive,
    /// The same with idempotency keys.
    DualWriteKeyed,
}

impl Scenario {
    #[cfg(test)]
    pub const ALL: [Scenario; 9] = [
        Scenario::RoutersOnly,
        Scenario::CopyOnce,
        Scenario::NoFencing,
        Scenario::Protocol,
        Scenario::Failure,
        Scenario::Rollback,
        Scenario::RollbackRoutersOnly,
        Scenario::DualWriteNaive,
        Scenario::DualWriteKeyed,
    ];

    /// The run's name, in its topics and group.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::RoutersOnly => "routers-only",
            Scenario::CopyOnce => "copy-once",
            Scenario::NoFencing => "no-fencing",
            Scenario::Protocol => "protocol",
            Scenario::Failure => "failure",
            Scenario::Rollback => "rollback",
            Scenario::RollbackRoutersOnly => "rollback-routers-only",
            Scenario::DualWriteNaive => "dual-write-naive",
            Scenario::DualWriteKeyed => "dual-write-keyed",
        }
    }

    pub fn is_tenant(self) -> bool {
        matches!(self, Scenario::DualWriteNaive | Scenario::DualWriteKeyed)
    }

    fn variant(self) -> Variant {
        match self {
            Scenario::RoutersOnly => Variant::RoutersOnly,
            Scenario::CopyOnce => Variant::CopyOnce,
            Scenario::NoFencing => Variant::NoFencing,
            _ => Variant::Protocol,
        }
    }

    /// Whether one instance's routing refresh is delayed across the handover.
    fn has_stale_router(self) -> bool {
        matches!(self, Scenario::NoFencing | Scenario::Protocol)
    }

    fn rollback(self) -> Option<Variant> {
        match self {
            Scenario::Rollback => Some(Variant::Protocol),
            Scenario::RollbackRoutersOnly => Some(Variant::RoutersOnly),
            _ => None,
        }
    }

    /// The world's settings for this run.
    fn settings(self, plan: &LabPlan) -> Settings {
        Settings {
            copy_rate: plan.copy_rate as usize,
            replay_rate: plan.replay_rate as usize,
            validate_rate: VALIDATE_RATE,
            checkpoint_ms: 10,
            retention_ms: 300,
            block_lease_ms: 20,
            read_switch_ms: 20,
            idempotency_keys: self != Scenario::DualWriteNaive,
            replay_twice: self == Scenario::Protocol,
        }
    }

    /// What the routing topic holds before the run starts.
    fn initial_routing(self) -> Vec<RoutingRecord> {
        if self.is_tenant() {
            // The tenant's split runs on the ring after D joined.
            vec![
                RoutingRecord::Ring(ring_v8()),
                RoutingRecord::Tenant(tenant_route_v1()),
            ]
        } else {
            vec![RoutingRecord::Ring(ring_v7())]
        }
    }

    /// The world this run starts from, on `backend`: one instance per commands partition,
    /// `faults` the commands whose second write fails the first time.
    pub fn world<B: Backend>(
        self,
        backend: B,
        plan: &LabPlan,
        faults: &[CommandId],
    ) -> Result<World<B>, LabError> {
        let mut world = World::new(
            backend,
            self.settings(plan),
            self.variant().fences(),
            &self.initial_routing(),
            COMMAND_PARTITIONS as usize,
        )?;
        world.inject_faults(faults.iter().copied());
        Ok(world)
    }
}

/// Where a run's commands come from, one lab millisecond at a time.
pub trait Feed {
    /// The commands that arrive at `now`, in order, with where each was read.
    fn due(&mut self, now: LabTime) -> Result<Vec<(Command, Option<Source>)>, LabError>;

    /// Commits, per partition, the offset below which every command has been handled (held
    /// commands not yet).
    fn commit(&mut self, upto: &BTreeMap<i32, i64>) -> Result<(), LabError>;
}

/// Commands straight from the traffic (the engine's own tests).
pub struct TrafficFeed<'t> {
    commands: std::iter::Peekable<std::slice::Iter<'t, Command>>,
}

impl<'t> TrafficFeed<'t> {
    pub fn new(traffic: &'t Traffic) -> Self {
        TrafficFeed {
            commands: traffic.commands.iter().peekable(),
        }
    }
}

impl Feed for TrafficFeed<'_> {
    fn due(&mut self, now: LabTime) -> Result<Vec<(Command, Option<Source>)>, LabError> {
        let mut due = Vec::new();
        while let Some(cmd) = self.commands.next_if(|c| c.at <= now) {
            due.push((cmd.clone(), None));
        }
        Ok(due)
    }

    fn commit(&mut self, _upto: &BTreeMap<i32, i64>) -> Result<(), LabError> {
        Ok(())
    }
}

/// The service instance that handles a key: the one consuming its commands partition.
pub fn instance_of(key: &RowKey) -> usize {
    partition_for_key(key.to_string().as_bytes(), COMMAND_PARTITIONS) as usize
}

/// When the timeline did what.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Events {
    pub stale_instance: Option<usize>,
    pub stale_until: Option<LabTime>,
    pub failed_at: Option<LabTime>,
    pub recovered_at: Option<LabTime>,
    pub restored_records: u64,
    pub rolled_back_at: Option<LabTime>,
}

/// Everything a run measured, read off the world at its end.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub scenario: Scenario,
    pub events: Events,
    pub audit: Audit,
    pub acknowledged: usize,
    pub reads: Vec<ReadRecord>,
    pub refusals: Vec<Refused>,
    pub held: u64,
    pub dual_write_failures: u64,
    pub migrations: Vec<MigrationSummary>,
    /// Every shard's log lines, in time order.
    pub lines: Vec<LogLine>,
    /// Every shard's changelog as the backend holds it at the end.
    pub changelogs: BTreeMap<ShardId, Vec<(u64, Change)>>,
    pub routing_log: Vec<(u64, RoutingRecord)>,
    pub writes_since_handover: u64,
    /// The consumer group's lag on the commands topic once the run is over (none in memory).
    pub commands_lag: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MigrationSummary {
    pub plan: Plan,
    pub phase: Phase,
    pub records: Vec<MigrationRecord>,
    pub stats: WorkerStats,
}

impl Run {
    /// The run's first migration (the move itself; a rollback is the second).
    pub fn migration(&self) -> Option<&MigrationSummary> {
        self.migrations.first()
    }

    pub fn rollback(&self) -> Option<&MigrationSummary> {
        self.migrations.get(1)
    }
}

/// The move of (20, 40] from B to D at version 8.
pub fn b_to_d(variant: Variant) -> Plan {
    Plan {
        id: "b-to-d".into(),
        source: ShardId::B,
        destination: Destination::Shard(ShardId::D),
        scope: MOVED,
        from_version: 7,
        target_version: 8,
        mode: Mode::Changelog,
        variant,
        start: Start::Snapshot,
    }
}

/// Tenant 42 from its own shard to `buckets` buckets, by dual write, at route version 2.
pub fn split_tenant(buckets: u32) -> (Plan, TenantRoute) {
    let v1 = tenant_route_v1();
    let plan = Plan {
        id: format!("tenant-{HOT_TENANT}-buckets"),
        source: ShardId::C,
        destination: Destination::Buckets {
            bucket_count: buckets,
        },
        scope: Scope::Tenant(HOT_TENANT),
        from_version: v1.route_version,
        target_version: 2,
        mode: Mode::DualWrite,
        variant: Variant::Protocol,
        start: Start::Snapshot,
    };
    let route = TenantRoute {
        strategy: Strategy::Bucketed,
        bucket_count: buckets,
        route_version: 2,
        ..v1
    };
    (plan, route)
}

/// Runs `scenario` over `traffic` on `world`, its commands from `feed`.
pub fn run<B: Backend>(
    world: &mut World<B>,
    scenario: Scenario,
    plan: &LabPlan,
    traffic: &Traffic,
    feed: &mut impl Feed,
) -> Result<Run, LabError> {
    let mut events = Events::default();
    let mut script = Script::default();
    let mut reads = traffic.reads.iter().peekable();
    let mut handled: BTreeMap<i32, i64> = BTreeMap::new();
    let deadline = traffic.duration + plan::DRAIN_LIMIT_MS;
    for t in 0..=deadline {
        let now = LabTime(t);
        world.advance(now)?;
        script.step(world, scenario, plan, now, &mut events)?;
        if t >= traffic.duration {
            if script.settled(world, scenario) {
                feed.commit(&committable(world, &handled))?;
                return finish(world, scenario, events);
            }
            continue;
        }
        for (cmd, source) in feed.due(now)? {
            let i = source.map_or_else(|| instance_of(&cmd.key), |s| s.partition as usize);
            if let Some(s) = source {
                handled.insert(s.partition, s.offset + 1);
            }
            world.write(i, cmd, source)?;
        }
        while let Some((_, key)) = reads.next_if(|(at, _)| *at <= now) {
            world.read(instance_of(key), key)?;
        }
        if t % COMMIT_EVERY_MS == 0 {
            feed.commit(&committable(world, &handled))?;
        }
    }
    Err(LabError::Internal(format!(
        "run {} did not settle within {} lab ms after its traffic",
        scenario.name(),
        plan::DRAIN_LIMIT_MS
    )))
}

/// Runs `scenario` in memory, its commands straight from `traffic`: the decisions a run on
/// Kafka makes, and what it asked of its logs to make them (for the Kafka run's deadline).
pub fn rehearse(
    scenario: Scenario,
    plan: &LabPlan,
    traffic: &Traffic,
    faults: &[CommandId],
) -> Result<(Run, Tally), LabError> {
    let mut world = scenario.world(Memory::default(), plan, faults)?;
    let run = run(
        &mut world,
        scenario,
        plan,
        traffic,
        &mut TrafficFeed::new(traffic),
    )?;
    Ok((run, world.backend_mut().tally()))
}

/// Per partition, the offset below which every command was handled: the next one to read, or
/// the first still held.
fn committable<B: Backend>(world: &World<B>, handled: &BTreeMap<i32, i64>) -> BTreeMap<i32, i64> {
    let mut upto = handled.clone();
    for i in 0..world.instances() {
        for (_, source) in world.held(i) {
            if let Some(s) = source {
                let at = upto.entry(s.partition).or_insert(s.offset);
                *at = (*at).min(s.offset);
            }
        }
    }
    upto
}

/// The timeline's own moves, each once.
#[derive(Debug, Default)]
struct Script {
    started: bool,
    committed: Option<LabTime>,
    catching_up: Option<LabTime>,
    rolled_back: bool,
}

impl Script {
    fn step<B: Backend>(
        &mut self,
        world: &mut World<B>,
        scenario: Scenario,
        plan: &LabPlan,
        now: LabTime,
        events: &mut Events,
    ) -> Result<(), LabError> {
        let t = now.ms();
        if !self.started && scenario.is_tenant() && t == plan::SPLIT_AT {
            self.started = true;
            let (migration, route) = split_tenant(plan.buckets);
            return world.start(migration, Switch::Tenant(route));
        }
        if !self.started && !scenario.is_tenant() && t == plan::MIGRATE_AT {
            self.started = true;
            world.start(b_to_d(scenario.variant()), Switch::Ring(ring_v8()))?;
            if scenario.has_stale_router() {
                // Ben's instance stops following the routing topic before the move.
                let stale = instance_of(&RowKey::user(BEN));
                world.delay_refresh(stale, LabTime(u64::MAX));
                events.stale_instance = Some(stale);
            }
            return Ok(());
        }
        let first = world.workers().next();
        let phase = first.map(|w| w.machine().phase());
        let committed = first.and_then(|w| w.stats().committed_at);
        if self.catching_up.is_none() && phase == Some(Phase::CatchingUp) {
            self.catching_up = Some(now);
        }
        if scenario == Scenario::Failure {
            let since = self.catching_up.map(|at| t - at.ms());
            if since == Some(plan::FAIL_AFTER_MS) && events.failed_at.is_none() {
                world.fail(ShardId::D)?;
                events.failed_at = Some(now);
            }
            if events
                .failed_at
                .is_some_and(|at| t == at.ms() + plan::DOWN_MS)
            {
                events.restored_records = world.recover(ShardId::D)?;
                events.recovered_at = Some(now);
            }
        }
        if self.committed.is_none() {
            if let Some(at) = committed {
                self.committed = Some(at);
                if let Some(stale) = events.stale_instance {
                    let until = at.plus(plan.stale_ms);
                    world.delay_refresh(stale, until);
                    events.stale_until = Some(until);
                }
            }
        }
        if let (Some(variant), Some(at), false) =
            (scenario.rollback(), self.committed, self.rolled_back)
        {
            if t == at.ms() + plan::ROLLBACK_AFTER_MS {
                self.rolled_back = true;
                world.roll_back(variant, ring_v9())?;
                events.rolled_back_at = Some(now);
            }
        }
        Ok(())
    }

    /// Every migration of the run done (or as far as its variant goes), nothing held, every
    /// router current.
    fn settled<B: Backend>(&self, world: &World<B>, scenario: Scenario) -> bool {
        let migrations_done = world.workers().count()
            == 1 + usize::from(scenario.rollback().is_some())
            && world.workers().all(|w| w.machine().is_done());
        let quiet =
            (0..world.instances()).all(|i| world.held(i).next().is_none() && !world.is_stale(i));
        migrations_done && quiet && !world.is_down(ShardId::D)
    }
}

fn finish<B: Backend>(
    world: &mut World<B>,
    scenario: Scenario,
    events: Events,
) -> Result<Run, LabError> {
    let mut changelogs = BTreeMap::new();
    for id in ShardId::ALL {
        let end = world.backend_mut().end_offset(id)?;
        changelogs.insert(id, world.backend_mut().read(id, 0, end)?);
    }
    let routing_log = world.backend_mut().routing_log()?;
    let audit = world.audit()?;
    let mut lines: Vec<LogLine> = ShardId::ALL
        .iter()
        .flat_map(|id| world.shard(*id).lines().iter().cloned())
        .collect();
    lines.sort_by_key(|l| l.at);
    let migrations = world
        .workers()
        .map(|w| MigrationSummary {
            plan: w.machine().plan().clone(),
            phase: w.machine().phase(),
            records: w.machine().records().to_vec(),
            stats: w.stats().clone(),
        })
        .collect();
    let ledger = world.ledger();
    Ok(Run {
        scenario,
        events,
        audit,
        acknowledged: ledger.acks().len(),
        reads: ledger.reads.clone(),
        refusals: ledger.refusals.clone(),
        held: ledger.held,
        dual_write_failures: ledger.dual_write_failures,
        migrations,
        lines,
        changelogs,
        routing_log,
        writes_since_handover: world.shard(ShardId::B).writes_since_handover(&MOVED),
        commands_lag: None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::labs::migrate::plan::tests::default_plan;
    use crate::labs::migrate::traffic;

    /// Seed `seed`'s run of `scenario` with the default flags, in memory.
    pub(crate) fn in_memory(scenario: Scenario, seed: u64) -> Run {
        let plan = default_plan();
        let (traffic, faults) = if scenario.is_tenant() {
            traffic::tenant(&plan, seed)
        } else {
            (traffic::profiles(&plan, seed), Vec::new())
        };
        rehearse(scenario, &plan, &traffic, &faults).unwrap().0
    }
}
