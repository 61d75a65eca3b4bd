//! The lab's figures as `--json` carries them, and the verdict drawn from them.

use serde::Serialize;

use super::movement::Movement;
use super::run::Outcome;
use super::traffic::FEATURED_ORDER;
use crate::lab::report::{count, max_and_average, Checks};

/// The refusal to shrink, as the admin call got it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shrink {
    pub topic: String,
    pub from: i32,
    pub to: i32,
    /// True when the broker refused (anything else is not Kafka's behaviour).
    pub refused: bool,
    /// Kafka's error name, `INVALID_PARTITIONS`, and its code.
    pub error: Option<String>,
    pub code: Option<i16>,
    /// The broker's message.
    pub message: Option<String>,
}

/// One scenario's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    pub topic: String,
    pub partitions: i32,
    /// Violations: versions applied before a lower version of their order.
    pub violations: usize,
    pub keys_out_of_order: usize,
    /// Events the store refused (not found, version conflict, stale).
    pub rejected_by_store: u64,
    /// Orders that did not end cancelled because an event was refused.
    pub orders_left_wrong: usize,
    /// Versions applied twice (at-least-once redelivery): none when commits follow what was
    /// applied.
    pub duplicates: u64,
    /// Records refused for an outdated routing version, and records that were not order events.
    pub stale_routing: u64,
    pub not_order_events: u64,
    pub rounds: u32,
    /// The largest per-partition lag, and the group's average, just before the change.
    pub max_lag_at_change: u64,
    pub average_lag_at_change: f64,
    /// The largest per-partition lag at the end: 0, every record applied and committed.
    pub max_lag_at_end: u64,
}

impl Scenario {
    pub fn of(outcome: &Outcome) -> Self {
        let (max, avg) = max_and_average(&outcome.lag_at_change);
        Scenario {
            topic: outcome.spec.topic.clone(),
            partitions: outcome.spec.partitions,
            violations: outcome.seen.len(),
            keys_out_of_order: outcome.keys_out_of_order,
            rejected_by_store: outcome.rejected,
            orders_left_wrong: outcome.incomplete.len(),
            duplicates: outcome.duplicates,
            stale_routing: outcome.fenced,
            not_order_events: outcome.undecodable,
            rounds: outcome.rounds,
            max_lag_at_change: max,
            average_lag_at_change: crate::lab::report::round(avg, 2),
            max_lag_at_end: max_and_average(&outcome.lag_at_end).0,
        }
    }
}

/// Fix 2's own figures, besides the scenario's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrationFigures {
    pub to_topic: String,
    pub to_partitions: i32,
    pub routing_version: u32,
    /// Rounds the producers were blocked while the old topic drained: the price of the fix.
    pub blocked_rounds: u32,
    pub held_events: usize,
    /// The old topic's largest per-partition lag at the switch: 0.
    pub old_topic_max_lag_at_switch: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fixes {
    pub provisioned: Scenario,
    pub migration: Scenario,
    pub migration_steps: Option<MigrationFigures>,
}

/// Every figure of the lab.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub seed: u64,
    /// `embedded` or the bootstrap address.
    pub target: String,
    pub key: String,
    pub partitions_before: i32,
    pub partitions_after: i32,
    /// Where the key's first six events were written (the acknowledgements say).
    pub partition_before: Option<i32>,
    /// Where its cancellation was written, after the increase.
    pub partition_after: Option<i32>,
    /// The run's order keys, and how many of them change partition with the increase.
    pub keys_total: usize,
    pub keys_moved: usize,
    /// Ordering violations after the increase (`null` when the cluster could not run it, as
    /// every figure of the failure).
    pub violations: Option<usize>,
    /// Events a group left with Kafka's default `auto.offset.reset=latest` never reads: what
    /// the producer wrote to the new partitions before that group took them over.
    pub skipped_with_latest: Option<u64>,
    /// Over both fixes.
    pub violations_after_fix: usize,
    /// The store's line at the first violation of the run.
    pub first_violation: Option<String>,
    /// The checker's account of it: key, partitions, offsets, the change that moved the key.
    pub first_violation_detail: Option<String>,
    /// The store's lines about the key, in order.
    pub key_log: Vec<String>,
    /// The run's orders are `order-<first_order_id>` to `order-<last_order_id>`.
    pub first_order_id: u32,
    pub last_order_id: u32,
    pub events: usize,
    pub failure: Option<Scenario>,
    pub fixes: Fixes,
    pub shrink: Option<Shrink>,
}

impl Figures {
    /// The key's partition before (version 1) and after (version 7), as written.
    pub fn key_partitions(outcome: Option<&Outcome>) -> (Option<i32>, Option<i32>) {
        let Some(written) = outcome.map(|o| &o.featured_written) else {
            return (None, None);
        };
        let at = |v: usize| written.get(v).and_then(|p| p.as_ref()).map(|p| p.partition);
        (at(0), at(written.len().saturating_sub(1)))
    }

    pub fn movement(&self) -> Movement {
        Movement {
            from: self.partitions_before,
            to: self.partitions_after,
            keys_total: self.keys_total,
            keys_moved: self.keys_moved,
        }
    }
}

/// The phenomenon, in one sentence; order 8842 is named when these counts move its key.
pub fn expected(before: i32, after: i32) -> String {
    let key = super::events::order_key(FEATURED_ORDER);
    let example = match super::movement::partitions_of(&key, before, after) {
        Some((from, to)) if from != to => {
            format!(" (order {FEATURED_ORDER}: cancelled before it was created)")
        }
        _ => String::new(),
    };
    format!(
        "Raising a live topic from {before} to {after} partitions makes the group apply some orders' \
         events before earlier ones{example}; over-provisioning, or a drained migration to a new topic, \
         keeps every order in order, and Kafka refuses to shrink"
    )
}

/// The checks the verdict rests on: those of the phases that ran.
pub fn verdict(f: &Figures) -> Checks {
    let mut checks = Checks::new();
    if let Some(violations) = f.violations {
        checks.check(
            "violations after the increase",
            violations > 0,
            format!(
                "{} after the increase from {} to {} partitions, over {} of {} keys moved",
                count(
                    violations as u64,
                    "ordering violation",
                    "ordering violations"
                ),
                f.partitions_before,
                f.partitions_after,
                f.keys_moved,
                f.keys_total
            ),
        );
    }
    checks.check(
        "none over-provisioned",
        f.fixes.provisioned.violations == 0,
        format!(
            "{} with {} partitions from the start",
            count(
                f.fixes.provisioned.violations as u64,
                "violation",
                "violations"
            ),
            f.fixes.provisioned.partitions
        ),
    );
    checks.check(
        "none after the migration",
        f.fixes.migration.violations == 0,
        format!(
            "{} with the drained migration to {}",
            count(
                f.fixes.migration.violations as u64,
                "violation",
                "violations"
            ),
            f.fixes
                .migration_steps
                .as_ref()
                .map_or("a new topic", |m| m.to_topic.as_str())
        ),
    );
    if let Some(shrink) = &f.shrink {
        checks.check(
            "shrinking refused",
            shrink.refused,
            match (&shrink.error, &shrink.message) {
                (Some(error), Some(message)) => format!(
                    "shrinking {} to {} was refused with {error}: {message}",
                    shrink.topic, shrink.to
                ),
                (Some(error), None) => format!("shrinking was refused: {error}"),
                _ => format!(
                    "shrinking {} from {} to {} was not refused",
                    shrink.topic, shrink.from, shrink.to
                ),
            },
        );
    }
    checks
}
