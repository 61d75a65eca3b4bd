//! ListOffsets: latest (-1), earliest (-2), max timestamp (-3, v7) and timestamp lookups.
//!
//! The only place the broker reads records: a timestamp lookup decodes the one batch that the
//! index points at, to find the exact record, as Kafka does after consulting its time index.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError;

use super::code;
use crate::log::{PartitionLog, StoredBatch};
use crate::state::BrokerState;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

pub fn handle(
    state: &BrokerState,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    // Leader epochs exist from v4; setting one below fails to encode.
    let leader_epoch = if version >= 4 { 0 } else { -1 };
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = state.topics.get(&t.name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let Some(log) = topic.as_ref().and_then(|t| t.partition(p.partition_index))
                    else {
                        return response
                            .with_error_code(code(ResponseError::UnknownTopicOrPartition))
                            .with_timestamp(-1)
                            .with_offset(-1);
                    };
                    match lookup(&log, p.timestamp) {
                        Ok((timestamp, offset)) => response
                            .with_timestamp(timestamp)
                            .with_offset(offset)
                            .with_leader_epoch(leader_epoch),
                        Err(error) => response
                            .with_error_code(code(error))
                            .with_timestamp(-1)
                            .with_offset(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// `(timestamp, offset)` for one partition; `(-1, -1)` when no record is that recent.
fn lookup(log: &PartitionLog, timestamp: i64) -> Result<(i64, i64), ResponseError> {
    let offsets = log.offsets();
    match timestamp {
        LATEST => Ok((-1, offsets.end)),
        EARLIEST => Ok((-1, offsets.start)),
        MAX_TIMESTAMP => match log.max_timestamp_batch() {
            Some(batch) => first_record_at_or_after(&batch, batch.max_timestamp),
            None => Ok((-1, -1)),
        },
        t if t >= 0 => match log.first_batch_at_or_after(t) {
            Some(batch) => first_record_at_or_after(&batch, t),
            None => Ok((-1, -1)),
        },
        _ => Err(ResponseError::InvalidRequest),
    }
}

/// Decodes one stored batch to find its first record with a timestamp at or after `timestamp`.
fn first_record_at_or_after(
    batch: &StoredBatch,
    timestamp: i64,
) -> Result<(i64, i64), ResponseError> {
    let mut data = batch.data.clone();
    let decoded =
        RecordBatchDecoder::decode(&mut data).map_err(|_| ResponseError::CorruptMessage)?;
    decoded
        .records
        .iter()
        .find(|r| r.timestamp >= timestamp)
        .map(|r| (r.timestamp, r.offset))
        // The header's max timestamp promised such a record; a batch that lies about it is corrupt.
        .ok_or(ResponseError::CorruptMessage)
}
