//! A broker restarted on the same port while a producer and a consumer are running: both
//! reconnect on next use, records sent while no broker listened are retried, and every
//! acknowledged record is read back with the offset it was acknowledged at.
//!
//! The broker keeps records in memory, so a restart starts from an empty log: "nothing
//! acknowledged is lost" is checked per broker life, against the broker that acknowledged.

mod client_common;

use std::collections::BTreeMap;
use std::time::Duration;

use client::{Producer, ProducerConfig, ProducerRecord, RecordMetadata, SeekTo};
use client_common::*;

/// Sends `value-i` keyed `key-i` for each i, all in flight together; the acknowledgements.
async fn send_numbered(
    producer: Producer,
    numbers: std::ops::Range<usize>,
) -> Vec<(String, RecordMetadata)> {
    let mut deliveries = Vec::new();
    for i in numbers {
        let (key, value) = (format!("key-{i}"), format!("value-{i}"));
        let record = ProducerRecord::new("restart").key(&key).value(&value);
        let delivery = producer.send(record).await.expect("accepted");
        deliveries.push((value, delivery));
    }
    let mut acked = Vec::new();
    for (value, delivery) in deliveries {
        acked.push((value, delivery.wait().await.expect("acknowledged")));
    }
    acked
}

/// Every acknowledged record is where its acknowledgement said.
fn assert_all_present(
    acked: &[(String, RecordMetadata)],
    got: &BTreeMap<i32, Vec<client::Record>>,
) {
    for (value, sent) in acked {
        let stored = got
            .get(&sent.partition)
            .and_then(|records| records.iter().find(|r| r.offset == sent.offset))
            .unwrap_or_else(|| panic!("{value} acknowledged at {sent:?} is missing"));
        assert_eq!(text(&stored.value), value);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_broker_is_reconnected_and_nothing_acknowledged_is_lost() {
    let first = broker().await;
    let addr = first.addr();
    let client = connect(addr).await;
    create_topic(&client, "restart", 3).await;
    let config = ProducerConfig {
        linger: Duration::from_millis(1),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client.clone(), config).unwrap();
    let mut consumer = consumer_from_start(&client, "restart").await;

    let before = send_numbered(producer.clone(), 0..30).await;
    assert_all_present(&before, &drain(&mut consumer, 30).await);

    first.shutdown().await;
    // Records sent while nothing listens wait in the producer, retried with backoff.
    let sending = tokio::spawn(send_numbered(producer.clone(), 30..60));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = start_broker(addr).await;
    let after = sending.await.unwrap();
    assert_eq!(after.len(), 30);

    // The same consumer, on the same client, reconnects. The new log starts empty, so its old
    // positions mean nothing there: read the new broker's log from its beginning.
    consumer.seek_all(SeekTo::Beginning).unwrap();
    let got = drain(&mut consumer, 30).await;
    assert_all_present(&after, &got);
    assert_eq!(
        got.values().map(Vec::len).sum::<usize>(),
        30,
        "no duplicates either"
    );

    // And the producer keeps working normally on the new connection.
    let more = send_numbered(producer, 60..63).await;
    assert_all_present(&more, &drain(&mut consumer, 3).await);
    second.shutdown().await;
}
