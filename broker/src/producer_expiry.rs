//! Producer state that expires, as Kafka's: every `producer.id.expiration.check.interval.ms`,
//! each partition forgets the producer ids idle there for `producer.id.expiration.ms` with no
//! transaction open there (their sequence windows, ~175 B each, were kept forever), and the
//! transaction coordinator forgets the transactional ids idle for
//! `transactional.id.expiration.ms`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::log::now_millis;
use crate::state::BrokerState;
use crate::txn_end::every;

/// What one pass forgot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    /// (producer id, partition) entries.
    pub producer_entries: usize,
    pub transactional_ids: usize,
}

/// One pass at `now_ms`.
pub async fn expire(state: &BrokerState, now_ms: i64) -> Expired {
    let config = &state.config;
    let producer_cutoff = now_ms.saturating_sub(config.producer_id_expiration_ms);
    let mut producer_entries = 0;
    for topic in state.topics.all() {
        for log in topic.partitions() {
            producer_entries += log.expire_producers(producer_cutoff);
        }
    }
    let txn_cutoff = now_ms.saturating_sub(config.transactional_id_expiration_ms);
    let transactional_ids = state.txns.expire(txn_cutoff, &state.producer_ids).await;
    Expired {
        producer_entries,
        transactional_ids,
    }
}

/// Runs [`expire`] every check interval until `shutdown`.
pub fn spawn(state: Arc<BrokerState>, shutdown: CancellationToken, tasks: &TaskTracker) {
    let period = state.config.producer_id_expiration_check_interval;
    every(period, shutdown, tasks, move || {
        let state = state.clone();
        async move {
            let expired = expire(&state, now_millis()).await;
            if expired != Expired::default() {
                tracing::info!(
                    producer_entries = expired.producer_entries,
                    transactional_ids = expired.transactional_ids,
                    "expired producer state"
                );
            }
        }
    });
}
