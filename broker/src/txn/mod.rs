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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use protocol::control::Marker;

use crate::group::messages::OffsetCommit;
use crate::log::now_millis;
use crate::producer::ProducerIds;
use store::Journal;

/// Where transaction state is kept in the data directory ('@' is not allowed in topic names):
/// the snapshot, and the journals after it with a number appended.
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

    fn is_prepared(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
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
    /// When it last changed (wall clock, ms): `transactional.id.expiration.ms` counts from it.
    pub updated_ms: i64,
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
            updated_ms: 0,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            offsets: BTreeMap::new(),
        }
    }

    fn is_open(&self) -> bool {
        self.state == TxnState::Ongoing
    }

    fn header(&self) -> Header {
        Header {
            producer_id: self.producer_id,
            epoch: self.epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            started_ms: self.started_ms,
            updated_ms: self.updated_ms,
        }
    }

    fn apply(&mut self, change: Change) {
        let h = change.header;
        (self.producer_id, self.epoch, self.timeout_ms) = (h.producer_id, h.epoch, h.timeout_ms);
        (self.state, self.started_ms, self.updated_ms) = (h.state, h.started_ms, h.updated_ms);
        match change.reset {
            Reset::Nothing | Reset::Forget => {}
            Reset::Offsets => self.offsets.clear(),
            Reset::All => {
                self.partitions.clear();
                self.groups.clear();
                self.offsets.clear();
            }
        }
        for item in change.items {
            match item {
                Item::Partition(topic, partition) => {
                    self.partitions.insert((topic, partition));
                }
                Item::Group(group) => {
                    self.groups.insert(group);
                }
                Item::Offset(group, commit) => {
                    let key = (commit.topic.clone(), commit.partition);
                    self.offsets.entry(group).or_default().insert(key, commit);
                }
            }
        }
    }
}

/// What identifies a transaction and where it stands, without its items.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Header {
    producer_id: i64,
    epoch: i16,
    timeout_ms: i32,
    state: TxnState,
    started_ms: i64,
    updated_ms: i64,
}

/// What a change forgets before it adds its items.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reset {
    Nothing,
    /// An abort drops the offsets; its partitions still need their markers.
    Offsets,
    All,
    /// The transactional id itself: it expired.
    Forget,
}

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Partition(String, i32),
    Group(String),
    Offset(String, OffsetCommit),
}

/// One change of one transactional id: what the journal records and memory applies, both in
/// the size of the change, not of the transaction.
#[derive(Debug, Clone, PartialEq)]
struct Change {
    transactional_id: String,
    header: Header,
    reset: Reset,
    items: Vec<Item>,
}

impl Change {
    /// A change to `header` alone.
    fn to(transactional_id: &str, header: Header) -> Self {
        Self {
            transactional_id: transactional_id.to_string(),
            header,
            reset: Reset::Nothing,
            items: Vec::new(),
        }
    }

    /// The change that makes any state into `meta` (a snapshot's record).
    fn whole(transactional_id: &str, meta: &TxnMeta) -> Self {
        let partitions = meta
            .partitions
            .iter()
            .map(|(t, p)| Item::Partition(t.clone(), *p));
        let groups = meta.groups.iter().map(|g| Item::Group(g.clone()));
        let offsets = meta.offsets.iter().flat_map(|(group, commits)| {
            commits
                .values()
                .map(|c| Item::Offset(group.clone(), c.clone()))
        });
        Self {
            reset: Reset::All,
            items: partitions.chain(groups).chain(offsets).collect(),
            ..Self::to(transactional_id, meta.header())
        }
    }
}

/// Every transactional id's state, and which one each producer id belongs to: a partition asks
/// by producer id whether a batch is in an ongoing transaction, once per transaction and
/// partition, under the partition's lock, so the answer is one look-up.
#[derive(Debug, Default, Clone)]
pub(crate) struct Txns {
    by_id: HashMap<String, TxnMeta>,
    by_producer: HashMap<i64, String>,
    /// Ids with a change being written: another change of theirs waits for it (Kafka's
    /// pending state, answered CONCURRENT_TRANSACTIONS).
    pending: HashSet<String>,
}

impl Txns {
    fn get(&self, transactional_id: &str) -> Option<&TxnMeta> {
        self.by_id.get(transactional_id)
    }

    /// Sets the state of `transactional_id`; a new producer id replaces the old one's entry.
    #[cfg(test)]
    fn insert(&mut self, transactional_id: &str, meta: TxnMeta) {
        self.apply(Change::whole(transactional_id, &meta));
    }

