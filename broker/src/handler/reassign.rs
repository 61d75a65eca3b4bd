//! AlterPartitionReassignments and ListPartitionReassignments, as Kafka's controller answers
//! them (kafka-reassign-partitions.sh sends the first, `--verify` and `--list` the second).
//!
//! A partition has one copy, shared by every node, so a reassignment names exactly one replica,
//! which becomes the leader at once: no data is copied and no record written before is lost.
//! Hence nothing is ever "in progress": the list is always empty, and a cancellation (null
//! replicas) finds none, as Kafka answers once a reassignment has completed.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tracing::info;

use crate::state::BrokerState;

pub fn alter(
    state: &BrokerState,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let responses = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = state.topics.get(&t.name);
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let index = p.partition_index;
                    let outcome = match topic.as_ref().filter(|t| t.partition(index).is_some()) {
                        None => Err((ResponseError::UnknownTopicOrPartition, None)),
                        Some(topic) => reassign(state, topic, index, p.replicas.as_deref()),
                    };
                    let (code, message) = match outcome {
                        Ok(()) => (0, None),
                        Err((error, message)) => (error.code(), message),
                    };
                    ReassignablePartitionResponse::default()
                        .with_partition_index(index)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionReassignmentsResponse::default().with_responses(responses)
}

/// Moves one partition's leader to the single replica named.
fn reassign(
    state: &BrokerState,
    topic: &crate::topics::Topic,
    index: i32,
    replicas: Option<&[kafka_protocol::messages::BrokerId]>,
) -> Result<(), (ResponseError, Option<String>)> {
    let invalid = |why: String| Err((ResponseError::InvalidReplicaAssignment, Some(why)));
    let to = match replicas {
        None => {
            return Err((
                ResponseError::NoReassignmentInProgress,
                Some("a reassignment completes at once here, so none is ever in progress".into()),
            ))
        }
        Some([only]) => only.0,
        Some(more) => {
            return invalid(format!(
                "{} replicas given; partitions have one copy here, so give exactly one",
                more.len()
            ))
        }
    };
    if state.cluster.node(to).is_none() {
        let ids: Vec<String> = state
            .cluster
            .nodes()
            .iter()
            .map(|n| n.id.to_string())
            .collect();
        return invalid(format!(
            "node {to} does not exist (nodes: {})",
            ids.join(", ")
        ));
    }
    let from = state.cluster.leader(topic, index).node;
    state
        .cluster
        .move_leader(topic, index, to)
        .map_err(|e| (ResponseError::KafkaStorageError, Some(e.to_string())))?;
    if from != to {
        info!(topic = %topic.name, partition = index, from, to, "partition leader moved");
    }
    Ok(())
}

pub fn list() -> ListPartitionReassignmentsResponse {
    // See the module docs: a move completes as it is made, so none is ever ongoing.
    ListPartitionReassignmentsResponse::default()
}
