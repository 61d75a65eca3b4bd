//! Moving and deleting a group's committed offsets, as kafka-consumer-groups.sh
//! `--reset-offsets` and `--delete-offsets` do (Kafka 4.x `ConsumerGroupCommand`).
//!
//! A reset is planned first (what each partition's offset would become), and only committed when
//! asked: the tool's `--dry-run` is the default. It is refused while the group has members (they
//! would commit over it), allowed for an Empty group and for one that does not exist yet (the
//! commit creates it). Targets past either end of the log are brought back inside it, as the tool
//! does; a time with no record at or after it falls back to the log end, with the tool's warning.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let broker = broker::Broker::start(broker::BrokerConfig {
//! #     listen: "127.0.0.1:0".parse()?,
//! #     ..Default::default()
//! # })
//! # .await?;
//! use client::admin::{ResetScope, ResetTo};
//! use client::{Admin, Client, ClientConfig, NewTopic, Producer, ProducerConfig, ProducerRecord};
//! use client::TopicPartition;
//!
//! let kafka = Client::connect(ClientConfig::new(&broker.addr().to_string())).await?;
//! let admin = Admin::new(kafka.clone());
//! admin.create_topic(&NewTopic::new("orders", 1)).await?;
//! let producer = Producer::new(kafka, ProducerConfig::default())?;
//! for i in 0..5 {
//!     producer.send_and_wait(ProducerRecord::new("orders").value(&format!("v{i}"))).await?;
//! }
//! let scope = ResetScope::Topics(vec![("orders".into(), None)]);
//! // Nothing committed yet, so nothing to shift from: refused, as the tool refuses it.
//! let refused = admin.reset_offsets("billing", &scope, ResetTo::ShiftBy(-2), false).await;
//! assert!(refused.is_err());
//! let plan = admin.reset_offsets("billing", &scope, ResetTo::Latest, true).await?;
//! let orders_0 = TopicPartition::new("orders", 0);
//! assert_eq!(plan.offsets[&orders_0], 5);
//! let shifted = admin.reset_offsets("billing", &scope, ResetTo::ShiftBy(-2), true).await?;
//! assert_eq!(shifted.offsets[&orders_0], 3);
//! let committed = admin.list_group_offsets("billing", None).await?;
//! assert_eq!(committed.get(&orders_0), Some(&Some(3)));
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::OffsetDeleteRequest;
use kafka_protocol::ResponseError;

use super::Admin;
use crate::client::topic_name;
use crate::consumer::TopicPartition;
use crate::error::{Error, ProtocolError, Result, ServerError};
use crate::group::coordinator::Coordinator;
use crate::group::requests::group_id;
use crate::offsets::{list_offsets, OffsetSpec};

/// Where a reset moves each partition's committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// `--to-earliest`: the log start.
    Earliest,
    /// `--to-latest`: the log end.
    Latest,
    /// `--to-offset N`, kept inside the log.
    Offset(i64),
    /// `--shift-by N` from the committed offset (negative: back), kept inside the log.
    ShiftBy(i64),
    /// `--to-datetime` and `--by-duration`: the first record at or after these epoch
    /// milliseconds; the log end where there is none.
    Timestamp(i64),
    /// `--to-current`: the committed offset, or the log end where there is none.
    Current,
}

/// Which partitions a reset touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetScope {
    /// `--all-topics`: every partition the group has an offset for.
    AllTopics,
    /// `--topic T` (every partition) or `--topic T:0,1` (those), repeatable.
    Topics(Vec<(String, Option<Vec<i32>>)>),
}

/// A reset as planned (and, when executed, committed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetPlan {
    pub group: String,
    /// The new committed offset of each partition.
    pub offsets: BTreeMap<TopicPartition, i64>,
    /// The tool's warnings, one line each (a time past a partition's last record, an offset
    /// brought back inside its log).
    pub warnings: Vec<String>,
    pub executed: bool,
}

/// One partition's answer to OffsetDelete.
pub type DeletedOffset = (TopicPartition, Result<(), ServerError>);

