//! The consumer group's work in traffic time: one member per partition that, in each tick,
//! processes at most its capacity for that tick from the records that have arrived, applies
//! them to the store and commits, so the group's committed offsets (and so its lag, as the
//! broker reports it) follow the processing. Also the store, which applies what the members
//! processed in traffic-time order, and the heavy-hitter detector.
//!
//! What the model fixes, so that every figure is a function of the seed: a tick's arrivals are
//! the records the producer sent and had acknowledged in it (the log end offsets it published
//! after the tick); a member's work in a tick is a pure function of those and its capacity; the
//! store applies tick by tick, and within a tick partition by partition (a real group's members
//! race, and which of two members applies first would be decided by the machine). What it
//! measures: the records themselves, read from the broker, and the offsets and lag the broker
//! reports.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use client::group::GroupConsumer;
use client::{Client, Record, TopicPartition};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::super::plan::Timed;
use super::super::sketch::SpaceSaving;
use super::super::traffic::{decode_seq, tenant_of_key};
use crate::kit::group::manual_commit;
use crate::kit::reader::PartitionReader;
use crate::lab::target::broker_error;
use crate::lab::LabError;

/// How long a fetch waits for new records before the worker looks at the clock again.
const FETCH_WAIT: Duration = Duration::from_millis(50);

/// How often members heartbeat (and so hear of a rebalance).
const HEARTBEAT: Duration = Duration::from_millis(100);

/// Records one poll may return (`max.poll.records`): a few ticks' worth at the default rates,
/// so a member holds little more than it may process.
const MAX_POLL_RECORDS: usize = 20_000;

/// Polls in a row that may bring nothing while records the broker acknowledged are missing.
const MAX_EMPTY_POLLS: u32 = 200;

/// The traffic clock the producer publishes: after each tick, every partition's log end offset
/// (index 0 is tick 1). A tick is published once all its records are acknowledged.
pub type Ticks = Vec<Arc<Vec<i64>>>;

/// A member's progress: the last tick it has processed and committed, per partition.
pub type Done = Vec<u32>;

/// What a member reports as its progress when it failed: the producer stops waiting for it.
pub const FAILED: u32 = u32::MAX;

/// Per tenant: the highest sequence number applied, and how many records came after a later
/// one of the same tenant had already been applied (applied out of order).
#[derive(Debug, Clone, Default)]
pub struct OrderChecker {
    highest: Vec<Option<u64>>,
    out_of_order: Vec<u64>,
    applied: Vec<u64>,
}

impl OrderChecker {
    pub fn new(tenants: u32) -> Self {
        let n = tenants as usize + 1;
        OrderChecker {
            highest: vec![None; n],
            out_of_order: vec![0; n],
            applied: vec![0; n],
        }
    }

    /// Applies one record of `tenant` with sequence number `seq`.
    pub fn apply(&mut self, tenant: u32, seq: u64) {
        let t = tenant as usize;
        if t >= self.highest.len() {
            return;
        }
        self.applied[t] += 1;
        match self.highest[t] {
            Some(high) if seq < high => self.out_of_order[t] += 1,
            _ => self.highest[t] = Some(seq),
        }
    }

    pub fn out_of_order(&self, tenant: u32) -> u64 {
        self.out_of_order.get(tenant as usize).copied().unwrap_or(0)
    }

    pub fn applied(&self, tenant: u32) -> u64 {
        self.applied.get(tenant as usize).copied().unwrap_or(0)
    }
}

/// The consumers' store: applies what the members processed in traffic-time order (tick by
/// tick, and within a tick partition by partition), whatever order their tasks finish in.
#[derive(Debug)]
pub struct Store {
    order: OrderChecker,
    partitions: i32,
    /// The next (tick, partition) to apply.
    next: (u32, i32),
    pending: BTreeMap<(u32, i32), Vec<(u32, u64)>>,
}

impl Store {
    pub fn new(tenants: u32, partitions: i32) -> Self {
        Store {
            order: OrderChecker::new(tenants),
            partitions,
            next: (1, 0),
            pending: BTreeMap::new(),
        }
    }

