//! Metadata: one broker, which is the controller and every partition's leader.

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError;
use tracing::debug;

use super::{code, str_bytes};
use crate::state::BrokerState;
use crate::topic_error::TopicError;
use crate::topics::Topic;

/// The operations on a topic an unsecured Kafka reports as allowed when asked (READ, WRITE,
/// CREATE, ALTER, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, as bits of their ACL codes).
const TOPIC_AUTHORIZED_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
/// The same for the cluster (v8-10): CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
/// ALTER_CONFIGS, IDEMPOTENT_WRITE.
const CLUSTER_AUTHORIZED_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);
/// What Kafka sends when the client did not ask for authorized operations.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub fn handle(state: &BrokerState, request: MetadataRequest, version: i16) -> MetadataResponse {
    let topic_operations = if version >= 8 && request.include_topic_authorized_operations {
        TOPIC_AUTHORIZED_OPERATIONS
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    let cluster_operations =
        if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
            CLUSTER_AUTHORIZED_OPERATIONS
        } else {
            OPERATIONS_NOT_REQUESTED
        };
    // v0 has no null: an empty list means every topic. From v1 null means all and empty none.
    let requested = match request.topics {
        Some(topics) if version == 0 && topics.is_empty() => None,
        other => other,
    };
    // Before v4 a request could not say, and Kafka auto-created whenever the broker allowed it.
    let may_create =
        state.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    // Kafka's `KafkaApis.handleTopicMetadataRequest`: topic ids are asked for from v12 only; a
    // v10-11 request with a null name or an id is refused whole.
    let ids_refused = version < 12
        && requested
            .iter()
            .flatten()
            .any(|t| t.name.is_none() || !t.topic_id.is_nil());
    let topics = match requested {
        None => state
            .topics
            .all()
            .iter()
            .map(|t| describe(state, t, topic_operations))
            .collect(),
        Some(wanted) if ids_refused => wanted
            .into_iter()
            .map(|t| {
                // Names are nullable in answers from v12 only.
                MetadataResponseTopic::default()
                    .with_name(Some(t.name.unwrap_or_default()))
                    .with_topic_id(t.topic_id)
                    .with_error_code(code(ResponseError::InvalidRequest))
            })
            .collect(),
        Some(wanted) => wanted
            .into_iter()
            .map(|t| match (t.name, t.topic_id.is_nil()) {
                (Some(name), true) => lookup(state, &name, may_create, topic_operations),
                // By id (the name is then ignored, as Kafka does), never auto-created; an
                // unknown id is answered with a null name.
                (_, _) => match state.topics.get_by_id(t.topic_id) {
                    Some(topic) => describe(state, &topic, topic_operations),
                    None => MetadataResponseTopic::default()
                        .with_name(None)
                        .with_error_code(code(ResponseError::UnknownTopicId))
                        .with_topic_id(t.topic_id),
                },
            })
            .collect(),
    };
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(state.node_id()))
        .with_host(str_bytes(&state.advertised_host))
        .with_port(state.advertised_port);
    let mut response = MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_controller_id(BrokerId(state.node_id()))
        .with_topics(topics);
    if (8..=10).contains(&version) {
        response.cluster_authorized_operations = cluster_operations;
    }
    if version >= 2 {
        response.cluster_id = Some(str_bytes(&state.cluster_id));
    }
    response
}

fn lookup(
    state: &BrokerState,
    name: &TopicName,
    may_create: bool,
    operations: i32,
) -> MetadataResponseTopic {
    let found = if may_create {
        auto_create(state, name)
    } else {
        state.topics.get(name).ok_or_else(TopicError::unknown_topic)
    };
    match found {
        Ok(topic) => describe(state, &topic, operations),
        Err(e) => MetadataResponseTopic::default()
            .with_name(Some(name.clone()))
            .with_error_code(code(e.code)),
    }
}

/// The topic, created if missing, answered as Kafka's `AutoTopicCreationManager` answers: a
/// name `Topic.validate` refuses is INVALID_TOPIC_EXCEPTION, but the creation itself is the
/// controller's, whose refusal (a name colliding with another by `.`/`_`, a broker over its
/// partition limit) the client never sees: to it the topic is still missing,
/// UNKNOWN_TOPIC_OR_PARTITION.
fn auto_create(state: &BrokerState, name: &str) -> Result<Arc<Topic>, TopicError> {
    protocol::names::validate_topic_name(name)
        .map_err(|m| TopicError::new(ResponseError::InvalidTopicException, m))?;
    state.topic_or_create(name).map_err(|refused| {
        debug!(topic = name, "auto-creation refused: {}", refused.message);
        TopicError::unknown_topic()
    })
}

fn describe(state: &BrokerState, topic: &Topic, operations: i32) -> MetadataResponseTopic {
    let me = BrokerId(state.node_id());
    let partitions = (0..topic.partition_count())
        .map(|index| {
            MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(me)
                .with_leader_epoch(0)
                .with_replica_nodes(vec![me])
                .with_isr_nodes(vec![me])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(&topic.name))))
        .with_topic_id(topic.id)
        .with_partitions(partitions)
        .with_topic_authorized_operations(operations)
}
