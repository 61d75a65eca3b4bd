//! The order service's consumers: a real consumer group (`client::GroupConsumer`, Kafka's
//! classic protocol, Kafka's default assignors), one member per task, each with its own client
//! and metadata, as separate service instances would run.
//!
//! Members poll on their own, as any Kafka consumer does: they join, rebalance when the group
//! leader's metadata shows more partitions, and fetch what they own into a buffer here. The lab
//! does not decide who owns what; it decides only *when* records are applied. Each round it takes
//! from the owning member's buffer exactly the next records of each partition (the offsets after
//! what was applied, which is also what the group committed), so the order of application does
//! not depend on fetch timing. Commits go through the owning member, with its generation, so a
//! member that lost a partition cannot commit it.
//!
//! The lab's topics are written by its own producer without transactions, so offsets are dense:
//! a round waits for every offset it takes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use client::{
    Client, ClientConfig, ConsumerConfig, GroupConfig, GroupConsumer, OffsetReset, Record,
    TopicPartition,
};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use super::events::{OrderEvent, ROUTING_HEADER};
use super::pace::{PartitionId, Queues};
use crate::lab::LabError;
use client::check::Position;

/// How long a member's fetch waits for data: short, so a member answers the lab's commits
/// promptly (Kafka's 500 ms default would add that much to every round).
const FETCH_MAX_WAIT: Duration = Duration::from_millis(20);

/// How often members heartbeat (see [`group_config`]).
const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(100);

/// One record as a member handed it over.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub at: Position,
    /// The order event, or why the record is not one.
    pub event: Result<OrderEvent, String>,
    /// The routing version in the record's header, if it has one.
    pub routing_version: Option<u32>,
}

impl Delivery {
    fn of(topic: &str, partition: i32, record: &Record) -> Self {
        let routing_version = record
            .headers()
            .find(|h| h.key.as_ref() == ROUTING_HEADER.as_bytes())
            .and_then(|h| h.value)
            .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok());
        Delivery {
            at: Position::new(topic, partition, record.offset),
            event: OrderEvent::decode(record.key.as_deref(), record.value.as_deref()),
            routing_version,
        }
    }
}

/// What a member shows the lab.
#[derive(Debug, Default)]
struct View {
    client_id: String,
    member_id: String,
    generation: i32,
    owned: BTreeSet<TopicPartition>,
    /// Fetched records by partition and offset, not yet taken by a round.
    fetched: BTreeMap<TopicPartition, BTreeMap<i64, Delivery>>,
    /// Why the member stopped, if it did.
    failed: Option<String>,
}

type Views = Arc<Mutex<Vec<View>>>;

enum Command {
    Commit(
        BTreeMap<TopicPartition, i64>,
        oneshot::Sender<Result<(), String>>,
    ),
    Subscribe(String, oneshot::Sender<Result<(), String>>),
    Leave(oneshot::Sender<()>),
}

/// The group, as the lab drives it.
pub struct Group {
    group_id: String,
    views: Views,
    changed: Arc<Notify>,
    commands: Vec<mpsc::UnboundedSender<Command>>,
    tasks: Vec<JoinHandle<()>>,
    /// Commits sent and not yet answered (see [`Group::commit`]).
    pending: Vec<oneshot::Receiver<Result<(), String>>>,
}

impl Group {
    /// Starts `members` members of `group_id`, subscribed to `topic`, each with its own client
    /// built from `config` (whose metadata max age is how soon they notice new partitions).
    pub async fn join(
        config: &ClientConfig,
        group_id: &str,
        topic: &str,
        members: u32,
    ) -> Result<Group, LabError> {
        let views: Views = Arc::default();
        let changed = Arc::new(Notify::new());
        let mut commands = Vec::new();
        let mut tasks = Vec::new();
        for i in 0..members as usize {
            let mut member_config = config.clone();
            member_config.client_id = format!("{}-consumer-{}", config.client_id, i + 1);
            let client = Client::connect(member_config.clone())
                .await
                .map_err(|e| crate::target::broker_error("connecting a consumer", &e))?;
            let mut consumer = GroupConsumer::new(client, group_config(group_id))
                .map_err(|e| crate::target::broker_error("creating a group member", &e))?;
            consumer
                .subscribe([topic])
                .map_err(|e| crate::target::broker_error("subscribing", &e))?;
            lock(&views).push(View {
                client_id: member_config.client_id,
                generation: -1,
                ..View::default()
            });
            let (tx, rx) = mpsc::unbounded_channel();
            commands.push(tx);
            tasks.push(tokio::spawn(member_loop(
                i,
                consumer,
                rx,
                Arc::clone(&views),
                Arc::clone(&changed),
            )));
        }
        Ok(Group {
            group_id: group_id.to_string(),
            views,
            changed,
            commands,
            tasks,
            pending: Vec::new(),
        })
    }

