//! The Kafka side, through our client against the cluster: a producer that goes straight to each
//! leader, a leader moved with AlterPartitionReassignments, a producer whose map that move made
//! stale (it re-reads metadata on NOT_LEADER_OR_FOLLOWER, as Java's does), and a client that
//! never re-reads its map and keeps sending to the old leader, one raw Produce request a record.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use client::admin::Reassignment;
use client::record::{BatchBuilder, ProducerIdentity};
use client::{Client, ClientConfig, Compression, Producer, ProducerConfig, ProducerRecord};
use client::{ServerError, TopicInfo};
use protocol::kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use protocol::kafka_protocol::messages::{ProduceRequest, TopicName};
use protocol::kafka_protocol::protocol::StrBytes;
use protocol::kafka_protocol::ResponseError;
use protocol::partitioner::partition_for_key;

use crate::lab::target::{self, broker_error, Cluster};
use crate::lab::LabError;

/// The source's producer: `[Producer clientId=orders-api]`.
pub const CLIENT_ID: &str = "orders-api";

/// Kafka's `metadata.max.age.ms` (5 minutes): a client re-reads its map that often, or when an
/// answer says it is stale. Our client's own default is shorter; the lab's clients use Kafka's,
/// so a map goes stale the way it does in production.
const METADATA_MAX_AGE: Duration = Duration::from_secs(300);

/// A client with a map of its own (its own metadata cache and connections).
pub async fn own_client(cluster: &Cluster) -> Result<Client, LabError> {
    let mut config = ClientConfig::new(cluster.addr());
    config.client_id = CLIENT_ID.to_string();
    config.metadata_max_age = METADATA_MAX_AGE;
    Client::connect(config)
        .await
        .map_err(|e| broker_error("connecting a client of its own", &e))
}

/// The idempotent producer every phase uses, Kafka's defaults otherwise.
pub fn producer(client: &Client) -> Result<Producer, LabError> {
    let config = ProducerConfig {
        enable_idempotence: true,
        ..target::producer_config()
    };
    Producer::new(client.clone(), config).map_err(|e| broker_error("starting a producer", &e))
}

/// The topic's leaders as `client` last learned them, by partition.
pub async fn leaders(client: &Client, topic: &str) -> Result<Vec<i32>, LabError> {
    let info: std::sync::Arc<TopicInfo> = client
        .topic(topic, false)
        .await
        .map_err(|e| broker_error(&format!("reading {topic}'s metadata"), &e))?;
    Ok(info.partitions.iter().map(|p| p.leader).collect())
}

/// What a producer's sends came to.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    pub records: u64,
    /// Records per partition.
    pub by_partition: BTreeMap<i32, u64>,
    /// Records per leader node, by the producer's map when it sent them.
    pub by_node: BTreeMap<i32, u64>,
    /// The answers that said its map was stale, with their partitions.
    pub invalid_metadata: Vec<ServerError>,
    /// Metadata requests it made while sending.
    pub metadata_requests: u64,
}

/// Sends `keys` (values `<tag>-<i>`), each waited for before the next when `one_by_one` (each
/// then its own request, so the first record for a moved partition is the one that meets its
/// old leader), else all at once.
pub async fn send(
    producer: &Producer,
    client: &Client,
    topic: &str,
    keys: &[String],
    tag: &str,
    one_by_one: bool,
) -> Result<Sent, LabError> {
    let failed = |e: client::Error| broker_error(&format!("producing to {topic}"), &e);
    let (errors_before, requests_before) = (
        producer.invalid_metadata_errors().len(),
        client.metadata_requests(),
    );
    let mut pending = Vec::new();
    let mut by_partition: BTreeMap<i32, u64> = BTreeMap::new();
    for (i, key) in keys.iter().enumerate() {
        let value = format!("{tag}-{i}");
        let record = ProducerRecord::new(topic).key(key).value(&value);
        let delivery = producer.send(record).await.map_err(failed)?;
        *by_partition.entry(delivery.partition()).or_default() += 1;
        if one_by_one {
            delivery.wait().await.map_err(failed)?;
        } else {
            pending.push(delivery);
        }
    }
    for delivery in pending {
        delivery.wait().await.map_err(failed)?;
    }
    let leaders = leaders(client, topic).await?;
    let mut by_node = BTreeMap::new();
    for (&partition, &count) in &by_partition {
        let node = leaders.get(partition as usize).copied().unwrap_or(-1);
        *by_node.entry(node).or_default() += count;
    }
    Ok(Sent {
        records: keys.len() as u64,
        by_partition,
        by_node,
        invalid_metadata: producer.invalid_metadata_errors()[errors_before..].to_vec(),
        metadata_requests: client.metadata_requests() - requests_before,
    })
}

