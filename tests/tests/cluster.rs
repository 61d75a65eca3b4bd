//! `--nodes 3`: three brokers in one process. Leaders are spread over the nodes, a node refuses
//! what another leads or coordinates (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR), and a leader
//! moved by a reassignment is found by Metadata and followed by our producer and group member
//! with nothing lost or repeated.
//!
//! Expected placements are Kafka's formulas worked out by hand (Java's String.hashCode):
//! "orders" starts at node index 2, so partitions 0, 1, 2 are led by nodes 3, 1, 2; groups
//! billing, shipping and audit fall in __consumer_offsets partitions 39, 40 and 5, hence on nodes
//! 1, 2 and 3; transactional ids txn-a and txn-b in partitions 8 and 9, on nodes 3 and 1.

mod client_common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use client::admin::Reassignment;
use client::{Admin, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerConfig};
use client::{ProducerRecord, RetryPolicy};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use tests::*;

const NOT_LEADER: i16 = ResponseError::NotLeaderOrFollower.code();
const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();

async fn cluster(config: BrokerConfig) -> Broker {
    start_broker(BrokerConfig { nodes: 3, ..config }).await
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// Each partition of `topic`: (leader, leader epoch, replicas), as node `at` answers Metadata v12.
async fn leaders(at: &mut RawClient, topic: &str) -> Vec<(i32, i32, Vec<i32>)> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic_name(topic))),
    ]));
    let answer = at.call(&request, 12).await;
    let mut partitions = answer.topics[0].partitions.clone();
    partitions.sort_by_key(|p| p.partition_index);
    partitions
        .iter()
        .map(|p| {
            let replicas = p.replica_nodes.iter().map(|b| b.0).collect();
            (p.leader_id.0, p.leader_epoch, replicas)
        })
        .collect()
}

fn one_record(value: &str) -> Bytes {
    batch(&[(None, value, 0)], Compression::None)
}

#[tokio::test]
async fn leaders_are_spread_over_three_nodes_and_every_node_names_them_all() {
    let broker = cluster(BrokerConfig::default()).await;
    let addrs = broker.addrs().to_vec();
    assert_eq!(addrs.len(), 3);
    let mut node1 = RawClient::connect(addrs[0]).await;
    assert_eq!(create_topic(&mut node1, "orders", 6).await, 0);
    for (i, &addr) in addrs.iter().enumerate() {
        let mut node = RawClient::connect(addr).await;
        let answer = node.call(&MetadataRequest::default(), 12).await;
        let brokers: Vec<(i32, String, i32)> = answer
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.host.to_string(), b.port))
            .collect();
        let expected: Vec<(i32, String, i32)> = (0..3)
            .map(|k| {
                (
                    k + 1,
                    "127.0.0.1".to_string(),
                    i32::from(addrs[k as usize].port()),
                )
            })
            .collect();
        assert_eq!(brokers, expected, "as node {} answers", i + 1);
        assert_eq!(answer.controller_id.0, 1);
        let placed = leaders(&mut node, "orders").await;
        let expected: Vec<(i32, i32, Vec<i32>)> = [3, 1, 2, 3, 1, 2]
            .iter()
            .map(|&n| (n, 0, vec![n]))
            .collect();
        assert_eq!(placed, expected, "as node {} answers", i + 1);
    }
}

