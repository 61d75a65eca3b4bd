//! ListOffsets: latest (-1), earliest (-2), max timestamp (-3, v7) and timestamp lookups.
//!
//! The only place the broker reads records. A timestamp lookup finds the batch by the max
//! timestamps in the batch headers (what Kafka's time index holds), then walks that one batch's
//! records for the first one at or after the time, as Kafka does: exact, and bounded, since only
//! timestamp and offset deltas are read and at most `--max-uncompressed-batch-bytes` is
//! decompressed. Produce refuses batches past that limit, so every batch it stored is walked
//! whole; a batch stored before (an older data dir, a lowered limit) is answered at Kafka's index
//! granularity instead: its first offset, with its max timestamp.

use std::collections::HashSet;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;
use protocol::batch::BatchHeader;
use protocol::compression::DecompressError;
use protocol::records::{first_at_or_after, RecordsError};
use tracing::warn;

use super::code;
use crate::log::{Isolation, PartitionLog, StoredBatch};
use crate::state::BrokerState;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// The first ListOffsets version that may ask for each special timestamp (Kafka's
/// `ReplicaManager.timestampMinSupportedVersion`); any other negative one, or one asked below its
/// version, is UNSUPPORTED_VERSION. -4 (earliest local) and -5 (latest tiered) need v8 and v9,
/// above what this broker serves.
const SPECIAL_TIMESTAMPS: [(i64, i16); 3] = [(LATEST, 1), (EARLIEST, 1), (MAX_TIMESTAMP, 7)];

fn timestamp_unsupported(timestamp: i64, version: i16) -> bool {
    timestamp < 0
        && !SPECIAL_TIMESTAMPS
            .iter()
            .any(|&(special, since)| special == timestamp && version >= since)
}

/// Kafka's check of a request's `current_leader_epoch` (`Partition.localLogWithEpochOrThrow`):
/// -1 is "unknown"; an older epoch is fenced, a newer one not known yet. The partition's epoch
/// is the one Metadata names: 0, and one more for each leader move of `--nodes N`.
pub(super) fn check_leader_epoch(
    current_leader_epoch: i32,
    leader_epoch: i32,
) -> Result<(), ResponseError> {
    match current_leader_epoch {
        -1 => Ok(()),
        epoch if epoch == leader_epoch => Ok(()),
        epoch if epoch < leader_epoch => Err(ResponseError::FencedLeaderEpoch),
        _ => Err(ResponseError::UnknownLeaderEpoch),
    }
}

