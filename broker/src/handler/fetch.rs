//! Fetch v4-12: a long poll over stored batches.
//!
//! A fetch that cannot be satisfied at once (fewer than `min_bytes` available) parks until an
//! append to one of its partitions wakes it or `max_wait_ms` passes, never longer: clients size
//! their own timeouts on it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::select_all;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::code;
use crate::log::PartitionLog;
use crate::state::BrokerState;

/// One requested partition, resolved once per request.
struct Wanted {
    index: i32,
    fetch_offset: i64,
    max_bytes: usize,
    log: Option<Arc<PartitionLog>>,
}

pub async fn handle(state: &BrokerState, request: FetchRequest) -> FetchResponse {
    // We create no fetch sessions (we answer session id 0), so a client naming one is confused.
    if request.session_id != 0 {
        return FetchResponse::default()
            .with_error_code(code(ResponseError::FetchSessionIdNotFound));
    }
    let wanted: Vec<(TopicName, Vec<Wanted>)> = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = state.topics.get(&t.topic);
            let partitions = t
                .partitions
                .iter()
                .map(|p| Wanted {
                    index: p.partition,
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes.max(0) as usize,
                    log: topic.as_ref().and_then(|t| t.partition(p.partition)),
                })
                .collect();
            (t.topic, partitions)
        })
        .collect();
    let max_bytes = request.max_bytes.max(0) as usize;
    let min_bytes = request.min_bytes.max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let logs: Vec<&PartitionLog> = wanted
        .iter()
        .flat_map(|(_, ps)| ps.iter().filter_map(|p| p.log.as_deref()))
        .collect();
    loop {
        // Register for wakeups before reading, so an append in between is not missed.
        let mut appended: Vec<_> = logs.iter().map(|log| Box::pin(log.appended())).collect();
        for notified in &mut appended {
            notified.as_mut().enable();
        }
        let (response, gathered) = gather(&wanted, max_bytes);
        let satisfied = gathered.bytes >= min_bytes.max(1) || gathered.errors;
        if satisfied || appended.is_empty() || Instant::now() >= deadline {
            return response;
        }
        tokio::select! {
            _ = select_all(appended) => {}
            _ = tokio::time::sleep_until(deadline) => return gather(&wanted, max_bytes).0,
        }
    }
}

struct Gathered {
    bytes: usize,
    errors: bool,
}

fn gather(wanted: &[(TopicName, Vec<Wanted>)], max_bytes: usize) -> (FetchResponse, Gathered) {
    let mut gathered = Gathered {
        bytes: 0,
        errors: false,
    };
    let responses = wanted
        .iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .iter()
                .map(|p| {
                    let data = read_partition(
                        p,
                        max_bytes.saturating_sub(gathered.bytes),
                        gathered.bytes == 0,
                    );
                    gathered.bytes += data.records.as_ref().map_or(0, Bytes::len);
                    gathered.errors |= data.error_code != 0;
                    data
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(name.clone())
                .with_partitions(partitions)
        })
        .collect();
    (FetchResponse::default().with_responses(responses), gathered)
}

fn read_partition(wanted: &Wanted, remaining: usize, first: bool) -> PartitionData {
    let base = PartitionData::default()
        .with_partition_index(wanted.index)
        .with_preferred_read_replica(BrokerId(-1))
        .with_aborted_transactions(Some(Vec::new()));
    let Some(log) = &wanted.log else {
        return base
            .with_error_code(code(ResponseError::UnknownTopicOrPartition))
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1);
    };
    let limit = wanted.max_bytes.min(remaining);
    match log.read(wanted.fetch_offset, limit, first) {
        Ok(read) => base
            .with_high_watermark(read.offsets.end)
            .with_last_stable_offset(read.offsets.end)
            .with_log_start_offset(read.offsets.start)
            // An empty record set, not a null one: librdkafka rejects a size of -1.
            .with_records(Some(read.records.unwrap_or_default())),
        Err(out_of_range) => base
            .with_error_code(code(ResponseError::OffsetOutOfRange))
            .with_high_watermark(out_of_range.offsets.end)
            .with_last_stable_offset(out_of_range.offsets.end)
            .with_log_start_offset(out_of_range.offsets.start),
    }
}
