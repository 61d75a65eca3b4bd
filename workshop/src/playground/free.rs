//! The playground's free mode: keyed traffic at a chosen rate (uniform, or with a hot key), a
//! real consumer group whose members each process at a fixed rate, and the room's hands on it:
//! add or remove a member, stall one past `max.poll.interval`, add partitions. The lag per
//! partition comes from the broker (the page's broker panel); this module tells what only the
//! consumers know: who owns what, the rebalances, duplicates and per-key order violations, the
//! latter found by lab partitions' ordering checker, which also names the partition change that
//! caused each.
//!
//! Records are keyed `key-NN` and carry their key's version (1, 2, ...) as the value; the
//! producer routes with Kafka's partitioner (murmur2), so adding partitions moves keys.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use client::{
    Client, ClientConfig, GroupConsumer, Producer, ProducerConfig, ProducerRecord, TopicPartition,
};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::kit::group::manual_commit;
use crate::lab::report::Violation;
use crate::lab::target::{broker_error, Cluster};
use crate::lab::LabError;
use client::check::{OrderingChecker, Position};

/// Keys of the traffic: `key-00` to `key-23`.
pub const KEYS: u32 = 24;
/// Of a hot key's traffic, the records in a hundred that go to the hot key (source 000: 9 of 12).
const HOT_PER_HUNDRED: u64 = 75;
/// The producer and the members work in ticks of this length.
const TICK: Duration = Duration::from_millis(100);
/// Short, so that a stalled member leaves within seconds (Kafka's default is 5 minutes).
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(3);
/// How often members commit what they processed (so a member that leaves has processed
/// records nobody committed: the new owner processes them again).
const COMMIT_EVERY: Duration = Duration::from_millis(500);
/// How soon producer and members see new partitions.
const METADATA_MAX_AGE: Duration = Duration::from_secs(1);
/// Violations kept for the page (all are counted).
const SHOWN: usize = 12;

pub const MAX_RATE: u32 = 2_000;
pub const MAX_MEMBERS: usize = 12;
pub const MAX_PARTITIONS: i32 = 64;
pub const MAX_CAPACITY: u32 = 1_000;

/// What the room asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    /// Records a second.
    pub rate: u32,
    pub hot_key: Option<u32>,
}

/// One member as the page shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MemberView {
    pub name: String,
    pub partitions: Vec<i32>,
    pub processed: u64,
    pub stalled: bool,
    pub generation: i32,
}

/// The free mode as the page shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct View {
    pub running: bool,
    pub topic: Option<String>,
    pub partitions: i32,
    pub rate: u32,
    pub hot_key: Option<u32>,
    pub keys: u32,
    /// Records a member processes per second.
    pub capacity: u32,
    pub members: Vec<MemberView>,
    pub produced: u64,
    pub processed: u64,
    /// Records processed a second time (a rebalance handed them to a member from an older
    /// committed offset).
    pub duplicates: u64,
    pub violations: usize,
    pub keys_out_of_order: usize,
    /// The first violations, in detail.
    pub shown: Vec<Violation>,
    /// Group generations the members went through: each new one is a rebalance.
    pub rebalances: usize,
    pub error: Option<String>,
}

/// What producer and members share.
#[derive(Default)]
struct Shared {
    checker: OrderingChecker,
    produced: u64,
    generations: BTreeSet<i32>,
    members: BTreeMap<usize, MemberView>,
    error: Option<String>,
}

