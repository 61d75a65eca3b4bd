//! Our idempotent producer against the broker on port 0: acknowledgements lost on the broker
//! side (the connection closes after the append) and on the client side, retries that the
//! broker recognises, five batches in flight per partition that never cross, and the fatal
//! error a zombie gets once a newer instance of its transactional id has started.

mod client_common;

use std::collections::BTreeMap;
use std::time::Duration;

use client::{
    AckLoss, Client, Error, Producer, ProducerConfig, ProducerRecord, RecordMetadata, RetryPolicy,
};
use client_common::*;
use kafka_protocol::ResponseError;

/// Idempotent, lingering a little so batches hold several records, with retries enough to ride
/// out many lost acknowledgements in a row.
fn idempotent() -> ProducerConfig {
    ProducerConfig {
        enable_idempotence: true,
        linger: Duration::from_millis(1),
        batch_size: 512,
        retry: RetryPolicy {
            retries: 60,
            backoff: Duration::from_millis(5),
            backoff_max: Duration::from_millis(50),
        },
        ..ProducerConfig::default()
    }
}

/// Sends `value-0..n` keyed `key-(i % keys)`, all at once, and returns each acknowledgement.
async fn send_all(producer: &Producer, topic: &str, n: usize, keys: usize) -> Vec<RecordMetadata> {
    let mut deliveries = Vec::with_capacity(n);
    for i in 0..n {
        let (key, value) = (format!("key-{}", i % keys), format!("value-{i}"));
        let record = ProducerRecord::new(topic).key(&key).value(&value);
        deliveries.push(producer.send(record).await.expect("accepted"));
    }
    let mut acked = Vec::with_capacity(n);
    for (i, delivery) in deliveries.into_iter().enumerate() {
        match delivery.wait().await {
            Ok(meta) => acked.push(meta),
            Err(e) => panic!("value-{i} was not delivered: {e}"),
        }
    }
    acked
}

