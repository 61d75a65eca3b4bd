//! Each API of the broker over TCP, asserting exact offsets, partitions and error codes.

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use tests::*;

#[tokio::test]
async fn api_versions_advertises_the_reference_table_and_answers_newer_clients_in_v0() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    for version in 0..=4 {
        let response = client.call(&ApiVersionsRequest::default(), version).await;
        assert_eq!(response.error_code, 0);
        let produce = response.api_keys.iter().find(|k| k.api_key == 0).unwrap();
        assert_eq!((produce.min_version, produce.max_version), (0, 9));
        let fetch = response.api_keys.iter().find(|k| k.api_key == 1).unwrap();
        assert_eq!((fetch.min_version, fetch.max_version), (4, 12));
    }
    // KIP-511: a version above ours gets UNSUPPORTED_VERSION, encoded at v0 with our range.
    client.send(&ApiVersionsRequest::default(), 4).await;
    client.receive::<ApiVersionsRequest>(4).await;
    let mut frame = {
        let header = [0, 18, 0, 9, 0, 0, 0, 77, 0, 0]; // key 18, v9, correlation 77, null client id
        let mut wire = (header.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&header);
        client.send_bytes(&wire).await;
        client.next_frame().await.unwrap().freeze()
    };
    use kafka_protocol::protocol::Decodable;
    let header = ResponseHeader::decode(&mut frame, 0).unwrap();
    assert_eq!(header.correlation_id, 77);
    let body = ApiVersionsResponse::decode(&mut frame, 0).unwrap();
    assert_eq!(body.error_code, ResponseError::UnsupportedVersion.code());
    let own = body.api_keys.iter().find(|k| k.api_key == 18).unwrap();
    assert_eq!((own.min_version, own.max_version), (0, 4));
}

#[tokio::test]
async fn metadata_names_this_broker_as_controller_and_leader() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "orders", 12).await, 0);
    for version in [0, 1, 4, 9, 12] {
        let response = client
            .call(
                &MetadataRequest::default().with_topics(None),
                version.max(1),
            )
            .await;
        assert_eq!(response.brokers.len(), 1);
        assert_eq!(response.brokers[0].port as u16, broker.addr().port());
        let node = response.brokers[0].node_id;
        assert_eq!(response.controller_id, node);
        let topic = &response.topics[0];
        assert_eq!(topic.name.as_ref().map(|n| n.as_str()), Some("orders"));
        assert_eq!(topic.partitions.len(), 12);
        assert!(topic
            .partitions
            .iter()
            .all(|p| p.leader_id == node && p.isr_nodes == vec![node]));
    }
    // v0: an empty list means every topic.
    let all = client
        .call(&MetadataRequest::default().with_topics(Some(vec![])), 0)
        .await;
    assert_eq!(all.topics.len(), 1);
    // v1+: an empty list means none.
    let none = client
        .call(&MetadataRequest::default().with_topics(Some(vec![])), 1)
        .await;
    assert!(none.topics.is_empty());
}

#[tokio::test]
async fn metadata_auto_creates_only_when_the_broker_allows_it() {
    let wanted = |name: &str| {
        MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(name)))
            ]))
            .with_allow_auto_topic_creation(true)
    };
    let strict = broker().await;
    let mut client = RawClient::connect(strict.addr()).await;
    let response = client.call(&wanted("fresh"), 9).await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );

    let open = start_broker(BrokerConfig {
        auto_create_topics: true,
        default_partitions: 3,
        ..Default::default()
    })
    .await;
    let mut client = RawClient::connect(open.addr()).await;
    let response = client.call(&wanted("fresh"), 9).await;
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.topics[0].partitions.len(), 3);
    // A client that does not allow it (v4+) creates nothing even here.
    let response = client
        .call(&wanted("other").with_allow_auto_topic_creation(false), 9)
        .await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[tokio::test]
