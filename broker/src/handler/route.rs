//! What a node of a multi-node cluster does with a request before and after its handler: parts
//! of it for partitions another node leads are taken out and answered NOT_LEADER_OR_FOLLOWER, a
//! request for a group or transactional id another node coordinates is answered NOT_COORDINATOR
//! without touching the coordinator's state, and the answers that name nodes (Metadata,
//! FindCoordinator) name the right ones. Everything else passes unchanged, and on a single node
//! nothing is changed at all.
//!
//! The handlers stay those of a single broker: they never see a partition or group that is not
//! this node's, so no handler needs to know the cluster exists.

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, ApiKey, BrokerId, EndTxnResponse, GroupId,
    HeartbeatResponse, InitProducerIdResponse, JoinGroupResponse, LeaveGroupResponse,
    OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse, ProducerId, RequestKind,
    ResponseKind, SyncGroupResponse, TopicName, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::cluster::traffic::Redirect;
use crate::state::BrokerState;

const NOT_LEADER: i16 = ResponseError::NotLeaderOrFollower.code();
const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();

/// What to do with a request on this node.
#[derive(Debug)]
pub enum Routed {
    /// Hand it to the handlers (without what [`Misrouted`] took out), then pass the answer
    /// through [`after`].
    Forward(RequestKind, Misrouted),
    /// Its group or transactional id is coordinated by another node: this is the whole answer.
    Answered(ResponseKind),
}

/// What was taken out of a forwarded request, to be answered by [`after`].
#[derive(Debug, Default)]
pub struct Misrouted {
    /// Partitions another node leads, by topic.
    partitions: Vec<(TopicName, Vec<i32>)>,
    /// Groups another node coordinates (from requests naming several).
    groups: Vec<GroupId>,
    /// FindCoordinator before v4: the one key asked about.
    coordinator_key: Option<StrBytes>,
}

impl Misrouted {
    /// Partitions another node leads, taken out of the request, by topic.
    pub fn partitions(&self) -> &[(TopicName, Vec<i32>)] {
        &self.partitions
    }

    /// Nothing was taken out of the request.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty() && self.groups.is_empty()
    }
}

/// Routes a decoded request received by `node`, and counts it and any redirect in the node's
/// traffic.
pub fn before(state: &BrokerState, node: i32, api: ApiKey, request: RequestKind) -> Routed {
    let traffic = &state.cluster.traffic;
    traffic.request(node, api);
    if state.cluster.is_single_node() {
        return Routed::Forward(request, Misrouted::default());
    }
    let routed = route(state, node, request);
    match &routed {
        Routed::Answered(_) => traffic.redirected(node, api, Redirect::NotCoordinator),
        Routed::Forward(_, m) if !m.partitions.is_empty() => {
            traffic.redirected(node, api, Redirect::NotLeader)
        }
        Routed::Forward(_, m) if !m.groups.is_empty() => {
            traffic.redirected(node, api, Redirect::NotCoordinator)
        }
        Routed::Forward(..) => {}
    }
    routed
}

