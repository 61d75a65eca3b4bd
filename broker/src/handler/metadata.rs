//! Metadata: one broker, which is the controller and every partition's leader.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError;

use super::{code, str_bytes};
use crate::state::BrokerState;
use crate::topics::Topic;

pub fn handle(state: &BrokerState, request: MetadataRequest, version: i16) -> MetadataResponse {
    // v0 has no null: an empty list means every topic. From v1 null means all and empty none.
    let requested = match request.topics {
        Some(topics) if version == 0 && topics.is_empty() => None,
        other => other,
    };
    // Before v4 a request could not say, and Kafka auto-created whenever the broker allowed it.
    let may_create =
        state.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    let topics = match requested {
        None => state
            .topics
            .all()
            .iter()
            .map(|t| describe(state, t))
            .collect(),
        Some(wanted) => wanted
            .into_iter()
            .map(|t| match t.name {
                Some(name) => lookup(state, &name, may_create),
                // v10+ may name topics by id only; we never hand out ids as keys.
                None => MetadataResponseTopic::default()
                    .with_error_code(code(ResponseError::UnknownTopicId))
                    .with_topic_id(t.topic_id),
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
    if version >= 2 {
        response.cluster_id = Some(str_bytes(&state.cluster_id));
    }
    response
}

fn lookup(state: &BrokerState, name: &TopicName, may_create: bool) -> MetadataResponseTopic {
    let found = if may_create {
        state.topic_or_create(name)
    } else {
        state
            .topics
            .get(name)
            .ok_or_else(crate::topics::TopicError::unknown_topic)
    };
    match found {
        Ok(topic) => describe(state, &topic),
        Err(e) => MetadataResponseTopic::default()
            .with_name(Some(name.clone()))
            .with_error_code(code(e.code)),
    }
}

fn describe(state: &BrokerState, topic: &Topic) -> MetadataResponseTopic {
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
}
