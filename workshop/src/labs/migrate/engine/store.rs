//! A shard store: the rows of one shard, its change log's end offset, and its write path's
//! rules (source 004, step 4: the write path enforces ownership decisions).
//!
//! Every change the store makes is returned with its changelog offset, for the caller to append
//! to the shard's changelog topic: the log is the change stream, and an offset in it is where a
//! snapshot starts. A write carries the routing version the router used (the fencing token); a
//! scope handed over at version v refuses tokens below v when fencing is on, and a frozen scope
//! (the brief write block) refuses writes until its lease ends. Commands carry an id; with
//! idempotency keys the store applies each id once per row, so a replay changes nothing.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::keys::{CommandId, LabTime, RowKey, Scope, ShardId};
use crate::kit::schemes::key_hash;

/// What a command does to a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Sets a profile field.
    Set { field: String, value: String },
    /// Adds to an amount (an order's total): not idempotent by itself.
    Add { field: String, amount: i64 },
}

/// A field's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Text(String),
    Amount(i64),
}

/// A row: its fields, and how many times each command took effect on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub fields: BTreeMap<String, Value>,
    #[serde(with = "effects_as_pairs")]
    pub effects: BTreeMap<CommandId, u32>,
}

/// JSON object keys are strings; a row's effects travel as `[[command, times], ...]`.
mod effects_as_pairs {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::CommandId;

    pub fn serialize<S: Serializer>(
        effects: &BTreeMap<CommandId, u32>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let pairs: Vec<(CommandId, u32)> = effects.iter().map(|(c, n)| (*c, *n)).collect();
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<CommandId, u32>, D::Error> {
        Ok(Vec::<(CommandId, u32)>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

impl Row {
    fn apply(&mut self, cmd: CommandId, op: &Op) {
        match op {
            Op::Set { field, value } => {
                self.fields
                    .insert(field.clone(), Value::Text(value.clone()));
            }
            Op::Add { field, amount } => {
                let entry = self.fields.entry(field.clone()).or_insert(Value::Amount(0));
                if let Value::Amount(total) = entry {
                    *total += amount;
                } else {
                    *entry = Value::Amount(*amount);
                }
            }
        }
        *self.effects.entry(cmd).or_insert(0) += 1;
    }

    pub fn has(&self, cmd: CommandId) -> bool {
        self.effects.contains_key(&cmd)
    }

    pub fn amount(&self, field: &str) -> i64 {
        match self.fields.get(field) {
            Some(Value::Amount(total)) => *total,
            _ => 0,
        }
    }

    /// A checksum of the row's data (its key and fields), as a validation compares copies.
    pub fn checksum(&self, key: &RowKey) -> u64 {
        let data = serde_json::to_vec(&(key, &self.fields)).unwrap_or_default();
        key_hash(&data)
    }
}

/// A command as the service received it from the commands topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    pub id: CommandId,
    pub key: RowKey,
    pub op: Op,
    /// When it arrives, on the lab's clock.
    pub at: LabTime,
}

/// One record of a shard's changelog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub key: RowKey,
    pub at: LabTime,
    pub body: ChangeBody,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChangeBody {
    /// A command applied by the write path, with the version it was routed with. `keyed`: the
    /// command's id was passed as an idempotency key.
    Write {
        cmd: CommandId,
        keyed: bool,
        token: u32,
        op: Op,
    },
    /// A change of another shard's changelog, replayed here by a catch-up.
    Replay {
        from: ShardId,
        offset: u64,
        cmd: CommandId,
        keyed: bool,
        op: Op,
    },
    /// A row copied whole by a snapshot copy or a backfill.
    Copy { from: ShardId, row: Row },
    /// A row removed by a cleanup.
    Drop,
}

impl Change {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a change serialises")
    }

    pub fn decode(bytes: &[u8]) -> Result<Change, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("not a changelog record: {e}"))
    }
}

/// Why a shard refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The key's scope was handed over at `min_version`; the request carried an older one.
    Fenced { min_version: u32 },
    /// The key's scope is frozen for a handover: retry after it.
    Blocked,
    /// The shard is down, or failed this request.
    Unavailable,
}

/// What a write or replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Took effect: the change, at this offset of the shard's changelog.
    Applied { offset: u64, change: Change },
    /// The command's id was already applied to the row: nothing changed.
    AlreadyApplied,
}

/// A line of a shard's log, in source 003's form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub shard: ShardId,
    pub at: LabTime,
    pub level: &'static str,
    pub text: String,
}

