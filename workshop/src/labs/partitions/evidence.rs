//! What each phase of lab `partitions` shows once it has run: its evidence (tables, the store's
//! log, the violations) and the sentences that read it. Every number shown is passed in from
//! what the lab measured, and every sentence about an outcome says what the run's figures say,
//! also when the failure did not happen. The phases, their questions and the summary are in
//! [`super::story`].

use super::events::order_key;
use super::figures::Shrink;
use super::movement::{partitions_of, Movement};
use super::plan::Plan;
use super::run::{Latest, Outcome, Seen};
use super::store::LogLine;
use super::traffic::FEATURED_ORDER;
use crate::kit::offsets::lag_title;
use crate::lab::report::{self, count, max_and_average, percent, Align, LagRow, Narrator, Table};
use client::check::Position;

/// Violations listed one by one; the rest are counted.
const VIOLATIONS_SHOWN: usize = 8;

/// `1 record`, `12 records`.
pub(super) fn records(n: u64) -> String {
    format!("{n} record{}", if n == 1 { "" } else { "s" })
}

/// How far behind the group is, in one sentence, and why.
fn backlog(plan: &Plan, partitions: i32, lag: &[LagRow]) -> String {
    let (max, avg) = max_and_average(lag);
    let behind = lag.iter().filter(|r| r.lag().unwrap_or(0) > 0).count();
    let throughput = plan.throughput(partitions);
    if max == 0 {
        format!(
            "No partition has a backlog: the group kept up, applying up to {throughput} a round \
             against the {} produced.",
            plan.rate
        )
    } else {
        let behind = if behind == lag.len() {
            format!("All {behind} partitions have")
        } else {
            format!("{behind} of {} partitions have", lag.len())
        };
        format!(
            "{behind} a backlog, up to {} ({avg:.0} on average): the group applies at most \
             {throughput} a round, the shop produces {}.",
            records(max),
            plan.rate
        )
    }
}

pub fn backlog_evidence(
    n: &mut Narrator,
    plan: &Plan,
    featured_written: &[Option<Position>],
    lag: &[LagRow],
) {
    n.answer();
    if let Some(row) = lag.first() {
        n.say(&lag_title(&row.group, "just before the change"));
    }
    n.lag(lag);
    n.say(&backlog(plan, plan.before, lag));
    let written: Vec<&Position> = featured_written
        .iter()
        .take(featured_written.len().saturating_sub(1))
        .flatten()
        .collect();
    if let (Some(first), Some(last)) = (written.first(), written.last()) {
        let committed = lag
            .iter()
            .find(|r| r.partition == first.partition)
            .and_then(|r| r.current_offset)
            .unwrap_or(0);
        let waiting =
            (last.offset + 1 - committed.max(first.offset)).clamp(0, written.len() as i64);
        let state = match waiting {
            0 => "all of them have been applied".to_string(),
            w if w == written.len() as i64 => "all of them are still waiting".to_string(),
            w => format!("{w} of them are still waiting"),
        };
        n.say(&format!(
            "Order {FEATURED_ORDER}'s first {} events were written to {}-{} at offsets {} to {}; the \
             group's committed offset there is {committed}: {state}.",
            written.len(),
            first.topic,
            first.partition,
            first.offset,
            last.offset,
        ));
    }
}

pub fn increase_evidence(
    n: &mut Narrator,
    plan: &Plan,
    featured_written: &[Option<Position>],
    members: &[(String, Vec<i32>)],
    featured_log: &[LogLine],
    (overtaken, version): (Option<&Seen>, Option<u32>),
    latest: Option<&Latest>,
) {
    n.answer();
    let key = order_key(FEATURED_ORDER);
    if let Some(Some(cancel)) = featured_written.last() {
        let (before, after) = partitions_of(&key, plan.before, plan.after).unwrap_or((-1, -1));
        n.say(&format!(
            "order.cancelled order_id={FEATURED_ORDER} version=7 was written to {}-{} at offset {} \
             (murmur2(\"{key}\") % {} = {after}; % {} = {before}).",
            cancel.topic, cancel.partition, cancel.offset, plan.after, plan.before,
        ));
    }
    assignment(n, members);
    n.say(&format!(
        "The store's log for order {FEATURED_ORDER} so far (round: the lab's clock):"
    ));
    log_lines(n, featured_log);
    n.say(&match (overtaken, version) {
        (Some(seen), _) => {
            let v = &seen.violation;
            format!(
                "In round {} the store got version {} from {} while version {} still waited{}: order \
                 {FEATURED_ORDER} was {}.",
                seen.round,
                v.arrived_version,
                v.arrived_at,
                v.expected_version,
                v.expected_at
                    .as_ref()
                    .map_or(String::new(), |at| format!(" at {at}")),
                if v.expected_version == 1 {
                    "cancelled before it was created"
                } else {
                    "cancelled before its history was complete"
                }
            )
        }
        (None, Some(version)) => format!(
            "So far order {FEATURED_ORDER}'s events reached the store in order: it is at version \
             {version}."
        ),
        (None, None) => format!("No event of order {FEATURED_ORDER} has been applied yet."),
    });
    if let Some(latest) = latest {
        n.say(&latest_sentence(plan, latest, featured_written));
    }
}

