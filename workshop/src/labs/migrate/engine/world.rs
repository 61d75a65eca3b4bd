//! The profile service as one deterministic world: shard stores A to D, the service instances
//! (each a router with its own cached copy of the routing table), the migration worker, and the
//! ledger of what clients were told. Everything happens at a moment of lab time the caller
//! sets; the same calls in the same order give the same world, on any backend.
//!
//! An instance routes each write with its table and tags it with the table's version (the
//! fencing token). A write refused for an outdated version makes it read the routing topic at
//! once and retry (as a Kafka client refreshes metadata on NOT_LEADER); a refused read goes to
//! the range's owner now, and refreshes the table only of an instance that is not stale; a
//! blocked scope makes it hold the write and retry every millisecond. Instances watch the routing topic and refresh when a
//! migration changes the routing, except one whose refresh is delayed (a stale router).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::backend::{Backend, Reader};
use super::keys::{CommandId, LabTime, RowKey, Scope, ShardId};
use super::ledger::{Ack, Audit, Ledger, ReadRecord, Refused, Source};
use super::machine::Illegal;
use super::routing::{RoutingRecord, RoutingTable};
use super::store::{Command, Outcome, Refusal, ShardStore};
use super::worker::Worker;
use crate::lab::LabError;

/// A write is retried at most this often (a refresh after each refusal), then reported.
const MAX_ATTEMPTS: usize = 4;

/// How a migration's work is paced, in lab time, and how the service writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Rows a snapshot copy or backfill writes per millisecond (the throttle).
    pub copy_rate: usize,
    /// Changelog records a catch-up reads per millisecond.
    pub replay_rate: usize,
    /// Rows a validation compares per millisecond; the source keeps serving meanwhile.
    pub validate_rate: usize,
    /// How often a catch-up records its checkpoint in the routing topic.
    pub checkpoint_ms: u64,
    /// How long the old owner keeps its copy after a commit (source 004, step 5).
    pub retention_ms: u64,
    /// A freeze ends by itself this long after the worker last renewed it, so a worker that
    /// dies during the block does not block the scope for ever.
    pub block_lease_ms: u64,
    /// Dual write: how long reads use the new placement while old writes go on.
    pub read_switch_ms: u64,
    /// Whether the service passes each command's id as an idempotency key.
    pub idempotency_keys: bool,
    /// Whether the catch-up replays everything a second time before validating, to show
    /// that it changes nothing.
    pub replay_twice: bool,
}

/// A service instance: a router.
#[derive(Debug)]
pub(super) struct Instance {
    pub(super) table: RoutingTable,
    pub(super) held: VecDeque<(Command, Option<Source>)>,
    /// While set, the instance ignores routing changes until the second moment.
    pub(super) stale_until: Option<LabTime>,
}

/// What happened to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Acknowledged,
    /// Waiting for a block to end.
    Held,
}

pub struct World<B: Backend> {
    pub(super) now: LabTime,
    pub(super) shards: BTreeMap<ShardId, ShardStore>,
    pub(super) down: BTreeSet<ShardId>,
    pub(super) instances: Vec<Instance>,
    pub(super) worker: Option<Worker>,
    pub(super) finished: Vec<Worker>,
    pub(super) backend: B,
    pub(super) ledger: Ledger,
    pub(super) settings: Settings,
    pub(super) fencing: bool,
    /// Dual write: commands whose write to the second placement fails the first time.
    faults: BTreeSet<CommandId>,
    /// Scopes whose old owner has logged that it still serves writes after a handover.
    zombies: Vec<(ShardId, Scope)>,
    /// Who took which scope when (shards own what the first ring gives them from time 0).
    pub(super) owners: Vec<(Scope, ShardId, LabTime)>,
}

impl<B: Backend> World<B> {
    /// Shards A to D, empty; `routing` published in order; `instances` routers that read it.
    /// `fencing`: whether shards check fencing tokens.
    pub fn new(
        mut backend: B,
        settings: Settings,
        fencing: bool,
        routing: &[RoutingRecord],
        instances: usize,
    ) -> Result<Self, LabError> {
        for record in routing {
            backend.publish(record)?;
        }
        let mut tables = Vec::with_capacity(instances);
        for i in 0..instances {
            tables.push(table(&mut backend, Reader::Instance(i))?);
        }
        Ok(World {
            now: LabTime(0),
            shards: ShardId::ALL
                .into_iter()
                .map(|id| (id, ShardStore::new(id, fencing)))
                .collect(),
            down: BTreeSet::new(),
            instances: tables
                .into_iter()
                .map(|table| Instance {
                    table,
                    held: VecDeque::new(),
                    stale_until: None,
                })
                .collect(),
            worker: None,
            finished: Vec::new(),
            backend,
            ledger: Ledger::default(),
            settings,
            fencing,
            faults: BTreeSet::new(),
            zombies: Vec::new(),
            owners: Vec::new(),
        })
    }

