//! What every group test uses: the consumer protocol's bytes, requests at the versions
//! librdkafka 2.0.2 sends, and a two-member group to start from.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tests::*;

pub const GROUP: &str = "workers";
pub const TOPIC: &str = "orders";
pub const SESSION_MS: i32 = 10_000;
pub const REBALANCE_MS: i32 = 30_000;
/// Versions librdkafka 2.0.2 uses.
pub const JOIN_V: i16 = 5;
pub const SYNC_V: i16 = 3;
pub const HEARTBEAT_V: i16 = 3;

pub fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

pub fn group(id: &str) -> GroupId {
    GroupId(s(id))
}

pub fn code(error: ResponseError) -> i16 {
    error.code()
}

/// A consumer's subscription, as its JoinGroup metadata: version 0 then the message.
pub fn subscription(topics: &[&str]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| s(t)).collect())
        .encode(&mut out, 0)
        .unwrap();
    out.freeze()
}

/// A leader's assignment of `partitions` of the topic, as a consumer leader encodes it.
pub fn assignment(partitions: &[i32]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(1);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![TopicPartition::default()
            .with_topic(topic_name(TOPIC))
            .with_partitions(partitions.to_vec())])
        .encode(&mut out, 1)
        .unwrap();
    out.freeze()
}

pub fn assigned_partitions(bytes: &Bytes) -> Vec<i32> {
    let mut bytes = bytes.clone();
    let version = bytes.get_i16();
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, version).unwrap();
    decoded
        .assigned_partitions
        .into_iter()
        .flat_map(|tp| tp.partitions)
        .collect()
}

pub fn join_request(group_id: &str, member_id: &str, instance: Option<&str>) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group(group_id))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(REBALANCE_MS)
        .with_member_id(s(member_id))
        .with_group_instance_id(instance.map(s))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(subscription(&[TOPIC]))])
}

pub fn sync_request(
    member_id: &str,
    generation: i32,
    assignments: &[(&str, Bytes)],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(group(GROUP))
        .with_generation_id(generation)
        .with_member_id(s(member_id))
        .with_assignments(
            assignments
                .iter()
                .map(|(member, bytes)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(member))
                        .with_assignment(bytes.clone())
                })
                .collect(),
        )
}

pub async fn heartbeat(client: &mut RawClient, member_id: &str, generation: i32) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(group(GROUP))
        .with_generation_id(generation)
        .with_member_id(s(member_id));
    client.call(&request, HEARTBEAT_V).await.error_code
}

/// Joins as a new dynamic member at v5, through the MEMBER_ID_REQUIRED round; returns the id,
/// with the second JoinGroup sent but not yet answered.
pub async fn start_join(client: &mut RawClient) -> String {
    let first = client.call(&join_request(GROUP, "", None), JOIN_V).await;
    assert_eq!(first.error_code, code(ResponseError::MemberIdRequired));
    assert!(first.member_id.starts_with("raw-test-"));
    client
        .send(&join_request(GROUP, &first.member_id, None), JOIN_V)
        .await;
    first.member_id.to_string()
}

pub async fn joined(client: &mut RawClient) -> JoinGroupResponse {
    client.receive::<JoinGroupRequest>(JOIN_V).await.1
}

pub async fn synced(client: &mut RawClient) -> SyncGroupResponse {
    client.receive::<SyncGroupRequest>(SYNC_V).await.1
}

pub async fn describe(client: &mut RawClient, group_id: &str) -> DescribedGroup {
    let request = DescribeGroupsRequest::default().with_groups(vec![group(group_id)]);
    client.call(&request, 5).await.groups.remove(0)
}

/// A member: its connection and id.
pub struct Member {
    pub client: RawClient,
    pub id: String,
}

