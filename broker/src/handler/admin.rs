//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions (configs: [`super::configs`]).

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
};
use kafka_protocol::ResponseError;

use super::{code, str_bytes};
use crate::state::BrokerState;
use crate::topic_error::TopicError;
use crate::topics::NewTopic;

/// Kafka's controller refuses a whole request above its partition cap with these messages.
const TOO_MANY_CREATED: &str = "Excessively large number of partitions per request.";
const TOO_MANY_ADDED: &str = "Unable to perform excessively large batch operation.";

/// Partitions a CreateTopics asks for, counted as Kafka's controller counts them: -1 is the
/// default, a manual assignment counts its partitions, a non-positive count nothing.
fn requested_partitions(state: &BrokerState, request: &CreateTopicsRequest) -> usize {
    request
        .topics
        .iter()
        .map(|t| match (t.num_partitions, t.assignments.len()) {
            (-1, 0) => usize::try_from(state.config.default_partitions).unwrap_or(0),
            (n, 0) => usize::try_from(n).unwrap_or(0),
            (_, assigned) => assigned,
        })
        .fold(0, usize::saturating_add)
}

pub fn create_topics(state: &BrokerState, request: CreateTopicsRequest) -> CreateTopicsResponse {
    if requested_partitions(state, &request) > state.config.max_partitions_per_request {
        let topics = request
            .topics
            .into_iter()
            .map(|t| {
                CreatableTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(code(ResponseError::PolicyViolation))
                    .with_error_message(Some(str_bytes(TOO_MANY_CREATED)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            })
            .collect();
        return CreateTopicsResponse::default().with_topics(topics);
    }
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            // -1 means "the broker's default"; kafkajs sends it even at v3. Manual assignments
            // give the partition count by their length.
            let partitions = match (t.num_partitions, t.assignments.len()) {
                (-1, 0) => state.config.default_partitions,
                (-1, assigned) => assigned as i32,
                (n, _) => n,
            };
            let replication_factor = if t.replication_factor == -1 {
                1
            } else {
                t.replication_factor
            };
            let configs: BTreeMap<String, String> = t
                .configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            let new = NewTopic {
                name: t.name.to_string(),
                partitions,
                replication_factor,
                configs,
            };
            let result = CreatableTopicResult::default().with_name(t.name);
            match state.create_topic(new, request.validate_only) {
                Ok(topic) => result
                    .with_topic_id(topic.id)
                    .with_num_partitions(partitions)
                    .with_replication_factor(1),
                Err(e) => result
                    .with_error_code(code(e.code))
                    .with_error_message(Some(str_bytes(&e.message)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

pub fn delete_topics(state: &BrokerState, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let responses = request
        .topic_names
        .into_iter()
        .map(|name| {
            let result = DeletableTopicResult::default().with_name(Some(name.clone()));
            match state.delete_topic(&name) {
                Ok(topic) => result.with_topic_id(topic.id),
                Err(e) => result.with_error_code(code(e.code)),
            }
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}

pub fn create_partitions(
    state: &BrokerState,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let added: usize = request
        .topics
        .iter()
        .map(|t| {
            let current = state
                .topics
                .get(&t.name)
                .map_or(0, |topic| topic.partition_count());
            usize::try_from(t.count.saturating_sub(current)).unwrap_or(0)
        })
        .fold(0, usize::saturating_add);
    let too_many = added > state.config.max_partitions_per_request;
    let results = request
        .topics
        .into_iter()
        .map(|t| {
            let outcome = if too_many {
                Err(TopicError::new(
                    ResponseError::PolicyViolation,
                    TOO_MANY_ADDED,
                ))
            } else {
                state.add_partitions(&t.name, t.count, request.validate_only)
            };
            let result = CreatePartitionsTopicResult::default().with_name(t.name);
            match outcome {
                Ok(()) => result,
                // Kafka sends no message for an unknown topic.
                Err(e) if e == TopicError::unknown_topic() => result.with_error_code(code(e.code)),
                Err(e) => result
                    .with_error_code(code(e.code))
                    .with_error_message(Some(str_bytes(&e.message))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