/// The values read back from each partition, in offset order.
async fn values_by_partition(client: &Client, topic: &str, n: usize) -> BTreeMap<i32, Vec<String>> {
    read_topic(client, topic, n)
        .await
        .into_iter()
        .map(|(p, records)| {
            (
                p,
                records.iter().map(|r| text(&r.value).to_string()).collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_side_lost_acks_leave_exactly_the_records_sent_in_order() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "lossy", 3).await;
    broker
        .faults()
        .add("drop-ack:probability=0.3,seed=7".parse().unwrap());
    let producer = Producer::new(client.clone(), idempotent()).unwrap();
    let n = 600;
    let acked = send_all(&producer, "lossy", n, 40).await;
    assert!(broker.faults().acks_dropped() > 0, "the fault fired");

    // What each partition must hold: the records sent to it, in send order, at the offsets
    // their acknowledgements named (a deduplicated retry gets the original offset back).
    let mut expected: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for (i, meta) in acked.iter().enumerate() {
        expected
            .entry(meta.partition)
            .or_default()
            .push((meta.offset, format!("value-{i}")));
    }
    let got = values_by_partition(&client, "lossy", n).await;
    for (partition, sent) in &expected {
        let offsets: Vec<i64> = sent.iter().map(|(o, _)| *o).collect();
        let count = sent.len() as i64;
        assert_eq!(
            offsets,
            (0..count).collect::<Vec<_>>(),
            "partition {partition}"
        );
        let values: Vec<&String> = sent.iter().map(|(_, v)| v).collect();
        let stored: Vec<&String> = got[partition].iter().collect();
        assert_eq!(stored, values, "partition {partition}: once each, in order");
    }
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), n);
    let absorbed: u64 = broker
        .state()
        .topics
        .get("lossy")
        .unwrap()
        .partitions()
        .iter()
        .map(|p| p.duplicates_absorbed())
        .sum();
    assert!(
        absorbed > 0,
        "some retries reached the broker as duplicates"
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_lost_acks_duplicate_without_idempotence_and_not_with_it() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    let (records, lost) = (40, 5);
    for (topic, idempotence) in [("plain", false), ("deduped", true)] {
        create_topic(&client, topic, 1).await;
        let config = ProducerConfig {
            enable_idempotence: idempotence,
            lose_acks: Some(AckLoss::spread(lost, records, 3)),
            ..idempotent()
        };
        let producer = Producer::new(client.clone(), config).unwrap();
        // One record per request, so each lost acknowledgement is one record sent again.
        for i in 0..records {
            let value = format!("value-{i}");
            let record = ProducerRecord::new(topic).value(&value);
            producer.send_and_wait(record).await.expect("delivered");
        }
        assert_eq!(producer.acks_lost(), lost);
        let lost_offsets: Vec<i64> = producer.lost_acks().iter().map(|l| l.base_offset).collect();
        let values = values_by_partition(&client, topic, records as usize).await;
        let stored = &values[&0];
        let copies = stored.len() as u64;
        if idempotence {
            assert_eq!(copies, records, "{topic}: no duplicates");
            let expected: Vec<String> = (0..records).map(|i| format!("value-{i}")).collect();
            assert_eq!(stored, &expected);
        } else {
            assert_eq!(
                copies,
                records + lost,
                "{topic}: one duplicate per lost ack"
            );
            // Each lost acknowledgement named where the first copy went; the copy after it is
            // the retry.
            for offset in lost_offsets {
                let at = offset as usize;
                assert_eq!(stored[at], stored[at + 1], "duplicate at {offset}");
            }
        }
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_producer_gets_a_fresh_id_and_a_transactional_id_bumps_the_epoch() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    let id_of = |config: ProducerConfig| {
        let client = client.clone();
        async move {
            let producer = Producer::new(client, config).unwrap();
            producer.producer_id().await.unwrap().expect("idempotent")
        }
    };
    let a = id_of(idempotent()).await;
    let b = id_of(idempotent()).await;
    assert_ne!(a.producer_id, b.producer_id);
    assert_eq!((a.epoch, b.epoch), (0, 0));
    let with_txn = || ProducerConfig {
        transactional_id: Some("billing".into()),
        ..idempotent()
    };
    let first = id_of(with_txn()).await;
    let second = id_of(with_txn()).await;
    assert_eq!(first.producer_id, second.producer_id);
    assert_eq!(second.epoch, first.epoch + 1);
    let plain = Producer::new(client.clone(), ProducerConfig::default()).unwrap();
    assert_eq!(plain.producer_id().await.unwrap(), None);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_is_fenced_by_its_successor_and_stops_for_good() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "ledger", 1).await;
    let config = || ProducerConfig {
        transactional_id: Some("ledger-writer".into()),
        ..idempotent()
    };
    let record = |value: &'static str| ProducerRecord::new("ledger").key("acct-42").value(value);

    let zombie = Producer::new(client.clone(), config()).unwrap();
    zombie.send_and_wait(record("100 by A")).await.unwrap();
    let successor = Producer::new(client.clone(), config()).unwrap();
    let (a, b) = (
        zombie.producer_id().await.unwrap().unwrap(),
        successor.producer_id().await.unwrap().unwrap(),
    );
    assert_eq!((a.producer_id, a.epoch + 1), (b.producer_id, b.epoch));
    successor.send_and_wait(record("150 by B")).await.unwrap();

    let err = zombie.send_and_wait(record("70 by A")).await.unwrap_err();
    let cause = err
        .fatal_cause()
        .unwrap_or_else(|| panic!("not fatal: {err}"));
    assert_eq!(
        cause.server().map(|e| e.code),
        Some(ResponseError::InvalidProducerEpoch.code()),
        "{err}"
    );
    // Fatal means fatal: the zombie refuses to send anything more.
    let refused = zombie.send(record("60 by A")).await.err().expect("refused");
    assert!(matches!(refused, Error::ProducerFatal(_)), "{refused}");
    assert!(zombie.fatal_error().is_some());
    // The successor is unaffected, and the log holds no write of the zombie after the handover.
    successor.send_and_wait(record("160 by B")).await.unwrap();
    let values = values_by_partition(&client, "ledger", 3).await;
    assert_eq!(values[&0], ["100 by A", "150 by B", "160 by B"]);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_idempotence_a_lost_ack_with_no_retry_left_fails_only_its_record() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "once", 1).await;
    let config = ProducerConfig {
        lose_acks: Some(AckLoss::first(1)),
        retry: RetryPolicy::none(),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client.clone(), config).unwrap();
    let err = producer
        .send_and_wait(ProducerRecord::new("once").value("a"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AckLost { .. }), "{err}");
    // The broker has it although the producer reported a failure: the lesson of the lab.
    producer
        .send_and_wait(ProducerRecord::new("once").value("b"))
        .await
        .unwrap();
    let values = values_by_partition(&client, "once", 2).await;
    assert_eq!(values[&0], ["a", "b"]);
    broker.shutdown().await;
}

/// A broker without InitProducerId: our producer is not idempotent unless asked (unlike Kafka
/// 3.0+, whose default then quietly falls back to a plain producer, KIP-679), so the default
/// sends as before; one configured with idempotence fails every send with an error that names
/// the missing API, as Kafka's does when enable.idempotence was set explicitly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_init_producer_id_only_an_explicitly_idempotent_producer_fails() {
    let cluster = tests::WithoutApi::start(
        tests::BrokerConfig::default(),
        client::ApiKey::InitProducerId as i16,
    )
    .await;
    let client = connect(cluster.addr).await;
    create_topic(&client, "plain", 1).await;
    let default = Producer::new(client.clone(), ProducerConfig::default()).unwrap();
    let sent = default
        .send_and_wait(ProducerRecord::new("plain").value("a"))
        .await
        .unwrap();
    assert_eq!(sent.offset, 0);
    assert_eq!(default.producer_id().await.unwrap(), None);
    default.close().await;

    let idempotent = Producer::new(client.clone(), idempotent()).unwrap();
    let err = idempotent
        .send_and_wait(ProducerRecord::new("plain").value("b"))
        .await
        .unwrap_err();
    assert_eq!(err.unsupported_api(), Some("InitProducerId"), "{err}");
    assert!(!err.to_string().contains('\n'), "{err}");
    assert!(idempotent.fatal_error().is_some());
    idempotent.close().await;
    let values = values_by_partition(&client, "plain", 1).await;
    assert_eq!(values[&0], ["a"]);
}