#[tokio::test]
async fn a_node_refuses_partitions_it_does_not_lead_and_counts_each_redirect() {
    let broker = cluster(BrokerConfig::default()).await;
    let addrs = broker.addrs().to_vec();
    let mut node1 = RawClient::connect(addrs[0]).await;
    let mut node3 = RawClient::connect(addrs[2]).await;
    assert_eq!(create_topic(&mut node1, "orders", 3).await, 0);

    // Partition 0 is node 3's: node 1 refuses it and appends nothing.
    let refused = produce(&mut node1, "orders", 0, one_record("misrouted"), 9).await;
    assert_eq!(refused.error_code, NOT_LEADER);
    assert_eq!(list_offset(&mut node3, "orders", 0, -1).await, (0, -1, 0));
    assert_eq!(list_offset(&mut node1, "orders", 0, -1).await.0, NOT_LEADER);
    let accepted = produce(&mut node3, "orders", 0, one_record("routed"), 9).await;
    assert_eq!((accepted.error_code, accepted.base_offset), (0, 0));

    // One request for partitions 0 (node 3's) and 1 (node 1's): each gets its own answer.
    let mut mixed = produce_request("orders", 1, one_record("here"), -1);
    mixed.topic_data[0].partition_data.push(
        produce_request("orders", 0, one_record("elsewhere"), -1).topic_data[0].partition_data[0]
            .clone(),
    );
    let answer = node1.call(&mixed, 9).await;
    let mut codes: Vec<(i32, i16, i64)> = answer
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .map(|p| (p.index, p.error_code, p.base_offset))
        .collect();
    codes.sort();
    assert_eq!(codes, vec![(0, NOT_LEADER, -1), (1, 0, 0)]);

    // A fetch for a partition led elsewhere is refused at once, whatever its long poll asks.
    let fetched = node1.call(&fetch_request("orders", 0, 0, 60_000), 12).await;
    let p = &fetched.responses[0].partitions[0];
    assert_eq!((p.partition_index, p.error_code), (0, NOT_LEADER));
    let fetched = node3.call(&fetch_request("orders", 0, 0, 0), 12).await;
    let p = &fetched.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 1));

    // acks=0 has no answer to carry the error: the connection is closed instead, as Kafka does.
    node1
        .send(&produce_request("orders", 0, one_record("lost"), 0), 9)
        .await;
    assert!(node1.closed_by_broker().await);
    assert_eq!(list_offset(&mut node3, "orders", 0, -1).await, (0, -1, 1));

    let metrics = broker::metrics::render(broker.state(), 0);
    let line = |name: &str, labels: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{{labels}}} ")))
            .unwrap_or_else(|| panic!("no {name}{{{labels}}} in\n{metrics}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    let redirects = "kafka_network_request_redirects_total";
    let not_leader = "error=\"NOT_LEADER_OR_FOLLOWER\"";
    assert_eq!(
        line(
            redirects,
            &format!("node=\"1\",api=\"Produce\",{not_leader}")
        ),
        "3"
    );
    assert_eq!(
        line(redirects, &format!("node=\"1\",api=\"Fetch\",{not_leader}")),
        "1"
    );
    assert_eq!(
        line(
            redirects,
            &format!("node=\"1\",api=\"ListOffsets\",{not_leader}")
        ),
        "1"
    );
    assert_eq!(
        line(
            redirects,
            &format!("node=\"3\",api=\"Produce\",{not_leader}")
        ),
        "0"
    );
    assert_eq!(
        line("kafka_network_requests_total", "node=\"1\",api=\"Produce\""),
        "3"
    );
    assert_eq!(
        line("kafka_network_requests_total", "node=\"3\",api=\"Produce\""),
        "1"
    );
}

fn join(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))])
}

#[tokio::test]
async fn each_group_and_transactional_id_has_its_coordinator_on_its_own_node() {
    let broker = cluster(BrokerConfig::default()).await;
    let addrs = broker.addrs().to_vec();
    let port = |node: i32| i32::from(addrs[node as usize - 1].port());
    let mut node1 = RawClient::connect(addrs[0]).await;
    let mut node2 = RawClient::connect(addrs[1]).await;
    let mut node3 = RawClient::connect(addrs[2]).await;

    let keys = ["billing", "shipping", "audit"].map(s).to_vec();
    let answer = node1
        .call(
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(keys),
            4,
        )
        .await;
    let found: Vec<(String, i32, i32)> = answer
        .coordinators
        .iter()
        .map(|c| (c.key.to_string(), c.node_id.0, c.port))
        .collect();
    assert_eq!(
        found,
        vec![
            ("billing".to_string(), 1, port(1)),
            ("shipping".to_string(), 2, port(2)),
            ("audit".to_string(), 3, port(3)),
        ]
    );
    for (version, key_type, key, node) in
        [(3, 0, "group-1", 2), (3, 1, "txn-a", 3), (2, 1, "txn-b", 1)]
    {
        let request = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_key(s(key));
        let answer = node2.call(&request, version).await;
        assert_eq!(
            (answer.error_code, answer.node_id.0, answer.port),
            (0, node, port(node)),
            "{key}"
        );
    }

    // billing is node 1's: node 2 refuses to join it, node 1 takes the member in.
    assert_eq!(
        node2.call(&join("billing"), 5).await.error_code,
        NOT_COORDINATOR
    );
    assert_eq!(
        node1.call(&join("billing"), 5).await.error_code,
        ResponseError::MemberIdRequired.code()
    );
    // txn-a is node 3's.
    let init = |id: &str| {
        InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_transaction_timeout_ms(60_000)
    };
    let refused = node1.call(&init("txn-a"), 4).await;
    assert_eq!(
        (refused.error_code, refused.producer_id.0),
        (NOT_COORDINATOR, -1)
    );
    let accepted = node3.call(&init("txn-a"), 4).await;
    assert_eq!(accepted.error_code, 0);
    assert!(accepted.producer_id.0 >= 0);
    // Each node lists only the groups it coordinates.
    let listed = node2.call(&ListGroupsRequest::default(), 4).await;
    assert!(listed.groups.is_empty(), "{:?}", listed.groups);
}

