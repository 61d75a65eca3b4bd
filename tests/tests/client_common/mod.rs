//! Shared by the `client_*` integration tests: an in-process broker on port 0 (or on a given
//! address, to restart one in place), a client that rides out a restart quickly, and a reader
//! that drains a topic.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use broker::{Broker, BrokerConfig};
use client::{
    Admin, Client, ClientConfig, Consumer, ConsumerConfig, NewTopic, OffsetReset, Record,
    RetryPolicy, SeekTo, TopicPartition,
};

/// A broker on `listen` that auto-creates topics with 3 partitions, as a restarted broker must
/// to take producers back without an admin step.
pub async fn start_broker(listen: SocketAddr) -> Broker {
    Broker::start(BrokerConfig {
        listen,
        auto_create_topics: true,
        default_partitions: 3,
        ..BrokerConfig::default()
    })
    .await
    .expect("the broker starts")
}

pub async fn broker() -> Broker {
    start_broker("127.0.0.1:0".parse().unwrap()).await
}

/// Retries every 20 ms up to 200 ms apart, 50 times: about 9 s, so a restart is ridden out
/// without slowing the tests down.
pub fn client_config(addr: SocketAddr) -> ClientConfig {
    let mut config = ClientConfig::new(&addr.to_string());
    config.retry = RetryPolicy {
        retries: 50,
        backoff: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
    };
    config.request_timeout = Duration::from_secs(10);
    config
}

pub async fn connect(addr: SocketAddr) -> Client {
    Client::connect(client_config(addr))
        .await
        .expect("the client connects")
}

pub async fn create_topic(client: &Client, name: &str, partitions: i32) {
    Admin::new(client.clone())
        .create_topic(&NewTopic::new(name, partitions))
        .await
        .expect("the topic is created");
}

/// A consumer of every partition of `topic`, from the beginning.
pub async fn consumer_from_start(client: &Client, topic: &str) -> Consumer {
    let info = client.topic(topic, false).await.expect("the topic exists");
    let mut consumer = Consumer::new(
        client.clone(),
        ConsumerConfig {
            max_wait: Duration::from_millis(100),
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    );
    consumer.assign(
        info.partitions
            .iter()
            .map(|p| TopicPartition::new(topic, p.partition)),
    );
    consumer.seek_all(SeekTo::Beginning).unwrap();
    consumer
}

/// Polls until every partition is read to its end and at least `at_least` records came, or
/// fails after 10 s. Records by partition, in offset order.
pub async fn drain(consumer: &mut Consumer, at_least: usize) -> BTreeMap<i32, Vec<Record>> {
    let mut got: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    let read = async {
        loop {
            for part in consumer.poll().await.expect("poll") {
                for record in part.records() {
                    got.entry(part.partition)
                        .or_default()
                        .push(record.expect("a valid record"));
                }
            }
            let count: usize = got.values().map(Vec::len).sum();
            if count >= at_least && consumer.at_end() {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the records arrive within 10 s");
    got
}

/// Every record of `topic`, read with a fresh consumer.
pub async fn read_topic(
    client: &Client,
    topic: &str,
    at_least: usize,
) -> BTreeMap<i32, Vec<Record>> {
    let mut consumer = consumer_from_start(client, topic).await;
    drain(&mut consumer, at_least).await
}

pub fn text(bytes: &Option<bytes::Bytes>) -> &str {
    std::str::from_utf8(bytes.as_deref().expect("not null")).expect("UTF-8")
}