async fn create_topics_validates_as_kafka_does() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let create = |name: &str, partitions: i32, replication: i16| {
        CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)
    };
    let request = CreateTopicsRequest::default().with_topics(vec![
        create("orders", 12, 1),
        create("defaults", -1, -1),
        create("replicated", 3, 3),
        create("bad/name", 3, 1),
        create("zero", 0, 1),
        create(&"x".repeat(250), 1, 1),
    ]);
    let response = client.call(&request, 7).await;
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![
            0,
            0,
            ResponseError::InvalidReplicationFactor.code(),
            ResponseError::InvalidTopicException.code(),
            ResponseError::InvalidPartitions.code(),
            ResponseError::InvalidTopicException.code(),
        ]
    );
    assert_eq!(response.topics[0].num_partitions, 12);
    assert_eq!(response.topics[1].num_partitions, 1);
    assert_eq!(
        create_topic(&mut client, "orders", 3).await,
        ResponseError::TopicAlreadyExists.code()
    );

    let dry = CreateTopicsRequest::default()
        .with_topics(vec![create("dry", 2, 1)])
        .with_validate_only(true);
    assert_eq!(client.call(&dry, 5).await.topics[0].error_code, 0);
    let listed = client
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    let names: Vec<_> = listed
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["defaults", "orders"]);
}

#[tokio::test]
async fn delete_topics_removes_and_reports_unknown_ones() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "gone", 2).await;
    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![topic_name("gone"), topic_name("never")]);
    let response = client.call(&request, 4).await;
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(
        response.responses[1].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let listed = client
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    assert!(listed.topics.is_empty());
}

#[tokio::test]
async fn produce_assigns_contiguous_offsets_per_partition() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "orders", 2).await;
    for (version, expected_base) in [(3, 0), (7, 3), (9, 6)] {
        let response = produce(&mut client, "orders", 0, values(3), version).await;
        assert_eq!(
            (response.error_code, response.base_offset),
            (0, expected_base)
        );
    }
    // Three batches of 3 went to partition 0: base offsets 0, 3, 6; partition 1 is untouched.
    let next = produce(&mut client, "orders", 0, values(2), 9).await;
    assert_eq!(next.base_offset, 9);
    let other = produce(&mut client, "orders", 1, values(5), 9).await;
    assert_eq!(other.base_offset, 0);
    assert_eq!(list_offset(&mut client, "orders", 0, -1).await, (0, -1, 11));
    assert_eq!(list_offset(&mut client, "orders", 1, -1).await, (0, -1, 5));
}

#[tokio::test]
async fn produce_refuses_bad_batches_per_partition_only() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "t", 1).await;
    let good = values(2);
    let mut corrupt = good.to_vec();
    corrupt[30] ^= 0xff; // inside the CRC-covered header
    let mut two = good.to_vec();
    two.extend_from_slice(&good);
    let cases: Vec<(Bytes, i16, ResponseError)> = vec![
        (Bytes::from(corrupt), 9, ResponseError::CorruptMessage),
        (
            good.slice(..good.len() - 1),
            9,
            ResponseError::CorruptMessage,
        ),
        (Bytes::from(two), 9, ResponseError::InvalidRecord),
        // No batch at all: Kafka's `ProduceRequest.validateRecords`.
        (Bytes::new(), 9, ResponseError::InvalidRecord),
        (
            batch(&[(None, "z", 1)], Compression::Zstd),
            6,
            ResponseError::UnsupportedCompressionType,
        ),
        (
            batch(&[(None, &"x".repeat(1_100_000), 1)], Compression::None),
            9,
            ResponseError::MessageTooLarge,
        ),
    ];
    for (records, version, expected) in cases {
        let response = produce(&mut client, "t", 0, records, version).await;
        assert_eq!(response.error_code, expected.code(), "{expected:?}");
    }
    let unknown = produce(&mut client, "t", 5, values(1), 9).await;
    assert_eq!(
        unknown.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let missing = produce(&mut client, "nope", 0, values(1), 9).await;
    assert_eq!(
        missing.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    // Nothing above was appended; a good batch still lands at offset 0.
    let ok = produce(&mut client, "t", 0, values(1), 9).await;
    assert_eq!((ok.error_code, ok.base_offset), (0, 0));
    // zstd from v7 on.
    let zstd = produce(
        &mut client,
        "t",
        0,
        batch(&[(None, "z", 1)], Compression::Zstd),
        7,
    )
    .await;
    assert_eq!((zstd.error_code, zstd.base_offset), (0, 1));
}

#[tokio::test]
async fn produce_acks_rules() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "t", 1).await;
    let invalid = client.call(&produce_request("t", 0, values(1), 2), 9).await;
    assert_eq!(
        invalid.responses[0].partition_responses[0].error_code,
        ResponseError::InvalidRequiredAcks.code()
    );
    // acks=0 gets no response: the next answer on the connection belongs to the next request.
    client.send(&produce_request("t", 0, values(4), 0), 9).await;
    let (_, offsets) = {
        let response = client.call(&ApiVersionsRequest::default(), 3).await;
        (response, list_offset(&mut client, "t", 0, -1).await)
    };
    assert_eq!(offsets, (0, -1, 4));
    // acks=0 with an error closes the connection: the producer's only signal.
    client
        .send(&produce_request("missing", 0, values(1), 0), 9)
        .await;
    assert!(client.closed_by_broker().await);
}