    /// Waits until the members, all in one generation, own exactly the partitions of `topic`
    /// (0 to `partitions` - 1), each once. Returns each member's client id and partitions.
    /// As long as it takes: the phase's deadline bounds it.
    pub async fn settled(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Result<Vec<(String, Vec<i32>)>, LabError> {
        let wanted: BTreeSet<TopicPartition> = (0..partitions)
            .map(|p| TopicPartition::new(topic, p))
            .collect();
        let what = format!(
            "group {} taking over the {partitions} partitions of {topic}",
            self.group_id
        );
        self.wait(&what, |views| {
            let generations: BTreeSet<i32> = views.iter().map(|v| v.generation).collect();
            let mut owned = BTreeSet::new();
            let disjoint = views
                .iter()
                .flat_map(|v| v.owned.iter())
                .all(|tp| owned.insert(tp.clone()));
            let done =
                disjoint && owned == wanted && generations.len() == 1 && !generations.contains(&-1);
            done.then(|| {
                views
                    .iter()
                    .map(|v| {
                        let partitions = v.owned.iter().map(|tp| tp.partition).collect();
                        (v.client_id.clone(), partitions)
                    })
                    .collect()
            })
        })
        .await
    }

    /// Takes, for each `(partition, from, count)`, the records at offsets `from..from + count`
    /// from the member that owns the partition, waiting until it has fetched them.
    pub async fn take(
        &self,
        wants: &[(PartitionId, i64, i64)],
    ) -> Result<Queues<Delivery>, LabError> {
        let what = format!("group {} fetching the next records", self.group_id);
        self.wait(&what, |views| {
            let ready = wants.iter().all(|((topic, p), from, count)| {
                let tp = TopicPartition::new(topic.clone(), *p);
                owner(views, &tp).is_some_and(|v| {
                    v.fetched.get(&tp).is_some_and(|records| {
                        (*from..from + count).all(|o| records.contains_key(&o))
                    })
                })
            });
            if !ready {
                return None;
            }
            let mut queues: Queues<Delivery> = BTreeMap::new();
            for ((topic, p), from, count) in wants {
                let tp = TopicPartition::new(topic.clone(), *p);
                let Some(i) = views.iter().position(|v| v.owned.contains(&tp)) else {
                    continue;
                };
                let Some(records) = views[i].fetched.get_mut(&tp) else {
                    continue;
                };
                // Everything below the end of this take is applied (or was before): drop it.
                let rest = records.split_off(&(from + count));
                let taken: VecDeque<Delivery> = std::mem::replace(records, rest)
                    .into_values()
                    .filter(|d| d.at.offset >= *from)
                    .collect();
                queues.insert((topic.clone(), *p), taken);
            }
            Some(queues)
        })
        .await
    }

    /// Commits, through each partition's owner, the next offset to read of every owned
    /// partition in `applied`; partitions nobody owns (a topic left behind) are skipped.
    ///
    /// Sent, not awaited: each member commits before its next poll, so before it can take part
    /// in a rebalance, and [`flush`](Self::flush) waits for the answers. Waiting here would add a
    /// member's fetch wait to every round.
    pub fn commit(&mut self, applied: &BTreeMap<PartitionId, i64>) -> Result<(), LabError> {
        let mut by_member: BTreeMap<usize, BTreeMap<TopicPartition, i64>> = BTreeMap::new();
        {
            let views = lock(&self.views);
            for ((topic, p), offset) in applied {
                let tp = TopicPartition::new(topic.clone(), *p);
                if let Some(i) = views.iter().position(|v| v.owned.contains(&tp)) {
                    by_member.entry(i).or_default().insert(tp, *offset);
                }
            }
        }
        for (i, offsets) in by_member {
            let (tx, rx) = oneshot::channel();
            self.send(i, Command::Commit(offsets, tx))?;
            self.pending.push(rx);
        }
        Ok(())
    }

    /// Waits for every commit sent so far.
    pub async fn flush(&mut self) -> Result<(), LabError> {
        for reply in std::mem::take(&mut self.pending) {
            reply
                .await
                .map_err(|_| self.stopped())?
                .map_err(|e| LabError::Broker(format!("committing offsets failed: {e}")))?;
        }
        Ok(())
    }

    /// Moves every member to `topic` (a rebalance).
    pub async fn subscribe(&self, topic: &str) -> Result<(), LabError> {
        let mut replies = Vec::new();
        for i in 0..self.commands.len() {
            let (tx, rx) = oneshot::channel();
            self.send(i, Command::Subscribe(topic.to_string(), tx))?;
            replies.push(rx);
        }
        for reply in replies {
            reply
                .await
                .map_err(|_| self.stopped())?
                .map_err(|e| LabError::Broker(format!("subscribing to {topic} failed: {e}")))?;
        }
        Ok(())
    }

    /// Every member leaves the group (LeaveGroup), then its task ends.
    pub async fn leave(mut self) {
        if let Err(e) = self.flush().await {
            tracing::warn!(%e, "last commits before leaving");
        }
        let mut replies = Vec::new();
        for tx in &self.commands {
            let (reply, rx) = oneshot::channel();
            if tx.send(Command::Leave(reply)).is_ok() {
                replies.push(rx);
            }
        }
        for rx in replies {
            let _ = rx.await;
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }

    fn send(&self, i: usize, command: Command) -> Result<(), LabError> {
        self.commands[i].send(command).map_err(|_| self.stopped())
    }

    fn stopped(&self) -> LabError {
        let views = lock(&self.views);
        let why = views
            .iter()
            .find_map(|v| v.failed.clone())
            .unwrap_or_else(|| "it stopped".to_string());
        LabError::Broker(format!(
            "a member of group {} stopped: {why}",
            self.group_id
        ))
    }

    /// Waits until `ready` returns something, re-checking whenever a member reports; fails
    /// when a member stopped. The phase's deadline bounds the wait.
    async fn wait<T>(
        &self,
        what: &str,
        mut ready: impl FnMut(&mut Vec<View>) -> Option<T>,
    ) -> Result<T, LabError> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a report in between still wakes us.
            changed.as_mut().enable();
            {
                let mut views = lock(&self.views);
                if let Some(failed) = views.iter().find_map(|v| v.failed.clone()) {
                    return Err(LabError::Broker(format!("{what} failed: {failed}")));
                }
                if let Some(found) = ready(&mut views) {
                    return Ok(found);
                }
            }
            changed.await;
        }
    }
}