impl fmt::Display for LogLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = format!("shard-{}", self.shard.to_string().to_lowercase());
        write!(f, "{node}  {}  {:<5} {}", self.at, self.level, self.text)
    }
}

/// Counts, key set and checksums of the rows of a scope (source 001: verify counts, keys,
/// checksums and aggregates before switching).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    pub rows: u64,
    /// XOR of the keys' hashes: equal key sets give equal values, whatever the order.
    pub key_set: u64,
    /// Wrapping sum of the rows' checksums.
    pub checksum: u64,
    /// Sum of the rows' `total` amounts (a business aggregate).
    pub amount: i64,
}

impl Digest {
    /// Counts `row` in.
    pub fn add(&mut self, key: &RowKey, row: &Row) {
        self.rows += 1;
        self.key_set ^= key_hash(key.to_string().as_bytes());
        self.checksum = self.checksum.wrapping_add(row.checksum(key));
        self.amount += row.amount(TOTAL);
    }
}

/// The amount field of an order.
pub const TOTAL: &str = "total";

/// A scope this shard handed over: from then on its writes there reach no reader.
#[derive(Debug, Clone)]
struct Handover {
    scope: Scope,
    version: u32,
    writes_since: u64,
}

/// One shard's rows and write path.
#[derive(Debug, Clone)]
pub struct ShardStore {
    id: ShardId,
    rows: BTreeMap<RowKey, Row>,
    log_end: u64,
    enforce_fences: bool,
    handovers: Vec<Handover>,
    /// Frozen scopes and when each freeze's lease ends.
    frozen: Vec<(Scope, LabTime)>,
    lines: Vec<LogLine>,
}

