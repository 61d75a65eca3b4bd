//! The profile service's instances as a real consumer group on the commands topic: one member
//! per partition, each with its own client, as separate service instances run. Members poll on
//! their own; the lab takes each command from the member that fetched it when the timeline
//! reaches it, and commits through that member what has been handled.
//!
//! Commands are produced once per traffic ([`produce`]) and read by every run's own group from
//! the beginning, so every run sees the same commands at the same offsets.

use std::collections::BTreeMap;
use std::time::Duration;

use client::{
    Client, ClientConfig, GroupConsumer, Producer, ProducerRecord, Record, TopicPartition,
};
use serde::{Deserialize, Serialize};
use tokio::runtime::Runtime;

use crate::kit::group::manual_commit;
use crate::kit::members::{Members, View};
use crate::lab::target::{self, broker_error};
use crate::lab::LabError;
use crate::labs::migrate::engine::keys::{CommandId, LabTime, RowKey};
use crate::labs::migrate::engine::ledger::Source;
use crate::labs::migrate::engine::store::{Command, Op};
use crate::labs::migrate::scenario::Feed;

use super::{Commands, Limit};
use crate::labs::migrate::scenario::COMMAND_PARTITIONS;

/// Members learn of rebalances from heartbeats: often, so the group forms quickly.
const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(100);
/// How long a member's fetch waits for commands it has not yet got.
const FETCH_MAX_WAIT: Duration = Duration::from_millis(50);

/// A command as its record's value carries it (the key is the row key).
#[derive(Debug, Serialize, Deserialize)]
struct Value {
    id: CommandId,
    at: LabTime,
    op: Op,
}

/// Where each command was written: partition and offset, in the order of the traffic.
pub type Placed = Vec<(CommandId, Source)>;

/// Writes `commands` to `topic`, keyed by row key (Kafka's partitioner picks the partition).
pub async fn produce(
    client: &Client,
    topic: &str,
    commands: &[Command],
) -> Result<Placed, LabError> {
    let what = format!("producing the commands to {topic}");
    let producer = Producer::new(client.clone(), target::producer_config())
        .map_err(|e| broker_error(&what, &e))?;
    let mut pending = Vec::with_capacity(commands.len());
    for cmd in commands {
        let key = cmd.key.to_string();
        let value = serde_json::to_vec(&Value {
            id: cmd.id,
            at: cmd.at,
            op: cmd.op.clone(),
        })
        .map_err(|e| LabError::Internal(format!("encoding {}: {e}", cmd.id)))?;
        let record = ProducerRecord::new(topic).key(&key).value(&value);
        let delivery = producer
            .send(record)
            .await
            .map_err(|e| broker_error(&what, &e))?;
        pending.push((cmd.id, delivery));
    }
    let mut placed = Vec::with_capacity(pending.len());
    for (id, delivery) in pending {
        let sent = delivery.wait().await.map_err(|e| broker_error(&what, &e))?;
        placed.push((
            id,
            Source {
                partition: sent.partition,
                offset: sent.offset,
            },
        ));
    }
    producer.close().await;
    Ok(placed)
}

fn decode(_: &TopicPartition, record: &Record) -> Result<Command, String> {
    let key = std::str::from_utf8(record.key.as_deref().unwrap_or_default())
        .map_err(|_| "a key that is not UTF-8".to_string())?;
    let key: RowKey = key.parse()?;
    let value: Value = serde_json::from_slice(record.value.as_deref().unwrap_or_default())
        .map_err(|e| format!("not a command: {e}"))?;
    Ok(Command {
        id: value.id,
        key,
        op: value.op,
        at: value.at,
    })
}

/// The service's consumer group, feeding a run its commands.
pub struct Service<'r> {
    rt: &'r Runtime,
    /// Every wait runs within the deadline of the run's phase, and the feed's lab time is its
    /// progress.
    limit: Limit<'r>,
    topic: String,
    group: String,
    members: Members<Result<Command, String>>,
    /// The commands in arrival order and where each is; the next one to hand out.
    placed: Placed,
    arrival: BTreeMap<CommandId, LabTime>,
    next: usize,
}

