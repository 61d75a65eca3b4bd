//! Every version the broker accepts, of every API it advertises, gets an answer that decodes at
//! that version. Catches responses that set a field the version lacks (the crate then refuses to
//! encode and the broker can only close the connection).

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol::versions::BROKER_APIS;
use tests::*;

/// A request of this API with content, so nested response fields are encoded too.
fn sample(key: ApiKey, version: i16) -> Option<RequestBody> {
    let topic = || topic_name("t");
    Some(match key {
        ApiKey::ApiVersions => RequestBody::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::Metadata => {
            RequestBody::Metadata(MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic())),
                MetadataRequestTopic::default().with_name(Some(topic_name("missing"))),
            ])))
        }
        ApiKey::CreateTopics => {
            RequestBody::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic_name(&format!("created-v{version}")))
                    .with_num_partitions(2)
                    .with_replication_factor(1),
                CreatableTopic::default()
                    .with_name(topic())
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]))
        }
        ApiKey::DeleteTopics => RequestBody::DeleteTopics(
            DeleteTopicsRequest::default().with_topic_names(vec![topic_name("missing")]),
        ),
        ApiKey::CreatePartitions => {
            RequestBody::CreatePartitions(CreatePartitionsRequest::default().with_topics(vec![
            CreatePartitionsTopic::default().with_name(topic()).with_count(1),
        ]))
        }
        ApiKey::DescribeConfigs => {
            RequestBody::DescribeConfigs(DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t")),
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(StrBytes::from_static_str("1")),
            ]))
        }
        ApiKey::AlterConfigs => {
            RequestBody::AlterConfigs(AlterConfigsRequest::default().with_resources(vec![
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t")),
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("missing")),
            ]))
        }
        ApiKey::IncrementalAlterConfigs => RequestBody::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(StrBytes::from_static_str("retention.ms"))
                            .with_config_operation(1),
                    ]),
            ]),
        ),
        ApiKey::DeleteRecords => {
            RequestBody::DeleteRecords(DeleteRecordsRequest::default().with_topics(vec![
                delete_records_request::DeleteRecordsTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![
                        delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(0),
                        delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(9)
                            .with_offset(0),
                    ]),
            ]))
        }
        ApiKey::OffsetForLeaderEpoch => RequestBody::OffsetForLeaderEpoch(
            OffsetForLeaderEpochRequest::default().with_topics(vec![
                offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(-1)
                            .with_leader_epoch(0),
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(9)
                            .with_leader_epoch(0),
                    ]),
            ]),
        ),
        ApiKey::AddPartitionsToTxn => RequestBody::AddPartitionsToTxn(
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(
                    "nobody",
                )))
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![0, 9]),
                ]),
        ),
        ApiKey::AddOffsetsToTxn => RequestBody::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("nobody"))),
        ),
        ApiKey::EndTxn => RequestBody::EndTxn(
            EndTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("nobody"))),
        ),
        ApiKey::TxnOffsetCommit => RequestBody::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("nobody")))
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(
                            [0, 9]
                                .map(|p| {
                                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                        .with_partition_index(p)
                                })
                                .to_vec(),
                        ),
                ]),
        ),
        ApiKey::InitProducerId => RequestBody::InitProducerId(
            InitProducerIdRequest::default().with_transactional_id(None),
        ),
        ApiKey::ListOffsets => {
            RequestBody::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default().with_name(topic()).with_partitions(vec![
                ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1),
                ListOffsetsPartition::default().with_partition_index(9).with_timestamp(-2),
            ]),
        ]))
        }
        ApiKey::Produce => {
            RequestBody::Produce(ProduceRequest::default().with_acks(1).with_topic_data(vec![
            TopicProduceData::default().with_name(topic()).with_partition_data(vec![
                PartitionProduceData::default().with_index(0).with_records(Some(values(2))),
                PartitionProduceData::default().with_index(9).with_records(Some(values(1))),
            ]),
        ]))
        }
        ApiKey::Fetch => RequestBody::Fetch(
            FetchRequest::default()
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_partition_max_bytes(1 << 20),
                        FetchPartition::default()
                            .with_partition(9)
                            .with_partition_max_bytes(1 << 20),
                    ])]),
        ),
        _ => return group_sample(key, version),
    })
}