struct MemberHandle {
    id: usize,
    stall: mpsc::UnboundedSender<Duration>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// A free-mode session: one topic and group, traffic and members until stopped.
pub struct Free {
    topic: String,
    group: String,
    partitions: i32,
    capacity: u32,
    service: ClientConfig,
    traffic: watch::Sender<Traffic>,
    producer: JoinHandle<()>,
    members: Vec<MemberHandle>,
    next_member: usize,
    shared: Arc<Mutex<Shared>>,
}

impl Free {
    /// Creates the topic and group the playground calls `base`, with `members` members
    /// processing `capacity` records a second each; the traffic starts at `traffic`.
    pub async fn start(
        cluster: &Cluster,
        base: &str,
        partitions: i32,
        members: usize,
        capacity: u32,
        traffic: Traffic,
    ) -> Result<Free, LabError> {
        let topic = cluster.create_topic(base, partitions).await?;
        let group = cluster.group(base);
        let mut service = ClientConfig::new(cluster.addr());
        service.client_id = "playground".to_string();
        service.metadata_max_age = METADATA_MAX_AGE;
        let shared = Arc::new(Mutex::new(Shared::default()));
        shared.lock().checker.layout(&topic, partitions);
        let client = connect(&service, "playground-producer").await?;
        let producer = Producer::new(client, ProducerConfig::default())
            .map_err(|e| broker_error("starting the producer", &e))?;
        let (traffic, rx) = watch::channel(traffic);
        let producer = tokio::spawn(produce(producer, topic.clone(), rx, shared.clone()));
        let mut free = Free {
            topic,
            group,
            partitions,
            capacity,
            service,
            traffic,
            producer,
            members: Vec::new(),
            next_member: 1,
            shared,
        };
        for _ in 0..members {
            free.add_member().await?;
        }
        Ok(free)
    }

    pub fn set_traffic(&self, traffic: Traffic) {
        self.traffic.send_replace(traffic);
    }

    pub async fn add_member(&mut self) -> Result<(), LabError> {
        if self.members.len() >= MAX_MEMBERS {
            return Err(LabError::InvalidInput(format!(
                "the group has {MAX_MEMBERS} members already, the playground's most"
            )));
        }
        let id = self.next_member;
        self.next_member += 1;
        let name = format!("member-{id}");
        let client = connect(&self.service, &name).await?;
        let mut config = manual_commit(
            &self.group,
            Duration::from_millis(200),
            Duration::from_millis(50),
        );
        config.session_timeout = Duration::from_secs(6);
        config.max_poll_interval = MAX_POLL_INTERVAL;
        let per_tick = (self.capacity as usize * TICK.as_millis() as usize / 1000).max(1);
        config.max_poll_records = per_tick;
        let mut consumer = GroupConsumer::new(client, config)
            .map_err(|e| broker_error("creating a group member", &e))?;
        consumer
            .subscribe([self.topic.clone()])
            .map_err(|e| broker_error("subscribing", &e))?;
        self.shared.lock().members.insert(
            id,
            MemberView {
                name,
                generation: -1,
                ..MemberView::default()
            },
        );
        let (stall, stalls) = mpsc::unbounded_channel();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(member(
            id,
            consumer,
            per_tick,
            stalls,
            stopped,
            self.shared.clone(),
        ));
        self.members.push(MemberHandle {
            id,
            stall,
            stop,
            task,
        });
        Ok(())
    }

    /// Removes the newest member: it leaves the group, which rebalances.
    pub async fn remove_member(&mut self) -> Result<(), LabError> {
        let Some(handle) = self.members.pop() else {
            return Err(LabError::InvalidInput(
                "the group has no member left".into(),
            ));
        };
        handle.stop.send_replace(true);
        let _ = handle.task.await;
        self.shared.lock().members.remove(&handle.id);
        Ok(())
    }

    /// Member number `index` (from 0, in the page's order) stops polling for `for_`.
    pub fn stall(&self, index: usize, for_: Duration) -> Result<(), LabError> {
        let handle = self.members.get(index).ok_or_else(|| {
            LabError::InvalidInput(format!(
                "there is no member {index}: the group has {}",
                self.members.len()
            ))
        })?;
        handle
            .stall
            .send(for_)
            .map_err(|_| LabError::InvalidInput("that member has stopped".into()))
    }

