//! The narration of lab `partitions`: each phase's opening and evidence, and the summary. Every
//! number shown is passed in from what the lab measured.

use super::checker::Position;
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

/// Violations listed one by one; the rest are counted.
const VIOLATIONS_SHOWN: usize = 8;

pub fn backlog_opening(n: &mut Narrator, plan: &Plan, topic: &str, orders: usize) {
    let about = format!(
        "Topic {topic} has {before} partitions. A consumer group of {members} applies order events to an aggregate\n\
         store that checks versions: order.created is version 1, order.cancelled version 7, and version v is\n\
         accepted only on top of v-1. {orders} orders, 7 events each, keyed order-<id>.\n\
         The shop produces {rate} events a round. A partition has at most one consumer in a group, and one\n\
         consumer applies {capacity} record(s) a round, so {before} partitions apply {throughput} a round:\n\
         {verdict}. Order {FEATURED_ORDER} (key order-{FEATURED_ORDER})\n\
         is created, paid, packed and refunded just before the operator steps in, halfway through.",
        before = plan.before,
        members = plan.members,
        rate = plan.rate,
        capacity = plan.capacity,
        throughput = plan.throughput(plan.before),
        verdict = if plan.falls_behind() {
            "the group falls behind and every partition builds a backlog"
        } else {
            "the group keeps up (with these flags there is no backlog to speak of)"
        },
    );
    n.phase(Phase {
        title: "Consumers that cannot keep up",
        about: &about,
        predict: "how far behind is each partition when the operator steps in? Where are order 8842's events?",
    });
}

pub fn backlog_evidence(n: &mut Narrator, featured_written: &[Option<Position>], lag: &[LagRow]) {
    n.answer();
    n.say(
        "The group's lag as kafka-consumer-groups.sh --describe shows it, just before the change:",
    );
    n.lag(lag);
    let written: Vec<&Position> = featured_written
        .iter()
        .take(featured_written.len().saturating_sub(1))
        .flatten()
        .collect();
    if let (Some(first), Some(last)) = (written.first(), written.last()) {
        let committed = lag
            .iter()
            .find(|r| r.partition == first.partition)
            .and_then(|r| r.current_offset);
        n.say(&format!(
            "Order {FEATURED_ORDER}'s first six events were written to {}-{} at offsets {} to {}; the group's\n\
             committed offset there is {} (the next record it will apply). {}",
            first.topic,
            first.partition,
            first.offset,
            last.offset,
            committed.map_or("-".to_string(), |c| c.to_string()),
            match committed {
                Some(c) if c <= first.offset => "All six are still waiting in the backlog.",
                _ => "Some of them have already been applied.",
            }
        ));
    }
}

pub fn increase_opening(n: &mut Narrator, topic: &str, plan: &Plan, max_age_ms: u128) {
    let about = format!(
        "\"Consumers can't keep up\": the operator raises {topic} from {} to {} partitions (a real\n\
         CreatePartitions). Kafka allows it: existing records stay where they are, new records follow\n\
         murmur2(key) % {}. The shop's producer is not told; its metadata expires after\n\
         metadata.max.age.ms ({max_age_ms} ms here, 5 minutes in Kafka) and the next send refreshes it. The\n\
         next event is the cancellation of order {FEATURED_ORDER}. The group's leader notices the new\n\
         partitions on its own metadata refresh and the group rebalances; {} partitions apply {} a round.",
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
) {
    n.answer();
    let key = order_key(FEATURED_ORDER);
    if let Some(Some(cancel)) = featured_written.last() {
        let (before, after) = partitions_of(&key, plan.before, plan.after).unwrap_or((-1, -1));
        n.say(&format!(
            "order.cancelled order_id={FEATURED_ORDER} version=7 was written to {}-{} at offset {}\n\
             (murmur2(\"{key}\") % {} = {after}; % {} = {before}).",
            cancel.topic, cancel.partition, cancel.offset, plan.after, plan.before,
        ));
    }
    assignment(n, members);
    n.say(&format!(
        "The store's log for order {FEATURED_ORDER} so far (round: the lab's clock):"
    ));
    log_lines(n, featured_log);
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
        "The rest of the traffic follows, then the group drains every partition. The ordering checker\n\
         saw every event the consumers handed to the store: per key, versions must arrive in order.\n\
         Going from {} to {} partitions, a key keeps its partition only if murmur2(key) % {} < {}.",
        plan.before, plan.after, plan.after, plan.before
    );
    n.phase(Phase {
        title: "Counting every key",
        about: &about,
        predict: "how many of the run's keys moved, and how many events were applied out of order?",
    });
}

pub fn count_evidence(n: &mut Narrator, outcome: &Outcome, m: &Movement) {
    n.answer();
    n.say(&format!(
        "{} of {} order keys moved ({}). {} event(s) of {} key(s) reached the store before an\n\
         earlier version of their order; the store refused {} event(s), and {} order(s) did not end\n\
         cancelled.",
        m.keys_moved,
        m.keys_total,
        percent(m.moved_fraction()),
        outcome.seen.len(),
        outcome.keys_out_of_order,
        outcome.rejected,
        outcome.incomplete.len(),
    ));
    let (max_lag, _) = max_and_average(&outcome.lag_at_end);
    n.say(&format!(
        "At the end the group's largest lag over the {} partitions is {max_lag}, and {} event(s) were\n\
         delivered twice{}",
        outcome.lag_at_end.len(),
        outcome.duplicates,
        if max_lag == 0 && outcome.duplicates == 0 {
            ": nothing was lost or repeated in Kafka; the order is what broke."
        } else {
            "."
        }
    ));
    n.say(&format!(
        "The store's log for order {FEATURED_ORDER}, to the end:"
    ));
    log_lines(n, &outcome.featured_log);
    violations(n, &outcome.seen);
}

