//! The transaction APIs: InitProducerId (with or without a transactional id),
//! AddPartitionsToTxn v0-3, AddOffsetsToTxn v0-3, EndTxn v0-4 and TxnOffsetCommit v0-4, answered
//! by the coordinator in [`crate::txn`].

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProducerId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::ResponseError;

use super::code;
use crate::group::messages::OffsetCommit;
use crate::group::offsets::metadata_too_large;
use crate::log::now_millis;
use crate::state::BrokerState;
use crate::txn_end::finish;

/// Kafka answers PRODUCER_FENCED only from these versions on; older clients know it as
/// INVALID_PRODUCER_EPOCH.
fn fenced_for(error: ResponseError, version: i16, from: i16) -> i16 {
    match error {
        ResponseError::ProducerFenced if version < from => {
            code(ResponseError::InvalidProducerEpoch)
        }
        other => code(other),
    }
}

pub async fn init_producer_id(
    state: &BrokerState,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let outcome = match request.transactional_id.as_ref().map(|t| t.as_str()) {
        None => state.producer_ids.init_idempotent(),
        Some(transactional_id) => {
            match state
                .txns
                .init(
                    transactional_id,
                    request.transaction_timeout_ms,
                    state.config.transaction_max_timeout_ms,
                    &state.producer_ids,
                )
                .await
            {
                Ok((id, epoch, None)) => Ok((id, epoch)),
                // The previous instance's open transaction, aborted with the new epoch: written
                // before the new instance may start its own.
                Ok((id, epoch, Some(ending))) => finish(state, &ending).await.map(|()| (id, epoch)),
                Err(e) => Err(e),
            }
        }
    };
    match outcome {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(error) => InitProducerIdResponse::default()
            .with_error_code(fenced_for(error, version, 4))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}

pub async fn add_partitions(
    state: &BrokerState,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let topics = request.v3_and_below_topics;
    // Kafka refuses the whole request when one partition is unknown: that one gets
    // UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED.
    let known = |topic: &str, partition: i32| {
        state
            .topics
            .get(topic)
            .is_some_and(|t| t.partition(partition).is_some())
    };
    let all_known = topics
        .iter()
        .all(|t| t.partitions.iter().all(|p| known(&t.name, *p)));
    let outcome = if all_known {
        let wanted: Vec<(String, i32)> = topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.name.to_string(), *p)))
            .collect();
        state
            .txns
            .add_partitions(
                &request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id.0,
                request.v3_and_below_producer_epoch,
                &wanted,
                now_millis(),
            )
            .await
    } else {
        Err(ResponseError::OperationNotAttempted)
    };
    let results = topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let error = match &outcome {
                        Ok(()) => 0,
                        Err(_) if !known(&t.name, *p) => {
                            code(ResponseError::UnknownTopicOrPartition)
                        }
                        Err(e) => fenced_for(*e, version, 2),
                    };
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(error)
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name)
                .with_results_by_partition(partitions)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

pub async fn add_offsets(
    state: &BrokerState,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let outcome = state
        .txns
        .add_offsets(
            &request.transactional_id,
            request.producer_id.0,
            request.producer_epoch,
            &request.group_id,
            now_millis(),
        )
        .await;
    AddOffsetsToTxnResponse::default()
        .with_error_code(outcome.map_or_else(|e| fenced_for(e, version, 2), |()| 0))
}

pub async fn end(state: &BrokerState, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let decided = state
        .txns
        .end(
            &request.transactional_id,
            request.producer_id.0,
            request.producer_epoch,
            request.committed,
        )
        .await;
    let outcome = match decided {
        Ok(Some(ending)) => finish(state, &ending).await,
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    EndTxnResponse::default()
        .with_error_code(outcome.map_or_else(|e| fenced_for(e, version, 2), |()| 0))
}

pub async fn commit_offsets(
    state: &BrokerState,
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    // Each partition's own refusal, in request order (one pass: the answer costs what the
    // request does). Kafka refuses unknown partitions first, then metadata past
    // `offset.metadata.max.bytes` (`GroupMetadataManager.validateOffsetMetadataLength`), each
    // for its partition; the others go to the transaction, and are all it will commit.
    let mut commits = Vec::new();
    let refused: Vec<Vec<Option<ResponseError>>> = request
        .topics
        .iter()
        .map(|topic| {
            let known = state.topics.get(&topic.name);
            topic
                .partitions
                .iter()
                .map(|p| {
                    let index = p.partition_index;
                    if known.as_ref().and_then(|t| t.partition(index)).is_none() {
                        return Some(ResponseError::UnknownTopicOrPartition);
                    }
                    let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
                    if metadata.as_deref().is_some_and(metadata_too_large) {
                        return Some(ResponseError::OffsetMetadataTooLarge);
                    }
                    commits.push(OffsetCommit {
                        topic: topic.name.to_string(),
                        partition: index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata,
                    });
                    None
                })
                .collect()
        })
        .collect();
    let member = state.groups.validate_txn_offset_commit(
        &request.group_id,
        &request.member_id,
        request.group_instance_id.as_deref(),
        request.generation_id,
    );
    let outcome = if commits.is_empty() {
        Ok(())
    } else if let Err(e) = member {
        Err(e)
    } else {
        state
            .txns
            .commit_offsets(
                &request.transactional_id,
                request.producer_id.0,
                request.producer_epoch,
                &request.group_id,
                commits,
            )
            .await
    };
    let outcome_code = outcome.map_or_else(|e| fenced_for(e, version, 2), |()| 0);
    let topics = request
        .topics
        .into_iter()
        .zip(refused)
        .map(|(t, refused)| {
            let partitions = t
                .partitions
                .iter()
                .zip(refused)
                .map(|(p, refused)| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(refused.map_or(outcome_code, code))
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