/// What a group left with Kafka's default `auto.offset.reset=latest` made of the same increase.
fn latest_sentence(plan: &Plan, latest: &Latest, featured_written: &[Option<Position>]) -> String {
    let opening =
        "The lab's group reads a new partition from its start (auto.offset.reset=earliest). \
                   A second group with Kafka's default, latest,";
    let skipped = latest.skipped();
    if skipped == 0 {
        return format!(
            "{opening} started partitions {} to {} at their ends, which were still empty: it skipped \
             nothing this time.",
            plan.before,
            plan.after - 1
        );
    }
    let written: Vec<String> = latest
        .started_at
        .iter()
        .filter(|(_, offset)| **offset > 0)
        .map(|(p, offset)| format!("{}-{p} at offset {offset}", latest.topic))
        .collect();
    let empty = latest.started_at.len() - written.len();
    let cancelled = featured_written
        .last()
        .and_then(Option::as_ref)
        .is_some_and(|at| latest.skips(at));
    let what = match (skipped, cancelled) {
        (1, true) => format!("order {FEATURED_ORDER}'s cancellation"),
        (_, true) => format!(
            "{}, order {FEATURED_ORDER}'s cancellation among them",
            count(skipped, "event", "events")
        ),
        (_, false) => count(skipped, "event", "events"),
    };
    format!(
        "{opening} took the new partitions over after the producer had written to them and started \
         each at its end: {}{}. It never reads {what}{}. A loss, not a reordering (KAFKA-12261).",
        written.join(", "),
        match empty {
            0 => String::new(),
            1 => ", the other one at 0".to_string(),
            n => format!(", the other {n} at 0"),
        },
        if cancelled {
            format!(": for that group order {FEATURED_ORDER} is never cancelled")
        } else {
            String::new()
        }
    )
}

fn log_lines(n: &mut Narrator, lines: &[LogLine]) {
    n.log(lines.iter().map(LogLine::event).collect());
}

fn assignment(n: &mut Narrator, members: &[(String, Vec<i32>)]) {
    if members.is_empty() {
        return;
    }
    let mut table = Table::new(&[("member", Align::Left), ("partitions", Align::Left)]);
    for (member, partitions) in members {
        let list: Vec<String> = partitions.iter().map(ToString::to_string).collect();
        table.row([member.clone(), list.join(",")]);
    }
    n.say("The group after the rebalance:");
    n.table(&table);
}

pub fn count_evidence(
    n: &mut Narrator,
    plan: &Plan,
    outcome: &Outcome,
    m: &Movement,
    lag_at_change: &[LagRow],
) {
    n.answer();
    let violations = outcome.seen.len();
    let order = if violations > 0 {
        format!(
            "{} of {} reached the store before an earlier version of their order; the store refused \
             {}, and {} not end cancelled.",
            count(violations as u64, "event", "events"),
            count(outcome.keys_out_of_order as u64, "order", "orders"),
            outcome.rejected,
            count(outcome.incomplete.len() as u64, "order did", "orders did"),
        )
    } else {
        let why = if max_and_average(lag_at_change).0 == 0 {
            format!(
                "when the count changed the group had no backlog (up to {} a round against {} produced), \
                 so no moved key had an older event waiting in its old partition",
                plan.throughput(plan.before),
                plan.rate
            )
        } else if m.keys_moved == 0 {
            "no key moved".to_string()
        } else {
            "no moved key had an older event still waiting when its next one arrived".to_string()
        };
        format!("No event reached the store before an earlier version of its order: {why}.")
    };
    n.say(&format!(
        "{} of {} order keys moved ({}). {order}",
        m.keys_moved,
        m.keys_total,
        percent(m.moved_fraction()),
    ));
    let (max_lag, _) = max_and_average(&outcome.lag_at_end);
    let clean = max_lag == 0 && outcome.duplicates == 0;
    let skipped = outcome.latest.as_ref().map_or(0, Latest::skipped);
    n.say(&format!(
        "At the end the group's largest lag over the {} partitions is {max_lag}, and {} delivered \
         twice{}",
        outcome.lag_at_end.len(),
        count(outcome.duplicates, "event was", "events were"),
        match (clean, violations > 0) {
            (true, true) =>
                ": this group (earliest) lost and repeated nothing; the order is what broke.",
            (true, false) => ": this group (earliest) lost, repeated and reordered nothing.",
            (false, _) => ".",
        }
    ));
    if skipped > 0 {
        n.say(&format!(
            "With auto.offset.reset=latest, Kafka's default, {} never read: a loss, next to the \
             reordering.",
            count(skipped, "event was", "events were")
        ));
    }
    n.say(&format!(
        "The store's log for order {FEATURED_ORDER}, to the end:"
    ));
    log_lines(n, &outcome.featured_log);
    violations_table(n, &outcome.seen);
}

