//! DeleteRecords: moves each partition's log start offset (Kafka's low watermark) forward, as
//! `kafka-delete-records.sh` and an admin client's `delete_records` ask.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

use super::code;
use crate::state::BrokerState;

pub fn handle(state: &BrokerState, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = state.topics.get(&t.name);
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index);
                    let moved = match topic.as_ref().and_then(|t| t.partition(p.partition_index)) {
                        None => Err(ResponseError::UnknownTopicOrPartition),
                        // Kafka: "Records of partition ... can not be deleted due to the
                        // configured policy": a compacted topic keeps its keys' last records.
                        Some(log) if !log.policy().delete => Err(ResponseError::PolicyViolation),
                        Some(log) => log.delete_records(p.offset),
                    };
                    match moved {
                        Ok(low_watermark) => result.with_low_watermark(low_watermark),
                        Err(e) => result.with_error_code(code(e)).with_low_watermark(-1),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
