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
use std::time::Duration;

use client::{Client, ClientConfig, GroupConsumer, OffsetReset, Record, TopicPartition};
use tokio::sync::oneshot;

use super::events::{OrderEvent, ROUTING_HEADER};
use super::pace::{PartitionId, Queues};
use crate::kit::group::manual_commit;
use crate::kit::members::{Members, View};
use crate::lab::LabError;
use client::check::Position;

/// How long a member's fetch waits for data: short, so a member answers the lab's commits
/// promptly (Kafka's 500 ms default would add that much to every round).
const FETCH_MAX_WAIT: Duration = Duration::from_millis(20);

/// How often members heartbeat (see [`manual_commit`]).
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
    fn of(tp: &TopicPartition, record: &Record) -> Self {
        let routing_version = record
            .headers()
            .find(|h| h.key.as_ref() == ROUTING_HEADER.as_bytes())
            .and_then(|h| h.value)
            .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok());
        Delivery {
            at: Position::new(&tp.topic, tp.partition, record.offset),
            event: OrderEvent::decode(record.key.as_deref(), record.value.as_deref()),
            routing_version,
        }
    }
}

/// The group, as the lab drives it.
pub struct Group {
    group_id: String,
    members: Members<Delivery>,
    /// Commits sent and not yet answered (see [`Group::commit`]).
    pending: Vec<oneshot::Receiver<Result<(), String>>>,
}

impl Group {
    /// Starts `members` members of `group_id`, subscribed to `topic`, each with its own client
    /// built from `config` (whose metadata max age is how soon they notice new partitions),
    /// starting a partition nobody committed on at `reset`.
    pub async fn join(
        config: &ClientConfig,
        group_id: &str,
        topic: &str,
        members: u32,
        reset: OffsetReset,
    ) -> Result<Group, LabError> {
        let mut group = Members::new();
        for i in 0..members as usize {
            let mut member_config = config.clone();
            member_config.client_id = format!("{}-consumer-{}", config.client_id, i + 1);
            let client = Client::connect(member_config.clone())
                .await
                .map_err(|e| crate::lab::target::broker_error("connecting a consumer", &e))?;
            let mut group_config = manual_commit(group_id, HEARTBEAT_INTERVAL, FETCH_MAX_WAIT);
            group_config.consumer.auto_offset_reset = reset;
            let mut consumer = GroupConsumer::new(client, group_config)
                .map_err(|e| crate::lab::target::broker_error("creating a group member", &e))?;
            consumer
                .subscribe([topic])
                .map_err(|e| crate::lab::target::broker_error("subscribing", &e))?;
            group.add(member_config.client_id, consumer, Delivery::of);
        }
        Ok(Group {
            group_id: group_id.to_string(),
            members: group,
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
            let views = self.members.views();
            for ((topic, p), offset) in applied {
                let tp = TopicPartition::new(topic.clone(), *p);
                if let Some(i) = views.iter().position(|v| v.owned.contains(&tp)) {
                    by_member.entry(i).or_default().insert(tp, *offset);
                }
            }
        }
        for (i, offsets) in by_member {
            let rx = self
                .members
                .commit(i, offsets)
                .ok_or_else(|| self.stopped())?;
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
        for i in 0..self.members.count() {
            replies.push(
                self.members
                    .subscribe(i, topic)
                    .ok_or_else(|| self.stopped())?,
            );
        }
        for reply in replies {
            reply
                .await
                .map_err(|_| self.stopped())?
                .map_err(|e| LabError::Broker(format!("subscribing to {topic} failed: {e}")))?;
        }
        Ok(())
    }

    /// Every member commits where it has read to, then stops polling until the returned
    /// senders fire or are dropped: the group notices no change of the topic meanwhile.
    pub async fn hold(&mut self) -> Result<Vec<oneshot::Sender<()>>, LabError> {
        let positions: Vec<BTreeMap<TopicPartition, i64>> = self
            .members
            .views()
            .iter()
            .map(|v| v.positions.clone())
            .collect();
        for (i, offsets) in positions.into_iter().enumerate() {
            let rx = self
                .members
                .commit(i, offsets)
                .ok_or_else(|| self.stopped())?;
            self.pending.push(rx);
        }
        self.flush().await?;
        let mut releases = Vec::new();
        for i in 0..self.members.count() {
            releases.push(self.members.hold(i).await.ok_or_else(|| self.stopped())?);
        }
        Ok(releases)
    }

    /// Once the members own partitions `from..to` of `topic` and know where each starts:
    /// those positions.
    pub async fn started_at(
        &self,
        topic: &str,
        from: i32,
        to: i32,
    ) -> Result<BTreeMap<i32, i64>, LabError> {
        let what = format!(
            "group {} starting on partitions {from} to {} of {topic}",
            self.group_id,
            to - 1
        );
        self.wait(&what, |views| {
            (from..to)
                .map(|p| {
                    let tp = TopicPartition::new(topic, p);
                    let position = owner(views, &tp)?.positions.get(&tp)?;
                    Some((p, *position))
                })
                .collect()
        })
        .await
    }

    /// Every member leaves the group (LeaveGroup), then its task ends.
    pub async fn leave(mut self) {
        if let Err(e) = self.flush().await {
            tracing::warn!(%e, "last commits before leaving");
        }
        self.members.leave().await;
    }

    fn stopped(&self) -> LabError {
        let why = self
            .members
            .failed()
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
        ready: impl FnMut(&mut Vec<View<Delivery>>) -> Option<T>,
    ) -> Result<T, LabError> {
        self.members
            .wait(ready)
            .await
            .map_err(|failed| LabError::Broker(format!("{what} failed: {failed}")))
    }
}

fn owner<'v>(views: &'v [View<Delivery>], tp: &TopicPartition) -> Option<&'v View<Delivery>> {
    let mut owners = views.iter().filter(|v| v.owned.contains(tp));
    let first = owners.next()?;
    owners.next().is_none().then_some(first)
}
