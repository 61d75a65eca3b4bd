//! The client library against the broker on port 0: exact offsets, Kafka's partitioner, every
//! compression codec, acks, admin calls, and a running producer noticing more partitions.

mod client_common;

use std::time::Duration;

use client::record::Header;
use client::{
    Acks, Admin, Compression, Error, NewTopic, OffsetSpec, Producer, ProducerConfig, ProducerRecord,
};
use client_common::*;
use protocol::partitioner::partition_for_key;

fn quick(config: ProducerConfig) -> ProducerConfig {
    ProducerConfig {
        linger: Duration::from_millis(1),
        ..config
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_come_back_with_exact_offsets() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "round-trip", 3).await;
    let producer = Producer::new(client.clone(), quick(ProducerConfig::default())).unwrap();
    let mut deliveries = Vec::new();
    for i in 0..30 {
        let value = format!("value-{i}");
        let record = ProducerRecord::new("round-trip")
            .partition(i % 3)
            .value(&value);
        deliveries.push((i, producer.send(record).await.unwrap()));
    }
    for (i, delivery) in deliveries {
        let sent = delivery.wait().await.unwrap();
        assert_eq!(
            (sent.partition, sent.offset),
            (i % 3, i as i64 / 3),
            "record {i}"
        );
    }

    let mut consumer = consumer_from_start(&client, "round-trip").await;
    let got = drain(&mut consumer, 30).await;
    for p in 0..3 {
        let records = &got[&p];
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, (0..10).collect::<Vec<i64>>(), "partition {p}");
        for (n, r) in records.iter().enumerate() {
            assert_eq!(text(&r.value), format!("value-{}", n as i32 * 3 + p));
            assert_eq!(r.key, None);
        }
        let tp = client::TopicPartition::new("round-trip", p);
        assert_eq!(consumer.position(&tp), Some(10));
        assert_eq!(consumer.high_watermark(&tp), Some(10));
    }
    assert!(consumer.at_end());
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_headers_and_null_values_survive() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "details", 1).await;
    let producer = Producer::new(client.clone(), quick(ProducerConfig::default())).unwrap();
    let headers = [
        Header {
            key: "trace",
            value: Some(b"abc"),
        },
        Header {
            key: "trace",
            value: None,
        },
    ];
    let sent = producer
        .send_and_wait(
            ProducerRecord::new("details")
                .key("k")
                .headers(&headers)
                .timestamp(1_234),
        )
        .await
        .unwrap();
    assert_eq!((sent.offset, sent.timestamp), (0, 1_234));
    let got = read_topic(&client, "details", 1).await;
    let r = &got[&0][0];
    assert_eq!((r.offset, r.timestamp, r.value.clone()), (0, 1_234, None));
    let hs: Vec<_> = r.headers().collect();
    assert_eq!(hs.len(), 2, "duplicate header keys are both kept");
    assert_eq!(hs[0].value.as_deref(), Some(&b"abc"[..]));
    assert_eq!(hs[1].value, None);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_land_where_javas_partitioner_puts_them() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "keyed", 7).await;
    let producer = Producer::new(client.clone(), quick(ProducerConfig::default())).unwrap();
    let keys: Vec<String> = (0..100).map(|i| format!("customer-{i}")).collect();
    let mut deliveries = Vec::new();
    for key in &keys {
        let record = ProducerRecord::new("keyed").key(key).value(key);
        deliveries.push(producer.send(record).await.unwrap());
    }
    for (key, delivery) in keys.iter().zip(deliveries) {
        let expected = partition_for_key(key.as_bytes(), 7);
        assert_eq!(delivery.partition(), expected, "{key}");
        assert_eq!(delivery.wait().await.unwrap().partition, expected);
    }
    let got = read_topic(&client, "keyed", 100).await;
    let mut count = 0;
    for (partition, records) in &got {
        for r in records {
            assert_eq!(partition_for_key(r.key.as_deref().unwrap(), 7), *partition);
            assert_eq!(r.key, r.value);
            count += 1;
        }
    }
    assert_eq!(count, 100);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_keys_stick_to_one_partition_per_batch() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "sticky", 6).await;
    let config = ProducerConfig {
        linger: Duration::from_secs(60),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client.clone(), config).unwrap();
    let mut partitions = Vec::new();
    for _ in 0..50 {
        let d = producer
            .send(ProducerRecord::new("sticky").value("v"))
            .await
            .unwrap();
        partitions.push(d.partition());
    }
    assert!(
        partitions.iter().all(|p| *p == partitions[0]),
        "{partitions:?}"
    );
    producer.flush().await;
    let next = producer
        .send(ProducerRecord::new("sticky").value("v"))
        .await
        .unwrap();
    assert_ne!(
        next.partition(),
        partitions[0],
        "a sent batch moves the sticky partition"
    );
    producer.flush().await;
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_producer_sees_new_partitions() {
    let broker = broker().await;
    let mut config = client_config(broker.addr());
    config.metadata_max_age = Duration::from_millis(100);
    let client = client::Client::connect(config).await.unwrap();
    create_topic(&client, "growing", 2).await;
    // A key that moves to a partition that exists only after the topic grows to 4.
    let key = (0..)
        .map(|i| format!("key-{i}"))
        .find(|k| partition_for_key(k.as_bytes(), 4) >= 2)
        .unwrap();
    let producer = Producer::new(client.clone(), quick(ProducerConfig::default())).unwrap();
    let send = || producer.send_and_wait(ProducerRecord::new("growing").key(&key).value("v"));
    let before = send().await.unwrap();
    assert_eq!(before.partition, partition_for_key(key.as_bytes(), 2));

    // Another client grows the topic: this producer learns of it only by refreshing metadata.
    let other = connect(broker.addr()).await;
    Admin::new(other)
        .create_partitions("growing", 4)
        .await
        .unwrap();
    let target = partition_for_key(key.as_bytes(), 4);
    let moved = async {
        loop {
            if send().await.unwrap().partition == target {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), moved)
        .await
        .expect("the producer picks up the new partition count within metadata_max_age");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_round_trips_and_is_stored_as_sent() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    for codec in Compression::ALL {
        let topic = format!("codec-{codec}");
        create_topic(&client, &topic, 1).await;
        let config = quick(ProducerConfig {
            compression: codec,
            ..ProducerConfig::default()
        });
        let producer = Producer::new(client.clone(), config).unwrap();
        let values: Vec<String> = (0..200)
            .map(|i| format!("{codec} record {i:05} ").repeat(4))
            .collect();
        let mut deliveries = Vec::new();
        for v in &values {
            deliveries.push(
                producer
                    .send(ProducerRecord::new(&topic).value(v))
                    .await
                    .unwrap(),
            );
        }
        for (i, d) in deliveries.into_iter().enumerate() {
            assert_eq!(d.wait().await.unwrap().offset, i as i64, "{codec}");
        }
        let mut consumer = consumer_from_start(&client, &topic).await;
        let mut seen = Vec::new();
        while seen.len() < values.len() {
            for part in consumer.poll().await.unwrap() {
                for batch in &part.batches {
                    assert_eq!(batch.compression(), Some(codec), "stored as sent");
                }
                for r in part.records() {
                    seen.push(text(&r.unwrap().value).to_string());
                }
            }
        }
        assert_eq!(seen, values, "{codec}");
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_and_one_deliver_too() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    create_topic(&client, "acks", 1).await;
    for (acks, expected_offset) in [(Acks::None, -1), (Acks::Leader, 1)] {
        let config = quick(ProducerConfig {
            acks,
            ..ProducerConfig::default()
        });
        let producer = Producer::new(client.clone(), config).unwrap();
        let sent = producer
            .send_and_wait(ProducerRecord::new("acks").value(&acks.to_string()))
            .await
            .unwrap();
        assert_eq!(sent.offset, expected_offset, "acks={acks}");
    }
    let got = read_topic(&client, "acks", 2).await;
    let values: Vec<&str> = got[&0].iter().map(|r| text(&r.value)).collect();
    assert_eq!(values, vec!["0", "1"]);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_creates_describes_grows_lists_offsets_and_deletes() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    let admin = Admin::new(client.clone());
    admin
        .create_topic(&NewTopic::new("admin", 2))
        .await
        .unwrap();
    let again = admin
        .create_topic(&NewTopic::new("admin", 2))
        .await
        .unwrap_err();
    assert_eq!(again.server().map(|e| e.code), Some(36), "{again}");
    let bad = admin.create_topic(&NewTopic::new("no/slash", 1)).await;
    assert!(matches!(bad, Err(Error::InvalidArgument(_))));

    let producer = Producer::new(client.clone(), quick(ProducerConfig::default())).unwrap();
    for (i, ts) in [1_000, 2_000, 3_000].into_iter().enumerate() {
        let v = i.to_string();
        producer
            .send_and_wait(
                ProducerRecord::new("admin")
                    .partition(0)
                    .value(&v)
                    .timestamp(ts),
            )
            .await
            .unwrap();
    }
    let offsets = |spec| admin.list_offsets("admin", spec);
    let latest: Vec<i64> = offsets(OffsetSpec::Latest)
        .await
        .unwrap()
        .iter()
        .map(|o| o.offset)
        .collect();
    assert_eq!(latest, vec![3, 0]);
    let earliest = offsets(OffsetSpec::Earliest).await.unwrap();
    assert!(earliest.iter().all(|o| o.offset == 0));
    let at = offsets(OffsetSpec::Timestamp(1_500)).await.unwrap();
    assert_eq!((at[0].offset, at[0].timestamp), (1, 2_000));
    assert_eq!(at[1].offset, -1, "an empty partition has no such record");
    assert_eq!(
        offsets(OffsetSpec::Timestamp(9_000)).await.unwrap()[0].offset,
        -1
    );

    admin.create_partitions("admin", 5).await.unwrap();
    assert_eq!(
        admin
            .describe_topic("admin")
            .await
            .unwrap()
            .partition_count(),
        5
    );
    let shrink = admin.create_partitions("admin", 3).await.unwrap_err();
    assert_eq!(shrink.server().map(|e| e.code), Some(37), "{shrink}");
    assert!(admin
        .list_topics()
        .await
        .unwrap()
        .contains(&"admin".to_string()));

    admin.delete_topic("admin").await.unwrap();
    assert!(matches!(
        admin.describe_topic("admin").await,
        Err(Error::UnknownTopic { .. })
    ));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_bytes_drops_the_oldest_batches_and_readers_start_after_them() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    let admin = Admin::new(client.clone());
    let mut topic = NewTopic::new("retained", 1);
    topic.configs = vec![("retention.bytes".into(), "3000".into())];
    admin.create_topic(&topic).await.unwrap();
    let producer = Producer::new(client.clone(), quick(ProducerConfig::default())).unwrap();
    let value = [b'r'; 1000];
    for _ in 0..10 {
        // One record per batch: each batch is about 1,070 bytes.
        let record = ProducerRecord::new("retained").value(&value[..]);
        producer.send_and_wait(record).await.unwrap();
    }
    // Kafka drops a segment when the log holds retention.bytes without it: three batches stay.
    let earliest = admin.list_offsets("retained", OffsetSpec::Earliest).await;
    let latest = admin.list_offsets("retained", OffsetSpec::Latest).await;
    assert_eq!(earliest.unwrap()[0].offset, 7);
    assert_eq!(latest.unwrap()[0].offset, 10);
    let got = read_topic(&client, "retained", 3).await;
    let offsets: Vec<i64> = got[&0].iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [7, 8, 9]);

    let mut bad = NewTopic::new("badly-retained", 1);
    bad.configs = vec![("retention.bytes".into(), "a lot".into())];
    let err = admin.create_topic(&bad).await.unwrap_err();
    assert_eq!(
        err.server().map(|e| e.code),
        Some(40),
        "INVALID_CONFIG: {err}"
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producing_to_a_missing_topic_without_auto_create_fails_clearly() {
    let broker = broker::Broker::start(broker::BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..broker::BrokerConfig::default()
    })
    .await
    .unwrap();
    let client = connect(broker.addr()).await;
    let producer = Producer::new(client.clone(), ProducerConfig::default()).unwrap();
    let err = producer
        .send(ProducerRecord::new("missing").value("v"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, Error::UnknownTopic { ref topic } if topic == "missing"),
        "{err}"
    );
    create_topic(&client, "present", 2).await;
    let err = producer
        .send(ProducerRecord::new("present").partition(2).value("v"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, Error::UnknownPartition { count: 2, .. }),
        "{err}"
    );
    broker.shutdown().await;
}

/// Kafka's producer asks the broker to create a missing topic (`allow.auto.create.topics`, on
/// by default): so does ours. Turned off, neither a first send nor one after the topic was
/// deleted brings the topic back, on a broker that would create it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_creates_missing_topics_only_when_allowed_to() {
    let broker = broker().await;
    let client = connect(broker.addr()).await;
    let admin = Admin::new(client.clone());
    let default = Producer::new(client.clone(), quick(ProducerConfig::default())).unwrap();
    let sent = default
        .send_and_wait(ProducerRecord::new("auto").key("k").value("v"))
        .await
        .unwrap();
    assert_eq!(sent.offset, 0);
    assert_eq!(admin.list_topics().await.unwrap(), ["auto"]);
    default.close().await;

    let config = ProducerConfig {
        allow_auto_create_topics: false,
        ..quick(ProducerConfig::default())
    };
    let careful = Producer::new(client.clone(), config).unwrap();
    let err = careful
        .send(ProducerRecord::new("never").value("v"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, Error::UnknownTopic { ref topic } if topic == "never"),
        "{err}"
    );
    // A topic deleted under a running producer stays deleted.
    create_topic(&client, "doomed", 1).await;
    careful
        .send_and_wait(ProducerRecord::new("doomed").value("first"))
        .await
        .unwrap();
    admin.delete_topics(&["doomed"]).await.unwrap();
    let err = careful
        .send_and_wait(ProducerRecord::new("doomed").value("late"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::UnknownTopic { ref topic } if topic == "doomed"),
        "{err}"
    );
    assert_eq!(admin.list_topics().await.unwrap(), ["auto"]);
    careful.close().await;
    broker.shutdown().await;
}

/// A broker without IncrementalAlterConfigs (it closes the connection of a client that sends
/// one): the configs are replaced with AlterConfigs, those set on the topic kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_configs_change_through_alter_configs_where_incremental_is_missing() {
    use client::admin::{ConfigChange, ConfigSource};
    let cluster = tests::WithoutApi::start(
        tests::BrokerConfig::default(),
        kafka_protocol::messages::ApiKey::IncrementalAlterConfigs as i16,
    )
    .await;
    let admin = Admin::new(connect(cluster.addr).await);
    let mut topic = NewTopic::new("orders", 1);
    topic.configs = vec![
        ("cleanup.policy".into(), "compact".into()),
        ("retention.ms".into(), "1000".into()),
    ];
    admin.create_topic(&topic).await.unwrap();
    let set = |name: &str, value: &str| ConfigChange::Set {
        name: name.into(),
        value: value.into(),
    };
    let changes = [
        set("max.message.bytes", "2048"),
        ConfigChange::Delete {
            name: "retention.ms".into(),
        },
    ];
    admin.alter_topic_configs("orders", &changes).await.unwrap();
    let on_topic = |entries: Vec<client::admin::ConfigEntry>| -> Vec<(String, String)> {
        entries
            .into_iter()
            .filter(|e| e.source == ConfigSource::DynamicTopicConfig)
            .map(|e| (e.name, e.value.unwrap()))
            .collect()
    };
    let expected = [
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("max.message.bytes".to_string(), "2048".to_string()),
    ];
    let configs = admin.describe_topic_configs("orders").await.unwrap();
    assert_eq!(on_topic(configs), expected);
    let err = admin
        .alter_topic_configs("orders", &[set("retention.ms", "soon")])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("INVALID_CONFIG (40) on topic orders"),
        "{err}"
    );
    let configs = admin.describe_topic_configs("orders").await.unwrap();
    assert_eq!(on_topic(configs), expected, "a refusal changes nothing");
}
