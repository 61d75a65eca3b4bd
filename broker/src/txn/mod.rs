//! The transaction coordinator of a single node: each transactional id's producer id, epoch,
//! timeout and state, the partitions and groups its open transaction touches, and the offsets
//! it commits for them, which become a group's committed offsets only when the transaction
//! commits.
//!
//! States as Kafka's `TransactionState`: Empty (no transaction since the last end), Ongoing
//! (partitions or groups added), PrepareCommit / PrepareAbort (decided and recorded, markers
//! being written) and CompleteCommit / CompleteAbort. Ending a transaction records the decision
//! first, then writes a marker to every partition, then applies or drops the offsets, then
//! records the completion: a crash in between finishes the decision at the next start (a marker
//! written twice changes nothing, see [`crate::log::txn_index`]).
//!
//! Fencing: InitProducerId bumps the epoch, aborting an open transaction with the new epoch, so
//! an older instance's requests get PRODUCER_FENCED here and INVALID_PRODUCER_EPOCH from its
//! partitions. A transaction open past its timeout is aborted the same way by
//! [`TxnCoordinator::abort_timed_out`].

mod store;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use protocol::control::Marker;

use crate::group::messages::OffsetCommit;
use crate::producer::ProducerIds;

/// Where transaction state is kept in the data directory ('@' is not allowed in topic names).
pub const TXN_FILE: &str = "@transactions";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    fn prepare(commit: bool) -> Self {
        if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        }
    }

    fn complete(self) -> Self {
        match self {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => other,
        }
    }
}

/// One transactional id.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnMeta {
    pub producer_id: i64,
    pub epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// When the open transaction began (wall clock, ms).
    pub started_ms: i64,
    pub partitions: BTreeSet<(String, i32)>,
    pub groups: BTreeSet<String>,
    /// Offsets committed in the open transaction, by group, then partition: the last one wins.
    pub offsets: BTreeMap<String, BTreeMap<(String, i32), OffsetCommit>>,
}

impl TxnMeta {
    fn fresh(producer_id: i64, epoch: i16, timeout_ms: i32) -> Self {
        Self {
            producer_id,
            epoch,
            timeout_ms,
            state: TxnState::Empty,
            started_ms: 0,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            offsets: BTreeMap::new(),
        }
    }

    fn is_open(&self) -> bool {
        self.state == TxnState::Ongoing
    }
}

/// A transaction to end: what to write where, then what to commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The epoch the markers carry (a fenced transaction's is the new one).
    pub epoch: i16,
    pub marker: Marker,
    pub partitions: Vec<(String, i32)>,
    /// Offsets to commit, by group (empty for an abort).
    pub offsets: Vec<(String, Vec<OffsetCommit>)>,
}

/// Every transactional id's state, and which one each producer id belongs to: a partition asks
/// by producer id whether a batch is in an ongoing transaction, once per transaction and
/// partition, under the partition's lock, so the answer is one look-up.
#[derive(Debug, Default, Clone)]
struct Txns {
    by_id: HashMap<String, TxnMeta>,
    by_producer: HashMap<i64, String>,
}

impl Txns {
    fn new(by_id: HashMap<String, TxnMeta>) -> Self {
        let by_producer = by_id
            .iter()
            .map(|(id, meta)| (meta.producer_id, id.clone()))
            .collect();
        Self { by_id, by_producer }
    }

    fn get(&self, transactional_id: &str) -> Option<&TxnMeta> {
        self.by_id.get(transactional_id)
    }

    /// Sets the state of `transactional_id`; a new producer id replaces the old one's entry.
    fn insert(&mut self, transactional_id: &str, meta: TxnMeta) {
        let producer_id = meta.producer_id;
        if let Some(old) = self.by_id.insert(transactional_id.to_string(), meta) {
            if old.producer_id != producer_id {
                self.by_producer.remove(&old.producer_id);
            }
        }
        self.by_producer
            .insert(producer_id, transactional_id.to_string());
    }

    fn remove(&mut self, transactional_id: &str) {
        if let Some(old) = self.by_id.remove(transactional_id) {
            self.by_producer.remove(&old.producer_id);
        }
    }

    fn by_producer(&self, producer_id: i64) -> Option<&TxnMeta> {
        self.by_producer
            .get(&producer_id)
            .and_then(|id| self.by_id.get(id))
    }
}

#[derive(Debug, Default)]
pub struct TxnCoordinator {
    txns: Mutex<Txns>,
    /// The file every change is written to before it is answered; `None` in memory.
    file: Option<PathBuf>,
}

/// The coordinator's answer to a request of a producer: PRODUCER_FENCED and the like.
pub type TxnResult<T> = Result<T, ResponseError>;

