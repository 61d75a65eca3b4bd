//! The consumer group's work: one member per partition that processes at most its rate's worth
//! of records for the traffic time elapsed, applies them in offset order, and commits after
//! each chunk, so the group's committed offsets (and so its lag, as the broker reports it)
//! follow the processing. Also the order checker the salted run needs, and the heavy-hitter
//! detector.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use client::group::{GroupConfig, GroupConsumer};
use client::{Client, Consumer, ConsumerConfig, OffsetReset, Record, SeekTo, TopicPartition};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::super::plan::Timed;
use super::super::sketch::SpaceSaving;
use super::super::traffic::{decode_seq, tenant_of_key};
use crate::lab::LabError;
use crate::target::broker_error;

/// How long a fetch waits for new records before the worker looks at the clock again.
const FETCH_WAIT: Duration = Duration::from_millis(50);

/// How often members heartbeat (and so hear of a rebalance).
const HEARTBEAT: Duration = Duration::from_millis(100);

/// Records one poll may return (`max.poll.records`): a few ticks' worth at the default rates,
/// so a member holds little more than it may process.
const MAX_POLL_RECORDS: usize = 20_000;

/// The traffic clock the producer publishes: records sent so far, and once it has finished,
/// every partition's final log end offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clock {
    pub sent: u64,
    pub final_ends: Option<Arc<Vec<i64>>>,
}

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

/// What every worker shares.
pub struct Shared {
    pub plan: Timed,
    pub topic: String,
    pub order: Mutex<OrderChecker>,
}

/// A member of `group`, subscribed to `topic`, committing only what it has processed.
pub fn member(client: &Client, group: &str, topic: &str) -> Result<GroupConsumer, LabError> {
    let mut config = GroupConfig::new(group);
    // Members learn of a rebalance from their heartbeats: at Kafka's 3 s the eight members of a
    // fresh group take seconds to settle, at 100 ms a fraction of one.
    config.heartbeat_interval = HEARTBEAT;
    config.auto_commit = false;
    config.max_poll_records = MAX_POLL_RECORDS;
    config.consumer = ConsumerConfig {
        max_wait: FETCH_WAIT,
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    };
    let mut member = GroupConsumer::new(client.clone(), config)
        .map_err(|e| broker_error(&format!("creating a member of group {group}"), &e))?;
    member
        .subscribe([topic])
        .map_err(|e| broker_error(&format!("subscribing group {group} to {topic}"), &e))?;
    Ok(member)
}

/// Processes the member's one partition until the traffic has finished and the member has
/// used its whole budget or caught up with the log; returns the records processed, and the
/// member (to leave the group once every worker is done).
pub async fn run_worker(
    shared: Arc<Shared>,
    mut member: GroupConsumer,
    partition: i32,
    mut clock: watch::Receiver<Clock>,
) -> Result<(u64, GroupConsumer), LabError> {
    let tp = TopicPartition::new(shared.topic.clone(), partition);
    let mut local: VecDeque<Record> = VecDeque::new();
    let mut processed: u64 = 0;
    let mut next_offset: i64 = 0;
    loop {
        let now = clock.borrow_and_update().clone();
        let budget = shared.plan.budget(now.sent);
        let end = now
            .final_ends
            .as_ref()
            .and_then(|ends| ends.get(partition as usize).copied());
        // Work through the budget, polling as needed; stop early when the log has nothing more.
        while processed < budget {
            if local.is_empty() {
                if end.is_some_and(|end| next_offset >= end) {
                    break;
                }
                poll_into(&mut member, &tp, &mut local).await?;
                if local.is_empty() {
                    // Nothing new yet: look at the clock again before waiting once more.
                    break;
                }
            }
            let take = usize::try_from(budget - processed)
                .unwrap_or(usize::MAX)
                .min(local.len());
            let chunk: Vec<Record> = local.drain(..take).collect();
            apply(&shared, &chunk);
            processed += take as u64;
            if let Some(last) = chunk.last() {
                next_offset = last.offset + 1;
                let offsets = BTreeMap::from([(tp.clone(), next_offset)]);
                member
                    .commit_offsets_sync(offsets)
                    .await
                    .map_err(|e| broker_error(&format!("committing {tp}"), &e))?;
            }
        }
        if let Some(end) = end {
            // The traffic is over: done once the whole run's budget is used or the log is read.
            if processed >= budget || next_offset >= end {
                return Ok((processed, member));
            }
        } else if processed >= budget && clock.changed().await.is_err() {
            // Out of budget, the worker waited for the next tick of traffic time; a clock that
            // is gone means the run was abandoned.
            return Ok((processed, member));
        }
    }
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

/// Applies a chunk in offset order: the order checker is the "store" the consumers write to.
fn apply(shared: &Shared, chunk: &[Record]) {
    let mut order = shared.order.lock();
    for record in chunk {
        let tenant = record.key.as_deref().and_then(tenant_of_key);
        let seq = record.value.as_deref().and_then(decode_seq);
        if let (Some(tenant), Some(seq)) = (tenant, seq) {
            order.apply(tenant, seq);
        }
    }
}

/// The hot-key detector: a consumer of its own that reads every partition as fast as it can
/// and only counts keys in a Space-Saving sketch, so it never falls behind the way the
/// rate-limited group does, and its shares are shares of the traffic. Stops once it has read up
/// to the final log end offsets.
pub async fn run_detector(
    client: Client,
    topic: String,
    partitions: i32,
    capacity: usize,
    mut clock: watch::Receiver<Clock>,
) -> Result<SpaceSaving<u32>, LabError> {
    let config = ConsumerConfig {
        max_wait: FETCH_WAIT,
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(client, config);
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic.clone(), p))
        .collect();
    consumer.assign(tps.clone());
    consumer
        .seek_all(SeekTo::Beginning)
        .map_err(|e| broker_error("seeking the detector", &e))?;
    let mut sketch = SpaceSaving::new(capacity);
    loop {
        // The run gave up (its clock is gone): stop reading.
        if clock.has_changed().is_err() {
            return Err(LabError::Internal("the detector outlived its run".into()));
        }
        let ends = clock.borrow_and_update().final_ends.clone();
        if let Some(ends) = ends {
            let done = tps
                .iter()
                .all(|tp| consumer.position(tp) >= ends.get(tp.partition as usize).copied());
            if done {
                return Ok(sketch);
            }
        }
        let fetched = consumer
            .poll()
            .await
            .map_err(|e| broker_error("the detector's fetch", &e))?;
        for part in fetched {
            for record in part.records() {
                let record =
                    record.map_err(|e| LabError::Internal(format!("a fetched batch: {e}")))?;
                // The key names the tenant (salted or not); parsing it allocates nothing.
                if let Some(tenant) = record.key.as_deref().and_then(tenant_of_key) {
                    sketch.add(&tenant);
                }
            }
        }
    }
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
}
