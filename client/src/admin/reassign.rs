//! Partition reassignments, as kafka-reassign-partitions.sh makes them: each partition gets a new
//! list of replicas, whose first is its preferred leader, through the controller; and the list of
//! reassignments still in progress (`--verify`, `--list`).

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest,
};

use super::Admin;
use crate::client::topic_name;
use crate::error::{Result, ServerError};

/// A partition's new replicas, the first of which becomes its leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<i32>,
}

/// A reassignment the controller has not finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl Admin {
    /// Asks the controller for each reassignment; each gets its own answer, in the order given.
    /// The topics' cached metadata is dropped, so the next request finds the new leaders.
    pub async fn alter_partition_reassignments(
        &self,
        moves: &[Reassignment],
    ) -> Result<Vec<(Reassignment, std::result::Result<(), ServerError>)>> {
        let timeout_ms = self.timeout_ms();
        let answer = self
            .on_controller("AlterPartitionReassignments", |conn| async move {
                conn.call(|_| alter_request(moves, timeout_ms)).await
            })
            .await?;
        if answer.error_code != 0 {
            let message = answer.error_message.map(|m| m.to_string());
            return Err(ServerError::new(answer.error_code).message(message).into());
        }
        let mut results = Vec::with_capacity(moves.len());
        for wanted in moves {
            let answered = answer
                .responses
                .iter()
                .filter(|t| t.name.0.as_str() == wanted.topic)
                .flat_map(|t| &t.partitions)
                .find(|p| p.partition_index == wanted.partition);
            let outcome = match answered {
                None => Err(ServerError::new(
                    kafka_protocol::ResponseError::UnknownServerError.code(),
                )
                .message(Some("the controller did not answer for this partition"))),
                Some(p) if p.error_code == 0 => Ok(()),
                Some(p) => Err(ServerError::new(p.error_code)
                    .topic(&wanted.topic)
                    .message(p.error_message.as_ref().map(|m| m.to_string()))),
            };
            self.client.invalidate(&wanted.topic);
            results.push((wanted.clone(), outcome));
        }
        Ok(results)
    }

    /// Every reassignment still in progress, by topic then partition.
    pub async fn list_partition_reassignments(&self) -> Result<Vec<OngoingReassignment>> {
        let timeout_ms = self.timeout_ms();
        let answer = self
            .on_controller("ListPartitionReassignments", |conn| async move {
                conn.call(|_| {
                    ListPartitionReassignmentsRequest::default()
                        .with_timeout_ms(timeout_ms)
                        .with_topics(None)
                })
                .await
            })
            .await?;
        if answer.error_code != 0 {
            return Err(ServerError::new(answer.error_code).into());
        }
        let ids = |nodes: &[BrokerId]| nodes.iter().map(|b| b.0).collect::<Vec<_>>();
        let mut ongoing: Vec<OngoingReassignment> = answer
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| OngoingReassignment {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    replicas: ids(&p.replicas),
                    adding: ids(&p.adding_replicas),
                    removing: ids(&p.removing_replicas),
                })
            })
            .collect();
        ongoing.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(ongoing)
    }
}

fn alter_request(moves: &[Reassignment], timeout_ms: i32) -> AlterPartitionReassignmentsRequest {
    let mut topics: Vec<ReassignableTopic> = Vec::new();
    for m in moves {
        let partition = ReassignablePartition::default()
            .with_partition_index(m.partition)
            .with_replicas(Some(m.replicas.iter().map(|&id| BrokerId(id)).collect()));
        match topics.iter_mut().find(|t| t.name.0.as_str() == m.topic) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                ReassignableTopic::default()
                    .with_name(topic_name(&m.topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(topics)
}
