//! Ending a decided transaction: its marker written to each of its partitions (and synced
//! with a data directory, as Kafka writes markers with acks=all), its offsets committed to their
//! groups, then the coordinator told it is complete. Used by EndTxn, by InitProducerId and the
//! timeout task when they abort an open transaction, and at start for one a crash left decided.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::log::now_millis;
use crate::state::BrokerState;
use crate::txn::Ending;

/// The coordinator epoch the markers carry: one coordinator, never moved.
const COORDINATOR_EPOCH: i32 = 0;

/// Writes `ending` and records it complete. A partition that cannot take its marker (a
/// failed disk) fails the whole; the transaction stays decided and is finished at the next
/// start.
pub async fn finish(state: &BrokerState, ending: &Ending) -> Result<(), ResponseError> {
    let mut written = Vec::new();
    for (topic, partition) in &ending.partitions {
        // A partition deleted since it was added has nothing to end.
        let Some(log) = state
            .topics
            .get(topic)
            .and_then(|t| t.partition(*partition))
        else {
            continue;
        };
        log.append_marker(
            ending.producer_id,
            ending.epoch,
            ending.marker,
            COORDINATOR_EPOCH,
        )?;
        written.push(log);
    }
    for log in written.iter().filter(|l| l.is_on_disk()) {
        log.flush().await?;
    }
    for (group, commits) in &ending.offsets {
        state.groups.commit_transactional(group, commits.clone());
    }
    state.txns.completed(ending).await
}

/// Aborts the transactions open past their timeout at `now_ms`; how many.
pub async fn abort_timed_out(state: &BrokerState, now_ms: i64) -> usize {
    let endings = state
        .txns
        .abort_timed_out(now_ms, &state.producer_ids)
        .await;
    for ending in &endings {
        info!(
            transactional_id = ending.transactional_id,
            producer_id = ending.producer_id,
            epoch = ending.epoch,
            "transaction aborted: open longer than its timeout"
        );
        if let Err(e) = finish(state, ending).await {
            warn!(
                transactional_id = ending.transactional_id,
                "abort not written: {e:?}"
            );
        }
    }
    endings.len()
}

/// Looks for timed-out transactions every `transaction.abort.timed.out.transaction.cleanup.
/// interval.ms` until `shutdown`.
pub fn spawn(state: Arc<BrokerState>, shutdown: CancellationToken, tasks: &TaskTracker) {
    let period = state.config.transaction_abort_interval;
    every(period, shutdown, tasks, move || {
        let state = state.clone();
        async move {
            abort_timed_out(&state, now_millis()).await;
        }
    });
}

/// Runs `work` every `period` (the first time one period from now) until `shutdown`: the
/// coordinator's periodic tasks.
pub fn every<F, Work>(period: Duration, shutdown: CancellationToken, tasks: &TaskTracker, work: F)
where
    F: Fn() -> Work + Send + 'static,
    Work: std::future::Future<Output = ()> + Send,
{
    tasks.spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            work().await;
        }
    });
}