/// The member's settings: Kafka's defaults, except that
/// - the lab commits what it applied (no auto-commit: committing what was merely fetched would
///   lose records on a rebalance);
/// - new partitions start at their beginning (with `latest`, Kafka's default, records written
///   to a new partition before its consumer is assigned would be skipped: order 8842's
///   cancellation among them);
/// - heartbeats every 100 ms: members learn that the group is rebalancing from a heartbeat's
///   answer, and Kafka's 3 s would add up to 3 s to every rebalance of the lab;
/// - fetches wait briefly (see [`FETCH_MAX_WAIT`]).
fn group_config(group_id: &str) -> GroupConfig {
    let mut config = GroupConfig::new(group_id);
    config.auto_commit = false;
    config.heartbeat_interval = HEARTBEAT_INTERVAL;
    config.consumer = ConsumerConfig {
        max_wait: FETCH_MAX_WAIT,
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    };
    config
}

/// A member: poll, report what it owns and fetched, run the lab's commands between polls.
async fn member_loop(
    index: usize,
    mut consumer: GroupConsumer,
    mut commands: mpsc::UnboundedReceiver<Command>,
    views: Views,
    changed: Arc<Notify>,
) {
    loop {
        while let Ok(command) = commands.try_recv() {
            match command {
                Command::Commit(offsets, reply) => {
                    let result = consumer.commit_offsets_sync(offsets).await;
                    let _ = reply.send(result.map_err(|e| e.to_string()));
                }
                Command::Subscribe(topic, reply) => {
                    let result = consumer.subscribe([topic]);
                    let _ = reply.send(result.map_err(|e| e.to_string()));
                }
                Command::Leave(reply) => {
                    if let Err(e) = consumer.close().await {
                        tracing::warn!(%e, "leaving the group");
                    }
                    let _ = reply.send(());
                    return;
                }
            }
        }
        let polled = consumer.poll().await;
        {
            let mut views = lock(&views);
            let view = &mut views[index];
            match polled {
                Ok(polled) => {
                    let generation = consumer.generation();
                    view.generation = generation.id;
                    view.member_id = generation.member_id;
                    view.owned = consumer.assignment().into_iter().collect();
                    let owned = &view.owned;
                    view.fetched.retain(|tp, _| owned.contains(tp));
                    for part in polled {
                        let into = view.fetched.entry(part.topic_partition()).or_default();
                        for record in &part.records {
                            into.insert(
                                record.offset,
                                Delivery::of(&part.topic, part.partition, record),
                            );
                        }
                    }
                }
                Err(e) => view.failed = Some(e.to_string()),
            }
        }
        changed.notify_waiters();
        if lock(&views)[index].failed.is_some() {
            return;
        }
    }
}

fn owner<'v>(views: &'v [View], tp: &TopicPartition) -> Option<&'v View> {
    let mut owners = views.iter().filter(|v| v.owned.contains(tp));
    let first = owners.next()?;
    owners.next().is_none().then_some(first)
}

/// The views stay usable even if a task panicked while holding them: they are plain data.
fn lock(views: &Mutex<Vec<View>>) -> MutexGuard<'_, Vec<View>> {
    views
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
