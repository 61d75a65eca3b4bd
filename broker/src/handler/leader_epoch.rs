//! OffsetForLeaderEpoch v2-4: where a leader epoch of a partition ends, which consumers ask
//! after a leader change to check that their position is still on the log (KIP-320; Java's
//! consumer, librdkafka and kafka-python 3.x validate their positions this way when Metadata
//! names a newer epoch).
//!
//! One copy of the data is kept whatever node leads (`--nodes N`), so a leader move never
//! truncates a partition. Kafka answers an older epoch with the start offset of the next one,
//! from the epoch cache it keeps per partition; this broker keeps no such cache, so it answers
//! every epoch up to the current one with the log end offset: an upper bound that is true here
//! (nothing before it was ever truncated), so a client's position is never taken for a
//! divergence.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::ResponseError;

use super::code;
use super::list_offsets::check_leader_epoch;
use crate::state::BrokerState;

pub fn handle(
    state: &BrokerState,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = state.topics.get(&t.topic);
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let answer = EpochEndOffset::default().with_partition(p.partition);
                    let Some((topic, log)) = topic
                        .as_ref()
                        .and_then(|topic| Some((topic, topic.partition(p.partition)?)))
                    else {
                        return refused(answer, ResponseError::UnknownTopicOrPartition);
                    };
                    let current = state.cluster.leader(topic, p.partition).epoch;
                    if let Err(error) = check_leader_epoch(p.current_leader_epoch, current) {
                        return refused(answer, error);
                    }
                    // An epoch past the current one has not begun: Kafka's UNDEFINED_EPOCH and
                    // UNDEFINED_EPOCH_OFFSET (`LeaderEpochFileCache.endOffsetFor`).
                    if p.leader_epoch > current {
                        return answer.with_leader_epoch(-1).with_end_offset(-1);
                    }
                    answer
                        .with_leader_epoch(p.leader_epoch)
                        .with_end_offset(log.offsets().end)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

fn refused(answer: EpochEndOffset, error: ResponseError) -> EpochEndOffset {
    answer
        .with_error_code(code(error))
        .with_leader_epoch(-1)
        .with_end_offset(-1)
}