pub fn handle(
    state: &BrokerState,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let isolation = Isolation::from_code(request.isolation_level);
    let limit = state.config.max_uncompressed_batch_bytes;
    // A partition asked twice is answered once, INVALID_REQUEST (`ListOffsetsRequest`'s
    // duplicatePartitions, then `ReplicaManager.fetchOffset`).
    let mut seen = HashSet::new();
    let duplicates: HashSet<(&str, i32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.as_str(), p.partition_index))
        })
        .filter(|asked| !seen.insert(*asked))
        .collect();
    let mut answered = HashSet::new();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let topic = state.topics.get(&t.name);
            let partitions = t
                .partitions
                .iter()
                .filter(|p| answered.insert((t.name.as_str(), p.partition_index)))
                .map(|p| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let log = topic.as_ref().and_then(|t| t.partition(p.partition_index));
                    let leader_epoch = topic
                        .as_ref()
                        .map_or(0, |t| state.cluster.leader(t, p.partition_index).epoch);
                    let outcome = if duplicates.contains(&(t.name.as_str(), p.partition_index)) {
                        Err(ResponseError::InvalidRequest)
                    } else if timestamp_unsupported(p.timestamp, version) {
                        Err(ResponseError::UnsupportedVersion)
                    } else if let Some(log) = log {
                        check_leader_epoch(p.current_leader_epoch, leader_epoch)
                            .and_then(|()| lookup(&log, p.timestamp, limit, isolation))
                    } else {
                        Err(ResponseError::UnknownTopicOrPartition)
                    };
                    match outcome {
                        Ok((timestamp, offset)) => response
                            .with_timestamp(timestamp)
                            .with_offset(offset)
                            // Leader epochs exist from v4; setting one below fails to encode.
                            .with_leader_epoch(if offset < 0 || version < 4 {
                                -1
                            } else {
                                leader_epoch
                            }),
                        Err(error) => response
                            .with_error_code(code(error))
                            .with_timestamp(-1)
                            .with_offset(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// `(timestamp, offset)` for one partition; `(-1, -1)` when no record is that recent.
fn lookup(
    log: &PartitionLog,
    timestamp: i64,
    limit: usize,
    isolation: Isolation,
) -> Result<(i64, i64), ResponseError> {
    let offsets = log.offsets();
    // What a consumer at this isolation can read up to: a record found at or past it is not
    // answered (`ReplicaManager.fetchOffset` compares with `lastFetchableOffset`), so a
    // read_committed consumer seeking by time never lands beyond an open transaction.
    let last_fetchable = match isolation {
        Isolation::ReadCommitted => offsets.stable,
        Isolation::ReadUncommitted => offsets.end,
    };
    let found = match timestamp {
        LATEST => return Ok((-1, last_fetchable)),
        EARLIEST => return Ok((-1, offsets.start)),
        MAX_TIMESTAMP => match log.max_timestamp_batch() {
            Some(batch) => first_record_at_or_after(&batch, batch.max_timestamp, limit)?,
            None => return Ok((-1, -1)),
        },
        t if t >= 0 => match log.first_batch_at_or_after(t) {
            Some(batch) => first_record_at_or_after(&batch, t, limit)?,
            None => return Ok((-1, -1)),
        },
        _ => return Err(ResponseError::UnsupportedVersion),
    };
    Ok(if found.1 < last_fetchable {
        found
    } else {
        (-1, -1)
    })
}

/// The first record of one stored batch with a timestamp at or after `timestamp`.
fn first_record_at_or_after(
    batch: &StoredBatch,
    timestamp: i64,
    limit: usize,
) -> Result<(i64, i64), ResponseError> {
    let header = BatchHeader::parse(&batch.data).map_err(|_| ResponseError::CorruptMessage)?;
    match first_at_or_after(&batch.data, &header, timestamp, limit) {
        Ok(Some(found)) => Ok(found),
        // The header's max timestamp promised such a record; a batch that lies is corrupt.
        Ok(None) => Err(ResponseError::CorruptMessage),
        Err(RecordsError::Decompress(DecompressError::TooLarge { .. })) => {
            warn!(
                base_offset = batch.base_offset,
                limit,
                "timestamp lookup: batch decompresses past the limit; answering its first offset"
            );
            Ok((batch.max_timestamp, batch.base_offset))
        }
        Err(_) => Err(ResponseError::CorruptMessage),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gzip batch of `records` tiny records, all stamped 1000 while the header claims up to
    /// `max_timestamp`, appended without the produce checks, as a batch stored before them would
    /// be.
    fn stored_gzip(log: &PartitionLog, records: usize, max_timestamp: i64) {
        let tiny = [12u8, 0, 0, 0, 1, 1, 0];
        let mut compressed = bytes::BytesMut::new();
        protocol::compression::Compression::Gzip
            .compress(&tiny.repeat(records), &mut compressed)
            .unwrap();
        let mut batch = vec![0u8; protocol::batch::HEADER_LEN];
        batch.extend_from_slice(&compressed);
        let len = (batch.len() - 12) as i32;
        batch[8..12].copy_from_slice(&len.to_be_bytes());
        batch[16] = 2;
        batch[21..23].copy_from_slice(&1i16.to_be_bytes());
        batch[23..27].copy_from_slice(&(records as i32 - 1).to_be_bytes());
        batch[27..35].copy_from_slice(&1000i64.to_be_bytes());
        batch[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
        batch[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        batch[57..61].copy_from_slice(&(records as i32).to_be_bytes());
        let header = BatchHeader::parse(&batch).unwrap();
        log.append(&batch, &header).unwrap();
    }

    #[test]
    fn a_batch_past_the_limit_is_answered_at_batch_granularity() {
        let log = PartitionLog::new();
        stored_gzip(&log, 10, 1000);
        stored_gzip(&log, 100_000, 2000);
        // The first batch is walked: the exact record.
        assert_eq!(
            lookup(&log, 1000, 4096, Isolation::ReadUncommitted),
            Ok((1000, 0))
        );
        // In the second, no record reaches 1500 although its header says 2000. Walked whole,
        // that is a corrupt batch; past the limit, the answer is the batch's first offset.
        assert_eq!(
            lookup(&log, 1500, 1 << 20, Isolation::ReadUncommitted),
            Err(ResponseError::CorruptMessage)
        );
        assert_eq!(
            lookup(&log, 1500, 4096, Isolation::ReadUncommitted),
            Ok((2000, 10))
        );
        assert_eq!(
            lookup(&log, -3, 4096, Isolation::ReadUncommitted),
            Ok((2000, 10))
        );
        assert_eq!(
            lookup(&log, 2001, 4096, Isolation::ReadUncommitted),
            Ok((-1, -1))
        );
    }
}