fn route(state: &BrokerState, node: i32, request: RequestKind) -> Routed {
    let elsewhere = |key: &StrBytes| state.cluster.coordinator(key.as_str()).id != node;
    let mut misrouted = Misrouted::default();
    let answered = |response| Routed::Answered(response);
    let request = match request {
        RequestKind::Produce(mut r) => {
            misrouted.partitions = take_partitions(
                state,
                node,
                &mut r.topic_data,
                |t| &t.name,
                |t| &mut t.partition_data,
                |p| p.index,
            );
            RequestKind::Produce(r)
        }
        RequestKind::Fetch(mut r) => {
            misrouted.partitions = take_partitions(
                state,
                node,
                &mut r.topics,
                |t| &t.topic,
                |t| &mut t.partitions,
                |p| p.partition,
            );
            if !misrouted.partitions.is_empty() {
                // Kafka answers a fetch with an error at once, so the client re-reads metadata
                // now rather than after its long poll.
                r.max_wait_ms = 0;
            }
            RequestKind::Fetch(r)
        }
        RequestKind::ListOffsets(mut r) => {
            misrouted.partitions = take_partitions(
                state,
                node,
                &mut r.topics,
                |t| &t.name,
                |t| &mut t.partitions,
                |p| p.partition_index,
            );
            RequestKind::ListOffsets(r)
        }
        RequestKind::DeleteRecords(mut r) => {
            misrouted.partitions = take_partitions(
                state,
                node,
                &mut r.topics,
                |t| &t.name,
                |t| &mut t.partitions,
                |p| p.partition_index,
            );
            RequestKind::DeleteRecords(r)
        }
        RequestKind::OffsetForLeaderEpoch(mut r) => {
            misrouted.partitions = take_partitions(
                state,
                node,
                &mut r.topics,
                |t| &t.topic,
                |t| &mut t.partitions,
                |p| p.partition,
            );
            RequestKind::OffsetForLeaderEpoch(r)
        }
        RequestKind::FindCoordinator(r) => {
            misrouted.coordinator_key = Some(r.key.clone());
            RequestKind::FindCoordinator(r)
        }
        RequestKind::JoinGroup(r) if elsewhere(&r.group_id) => {
            return answered(ResponseKind::JoinGroup(
                JoinGroupResponse::default().with_error_code(NOT_COORDINATOR),
            ))
        }
        RequestKind::SyncGroup(r) if elsewhere(&r.group_id) => {
            return answered(ResponseKind::SyncGroup(
                SyncGroupResponse::default().with_error_code(NOT_COORDINATOR),
            ))
        }
        RequestKind::Heartbeat(r) if elsewhere(&r.group_id) => {
            return answered(ResponseKind::Heartbeat(
                HeartbeatResponse::default().with_error_code(NOT_COORDINATOR),
            ))
        }
        RequestKind::LeaveGroup(r) if elsewhere(&r.group_id) => {
            return answered(ResponseKind::LeaveGroup(
                LeaveGroupResponse::default().with_error_code(NOT_COORDINATOR),
            ))
        }
        RequestKind::OffsetDelete(r) if elsewhere(&r.group_id) => {
            return answered(ResponseKind::OffsetDelete(
                OffsetDeleteResponse::default().with_error_code(NOT_COORDINATOR),
            ))
        }
        RequestKind::OffsetCommit(r) if elsewhere(&r.group_id) => {
            let topics = r
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t.partitions.iter().map(|p| {
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(NOT_COORDINATOR)
                    });
                    OffsetCommitResponseTopic::default()
                        .with_name(t.name)
                        .with_partitions(partitions.collect())
                })
                .collect();
            return answered(ResponseKind::OffsetCommit(
                OffsetCommitResponse::default().with_topics(topics),
            ));
        }
        RequestKind::TxnOffsetCommit(r) if elsewhere(&r.group_id) => {
            let topics = r
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t.partitions.iter().map(|p| {
                        TxnOffsetCommitResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(NOT_COORDINATOR)
                    });
                    TxnOffsetCommitResponseTopic::default()
                        .with_name(t.name)
                        .with_partitions(partitions.collect())
                })
                .collect();
            return answered(ResponseKind::TxnOffsetCommit(
                TxnOffsetCommitResponse::default().with_topics(topics),
            ));
        }
        // Before v8, one group: the top-level error (v2+) and each partition's (v1).
        RequestKind::OffsetFetch(r) if r.groups.is_empty() && elsewhere(&r.group_id) => {
            let topics = r
                .topics
                .unwrap_or_default()
                .into_iter()
                .map(|t| {
                    let partitions = t.partition_indexes.iter().map(|&index| {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(index)
                            .with_committed_offset(-1)
                            .with_error_code(NOT_COORDINATOR)
                    });
                    OffsetFetchResponseTopic::default()
                        .with_name(t.name)
                        .with_partitions(partitions.collect())
                })
                .collect();
            return answered(ResponseKind::OffsetFetch(
                OffsetFetchResponse::default()
                    .with_error_code(NOT_COORDINATOR)
                    .with_topics(topics),
            ));
        }
        RequestKind::OffsetFetch(mut r) => {
            misrouted.groups = take_groups(&mut r.groups, |g| &g.group_id, &elsewhere);
            RequestKind::OffsetFetch(r)
        }
        RequestKind::DescribeGroups(mut r) => {
            misrouted.groups = take_groups(&mut r.groups, |g| g, &elsewhere);
            RequestKind::DescribeGroups(r)
        }
        RequestKind::DeleteGroups(mut r) => {
            misrouted.groups = take_groups(&mut r.groups_names, |g| g, &elsewhere);
            RequestKind::DeleteGroups(r)
        }
        RequestKind::InitProducerId(r)
            if r.transactional_id.as_ref().is_some_and(|id| elsewhere(id)) =>
        {
            return answered(ResponseKind::InitProducerId(
                InitProducerIdResponse::default()
                    .with_error_code(NOT_COORDINATOR)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            ))
        }
        // v0-3 (the versions accepted): one transactional id.
        RequestKind::AddPartitionsToTxn(r) if elsewhere(&r.v3_and_below_transactional_id) => {
            let topics = r
                .v3_and_below_topics
                .into_iter()
                .map(|t| {
                    let partitions = t.partitions.iter().map(|&index| {
                        AddPartitionsToTxnPartitionResult::default()
                            .with_partition_index(index)
                            .with_partition_error_code(NOT_COORDINATOR)
                    });
                    AddPartitionsToTxnTopicResult::default()
                        .with_name(t.name)
                        .with_results_by_partition(partitions.collect())
                })
                .collect();
            return answered(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics),
            ));
        }
        RequestKind::AddOffsetsToTxn(r) if elsewhere(&r.transactional_id) => {
            return answered(ResponseKind::AddOffsetsToTxn(
                AddOffsetsToTxnResponse::default().with_error_code(NOT_COORDINATOR),
            ))
        }
        RequestKind::EndTxn(r) if elsewhere(&r.transactional_id) => {
            return answered(ResponseKind::EndTxn(
                EndTxnResponse::default().with_error_code(NOT_COORDINATOR),
            ))
        }
        other => other,
    };
    Routed::Forward(request, misrouted)
}