/// Group APIs, so that the answers carry members, assignments and per-partition errors. The
/// JoinGroups come first in the table: each version joins its own group, which DescribeGroups
/// and ListGroups then report.
fn group_sample(key: ApiKey, version: i16) -> Option<RequestBody> {
    let s = |s: &str| StrBytes::from_string(s.to_string());
    let group = |g: &str| GroupId(s(g));
    Some(match key {
        ApiKey::OffsetCommit => RequestBody::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(group("g-commit"))
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic_name("t"))
                        .with_partitions(
                            [0, 9]
                                .map(|p| {
                                    offset_commit_request::OffsetCommitRequestPartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(1)
                                })
                                .to_vec(),
                        ),
                ]),
        ),
        // v8+: a batch of groups, one known, one not, one asking for everything.
        ApiKey::OffsetFetch if version >= 8 => {
            let asking = |id: &str, topics: Option<Vec<i32>>| {
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(group(id))
                    .with_topics(topics.map(|partitions| {
                        vec![offset_fetch_request::OffsetFetchRequestTopics::default()
                            .with_name(topic_name("t"))
                            .with_partition_indexes(partitions)]
                    }))
            };
            RequestBody::OffsetFetch(OffsetFetchRequest::default().with_groups(vec![
                asking("g-commit", Some(vec![0, 9])),
                asking("missing", Some(vec![0])),
                asking("g-commit", None),
            ]))
        }
        ApiKey::OffsetFetch => RequestBody::OffsetFetch(
            OffsetFetchRequest::default()
                .with_group_id(group("g-commit"))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(topic_name("t"))
                        .with_partition_indexes(vec![0, 9]),
                ])),
        ),
        ApiKey::FindCoordinator if version >= 4 => RequestBody::FindCoordinator(
            FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g"), s("h")]),
        ),
        ApiKey::FindCoordinator => {
            RequestBody::FindCoordinator(FindCoordinatorRequest::default().with_key(s("g")))
        }
        ApiKey::JoinGroup => {
            let request = JoinGroupRequest::default()
                .with_group_id(group(&format!("g-join-v{version}")))
                .with_session_timeout_ms(10_000)
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(s("range"))
                .with_metadata(bytes::Bytes::from_static(b"meta"))]);
            let request = match version {
                0 => request,
                1..=4 => request.with_rebalance_timeout_ms(10_000),
                _ => request
                    .with_rebalance_timeout_ms(10_000)
                    .with_group_instance_id(Some(s("instance"))),
            };
            RequestBody::JoinGroup(request)
        }
        ApiKey::Heartbeat => RequestBody::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(group("g-join-v5"))
                .with_member_id(s("ghost")),
        ),
        ApiKey::LeaveGroup if version >= 3 => RequestBody::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(group("g-join-v5"))
                .with_members(vec![
                    leave_group_request::MemberIdentity::default().with_member_id(s("ghost"))
                ]),
        ),
        ApiKey::LeaveGroup => RequestBody::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(group("g-join-v5"))
                .with_member_id(s("ghost")),
        ),
        ApiKey::SyncGroup => RequestBody::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(group("g-join-v5"))
                .with_member_id(s("ghost")),
        ),
        ApiKey::DescribeGroups => RequestBody::DescribeGroups(
            DescribeGroupsRequest::default()
                .with_groups(vec![group("g-join-v5"), group("missing")])
                .with_include_authorized_operations(version >= 3),
        ),
        ApiKey::ListGroups if version >= 4 => RequestBody::ListGroups(
            ListGroupsRequest::default().with_states_filter(vec![s("CompletingRebalance")]),
        ),
        ApiKey::ListGroups => RequestBody::ListGroups(ListGroupsRequest::default()),
        // g-offsets (committed at the start) has no members: one answer per partition.
        ApiKey::OffsetDelete => RequestBody::OffsetDelete(
            OffsetDeleteRequest::default()
                .with_group_id(group("g-offsets"))
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(topic_name("t"))
                        .with_partitions(
                            [0, 9]
                                .map(|p| {
                                    offset_delete_request::OffsetDeleteRequestPartition::default()
                                        .with_partition_index(p)
                                })
                                .to_vec(),
                        ),
                ]),
        ),
        ApiKey::DeleteGroups => RequestBody::DeleteGroups(
            DeleteGroupsRequest::default().with_groups_names(vec![group("g-commit")]),
        ),
        // Partition 0 to the only node (done at once), partition 9 missing.
        ApiKey::AlterPartitionReassignments => RequestBody::AlterPartitionReassignments(
            AlterPartitionReassignmentsRequest::default().with_topics(vec![
                alter_partition_reassignments_request::ReassignableTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(
                        [0, 9]
                            .map(|p| {
                                alter_partition_reassignments_request::ReassignablePartition::default()
                                    .with_partition_index(p)
                                    .with_replicas(Some(vec![BrokerId(1)]))
                            })
                            .to_vec(),
                    ),
            ]),
        ),
        ApiKey::ListPartitionReassignments => RequestBody::ListPartitionReassignments(
            ListPartitionReassignmentsRequest::default(),
        ),
        _ => return None,
    })
}