    /// Grows the topic (CreatePartitions); producer and members notice on their own.
    pub async fn grow(&mut self, cluster: &Cluster, partitions: i32) -> Result<(), LabError> {
        if partitions <= self.partitions || partitions > MAX_PARTITIONS {
            return Err(LabError::InvalidInput(format!(
                "{partitions} partitions: give more than {} and at most {MAX_PARTITIONS} (Kafka \
                 only adds partitions)",
                self.partitions
            )));
        }
        // CreatePartitions, and the metadata that shows it: no lab phase bounds the room's
        // button, so it has a deadline of its own.
        let work = crate::lab::deadline::Work {
            round_trips: 2,
            ..crate::lab::deadline::Work::default()
        };
        let deadline = crate::lab::deadline::Deadline::start("adding partitions", work);
        let growing = format!("growing {} to {partitions} partitions", self.topic);
        deadline
            .wait(&growing, cluster.grow_topic(&self.topic, partitions))
            .await?;
        self.partitions = partitions;
        self.shared.lock().checker.layout(&self.topic, partitions);
        Ok(())
    }

    pub fn view(&self) -> View {
        let shared = self.shared.lock();
        let traffic = *self.traffic.borrow();
        let members: Vec<MemberView> = self
            .members
            .iter()
            .filter_map(|h| shared.members.get(&h.id).cloned())
            .collect();
        let checker = &shared.checker;
        View {
            running: true,
            topic: Some(self.topic.clone()),
            partitions: self.partitions,
            rate: traffic.rate,
            hot_key: traffic.hot_key,
            keys: KEYS,
            capacity: self.capacity,
            processed: members.iter().map(|m| m.processed).sum(),
            members,
            produced: shared.produced,
            duplicates: checker.duplicates(),
            violations: checker.violations().len(),
            keys_out_of_order: checker.keys_out_of_order(),
            shown: checker
                .violations()
                .iter()
                .take(SHOWN)
                .map(|v| Violation::of_order(v, String::new()))
                .collect(),
            rebalances: shared.generations.len().saturating_sub(1),
            error: shared.error.clone(),
        }
    }

    /// Stops traffic and members; the topic and group stay until the playground ends.
    pub async fn stop(mut self) {
        self.producer.abort();
        while self.remove_member().await.is_ok() {}
    }
}

async fn connect(service: &ClientConfig, name: &str) -> Result<Client, LabError> {
    let mut config = service.clone();
    config.client_id = format!("playground-{name}");
    Client::connect(config)
        .await
        .map_err(|e| broker_error(&format!("connecting {name}"), &e))
}

/// The key of the `n`th record of a tick, for the traffic asked: uniform goes round the keys;
/// a hot key takes [`HOT_PER_HUNDRED`] in a hundred and the rest go round the others.
fn key_of(traffic: Traffic, n: u64) -> u32 {
    match traffic.hot_key {
        Some(hot) if n % 100 < HOT_PER_HUNDRED => hot % KEYS,
        Some(hot) => (hot + 1 + (n % u64::from(KEYS - 1)) as u32) % KEYS,
        None => (n % u64::from(KEYS)) as u32,
    }
}

/// Sends `rate` records a second, tick by tick, and tells the checker where each landed.
async fn produce(
    producer: Producer,
    topic: String,
    mut traffic: watch::Receiver<Traffic>,
    shared: Arc<Mutex<Shared>>,
) {
    let mut versions = vec![0i64; KEYS as usize];
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut sent, mut owed) = (0u64, 0.0f64);
    loop {
        ticks.tick().await;
        let now = *traffic.borrow_and_update();
        owed += f64::from(now.rate) * TICK.as_secs_f64();
        let mut pending = Vec::new();
        while owed >= 1.0 {
            owed -= 1.0;
            let key = key_of(now, sent);
            sent += 1;
            versions[key as usize] += 1;
            let (name, version) = (format!("key-{key:02}"), versions[key as usize]);
            let value = version.to_string();
            let record = ProducerRecord::new(&topic).key(&name).value(&value);
            match producer.send(record).await {
                Ok(delivery) => pending.push((name, version, delivery)),
                Err(e) => return fail(&shared, format!("producing: {e}")),
            }
        }
        for (key, version, delivery) in pending {
            match delivery.wait().await {
                Ok(at) => {
                    let mut shared = shared.lock();
                    shared.produced += 1;
                    let at = Position::new(topic.clone(), at.partition, at.offset);
                    shared.checker.written(&key, version, at);
                }
                Err(e) => return fail(&shared, format!("producing: {e}")),
            }
        }
    }
}

