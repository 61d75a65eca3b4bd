//! Committed offsets: OffsetCommit from a member (with its generation, so the coordinator can
//! refuse a member that was replaced) or from anyone (generation -1), and OffsetFetch for some
//! partitions or, with null topics, every partition the group committed. OffsetFetch v8+ asks
//! for a batch of groups (librdkafka's form, and the one some brokers answer best); we send a
//! batch of one when the coordinator offers it, the single-group form otherwise.
//!
//! An offset committed for a partition is the next one to read, as everywhere in Kafka.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::coordinator::Coordinator;
use super::requests::group_id;
use crate::client::topic_name;
use crate::consumer::TopicPartition;
use crate::error::{Error, ProtocolError, Result, ServerError};

/// Partition to committed offset; `None` when the group committed nothing for it.
pub type CommittedOffsets = BTreeMap<TopicPartition, Option<i64>>;

/// Who commits: a member of a generation, or nobody in particular (generation -1, empty member
/// id), as admin tools and assign-mode consumers commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitAs<'a> {
    pub generation_id: i32,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
}

impl CommitAs<'_> {
    pub const NOBODY: CommitAs<'static> = CommitAs {
        generation_id: -1,
        member_id: "",
        instance_id: None,
    };
}

pub fn commit_request(
    group: &str,
    who: &CommitAs<'_>,
    offsets: &BTreeMap<TopicPartition, i64>,
    version: i16,
) -> OffsetCommitRequest {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (tp, &offset) in offsets {
        let partition = OffsetCommitRequestPartition::default()
            .with_partition_index(tp.partition)
            .with_committed_offset(offset);
        match topics.last_mut() {
            Some(t) if t.name.0.as_str() == tp.topic => t.partitions.push(partition),
            _ => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(topic_name(&tp.topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let mut req = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(who.generation_id)
        .with_member_id(StrBytes::from_string(who.member_id.to_string()))
        .with_topics(topics);
    if version >= 7 {
        req.group_instance_id = who
            .instance_id
            .map(|i| StrBytes::from_string(i.to_string()));
    }
    req
}

/// The partitions the coordinator refused, with their codes.
pub fn commit_answer(resp: OffsetCommitResponse) -> Vec<(TopicPartition, i16)> {
    resp.topics
        .into_iter()
        .flat_map(|t| {
            let topic = t.name.0.to_string();
            t.partitions
                .into_iter()
                .filter(|p| p.error_code != 0)
                .map(move |p| {
                    (
                        TopicPartition::new(topic.clone(), p.partition_index),
                        p.error_code,
                    )
                })
        })
        .collect()
}

/// `partitions`: `None` for every committed partition (v2+ only: v1 has no null topics).
pub fn fetch_request(
    group: &str,
    partitions: Option<&[TopicPartition]>,
    version: i16,
) -> Result<OffsetFetchRequest> {
    if partitions.is_none() && version < 2 {
        return Err(ProtocolError::UnsupportedVersion {
            api: "OffsetFetch",
            broker: Some((1, version)),
            client: (2, 9),
        }
        .into());
    }
    // Partitions by topic, topics in the order first named.
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in partitions.unwrap_or_default() {
        match topics.iter_mut().find(|(name, _)| *name == tp.topic) {
            Some((_, indexes)) => indexes.push(tp.partition),
            None => topics.push((&tp.topic, vec![tp.partition])),
        }
    }
    let topics = partitions.map(|_| topics);
    if version >= 8 {
        let topics = topics.map(|topics| {
            topics
                .into_iter()
                .map(|(name, indexes)| {
                    OffsetFetchRequestTopics::default()
                        .with_name(topic_name(name))
                        .with_partition_indexes(indexes)
                })
                .collect()
        });
        let one = OffsetFetchRequestGroup::default()
            .with_group_id(group_id(group))
            .with_topics(topics);
        return Ok(OffsetFetchRequest::default().with_groups(vec![one]));
    }
    let topics = topics.map(|topics| {
        topics
            .into_iter()
            .map(|(name, indexes)| {
                OffsetFetchRequestTopic::default()
                    .with_name(topic_name(name))
                    .with_partition_indexes(indexes)
            })
            .collect()
    });
    Ok(OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(topics))
}

/// One partition's answer, whichever shape the version put it in.
struct FetchedPartition<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    error_code: i16,
}

/// Committed offsets by partition for `group`, from an answer at `version`; -1 (nothing
/// committed) becomes `None`. A group-level error, or any partition's, fails the whole answer,
/// so a retry fetches everything again; so does a v8+ answer that leaves our group out.
pub fn fetch_answer(
    group: &str,
    resp: OffsetFetchResponse,
    version: i16,
) -> Result<CommittedOffsets> {
    let mut parts: Vec<FetchedPartition<'_>> = Vec::new();
    if version >= 8 {
        let Some(answer) = resp.groups.iter().find(|g| g.group_id.as_str() == group) else {
            return Err(ProtocolError::BadAnswer {
                api: "OffsetFetch",
                reason: format!("the answer does not mention group {group}"),
            }
            .into());
        };
        ServerError::check(answer.error_code)?;
        for t in &answer.topics {
            parts.extend(t.partitions.iter().map(|p| FetchedPartition {
                topic: t.name.as_str(),
                partition: p.partition_index,
                offset: p.committed_offset,
                error_code: p.error_code,
            }));
        }
    } else {
        ServerError::check(resp.error_code)?;
        for t in &resp.topics {
            parts.extend(t.partitions.iter().map(|p| FetchedPartition {
                topic: t.name.as_str(),
                partition: p.partition_index,
                offset: p.committed_offset,
                error_code: p.error_code,
            }));
        }
    }
    let mut out = CommittedOffsets::new();
    for p in parts {
        if p.error_code != 0 {
            let e = ServerError::new(p.error_code)
                .topic(p.topic)
                .partition(p.partition);
            return Err(e.into());
        }
        let tp = TopicPartition::new(p.topic, p.partition);
        out.insert(tp, (p.offset >= 0).then_some(p.offset));
    }
    Ok(out)
}

/// Sends one OffsetCommit and returns the refused partitions (empty: all committed).
pub async fn commit_once(
    coordinator: &Coordinator,
    who: &CommitAs<'_>,
    offsets: &BTreeMap<TopicPartition, i64>,
) -> Result<Vec<(TopicPartition, i16)>> {
    let group = coordinator.group().to_string();
    let resp = coordinator
        .call(|v| commit_request(&group, who, offsets, v), None)
        .await?;
    let refused = commit_answer(resp);
    // A partition answering NOT_COORDINATOR means the whole group moved.
    if let Some((_, code)) = refused.iter().find(|(_, c)| is_moved(*c)) {
        coordinator.check(*code)?;
    }
    Ok(refused)
}

fn is_moved(code: i16) -> bool {
    code == ResponseError::NotCoordinator.code()
        || code == ResponseError::CoordinatorNotAvailable.code()
}

/// The group's committed offsets for `partitions` (`None`: every committed partition), retrying
/// while the coordinator moves, loads, or has a transaction's offsets pending.
pub async fn fetch_committed(
    coordinator: &Coordinator,
    partitions: Option<&[TopicPartition]>,
) -> Result<CommittedOffsets> {
    let group = coordinator.group().to_string();
    let attempt = || async {
        let version = coordinator.version(ApiKey::OffsetFetch).await?;
        let req = fetch_request(&group, partitions, version)?;
        let resp = coordinator.call(|_| req, None).await?;
        let answer = fetch_answer(&group, resp, version);
        if let Err(Error::Server(e)) = &answer {
            // Forgets the coordinator when the code says it moved.
            let _ = coordinator.check(e.code);
        }
        answer
    };
    coordinator
        .client()
        .config()
        .retry
        .run("OffsetFetch", attempt, |_| {})
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic, OffsetFetchResponseTopics,
    };
    use kafka_protocol::protocol::Encodable;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    #[test]
    fn requests_encode_at_every_version_we_speak() {
        let offsets = BTreeMap::from([(tp("a", 0), 5), (tp("a", 1), 7), (tp("b", 0), 1)]);
        let who = CommitAs {
            generation_id: 3,
            member_id: "m",
            instance_id: Some("i"),
        };
        for v in 2..=9 {
            let req = commit_request("g", &who, &offsets, v);
            assert_eq!(req.topics.len(), 2);
            req.encode(&mut bytes::BytesMut::new(), v).unwrap();
        }
        let parts = [tp("a", 0), tp("b", 2), tp("a", 3)];
        for v in 1..=9 {
            let req = fetch_request("g", Some(&parts), v).unwrap();
            let first: &[i32] = if v >= 8 {
                assert_eq!(req.groups.len(), 1);
                assert_eq!(req.groups[0].group_id.as_str(), "g");
                &req.groups[0].topics.as_ref().unwrap()[0].partition_indexes
            } else {
                &req.topics.as_ref().unwrap()[0].partition_indexes
            };
            assert_eq!(first, [0, 3], "v{v}");
            req.encode(&mut bytes::BytesMut::new(), v).unwrap();
            if v >= 2 {
                let all = fetch_request("g", None, v).unwrap();
                match v {
                    8.. => assert!(all.groups[0].topics.is_none()),
                    _ => assert!(all.topics.is_none()),
                }
                all.encode(&mut bytes::BytesMut::new(), v).unwrap();
            }
        }
        assert!(fetch_request("g", None, 1).is_err());
    }

    #[test]
    fn minus_one_means_nothing_committed() {
        let part = |p: i32, offset: i64| {
            OffsetFetchResponsePartition::default()
                .with_partition_index(p)
                .with_committed_offset(offset)
        };
        let resp =
            OffsetFetchResponse::default().with_topics(vec![OffsetFetchResponseTopic::default()
                .with_name(topic_name("a"))
                .with_partitions(vec![part(0, 12), part(1, -1)])]);
        let got = fetch_answer("g", resp, 7).unwrap();
        assert_eq!(got[&tp("a", 0)], Some(12));
        assert_eq!(got[&tp("a", 1)], None);
        let failed = OffsetFetchResponse::default().with_error_code(14);
        assert!(fetch_answer("g", failed, 7).unwrap_err().is_retriable());
    }

    #[test]
    fn a_batched_answer_is_read_for_our_group_only() {
        let part = |p: i32, offset: i64| {
            OffsetFetchResponsePartitions::default()
                .with_partition_index(p)
                .with_committed_offset(offset)
        };
        let group = |id: &str, code: i16, parts: Vec<OffsetFetchResponsePartitions>| {
            OffsetFetchResponseGroup::default()
                .with_group_id(group_id(id))
                .with_error_code(code)
                .with_topics(vec![OffsetFetchResponseTopics::default()
                    .with_name(topic_name("a"))
                    .with_partitions(parts)])
        };
        let resp = OffsetFetchResponse::default().with_groups(vec![
            group("other", 0, vec![part(0, 99)]),
            group("g", 0, vec![part(0, 12), part(1, -1)]),
        ]);
        let got = fetch_answer("g", resp, 9).unwrap();
        assert_eq!(
            got,
            CommittedOffsets::from([(tp("a", 0), Some(12)), (tp("a", 1), None)])
        );

        let loading = OffsetFetchResponse::default().with_groups(vec![group("g", 14, vec![])]);
        assert!(fetch_answer("g", loading, 8).unwrap_err().is_retriable());
        let refused = OffsetFetchResponse::default().with_groups(vec![group(
            "g",
            0,
            vec![part(0, 5).with_error_code(3)],
        )]);
        assert_eq!(
            fetch_answer("g", refused, 8)
                .unwrap_err()
                .server()
                .map(|e| e.code),
            Some(3)
        );
        let elsewhere = OffsetFetchResponse::default().with_groups(vec![group("x", 0, vec![])]);
        assert!(matches!(
            fetch_answer("g", elsewhere, 8),
            Err(Error::Protocol(ProtocolError::BadAnswer { .. }))
        ));
    }

    #[test]
    fn refused_partitions_are_listed() {
        let resp =
            OffsetCommitResponse::default().with_topics(vec![OffsetCommitResponseTopic::default()
                .with_name(topic_name("a"))
                .with_partitions(vec![
                    OffsetCommitResponsePartition::default().with_partition_index(0),
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(1)
                        .with_error_code(22),
                ])]);
        assert_eq!(commit_answer(resp), vec![(tp("a", 1), 22)]);
    }
}