/// Takes out of `topics` the partitions of existing topics that another node leads (a topic or
/// partition that does not exist is left for the handler to refuse), dropping topics left empty.
fn take_partitions<T, P>(
    state: &BrokerState,
    node: i32,
    topics: &mut Vec<T>,
    name: impl Fn(&T) -> &TopicName,
    partitions: impl Fn(&mut T) -> &mut Vec<P>,
    index: impl Fn(&P) -> i32,
) -> Vec<(TopicName, Vec<i32>)> {
    let mut taken = Vec::new();
    topics.retain_mut(|t| {
        let Some(topic) = state.topics.get(name(t)) else {
            return true;
        };
        let mut elsewhere = Vec::new();
        partitions(t).retain(|p| {
            let i = index(p);
            let led_here =
                topic.partition(i).is_none() || state.cluster.leader(&topic, i).node == node;
            if !led_here {
                elsewhere.push(i);
            }
            led_here
        });
        let emptied = partitions(t).is_empty() && !elsewhere.is_empty();
        if !elsewhere.is_empty() {
            taken.push((name(t).clone(), elsewhere));
        }
        !emptied
    });
    taken
}

/// Takes out of `groups` those another node coordinates.
fn take_groups<G>(
    groups: &mut Vec<G>,
    id: impl Fn(&G) -> &GroupId,
    elsewhere: &impl Fn(&StrBytes) -> bool,
) -> Vec<GroupId> {
    let mut taken = Vec::new();
    groups.retain(|g| {
        let here = !elsewhere(id(g));
        if !here {
            taken.push(id(g).clone());
        }
        here
    });
    taken
}

/// Completes the answer to a forwarded request: the redirects for what was taken out, and the
/// nodes the cluster really has where the handler named its own.
pub fn after(state: &BrokerState, node: i32, response: &mut ResponseKind, misrouted: Misrouted) {
    let cluster = &state.cluster;
    if cluster.is_single_node() {
        return;
    }
    match response {
        ResponseKind::Metadata(r) => {
            r.brokers = cluster
                .nodes()
                .iter()
                .map(|n| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(n.id))
                        .with_host(StrBytes::from_string(n.host.clone()))
                        .with_port(n.port)
                })
                .collect();
            // KRaft clusters name an arbitrary live broker; the lowest id is as good as any.
            r.controller_id = BrokerId(cluster.nodes()[0].id);
            for t in &mut r.topics {
                let topic = t.name.as_ref().and_then(|name| state.topics.get(name));
                let Some(topic) = topic else { continue };
                for p in &mut t.partitions {
                    let leader = cluster.leader(&topic, p.partition_index);
                    p.leader_id = BrokerId(leader.node);
                    p.leader_epoch = leader.epoch;
                    p.replica_nodes = vec![BrokerId(leader.node)];
                    p.isr_nodes = vec![BrokerId(leader.node)];
                }
            }
        }
        ResponseKind::FindCoordinator(r) => {
            let at = |key: &str| cluster.coordinator(key);
            for c in r.coordinators.iter_mut().filter(|c| c.error_code == 0) {
                let n = at(c.key.as_str());
                (c.node_id, c.host, c.port) = (
                    BrokerId(n.id),
                    StrBytes::from_string(n.host.clone()),
                    n.port,
                );
            }
            let key = misrouted.coordinator_key.as_ref();
            if let Some(key) = key.filter(|_| r.error_code == 0 && r.coordinators.is_empty()) {
                let n = at(key.as_str());
                (r.node_id, r.host, r.port) = (
                    BrokerId(n.id),
                    StrBytes::from_string(n.host.clone()),
                    n.port,
                );
            }
        }
        // Each node lists the groups it coordinates, so a client asks them all, as Kafka's do.
        ResponseKind::ListGroups(r) => r
            .groups
            .retain(|g| cluster.coordinator(g.group_id.as_str()).id == node),
        _ => {}
    }
    misrouted.answer(response);
}

