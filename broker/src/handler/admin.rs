//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions (configs: [`super::configs`]).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
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

/// Kafka's `ControllerApis` answers every name a request repeats with this (INVALID_REQUEST),
/// once per name, and acts on none of its copies.
const DUPLICATE_NAME: &str = "Duplicate topic name.";

/// The names that occur more than once in a request.
fn duplicated<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    names.filter(|name| !seen.insert(*name)).collect()
}

fn invalid_assignment(message: String) -> TopicError {
    TopicError::new(ResponseError::InvalidReplicaAssignment, message)
}

/// Kafka's `validateManualPartitionAssignment` on this one-broker cluster: a non-empty list of
/// registered brokers (only us), none twice, as many as the topic's other partitions have.
fn check_replicas(
    replicas: &[BrokerId],
    node_id: i32,
    replication_factor: Option<usize>,
) -> Result<(), TopicError> {
    if replicas.is_empty() {
        return Err(invalid_assignment(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let mut sorted: Vec<i32> = replicas.iter().map(|b| b.0).collect();
    sorted.sort_unstable();
    if let Some(unknown) = sorted.iter().find(|&&b| b != node_id) {
        return Err(invalid_assignment(format!(
            "The manual partition assignment includes broker {unknown}, but no such broker is registered."
        )));
    }
    if let Some(twice) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(invalid_assignment(format!(
            "The manual partition assignment includes the broker {} more than once.",
            twice[0]
        )));
    }
    match replication_factor {
        Some(factor) if factor != sorted.len() => Err(invalid_assignment(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {factor} replica(s).",
            sorted.len()
        ))),
        _ => Ok(()),
    }
}

/// The partition count a CreateTopics entry asks for, checked as Kafka's controller checks a
/// manual assignment (`ReplicationControlManager.createTopic`): with one, the count and the
/// replication factor must be -1, each partition assigned once, to registered brokers, and the
/// partitions numbered 0, 1, ... without a gap.
fn partitions_to_create(state: &BrokerState, t: &CreatableTopic) -> Result<i32, TopicError> {
    if t.assignments.is_empty() {
        // -1 means "the broker's default"; kafkajs sends it even at v3.
        return Ok(match t.num_partitions {
            -1 => state.config.default_partitions,
            n => n,
        });
    }
    let invalid_request = |message: &str| TopicError::new(ResponseError::InvalidRequest, message);
    if t.replication_factor != -1 {
        return Err(invalid_request(
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ));
    }
    if t.num_partitions != -1 {
        return Err(invalid_request(
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ));
    }
    let mut assigned = BTreeSet::new();
    let mut replication_factor = None;
    for assignment in &t.assignments {
        if !assigned.insert(assignment.partition_index) {
            return Err(invalid_assignment(format!(
                "Found multiple manual partition assignments for partition {}",
                assignment.partition_index
            )));
        }
        check_replicas(&assignment.broker_ids, state.node_id(), replication_factor)?;
        replication_factor = Some(assignment.broker_ids.len());
    }
    // Distinct indexes 0..n are exactly the set whose largest is n - 1 and smallest 0.
    let consecutive = assigned.first() == Some(&0)
        && assigned.last().copied() == i32::try_from(assigned.len() - 1).ok();
    if !consecutive {
        return Err(invalid_assignment(
            "partitions should be a consecutive 0-based integer sequence".into(),
        ));
    }
    i32::try_from(assigned.len()).map_err(|_| invalid_request("Too many partitions assigned."))
}

/// What CreateTopics v5+ answers with a created topic: each of its configs with its value and
/// source, as DescribeConfigs would list them (Kafka's `ReplicationControlManager.createTopic`).
fn configs_created(
    state: &BrokerState,
    set: &BTreeMap<String, String>,
) -> Vec<CreatableTopicConfigs> {
    super::configs::effective(&state.config, set)
        .map(|c| {
            CreatableTopicConfigs::default()
                .with_name(str_bytes(c.def.name))
                .with_value(Some(str_bytes(&c.value)))
                .with_config_source(c.source)
        })
        .collect()
}

fn created(
    result: CreatableTopicResult,
    outcome: Result<Created, TopicError>,
) -> CreatableTopicResult {
    match outcome {
        Ok(created) => result
            .with_topic_id(created.id)
            .with_num_partitions(created.partitions)
            .with_replication_factor(1)
            .with_configs(Some(created.configs)),
        Err(e) => result
            .with_error_code(code(e.code))
            .with_error_message(Some(str_bytes(&e.message)))
            .with_num_partitions(-1)
            .with_replication_factor(-1),
    }
}

/// A topic CreateTopics created (or, with validate_only, would create).
struct Created {
    id: uuid::Uuid,
    partitions: i32,
    /// Answered from v5 (KIP-525); empty before.
    configs: Vec<CreatableTopicConfigs>,
}

pub fn create_topics(
    state: &BrokerState,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
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
    let duplicates = duplicated(request.topics.iter().map(|t| t.name.as_str()));
    let mut answered = BTreeSet::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let name = t.name.as_str();
        let result = CreatableTopicResult::default().with_name(t.name.clone());
        if duplicates.contains(name) {
            if answered.insert(name) {
                let refused = TopicError::new(ResponseError::InvalidRequest, DUPLICATE_NAME);
                topics.push(created(result, Err(refused)));
            }
            continue;
        }
        let outcome = partitions_to_create(state, t).and_then(|partitions| {
            let replication_factor = match t.replication_factor {
                -1 => 1,
                factor => factor,
            };
            let configs: BTreeMap<String, String> = t
                .configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            // Configs are answered from v5 (KIP-525).
            let configs_answered = if version >= 5 {
                configs_created(state, &configs)
            } else {
                Vec::new()
            };
            let new = NewTopic {
                name: name.to_string(),
                partitions,
                replication_factor,
                configs,
            };
            let topic = state.create_topic(new, request.validate_only)?;
            Ok(Created {
                id: topic.id,
                partitions,
                configs: configs_answered,
            })
        });
        topics.push(created(result, outcome));
    }
    CreateTopicsResponse::default().with_topics(topics)
}

