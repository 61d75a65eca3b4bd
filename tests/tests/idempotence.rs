//! The broker side of idempotent producers, over TCP: producer ids, the sequence window, epochs
//! that fence zombies, and lost acknowledgements injected as faults.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tests::*;

async fn setup(broker: &Broker, partitions: i32) -> RawClient {
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", partitions).await, 0);
    client
}

async fn init(client: &mut RawClient, transactional_id: Option<&str>) -> (i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(
            transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.into()))),
        )
        .with_transaction_timeout_ms(60_000);
    let response = client.call(&request, 4).await;
    assert_eq!(response.error_code, 0);
    (response.producer_id.0, response.producer_epoch)
}

fn stamped(id: i64, epoch: i16, base_sequence: i32, values: &[&str]) -> Bytes {
    let records: Vec<TestRecord<'_>> = values.iter().map(|v| (None, *v, 1)).collect();
    idempotent_batch(
        &records,
        ProducerStamp {
            id,
            epoch,
            base_sequence,
        },
    )
}

#[tokio::test]
async fn producer_ids_are_fresh_and_transactional_ids_bump_the_epoch() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(init(&mut client, None).await, (0, 0));
    assert_eq!(init(&mut client, None).await, (1, 0));
    assert_eq!(init(&mut client, Some("billing-1")).await, (2, 0));
    assert_eq!(init(&mut client, Some("billing-1")).await, (2, 1));
    let empty = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(""))));
    assert_eq!(
        client.call(&empty, 2).await.error_code,
        ResponseError::InvalidRequest.code()
    );
}

#[tokio::test]
async fn a_retried_batch_gets_its_original_offset_and_is_stored_once() {
    let broker = start_broker(BrokerConfig {
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .await;
    let mut client = setup(&broker, 1).await;
    let (id, epoch) = init(&mut client, None).await;
    let first = stamped(id, epoch, 0, &["a", "b"]);
    assert_eq!(
        produce(&mut client, "t", 0, first.clone(), 9)
            .await
            .base_offset,
        0
    );
    assert_eq!(
        produce(&mut client, "t", 0, stamped(id, epoch, 2, &["c"]), 9)
            .await
            .base_offset,
        2
    );
    let retry = produce(&mut client, "t", 0, first, 9).await;
    assert_eq!((retry.error_code, retry.base_offset), (0, 0));
    assert_eq!(list_offset(&mut client, "t", 0, -1).await.2, 3);
    let partition = broker
        .state()
        .topics
        .get("t")
        .unwrap()
        .partition(0)
        .unwrap();
    assert_eq!(partition.duplicates_absorbed(), 1);
    let metrics = http_get(broker.metrics_addr().unwrap(), "GET /metrics").await;
    assert!(
        metrics.contains(
            "kafka_partition_idempotent_duplicates_total{topic=\"t\",partition=\"0\"} 1\n"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn gaps_and_old_epochs_are_refused() {
    let broker = broker().await;
    let mut client = setup(&broker, 1).await;
    let (id, _) = init(&mut client, Some("payments")).await;
    produce(&mut client, "t", 0, stamped(id, 0, 0, &["a"]), 9).await;
    let gap = produce(&mut client, "t", 0, stamped(id, 0, 5, &["x"]), 9).await;
    assert_eq!(
        gap.error_code,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    // The restarted instance takes epoch 1; the zombie at epoch 0 is fenced on every partition.
    let (same_id, epoch) = init(&mut client, Some("payments")).await;
    assert_eq!((same_id, epoch), (id, 1));
    assert_eq!(
        produce(&mut client, "t", 0, stamped(id, 1, 0, &["new"]), 9)
            .await
            .error_code,
        0
    );
    let zombie = produce(&mut client, "t", 0, stamped(id, 0, 1, &["stale"]), 9).await;
    assert_eq!(
        zombie.error_code,
        ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(list_offset(&mut client, "t", 0, -1).await.2, 2);
}

#[tokio::test]
async fn a_dropped_ack_closes_the_connection_after_the_append_and_the_retry_is_absorbed() {
    let broker = broker().await;
    broker
        .faults()
        .add("drop-ack:topic=t,count=1".parse().unwrap());
    let mut client = setup(&broker, 1).await;
    let (id, epoch) = init(&mut client, None).await;
    let batch = stamped(id, epoch, 0, &["charge-1", "charge-2"]);
    client
        .send(&produce_request("t", 0, batch.clone(), -1), 9)
        .await;
    assert!(
        client.closed_by_broker().await,
        "the acknowledgement is lost"
    );
    assert_eq!(broker.faults().acks_dropped(), 1);
    // The producer reconnects and retries the same batch: stored once.
    let mut retry = RawClient::connect(broker.addr()).await;
    let response = produce(&mut retry, "t", 0, batch, 9).await;
    assert_eq!((response.error_code, response.base_offset), (0, 0));
    assert_eq!(list_offset(&mut retry, "t", 0, -1).await.2, 2);
}

#[tokio::test]
async fn without_idempotence_a_retry_after_a_lost_ack_is_a_duplicate() {
    let broker = broker().await;
    broker.faults().add("drop-ack:count=1".parse().unwrap());
    let mut client = setup(&broker, 1).await;
    let plain = values(2);
    client
        .send(&produce_request("t", 0, plain.clone(), -1), 9)
        .await;
    assert!(client.closed_by_broker().await);
    let mut retry = RawClient::connect(broker.addr()).await;
    assert_eq!(produce(&mut retry, "t", 0, plain, 9).await.base_offset, 2);
    assert_eq!(
        list_offset(&mut retry, "t", 0, -1).await.2,
        4,
        "both copies stored"
    );
}

#[tokio::test]
async fn dedup_is_per_partition() {
    let broker = broker().await;
    let mut client = setup(&broker, 2).await;
    let (id, epoch) = init(&mut client, None).await;
    let batch = stamped(id, epoch, 0, &["order.cancelled"]);
    produce(&mut client, "t", 0, batch.clone(), 9).await;
    // The same batch resent to another partition (after a partition-count change, say) is new
    // data there: no window on partition 1 knows its sequence.
    let elsewhere = produce(&mut client, "t", 1, batch, 9).await;
    assert_eq!((elsewhere.error_code, elsewhere.base_offset), (0, 0));
    assert_eq!(
        list_offset(&mut client, "t", 0, -1).await.2 + list_offset(&mut client, "t", 1, -1).await.2,
        2
    );
}

#[tokio::test(start_paused = true)]
async fn close_after_and_delay_faults() {
    let broker = broker().await;
    broker
        .faults()
        .add("close-after:requests=2".parse().unwrap());
    let mut client = RawClient::connect(broker.addr()).await;
    client.call(&ApiVersionsRequest::default(), 3).await;
    client.call(&ApiVersionsRequest::default(), 3).await;
    assert!(client.closed_by_broker().await);
    broker.faults().clear();
    broker
        .faults()
        .add("delay:ms=50,api=api-versions".parse().unwrap());
    let mut client = RawClient::connect(broker.addr()).await;
    let started = tokio::time::Instant::now();
    client.call(&ApiVersionsRequest::default(), 3).await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(50));
}
