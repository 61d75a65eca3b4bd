//! The narration of lab `partitions`: each phase's opening and evidence, and the summary. Every
//! number shown is passed in from what the lab measured, and every sentence about an outcome
//! says what the run's figures say, also when the failure did not happen.

use super::events::order_key;
use super::figures::{Figures, Shrink};
use super::movement::{partitions_of, Movement};
use super::plan::Plan;
use super::run::{Outcome, Seen};
use super::store::LogLine;
use super::traffic::FEATURED_ORDER;
use crate::report::{
    self, max_and_average, percent, Align, LagRow, Narrator, Phase, Summary, Table,
};
use client::check::Position;

/// Violations listed one by one; the rest are counted.
const VIOLATIONS_SHOWN: usize = 8;

/// `1 record`, `12 records`.
fn records(n: u64) -> String {
    format!("{n} record{}", if n == 1 { "" } else { "s" })
}

pub fn backlog_opening(n: &mut Narrator, plan: &Plan, topic: &str, orders: usize) {
    let about = format!(
        "Topic {topic} has {before} partitions. A group of {members} consumers applies order events to an \
         aggregate store that checks versions: order.created is version 1, order.cancelled version 7, and \
         version v is accepted only on top of v-1. {orders} orders, 7 events each, keyed order-<id>.\n\
         The shop produces {rate} events a round. Each partition is worked by one thread of the consumer \
         that owns it, at {capacity} a round, so {before} partitions apply at most {throughput} a round. \
         Order {FEATURED_ORDER}'s first six events are produced just before the operator steps in, halfway \
         through.",
        before = plan.before,
        members = plan.members,
        rate = plan.rate,
        capacity = records(u64::from(plan.capacity)),
        throughput = plan.throughput(plan.before),
    );
    n.phase(Phase {
        title: if plan.falls_behind() {
            "Consumers that cannot keep up"
        } else {
            "Consumers with capacity to spare"
        },
        about: &about,
        predict: "how far behind is each partition when the operator steps in? Where are order 8842's events?",
    });
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
        n.say(&format!(
            "kafka-consumer-groups.sh --describe --group {}, just before the change:",
            row.group
        ));
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

pub fn increase_opening(
    n: &mut Narrator,
    topic: &str,
    plan: &Plan,
    max_age_ms: u128,
    lag: &[LagRow],
) {
    let motive = if max_and_average(lag).0 > 0 {
        "\"Consumers can't keep up\", so the operator raises"
    } else {
        "The group keeps up, but the operator raises, for growth,"
    };
    let about = format!(
        "{motive} {topic} from {} to {} partitions (a real CreatePartitions). Kafka allows it: existing \
         records stay where they are, new records follow murmur2(key) % {}. The shop's producer is not \
         told; its metadata expires after metadata.max.age.ms ({max_age_ms} ms here, 5 minutes in \
         Kafka) and the next send refreshes it. The next event is the cancellation of order \
         {FEATURED_ORDER}. The group's leader notices the new partitions on its own metadata refresh and \
         the group rebalances; {} partitions apply up to {} a round.",
        plan.before,
        plan.after,
        plan.after,
        plan.after,
        plan.throughput(plan.after)
    );
    n.phase(Phase {
        title: "The operator adds partitions",
        about: &about,
        predict:
            "which partition does the cancellation go to, and which consumer applies it first?",
    });
}

pub fn increase_evidence(
    n: &mut Narrator,
    plan: &Plan,
    featured_written: &[Option<Position>],
    members: &[(String, Vec<i32>)],
    featured_log: &[LogLine],
    (overtaken, version): (Option<&Seen>, Option<u32>),
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

pub fn count_opening(n: &mut Narrator, plan: &Plan) {
    let about = format!(
        "The rest of the traffic follows, then the group drains every partition. The ordering checker \
         sees every event the consumers hand to the store: per key, versions must arrive in order. Going \
         from {} to {} partitions, a key keeps its partition only if murmur2(key) % {} < {}.",
        plan.before, plan.after, plan.after, plan.before
    );
    n.phase(Phase {
        title: "Counting every key",
        about: &about,
        predict: "how many of the run's keys moved, and how many events were applied out of order?",
    });
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
            "{violations} event(s) of {} order(s) reached the store before an earlier version of their \
             order; the store refused {}, and {} order(s) did not end cancelled.",
            outcome.keys_out_of_order,
            outcome.rejected,
            outcome.incomplete.len(),
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
    n.say(&format!(
        "At the end the group's largest lag over the {} partitions is {max_lag}, and {} event(s) were \
         delivered twice{}",
        outcome.lag_at_end.len(),
        outcome.duplicates,
        match (clean, violations > 0) {
            (true, true) => ": nothing was lost or repeated in Kafka; the order is what broke.",
            (true, false) => ": nothing was lost, repeated or reordered.",
            (false, _) => ".",
        }
    ));
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

pub fn provisioned_opening(n: &mut Narrator, plan: &Plan, topic: &str) {
    let about = format!(
        "Source 003's rule: provision partitions 3 to 5 times what you need, because a spare partition \
         costs far less than changing the count. Same traffic, same group, same store; topic {topic} has \
         {} partitions ({:.1} x {}) from the start, so the group applies up to {} a round and nothing has \
         to change.",
        plan.provisioned,
        f64::from(plan.provisioned) / f64::from(plan.before),
        plan.before,
        plan.throughput(plan.provisioned)
    );
    n.phase(Phase {
        title: "Fix 1: enough partitions from the start",
        about: &about,
        predict: "any violations? Any backlog?",
    });
}

pub fn provisioned_evidence(n: &mut Narrator, plan: &Plan, outcome: &Outcome, failure: &Outcome) {
    n.answer();
    n.say("The group's lag halfway through, when the first run's operator stepped in:");
    n.lag(&outcome.lag_at_change);
    let (max, _) = max_and_average(&failure.lag_at_change);
    n.say(&format!(
        "{} With {} partitions the largest was {max}.",
        backlog(plan, outcome.spec.partitions, &outcome.lag_at_change),
        failure.spec.partitions
    ));
    n.say(&format!(
        "{} violation(s), {} event(s) refused by the store, {} order(s) left wrong, in {} rounds.",
        outcome.seen.len(),
        outcome.rejected,
        outcome.incomplete.len(),
        outcome.rounds
    ));
    violations_table(n, &outcome.seen);
}

pub fn migration_opening(n: &mut Narrator, plan: &Plan, from: &str, to: &str) {
    let about = format!(
        "When more partitions are needed after all, sources 001 and 004 move keys with a protocol, not a \
         command: create {to} with {after} partitions; block: producers hold their events (routing \
         version 1 is closed); drain: the group reads {from} to the end, lag 0 on every partition; \
         switch: routing version 2 sends producers to {to} and the group subscribes to it. Every record \
         carries its routing version in a header, and a record with an older version than the one in \
         force is refused.",
        after = plan.after
    );
    n.phase(Phase {
        title: "Fix 2: a new topic, drained before keys switch",
        about: &about,
        predict: "any violations? What does the fix cost?",
    });
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
                "Producers were blocked for {} round(s) while the group drained {}; {} event(s) were held \
                 and sent to {} after the switch. That wait, as long as the backlog, is the price of \
                 keeping order.",
                m.blocked_rounds, outcome.spec.topic, m.held_events, m.topic
            )
        } else {
            format!(
                "{} had no backlog at the switch, so the producers were not held at all.",
                outcome.spec.topic
            )
        });
    }
    n.say(&format!(
        "{} violation(s), {} event(s) refused by the store, {} stale-version record(s), in {} rounds. \
         Order {FEATURED_ORDER}:",
        outcome.seen.len(),
        outcome.rejected,
        outcome.fenced,
        outcome.rounds
    ));
    log_lines(n, &outcome.featured_log);
    violations_table(n, &outcome.seen);
}