#[tokio::test]
async fn fetch_returns_stored_batches_from_the_one_holding_the_offset() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "t", 1).await;
    let records: Vec<TestRecord<'_>> = vec![
        (Some("a"), "1", 10),
        (Some("b"), "2", 20),
        (Some("c"), "3", 30),
    ];
    produce(&mut client, "t", 0, batch(&records, Compression::None), 9).await;
    produce(
        &mut client,
        "t",
        0,
        batch(&records[..2], Compression::Gzip),
        9,
    )
    .await;
    for version in [4, 11, 12] {
        let response = client.call(&fetch_request("t", 0, 1, 0), version).await;
        let p = &response.responses[0].partitions[0];
        assert_eq!(
            (p.error_code, p.high_watermark, p.last_stable_offset),
            (0, 5, 5)
        );
        // The log start offset is on the wire from v5.
        assert_eq!(p.log_start_offset, if version >= 5 { 0 } else { -1 });
        let decoded = decode_records(p.records.as_ref().unwrap());
        let offsets: Vec<i64> = decoded.iter().map(|r| r.0).collect();
        // The whole first batch comes back, starting below the fetch offset; clients skip 0.
        assert_eq!(offsets, vec![0, 1, 2, 3, 4]);
        assert_eq!(decoded[3].1.as_deref(), Some("a"));
    }
    let at_end = client.call(&fetch_request("t", 0, 5, 0), 12).await;
    let p = &at_end.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 5));
    assert_eq!(p.records.as_ref().map(Bytes::len), Some(0));
    let past = client.call(&fetch_request("t", 0, 6, 0), 12).await;
    assert_eq!(
        past.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    let unknown = client.call(&fetch_request("nope", 0, 0, 0), 12).await;
    assert_eq!(
        unknown.responses[0].partitions[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[tokio::test]
async fn fetch_returns_one_batch_even_above_max_bytes() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "t", 1).await;
    produce(&mut client, "t", 0, values(100), 9).await;
    produce(&mut client, "t", 0, values(100), 9).await;
    let request = fetch_request("t", 0, 0, 0).with_max_bytes(10);
    let response = client.call(&request, 12).await;
    let records = decode_records(
        response.responses[0].partitions[0]
            .records
            .as_ref()
            .unwrap(),
    );
    assert_eq!(records.len(), 100, "exactly the first batch");
}

/// Big stored batches go out as pieces of their own, small ones copied in between: an answer of
/// several MiB, more than a socket takes in one write, arrives whole and in order at every
/// version.
#[tokio::test]
async fn fetch_answers_of_many_big_and_small_batches_arrive_whole() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "t", 1).await;
    let mut expected = Vec::new();
    for i in 0..24 {
        for value in [format!("{i:02}").repeat(150_000), format!("small {i}")] {
            let records = batch(&[(None, &value, i)], Compression::None);
            produce(&mut client, "t", 0, records, 9).await;
            expected.push(value);
        }
    }
    for version in 4..=12 {
        let mut request = fetch_request("t", 0, 0, 0);
        request.topics[0].partitions[0].partition_max_bytes = 64 << 20;
        let response = client.call(&request, version).await;
        let p = &response.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (0, 48), "v{version}");
        let values: Vec<String> = decode_records(p.records.as_ref().unwrap())
            .into_iter()
            .enumerate()
            .map(|(i, (offset, _, value))| {
                assert_eq!(offset, i as i64);
                value
            })
            .collect();
        assert!(values == expected, "v{version}: records differ");
    }
}