pub fn delete_topics(state: &BrokerState, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let duplicates = duplicated(request.topic_names.iter().map(|n| n.as_str()));
    let mut answered = BTreeSet::new();
    let mut responses = Vec::with_capacity(request.topic_names.len());
    for name in &request.topic_names {
        let result = DeletableTopicResult::default().with_name(Some(name.clone()));
        if duplicates.contains(name.as_str()) {
            if answered.insert(name.as_str()) {
                responses.push(
                    result
                        .with_error_code(code(ResponseError::InvalidRequest))
                        .with_error_message(Some(str_bytes(DUPLICATE_NAME))),
                );
            }
            continue;
        }
        responses.push(match state.delete_topic(name) {
            Ok(topic) => result.with_topic_id(topic.id),
            Err(e) => result.with_error_code(code(e.code)),
        });
    }
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
    let duplicates = duplicated(request.topics.iter().map(|t| t.name.as_str()));
    let mut answered = BTreeSet::new();
    let mut results = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let outcome = if duplicates.contains(t.name.as_str()) {
            if !answered.insert(t.name.as_str()) {
                continue;
            }
            Err(TopicError::new(
                ResponseError::InvalidRequest,
                DUPLICATE_NAME,
            ))
        } else if too_many {
            Err(TopicError::new(
                ResponseError::PolicyViolation,
                TOO_MANY_ADDED,
            ))
        } else {
            let check_assignments = |added: i32| {
                check_added_assignments(t.assignments.as_deref(), added, state.node_id())
            };
            state.add_partitions(&t.name, t.count, request.validate_only, check_assignments)
        };
        let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        results.push(match outcome {
            Ok(()) => result,
            // Kafka sends no message for an unknown topic.
            Err(e) if e == TopicError::unknown_topic() => result.with_error_code(code(e.code)),
            Err(e) => result
                .with_error_code(code(e.code))
                .with_error_message(Some(str_bytes(&e.message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

/// CreatePartitions' manual assignments as Kafka's controller checks them
/// (`ReplicationControlManager.createPartitions`): one per partition added, each valid for the
/// topic's replication factor (1 here).
fn check_added_assignments(
    assignments: Option<&[CreatePartitionsAssignment]>,
    added: i32,
    node_id: i32,
) -> Result<(), TopicError> {
    let Some(assignments) = assignments else {
        return Ok(());
    };
    if usize::try_from(added).ok() != Some(assignments.len()) {
        return Err(invalid_assignment(format!(
            "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        )));
    }
    assignments
        .iter()
        .try_for_each(|a| check_replicas(&a.broker_ids, node_id, Some(1)))
}
