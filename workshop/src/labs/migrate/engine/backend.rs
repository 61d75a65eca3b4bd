//! What the engine needs from the outside world: each shard's changelog, and the routing
//! topic. The lab's scenarios run it on Kafka topics (see `kafka.rs` beside the engine); the
//! property tests run it on [`Memory`], where the same code makes the same decisions.

use std::collections::BTreeMap;

use super::keys::ShardId;
use super::routing::{RoutingRecord, RoutingState};
use super::store::Change;
use crate::lab::LabError;

/// Who reads the routing topic: each service instance and the migration worker keep their own
/// position in it, and the auditor reads it at the end to find every key's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reader {
    Instance(usize),
    Worker,
    Auditor,
}

/// The logs a migration runs on.
pub trait Backend {
    /// Appends `change` at `offset` of `shard`'s changelog (the shard counts its own offsets;
    /// the log must agree). It may be made durable later, but before [`Backend::end_offset`]
    /// or [`Backend::read`] answers.
    fn append(&mut self, shard: ShardId, offset: u64, change: &Change) -> Result<(), LabError>;

    /// The end offset of `shard`'s changelog, with everything appended so far durable.
    fn end_offset(&mut self, shard: ShardId) -> Result<u64, LabError>;

    /// The records of `shard`'s changelog from `from` to `to` (exclusive), in offset order.
    fn read(&mut self, shard: ShardId, from: u64, to: u64) -> Result<Vec<(u64, Change)>, LabError>;

    /// Appends a record to the routing topic; durable when this returns.
    fn publish(&mut self, record: &RoutingRecord) -> Result<(), LabError>;

    /// Reads the routing topic up to its end, from where `reader` stopped last time, and
    /// returns the latest record per key.
    fn routing(&mut self, reader: Reader) -> Result<RoutingState, LabError>;

    /// Every record of the routing topic, with its offset: the audit trail.
    fn routing_log(&mut self) -> Result<Vec<(u64, RoutingRecord)>, LabError>;
}

/// The logs in memory. They count what was asked of them, so a run rehearsed here tells what
/// the same run asks of Kafka: the same code makes the same calls.
#[derive(Debug, Default)]
pub struct Memory {
    changelogs: BTreeMap<ShardId, Vec<Change>>,
    routing: Vec<RoutingRecord>,
    tally: Tally,
}

/// What a run asked of its logs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Calls that wait for the logs' answer (every call but an append, which may be sent later).
    pub calls: u64,
    /// Records appended, and records read back.
    pub records: u64,
}

impl Memory {
    pub fn tally(&self) -> Tally {
        self.tally
    }
}

impl Backend for Memory {
    fn append(&mut self, shard: ShardId, offset: u64, change: &Change) -> Result<(), LabError> {
        self.tally.records += 1;
        let log = self.changelogs.entry(shard).or_default();
        if offset != log.len() as u64 {
            return Err(LabError::Internal(format!(
                "shard {shard} appended offset {offset} to a changelog ending at {}",
                log.len()
            )));
        }
        log.push(change.clone());
        Ok(())
    }

    fn end_offset(&mut self, shard: ShardId) -> Result<u64, LabError> {
        self.tally.calls += 1;
        Ok(self
            .changelogs
            .get(&shard)
            .map_or(0, |log| log.len() as u64))
    }

    fn read(&mut self, shard: ShardId, from: u64, to: u64) -> Result<Vec<(u64, Change)>, LabError> {
        let log = self.changelogs.get(&shard).map_or(&[][..], Vec::as_slice);
        let end = (to as usize).min(log.len());
        let start = (from as usize).min(end);
        self.tally.calls += 1;
        self.tally.records += (end - start) as u64;
        Ok((start..end).map(|i| (i as u64, log[i].clone())).collect())
    }

    fn publish(&mut self, record: &RoutingRecord) -> Result<(), LabError> {
        self.tally.calls += 1;
        self.routing.push(record.clone());
        Ok(())
    }

    fn routing_log(&mut self) -> Result<Vec<(u64, RoutingRecord)>, LabError> {
        self.tally.calls += 1;
        self.tally.records += self.routing.len() as u64;
        Ok((0..).zip(self.routing.iter().cloned()).collect())
    }

    fn routing(&mut self, _reader: Reader) -> Result<RoutingState, LabError> {
        self.tally.calls += 1;
        let mut state = RoutingState::default();
        for record in &self.routing {
            state.apply(record.clone());
        }
        Ok(state)
    }
}