pub fn shrink_opening(n: &mut Narrator, topic: &str, to: i32) {
    let about = format!(
        "Can the operator undo the increase? An admin CreatePartitions asking {topic} for {to} partitions."
    );
    n.phase(Phase {
        title: "Shrinking back",
        about: &about,
        predict: "what does the broker answer?",
    });
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

pub fn summary(plan: &Plan, f: &Figures) -> Summary {
    let m = f.movement();
    let mut happened = vec![format!(
        "Raising the partition count from {} to {} moved {} of {} keys ({}). {} event(s) reached the \
         store before an earlier version of their order; {} order(s) ended in the wrong state.",
        f.partitions_before,
        f.partitions_after,
        m.keys_moved,
        m.keys_total,
        percent(m.moved_fraction()),
        f.violations,
        f.failure.orders_left_wrong
    )];
    if let Some(line) = &f.first_violation {
        happened.push(format!("The first: {line}"));
    }
    happened.push(format!(
        "With {} partitions from the start, and with a drained migration to a new topic: {} violation(s).",
        f.fixes.provisioned.partitions, f.violations_after_fix
    ));
    happened.push(match (&f.shrink.refused, &f.shrink.message) {
        (true, Some(message)) => format!("Shrinking back was refused: {message}"),
        (true, None) => "Shrinking back was refused (INVALID_PARTITIONS).".to_string(),
        (false, _) => "Shrinking back was not refused.".to_string(),
    });
    let mut why = vec![
        "Kafka keeps order only within a partition, and the partition is murmur2(key) % P: change P and a \
         key's new events go to another partition while its old ones may still wait in the first."
            .to_string(),
    ];
    if f.violations > 0 {
        why.push(
            "The two partitions are read by different consumers at their own pace; the one with a backlog \
             loses the race to an idle one, so the store sees version 7 before version 1."
                .into(),
        );
        why.push(
            "Nothing failed loudly in Kafka: CreatePartitions succeeded, the producer and the group did what \
             their metadata told them. The damage shows up only in the application's data."
                .into(),
        );
    } else {
        // The largest capacity at which the group falls behind: capacity x partitions < rate.
        let behind = u64::from(plan.rate)
            .div_ceil(plan.before.max(1) as u64)
            .saturating_sub(1);
        why.push(format!(
            "Here no moved key had an older event waiting: the largest lag when the count changed was {}, \
             so there was no race to lose{}.",
            f.failure.max_lag_at_change,
            if behind > 0 {
                format!(" (with --capacity {behind} or less the group falls behind)")
            } else {
                String::new()
            }
        ));
    }
    Summary {
        happened,
        why,
        what_to_do: vec![
            "Provision partitions for years of growth (3 to 5 times today's need); scale consumers within them.".into(),
            "If the count must change: a new topic and a versioned switch (block, drain to lag 0, switch).".into(),
            "Make consumers check versions and park or retry early events instead of dropping them.".into(),
            "Before any change, count the keys that would move: client partition KEY --partitions N --to M.".into(),
        ],
    }
}