fn producer_config() -> ProducerConfig {
    ProducerConfig {
        enable_idempotence: true,
        linger: Duration::from_millis(1),
        retry: RetryPolicy {
            retries: 20,
            backoff: Duration::from_millis(10),
            backoff_max: Duration::from_millis(100),
        },
        ..ProducerConfig::default()
    }
}

/// Sends `value-{from..to}` keyed by `key-(i % 30)` and waits for every acknowledgement.
async fn send_range(producer: &Producer, from: usize, to: usize) {
    let mut deliveries = Vec::new();
    for i in from..to {
        let (key, value) = (format!("key-{}", i % 30), format!("value-{i}"));
        let record = ProducerRecord::new("orders").key(&key).value(&value);
        deliveries.push(producer.send(record).await.expect("accepted"));
    }
    for delivery in deliveries {
        delivery.wait().await.expect("acknowledged");
    }
}

/// Polls until `values` holds `count` records in all, then commits.
async fn consume_until(
    member: &mut GroupConsumer,
    values: &mut BTreeMap<String, usize>,
    count: usize,
) {
    let read = async {
        while values.values().sum::<usize>() < count {
            for part in member.poll().await.expect("poll") {
                for record in &part.records {
                    let value = client_common::text(&record.value).to_string();
                    *values.entry(value).or_default() += 1;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("every record arrives");
    member.commit_sync().await.expect("committed");
}

#[tokio::test]
async fn a_reassignment_is_seen_by_metadata_and_followed_by_our_producer_and_group() {
    let broker = cluster(BrokerConfig::default()).await;
    let addrs = broker.addrs().to_vec();
    // Separate clients: the admin's map is fresh after the move, the producer's and the
    // member's still point at the old leader.
    let admin = Admin::new(client_common::connect(addrs[1]).await);
    client_common::create_topic(admin.client(), "orders", 3).await;
    let producer =
        Producer::new(client_common::connect(addrs[0]).await, producer_config()).unwrap();
    let mut config = GroupConfig::new("billing");
    config.auto_commit = false;
    config.consumer.max_wait = Duration::from_millis(100);
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    let mut member = GroupConsumer::new(client_common::connect(addrs[2]).await, config).unwrap();
    member.subscribe(["orders"]).unwrap();

    let mut values = BTreeMap::new();
    send_range(&producer, 0, 300).await;
    consume_until(&mut member, &mut values, 300).await;

    // Partition 0 moves from node 3 to node 1.
    let moved = admin
        .alter_partition_reassignments(&[Reassignment {
            topic: "orders".into(),
            partition: 0,
            replicas: vec![1],
        }])
        .await
        .unwrap();
    assert_eq!(moved[0].1, Ok(()));
    let mut node2 = RawClient::connect(addrs[1]).await;
    assert_eq!(
        leaders(&mut node2, "orders").await,
        vec![(1, 1, vec![1]), (1, 0, vec![1]), (2, 0, vec![2])]
    );
    assert_eq!(admin.list_partition_reassignments().await.unwrap(), vec![]);

    send_range(&producer, 300, 600).await;
    consume_until(&mut member, &mut values, 600).await;
    let lost = (0..600)
        .filter(|i| !values.contains_key(&format!("value-{i}")))
        .count();
    let repeated = values.values().filter(|&&n| n > 1).count();
    assert_eq!((values.len(), lost, repeated), (600, 0, 0));
    // Both met the old leader's NOT_LEADER_OR_FOLLOWER, then followed the new one.
    let traffic = broker.state().cluster.traffic.snapshot();
    let redirected = |api: ApiKey| {
        traffic
            .iter()
            .find(|(node, key, _)| *node == 3 && *key == api)
            .map_or(0, |(_, _, counts)| counts.not_leader)
    };
    assert!(redirected(ApiKey::Produce) >= 1, "{traffic:?}");
    assert!(redirected(ApiKey::Fetch) >= 1, "{traffic:?}");
    member.close().await.unwrap();
    producer.close().await;
}

#[tokio::test]
async fn a_moved_leader_and_its_epoch_survive_a_restart_with_the_data_directory() {
    let dir = data_dir("cluster-moves");
    let broker = cluster(data_dir_config(&dir)).await;
    let mut node1 = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut node1, "orders", 3).await, 0);
    let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic::default()
            .with_name(topic_name("orders"))
            .with_partitions(vec![
                kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition::default()
                    .with_partition_index(2)
                    .with_replicas(Some(vec![BrokerId(3)])),
                kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition::default()
                    .with_partition_index(1)
                    .with_replicas(Some(vec![BrokerId(9)])),
            ]),
    ]);
    let answer = node1.call(&request, 0).await;
    let codes: Vec<(i32, i16)> = answer.responses[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![(2, 0), (1, ResponseError::InvalidReplicaAssignment.code())]
    );
    broker.shutdown().await;

    let broker = cluster(data_dir_config(&dir)).await;
    let mut node1 = RawClient::connect(broker.addr()).await;
    assert_eq!(
        leaders(&mut node1, "orders").await,
        vec![(3, 0, vec![3]), (1, 0, vec![1]), (3, 1, vec![3])]
    );
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A moved partition's leader epoch is the one Metadata names, on the ListOffsets path too: a
/// client that read epoch 1 from Metadata and sends it as `current_leader_epoch` is answered
/// (kafka-python 3.x does this after a move), an older epoch is fenced, a newer one unknown, and
/// the answer carries epoch 1.
#[tokio::test]
async fn list_offsets_checks_the_epoch_metadata_names_after_a_move() {
    let broker = cluster(BrokerConfig::default()).await;
    let mut node1 = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut node1, "orders", 3).await, 0);
    assert_eq!(reassign(&mut node1, "orders", 2, 3).await, 0);
    assert_eq!(leaders(&mut node1, "orders").await[2], (3, 1, vec![3]));

    let mut node3 = RawClient::connect(broker.addrs()[2]).await;
    assert_eq!(latest_with_epoch(&mut node3, 1).await, (0, 1));
    assert_eq!(latest_with_epoch(&mut node3, -1).await, (0, 1));
    assert_eq!(
        latest_with_epoch(&mut node3, 0).await.0,
        ResponseError::FencedLeaderEpoch.code(),
        "an epoch older than the move's"
    );
    assert_eq!(
        latest_with_epoch(&mut node3, 2).await.0,
        ResponseError::UnknownLeaderEpoch.code()
    );
    broker.shutdown().await;
}

