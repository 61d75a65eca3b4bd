//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
};
use kafka_protocol::ResponseError;

use super::{code, str_bytes};
use crate::state::BrokerState;
use crate::topics::{NewTopic, TopicError};

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

/// Resource types of DescribeConfigs.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Config sources.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

/// The topic configs a single in-memory broker actually has, with Kafka's defaults. Reported so
/// that `kafka-topics.sh --describe` and admin clients get sensible answers.
const TOPIC_DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("compression.type", "producer"),
    ("max.message.bytes", "1048588"),
    ("message.timestamp.type", "CreateTime"),
    ("min.insync.replicas", "1"),
    ("retention.bytes", "-1"),
    ("retention.ms", "604800000"),
];

pub fn describe_configs(
    state: &BrokerState,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            // Null or empty: every config.
            let wanted = |name: &str| {
                resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == name))
            };
            match resource.resource_type {
                RESOURCE_TOPIC => match state.topics.get(&resource.resource_name) {
                    Some(topic) => {
                        let mut entries: BTreeMap<&str, (&str, i8)> = TOPIC_DEFAULTS
                            .iter()
                            .map(|&(k, v)| (k, (v, SOURCE_DEFAULT)))
                            .collect();
                        for (k, v) in &topic.configs {
                            entries.insert(k, (v, SOURCE_TOPIC));
                        }
                        result.with_configs(
                            entries
                                .into_iter()
                                .filter(|(k, _)| wanted(k))
                                .map(|(k, (v, source))| config_entry(k, v, source))
                                .collect(),
                        )
                    }
                    None => {
                        let e = TopicError::unknown_topic();
                        result
                            .with_error_code(code(e.code))
                            .with_error_message(Some(str_bytes(&e.message)))
                    }
                },
                RESOURCE_BROKER => {
                    let config = &state.config;
                    let entries = [
                        ("num.partitions", config.default_partitions.to_string()),
                        (
                            "auto.create.topics.enable",
                            config.auto_create_topics.to_string(),
                        ),
                        ("message.max.bytes", config.max_message_bytes.to_string()),
                        (
                            "socket.request.max.bytes",
                            config.max_request_bytes.to_string(),
                        ),
                    ];
                    result.with_configs(
                        entries
                            .iter()
                            .filter(|(k, _)| wanted(k))
                            .map(|(k, v)| config_entry(k, v, SOURCE_DEFAULT))
                            .collect(),
                    )
                }
                other => result
                    .with_error_code(code(ResponseError::InvalidRequest))
                    .with_error_message(Some(str_bytes(&format!(
                        "Unsupported resource type {other}"
                    )))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn config_entry(name: &str, value: &str, source: i8) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(name))
        .with_value(Some(str_bytes(value)))
        .with_config_source(source)
}
