//! The JSON figures (what the seed decides, the names issue 32 gives them), the timings and
//! the cluster's own counters beside them, and the verdict.

use std::collections::BTreeMap;

use serde::Serialize;

use super::kafka::{NeverRefreshed, Sent};
use super::metrics::NodeProduce;
use super::redis::RedisRun;
use crate::kit::schemes::redis_slot;
use crate::lab::report::{round, Checks};

/// The Kafka phases after the move, when the cluster could move a leader.
#[derive(Debug, Clone)]
pub struct AfterMove {
    pub topic: String,
    pub from: i32,
    pub to: i32,
    pub stale: Sent,
    /// Records of the refreshing producer stored, and distinct among them.
    pub stored: (u64, u64),
    /// Records it sent, before and after the move.
    pub sent: u64,
    pub never: NeverRefreshed,
    /// The cluster's Produce counters per node over the never-refreshing client's sends, when
    /// its metrics can be read.
    pub node_metrics: Option<BTreeMap<i32, NodeProduce>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub nodes: usize,
    pub fresh_map_not_leader_errors: u64,
    pub leader_moves: u64,
    /// `null` where the phase could not run (one node: no leader can move).
    pub stale_map_not_leader_errors: Option<u64>,
    pub metadata_refreshes: Option<u64>,
    pub records_lost_refreshing_client: Option<u64>,
    pub records_failed_never_refreshing_client: Option<u64>,
    pub redirect_ratio_never_refreshing_client: Option<f64>,
    pub redis_slot_user_42_cart: u16,
    pub redis_hash_tag_slot_user_42: u16,
    pub ask_treated_as_moved_flaps: u64,
    pub moved_ignored_latency_multiple: f64,
}

impl Figures {
    pub fn new(nodes: usize, fresh: &Sent, after: Option<&AfterMove>, redis: &RedisRun) -> Self {
        Figures {
            nodes,
            fresh_map_not_leader_errors: fresh.invalid_metadata.len() as u64,
            leader_moves: u64::from(after.is_some()),
            stale_map_not_leader_errors: after.map(|a| a.stale.invalid_metadata.len() as u64),
            metadata_refreshes: after.map(|a| a.stale.metadata_requests),
            records_lost_refreshing_client: after.map(|a| a.sent.saturating_sub(a.stored.1)),
            records_failed_never_refreshing_client: after.map(|a| a.never.not_leader),
            redirect_ratio_never_refreshing_client: after.map(|a| never_ratio(&a.never)),
            redis_slot_user_42_cart: redis_slot(b"user:42:cart"),
            redis_hash_tag_slot_user_42: redis_slot(b"user:{42}:cart"),
            ask_treated_as_moved_flaps: redis.during[1].map_changes,
            moved_ignored_latency_multiple: round(redis.latency_multiple(), 4),
        }
    }
}

pub fn never_ratio(never: &NeverRefreshed) -> f64 {
    round(never.not_leader as f64 / never.requests.max(1) as f64, 4)
}

/// What the wall clock or the cluster's own counters decide: not part of the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub seconds: f64,
    /// Produce requests and NOT_LEADER_OR_FOLLOWER answers each node counted while the
    /// never-refreshing client sent (`null`: the cluster's metrics were not readable).
    pub never_refreshing_node_metrics: Option<BTreeMap<i32, NodeProduce>>,
}

/// The lab shows its phenomenon when every Kafka client met what it should and the model's
/// clients behaved as the specification says.
pub fn verdict(f: &Figures, after: Option<&AfterMove>) -> Checks {
    let mut checks = Checks::new();
    checks.check(
        "a fresh map meets no NOT_LEADER_OR_FOLLOWER",
        f.fresh_map_not_leader_errors == 0,
        format!("{} met", f.fresh_map_not_leader_errors),
    );
    match after {
        None => checks.skip(
            "a stale map meets NOT_LEADER_OR_FOLLOWER, re-reads metadata, loses nothing",
            "a cluster of one node cannot move a leader",
        ),
        Some(a) => {
            checks.check(
                "a stale map meets NOT_LEADER_OR_FOLLOWER, re-reads metadata, loses nothing",
                !a.stale.invalid_metadata.is_empty()
                    && a.stale.metadata_requests > 0
                    && a.stored == (a.sent, a.sent),
                format!(
                    "{} met, {} metadata requests, {} of {} stored once",
                    a.stale.invalid_metadata.len(),
                    a.stale.metadata_requests,
                    a.stored.1,
                    a.sent
                ),
            );
            checks.check(
                "a map never re-read keeps failing on the old leader",
                a.never.not_leader > 0,
                format!("{} of {} refused", a.never.not_leader, a.never.requests),
            );
        }
    }
    checks.check(
        "a client treating ASK as MOVED flaps during a slot migration",
        f.ask_treated_as_moved_flaps > 0,
        format!("{} map changes", f.ask_treated_as_moved_flaps),
    );
    checks.check(
        "a client ignoring MOVED pays an extra hop",
        f.moved_ignored_latency_multiple > 1.0,
        format!("{}x the hops", f.moved_ignored_latency_multiple),
    );
    checks
}