/// Two dynamic members of GROUP sharing the 6 partitions of TOPIC: A (the leader) got 0-2 and
/// B got 3-5, in generation 2, the group Stable.
pub async fn two_members(broker: &Broker) -> (Member, Member) {
    let mut setup = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut setup, TOPIC, 6).await, 0);

    // A alone: generation 1, leader, everything.
    let mut a = RawClient::connect(broker.addr()).await;
    let a_id = start_join(&mut a).await;
    let a_joined = joined(&mut a).await;
    assert_eq!(a_joined.error_code, 0);
    assert_eq!(a_joined.generation_id, 1);
    assert_eq!(a_joined.leader.as_str(), a_id);
    let all = assignment(&[0, 1, 2, 3, 4, 5]);
    let a_synced = a
        .call(&sync_request(&a_id, 1, &[(&a_id, all.clone())]), SYNC_V)
        .await;
    assert_eq!((a_synced.error_code, a_synced.assignment), (0, all));

    // B joins: a rebalance, which A learns from its heartbeat.
    let mut b = RawClient::connect(broker.addr()).await;
    let b_id = start_join(&mut b).await;
    assert_eq!(
        heartbeat(&mut a, &a_id, 1).await,
        code(ResponseError::RebalanceInProgress)
    );
    let a_joined = a.call(&join_request(GROUP, &a_id, None), JOIN_V).await;
    let b_joined = joined(&mut b).await;
    assert_eq!((a_joined.generation_id, b_joined.generation_id), (2, 2));
    assert_eq!(a_joined.leader.as_str(), a_id);
    assert_eq!(b_joined.leader.as_str(), a_id);
    assert_eq!(b_joined.member_id.as_str(), b_id);
    assert_eq!(
        a_joined.protocol_name.as_ref().map(|p| p.as_str()),
        Some("range")
    );
    // Only the leader sees the members, each with the subscription it sent.
    assert!(b_joined.members.is_empty());
    let members: Vec<(&str, &Bytes)> = a_joined
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), &m.metadata))
        .collect();
    let metadata = subscription(&[TOPIC]);
    assert_eq!(
        members,
        vec![(a_id.as_str(), &metadata), (b_id.as_str(), &metadata)]
    );

    // B syncs first and waits; the leader's assignment answers both.
    b.send(&sync_request(&b_id, 2, &[]), SYNC_V).await;
    let (mine, theirs) = (assignment(&[0, 1, 2]), assignment(&[3, 4, 5]));
    let a_synced = a
        .call(
            &sync_request(&a_id, 2, &[(&a_id, mine.clone()), (&b_id, theirs.clone())]),
            SYNC_V,
        )
        .await;
    let b_synced = synced(&mut b).await;
    assert_eq!((a_synced.error_code, b_synced.error_code), (0, 0));
    assert_eq!(a_synced.assignment, mine);
    assert_eq!(b_synced.assignment, theirs);
    assert_eq!(assigned_partitions(&a_synced.assignment), vec![0, 1, 2]);
    assert_eq!(assigned_partitions(&b_synced.assignment), vec![3, 4, 5]);
    (
        Member {
            client: a,
            id: a_id,
        },
        Member {
            client: b,
            id: b_id,
        },
    )
}

/// OffsetCommit of `(topic, partition, offset, metadata)` at a generation.
pub fn commit_request(
    group_id: &str,
    member_id: &str,
    generation: i32,
    offsets: &[(&str, i32, i64, Option<&str>)],
) -> OffsetCommitRequest {
    let topics = offsets
        .iter()
        .map(|&(topic, partition, offset, metadata)| {
            OffsetCommitRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_metadata(metadata.map(s))])
        })
        .collect();
    OffsetCommitRequest::default()
        .with_group_id(group(group_id))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member_id))
        .with_topics(topics)
}

/// A group's committed offsets as OffsetFetch lists them: `(topic, partition, offset, metadata)`
/// in answer order.
pub type Fetched = Vec<Fetched1>;
type Fetched1 = (String, i32, i64, String);

/// OffsetFetch of the given partitions, or of everything with `None`, for one group: the
/// single-group form up to v7, a batch of one from v8.
pub async fn fetch_offsets(
    client: &mut RawClient,
    group_id: &str,
    partitions: Option<&[i32]>,
    version: i16,
) -> Fetched {
    if version >= 8 {
        let mut answers = fetch_batch(client, &[(group_id, partitions)], version).await;
        let (_, code, fetched) = answers.pop().expect("one group asked, one answered");
        assert_eq!(code, 0);
        return fetched;
    }
    let topics = partitions.map(|p| {
        vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partition_indexes(p.to_vec())]
    });
    let request = OffsetFetchRequest::default()
        .with_group_id(group(group_id))
        .with_topics(topics);
    let response = client.call(&request, version).await;
    assert_eq!(response.error_code, 0);
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                assert_eq!(p.error_code, 0);
                row(&t.name, p.partition_index, p.committed_offset, &p.metadata)
            })
        })
        .collect()
}

/// One partition of an OffsetFetch answer, whichever version's shape it came in.
fn row(topic: &TopicName, partition: i32, offset: i64, metadata: &Option<StrBytes>) -> Fetched1 {
    let metadata = metadata.as_deref().unwrap_or_default().to_string();
    (topic.to_string(), partition, offset, metadata)
}

/// One OffsetFetch v8+ for several groups (librdkafka's batched form), each with the partitions
/// of `TOPIC` asked or `None` for all: `(group, error code, offsets)` in answer order.
pub async fn fetch_batch(
    client: &mut RawClient,
    groups: &[(&str, Option<&[i32]>)],
    version: i16,
) -> Vec<(String, i16, Fetched)> {
    let groups = groups
        .iter()
        .map(|(id, partitions)| {
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(group(id))
                .with_topics(partitions.map(|p| {
                    vec![offset_fetch_request::OffsetFetchRequestTopics::default()
                        .with_name(topic_name(TOPIC))
                        .with_partition_indexes(p.to_vec())]
                }))
        })
        .collect();
    let request = OffsetFetchRequest::default().with_groups(groups);
    let response = client.call(&request, version).await;
    response
        .groups
        .iter()
        .map(|g| {
            let fetched = g
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| {
                        assert_eq!(p.error_code, 0);
                        row(&t.name, p.partition_index, p.committed_offset, &p.metadata)
                    })
                })
                .collect();
            (g.group_id.to_string(), g.error_code, fetched)
        })
        .collect()
}
