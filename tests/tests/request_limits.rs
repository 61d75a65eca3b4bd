//! Single requests that must not take the broker down: batches whose headers lie, compression
//! bombs, timestamp lookups inside them, and partition counts no broker can hold.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreatePartitionsRequest, CreateTopicsRequest};
use kafka_protocol::records::Compression;
use tests::*;

const GZIP: i16 = 1;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_RECORD: i16 = 87;
const POLICY_VIOLATION: i16 = 44;

async fn broker_with_topic() -> (Broker, RawClient) {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    (broker, client)
}

#[tokio::test]
async fn a_header_that_miscounts_its_records_is_refused_as_kafka_refuses_it() {
    let (_broker, mut client) = broker_with_topic().await;
    let one = TINY_RECORD;
    // lastOffsetDelta 1e9 with one record: the offsets would jump a billion.
    let jump = produce(&mut client, "t", 0, raw_batch(0, 1_000_000_000, 1, &one), 8).await;
    assert_eq!(jump.error_code, INVALID_RECORD);
    assert_eq!(
        jump.error_message.as_deref(),
        Some("Inconsistent batch offset range [0, 1000000000] and count of records 1 in topic partition t-0.")
    );
    // A consistent header that counts three records where there is one, or one where there are
    // three.
    let more = produce(&mut client, "t", 0, raw_batch(0, 2, 3, &one), 8).await;
    assert_eq!(more.error_code, INVALID_RECORD);
    assert_eq!(
        more.error_message.as_deref(),
        Some("Incorrect declared batch size, premature EOF reached")
    );
    let three = [one, one, one].concat();
    let fewer = produce(&mut client, "t", 0, raw_batch(0, 0, 1, &three), 8).await;
    assert_eq!(fewer.error_code, INVALID_RECORD);
    assert_eq!(
        fewer.error_message.as_deref(),
        Some("Incorrect declared batch size, records still remaining in file")
    );
    // The same lie inside a gzip batch.
    let gzip = gzip_repeating(&one, 1);
    let lying = produce(&mut client, "t", 0, raw_batch(GZIP, 4, 5, &gzip), 7).await;
    assert_eq!(lying.error_code, INVALID_RECORD);
    // Nothing was appended; an honest batch still is, at offset 0.
    assert_eq!(list_offset(&mut client, "t", 0, -1).await, (0, -1, 0));
    let honest = produce(&mut client, "t", 0, raw_batch(GZIP, 0, 1, &gzip), 7).await;
    assert_eq!((honest.error_code, honest.base_offset), (0, 0));
}

#[tokio::test]
async fn a_compression_bomb_is_refused_and_timestamp_lookups_stay_bounded() {
    let (_broker, mut client) = broker_with_topic().await;
    // 1 MiB of 7-byte records, 70 times: 10.5 M records, over 64 MiB, in about 100 KiB.
    let chunk = TINY_RECORD.repeat((1 << 20) / TINY_RECORD.len());
    let copies = 70;
    let records = (chunk.len() / TINY_RECORD.len() * copies) as i32;
    let bomb = gzip_repeating(&chunk, copies);
    assert!(bomb.len() < 200 * 1024, "{} bytes", bomb.len());
    let answer = produce(
        &mut client,
        "t",
        0,
        raw_batch(GZIP, records - 1, records, &bomb),
        8,
    )
    .await;
    assert_eq!(answer.error_code, MESSAGE_TOO_LARGE);
    assert_eq!(
        answer.error_message.as_deref(),
        Some("The batch's records decompress to more than 67108864 bytes, this broker's limit (--max-uncompressed-batch-bytes).")
    );
    // A batch of the same records within the limit is taken, and a lookup by timestamp inside
    // it is exact and answers at once.
    let taken = gzip_repeating(&chunk, 8);
    let records = (chunk.len() / TINY_RECORD.len() * 8) as i32;
    let answer = produce(
        &mut client,
        "t",
        0,
        raw_batch(GZIP, records - 1, records, &taken),
        7,
    )
    .await;
    assert_eq!((answer.error_code, answer.base_offset), (0, 0));
    assert_eq!(list_offset(&mut client, "t", 0, 1000).await, (0, 1000, 0));
    assert_eq!(list_offset(&mut client, "t", 0, 1001).await, (0, -1, -1));
}

#[tokio::test]
async fn timestamp_lookups_are_exact_inside_compressed_batches() {
    let (_broker, mut client) = broker_with_topic().await;
    for (i, codec) in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .enumerate()
    {
        let t = 10_000 * (i as i64 + 1);
        let records = [(None, "a", t), (None, "b", t + 50), (None, "c", t + 20)];
        let answer = produce(&mut client, "t", 0, batch(&records, codec), 7).await;
        assert_eq!(answer.error_code, 0, "{codec:?}");
        let base = 3 * i as i64;
        assert_eq!(
            list_offset(&mut client, "t", 0, t + 10).await,
            (0, t + 50, base + 1)
        );
        assert_eq!(
            list_offset(&mut client, "t", 0, t + 50).await,
            (0, t + 50, base + 1)
        );
    }
}

fn creatable(name: String, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(&name))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
}

#[tokio::test]
async fn a_create_topics_asking_more_than_ten_thousand_partitions_is_a_policy_violation() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    // Kafka's controller refuses the whole request past 10,000 partitions.
    let topics = (0..3)
        .map(|i| creatable(format!("big-{i}"), 4000))
        .collect();
    let response = client
        .call(&CreateTopicsRequest::default().with_topics(topics), 5)
        .await;
    for topic in &response.topics {
        assert_eq!(topic.error_code, POLICY_VIOLATION, "{:?}", topic.name);
        assert_eq!(
            topic.error_message.as_deref(),
            Some("Excessively large number of partitions per request.")
        );
    }
    assert!(broker.state().topics.all().is_empty());
}

#[tokio::test]
async fn the_broker_holds_at_most_its_partition_limit() {
    let broker = start_broker(BrokerConfig {
        max_partitions: 100,
        ..Default::default()
    })
    .await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "a", 60).await, 0);
    let request = CreateTopicsRequest::default().with_topics(vec![creatable("b".into(), 41)]);
    let refused = &client.call(&request, 5).await.topics[0];
    assert_eq!(refused.error_code, POLICY_VIOLATION);
    assert_eq!(
        refused.error_message.as_deref(),
        Some("The broker would hold 101 partitions, above its limit of 100 (--max-partitions).")
    );
    assert_eq!(create_topic(&mut client, "b", 40).await, 0);
    // Growing a topic counts too, and so does a single request's share of it.
    let grow = |count| {
        CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name("a"))
                .with_count(count)
                .with_assignments(None)])
            .with_timeout_ms(1000)
    };
    let refused = &client.call(&grow(61), 1).await.results[0];
    assert_eq!(refused.error_code, POLICY_VIOLATION);
    assert_eq!(
        broker.state().topics.get("a").unwrap().partition_count(),
        60
    );
    let huge = &client.call(&grow(20_000), 1).await.results[0];
    assert_eq!(huge.error_code, POLICY_VIOLATION);
    assert_eq!(
        huge.error_message.as_deref(),
        Some("Unable to perform excessively large batch operation.")
    );
}