#[tokio::test]
async fn a_parked_fetch_is_woken_by_the_append_that_satisfies_it() {
    let broker = broker().await;
    let mut admin = RawClient::connect(broker.addr()).await;
    create_topic(&mut admin, "t", 1).await;
    let mut consumer = RawClient::connect(broker.addr()).await;
    // A wait of ~24 days: only an append can answer this fetch before the test's guard fires.
    consumer.send(&fetch_request("t", 0, 0, i32::MAX), 12).await;
    produce(&mut admin, "t", 0, values(3), 9).await;
    let (_, response) = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        consumer.receive::<FetchRequest>(12),
    )
    .await
    .expect("the append wakes the fetch");
    let records = decode_records(
        response.responses[0].partitions[0]
            .records
            .as_ref()
            .unwrap(),
    );
    assert_eq!(records.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_fetch_with_nothing_to_read_answers_empty_after_max_wait() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "t", 1).await;
    let started = tokio::time::Instant::now();
    let response = client.call(&fetch_request("t", 0, 0, 500), 12).await;
    let p = &response.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 0));
    assert_eq!(p.records.as_ref().map(Bytes::len), Some(0));
    // On the paused clock exactly max_wait has passed, not less.
    assert!(started.elapsed() >= std::time::Duration::from_millis(500));
}

#[tokio::test]
async fn list_offsets_latest_earliest_and_timestamps() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "t", 1).await;
    assert_eq!(list_offset(&mut client, "t", 0, -1).await, (0, -1, 0));
    let first: Vec<TestRecord<'_>> = vec![(None, "a", 100), (None, "b", 200), (None, "c", 300)];
    let second: Vec<TestRecord<'_>> = vec![(None, "d", 400), (None, "e", 500)];
    produce(&mut client, "t", 0, batch(&first, Compression::None), 9).await;
    produce(&mut client, "t", 0, batch(&second, Compression::Lz4), 9).await;
    assert_eq!(list_offset(&mut client, "t", 0, -1).await, (0, -1, 5));
    assert_eq!(list_offset(&mut client, "t", 0, -2).await, (0, -1, 0));
    // The first record at or after the timestamp, found inside its batch.
    assert_eq!(list_offset(&mut client, "t", 0, 150).await, (0, 200, 1));
    assert_eq!(list_offset(&mut client, "t", 0, 300).await, (0, 300, 2));
    assert_eq!(list_offset(&mut client, "t", 0, 450).await, (0, 500, 4));
    assert_eq!(list_offset(&mut client, "t", 0, 501).await, (0, -1, -1));
    // v7: -3 is the record with the largest timestamp.
    assert_eq!(list_offset(&mut client, "t", 0, -3).await, (0, 500, 4));
    assert_eq!(
        list_offset(&mut client, "nope", 0, -1).await.0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

/// Kafka's checks of each ListOffsets partition (`ReplicaManager.fetchOffset`): a partition
/// asked twice is INVALID_REQUEST, answered once; a special timestamp below the version that
/// introduced it (-3 before v7, -4 and -5 before v8 and v9) or an unknown one is
/// UNSUPPORTED_VERSION; `current_leader_epoch` older than the leader's is FENCED_LEADER_EPOCH,
/// newer UNKNOWN_LEADER_EPOCH.
#[tokio::test]
async fn list_offsets_checks_versions_duplicates_and_the_leader_epoch_as_kafka_does() {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "t", 2).await;
    produce(&mut client, "t", 0, values(3), 9).await;
    let ask = |asked: &[(i32, i64, i32)]| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(
                    asked
                        .iter()
                        .map(|&(partition, timestamp, epoch)| {
                            ListOffsetsPartition::default()
                                .with_partition_index(partition)
                                .with_timestamp(timestamp)
                                .with_current_leader_epoch(epoch)
                        })
                        .collect(),
                )])
    };
    let answers = |response: ListOffsetsResponse| -> Vec<(i32, i16, i64)> {
        response.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code, p.offset))
            .collect()
    };
    let invalid = ResponseError::InvalidRequest.code();
    let unsupported = ResponseError::UnsupportedVersion.code();
    let request = ask(&[(0, -1, -1), (1, -1, -1), (0, -2, -1)]);
    assert_eq!(
        answers(client.call(&request, 7).await),
        vec![(0, invalid, -1), (1, 0, 0)]
    );
    for version in [1, 6] {
        let request = ask(&[(0, -3, -1)]);
        assert_eq!(
            answers(client.call(&request, version).await),
            vec![(0, unsupported, -1)]
        );
    }
    for timestamp in [-4, -5, -6] {
        let request = ask(&[(0, timestamp, -1)]);
        assert_eq!(
            answers(client.call(&request, 7).await),
            vec![(0, unsupported, -1)]
        );
    }
    let request = ask(&[(0, -1, 0), (1, -1, 5)]);
    assert_eq!(
        answers(client.call(&request, 7).await),
        vec![(0, 0, 3), (1, ResponseError::UnknownLeaderEpoch.code(), -1)]
    );
    let request = ask(&[(0, -1, -7)]);
    assert_eq!(
        answers(client.call(&request, 7).await),
        vec![(0, ResponseError::FencedLeaderEpoch.code(), -1)]
    );
}

