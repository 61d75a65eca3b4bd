//! Our client's transactional producer and read_committed consumer against the broker: what a
//! committed transaction wrote is read, an aborted one's is not, offsets sent to a transaction
//! are committed with it, and a zombie cannot commit once its successor has started.

mod client_common;

use std::time::Duration;

use client::{Client, Consumer, ConsumerConfig, Error, OffsetReset, Producer, ProducerConfig};
use client::{ProducerRecord, SeekTo, TopicPartition};
use client_common::*;
use kafka_protocol::ResponseError;

fn transactional(id: &str) -> ProducerConfig {
    ProducerConfig {
        enable_idempotence: true,
        transactional_id: Some(id.into()),
        linger: Duration::from_millis(1),
        ..ProducerConfig::default()
    }
}

/// `(offset, value)` of every record of partition 0 a consumer at that isolation level reads.
async fn read(client: &Client, topic: &str, read_committed: bool) -> Vec<(i64, String)> {
    let mut consumer = Consumer::new(
        client.clone(),
        ConsumerConfig {
            max_wait: Duration::from_millis(100),
            auto_offset_reset: OffsetReset::Earliest,
            read_committed,
            ..ConsumerConfig::default()
        },
    );
    consumer.assign([TopicPartition::new(topic, 0)]);
    consumer.seek_all(SeekTo::Beginning).unwrap();
    let records = drain(&mut consumer, 0).await;
    records
        .get(&0)
        .into_iter()
        .flatten()
        .map(|r| {
            let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
            (r.offset, value.into_owned())
        })
        .collect()
}

async fn send(producer: &Producer, topic: &str, values: &[&str]) {
    for value in values {
        let record = ProducerRecord::new(topic).partition(0).value(value);
        producer.send(record).await.expect("accepted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_sees_committed_transactions_only() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "payments", 1).await;
    let producer = Producer::new(client.clone(), transactional("payer")).unwrap();

    producer.begin_transaction().await.unwrap();
    send(&producer, "payments", &["a", "b", "c"]).await;
    let offsets = [("input".to_string(), 0, 3)];
    create_topic(&client, "input", 1).await;
    producer
        .send_offsets_to_transaction("copier", &offsets)
        .await
        .unwrap();
    // Not before the commit.
    assert_eq!(broker.state().groups.committed_offsets("copier"), None);
    producer.commit_transaction().await.unwrap();
    assert_eq!(
        broker.state().groups.committed_offsets("copier"),
        Some(vec![("input".to_string(), 0, 3)])
    );

    producer.begin_transaction().await.unwrap();
    send(&producer, "payments", &["x", "y"]).await;
    producer.abort_transaction().await.unwrap();
    producer.begin_transaction().await.unwrap();
    send(&producer, "payments", &["d"]).await;
    producer.commit_transaction().await.unwrap();

    // 0-2 committed, 3 its marker, 4-5 aborted, 6 the abort marker, 7 committed, 8 its marker.
    let committed = read(&client, "payments", true).await;
    let expected: Vec<(i64, String)> = [(0, "a"), (1, "b"), (2, "c"), (7, "d")]
        .iter()
        .map(|(o, v)| (*o, v.to_string()))
        .collect();
    assert_eq!(committed, expected);
    let everything = read(&client, "payments", false).await;
    let offsets: Vec<i64> = everything.iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![0, 1, 2, 4, 5, 7]);
    // Calls out of order are refused.
    assert!(matches!(
        producer.commit_transaction().await,
        Err(Error::TransactionState(_))
    ));
    let plain = Producer::new(client.clone(), ProducerConfig::default()).unwrap();
    assert!(matches!(
        plain.begin_transaction().await,
        Err(Error::NotTransactional)
    ));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_cannot_commit_after_its_successor_started() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "ledger", 1).await;
    let zombie = Producer::new(client.clone(), transactional("ledger-writer")).unwrap();
    zombie.begin_transaction().await.unwrap();
    send(&zombie, "ledger", &["by the zombie"]).await;
    zombie.flush().await;
    // The successor's InitProducerId aborts the zombie's open transaction and fences it.
    let successor = Producer::new(client.clone(), transactional("ledger-writer")).unwrap();
    successor.begin_transaction().await.unwrap();
    send(&successor, "ledger", &["by the successor"]).await;
    successor.commit_transaction().await.unwrap();
    let err = zombie.commit_transaction().await.unwrap_err();
    let server = err.server().map(|e| e.code);
    assert_eq!(server, Some(ResponseError::ProducerFenced.code()), "{err}");
    // 0 the zombie's record, 1 the abort marker, 2 the successor's, 3 its commit marker.
    assert_eq!(
        read(&client, "ledger", true).await,
        vec![(2, "by the successor".to_string())]
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_as_a_removed_member_are_refused() {
    use client::group::Generation;
    use client::{GroupConfig, GroupConsumer};
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "input", 1).await;
    let mut member = GroupConsumer::new(client.clone(), GroupConfig::new("copiers")).unwrap();
    member.subscribe(["input".to_string()]).unwrap();
    // Joins the group (nothing to read yet).
    member.poll().await.unwrap();
    let generation = member.generation();
    assert!(generation.is_valid());
    let producer = Producer::new(client.clone(), transactional("copier-1")).unwrap();
    let offsets = [("input".to_string(), 0, 7)];
    producer.begin_transaction().await.unwrap();
    let stale = Generation {
        id: generation.id + 1,
        ..generation.clone()
    };
    let err = producer
        .send_offsets_as_member("copiers", &stale, None, &offsets)
        .await
        .unwrap_err();
    assert_eq!(
        err.server().map(|e| e.code),
        Some(ResponseError::IllegalGeneration.code())
    );
    let stranger = Generation {
        member_id: "someone-else".into(),
        ..generation.clone()
    };
    let err = producer
        .send_offsets_as_member("copiers", &stranger, None, &offsets)
        .await
        .unwrap_err();
    assert_eq!(
        err.server().map(|e| e.code),
        Some(ResponseError::UnknownMemberId.code())
    );
    producer
        .send_offsets_as_member("copiers", &generation, None, &offsets)
        .await
        .unwrap();
    producer.commit_transaction().await.unwrap();
    assert_eq!(
        broker.state().groups.committed_offsets("copiers"),
        Some(vec![("input".to_string(), 0, 7)])
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_ends_at_the_last_stable_offset_while_a_transaction_is_open() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "orders", 1).await;
    let plain = Producer::new(client.clone(), ProducerConfig::default()).unwrap();
    send(&plain, "orders", &["before"]).await;
    plain.flush().await;
    let producer = Producer::new(client.clone(), transactional("open")).unwrap();
    producer.begin_transaction().await.unwrap();
    send(&producer, "orders", &["pending"]).await;
    producer.flush().await;
    send(&plain, "orders", &["after"]).await;
    plain.flush().await;
    // Offset 1 is the open transaction's: read_committed reads up to it and is at its end
    // there; read_uncommitted reads all three.
    assert_eq!(
        read(&client, "orders", true).await,
        vec![(0, "before".to_string())]
    );
    assert_eq!(read(&client, "orders", false).await.len(), 3);
    producer.commit_transaction().await.unwrap();
    let committed = read(&client, "orders", true).await;
    let offsets: Vec<i64> = committed.iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![0, 1, 2]);
    broker.shutdown().await;
}
