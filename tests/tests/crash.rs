//! The broker binary with `--data-dir`, killed with SIGKILL: at seeded random moments while
//! idempotent producers write with acks=all and topics are being created (in each flush
//! policy: Kafka's default, and synced before each answer), and under a lowered open-files
//! limit.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::{
    Admin, Client, DeliveryFuture, NewTopic, Producer, ProducerConfig, ProducerRecord, RetryPolicy,
};
use kafka_protocol::messages::*;
use rand::{Rng, SeedableRng};
use tests::*;

mod client_common;
use client_common::client_config;

fn data_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("workshop-crash-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("broker.log"));
    dir
}

fn idempotent() -> ProducerConfig {
    ProducerConfig {
        enable_idempotence: true,
        linger: Duration::from_millis(2),
        retry: RetryPolicy {
            retries: 100,
            backoff: Duration::from_millis(10),
            backoff_max: Duration::from_millis(100),
        },
        ..ProducerConfig::default()
    }
}

async fn cluster_id(addr: SocketAddr) -> String {
    let mut raw = RawClient::connect(addr).await;
    let metadata = raw
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    metadata.cluster_id.expect("a cluster id").to_string()
}

type Sent = Arc<Mutex<Vec<(String, DeliveryFuture)>>>;

/// Sends `prefix-0`, `prefix-1`, ... keyed by their number until aborted; the deliveries go
/// to `sent`, to be awaited once the last broker runs.
fn keep_sending(producer: Producer, prefix: String, sent: Sent) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for i in 0.. {
            let value = format!("{prefix}-{i}");
            let key = i.to_string();
            let record = ProducerRecord::new("crash").key(&key).value(&value);
            match producer.send(record).await {
                Ok(delivery) => sent.lock().unwrap().push((value, delivery)),
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
            // About 4,000 records a second each: enough batches in flight at every kill, few
            // enough to check them all in a moment.
            if i % 4 == 3 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_cycles_with_kafkas_flush_policy_lose_no_acknowledged_record() {
    // Answers do not wait for the disk: what they acknowledge is in the page cache, which a
    // process crash does not touch.
    kill_9_cycles("cycles-os", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_cycles_synced_before_each_answer_lose_no_acknowledged_record() {
    kill_9_cycles("cycles-synced", &["--log-flush-interval-messages", "1"]).await;
}

/// Kills the broker (started with `flush_args`) at seeded random moments while two idempotent
/// producers write with acks=all and topics are being created; then checks that every
/// acknowledged record is where its answer said, none twice, and each topic whole or absent.
async fn kill_9_cycles(test: &str, flush_args: &[&str]) {
    const CYCLES: usize = 12;
    const SEED: u64 = 14;
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let dir = data_dir(test);
    let mut args = BrokerArgs::new(&dir);
    args.extra = flush_args.iter().map(|a| a.to_string()).collect();
    let mut broker = BrokerProcess::start(&args);
    // Every restart listens where the first start did, so the long-lived producer reconnects.
    args.listen = broker.addr;
    let addr = broker.addr;
    let admin = Admin::new(Client::connect(client_config(addr)).await.unwrap());
    admin
        .create_topic(&NewTopic::new("crash", 3))
        .await
        .expect("the topic is created");
    let cluster = cluster_id(addr).await;

    let sent: Sent = Arc::default();
    let long_lived = Producer::new(
        Client::connect(client_config(addr)).await.unwrap(),
        idempotent(),
    )
    .unwrap();
    let long_id = long_lived.producer_id().await.unwrap().unwrap().producer_id;
    let mut fresh_ids = Vec::new();
    let created: Arc<Mutex<Vec<String>>> = Arc::default();
    for cycle in 0..CYCLES {
        if cycle > 0 {
            broker = BrokerProcess::start(&args);
            assert_eq!(
                cluster_id(addr).await,
                cluster,
                "cluster id of cycle {cycle}"
            );
        }
        let long = keep_sending(long_lived.clone(), format!("long-{cycle}"), sent.clone());
        let fresh = Producer::new(
            Client::connect(client_config(addr)).await.unwrap(),
            idempotent(),
        )
        .unwrap();
        fresh_ids.push(fresh.producer_id().await.unwrap().unwrap().producer_id);
        let short = keep_sending(fresh, format!("fresh-{cycle}"), sent.clone());
        // CreateTopics one after another until the kill lands in the middle of one: after the
        // restart each topic exists whole or not at all.
        let creating = {
            let (admin, created) = (admin.clone(), created.clone());
            tokio::spawn(async move {
                for n in 0.. {
                    let topic = format!("made-{cycle}-{n}");
                    created.lock().unwrap().push(topic.clone());
                    let _ = admin.create_topic(&NewTopic::new(&topic, 40)).await;
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..120))).await;
        broker.kill();
        long.abort();
        short.abort();
        creating.abort();
    }
    let broker = BrokerProcess::start(&args);
    assert_eq!(cluster_id(addr).await, cluster);

    // Every producer id was handed out once: the long-lived one kept its own throughout.
    assert_eq!(
        long_lived.producer_id().await.unwrap().unwrap().producer_id,
        long_id
    );
    let ids: BTreeSet<i64> = fresh_ids.iter().copied().chain([long_id]).collect();
    assert_eq!(
        ids.len(),
        CYCLES + 1,
        "producer ids reused: {fresh_ids:?}, {long_id}"
    );

    // The long-lived producer's retries land on the last broker; the fresh ones' may fail.
    let deliveries: Vec<(String, DeliveryFuture)> = std::mem::take(&mut *sent.lock().unwrap());
    let mut acked = Vec::new();
    for (value, delivery) in deliveries {
        if let Ok(Ok(meta)) = tokio::time::timeout(Duration::from_secs(15), delivery.wait()).await {
            acked.push((value, meta));
        }
    }
    assert!(
        acked.len() > 100,
        "only {} records acknowledged",
        acked.len()
    );

    let mut raw = RawClient::connect(addr).await;
    let mut stored: BTreeMap<(i32, i64), String> = BTreeMap::new();
    let mut values = BTreeMap::new();
    for partition in 0..3 {
        let mut offset = 0;
        loop {
            let response = raw
                .call(&fetch_request("crash", partition, offset, 0), 12)
                .await;
            let p = &response.responses[0].partitions[0];
            assert_eq!(p.error_code, 0);
            let records = decode_records(p.records.as_ref().unwrap());
            let Some(last) = records.last() else { break };
            offset = last.0 + 1;
            for (offset, _, value) in records {
                *values.entry(value.clone()).or_insert(0) += 1;
                stored.insert((partition, offset), value);
            }
        }
    }
    for (value, meta) in &acked {
        assert_eq!(
            stored.get(&(meta.partition, meta.offset)),
            Some(value),
            "{value} acknowledged at {}-{}",
            meta.partition,
            meta.offset
        );
    }
    let duplicated: Vec<_> = values.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicated.is_empty(), "duplicates: {duplicated:?}");

    // Each topic whose creation raced a kill is there whole, or absent and creatable.
    let mut raw_admin = RawClient::connect(addr).await;
    let created = created.lock().unwrap().clone();
    assert!(created.len() > CYCLES, "{created:?}");
    for topic in &created {
        match broker_topic_partitions(&mut raw_admin, topic).await {
            Some(partitions) => assert_eq!(partitions, 40, "{topic}"),
            None => assert_eq!(create_topic(&mut raw_admin, topic, 40).await, 0, "{topic}"),
        }
    }
    drop(broker);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(dir.with_extension("broker.log")).unwrap();
}

/// The topic's partition count in Metadata, `None` when the broker does not know it.
async fn broker_topic_partitions(client: &mut RawClient, topic: &str) -> Option<usize> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                .with_name(Some(topic_name(topic))),
        ]))
        .with_allow_auto_topic_creation(false);
    let response = client.call(&request, 9).await;
    let t = &response.topics[0];
    (t.error_code == 0).then_some(t.partitions.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_partitions_under_an_open_files_limit_of_200() {
    let dir = data_dir("open-files");
    let mut args = BrokerArgs::new(&dir);
    args.open_files = Some(200);
    let mut broker = BrokerProcess::start(&args);
    let mut client = RawClient::connect(broker.addr).await;
    assert_eq!(create_topic(&mut client, "wide", 1000).await, 0);
    for partition in 0..1000 {
        let p = produce(&mut client, "wide", partition, values(1), 9).await;
        assert_eq!(
            (p.error_code, p.base_offset),
            (0, 0),
            "partition {partition}"
        );
    }
    broker.kill();
    // Starts again under the same limit, with every partition's record.
    let broker = BrokerProcess::start(&args);
    let mut client = RawClient::connect(broker.addr).await;
    for partition in [0, 499, 999] {
        let response = client
            .call(&fetch_request("wide", partition, 0, 0), 12)
            .await;
        let p = &response.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(decode_records(p.records.as_ref().unwrap()).len(), 1);
    }
    let p = produce(&mut client, "wide", 7, values(1), 9).await;
    assert_eq!((p.error_code, p.base_offset), (0, 1));
    drop(broker);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(dir.with_extension("broker.log")).unwrap();
}