/// ListOffsets v7 of orders-2's latest offset with `current_leader_epoch`: (error, leader epoch).
async fn latest_with_epoch(node: &mut RawClient, epoch: i32) -> (i16, i32) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name("orders"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(2)
                .with_timestamp(-1)
                .with_current_leader_epoch(epoch)])]);
    let answer = node.call(&request, 7).await;
    let p = &answer.topics[0].partitions[0];
    (p.error_code, p.leader_epoch)
}

/// OffsetForLeaderEpoch, which a consumer sends to check its position after Metadata names a
/// newer epoch (kafka-python 3.x retried it for ever when it was missing): on the leader, the
/// current and any older epoch end at the log end (one copy of the data, nothing truncated), a
/// later epoch is undefined, an older current epoch is fenced; another node refuses the
/// partition with NOT_LEADER_OR_FOLLOWER.
#[tokio::test]
async fn offset_for_leader_epoch_answers_on_the_leader_after_a_move() {
    let broker = cluster(BrokerConfig::default()).await;
    let mut node1 = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut node1, "orders", 3).await, 0);
    let mut node2 = RawClient::connect(broker.addrs()[1]).await;
    produce(&mut node2, "orders", 2, values(4), 9).await;
    assert_eq!(reassign(&mut node1, "orders", 2, 3).await, 0);

    let mut node3 = RawClient::connect(broker.addrs()[2]).await;
    assert_eq!(epoch_end(&mut node3, 1, 1).await, (0, 1, 4));
    assert_eq!(epoch_end(&mut node3, 1, 0).await, (0, 0, 4));
    assert_eq!(epoch_end(&mut node3, -1, 2).await, (0, -1, -1));
    assert_eq!(
        epoch_end(&mut node3, 0, 0).await.0,
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(epoch_end(&mut node2, 1, 1).await, (NOT_LEADER, -1, -1));
    broker.shutdown().await;
}

/// OffsetForLeaderEpoch v4 for orders-2: (error, leader epoch, end offset).
async fn epoch_end(node: &mut RawClient, current: i32, epoch: i32) -> (i16, i32, i64) {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(topic_name("orders"))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(2)
                .with_current_leader_epoch(current)
                .with_leader_epoch(epoch)])]);
    let answer = node.call(&request, 4).await;
    let p = &answer.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

/// AlterPartitionReassignments v0 moving `topic`-`partition`'s one replica to `to`: its code.
async fn reassign(node: &mut RawClient, topic: &str, partition: i32, to: i32) -> i16 {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        ReassignableTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(partition)
                .with_replicas(Some(vec![BrokerId(to)]))]),
    ]);
    node.call(&request, 0).await.responses[0].partitions[0].error_code
}