/// Moves `partition`'s leader to `to` and waits until the cluster's metadata names it (a real
/// cluster takes a moment; the caller's deadline bounds the wait).
pub async fn move_leader(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    to: i32,
) -> Result<(), LabError> {
    let what = format!("moving the leader of {topic}-{partition} to node {to}");
    let wanted = Reassignment {
        topic: topic.to_string(),
        partition,
        replicas: vec![to],
    };
    let answers = cluster
        .admin()
        .alter_partition_reassignments(&[wanted])
        .await
        .map_err(|e| broker_error(&what, &e))?;
    for (_, answer) in answers {
        answer.map_err(|e| broker_error(&what, &e.into()))?;
    }
    loop {
        cluster.client().invalidate(topic);
        let now = leaders(cluster.client(), topic).await?;
        if now.get(partition as usize) == Some(&to) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Records of `topic` whose value starts with `<tag>-` for one of `tags`: (stored, distinct).
pub async fn stored(cluster: &Cluster, topic: &str, tags: &[&str]) -> Result<(u64, u64), LabError> {
    let prefixes: Vec<String> = tags.iter().map(|tag| format!("{tag}-")).collect();
    let read = cluster.read_topic(topic).await?;
    let values: Vec<&[u8]> = read
        .values()
        .flatten()
        .filter_map(|r| r.value.as_deref())
        .filter(|v| prefixes.iter().any(|p| v.starts_with(p.as_bytes())))
        .collect();
    let distinct: BTreeSet<&[u8]> = values.iter().copied().collect();
    Ok((values.len() as u64, distinct.len() as u64))
}

/// What the client that never re-reads its map got.
#[derive(Debug, Clone, Default)]
pub struct NeverRefreshed {
    pub requests: u64,
    pub not_leader: u64,
}

/// Sends each key, as one Produce request of one record, to the leader of its partition in
/// `map` (learned once, never re-read): a record refused as NOT_LEADER_OR_FOLLOWER is not
/// retried anywhere else, since this client has nowhere else to go.
pub async fn never_refreshing(
    client: &Client,
    topic: &str,
    map: &[i32],
    keys: &[String],
) -> Result<NeverRefreshed, LabError> {
    let what = format!("producing to {topic} by an old map");
    let mut got = NeverRefreshed::default();
    for (i, key) in keys.iter().enumerate() {
        let partition = partition_for_key(key.as_bytes(), map.len() as i32);
        let conn = client
            .broker(map[partition as usize])
            .await
            .map_err(|e| broker_error(&what, &e))?;
        let request = one_record(topic, partition, key, &format!("never-{i}"))?;
        let answer = conn
            .call(|_| request)
            .await
            .map_err(|e| broker_error(&what, &e))?;
        let code = answer
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .find(|p| p.index == partition)
            .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
        got.requests += 1;
        match code {
            0 => {}
            c if c == ResponseError::NotLeaderOrFollower.code() => got.not_leader += 1,
            c => return Err(broker_error(&what, &ServerError::new(c).into())),
        }
    }
    Ok(got)
}

/// A Produce request (acks=all) of one record to one partition.
fn one_record(
    topic: &str,
    partition: i32,
    key: &str,
    value: &str,
) -> Result<ProduceRequest, LabError> {
    let mut batch = BatchBuilder::new(1024);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    batch.try_append(now, Some(key.as_bytes()), Some(value.as_bytes()), &[]);
    let records = batch
        .finish(Compression::None, ProducerIdentity::NONE)
        .map_err(|e| LabError::Internal(format!("cannot encode a batch: {e}")))?;
    let data = PartitionProduceData::default()
        .with_index(partition)
        .with_records(Some(records));
    let name = TopicName(StrBytes::from_string(topic.to_string()));
    Ok(ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name)
            .with_partition_data(vec![data])]))
}
