//! The log's background work, which no produce or fetch ever waits for: `retention.ms` every
//! `log.retention.check.interval.ms`, the log cleaner of compacted topics every
//! `log.cleaner.backoff.ms` (with the deletion of the segment files it replaced), and the syncs
//! of the data directory's writes within their `flush.ms` (with one last round at shutdown, as
//! Kafka flushes every log when it stops). All of them read, write or sync files, so they run on
//! tokio's blocking threads.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::log::cleaner::{CleanStats, CleanerConfig};
use crate::log::now_millis;
use crate::state::BrokerState;

/// `retention.ms` applied to every partition at `now_ms`; the batches (segments) dropped.
pub fn expire_all(state: &BrokerState, now_ms: i64) -> usize {
    let mut dropped = 0;
    for topic in state.topics.all() {
        for log in topic.partitions() {
            dropped += log.expire(now_ms);
        }
    }
    dropped
}

/// One cleaner pass over every compacted partition at `now_ms`; what the passes did, summed.
pub fn clean_all(state: &BrokerState, now_ms: i64) -> CleanStats {
    let config = CleanerConfig {
        max_batch_bytes: state.config.max_uncompressed_batch_bytes,
        dedupe_buffer_bytes: state.config.log_cleaner_dedupe_buffer_bytes,
    };
    let mut total = CleanStats::default();
    for topic in state.topics.all() {
        for log in topic.partitions() {
            if let Some(stats) = log.clean(now_ms, &config) {
                total.batches_read += stats.batches_read;
                total.records_removed += stats.records_removed;
                total.bytes_before += stats.bytes_before;
                total.bytes_after += stats.bytes_after;
            }
            log.delete_replaced_files(now_ms);
        }
    }
    total
}

/// Starts both loops; they end with `shutdown`.
pub fn spawn(state: Arc<BrokerState>, shutdown: CancellationToken, tasks: &TaskTracker) {
    let every = |period, work: fn(&BrokerState, i64)| {
        let state = state.clone();
        let shutdown = shutdown.clone();
        async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await; // the first tick is immediate
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                let state = state.clone();
                let _ = tokio::task::spawn_blocking(move || work(&state, now_millis())).await;
            }
        }
    };
    tasks.spawn(every(
        state.config.log_retention_check_interval,
        |s, now| {
            expire_all(s, now);
        },
    ));
    tasks.spawn(every(state.config.log_cleaner_backoff, |s, now| {
        clean_all(s, now);
    }));
    if let Some(commit) = state.topics.group_commit().cloned() {
        tasks.spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = commit.run_background() => return,
            }
            if let Err(e) = commit.wait(commit.pending()).await {
                tracing::error!("last sync at shutdown failed: {e}");
            }
        });
    }
}