fn violations_table(n: &mut Narrator, seen: &[Seen]) {
    if seen.is_empty() {
        return;
    }
    let shown = seen
        .iter()
        .take(VIOLATIONS_SHOWN)
        .map(Seen::reported)
        .collect();
    n.violations(seen.len(), shown);
}

pub fn provisioned_evidence(
    n: &mut Narrator,
    plan: &Plan,
    outcome: &Outcome,
    failure: Option<&Outcome>,
) {
    n.answer();
    if failure.is_some() {
        n.say("The group's lag halfway through, when the first run's operator stepped in:");
    } else {
        n.say("The group's lag halfway through:");
    }
    n.lag(&outcome.lag_at_change);
    let compared = failure.map_or(String::new(), |failure| {
        format!(
            " With {} partitions the largest was {}.",
            failure.spec.partitions,
            max_and_average(&failure.lag_at_change).0
        )
    });
    n.say(&format!(
        "{}{compared}",
        backlog(plan, outcome.spec.partitions, &outcome.lag_at_change),
    ));
    n.say(&format!(
        "{}, {} refused by the store, {} left wrong, in {}.",
        count(outcome.seen.len() as u64, "violation", "violations"),
        count(outcome.rejected, "event", "events"),
        count(outcome.incomplete.len() as u64, "order", "orders"),
        count(u64::from(outcome.rounds), "round", "rounds")
    ));
    violations_table(n, &outcome.seen);
}

pub fn migration_evidence(n: &mut Narrator, outcome: &Outcome) {
    n.answer();
    if let Some(m) = &outcome.migration {
        n.say(&format!(
            "{} at the switch (routing version {} -> {}):",
            outcome.spec.topic,
            m.routing_version - 1,
            m.routing_version
        ));
        n.lag(&m.old_topic_lag);
        n.say(&if m.blocked_rounds > 0 {
            format!(
                "Producers were blocked for {} while the group drained {}; {} held and sent to {} \
                 after the switch. That wait, as long as the backlog, is the price of keeping order.",
                count(u64::from(m.blocked_rounds), "round", "rounds"),
                outcome.spec.topic,
                count(m.held_events as u64, "event was", "events were"),
                m.topic
            )
        } else {
            format!(
                "{} had no backlog at the switch, so the producers were not held at all.",
                outcome.spec.topic
            )
        });
    }
    n.say(&format!(
        "{}, {} refused by the store, {}, in {}. Order {FEATURED_ORDER}:",
        count(outcome.seen.len() as u64, "violation", "violations"),
        count(outcome.rejected, "event", "events"),
        count(
            outcome.fenced,
            "stale-version record",
            "stale-version records"
        ),
        count(u64::from(outcome.rounds), "round", "rounds")
    ));
    log_lines(n, &outcome.featured_log);
    violations_table(n, &outcome.seen);
}

pub fn shrink_evidence(n: &mut Narrator, s: &Shrink) {
    n.answer();
    let (level, line) = match (&s.error, s.code, &s.message) {
        (Some(error), Some(code), message) => (
            report::Level::Error,
            format!(
                "{error} ({code}){}",
                message.as_ref().map_or(String::new(), |m| format!(": {m}"))
            ),
        ),
        _ => (
            report::Level::Info,
            format!("accepted: {} now has {} partitions", s.topic, s.to),
        ),
    };
    n.log(vec![report::LogLine {
        at: None,
        level,
        source: None,
        text: line,
    }]);
    n.say(if s.refused {
        "Kafka never decreases a partition count: records, offsets and committed positions of the removed \
         partitions would have nowhere to go. A topic's count can only grow, so choose it with room to spare."
    } else {
        "This broker did not refuse as Kafka does (INVALID_PARTITIONS): Kafka never decreases a partition \
         count, since the records of the removed partitions would have nowhere to go."
    });
}