#[tokio::test]
async fn create_partitions_only_increases_and_moves_keys_as_kafka_does() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, "orders", 12).await;
    let grow = |count: i32, validate_only: bool| {
        CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name("orders"))
                .with_count(count)
                .with_assignments(None)])
            .with_validate_only(validate_only)
    };
    let shrink = client.call(&grow(6, false), 3).await;
    assert_eq!(
        shrink.results[0].error_code,
        ResponseError::InvalidPartitions.code()
    );
    assert_eq!(
        shrink.results[0].error_message.as_deref(),
        Some("The topic orders currently has 12 partition(s); 6 would not be an increase.")
    );
    let same = client.call(&grow(12, false), 0).await;
    assert_eq!(
        same.results[0].error_message.as_deref(),
        Some("Topic already has 12 partition(s).")
    );
    assert_eq!(
        client.call(&grow(24, true), 1).await.results[0].error_code,
        0
    );
    let count = |m: MetadataResponse| m.topics[0].partitions.len();
    assert_eq!(
        count(
            client
                .call(&MetadataRequest::default().with_topics(None), 9)
                .await
        ),
        12
    );
    assert_eq!(
        client.call(&grow(24, false), 2).await.results[0].error_code,
        0
    );
    assert_eq!(
        count(
            client
                .call(&MetadataRequest::default().with_topics(None), 9)
                .await
        ),
        24
    );
    // Kafka's partitioner, against the new count.
    assert_eq!(
        protocol::partitioner::partition_for_key(b"order-8842", 24),
        16
    );
    let landed = produce(&mut client, "orders", 16, values(1), 9).await;
    assert_eq!((landed.error_code, landed.base_offset), (0, 0));
}

#[tokio::test]
async fn describe_configs_for_topics() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name("t"))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("retention.ms"))
            .with_value(Some(StrBytes::from_static_str("1000")))])]);
    client.call(&request, 5).await;
    let describe = |name: &str| {
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(name.to_string()))])
    };
    for version in 1..=4 {
        let response = client.call(&describe("t"), version).await;
        let result = &response.results[0];
        assert_eq!(result.error_code, 0);
        let retention = result
            .configs
            .iter()
            .find(|c| c.name.as_str() == "retention.ms")
            .unwrap();
        assert_eq!(retention.value.as_deref(), Some("1000"));
        let cleanup = result
            .configs
            .iter()
            .find(|c| c.name.as_str() == "cleanup.policy")
            .unwrap();
        assert_eq!(cleanup.value.as_deref(), Some("delete"));
    }
    let missing = client.call(&describe("nope"), 4).await;
    assert_eq!(
        missing.results[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}