    /// What partition `partition`'s member processed in tick `tick`, as (tenant, sequence
    /// number) in offset order; every member submits every tick, empty or not.
    pub fn submit(&mut self, tick: u32, partition: i32, applied: Vec<(u32, u64)>) {
        self.pending.insert((tick, partition), applied);
        while let Some(chunk) = self.pending.remove(&self.next) {
            for (tenant, seq) in chunk {
                self.order.apply(tenant, seq);
            }
            self.next = if self.next.1 + 1 < self.partitions {
                (self.next.0, self.next.1 + 1)
            } else {
                (self.next.0 + 1, 0)
            };
        }
    }

    /// The order checker, with everything submitted so far that could be applied in order.
    pub fn order(&self) -> &OrderChecker {
        &self.order
    }
}

/// What every worker shares.
pub struct Shared {
    pub plan: Timed,
    pub topic: String,
    pub store: Mutex<Store>,
    pub done: watch::Sender<Done>,
}

/// A member of `group`, subscribed to `topic`, committing only what it has processed.
pub fn member(client: &Client, group: &str, topic: &str) -> Result<GroupConsumer, LabError> {
    let mut config = manual_commit(group, HEARTBEAT, FETCH_WAIT);
    config.max_poll_records = MAX_POLL_RECORDS;
    let mut member = GroupConsumer::new(client.clone(), config)
        .map_err(|e| broker_error(&format!("creating a member of group {group}"), &e))?;
    member
        .subscribe([topic])
        .map_err(|e| broker_error(&format!("subscribing group {group} to {topic}"), &e))?;
    Ok(member)
}

/// Processes the member's one partition tick by tick until the run's last tick; returns the
/// records processed, and the member (to leave the group once every worker is done).
pub async fn run_worker(
    shared: Arc<Shared>,
    member: GroupConsumer,
    partition: i32,
    clock: watch::Receiver<Ticks>,
) -> Result<(u64, GroupConsumer), LabError> {
    let worked = work(&shared, member, partition, clock).await;
    if worked.is_err() {
        // The producer waits for every member at each sample; a failed one must not hang it.
        shared
            .done
            .send_modify(|done| done[partition as usize] = FAILED);
    }
    worked
}

async fn work(
    shared: &Shared,
    mut member: GroupConsumer,
    partition: i32,
    mut clock: watch::Receiver<Ticks>,
) -> Result<(u64, GroupConsumer), LabError> {
    let tp = TopicPartition::new(shared.topic.clone(), partition);
    let plan = shared.plan;
    let mut local: VecDeque<Record> = VecDeque::new();
    let mut next_offset: i64 = 0;
    for tick in 1..=plan.ticks() {
        let arrived = clock
            .wait_for(|ticks| ticks.len() >= tick as usize)
            .await
            .map_err(|_| LabError::Internal("the run's traffic clock stopped".into()))?
            [tick as usize - 1][partition as usize];
        let capacity = i64::try_from(plan.capacity(tick)).unwrap_or(i64::MAX);
        let take = (arrived - next_offset).clamp(0, capacity) as usize;
        let mut empty_polls = 0;
        while local.len() < take {
            let before = local.len();
            poll_into(&mut member, &tp, &mut local).await?;
            empty_polls = if local.len() == before {
                empty_polls + 1
            } else {
                0
            };
            if empty_polls >= MAX_EMPTY_POLLS {
                return Err(LabError::Broker(format!(
                    "{tp} returned no records below its log end offset {arrived} after \
                     {MAX_EMPTY_POLLS} polls; the broker is not serving what it acknowledged"
                )));
            }
        }
        let chunk: Vec<Record> = local.drain(..take).collect();
        if let Some(last) = chunk.last() {
            if chunk[0].offset != next_offset || last.offset + 1 != next_offset + take as i64 {
                return Err(LabError::Broker(format!(
                    "{tp} served offsets {} to {} where the member expected {next_offset} to {}",
                    chunk[0].offset,
                    last.offset,
                    next_offset + take as i64 - 1
                )));
            }
            next_offset = last.offset + 1;
            let offsets = BTreeMap::from([(tp.clone(), next_offset)]);
            member
                .commit_offsets_sync(offsets)
                .await
                .map_err(|e| broker_error(&format!("committing {tp}"), &e))?;
        }
        shared.store.lock().submit(tick, partition, applied(&chunk));
        shared
            .done
            .send_modify(|done| done[partition as usize] = tick);
    }
    Ok((next_offset as u64, member))
}

