//! `--data-dir`: what was acknowledged survives a restart, offsets continue, and the idempotence
//! window is rebuilt from the log.

use broker::group_commit::FlushDefaults;
use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tests::*;

/// Produces to `orders` with acks=all: `(error code, base offset)`.
async fn produce_orders(client: &mut RawClient, partition: i32, records: Bytes) -> (i16, i64) {
    let p = produce(client, "orders", partition, records, 9).await;
    (p.error_code, p.base_offset)
}

async fn read_all(client: &mut RawClient, partition: i32) -> Vec<(i64, Option<String>, String)> {
    let response = client
        .call(&fetch_request("orders", partition, 0, 0), 12)
        .await;
    decode_records(
        response.responses[0].partitions[0]
            .records
            .as_ref()
            .unwrap(),
    )
}

#[tokio::test]
async fn topics_and_records_survive_a_restart() {
    let dir = data_dir("restart");
    let config = BrokerConfig {
        data_dir: Some(dir.clone()),
        ..Default::default()
    };
    let (id, epoch);
    let idempotent;
    {
        let broker = start_broker(config.clone()).await;
        let mut client = RawClient::connect(broker.addr()).await;
        let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(topic_name("orders"))
            .with_num_partitions(3)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("5000")))])]);
        assert_eq!(client.call(&create, 5).await.topics[0].error_code, 0);
        let init = client
            .call(
                &InitProducerIdRequest::default().with_transactional_id(None),
                4,
            )
            .await;
        assert_eq!(init.error_code, 0);
        (id, epoch) = (init.producer_id.0, init.producer_epoch);
        let records: Vec<TestRecord<'_>> = vec![
            (Some("order-8842"), "created", 1),
            (Some("order-8842"), "paid", 2),
        ];
        assert_eq!(
            produce_orders(
                &mut client,
                2,
                batch(&records, kafka_protocol::records::Compression::Gzip)
            )
            .await,
            (0, 0)
        );
        idempotent = idempotent_batch(
            &[(Some("order-1"), "created", 3)],
            ProducerStamp {
                id,
                epoch,
                base_sequence: 0,
            },
        );
        assert_eq!(
            produce_orders(&mut client, 2, idempotent.clone()).await,
            (0, 2)
        );
        broker.shutdown().await;
    }
    let broker = start_broker(config).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let metadata = client
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    assert_eq!(metadata.topics[0].partitions.len(), 3);
    let records = read_all(&mut client, 2).await;
    let stored: Vec<(i64, &str)> = records.iter().map(|(o, _, v)| (*o, v.as_str())).collect();
    assert_eq!(stored, vec![(0, "created"), (1, "paid"), (2, "created")]);
    // The producer's retry after the restart is still recognised, and new data continues at 3.
    assert_eq!(produce_orders(&mut client, 2, idempotent).await, (0, 2));
    assert_eq!(produce_orders(&mut client, 2, values(1)).await, (0, 3));
    let configs = broker.state().topics.get("orders").unwrap().configs();
    assert_eq!(
        configs.get("retention.ms").map(String::as_str),
        Some("5000")
    );
    // Deleting removes the files: a third start has no topic.
    let delete = DeleteTopicsRequest::default().with_topic_names(vec![topic_name("orders")]);
    assert_eq!(client.call(&delete, 4).await.responses[0].error_code, 0);
    broker.shutdown().await;
    let broker = start_broker(BrokerConfig {
        data_dir: Some(dir.clone()),
        ..Default::default()
    })
    .await;
    assert!(broker.state().topics.all().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_acks_all_produces_of_one_connection_share_one_sync() {
    let dir = data_dir("group-commit");
    // Synced before each answer; no background sync within the test's time.
    let broker = start_broker(BrokerConfig {
        data_dir: Some(dir.clone()),
        log_flush: FlushDefaults {
            messages: Some(1),
            ms: Some(3_600_000),
        },
        ..Default::default()
    })
    .await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "orders", 1).await, 0);
    // Five produces in one write, as a producer with five in flight may send them.
    let mut frames = Vec::new();
    let mut correlation_ids = Vec::new();
    for _ in 0..5 {
        let (id, frame) = client.frame(&produce_request("orders", 0, values(2), -1), 9);
        correlation_ids.push(id);
        frames.extend_from_slice(&frame);
    }
    client.send_bytes(&frames).await;
    for (i, sent) in correlation_ids.into_iter().enumerate() {
        let (received, response) = client.receive::<ProduceRequest>(9).await;
        assert_eq!(received, sent, "answers in request order");
        let p = &response.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, 2 * i as i64));
    }
    let commit = broker.state().topics.group_commit().unwrap();
    assert_eq!((commit.rounds(), commit.file_syncs()), (1, 1));
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
