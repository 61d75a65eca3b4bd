//! Committed offsets: OffsetCommit from a member (with its generation, so the coordinator can
//! refuse a member that was replaced) or from anyone (generation -1), and OffsetFetch for some
//! partitions or, with null topics, every partition the group committed.
//!
//! An offset committed for a partition is the next one to read, as everywhere in Kafka.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
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
    let topics = match partitions {
        None if version < 2 => {
            return Err(ProtocolError::UnsupportedVersion {
                api: "OffsetFetch",
                broker: Some((1, version)),
                client: (2, 7),
            }
            .into())
        }
        None => None,
        Some(partitions) => {
            let mut topics: Vec<OffsetFetchRequestTopic> = Vec::new();
            for tp in partitions {
                match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
                    Some(t) => t.partition_indexes.push(tp.partition),
                    None => topics.push(
                        OffsetFetchRequestTopic::default()
                            .with_name(topic_name(&tp.topic))
                            .with_partition_indexes(vec![tp.partition]),
                    ),
                }
            }
            Some(topics)
        }
    };
    Ok(OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(topics))
}

/// Committed offsets by partition; -1 (nothing committed) becomes `None`. A group-level error,
/// or any partition's, fails the whole answer, so a retry fetches everything again.
pub fn fetch_answer(resp: OffsetFetchResponse) -> Result<CommittedOffsets, ServerError> {
    ServerError::check(resp.error_code)?;
    let mut out = CommittedOffsets::new();
    for t in resp.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
            if p.error_code != 0 {
                return Err(ServerError::new(p.error_code)
                    .topic(tp.topic)
                    .partition(tp.partition));
            }
            out.insert(tp, (p.committed_offset >= 0).then_some(p.committed_offset));
        }
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
        let code = resp.error_code;
        coordinator.check(code)?;
        fetch_answer(resp).map_err(Error::from)
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
        OffsetFetchResponsePartition, OffsetFetchResponseTopic,
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
        for v in 1..=7 {
            let req = fetch_request("g", Some(&parts), v).unwrap();
            assert_eq!(req.topics.as_ref().unwrap()[0].partition_indexes, [0, 3]);
            req.encode(&mut bytes::BytesMut::new(), v).unwrap();
            if v >= 2 {
                let all = fetch_request("g", None, v).unwrap();
                assert!(all.topics.is_none());
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
        let got = fetch_answer(resp).unwrap();
        assert_eq!(got[&tp("a", 0)], Some(12));
        assert_eq!(got[&tp("a", 1)], None);
        let failed = OffsetFetchResponse::default().with_error_code(14);
        assert!(fetch_answer(failed).unwrap_err().is_retriable());
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