impl ShardStore {
    /// An empty shard; `enforce_fences`: whether its write path checks fencing tokens.
    pub fn new(id: ShardId, enforce_fences: bool) -> Self {
        ShardStore {
            id,
            rows: BTreeMap::new(),
            log_end: 0,
            enforce_fences,
            handovers: Vec::new(),
            frozen: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// The shard rebuilt from its changelog, as after a crash that lost its memory.
    pub fn restore(
        id: ShardId,
        enforce_fences: bool,
        changes: impl IntoIterator<Item = Change>,
    ) -> Self {
        let mut store = ShardStore::new(id, enforce_fences);
        for change in changes {
            store.log_end += 1;
            store.take_effect(&change);
        }
        store
    }

    /// The next offset of the shard's changelog.
    pub fn log_end(&self) -> u64 {
        self.log_end
    }

    pub fn row(&self, key: &RowKey) -> Option<&Row> {
        self.rows.get(key)
    }

    pub fn rows(&self) -> impl Iterator<Item = (&RowKey, &Row)> {
        self.rows.iter()
    }

    pub fn lines(&self) -> &[LogLine] {
        &self.lines
    }

    pub fn log(&mut self, at: LabTime, level: &'static str, text: String) {
        self.lines.push(LogLine {
            shard: self.id,
            at,
            level,
            text,
        });
    }

    /// A write from a router: refused while its scope is frozen, or below the scope's fencing
    /// token when fences are enforced; applied once per command id when `keyed`.
    pub fn write(
        &mut self,
        cmd: &Command,
        token: u32,
        keyed: bool,
        now: LabTime,
    ) -> Result<Outcome, Refusal> {
        if self.frozen_for(&cmd.key, now) {
            return Err(Refusal::Blocked);
        }
        let stale = self.stale(&cmd.key, token);
        if let (Some(min_version), true) = (stale, self.enforce_fences) {
            return Err(Refusal::Fenced { min_version });
        }
        let change = Change {
            key: cmd.key.clone(),
            at: now,
            body: ChangeBody::Write {
                cmd: cmd.id,
                keyed,
                token,
                op: cmd.op.clone(),
            },
        };
        let outcome = self.record(change);
        if let (Some(_), Outcome::Applied { .. }) = (stale, &outcome) {
            if let Some(h) = self
                .handovers
                .iter_mut()
                .find(|h| h.scope.contains(&cmd.key))
            {
                h.writes_since += 1;
            }
        }
        Ok(outcome)
    }

    /// A read from a router: refused below the scope's fencing token when fences are enforced.
    pub fn read(&self, key: &RowKey, token: u32) -> Result<Option<&Row>, Refusal> {
        match (self.stale(key, token), self.enforce_fences) {
            (Some(min_version), true) => Err(Refusal::Fenced { min_version }),
            _ => Ok(self.rows.get(key)),
        }
    }

    /// Whether a write to `key` tagged `token` would be a write since a handover.
    pub fn is_stale(&self, key: &RowKey, token: u32) -> bool {
        self.stale(key, token).is_some()
    }

    /// Replays `change`, read at `offset` of `from`'s changelog (a catch-up).
    pub fn replay(&mut self, change: &Change, from: ShardId, offset: u64, now: LabTime) -> Outcome {
        let body = match &change.body {
            ChangeBody::Write { cmd, keyed, op, .. }
            | ChangeBody::Replay { cmd, keyed, op, .. } => ChangeBody::Replay {
                from,
                offset,
                cmd: *cmd,
                keyed: *keyed,
                op: op.clone(),
            },
            other => other.clone(),
        };
        self.record(Change {
            key: change.key.clone(),
            at: now,
            body,
        })
    }

    /// Writes a copy of `row` from shard `from` (a snapshot copy or a backfill).
    pub fn copy(&mut self, key: &RowKey, row: &Row, from: ShardId, now: LabTime) -> Outcome {
        self.record(Change {
            key: key.clone(),
            at: now,
            body: ChangeBody::Copy {
                from,
                row: row.clone(),
            },
        })
    }

    /// Removes every row of `scope` accepted by `keep_if_not` returning false (a cleanup).
    pub fn drop_rows(
        &mut self,
        scope: &Scope,
        now: LabTime,
        keep: impl Fn(&RowKey) -> bool,
    ) -> Vec<Outcome> {
        let keys: Vec<RowKey> = self
            .rows
            .keys()
            .filter(|k| scope.contains(k) && !keep(k))
            .cloned()
            .collect();
        keys.into_iter()
            .map(|key| {
                self.record(Change {
                    key,
                    at: now,
                    body: ChangeBody::Drop,
                })
            })
            .collect()
    }

    /// Freezes writes to `scope` until `until` (a lease the migration renews while blocked).
    pub fn freeze(&mut self, scope: Scope, until: LabTime) {
        self.frozen.retain(|(s, _)| *s != scope);
        self.frozen.push((scope, until));
    }

    pub fn unfreeze(&mut self, scope: &Scope) {
        self.frozen.retain(|(s, _)| s != scope);
    }

    /// Records that `scope` now belongs to another shard from routing version `version` on.
    pub fn hand_over(&mut self, scope: Scope, version: u32) {
        self.handovers.retain(|h| h.scope != scope);
        self.handovers.push(Handover {
            scope,
            version,
            writes_since: 0,
        });
    }

    /// Takes `scope` back (a rollback): its old fence no longer applies.
    pub fn take_back(&mut self, scope: &Scope) {
        self.handovers.retain(|h| h.scope != *scope);
    }

    /// Writes accepted in `scope` since it was handed over (none when fences are enforced).
    pub fn writes_since_handover(&self, scope: &Scope) -> u64 {
        self.handovers
            .iter()
            .find(|h| h.scope == *scope)
            .map_or(0, |h| h.writes_since)
    }

    pub fn digest(&self, scope: &Scope, include: impl Fn(&RowKey) -> bool) -> Digest {
        let mut digest = Digest::default();
        for (key, row) in self
            .rows
            .iter()
            .filter(|(k, _)| scope.contains(k) && include(k))
        {
            digest.add(key, row);
        }
        digest
    }

    fn frozen_for(&self, key: &RowKey, now: LabTime) -> bool {
        self.frozen
            .iter()
            .any(|(scope, until)| now < *until && scope.contains(key))
    }

    fn stale(&self, key: &RowKey, token: u32) -> Option<u32> {
        self.handovers
            .iter()
            .find(|h| h.scope.contains(key) && token < h.version)
            .map(|h| h.version)
    }

    fn record(&mut self, change: Change) -> Outcome {
        if !self.take_effect(&change) {
            return Outcome::AlreadyApplied;
        }
        let offset = self.log_end;
        self.log_end += 1;
        Outcome::Applied { offset, change }
    }

    /// Applies a change to the rows; false when its command was already applied with a key.
    fn take_effect(&mut self, change: &Change) -> bool {
        match &change.body {
            ChangeBody::Write { cmd, keyed, op, .. }
            | ChangeBody::Replay { cmd, keyed, op, .. } => {
                let row = self.rows.entry(change.key.clone()).or_default();
                if *keyed && row.has(*cmd) {
                    return false;
                }
                row.apply(*cmd, op);
            }
            ChangeBody::Copy { row, .. } => {
                self.rows.insert(change.key.clone(), row.clone());
            }
            ChangeBody::Drop => {
                self.rows.remove(&change.key);
            }
        }
        true
    }
}