/// One poll, into the worker's queue. The group was stable before the traffic started and
/// nothing makes it rebalance, so records of another partition would be a bug worth stopping
/// for: the lab's figures assume one member per partition.
async fn poll_into(
    member: &mut GroupConsumer,
    tp: &TopicPartition,
    local: &mut VecDeque<Record>,
) -> Result<(), LabError> {
    let polled = member
        .poll()
        .await
        .map_err(|e| broker_error(&format!("polling {tp}"), &e))?;
    for part in polled {
        if part.partition != tp.partition || part.topic != tp.topic {
            return Err(LabError::Broker(format!(
                "the group rebalanced during the run: the member of {tp} got {}-{}",
                part.topic, part.partition
            )));
        }
        local.extend(part.records);
    }
    Ok(())
}

/// A chunk as the store applies it: (tenant, sequence number) in offset order.
fn applied(chunk: &[Record]) -> Vec<(u32, u64)> {
    chunk
        .iter()
        .filter_map(|record| {
            let tenant = record.key.as_deref().and_then(tenant_of_key)?;
            let seq = record.value.as_deref().and_then(decode_seq)?;
            Some((tenant, seq))
        })
        .collect()
}

/// The hot-key detector: a reader of every partition of its own (it only counts keys, so it
/// never falls behind the way the rate-limited group does, and its shares are shares of the
/// traffic) that feeds a Space-Saving sketch tick by tick, and within a tick partition by
/// partition: the sketch's estimates depend on the order it sees keys in, and this order is
/// the traffic's, not the machine's.
pub async fn run_detector(
    client: Client,
    topic: String,
    plan: Timed,
    capacity: usize,
    mut clock: watch::Receiver<Ticks>,
) -> Result<SpaceSaving<u32>, LabError> {
    let mut readers = (0..plan.partitions)
        .map(|p| {
            PartitionReader::new(
                &client,
                TopicPartition::new(topic.clone(), p),
                0,
                FETCH_WAIT,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut read = vec![0i64; plan.partitions as usize];
    let mut sketch = SpaceSaving::new(capacity);
    for tick in 1..=plan.ticks() {
        let ends = Arc::clone(
            &clock
                .wait_for(|ticks| ticks.len() >= tick as usize)
                .await
                .map_err(|_| LabError::Internal("the detector outlived its run".into()))?
                [tick as usize - 1],
        );
        for (reader, (from, &end)) in readers.iter_mut().zip(read.iter_mut().zip(ends.iter())) {
            let count = usize::try_from(end - *from).unwrap_or(0);
            if count == 0 {
                continue;
            }
            for record in reader.take(count, end).await? {
                // The key names the tenant (salted or not); parsing it allocates nothing.
                if let Some(tenant) = record.key.as_deref().and_then(tenant_of_key) {
                    sketch.add(&tenant);
                }
            }
            *from = end;
        }
    }
    Ok(sketch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_behind_one_already_applied_is_out_of_order() {
        let mut order = OrderChecker::new(3);
        for seq in [0, 1, 3, 2, 4, 1] {
            order.apply(2, seq);
        }
        order.apply(1, 0);
        assert_eq!(order.out_of_order(2), 2);
        assert_eq!(order.applied(2), 6);
        assert_eq!(order.out_of_order(1), 0);
        // Tenants the checker was not sized for are ignored, not a panic.
        order.apply(99, 1);
        assert_eq!(order.out_of_order(99), 0);
    }

    #[test]
    fn the_store_applies_tick_by_tick_and_partition_by_partition() {
        let mut store = Store::new(1, 2);
        // Tick 1 of partition 1 and tick 2 of partition 0 finish first; they wait for tick 1 of
        // partition 0, and are then applied in traffic-time order, not in the order they came.
        store.submit(1, 1, vec![(1, 0), (1, 3)]);
        store.submit(2, 0, vec![(1, 2)]);
        assert_eq!(store.order().applied(1), 0);
        store.submit(1, 0, vec![(1, 1)]);
        // 1, then 0 and 3, then 2: 0 and 2 come after a later one.
        assert_eq!(store.order().applied(1), 4);
        assert_eq!(store.order().out_of_order(1), 2);
        store.submit(2, 1, vec![]);
        store.submit(3, 0, vec![(1, 4)]);
        assert_eq!(store.order().applied(1), 5);
    }
}
