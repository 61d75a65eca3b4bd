//! Requests the integration tests send again and again, built with the crate's types.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::RawClient;

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Creates a topic (v5) and returns the error code.
pub async fn create_topic(client: &mut RawClient, name: &str, partitions: i32) -> i16 {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    client.call(&request, 5).await.topics[0].error_code
}

/// Creates a topic of one partition with `configs` (v5) and returns its result.
pub async fn create_topic_with(
    client: &mut RawClient,
    name: &str,
    configs: &[(&str, &str)],
) -> CreatableTopicResult {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_value(Some(StrBytes::from_string(v.to_string())))
        })
        .collect();
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(configs)]);
    client.call(&request, 5).await.topics.remove(0)
}

pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// Produces one batch with acks=all at `version` and returns the partition's answer.
pub async fn produce(
    client: &mut RawClient,
    topic: &str,
    partition: i32,
    records: Bytes,
    version: i16,
) -> PartitionProduceResponse {
    let response = client
        .call(&produce_request(topic, partition, records, -1), version)
        .await;
    response.responses[0].partition_responses[0].clone()
}

pub fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 * 1024 * 1024)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1024 * 1024)])])
}

/// ListOffsets v7 for one partition: `(error code, timestamp, offset)`.
pub async fn list_offset(
    client: &mut RawClient,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> (i16, i64, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(timestamp)])]);
    let response = client.call(&request, 7).await;
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.timestamp, p.offset)
}

/// InitProducerId v4, with `transactional_id` or (`None`) for an idempotent producer alone.
pub async fn init_producer_id(
    client: &mut RawClient,
    transactional_id: Option<&str>,
    timeout_ms: i32,
) -> InitProducerIdResponse {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_string()))),
        )
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    client.call(&request, 4).await
}

/// AddOffsetsToTxn v3 of `group` to the transaction of `transactional_id`: the error code.
pub async fn add_offsets_to_txn(
    client: &mut RawClient,
    transactional_id: &str,
    producer: (i64, i16),
    group: &str,
) -> i16 {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            transactional_id.to_string(),
        )))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())));
    client.call(&request, 3).await.error_code
}

/// EndTxn v3 of `id`'s transaction, committed or aborted: the error code.
pub async fn end_txn(client: &mut RawClient, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_string())))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    client.call(&request, 3).await.error_code
}

/// AddPartitionsToTxn at `version` for partitions of "t": each partition's error.
pub async fn add_partitions_to_txn(
    client: &mut RawClient,
    id: &str,
    producer: (i64, i16),
    partitions: &[i32],
    version: i16,
) -> Vec<i16> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string(id.to_string())))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(partitions.to_vec())]);
    let answer = client.call(&request, version).await;
    answer.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect()
}
