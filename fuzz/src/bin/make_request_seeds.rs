//! Writes one valid request frame per API the broker serves into `seeds/requests/`, the starting
//! corpus of the `request_handling` target: `cargo run --bin make_request_seeds`.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use kafka_protocol::records::Compression;

fn frame<R: Request>(request: &R, version: i16) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("seed")));
    let mut out = BytesMut::new();
    header.encode(&mut out, R::header_version(version)).unwrap();
    request.encode(&mut out, version).unwrap();
    out.to_vec()
}

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

fn records(compression: Compression) -> Bytes {
    let records = [(Some("k"), "v0", 1000), (Some("k"), "v1", 1001), (None, "v2", 1002)];
    tests::batch(&records, compression)
}

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/requests");
    std::fs::create_dir_all(&dir).unwrap();
    let group = || GroupId(StrBytes::from_static_str("g"));
    let mut seeds: Vec<(&str, Vec<u8>)> = vec![
        ("api-versions", frame(&ApiVersionsRequest::default(), 3)),
        (
            "metadata",
            frame(
                &MetadataRequest::default()
                    .with_topics(Some(vec![
                        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                            .with_name(Some(name("t"))),
                    ]))
                    .with_allow_auto_topic_creation(true),
                9,
            ),
        ),
        (
            "create-topics",
            frame(
                &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
                    .with_name(name("t"))
                    .with_num_partitions(3)
                    .with_replication_factor(1)]),
                5,
            ),
        ),
        (
            "create-partitions",
            frame(
                &CreatePartitionsRequest::default().with_topics(vec![
                    CreatePartitionsTopic::default()
                        .with_name(name("t"))
                        .with_count(5)
                        .with_assignments(None),
                ]),
                3,
            ),
        ),
        (
            "delete-topics",
            frame(
                &DeleteTopicsRequest::default().with_topic_names(vec![name("t")]),
                5,
            ),
        ),
        (
            "fetch",
            frame(
                &FetchRequest::default()
                    .with_max_wait_ms(500)
                    .with_min_bytes(1)
                    .with_max_bytes(1 << 20)
                    .with_session_epoch(-1)
                    .with_topics(vec![FetchTopic::default().with_topic(name("t")).with_partitions(
                        vec![FetchPartition::default().with_partition_max_bytes(1 << 20)],
                    )]),
                12,
            ),
        ),
        (
            "list-offsets",
            frame(
                &ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(1001)])]),
                7,
            ),
        ),
        ("init-producer-id", frame(&InitProducerIdRequest::default(), 4)),
        (
            "find-coordinator",
            frame(
                &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
                3,
            ),
        ),
        (
            "join-group",
            frame(
                &JoinGroupRequest::default()
                    .with_group_id(group())
                    .with_session_timeout_ms(10_000)
                    .with_rebalance_timeout_ms(10_000)
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                    .with_protocols(
                        [JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_static_str("range"))]
                        .into_iter()
                        .collect(),
                    ),
                5,
            ),
        ),
        (
            "heartbeat",
            frame(&HeartbeatRequest::default().with_group_id(group()), 4),
        ),
        (
            "offset-commit",
            frame(&OffsetCommitRequest::default().with_group_id(group()), 8),
        ),
        (
            "offset-fetch",
            frame(&OffsetFetchRequest::default().with_group_id(group()), 7),
        ),
        ("list-groups", frame(&ListGroupsRequest::default(), 4)),
        (
            "describe-groups",
            frame(&DescribeGroupsRequest::default().with_groups(vec![group()]), 5),
        ),
        (
            "describe-configs",
            frame(&DescribeConfigsRequest::default(), 4),
        ),
    ];
    for (label, compression) in [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("zstd", Compression::Zstd),
    ] {
        let produce = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(
                [TopicProduceData::default()
                    .with_name(name("t"))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_records(Some(records(compression)))])]
                .into_iter()
                .collect(),
            );
        seeds.push((label, frame(&produce, 9)));
    }
    for (label, bytes) in &seeds {
        std::fs::write(dir.join(label), bytes).unwrap();
    }
    println!("{} seeds in {}", seeds.len(), dir.display());
}
