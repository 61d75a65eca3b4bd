//! Produce v3+: exactly one v2 batch per partition, checked by its header and CRC, appended as
//! received with only its base offset rewritten (or, sent in another codec than its topic's
//! `compression.type`, recompressed into that one).
//!
//! Kafka's `LogValidator` then checks what the header claims against the records: the offset
//! range against the count, the count against the records. Here that takes one varint per
//! uncompressed record (its length) and, for a compressed batch, a walk through a bounded
//! decompression window: a few hundred KiB of gzip must not stand for gigabytes that a later
//! timestamp lookup or consumer would have to decompress.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::join_all;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;
use protocol::batch::{recompressed, validate_single_batch, BatchError, BatchHeader};
use protocol::compression::{Compression, DecompressError};
use protocol::records::{check_records, check_records_keyed, RecordsError};

use super::{code, str_bytes};
use crate::log::{Appended, PartitionLog};
use crate::state::BrokerState;
use crate::topic_config::LogPolicy;
use crate::topics::Topic;

/// Batch compression codec 4; Produce v7 introduced it (KIP-110).
const ZSTD: i16 = 4;
const MIN_ZSTD_VERSION: i16 = 7;

/// What the connection sends back.
pub enum ProduceReply {
    Respond(ProduceResponse),
    /// With a data directory and `flush.messages` reached: the answer once the appends are on
    /// disk.
    AfterSync(AwaitingSync),
    /// `acks=0`: no response at all.
    Silent,
    /// Close the connection without answering: `acks=0` with a failed partition (Kafka's only
    /// signal to such a producer), or an injected lost acknowledgement.
    Close(&'static str),
}

pub fn handle(state: &BrokerState, request: ProduceRequest, version: i16) -> ProduceReply {
    let acks_valid = matches!(request.acks, -1..=1);
    let mut failed = false;
    let mut ack_lost = false;
    let mut unsynced = Vec::new();
    let responses: Vec<TopicProduceResponse> = request
        .topic_data
        .into_iter()
        .enumerate()
        .map(|(topic_at, data)| {
            let topic = if state.config.auto_create_topics {
                state.topic_or_create(&data.name).ok()
            } else {
                state.topics.get(&data.name)
            };
            let partition_responses = data
                .partition_data
                .into_iter()
                .enumerate()
                .map(|(partition_at, p)| {
                    let index = p.index;
                    let outcome = if acks_valid {
                        append(state, &data.name, topic.as_deref(), p, version)
                    } else {
                        Err((ResponseError::InvalidRequiredAcks, None))
                    };
                    let outcome = outcome.map(|(log, appended, log_start_offset)| {
                        // Kafka syncs within the append once `flush.messages` is reached, so
                        // the answer, whatever the acks, comes after the disk.
                        if let Some(round) = appended.sync_first {
                            unsynced.push((topic_at, partition_at, log, round));
                        }
                        (appended, log_start_offset)
                    });
                    if outcome.is_ok() {
                        ack_lost |= state.faults.drop_ack(&data.name, index);
                    }
                    match outcome {
                        Ok((appended, log_start_offset)) => PartitionProduceResponse::default()
                            .with_index(index)
                            .with_base_offset(appended.base_offset)
                            .with_log_append_time_ms(appended.log_append_time)
                            .with_log_start_offset(log_start_offset),
                        Err((error, message)) => {
                            failed = true;
                            PartitionProduceResponse::default()
                                .with_index(index)
                                .with_error_code(code(error))
                                .with_base_offset(-1)
                                .with_log_append_time_ms(-1)
                                .with_log_start_offset(-1)
                                .with_error_message(message.map(|m| str_bytes(&m)))
                        }
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(data.name)
                .with_partition_responses(partition_responses)
        })
        .collect();
    if ack_lost {
        return ProduceReply::Close(
            "fault injection: produce acknowledgement dropped after append",
        );
    }
    let response = ProduceResponse::default().with_responses(responses);
    match (request.acks, failed) {
        (0, false) => ProduceReply::Silent,
        (0, true) => ProduceReply::Close("a produce with acks=0 failed"),
        _ if unsynced.is_empty() => ProduceReply::Respond(response),
        _ => ProduceReply::AfterSync(AwaitingSync { response, unsynced }),
    }
}

/// An acks=all answer that may be sent once its partitions' appends are on disk.
pub struct AwaitingSync {
    response: ProduceResponse,
    /// (topic index, partition index) in the response, the log to flush and the group commit
    /// round that covers the append.
    unsynced: Vec<(usize, usize, Arc<PartitionLog>, u64)>,
}

impl AwaitingSync {
    /// Waits for every partition's sync (each shared with other produces to that partition) at
    /// once; a partition whose sync failed answers KAFKA_STORAGE_ERROR instead.
    pub async fn synced(self) -> ProduceResponse {
        let Self {
            mut response,
            unsynced,
        } = self;
        let flushes = unsynced
            .iter()
            .map(|(_, _, log, round)| log.flush_until(*round));
        let results = join_all(flushes).await;
        for ((topic_at, partition_at, ..), result) in unsynced.iter().zip(results) {
            if let Err(error) = result {
                let p = &mut response.responses[*topic_at].partition_responses[*partition_at];
                p.error_code = code(error);
                p.base_offset = -1;
                p.log_start_offset = -1;
            }
        }
        response
    }
}

type PartitionError = (ResponseError, Option<String>);

/// Validates and appends one partition's batch: the log, where the batch went and the log start
/// offset.
fn append(
    state: &BrokerState,
    topic_name: &str,
    topic: Option<&Topic>,
    data: PartitionProduceData,
    version: i16,
) -> Result<(Arc<PartitionLog>, Appended, i64), PartitionError> {
    let (topic, log) = topic
        .and_then(|t| Some((t, t.partition(data.index)?)))
        .ok_or((ResponseError::UnknownTopicOrPartition, None))?;
    let policy = topic.policy();
    let records = data.records.unwrap_or_default();
    // The topic's `max.message.bytes`, else the broker's (`UnifiedLog.analyzeAndValidateRecords`).
    let max_message_bytes = policy
        .max_message_bytes
        .unwrap_or(state.config.max_message_bytes);
    if records.len() > max_message_bytes {
        return Err((
            ResponseError::MessageTooLarge,
            Some(format!(
                "The record batch size in the append to {topic_name}-{} is {} bytes which exceeds the maximum configured value of {max_message_bytes}.",
                data.index,
                records.len(),
            )),
        ));
    }
    // `ProduceRequest.validateRecords`: no batch at all is an invalid record, not a corrupt one.
    if records.is_empty() {
        return Err((
            ResponseError::InvalidRecord,
            Some(format!("Produce requests with version {version} must have at least one record batch per partition")),
        ));
    }
    let header = validate_single_batch(&records).map_err(|e| {
        let error = match e {
            BatchError::TooShort(_)
            | BatchError::LengthMismatch { .. }
            | BatchError::CrcMismatch { .. } => ResponseError::CorruptMessage,
            BatchError::UnsupportedMagic(_)
            | BatchError::MultipleBatches
            | BatchError::NegativeCount => ResponseError::InvalidRecord,
        };
        (error, Some(e.to_string()))
    })?;
    if header.compression() == ZSTD && version < MIN_ZSTD_VERSION {
        return Err((ResponseError::UnsupportedCompressionType, None));
    }
    if header.compression() > ZSTD {
        return Err((
            ResponseError::CorruptMessage,
            Some(format!(
                "unknown compression codec {}",
                header.compression()
            )),
        ));
    }
    if header.is_control() {
        return Err((
            ResponseError::InvalidRecord,
            Some(
                "control batches are written by the transaction coordinator, never produced".into(),
            ),
        ));
    }
    check_counts(&header, topic_name, data.index)?;
    let limit = state.config.max_uncompressed_batch_bytes;
    let checked = if log.is_compacted() {
        check_records_keyed(&records, &header, limit)
    } else {
        check_records(&records, &header, limit).map(|()| true)
    };
    let keyed = checked.map_err(|e| {
        match e {
            RecordsError::Decompress(DecompressError::TooLarge { limit, .. }) => (
                ResponseError::MessageTooLarge,
                Some(format!("The batch's records decompress to more than {limit} bytes, this broker's limit (--max-uncompressed-batch-bytes).")),
            ),
            RecordsError::Decompress(corrupt) => {
                (ResponseError::CorruptMessage, Some(corrupt.to_string()))
            }
            invalid => (ResponseError::InvalidRecord, Some(invalid.to_string())),
        }
    })?;
    if !keyed {
        return Err((
            ResponseError::InvalidRecord,
            Some(format!(
                "Compacted topic cannot accept message without key in topic partition {topic_name}-{}.",
                data.index
            )),
        ));
    }
    if !policy.log_append_time {
        check_timestamps(&header, &policy, crate::log::now_millis())?;
    }
    let (records, header) = match policy.compression {
        Some((codec, level)) if codec.attribute_bits() != header.compression() => {
            let partition = format!("{topic_name}-{}", data.index);
            recompress(
                &records,
                &header,
                (codec, level),
                limit,
                max_message_bytes,
                &partition,
            )?
        }
        _ => (records, header),
    };
    // A newer epoch of this producer id exists: the writer is a zombie of a restarted instance.
    if header.producer_id >= 0
        && state
            .producer_ids
            .is_fenced(header.producer_id, header.producer_epoch)
    {
        return Err((ResponseError::InvalidProducerEpoch, None));
    }
    // A transactional batch belongs to an open transaction that holds this partition (the
    // producer called AddPartitionsToTxn first): anything else would never be ended by a marker.
    // Asked under the partition's lock, so that the answer still holds when the batch lands.
    let in_ongoing_txn = || {
        state.txns.accepts(
            header.producer_id,
            header.producer_epoch,
            topic_name,
            data.index,
        )
    };
    let appended = log
        .append_verified(&records, &header, &in_ongoing_txn)
        .map_err(|e| (e, None))?;
    let start = log.offsets().start;
    Ok((log, appended, start))
}

/// The batch in the topic's `compression.type` codec, at its level (Kafka's `LogValidator`
/// rebuilds a batch whose codec is not the topic's), and its new header. Its size is checked
/// against `max.message.bytes` again, as Kafka's `UnifiedLog.append` does once a batch changed.
fn recompress(
    records: &Bytes,
    header: &BatchHeader,
    (codec, level): (Compression, i32),
    limit: usize,
    max_message_bytes: usize,
    partition: &str,
) -> Result<(Bytes, BatchHeader), PartitionError> {
    let batch = recompressed(records, header, codec, level, limit)
        .map_err(|e| (ResponseError::CorruptMessage, Some(e)))?;
    if batch.len() > max_message_bytes {
        return Err((
            ResponseError::MessageTooLarge,
            Some(format!(
                // Kafka's message, its missing space included.
                "Message batch size is {} bytes in append topartition {partition} which exceeds the maximum configured size of {max_message_bytes}.",
                batch.len()
            )),
        ));
    }
    let header = BatchHeader::parse(&batch)
        .map_err(|e| (ResponseError::CorruptMessage, Some(e.to_string())))?;
    Ok((batch, header))
}

/// KIP-937 as Kafka's `LogValidator.validateTimestamp` applies it to a CreateTime topic: a
/// record stamped more than `message.timestamp.before.max.ms` before the broker's clock, or
/// more than `after.max.ms` after it, fails the batch with INVALID_TIMESTAMP. The batch's base
/// and max timestamps stand for its records' (a producer stamps the base with its first
/// record's time and deltas from it), so no record is decoded; -1 means "no timestamp".
fn check_timestamps(
    header: &BatchHeader,
    policy: &LogPolicy,
    now: i64,
) -> Result<(), PartitionError> {
    let earliest = now.saturating_sub(policy.timestamp_before_max_ms);
    let latest = now.saturating_add(policy.timestamp_after_max_ms);
    let out_of_range = [header.base_timestamp, header.max_timestamp]
        .into_iter()
        .filter(|&t| t != -1)
        .find(|t| !(earliest..=latest).contains(t));
    match out_of_range {
        None => Ok(()),
        Some(timestamp) => Err((
            ResponseError::InvalidTimestamp,
            Some(format!(
                "One or more records have been rejected due to invalid timestamp: timestamp {timestamp} is out of range. The timestamp should be within [{earliest}, {latest}]"
            )),
        )),
    }
}

/// Kafka's checks of a client's v2 batch header (`LogValidator.validateBatch`), with its
/// messages: the offset range must hold exactly the records counted, and an idempotent batch
/// needs a sequence.
fn check_counts(header: &BatchHeader, topic: &str, index: i32) -> Result<(), PartitionError> {
    let (first, last, count) = (
        header.base_offset,
        header.last_offset(),
        header.record_count,
    );
    let partition = format_args!("{topic}-{index}");
    let invalid = |message: String| Err((ResponseError::InvalidRecord, Some(message)));
    let from_offsets = i64::from(header.last_offset_delta) + 1;
    if count <= 0 {
        return invalid(format!(
            "Invalid reported count for record batch: {count} in topic partition {partition}."
        ));
    }
    if from_offsets != i64::from(count) {
        return invalid(format!("Inconsistent batch offset range [{first}, {last}] and count of records {count} in topic partition {partition}."));
    }
    if header.producer_id >= 0 && header.base_sequence < 0 {
        return invalid(format!(
            "Invalid sequence number {} in record batch with producerId {} in topic partition {partition}.",
            header.base_sequence, header.producer_id
        ));
    }
    Ok(())
}
