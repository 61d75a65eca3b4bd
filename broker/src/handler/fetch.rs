//! Fetch v4-12: a long poll over stored batches, up to the high watermark (read_uncommitted) or
//! the last stable offset with the aborted transactions among them (read_committed).
//!
//! A fetch that cannot be satisfied at once (fewer than `min_bytes` available) parks until an
//! append to one of its partitions wakes it or `max_wait_ms` passes, never longer: clients size
//! their own timeouts on it. The broker caps that wait (`max_fetch_wait`), and the connection
//! ends a parked fetch when its peer hangs up or the broker stops.
//!
//! The answer's record bytes come out of the broker-wide [`FetchMemory`] budget and go back
//! once the connection has written them: a fetch gathers at most what the budget has left, and
//! when it has nothing left, waits for it until its deadline, then answers without records.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::select_all;
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::code;
use super::fetch_body::{FetchBody, FetchedPartition, FetchedTopic};
use crate::fetch_memory::{FetchMemory, FetchPermit};
use crate::log::{Isolation, PartitionLog};
use crate::state::BrokerState;

/// One requested partition, resolved once per request.
struct Wanted {
    index: i32,
    fetch_offset: i64,
    max_bytes: usize,
    log: Option<Arc<PartitionLog>>,
}

/// The answer, and the share of the fetch memory budget its records hold until written.
pub async fn handle(
    state: &BrokerState,
    request: FetchRequest,
) -> (FetchBody, Option<FetchPermit>) {
    // We create no fetch sessions (we answer session id 0), so a client naming one is confused.
    if request.session_id != 0 {
        let body = FetchBody {
            error_code: code(ResponseError::FetchSessionIdNotFound),
            topics: Vec::new(),
        };
        return (body, None);
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
    let isolation = Isolation::from_code(request.isolation_level);
    let max_bytes = request.max_bytes.max(0) as usize;
    let min_bytes = request.min_bytes.max(0) as usize;
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let deadline = Instant::now() + max_wait.min(state.config.max_fetch_wait);
    let logs: Vec<&PartitionLog> = wanted
        .iter()
        .flat_map(|(_, ps)| ps.iter().filter_map(|p| p.log.as_deref()))
        .collect();
    let (response, bytes) = loop {
        // Register for wakeups before reading, so an append in between is not missed.
        let mut appended: Vec<_> = logs.iter().map(|log| Box::pin(log.appended())).collect();
        for notified in &mut appended {
            notified.as_mut().enable();
        }
        let (response, gathered) = gather(&wanted, max_bytes, true, isolation);
        let satisfied = gathered.bytes >= min_bytes.max(1) || gathered.errors;
        if satisfied || appended.is_empty() || Instant::now() >= deadline {
            break (response, gathered.bytes);
        }
        tokio::select! {
            _ = select_all(appended) => {}
            _ = tokio::time::sleep_until(deadline) => {
                let (response, gathered) = gather(&wanted, max_bytes, true, isolation);
                break (response, gathered.bytes);
            }
        }
    };
    match state.fetch_memory.try_take(bytes) {
        Some(permit) => (response, Some(permit)),
        None => within_budget(&state.fetch_memory, &wanted, max_bytes, isolation, deadline).await,
    }
}

/// The answer gathered again within what the budget has left, and the budget taken for it.
async fn within_budget(
    memory: &Arc<FetchMemory>,
    wanted: &[(TopicName, Vec<Wanted>)],
    max_bytes: usize,
    isolation: Isolation,
    deadline: Instant,
) -> (FetchBody, Option<FetchPermit>) {
    loop {
        let released = memory.released();
        tokio::pin!(released);
        released.as_mut().enable();
        let available = memory.available();
        if available > 0 {
            // At least one batch even past what is left (KIP-74), taken whole below if it fits.
            let (body, gathered) = gather(wanted, max_bytes.min(available), true, isolation);
            if let Some(permit) = memory.try_take(gathered.bytes) {
                return (body, Some(permit));
            }
        }
        tokio::select! {
            _ = released => {}
            _ = tokio::time::sleep_until(deadline) => {
                // Spent until the deadline: offsets and errors, no records.
                return (gather(wanted, 0, false, isolation).0, None);
            }
        }
    }
}

struct Gathered {
    bytes: usize,
    errors: bool,
}

/// Reads every wanted partition, `max_bytes` in all; with `at_least_one`, the first batch found
/// even if it is larger (KIP-74: a batch above the limit must still make progress).
fn gather(
    wanted: &[(TopicName, Vec<Wanted>)],
    max_bytes: usize,
    at_least_one: bool,
    isolation: Isolation,
) -> (FetchBody, Gathered) {
    let mut gathered = Gathered {
        bytes: 0,
        errors: false,
    };
    let topics = wanted
        .iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .iter()
                .map(|p| {
                    let data = read_partition(
                        p,
                        max_bytes.saturating_sub(gathered.bytes),
                        at_least_one && gathered.bytes == 0,
                        isolation,
                    );
                    gathered.bytes += data.records_size();
                    gathered.errors |= data.error_code != 0;
                    data
                })
                .collect();
            FetchedTopic {
                name: name.clone(),
                partitions,
            }
        })
        .collect();
    let body = FetchBody {
        error_code: 0,
        topics,
    };
    (body, gathered)
}

fn read_partition(
    wanted: &Wanted,
    remaining: usize,
    first: bool,
    isolation: Isolation,
) -> FetchedPartition {
    let failed = |error: ResponseError, end: i64, stable: i64, start: i64| FetchedPartition {
        index: wanted.index,
        error_code: code(error),
        high_watermark: end,
        last_stable_offset: stable,
        log_start_offset: start,
        aborted: Vec::new(),
        records: Vec::new(),
    };
    let Some(log) = &wanted.log else {
        return failed(ResponseError::UnknownTopicOrPartition, -1, -1, -1);
    };
    let limit = wanted.max_bytes.min(remaining);
    match log.read(wanted.fetch_offset, limit, first, isolation) {
        Ok(read) => FetchedPartition {
            index: wanted.index,
            error_code: 0,
            high_watermark: read.offsets.end,
            last_stable_offset: read.offsets.stable,
            log_start_offset: read.offsets.start,
            aborted: read.aborted,
            // The stored batches themselves; none is an empty record set (see FetchedPartition).
            records: read.records,
        },
        Err(out_of_range) => failed(
            ResponseError::OffsetOutOfRange,
            out_of_range.offsets.end,
            out_of_range.offsets.stable,
            out_of_range.offsets.start,
        ),
    }
}