    pub fn shard(&self, id: ShardId) -> &ShardStore {
        &self.shards[&id]
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The commands instance `i` holds, waiting for a block to end.
    pub fn held(&self, i: usize) -> impl Iterator<Item = (&Command, Option<Source>)> {
        self.instances[i].held.iter().map(|(c, s)| (c, *s))
    }

    pub fn instances(&self) -> usize {
        self.instances.len()
    }

    /// Whether instance `i` is ignoring routing changes (its refresh is delayed).
    pub fn is_stale(&self, i: usize) -> bool {
        self.instances[i].stale_until.is_some()
    }

    pub fn is_down(&self, id: ShardId) -> bool {
        self.down.contains(&id)
    }

    /// The first write of each of these commands to its second placement fails (dual write).
    pub fn inject_faults(&mut self, commands: impl IntoIterator<Item = CommandId>) {
        self.faults.extend(commands);
    }

    /// Instance `i` stops following routing changes until `until` (its refresh is delayed).
    pub fn delay_refresh(&mut self, i: usize, until: LabTime) {
        self.instances[i].stale_until = Some(until);
    }

    /// Moves the clock to `now`: delayed refreshes that are due happen, the migration worker
    /// does this millisecond's work, and held writes are retried.
    pub fn advance(&mut self, now: LabTime) -> Result<(), LabError> {
        self.now = now;
        for i in 0..self.instances.len() {
            if self.instances[i]
                .stale_until
                .is_some_and(|until| until <= now)
            {
                self.instances[i].stale_until = None;
                self.refresh(i)?;
            }
        }
        self.step_worker()?;
        for i in 0..self.instances.len() {
            while let Some((cmd, source)) = self.instances[i].held.front().cloned() {
                if self.attempt(i, &cmd, source)? == Written::Held {
                    break;
                }
                self.instances[i].held.pop_front();
            }
        }
        Ok(())
    }

    /// Instance `i` handles a write. A key with writes already held waits behind them, so one
    /// key's writes keep their order.
    pub fn write(
        &mut self,
        i: usize,
        cmd: Command,
        source: Option<Source>,
    ) -> Result<Written, LabError> {
        let behind = self.instances[i].held.iter().any(|(c, _)| c.key == cmd.key);
        let written = if behind {
            Written::Held
        } else {
            self.attempt(i, &cmd, source)?
        };
        if written == Written::Held {
            self.ledger.held += 1;
            self.instances[i].held.push_back((cmd, source));
        }
        Ok(written)
    }

    /// Instance `i` reads `key`; the ledger records whether the answer held every write
    /// acknowledged so far.
    pub fn read(&mut self, i: usize, key: &RowKey) -> Result<ReadRecord, LabError> {
        // Where a refused read goes next, when the instance does not refresh its own table.
        let mut redirected: Option<RoutingTable> = None;
        for _ in 0..MAX_ATTEMPTS {
            let route = redirected
                .as_ref()
                .unwrap_or(&self.instances[i].table)
                .route_read(key);
            let answer = if self.down.contains(&route.shard) {
                Err(Refusal::Unavailable)
            } else {
                let store = &self.shards[&route.shard];
                store.read(key, route.token).map(|row| row.cloned())
            };
            match answer {
                Ok(row) => {
                    let (missing, acknowledged) = self.ledger.missing(key, row.as_ref());
                    let record = ReadRecord {
                        at: self.now,
                        key: key.clone(),
                        instance: i,
                        shard: route.shard,
                        version: route.token,
                        found: row.is_some(),
                        missing,
                        acknowledged,
                    };
                    self.ledger.reads.push(record.clone());
                    return Ok(record);
                }
                Err(Refusal::Fenced { min_version }) => {
                    self.refused(i, route.shard, key, route.token, min_version, false);
                    // A read carries no version to fence with: the refusal sends it to the
                    // range's owner now, and an instance whose refresh is delayed goes on routing
                    // its writes with the table it has, until a write is refused (a write must
                    // carry the new version) or its refresh comes.
                    if self.is_stale(i) {
                        redirected = Some(table(&mut self.backend, Reader::Instance(i))?);
                    } else {
                        self.refresh(i)?;
                    }
                }
                Err(_) => break,
            }
        }
        Err(LabError::Internal(format!(
            "instance {i} could not read {key} at {}",
            self.now
        )))
    }

    /// Shard `id` crashes and loses its memory; everything it wrote had reached its changelog.
    /// A migration writing to it is interrupted.
    pub fn fail(&mut self, id: ShardId) -> Result<(), LabError> {
        self.end_offset(id)?;
        self.down.insert(id);
        self.shards.insert(id, ShardStore::new(id, self.fencing));
        self.interrupt_worker_of(id)
    }

    /// Shard `id` comes back, rebuilt from its changelog; an interrupted migration resumes.
    /// Returns the number of changelog records replayed into it.
    pub fn recover(&mut self, id: ShardId) -> Result<u64, LabError> {
        let end = self.backend.end_offset(id)?;
        let changes = self.backend.read(id, 0, end)?;
        check_contiguous(id, 0, end, &changes)?;
        let store = ShardStore::restore(id, self.fencing, changes.into_iter().map(|(_, c)| c));
        self.shards.insert(id, store);
        self.down.remove(&id);
        self.resume_worker_of(id)?;
        Ok(end)
    }

    /// Every acknowledged write against its key's owner in the routing topic's latest table,
    /// every read, and what is still held.
    pub fn audit(&mut self) -> Result<Audit, LabError> {
        let owners = table(&mut self.backend, Reader::Auditor)?;
        let mut audit = Audit::default();
        let owner_row = |key: &RowKey| self.shards[&owners.route_read(key).shard].row(key);
        for ack in self.ledger.acks() {
            if !owner_row(&ack.key).is_some_and(|row| row.has(ack.cmd)) {
                audit.lost.push(ack.clone());
            }
        }
        let keys: BTreeSet<&RowKey> = self.ledger.acks().iter().map(|a| &a.key).collect();
        for key in keys {
            if let Some(row) = owner_row(key) {
                let twice = row.effects.iter().filter(|(_, &n)| n > 1);
                audit
                    .duplicated
                    .extend(twice.map(|(cmd, _)| (key.clone(), *cmd)));
            }
        }
        audit.missed_reads = self
            .ledger
            .reads
            .iter()
            .filter(|r| r.missing > 0)
            .cloned()
            .collect();
        audit.still_held = self.instances.iter().map(|i| i.held.len()).sum();
        Ok(audit)
    }

    /// Sends `cmd` to every shard its route names; a refusal for an old version refreshes
    /// and retries, a failure retries the whole command, a block holds it.
    fn attempt(
        &mut self,
        i: usize,
        cmd: &Command,
        source: Option<Source>,
    ) -> Result<Written, LabError> {
        let keyed = self.settings.idempotency_keys;
        for attempt in 0..MAX_ATTEMPTS {
            let routes = self.instances[i].table.route_write(&cmd.key);
            let mut applied = Vec::with_capacity(routes.len());
            let mut refusal = None;
            for (n, route) in routes.iter().enumerate() {
                if n == 1 && attempt == 0 && self.faults.contains(&cmd.id) {
                    self.ledger.dual_write_failures += 1;
                    refusal = Some((route, Refusal::Unavailable));
                    break;
                }
                if self.down.contains(&route.shard) {
                    refusal = Some((route, Refusal::Unavailable));
                    break;
                }
                let store = self
                    .shards
                    .get_mut(&route.shard)
                    .expect("every shard exists");
                let since_handover = store.is_stale(&cmd.key, route.token);
                match store.write(cmd, route.token, keyed, self.now) {
                    Ok(Outcome::Applied { offset, change }) => {
                        self.backend.append(route.shard, offset, &change)?;
                        applied.push((route.shard, Some(offset)));
                        if since_handover {
                            self.zombie_write(route.shard, &cmd.key);
                        }
                    }
                    Ok(Outcome::AlreadyApplied) => applied.push((route.shard, None)),
                    Err(r) => {
                        refusal = Some((route, r));
                        break;
                    }
                }
            }
            match refusal {
                None => {
                    self.ledger.ack(Ack {
                        cmd: cmd.id,
                        key: cmd.key.clone(),
                        arrived: cmd.at,
                        at: self.now,
                        instance: i,
                        applied,
                        source,
                    });
                    return Ok(Written::Acknowledged);
                }
                Some((route, Refusal::Fenced { min_version })) => {
                    self.refused(i, route.shard, &cmd.key, route.token, min_version, true);
                    self.refresh(i)?;
                }
                Some((_, Refusal::Blocked)) => return Ok(Written::Held),
                Some((_, Refusal::Unavailable)) => {}
            }
        }
        Err(LabError::Internal(format!(
            "{} for {} was refused {MAX_ATTEMPTS} times at {}",
            cmd.id, cmd.key, self.now
        )))
    }

    fn refused(
        &mut self,
        i: usize,
        shard: ShardId,
        key: &RowKey,
        version: u32,
        min_version: u32,
        write: bool,
    ) {
        let what = if write { "write to" } else { "read of" };
        let text =
            format!("refused {what} {key} at version {version} (handed over at {min_version})");
        let now = self.now;
        if let Some(store) = self.shards.get_mut(&shard) {
            store.log(now, "WARN", text);
        }
        self.ledger.refusals.push(Refused {
            at: now,
            instance: i,
            shard,
            key: key.clone(),
            version,
            min_version,
            write,
        });
    }

    /// The first write an old owner accepts after handing a scope over: both owners now serve
    /// writes for it, as source 003's two nodes do.
    fn zombie_write(&mut self, old: ShardId, key: &RowKey) {
        let Some((scope, new, since)) = self
            .owners
            .iter()
            .rev()
            .find(|(scope, owner, _)| scope.contains(key) && *owner != old)
            .copied()
        else {
            return;
        };
        if self.zombies.contains(&(old, scope)) {
            return;
        }
        self.zombies.push((old, scope));
        let old_since = self.owner_since(old, &scope);
        let now = self.now;
        for (shard, since) in [(old, old_since), (new, since)] {
            let text = format!("{scope}: serving writes (owner since {since})");
            if let Some(store) = self.shards.get_mut(&shard) {
                store.log(now, "INFO", text);
            }
        }
    }

    /// When `shard` last took `scope`; time 0 for what the first ring gave it.
    pub(super) fn owner_since(&self, shard: ShardId, scope: &Scope) -> LabTime {
        self.owners
            .iter()
            .rev()
            .find(|(s, owner, _)| s == scope && *owner == shard)
            .map_or(LabTime(0), |(_, _, at)| *at)
    }

    /// Every instance not in a delayed-refresh window reads the routing topic.
    pub(super) fn notify(&mut self) -> Result<(), LabError> {
        for i in 0..self.instances.len() {
            if self.instances[i].stale_until.is_none() {
                self.refresh(i)?;
            }
        }
        Ok(())
    }

    pub(super) fn refresh(&mut self, i: usize) -> Result<(), LabError> {
        self.instances[i].table = table(&mut self.backend, Reader::Instance(i))?;
        Ok(())
    }

    pub(super) fn publish(&mut self, record: impl Into<RoutingRecord>) -> Result<(), LabError> {
        self.backend.publish(&record.into())
    }

    /// The end of `id`'s changelog, which must be where the shard's own count says.
    pub(super) fn end_offset(&mut self, id: ShardId) -> Result<u64, LabError> {
        let end = self.backend.end_offset(id)?;
        let wrote = self.shards[&id].log_end();
        if end != wrote && !self.down.contains(&id) {
            return Err(LabError::Broker(format!(
                "the changelog of shard {id} ends at offset {end}, but the shard wrote {wrote} \
                 changes: {}",
                offsets_apart(end as i64, wrote as i64)
            )));
        }
        Ok(end)
    }
}

/// What a changelog whose offsets differ from its shard's count holds, counted: records the
/// shard did not write, or changes of the shard that are not in it.
pub fn offsets_apart(in_topic: i64, counted: i64) -> String {
    let apart = in_topic.abs_diff(counted);
    let records = if apart == 1 { "record" } else { "records" };
    if in_topic > counted {
        format!("the topic holds {apart} {records} its shard did not write")
    } else {
        format!("{apart} of the shard's changes are not in the topic")
    }
}

/// A router's table as the routing topic gives it.
fn table(backend: &mut impl Backend, reader: Reader) -> Result<RoutingTable, LabError> {
    backend
        .routing(reader)?
        .table()
        .map_err(|e| LabError::Broker(format!("the routing topic is not usable: {e}")))
}

/// Records `from..to` of `id`'s changelog, each exactly once and in order, or an error.
pub(super) fn check_contiguous<T>(
    id: ShardId,
    from: u64,
    to: u64,
    records: &[(u64, T)],
) -> Result<(), LabError> {
    let offsets = records.iter().map(|(o, _)| *o);
    if records.len() as u64 != to.saturating_sub(from) || !offsets.eq(from..to) {
        return Err(LabError::Broker(format!(
            "reading offsets {from} to {to} of shard {id}'s changelog returned {} records out of \
             order or with gaps",
            records.len()
        )));
    }
    Ok(())
}

/// A machine that refuses a step is a bug in the world's driving of it.
pub(super) fn illegal(e: Illegal) -> LabError {
    LabError::Internal(e.to_string())
}
