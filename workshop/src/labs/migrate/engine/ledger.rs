//! The service's own account of what it told its clients: every acknowledged write, every read
//! and what it returned, every refusal. The audit holds the stores to it: a write acknowledged
//! but absent from its key's owner is lost; a read that did not see every write acknowledged
//! before it missed; a command that took effect twice on the owner is a duplicated effect.

use std::collections::BTreeMap;

use serde::Serialize;

use super::keys::{CommandId, LabTime, RowKey, ShardId};
use super::store::Row;

/// Where a command came from: its commands topic partition and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Source {
    pub partition: i32,
    pub offset: i64,
}

/// A write the service acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ack {
    pub cmd: CommandId,
    pub key: RowKey,
    /// When the command arrived, and when it was acknowledged (later if it was held).
    pub arrived: LabTime,
    pub at: LabTime,
    pub instance: usize,
    /// The shards that applied it, with each one's changelog offset (none when the shard had
    /// already applied it: a retry of a keyed command).
    pub applied: Vec<(ShardId, Option<u64>)>,
    pub source: Option<Source>,
}

/// A read, and whether it saw everything acknowledged before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadRecord {
    pub at: LabTime,
    pub key: RowKey,
    pub instance: usize,
    pub shard: ShardId,
    pub version: u32,
    pub found: bool,
    /// Acknowledged writes of the key the answer did not contain.
    pub missing: usize,
    /// Acknowledged writes of the key before the read.
    pub acknowledged: usize,
}

/// A request a shard refused for an outdated routing version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    pub at: LabTime,
    pub instance: usize,
    pub shard: ShardId,
    pub key: RowKey,
    pub version: u32,
    pub min_version: u32,
    pub write: bool,
}

/// The acknowledged writes are indexed by key as they come; the rest is only ever appended to
/// or counted.
#[derive(Debug, Default)]
pub struct Ledger {
    acks: Vec<Ack>,
    by_key: BTreeMap<RowKey, Vec<usize>>,
    pub reads: Vec<ReadRecord>,
    pub refusals: Vec<Refused>,
    /// Writes that had to wait for a block to end.
    pub held: u64,
    /// Dual writes whose second write failed (and were retried).
    pub dual_write_failures: u64,
}

impl Ledger {
    pub fn ack(&mut self, ack: Ack) {
        self.by_key
            .entry(ack.key.clone())
            .or_default()
            .push(self.acks.len());
        self.acks.push(ack);
    }

    pub fn acks(&self) -> &[Ack] {
        &self.acks
    }

    pub fn acks_of<'a>(&'a self, key: &RowKey) -> impl Iterator<Item = &'a Ack> + 'a {
        let indices = self.by_key.get(key).map_or(&[][..], Vec::as_slice);
        indices.iter().map(|&i| &self.acks[i])
    }

    /// Acknowledged writes of `key` that `row` lacks, and how many were acknowledged.
    pub fn missing(&self, key: &RowKey, row: Option<&Row>) -> (usize, usize) {
        let acked: Vec<CommandId> = self.acks_of(key).map(|a| a.cmd).collect();
        let missing = acked
            .iter()
            .filter(|cmd| !row.is_some_and(|r| r.has(**cmd)))
            .count();
        (missing, acked.len())
    }
}

/// What the audit found, from the stores against the ledger.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Audit {
    /// Acknowledged writes absent from their key's owner.
    pub lost: Vec<Ack>,
    /// Commands that took effect more than once on their key's owner.
    pub duplicated: Vec<(RowKey, CommandId)>,
    /// Reads that missed acknowledged writes.
    pub missed_reads: Vec<ReadRecord>,
    /// Writes still waiting, never acknowledged (none once a migration has ended).
    pub still_held: usize,
}

impl Audit {
    #[cfg(test)]
    pub fn is_clean(&self) -> bool {
        self.lost.is_empty()
            && self.duplicated.is_empty()
            && self.missed_reads.is_empty()
            && self.still_held == 0
    }
}