enum RequestBody {
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    SyncGroup(SyncGroupRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    OffsetDelete(OffsetDeleteRequest),
    ApiVersions(ApiVersionsRequest),
    Metadata(MetadataRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    CreatePartitions(CreatePartitionsRequest),
    DescribeConfigs(DescribeConfigsRequest),
    AlterConfigs(AlterConfigsRequest),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    DeleteRecords(DeleteRecordsRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    InitProducerId(InitProducerIdRequest),
    ListOffsets(ListOffsetsRequest),
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    AlterPartitionReassignments(AlterPartitionReassignmentsRequest),
    ListPartitionReassignments(ListPartitionReassignmentsRequest),
}

async fn answers(client: &mut RawClient, body: RequestBody, version: i16) {
    match body {
        RequestBody::ApiVersions(r) => drop(client.call(&r, version).await),
        RequestBody::AlterPartitionReassignments(r) => drop(client.call(&r, version).await),
        RequestBody::ListPartitionReassignments(r) => drop(client.call(&r, version).await),
        RequestBody::Metadata(r) => drop(client.call(&r, version).await),
        RequestBody::CreateTopics(r) => drop(client.call(&r, version).await),
        RequestBody::DeleteTopics(r) => drop(client.call(&r, version).await),
        RequestBody::CreatePartitions(r) => drop(client.call(&r, version).await),
        RequestBody::DescribeConfigs(r) => drop(client.call(&r, version).await),
        RequestBody::AlterConfigs(r) => drop(client.call(&r, version).await),
        RequestBody::IncrementalAlterConfigs(r) => drop(client.call(&r, version).await),
        RequestBody::DeleteRecords(r) => drop(client.call(&r, version).await),
        RequestBody::OffsetForLeaderEpoch(r) => drop(client.call(&r, version).await),
        RequestBody::AddPartitionsToTxn(r) => drop(client.call(&r, version).await),
        RequestBody::AddOffsetsToTxn(r) => drop(client.call(&r, version).await),
        RequestBody::EndTxn(r) => drop(client.call(&r, version).await),
        RequestBody::TxnOffsetCommit(r) => drop(client.call(&r, version).await),
        RequestBody::InitProducerId(r) => drop(client.call(&r, version).await),
        RequestBody::ListOffsets(r) => drop(client.call(&r, version).await),
        RequestBody::Produce(r) => drop(client.call(&r, version).await),
        RequestBody::Fetch(r) => drop(client.call(&r, version).await),
        RequestBody::OffsetCommit(r) => drop(client.call(&r, version).await),
        RequestBody::OffsetFetch(r) => drop(client.call(&r, version).await),
        RequestBody::FindCoordinator(r) => drop(client.call(&r, version).await),
        RequestBody::JoinGroup(r) => drop(client.call(&r, version).await),
        RequestBody::Heartbeat(r) => drop(client.call(&r, version).await),
        RequestBody::LeaveGroup(r) => drop(client.call(&r, version).await),
        RequestBody::SyncGroup(r) => drop(client.call(&r, version).await),
        RequestBody::DescribeGroups(r) => drop(client.call(&r, version).await),
        RequestBody::ListGroups(r) => drop(client.call(&r, version).await),
        RequestBody::DeleteGroups(r) => drop(client.call(&r, version).await),
        RequestBody::OffsetDelete(r) => drop(client.call(&r, version).await),
    }
}

#[tokio::test]
async fn every_accepted_version_of_every_api_is_answered() {
    let broker = broker().await;
    let mut setup = RawClient::connect(broker.addr()).await;
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name("t"))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    setup.call(&create, 5).await;
    // Offsets for OffsetDelete to delete: DeleteGroups, earlier in the table, removes g-commit.
    let Some(RequestBody::OffsetCommit(commit)) = group_sample(ApiKey::OffsetCommit, 2) else {
        unreachable!("the OffsetCommit sample is an OffsetCommit")
    };
    let commit = commit.with_group_id(GroupId(StrBytes::from_static_str("g-offsets")));
    let answer = setup.call(&commit, 2).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 0);
    let mut covered = 0;
    for api in BROKER_APIS {
        for version in api.accepted_min..=api.max {
            let body = sample(api.key, version)
                .unwrap_or_else(|| panic!("no sample request for {:?}", api.key));
            // A fresh connection each time: a close would otherwise hide behind the next call.
            let mut client = RawClient::connect(broker.addr()).await;
            answers(&mut client, body, version).await;
            covered += 1;
        }
    }
    assert_eq!(
        covered,
        BROKER_APIS
            .iter()
            .map(|a| (a.max - a.accepted_min + 1) as usize)
            .sum::<usize>()
    );
}