impl<'r> Service<'r> {
    /// Starts one member of `group` per partition of the topic `commands` were written to,
    /// and waits until each owns one partition.
    pub fn start(
        rt: &'r Runtime,
        config: &ClientConfig,
        group: &str,
        commands: &Commands<'_>,
        limit: Limit<'r>,
    ) -> Result<Self, LabError> {
        let topic = &commands.topic;
        let mut service = Members::new();
        // Each member's heartbeat runs on the lab's runtime.
        let _runtime = rt.enter();
        for i in 0..COMMAND_PARTITIONS {
            let mut member = config.clone();
            member.client_id = format!("{}-{}", config.client_id, i + 1);
            let connecting = async {
                Client::connect(member.clone())
                    .await
                    .map_err(|e| broker_error("connecting a service instance", &e))
            };
            let client = limit.block_on(rt, "connecting a service instance", connecting)?;
            let mut consumer = GroupConsumer::new(
                client,
                manual_commit(group, HEARTBEAT_INTERVAL, FETCH_MAX_WAIT),
            )
            .map_err(|e| broker_error("creating a group member", &e))?;
            consumer
                .subscribe([topic])
                .map_err(|e| broker_error("subscribing", &e))?;
            service.add(member.client_id.clone(), consumer, decode);
        }
        let service = Service {
            rt,
            limit,
            topic: topic.to_string(),
            group: group.to_string(),
            members: service,
            placed: commands.placed.clone(),
            arrival: commands
                .traffic
                .commands
                .iter()
                .map(|c| (c.id, c.at))
                .collect(),
            next: 0,
        };
        service.wait("forming", |views| {
            let generations: Vec<i32> = views.iter().map(|v| v.generation).collect();
            let mut all: Vec<i32> = views
                .iter()
                .flat_map(|v| v.owned.iter().map(|tp| tp.partition))
                .collect();
            all.sort_unstable();
            let one_each = views.iter().all(|v| v.owned.len() == 1);
            let one_generation = generations.windows(2).all(|w| w[0] == w[1]);
            (one_each && one_generation && all == (0..COMMAND_PARTITIONS).collect::<Vec<_>>())
                .then_some(())
        })?;
        Ok(service)
    }

    /// The members leave the group (so that it can be deleted), and their tasks end.
    pub fn leave(self) {
        self.rt.block_on(self.members.leave());
    }

    /// Waits until `ready` finds what it looks for, re-checking whenever a member reports;
    /// fails when a member stopped, or at the phase's deadline.
    fn wait<T>(
        &self,
        what: &str,
        ready: impl FnMut(&mut Vec<View<Result<Command, String>>>) -> Option<T>,
    ) -> Result<T, LabError> {
        let doing = format!("waiting for group {} {what} on {}", self.group, self.topic);
        self.limit.block_on(self.rt, &doing, async {
            self.members.wait(ready).await.map_err(|failed| {
                LabError::Broker(format!(
                    "group {} {what}: a member stopped: {failed}",
                    self.group
                ))
            })
        })
    }
}

impl Feed for Service<'_> {
    fn due(&mut self, now: LabTime) -> Result<Vec<(Command, Option<Source>)>, LabError> {
        self.limit.progress.inc();
        let mut due = Vec::new();
        while let Some(&(id, source)) = self.placed.get(self.next) {
            if self.arrival.get(&id).is_some_and(|at| *at > now) {
                break;
            }
            self.next += 1;
            let tp = TopicPartition::new(&self.topic, source.partition);
            let fetched = self.wait("fetching its commands", |views| {
                views
                    .iter_mut()
                    .find_map(|v| v.fetched.get_mut(&tp)?.remove(&source.offset))
            })?;
            let cmd = fetched.map_err(|e| {
                LabError::Broker(format!(
                    "{}-{} at offset {}: {e}",
                    self.topic, source.partition, source.offset
                ))
            })?;
            if cmd.id != id {
                return Err(LabError::Broker(format!(
                    "{}-{} at offset {} holds {}, where {id} was written",
                    self.topic, source.partition, source.offset, cmd.id
                )));
            }
            due.push((cmd, Some(source)));
        }
        Ok(due)
    }

    fn commit(&mut self, upto: &BTreeMap<i32, i64>) -> Result<(), LabError> {
        let views = self.members.views();
        for (member, view) in views.iter().enumerate() {
            let offsets: BTreeMap<TopicPartition, i64> = view
                .owned
                .iter()
                .filter_map(|tp| upto.get(&tp.partition).map(|o| (tp.clone(), *o)))
                .collect();
            if !offsets.is_empty() {
                self.members.commit_unanswered(member, offsets);
            }
        }
        Ok(())
    }
}