    fn apply(&mut self, change: Change) {
        let producer_id = change.header.producer_id;
        let id = change.transactional_id.clone();
        if change.reset == Reset::Forget {
            if let Some(old) = self.by_id.remove(&id) {
                if self.by_producer.get(&old.producer_id) == Some(&id) {
                    self.by_producer.remove(&old.producer_id);
                }
            }
            return;
        }
        let meta = self
            .by_id
            .entry(id.clone())
            .or_insert_with(|| TxnMeta::fresh(producer_id, 0, 0));
        let old_producer = meta.producer_id;
        meta.apply(change);
        if old_producer != producer_id && self.by_producer.get(&old_producer) == Some(&id) {
            self.by_producer.remove(&old_producer);
        }
        self.by_producer.insert(producer_id, id);
    }

    fn by_producer(&self, producer_id: i64) -> Option<&TxnMeta> {
        self.by_producer
            .get(&producer_id)
            .and_then(|id| self.by_id.get(id))
    }

    /// Applies `changes`: the endings of those that decided an end.
    fn apply_all(&mut self, changes: Vec<Change>) -> Vec<Ending> {
        let mut endings = Vec::new();
        for change in changes {
            let id = change.transactional_id.clone();
            let decided = change.header.state.is_prepared();
            self.pending.remove(&id);
            self.apply(change);
            if decided {
                endings.extend(self.get(&id).map(|meta| ending(&id, meta)));
            }
        }
        endings
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

/// Changes decided under the lock: applied already (in memory), or to be written first.
enum Staged {
    Applied(Vec<Ending>),
    Written(Vec<Change>),
}

#[derive(Debug, Default)]
pub struct TxnCoordinator {
    txns: Arc<Mutex<Txns>>,
    /// Where every change is written before it takes effect; `None` in memory.
    journal: Option<Arc<Journal>>,
}

/// The coordinator's answer to a request of a producer: PRODUCER_FENCED and the like.
pub type TxnResult<T> = Result<T, ResponseError>;

impl TxnCoordinator {
    /// The coordinator of `dir`, with the state its files hold, and the transactions a crash
    /// left decided but unfinished (the caller finishes them). The epochs are given to
    /// `producer_ids`, so zombies stay fenced across the restart.
    pub fn open(dir: &Path, producer_ids: &ProducerIds) -> io::Result<(Self, Vec<Ending>)> {
        let (journal, txns) = Journal::open(dir)?;
        for meta in txns.by_id.values() {
            producer_ids.restore(meta.producer_id, meta.epoch);
        }
        let unfinished = txns
            .by_id
            .iter()
            .filter(|(_, m)| m.state.is_prepared())
            .map(|(id, m)| ending(id, m))
            .collect();
        let coordinator = Self {
            txns: Arc::new(Mutex::new(txns)),
            journal: Some(Arc::new(journal)),
        };
        Ok((coordinator, unfinished))
    }

    /// Takes `changes`, decided under the lock held as `txns`: in memory they apply at once;
    /// with a journal their ids are pending until [`settle`](Self::settle) has written them.
    fn stage(&self, txns: &mut Txns, mut changes: Vec<Change>) -> Staged {
        let now_ms = now_millis();
        for change in &mut changes {
            change.header.updated_ms = now_ms;
        }
        if self.journal.is_none() {
            return Staged::Applied(txns.apply_all(changes));
        }
        for change in &changes {
            txns.pending.insert(change.transactional_id.clone());
        }
        Staged::Written(changes)
    }

    /// Writes and syncs staged changes on a blocking thread (never on an async worker), then
    /// applies them; the endings of those that decided an end.
    async fn settle(&self, staged: Staged) -> TxnResult<Vec<Ending>> {
        let changes = match staged {
            Staged::Applied(endings) => return Ok(endings),
            Staged::Written(changes) => changes,
        };
        let journal = self
            .journal
            .clone()
            .expect("changes are written with a journal");
        let txns = self.txns.clone();
        let ids: Vec<String> = changes.iter().map(|c| c.transactional_id.clone()).collect();
        let mut record = String::new();
        for change in &changes {
            store::encode(change, &mut record);
        }
        let written = tokio::task::spawn_blocking(move || {
            let mut endings = Vec::new();
            let due = journal.append(&record, || endings = txns.lock().apply_all(changes));
            if due.is_err() {
                let mut txns = txns.lock();
                for id in &ids {
                    txns.pending.remove(id);
                }
            }
            due.map(|due| (due, endings, journal, txns))
        })
        .await;
        match written {
            Ok(Ok((due, endings, journal, txns))) => {
                if due {
                    // In the background: this change is answered now, the next ones go to the
                    // next journal meanwhile.
                    tokio::task::spawn_blocking(move || {
                        if let Err(e) = journal.compact(|| txns.lock().clone()) {
                            tracing::warn!("transaction state not compacted: {e}");
                        }
                    });
                }
                Ok(endings)
            }
            Ok(Err(e)) => {
                tracing::error!("transaction state not written: {e}");
                Err(ResponseError::CoordinatorNotAvailable)
            }
            Err(e) => {
                tracing::error!("transaction state writer failed: {e}");
                Err(ResponseError::CoordinatorNotAvailable)
            }
        }
    }

    /// InitProducerId with a transactional id: the next epoch (a new producer id once the epoch
    /// would overflow). An open transaction is aborted first, with that new epoch; its ending
    /// is returned for the caller to write.
    pub async fn init(
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
        let (staged, header) = {
            let mut txns = self.txns.lock();
            if txns.pending.contains(transactional_id) {
                return Err(ResponseError::ConcurrentTransactions);
            }
            let mut reset = Reset::Nothing;
            let header = match txns.get(transactional_id) {
                None => TxnMeta::fresh(producer_ids.allocate()?, 0, timeout_ms).header(),
                Some(m) if m.state.is_prepared() => {
                    return Err(ResponseError::ConcurrentTransactions);
                }
                Some(m) => {
                    let (producer_id, epoch) = if m.epoch >= i16::MAX - 1 {
                        (producer_ids.allocate()?, 0)
                    } else {
                        (m.producer_id, m.epoch + 1)
                    };
                    let state = if m.is_open() {
                        reset = Reset::Offsets;
                        TxnState::PrepareAbort
                    } else {
                        TxnState::Empty
                    };
                    Header {
                        producer_id,
                        epoch,
                        timeout_ms,
                        state,
                        ..m.header()
                    }
                }
            };
            let change = Change {
                reset,
                ..Change::to(transactional_id, header)
            };
            (self.stage(&mut txns, vec![change]), header)
        };
        let ending = self.settle(staged).await?.pop();
        producer_ids.restore(header.producer_id, header.epoch);
        Ok((header.producer_id, header.epoch, ending))
    }

    /// Builds the change of the transaction of `transactional_id` once the producer is who it
    /// says and no other change of it is being written, and makes it take effect before
    /// returning; a refused change (or `None`, nothing to change) leaves the transaction as it
    /// was.
    async fn update<T>(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        change: impl FnOnce(&TxnMeta) -> TxnResult<(Option<Change>, T)>,
    ) -> TxnResult<(T, Vec<Ending>)> {
        let (staged, out) = {
            let mut txns = self.txns.lock();
            if txns.pending.contains(transactional_id) {
                return Err(ResponseError::ConcurrentTransactions);
            }
            let meta = txns
                .get(transactional_id)
                .ok_or(ResponseError::InvalidProducerIdMapping)?;
            check_producer(meta, producer_id, epoch)?;
            match change(meta)? {
                (None, out) => return Ok((out, Vec::new())),
                (Some(change), out) => (self.stage(&mut txns, vec![change]), out),
            }
        };
        let endings = self.settle(staged).await?;
        Ok((out, endings))
    }

    /// [`update`](Self::update) of a transaction that may take more `items`: an ended one
    /// starts anew (Ongoing from `now_ms`), one being ended is busy.
    async fn ongoing(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        now_ms: i64,
        items: Vec<Item>,
    ) -> TxnResult<()> {
        self.update(transactional_id, producer_id, epoch, |meta| {
            let mut change = Change::to(transactional_id, meta.header());
            match meta.state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => {
                    return Err(ResponseError::ConcurrentTransactions)
                }
                TxnState::Ongoing => {
                    let held = |item: &Item| match item {
                        Item::Partition(t, p) => meta.partitions.contains(&(t.clone(), *p)),
                        Item::Group(g) => meta.groups.contains(g),
                        Item::Offset(..) => false,
                    };
                    if items.iter().all(held) {
                        return Ok((None, ()));
                    }
                }
                _ => {
                    change.header.state = TxnState::Ongoing;
                    change.header.started_ms = now_ms;
                    change.reset = Reset::All;
                }
            }
            change.items = items;
            Ok((Some(change), ()))
        })
        .await
        .map(|((), _)| ())
    }

    /// AddPartitionsToTxn (the caller has checked that the partitions exist).
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> TxnResult<()> {
        let items = partitions
            .iter()
            .map(|(t, p)| Item::Partition(t.clone(), *p))
            .collect();
        self.ongoing(transactional_id, producer_id, epoch, now_ms, items)
            .await
    }

    /// AddOffsetsToTxn: the group whose offsets the transaction will commit.
    pub async fn add_offsets(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        now_ms: i64,
    ) -> TxnResult<()> {
        let items = vec![Item::Group(group.to_string())];
        self.ongoing(transactional_id, producer_id, epoch, now_ms, items)
            .await
    }

    /// TxnOffsetCommit: offsets held until the transaction ends. The group must have been added
    /// with AddOffsetsToTxn first.
    pub async fn commit_offsets(
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
            let mut change = Change::to(transactional_id, meta.header());
            change.items = commits
                .into_iter()
                .map(|c| Item::Offset(group.to_string(), c))
                .collect();
            Ok((Some(change), ()))
        })
        .await
        .map(|((), _)| ())
    }

    /// EndTxn: the decision recorded, and what the caller must then write and commit; `None`
    /// when there is nothing to do (a retry of the end just made).
    pub async fn end(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> TxnResult<Option<Ending>> {
        let ((), mut endings) = self
            .update(transactional_id, producer_id, epoch, |meta| {
                match (meta.state, commit) {
                    (TxnState::Ongoing, _) => {}
                    (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                        return Ok((None, ()))
                    }
                    (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                        return Err(ResponseError::ConcurrentTransactions)
                    }
                    _ => return Err(ResponseError::InvalidTxnState),
                }
                let mut change = Change::to(transactional_id, meta.header());
                change.header.state = TxnState::prepare(commit);
                if !commit {
                    change.reset = Reset::Offsets;
                }
                Ok((Some(change), ()))
            })
            .await?;
        Ok(endings.pop())
    }

    /// The markers and offsets of `ending` are written: the transaction is complete.
    pub async fn completed(&self, ending: &Ending) -> TxnResult<()> {
        let staged = {
            let mut txns = self.txns.lock();
            let Some(meta) = txns.get(&ending.transactional_id) else {
                return Ok(());
            };
            if meta.producer_id != ending.producer_id || meta.epoch != ending.epoch {
                return Ok(());
            }
            if txns.pending.contains(&ending.transactional_id) {
                return Err(ResponseError::ConcurrentTransactions);
            }
            let mut change = Change::to(&ending.transactional_id, meta.header());
            change.header.state = meta.state.complete();
            change.reset = Reset::All;
            self.stage(&mut txns, vec![change])
        };
        self.settle(staged).await.map(|_| ())
    }

    /// Aborts, with a bumped epoch (which fences the producer), every transaction open longer
    /// than its timeout at `now_ms`; returns their endings for the caller to write.
    pub async fn abort_timed_out(&self, now_ms: i64, producer_ids: &ProducerIds) -> Vec<Ending> {
        let staged = {
            let mut txns = self.txns.lock();
            let mut changes = Vec::new();
            for (id, meta) in &txns.by_id {
                let deadline = meta.started_ms.saturating_add(i64::from(meta.timeout_ms));
                if !meta.is_open() || now_ms <= deadline || txns.pending.contains(id) {
                    continue;
                }
                let mut header = meta.header();
                if meta.epoch >= i16::MAX - 1 {
                    match producer_ids.allocate() {
                        Ok(id) => (header.producer_id, header.epoch) = (id, 0),
                        Err(_) => continue,
                    }
                } else {
                    header.epoch += 1;
                }
                header.state = TxnState::PrepareAbort;
                changes.push(Change {
                    reset: Reset::Offsets,
                    ..Change::to(id, header)
                });
            }
            if changes.is_empty() {
                return Vec::new();
            }
            self.stage(&mut txns, changes)
        };
        let endings = self.settle(staged).await.unwrap_or_default();
        for ending in &endings {
            producer_ids.restore(ending.producer_id, ending.epoch);
        }
        endings
    }

    /// Forgets the transactional ids with no transaction under way (Empty, CompleteCommit,
    /// CompleteAbort) that have not changed since `cutoff_ms` (`transactional.id.expiration.ms`
    /// ago), as Kafka's `TransactionStateManager.removeExpiredTransactionalIds`; their producer
    /// ids are forgotten by `producer_ids` too. An expired id is a new one to InitProducerId (a
    /// fresh producer id) and unknown to the other requests (INVALID_PRODUCER_ID_MAPPING). How
    /// many.
    pub async fn expire(&self, cutoff_ms: i64, producer_ids: &ProducerIds) -> usize {
        let (staged, expired) = {
            let mut txns = self.txns.lock();
            let changes: Vec<Change> = txns
                .by_id
                .iter()
                .filter(|(id, m)| {
                    let idle = matches!(
                        m.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    );
                    idle && m.updated_ms <= cutoff_ms && !txns.pending.contains(*id)
                })
                .map(|(id, m)| Change {
                    reset: Reset::Forget,
                    ..Change::to(id, m.header())
                })
                .collect();
            if changes.is_empty() {
                return 0;
            }
            let expired: Vec<i64> = changes.iter().map(|c| c.header.producer_id).collect();
            (self.stage(&mut txns, changes), expired)
        };
        if self.settle(staged).await.is_err() {
            return 0;
        }
        for producer_id in &expired {
            producer_ids.forget(*producer_id);
        }
        expired.len()
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