impl TxnCoordinator {
    /// The coordinator of `dir`, with the state its file holds, and the transactions a crash
    /// left decided but unfinished (the caller finishes them). The epochs are given to
    /// `producer_ids`, so zombies stay fenced across the restart.
    pub fn open(dir: &Path, producer_ids: &ProducerIds) -> io::Result<(Self, Vec<Ending>)> {
        let file = dir.join(TXN_FILE);
        let txns = store::load(&file)?;
        for meta in txns.values() {
            producer_ids.restore(meta.producer_id, meta.epoch);
        }
        let unfinished = txns
            .iter()
            .filter(|(_, m)| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
            .map(|(id, m)| ending(id, m))
            .collect();
        Ok((
            Self {
                txns: Mutex::new(Txns::new(txns)),
                file: Some(file),
            },
            unfinished,
        ))
    }

    fn persist(&self, txns: &Txns) -> TxnResult<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        store::save(file, &txns.by_id).map_err(|e| {
            tracing::error!("transaction state not written: {e}");
            ResponseError::CoordinatorNotAvailable
        })
    }

    /// InitProducerId with a transactional id: the next epoch (a new producer id once the epoch
    /// would overflow). An open transaction is aborted first, with that new epoch; its ending
    /// is returned for the caller to write.
    pub fn init(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        max_timeout_ms: i32,
        producer_ids: &ProducerIds,
    ) -> TxnResult<(i64, i16, Option<Ending>)> {
        if transactional_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let mut txns = self.txns.lock();
        let before = txns.get(transactional_id).cloned();
        let meta = match &before {
            None => TxnMeta::fresh(producer_ids.allocate()?, 0, timeout_ms),
            Some(m) if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) => {
                return Err(ResponseError::ConcurrentTransactions);
            }
            Some(m) => {
                let (producer_id, epoch) = if m.epoch >= i16::MAX - 1 {
                    (producer_ids.allocate()?, 0)
                } else {
                    (m.producer_id, m.epoch + 1)
                };
                TxnMeta {
                    producer_id,
                    epoch,
                    timeout_ms,
                    ..m.clone()
                }
            }
        };
        let mut meta = meta;
        let aborting = meta.is_open();
        if aborting {
            meta.state = TxnState::PrepareAbort;
            meta.offsets.clear();
        } else {
            meta.state = TxnState::Empty;
        }
        txns.insert(transactional_id, meta.clone());
        if let Err(e) = self.persist(&txns) {
            match before {
                Some(b) => txns.insert(transactional_id, b),
                None => txns.remove(transactional_id),
            };
            return Err(e);
        }
        producer_ids.restore(meta.producer_id, meta.epoch);
        let ending = aborting.then(|| ending(transactional_id, &meta));
        Ok((meta.producer_id, meta.epoch, ending))
    }

    /// Runs `change` on the transaction of `transactional_id` once the producer is who it says,
    /// and records the result before returning it; a refused change, or one that cannot be
    /// recorded, leaves the transaction as it was.
    fn update<T>(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        change: impl FnOnce(&mut TxnMeta) -> TxnResult<T>,
    ) -> TxnResult<T> {
        let mut txns = self.txns.lock();
        let before = txns
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        check_producer(before, producer_id, epoch)?;
        let mut meta = before.clone();
        let out = change(&mut meta)?;
        if meta != *before {
            let before = before.clone();
            txns.insert(transactional_id, meta);
            if let Err(e) = self.persist(&txns) {
                txns.insert(transactional_id, before);
                return Err(e);
            }
        }
        Ok(out)
    }

    /// [`update`](Self::update) of a transaction that may take more: an ended one starts
    /// anew (Ongoing from `now_ms`), one being ended is busy.
    fn ongoing(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        now_ms: i64,
        change: impl FnOnce(&mut TxnMeta),
    ) -> TxnResult<()> {
        self.update(transactional_id, producer_id, epoch, |meta| {
            match meta.state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => {
                    return Err(ResponseError::ConcurrentTransactions)
                }
                TxnState::Ongoing => {}
                _ => {
                    meta.state = TxnState::Ongoing;
                    meta.started_ms = now_ms;
                    meta.partitions.clear();
                    meta.groups.clear();
                    meta.offsets.clear();
                }
            }
            change(meta);
            Ok(())
        })
    }

    /// AddPartitionsToTxn (the caller has checked that the partitions exist).
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> TxnResult<()> {
        self.ongoing(transactional_id, producer_id, epoch, now_ms, |meta| {
            meta.partitions.extend(partitions.iter().cloned());
        })
    }

    /// AddOffsetsToTxn: the group whose offsets the transaction will commit.
    pub fn add_offsets(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        now_ms: i64,
    ) -> TxnResult<()> {
        self.ongoing(transactional_id, producer_id, epoch, now_ms, |meta| {
            meta.groups.insert(group.to_string());
        })
    }

    /// TxnOffsetCommit: offsets held until the transaction ends. The group must have been added
    /// with AddOffsetsToTxn first.
    pub fn commit_offsets(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        commits: Vec<OffsetCommit>,
    ) -> TxnResult<()> {
        self.update(transactional_id, producer_id, epoch, |meta| {
            if !meta.is_open() || !meta.groups.contains(group) {
                return Err(ResponseError::InvalidTxnState);
            }
            let held = meta.offsets.entry(group.to_string()).or_default();
            for commit in commits {
                held.insert((commit.topic.clone(), commit.partition), commit);
            }
            Ok(())
        })
    }

    /// EndTxn: the decision recorded, and what the caller must then write and commit; `None`
    /// when there is nothing to do (a retry of the end just made).
    pub fn end(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> TxnResult<Option<Ending>> {
        self.update(transactional_id, producer_id, epoch, |meta| {
            match (meta.state, commit) {
                (TxnState::Ongoing, _) => {}
                (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                    return Ok(None)
                }
                (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                    return Err(ResponseError::ConcurrentTransactions)
                }
                _ => return Err(ResponseError::InvalidTxnState),
            }
            meta.state = TxnState::prepare(commit);
            if !commit {
                meta.offsets.clear();
            }
            Ok(Some(ending(transactional_id, meta)))
        })
    }

    /// The markers and offsets of `ending` are written: the transaction is complete.
    pub fn completed(&self, ending: &Ending) -> TxnResult<()> {
        let mut txns = self.txns.lock();
        let Some(meta) = txns.by_id.get_mut(&ending.transactional_id) else {
            return Ok(());
        };
        if meta.producer_id != ending.producer_id || meta.epoch != ending.epoch {
            return Ok(());
        }
        meta.state = meta.state.complete();
        meta.partitions.clear();
        meta.groups.clear();
        meta.offsets.clear();
        self.persist(&txns)
    }

    /// Aborts, with a bumped epoch (which fences the producer), every transaction open longer
    /// than its timeout at `now_ms`; returns their endings for the caller to write.
    pub fn abort_timed_out(&self, now_ms: i64, producer_ids: &ProducerIds) -> Vec<Ending> {
        let mut txns = self.txns.lock();
        let timed_out: Vec<(String, TxnMeta)> = txns
            .by_id
            .iter()
            .filter(|(_, meta)| {
                let deadline = meta.started_ms.saturating_add(i64::from(meta.timeout_ms));
                meta.is_open() && now_ms > deadline
            })
            .map(|(id, meta)| (id.clone(), meta.clone()))
            .collect();
        let mut endings = Vec::new();
        for (id, before) in &timed_out {
            let mut meta = before.clone();
            if meta.epoch >= i16::MAX - 1 {
                match producer_ids.allocate() {
                    Ok(id) => (meta.producer_id, meta.epoch) = (id, 0),
                    Err(_) => continue,
                }
            } else {
                meta.epoch += 1;
            }
            meta.state = TxnState::PrepareAbort;
            meta.offsets.clear();
            endings.push(ending(id, &meta));
            txns.insert(id, meta);
        }
        if endings.is_empty() {
            return endings;
        }
        if self.persist(&txns).is_err() {
            for (id, before) in timed_out {
                txns.insert(&id, before);
            }
            return Vec::new();
        }
        for ending in &endings {
            producer_ids.restore(ending.producer_id, ending.epoch);
        }
        endings
    }

    /// True when `producer_id` at `epoch` has `topic`-`partition` in its open transaction: a
    /// transactional batch is accepted only then.
    pub fn accepts(&self, producer_id: i64, epoch: i16, topic: &str, partition: i32) -> bool {
        self.txns.lock().by_producer(producer_id).is_some_and(|m| {
            m.epoch == epoch
                && m.is_open()
                && m.partitions.contains(&(topic.to_string(), partition))
        })
    }

    /// The state of one transactional id (for tests and DescribeTransactions-like reports).
    pub fn get(&self, transactional_id: &str) -> Option<TxnMeta> {
        self.txns.lock().get(transactional_id).cloned()
    }
}

/// Kafka's checks of the producer behind a transactional request.
fn check_producer(meta: &TxnMeta, producer_id: i64, epoch: i16) -> TxnResult<()> {
    if meta.producer_id != producer_id {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    if meta.epoch != epoch {
        return Err(ResponseError::ProducerFenced);
    }
    Ok(())
}

fn ending(transactional_id: &str, meta: &TxnMeta) -> Ending {
    Ending {
        transactional_id: transactional_id.to_string(),
        producer_id: meta.producer_id,
        epoch: meta.epoch,
        marker: if meta.state == TxnState::PrepareCommit {
            Marker::Commit
        } else {
            Marker::Abort
        },
        partitions: meta.partitions.iter().cloned().collect(),
        offsets: meta
            .offsets
            .iter()
            .map(|(group, o)| (group.clone(), o.values().cloned().collect()))
            .collect(),
    }
}

#[cfg(test)]
mod tests;
