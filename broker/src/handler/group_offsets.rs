//! OffsetCommit v2-9, OffsetFetch v1-9 (v8+ asks for several groups at once) and OffsetDelete v0.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::group_membership::{error_code, owned};
use crate::group::messages::OffsetCommit;
use crate::state::BrokerState;

/// Where a partition's answer comes from: decided before the coordinator is asked, or the
/// coordinator's result at this index.
enum Outcome {
    Decided(ResponseError),
    Committed(usize),
}

pub fn commit(
    state: &BrokerState,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    // As Kafka does before the coordinator sees the request: partitions of unknown topics, and
    // unknown partitions of known ones, fail alone.
    let mut commits = Vec::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let known = state.topics.get(&topic.name);
        let outcomes: Vec<(i32, Outcome)> = topic
            .partitions
            .into_iter()
            .map(|p| {
                let exists = known
                    .as_ref()
                    .is_some_and(|t| t.partition(p.partition_index).is_some());
                if !exists {
                    return (
                        p.partition_index,
                        Outcome::Decided(ResponseError::UnknownTopicOrPartition),
                    );
                }
                commits.push(OffsetCommit {
                    topic: topic.name.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.map(|m| m.to_string()),
                });
                (p.partition_index, Outcome::Committed(commits.len() - 1))
            })
            .collect();
        topics.push((topic.name, outcomes));
    }
    // Nothing valid left: Kafka answers without involving the group (nor creating it).
    let results = if commits.is_empty() {
        Ok(Vec::new())
    } else {
        state.groups.commit_offsets(
            &request.group_id,
            &request.member_id,
            request.group_instance_id.as_deref(),
            request.generation_id_or_member_epoch,
            commits,
            request.retention_time_ms,
            version,
        )
    };
    let topics = topics
        .into_iter()
        .map(|(name, outcomes)| {
            let partitions = outcomes
                .into_iter()
                .map(|(index, outcome)| {
                    let error = match (outcome, &results) {
                        (Outcome::Decided(error), _) => Some(error),
                        (Outcome::Committed(_), Err(error)) => Some(*error),
                        (Outcome::Committed(at), Ok(results)) => results.get(at).copied().flatten(),
                    };
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(error_code(error))
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// OffsetDelete as Kafka's `KafkaApis` and group coordinator answer it: partitions of unknown
/// topics, and unknown partitions, get UNKNOWN_TOPIC_OR_PARTITION without the group seeing them;
/// a group error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) is the top-level code with no topics.
pub fn delete(state: &BrokerState, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let mut unknown: Vec<(TopicName, Vec<i32>)> = Vec::new();
    let mut known: Vec<(String, Vec<i32>)> = Vec::new();
    for topic in request.topics {
        let exists = state.topics.get(&topic.name);
        let (valid, invalid): (Vec<i32>, Vec<i32>) = topic
            .partitions
            .iter()
            .map(|p| p.partition_index)
            .partition(|&p| exists.as_ref().is_some_and(|t| t.partition(p).is_some()));
        if !invalid.is_empty() {
            unknown.push((topic.name.clone(), invalid));
        }
        if !valid.is_empty() {
            known.push((topic.name.to_string(), valid));
        }
    }
    // Asked even with nothing valid left, as Kafka does: an unknown group is still the answer.
    let answered = match state.groups.delete_offsets(&request.group_id, known) {
        Ok(answered) => answered,
        Err(error) => return OffsetDeleteResponse::default().with_error_code(error.code()),
    };
    let topic = |name: TopicName, partitions: Vec<(i32, Option<ResponseError>)>| {
        OffsetDeleteResponseTopic::default()
            .with_name(name)
            .with_partitions(
                partitions
                    .into_iter()
                    .map(|(index, error)| {
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(index)
                            .with_error_code(error_code(error))
                    })
                    .collect(),
            )
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = unknown
        .into_iter()
        .map(|(name, partitions)| {
            let errors = partitions
                .into_iter()
                .map(|p| (p, Some(ResponseError::UnknownTopicOrPartition)))
                .collect();
            topic(name, errors)
        })
        .collect();
    // A topic with both kinds of partitions is answered once, as Kafka's builder merges them.
    for (name, partitions) in answered {
        let name = TopicName(owned(name));
        match topics.iter_mut().find(|t| t.name == name) {
            Some(existing) => existing
                .partitions
                .extend(topic(name, partitions).partitions),
            None => topics.push(topic(name, partitions)),
        }
    }
    OffsetDeleteResponse::default().with_topics(topics)
}

/// Null topics (the Java admin client's "all") return every committed partition, in every
/// version; a partition never committed returns offset -1. From v8 the request carries a batch
/// of groups, each answered as the single-group form answers it, in the order asked; v9's member
/// id and epoch belong to KIP-848 groups and are ignored for classic ones, as Kafka does.
pub fn fetch(
    state: &BrokerState,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = request
            .groups
            .into_iter()
            .map(|g| {
                let wanted = g.topics.map(|topics| {
                    topics
                        .into_iter()
                        .map(|t| (t.name, t.partition_indexes))
                        .collect()
                });
                let topics = committed(state, &g.group_id, wanted, version)
                    .into_iter()
                    .map(|(name, partitions)| {
                        let partitions = partitions
                            .into_iter()
                            .map(|c| {
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(c.partition)
                                    .with_committed_offset(c.offset)
                                    .with_committed_leader_epoch(c.leader_epoch)
                                    .with_metadata(Some(c.metadata))
                            })
                            .collect();
                        OffsetFetchResponseTopics::default()
                            .with_name(name)
                            .with_partitions(partitions)
                    })
                    .collect();
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id)
                    .with_topics(topics)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name, t.partition_indexes))
            .collect()
    });
    let topics = committed(state, &request.group_id, wanted, version)
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|c| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(c.partition)
                        .with_committed_offset(c.offset)
                        .with_committed_leader_epoch(c.leader_epoch)
                        .with_metadata(Some(c.metadata))
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

/// One partition's answer, whichever shape the version puts it in.
struct Committed {
    partition: i32,
    /// -1 when nothing was committed.
    offset: i64,
    leader_epoch: i32,
    metadata: kafka_protocol::protocol::StrBytes,
}

/// A group's committed offsets for the partitions asked (`None`: every committed partition).
fn committed(
    state: &BrokerState,
    group: &GroupId,
    wanted: Option<Vec<(TopicName, Vec<i32>)>>,
    version: i16,
) -> Vec<(TopicName, Vec<Committed>)> {
    let wanted = wanted.map(|topics| {
        topics
            .into_iter()
            .map(|(name, partitions)| (name.to_string(), partitions))
            .collect()
    });
    state
        .groups
        .fetch_offsets(group, wanted)
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(partition, committed)| {
                    let (offset, epoch, metadata) = match committed {
                        Some(c) => (c.offset, c.leader_epoch, c.metadata),
                        None => (-1, -1, String::new()),
                    };
                    Committed {
                        partition,
                        offset,
                        // Leader epochs exist from v5.
                        leader_epoch: if version >= 5 { epoch } else { -1 },
                        metadata: owned(metadata),
                    }
                })
                .collect();
            (TopicName(owned(topic)), partitions)
        })
        .collect()
}