fn fail(shared: &Mutex<Shared>, error: String) {
    tracing::warn!(%error, "the playground's traffic stopped");
    shared.lock().error = Some(error);
}

/// One member: each tick it polls (at most a tick's capacity), processes in offset order,
/// and commits every [`COMMIT_EVERY`]; a stall stops it polling for a while.
async fn member(
    id: usize,
    mut consumer: GroupConsumer,
    per_tick: usize,
    mut stalls: mpsc::UnboundedReceiver<Duration>,
    mut stop: watch::Receiver<bool>,
    shared: Arc<Mutex<Shared>>,
) {
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut processed: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    let mut last_commit = tokio::time::Instant::now();
    let mut local: VecDeque<(TopicPartition, client::Record)> = VecDeque::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            Some(stall) = stalls.recv() => {
                set(&shared, id, |m| m.stalled = true);
                tokio::select! {
                    _ = tokio::time::sleep(stall) => {}
                    _ = stop.changed() => break,
                }
                set(&shared, id, |m| m.stalled = false);
                continue;
            }
            _ = ticks.tick() => {}
        }
        match consumer.poll().await {
            Ok(polled) => {
                for part in polled {
                    let tp = part.topic_partition();
                    local.extend(part.records.into_iter().map(|r| (tp.clone(), r)));
                }
            }
            Err(e) => {
                tracing::debug!(%e, "a playground member's poll failed");
                continue;
            }
        }
        // Records of partitions a rebalance took away are the new owner's now.
        let owned: BTreeSet<TopicPartition> = consumer.assignment().into_iter().collect();
        local.retain(|(tp, _)| owned.contains(tp));
        processed.retain(|tp, _| owned.contains(tp));
        let take = per_tick.min(local.len());
        let mut shared_now = shared.lock();
        for (tp, record) in local.drain(..take) {
            let key = record.key.as_deref().map(String::from_utf8_lossy);
            let version = record
                .value
                .as_deref()
                .and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok());
            if let (Some(key), Some(version)) = (key, version) {
                let at = Position::new(tp.topic.clone(), tp.partition, record.offset);
                shared_now.checker.arrived(&key, version, at);
            }
            processed.insert(tp, record.offset + 1);
            if let Some(m) = shared_now.members.get_mut(&id) {
                m.processed += 1;
            }
        }
        let generation = consumer.generation().id;
        if generation >= 0 {
            shared_now.generations.insert(generation);
        }
        if let Some(m) = shared_now.members.get_mut(&id) {
            m.generation = generation;
            m.partitions = owned.iter().map(|tp| tp.partition).collect();
        }
        drop(shared_now);
        if last_commit.elapsed() >= COMMIT_EVERY && !processed.is_empty() {
            last_commit = tokio::time::Instant::now();
            // Sent at once; its answer is not needed: a member that was removed from the group
            // is refused, and the new owner has these records.
            drop(consumer.commit_offsets_async(processed.clone()));
        }
    }
    let _ = consumer.close().await;
}

fn set(shared: &Mutex<Shared>, id: usize, change: impl FnOnce(&mut MemberView)) {
    if let Some(m) = shared.lock().members.get_mut(&id) {
        change(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hot_key_takes_three_quarters_of_the_traffic() {
        let hot = Traffic {
            rate: 100,
            hot_key: Some(5),
        };
        let keys: Vec<u32> = (0..100).map(|n| key_of(hot, n)).collect();
        assert_eq!(keys.iter().filter(|&&k| k == 5).count(), 75);
        assert!(keys.iter().all(|&k| k < KEYS));
        let uniform = Traffic {
            rate: 100,
            hot_key: None,
        };
        let mut per_key = vec![0; KEYS as usize];
        (0..u64::from(KEYS) * 4).for_each(|n| per_key[key_of(uniform, n) as usize] += 1);
        assert!(per_key.iter().all(|&c| c == 4), "{per_key:?}");
    }
}