fn violations(n: &mut Narrator, seen: &[Seen]) {
    if seen.is_empty() {
        return;
    }
    let shown = seen
        .iter()
        .take(VIOLATIONS_SHOWN)
        .map(|s| {
            let v = &s.violation;
            report::Violation {
                at: format!("round {}", s.round),
                key: v.key.clone(),
                found: format!("v{} at {}", v.arrived_version, v.arrived_at),
                expected: match &v.expected_at {
                    Some(at) => format!("v{} at {at}", v.expected_version),
                    None => format!("v{}", v.expected_version),
                },
                cause: v.change.as_ref().map_or("-".to_string(), |c| {
                    format!(
                        "{} -> {} partitions ({} -> {})",
                        c.from.partitions, c.to.partitions, c.partition_before, c.partition_after
                    )
                }),
            }
        })
        .collect();
    n.violations(seen.len(), shown);
}

pub fn provisioned_opening(n: &mut Narrator, plan: &Plan, topic: &str) {
    let about = format!(
        "Seed 003's rule: provision partitions 3 to 5 times what you need, because a spare partition\n\
         costs far less than changing the count. Same traffic, same group, same store; topic {topic}\n\
         has {} partitions ({:.1} x {}) from the start, so the group applies {} records a round and\n\
         nothing has to change.",
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

pub fn scenario_evidence(n: &mut Narrator, outcome: &Outcome, lag_title: &str) {
    n.answer();
    n.say(lag_title);
    n.lag(&outcome.lag_at_change);
    n.say(&format!(
        "{} violation(s), {} event(s) refused by the store, {} order(s) left wrong, in {} rounds.",
        outcome.seen.len(),
        outcome.rejected,
        outcome.incomplete.len(),
        outcome.rounds
    ));
    violations(n, &outcome.seen);
}

pub fn migration_opening(n: &mut Narrator, plan: &Plan, from: &str, to: &str) {
    let about = format!(
        "When more partitions are needed after all, seeds 001 and 004 move keys with a protocol, not a\n\
         command: create {to} with {after} partitions; block: producers hold their events (routing version 1\n\
         is closed); drain: the group reads {from} to the end, lag 0 on every partition; switch: routing\n\
         version 2 sends producers to {to} and the group subscribes to it. Every record carries its routing\n\
         version in a header, and a record with an older version than the one in force is refused.",
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
        n.say(&format!(
            "Producers were blocked for {} round(s) while the group drained {}; {} event(s) were held\n\
             and sent to {} after the switch. That wait, as long as the backlog, is the price of\n\
             keeping order.",
            m.blocked_rounds, outcome.spec.topic, m.held_events, m.topic
        ));
    }
    n.say(&format!(
        "{} violation(s), {} event(s) refused by the store, {} stale-version record(s), in {} rounds. Order {FEATURED_ORDER}:",
        outcome.seen.len(),
        outcome.rejected,
        outcome.fenced,
        outcome.rounds
    ));
    log_lines(n, &outcome.featured_log);
    violations(n, &outcome.seen);
}

pub fn shrink_opening(n: &mut Narrator, s: &Shrink) {
    let about = format!(
        "Can the operator undo the increase? An admin CreatePartitions asking {} for {} partitions.",
        s.topic, s.to
    );
    n.phase(Phase {
        title: "Shrinking back",
        about: &about,
        predict: "what does the broker answer?",
    });
}

pub fn shrink_evidence(n: &mut Narrator, s: &Shrink) {
    n.answer();
    let line = match (&s.error, s.code, &s.message) {
        (Some(error), Some(code), message) => format!(
            "{error} ({code}){}",
            message.as_ref().map_or(String::new(), |m| format!(": {m}"))
        ),
        _ => format!("accepted: {} now has {} partitions", s.topic, s.to),
    };
    n.log(vec![report::LogLine {
        at: None,
        level: if s.refused {
            report::Level::Error
        } else {
            report::Level::Info
        },
        source: None,
        text: line,
    }]);
    n.say(
        "Kafka never decreases a partition count: records, offsets and committed positions of the removed\n\
         partitions would have nowhere to go. A topic's count can only grow, so choose it with room to spare.",
    );
}

pub fn summary(f: &Figures) -> Summary {
    let m = f.movement();
    let mut happened = vec![format!(
        "Raising the partition count from {} to {} moved {} of {} keys ({}). {} event(s) reached\n\
         the store before an earlier version of their order; {} order(s) ended in the wrong state.",
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
    if f.shrink.refused {
        happened.push(format!(
            "Shrinking back was refused:\n{}",
            f.shrink.message.as_deref().unwrap_or("INVALID_PARTITIONS")
        ));
    }
    Summary {
        happened,
        why: vec![
            "Kafka keeps order only within a partition, and the partition is murmur2(key) % P: change P and a\n\
             key's new events go to another partition while its old ones still wait in the first."
                .into(),
            "The two partitions are read by different consumers at their own pace; the one with a backlog\n\
             loses the race to an idle one, so the store sees version 7 before version 1."
                .into(),
            "Nothing failed loudly in Kafka: CreatePartitions succeeded, the producer and the group did what\n\
             their metadata told them. The damage shows up only in the application's data."
                .into(),
        ],
        what_to_do: vec![
            "Provision partitions for years of growth (3 to 5 times today's need); scale consumers within them.".into(),
            "If the count must change: a new topic and a versioned switch (block, drain to lag 0, switch).".into(),
            "Make consumers check versions and park or retry early events instead of dropping them.".into(),
            "Before any change, count the keys that would move: client partition KEY --partitions N --to M.".into(),
        ],
    }
}