impl Admin {
    /// The partitions `scope` names for `group`, sorted.
    pub async fn reset_partitions(
        &self,
        group: &str,
        scope: &ResetScope,
    ) -> Result<Vec<TopicPartition>> {
        let mut out = Vec::new();
        match scope {
            ResetScope::AllTopics => out.extend(
                self.list_group_offsets(group, None)
                    .await?
                    .into_iter()
                    .filter(|(_, offset)| offset.is_some())
                    .map(|(tp, _)| tp),
            ),
            ResetScope::Topics(topics) => {
                for (topic, partitions) in topics {
                    let info = self.client().topic(topic, false).await?;
                    let named: Vec<i32> = match partitions {
                        Some(named) => named.clone(),
                        None => info.partitions.iter().map(|p| p.partition).collect(),
                    };
                    for p in named {
                        if info.partition(p).is_none() {
                            return Err(Error::UnknownPartition {
                                topic: topic.clone(),
                                partition: p,
                                count: info.partition_count(),
                            });
                        }
                        out.push(TopicPartition::new(topic.clone(), p));
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Plans a reset of `scope` to `to` and, with `execute`, commits it. Refused with
    /// [`Error::GroupActive`] unless the group is Empty or does not exist.
    pub async fn reset_offsets(
        &self,
        group: &str,
        scope: &ResetScope,
        to: ResetTo,
        execute: bool,
    ) -> Result<ResetPlan> {
        let state = self.describe_group(group).await?.state;
        if state != "Empty" && state != "Dead" {
            return Err(Error::GroupActive {
                group: group.to_string(),
                state,
            });
        }
        let partitions = self.reset_partitions(group, scope).await?;
        let mut plan = self.plan_reset(group, &partitions, to).await?;
        if execute && !plan.offsets.is_empty() {
            for (tp, result) in self.commit_offsets(group, &plan.offsets).await? {
                result.map_err(|e| e.topic(tp.topic.clone()).partition(tp.partition))?;
            }
            plan.executed = true;
        }
        Ok(plan)
    }

    /// What each of `partitions` would be reset to; nothing is committed.
    pub async fn plan_reset(
        &self,
        group: &str,
        partitions: &[TopicPartition],
        to: ResetTo,
    ) -> Result<ResetPlan> {
        let mut plan = ResetPlan {
            group: group.to_string(),
            offsets: BTreeMap::new(),
            warnings: Vec::new(),
            executed: false,
        };
        if partitions.is_empty() {
            return Ok(plan);
        }
        let starts = self.offsets_of(partitions, OffsetSpec::Earliest).await?;
        let ends = self.offsets_of(partitions, OffsetSpec::Latest).await?;
        let committed: BTreeMap<TopicPartition, i64> = match to {
            ResetTo::ShiftBy(_) | ResetTo::Current => self
                .list_group_offsets(group, Some(partitions))
                .await?
                .into_iter()
                .filter_map(|(tp, offset)| Some((tp, offset?)))
                .collect(),
            _ => BTreeMap::new(),
        };
        let by_time = match to {
            ResetTo::Timestamp(t) => {
                self.offsets_of(partitions, OffsetSpec::Timestamp(t))
                    .await?
            }
            _ => BTreeMap::new(),
        };
        for tp in partitions {
            let (start, end) = (starts[tp], ends[tp]);
            let mut clamp = |offset: i64| inside_log(tp, offset, start, end, &mut plan.warnings);
            let offset = match to {
                ResetTo::Earliest => start,
                ResetTo::Latest => end,
                ResetTo::Offset(n) => clamp(n),
                ResetTo::ShiftBy(n) => match committed.get(tp) {
                    Some(&c) => clamp(c.saturating_add(n)),
                    None => {
                        return Err(Error::InvalidArgument(format!(
                            "Cannot shift offset for partition {tp} since there is no current \
                             committed offset"
                        )))
                    }
                },
                ResetTo::Current => committed.get(tp).copied().unwrap_or(end),
                ResetTo::Timestamp(_) => match by_time.get(tp) {
                    Some(&found) if found >= 0 => found,
                    _ => {
                        plan.warnings.push(format!(
                            "Warn: Partition {} from topic {} is empty. Falling back to latest \
                             known offset.",
                            tp.partition, tp.topic
                        ));
                        end
                    }
                },
            };
            plan.offsets.insert(tp.clone(), offset);
        }
        Ok(plan)
    }

    /// One offset per partition, asked topic by topic.
    async fn offsets_of(
        &self,
        partitions: &[TopicPartition],
        spec: OffsetSpec,
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        let mut by_topic: BTreeMap<&str, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
        for tp in partitions {
            by_topic
                .entry(&tp.topic)
                .or_default()
                .push((tp.partition, spec));
        }
        let mut out = BTreeMap::new();
        for (topic, asks) in by_topic {
            for found in list_offsets(self.client(), topic, &asks).await? {
                out.insert(TopicPartition::new(topic, found.partition), found.offset);
            }
        }
        Ok(out)
    }

    /// OffsetDelete: forgets the group's committed offsets of `partitions`. The outer error is
    /// the group's (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP); otherwise one answer per partition, in
    /// the order asked: GROUP_SUBSCRIBED_TO_TOPIC for a topic its members read,
    /// UNKNOWN_TOPIC_OR_PARTITION for one that does not exist.
    pub async fn delete_group_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<DeletedOffset>> {
        let coordinator = Coordinator::sharing(self.client(), group);
        let attempt = || async {
            let resp = coordinator
                .call(|_| delete_offsets_request(group, partitions), None)
                .await?;
            match coordinator.check(resp.error_code) {
                Err(e) if e.is_retriable() => return Err(Error::from(e)),
                Err(e) => return Err(e.message(Some(format!("group {group}"))).into()),
                Ok(()) => {}
            }
            let mut answers: BTreeMap<TopicPartition, i16> = BTreeMap::new();
            for t in resp.topics {
                for p in t.partitions {
                    answers.insert(
                        TopicPartition::new(t.name.0.to_string(), p.partition_index),
                        p.error_code,
                    );
                }
            }
            partitions
                .iter()
                .map(|tp| {
                    let code =
                        answers
                            .get(tp)
                            .copied()
                            .ok_or_else(|| ProtocolError::BadAnswer {
                                api: "OffsetDelete",
                                reason: format!("no answer for {tp}"),
                            })?;
                    if code == ResponseError::CoordinatorLoadInProgress.code() {
                        return Err(Error::from(ServerError::new(code)));
                    }
                    let result = ServerError::check(code)
                        .map_err(|e| e.topic(tp.topic.clone()).partition(tp.partition));
                    Ok((tp.clone(), result))
                })
                .collect()
        };
        self.retrying("OffsetDelete", attempt).await
    }
}

fn delete_offsets_request(group: &str, partitions: &[TopicPartition]) -> OffsetDeleteRequest {
    let mut topics: Vec<OffsetDeleteRequestTopic> = Vec::new();
    for tp in partitions {
        let partition = OffsetDeleteRequestPartition::default().with_partition_index(tp.partition);
        match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                OffsetDeleteRequestTopic::default()
                    .with_name(topic_name(&tp.topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    OffsetDeleteRequest::default()
        .with_group_id(group_id(group))
        .with_topics(topics)
}

/// `offset` brought inside the log `start..=end`, with the warning kafka-consumer-groups.sh
/// prints when it does so (`checkOffsetsRange` in its ConsumerGroupCommand).
fn inside_log(
    tp: &TopicPartition,
    offset: i64,
    start: i64,
    end: i64,
    warnings: &mut Vec<String>,
) -> i64 {
    let end = end.max(start);
    if offset > end {
        warnings.push(format!(
            "New offset ({offset}) is higher than latest offset for topic partition {tp}. Value \
             will be set to {end}"
        ));
        return end;
    }
    if offset < start {
        warnings.push(format!(
            "New offset ({offset}) is lower than earliest offset for topic partition {tp}. Value \
             will be set to {start}"
        ));
        return start;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn the_delete_request_groups_partitions_by_topic() {
        let asked = [
            TopicPartition::new("a", 0),
            TopicPartition::new("b", 3),
            TopicPartition::new("a", 2),
        ];
        let req = delete_offsets_request("g", &asked);
        assert_eq!(req.topics.len(), 2);
        let a: Vec<i32> = req.topics[0]
            .partitions
            .iter()
            .map(|p| p.partition_index)
            .collect();
        assert_eq!(a, vec![0, 2]);
        req.encode(&mut bytes::BytesMut::new(), 0).unwrap();
    }
}