impl Misrouted {
    /// Adds to the answer what was taken out of the request: NOT_LEADER_OR_FOLLOWER for each
    /// partition, NOT_COORDINATOR for each group. Needs no broker state, so an answer completed
    /// later (an acks=all produce's) can be given it then.
    pub fn answer(self, response: &mut ResponseKind) {
        match response {
            ResponseKind::Produce(r) => merge_partitions(
                &mut r.responses,
                &self.partitions,
                |t| &t.name,
                |name| TopicProduceResponse::default().with_name(name),
                |t, index| {
                    t.partition_responses.push(
                        PartitionProduceResponse::default()
                            .with_index(index)
                            .with_error_code(NOT_LEADER)
                            .with_base_offset(-1)
                            .with_log_append_time_ms(-1)
                            .with_log_start_offset(-1),
                    )
                },
            ),
            ResponseKind::ListOffsets(r) => merge_partitions(
                &mut r.topics,
                &self.partitions,
                |t| &t.name,
                |name| ListOffsetsTopicResponse::default().with_name(name),
                |t, index| {
                    t.partitions.push(
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(index)
                            .with_error_code(NOT_LEADER)
                            .with_timestamp(-1)
                            .with_offset(-1),
                    )
                },
            ),
            ResponseKind::OffsetForLeaderEpoch(r) => merge_partitions(
                &mut r.topics,
                &self.partitions,
                |t| &t.topic,
                |name| OffsetForLeaderTopicResult::default().with_topic(name),
                |t, index| {
                    t.partitions.push(
                        EpochEndOffset::default()
                            .with_partition(index)
                            .with_error_code(NOT_LEADER)
                            .with_leader_epoch(-1)
                            .with_end_offset(-1),
                    )
                },
            ),
            ResponseKind::DeleteRecords(r) => merge_partitions(
                &mut r.topics,
                &self.partitions,
                |t| &t.name,
                |name| DeleteRecordsTopicResult::default().with_name(name),
                |t, index| {
                    t.partitions.push(
                        DeleteRecordsPartitionResult::default()
                            .with_partition_index(index)
                            .with_low_watermark(-1)
                            .with_error_code(NOT_LEADER),
                    )
                },
            ),
            ResponseKind::OffsetFetch(r) => r.groups.extend(self.groups.into_iter().map(|g| {
                OffsetFetchResponseGroup::default()
                    .with_group_id(g)
                    .with_error_code(NOT_COORDINATOR)
            })),
            ResponseKind::DescribeGroups(r) => r.groups.extend(self.groups.into_iter().map(|g| {
                DescribedGroup::default()
                    .with_group_id(g)
                    .with_error_code(NOT_COORDINATOR)
            })),
            ResponseKind::DeleteGroups(r) => r.results.extend(self.groups.into_iter().map(|g| {
                DeletableGroupResult::default()
                    .with_group_id(g)
                    .with_error_code(NOT_COORDINATOR)
            })),
            _ => {}
        }
    }
}

/// Adds to an answer's topics one entry per partition in `misrouted`, made by `push`.
pub fn merge_partitions<T>(
    topics: &mut Vec<T>,
    misrouted: &[(TopicName, Vec<i32>)],
    name: impl Fn(&T) -> &TopicName,
    new_topic: impl Fn(TopicName) -> T,
    push: impl Fn(&mut T, i32),
) {
    for (topic, partitions) in misrouted {
        let at = match topics.iter().position(|t| name(t) == topic) {
            Some(at) => at,
            None => {
                topics.push(new_topic(topic.clone()));
                topics.len() - 1
            }
        };
        for &index in partitions {
            push(&mut topics[at], index);
        }
    }
}
