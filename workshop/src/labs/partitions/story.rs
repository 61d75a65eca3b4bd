//! Lab `partitions` as a trainer tells it: the failure (a backlog, the partition count raised
//! from 12 to 24, order 8842 cancelled before it is created, every violation counted), then the
//! two fixes on the same traffic (enough partitions from the start; a drained migration to a
//! new topic), then Kafka refusing to shrink. Each phase opens with what is about to happen and
//! a question for the room, runs on the broker under its deadline ([`super::work`]), and shows
//! its evidence ([`super::evidence`]); the summary says what happened, why, and what to do.

use super::events::order_key;
use super::evidence::{self, records};
use super::figures::{Figures, Scenario};
use super::movement::{librdkafka_partition, Movement};
use super::plan::Plan;
use super::run::{Change, Env, Outcome, Run, Spec};
use super::traffic::{Traffic, FEATURED_ORDER};
use super::work::Phases;
use super::{lacks_create_partitions, scenario, shrink, Ran, GROUP, METADATA_MAX_AGE, TOPIC};
use crate::lab::report::{count, max_and_average, percent, Narrator, Phase, Summary};
use crate::lab::target::Cluster;
use crate::lab::LabError;

/// The titles of the phases a cluster without CreatePartitions cannot run.
pub const INCREASE_TITLE: &str = "The operator adds partitions";
pub const SHRINK_TITLE: &str = "Shrinking back";

/// The failure, both fixes and the refusal to shrink, narrated as they happen.
pub(super) async fn phases(
    cluster: &Cluster,
    plan: &Plan,
    traffic: &Traffic,
    n: &mut Narrator,
) -> Result<Ran, LabError> {
    let env = Env::new(cluster, n.tail());
    // What each phase has to do, for its deadline.
    let work = Phases { plan, traffic };
    let movement =
        Movement::count(traffic.keys(), plan.before, plan.after).map_err(LabError::Internal)?;

    // The failure: 12 partitions, a backlog, CreatePartitions to 24; on a cluster that can.
    let lacking = lacks_create_partitions(cluster).await?;
    let failure = match &lacking {
        None => Some(failure(&env, &work, plan, traffic, &movement, n).await?),
        Some(reason) => {
            let about = format!(
                "The failure needs a real CreatePartitions on a live topic ({} to {} partitions), so \
                 its backlog, the increase and the count of violations cannot run here; the two fixes \
                 can.",
                plan.before, plan.after
            );
            n.skip(
                Phase {
                    title: INCREASE_TITLE,
                    about: &about,
                    predict: "",
                },
                reason,
            );
            None
        }
    };

    // Fix 1: enough partitions from the start.
    let provisioned_topic = format!("{TOPIC}-{}", plan.provisioned);
    let about = format!(
        "Source 003's rule: provision partitions 3 to 5 times what you need, because a spare partition \
         costs far less than changing the count. Same traffic, same group, same store; topic {} has \
         {} partitions ({:.1} x {}) from the start, so the group applies up to {} a round and nothing has \
         to change.",
        cluster.name(&provisioned_topic),
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
    let provisioned = scenario(
        &env,
        &work,
        n,
        Spec {
            topic: provisioned_topic,
            partitions: plan.provisioned,
            group: format!("{GROUP}-{}", plan.provisioned),
            change: Change::Nothing,
        },
    )
    .await?;
    evidence::provisioned_evidence(n, plan, &provisioned, failure.as_ref());

    // Fix 2: a new topic, drained before keys switch.
    let (old, new) = (format!("{TOPIC}-v1"), format!("{TOPIC}-v2"));
    let about = format!(
        "When more partitions are needed after all, sources 001 and 004 move keys with a protocol, not a \
         command: create {to} with {after} partitions; block: producers hold their events (routing \
         version 1 is closed); drain: the group reads {from} to the end, lag 0 on every partition; \
         switch: routing version 2 sends producers to {to} and the group subscribes to it. Every record \
         carries its routing version in a header, and a record with an older version than the one in \
         force is refused.",
        from = cluster.name(&old),
        to = cluster.name(&new),
        after = plan.after
    );
    n.phase(Phase {
        title: "Fix 2: a new topic, drained before keys switch",
        about: &about,
        predict: "any violations? What does the fix cost?",
    });
    let migration = scenario(
        &env,
        &work,
        n,
        Spec {
            topic: old,
            partitions: plan.before,
            group: format!("{GROUP}-v1"),
            change: Change::Migrate {
                topic: new,
                partitions: plan.after,
            },
        },
    )
    .await?;
    evidence::migration_evidence(n, &migration);

    // Kafka cannot shrink.
    let shrunk = match (&failure, &lacking) {
        (Some(failure), None) => {
            let topic = &failure.spec.topic;
            let about = format!(
                "Can the operator undo the increase? An admin CreatePartitions asking {topic} for {} \
                 partitions.",
                plan.before
            );
            n.phase(Phase {
                title: SHRINK_TITLE,
                about: &about,
                predict: "what does the broker answer?",
            });
            let deadline = n.deadline(Phases::shrink());
            let shrink = deadline
                .wait("asking the topic to shrink", shrink(cluster, topic, plan))
                .await?;
            evidence::shrink_evidence(n, &shrink);
            Some(shrink)
        }
        (_, reason) => {
            let about = format!(
                "Asking {} for {} partitions after the increase needs CreatePartitions too.",
                cluster.name(TOPIC),
                plan.before
            );
            let reason = reason.as_deref().unwrap_or("the increase did not run");
            n.skip(
                Phase {
                    title: SHRINK_TITLE,
                    about: &about,
                    predict: "",
                },
                reason,
            );
            None
        }
    };

    Ok(Ran {
        movement,
        failure,
        provisioned,
        migration,
        shrink: shrunk,
        lacking,
    })
}

/// Phases 1 to 3: the backlog, the increase, every key counted.
async fn failure(
    env: &Env<'_>,
    work: &Phases<'_>,
    plan: &Plan,
    traffic: &Traffic,
    movement: &Movement,
    n: &mut Narrator,
) -> Result<Outcome, LabError> {
    let about = format!(
        "Topic {topic} has {before} partitions. A group of {members} consumers applies order events to an \
         aggregate store that checks versions: order.created is version 1, order.cancelled version 7, and \
         version v is accepted only on top of v-1. {orders} orders, 7 events each, keyed order-<id>.\n\
         The shop produces {rate} events a round. Each partition is worked by one thread of the consumer \
         that owns it, at {capacity} a round, so {before} partitions apply at most {throughput} a round. \
         The group starts a partition nobody committed on at its beginning (auto.offset.reset=earliest; \
         Kafka's default is latest, which the increase puts to the test). \
         Order {FEATURED_ORDER}'s first six events are produced just before the operator steps in, halfway \
         through.",
        topic = env.cluster.name(TOPIC),
        before = plan.before,
        members = plan.members,
        orders = traffic.orders(),
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
    let spec = Spec {
        topic: TOPIC.to_string(),
        partitions: plan.before,
        group: GROUP.to_string(),
        change: Change::Grow { to: plan.after },
    };
    let rounds = work.rounds();
    let label = "applying orders, round by round";
    let (mut run, lag) = n
        .step(work.until_change(), rounds / 2, label, async |progress| {
            let mut run = Run::start(env, plan, spec.clone(), traffic).await?;
            let lag = run.until_change(progress).await?.to_vec();
            Ok((run, lag))
        })
        .await?;
    evidence::backlog_evidence(n, plan, run.featured_written(), &lag);

    let motive = if max_and_average(&lag).0 > 0 {
        "\"Consumers can't keep up\", so the operator raises"
    } else {
        "The group keeps up, but the operator raises, for growth,"
    };
    let about = format!(
        "{motive} {} from {} to {} partitions (a real CreatePartitions). Kafka allows it: existing \
         records stay where they are, new records follow murmur2(key) % {} (the partitioner of Java's \
         producer; librdkafka's default, consistent_random, is crc32(key) % P and puts \
         order-{FEATURED_ORDER} on {} of {}). The shop's producer is not told; its metadata expires \
         after metadata.max.age.ms ({} ms here, 5 minutes in Kafka) and the next send \
         refreshes it. The next event is the cancellation of order \
         {FEATURED_ORDER}. The group's leader notices the new partitions on its own metadata refresh and \
         the group rebalances; {} partitions apply up to {} a round.",
        run.topic(),
        plan.before,
        plan.after,
        plan.after,
        librdkafka_partition(&order_key(FEATURED_ORDER), plan.before).unwrap_or(-1),
        plan.before,
        METADATA_MAX_AGE.as_millis(),
        plan.after,
        plan.throughput(plan.after)
    );
    n.phase(Phase {
        title: INCREASE_TITLE,
        about: &about,
        predict:
            "which partition does the cancellation go to, and which consumer applies it first?",
    });
    let change = work.change(&spec.change);
    n.step(change, 1, "the increase", async |p| run.change(p).await)
        .await?;
    evidence::increase_evidence(
        n,
        plan,
        run.featured_written(),
        run.assignment_after(),
        &run.featured_log(),
        (run.featured_overtaken(), run.featured_version()),
        run.latest(),
    );

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
    let (rest, label) = (work.after_change(), "the rest of the traffic");
    let failure = n
        .step(rest, rounds / 2, label, async move |progress| {
            run.after_change(progress).await?;
            run.finish().await
        })
        .await?;
    evidence::count_evidence(n, plan, &failure, movement, &lag);
    Ok(failure)
}

pub fn summary(plan: &Plan, f: &Figures) -> Summary {
    let m = f.movement();
    let mut happened = Vec::new();
    let mut why = vec![
        "Kafka keeps order only within a partition, and the partition is murmur2(key) % P: change P and a \
         key's new events go to another partition while its old ones may still wait in the first."
            .to_string(),
    ];
    match (f.violations, &f.failure) {
        (Some(violations), Some(failure)) => {
            happened.push(format!(
                "Raising the partition count from {} to {} moved {} of {} keys ({}). {} reached the store \
                 before an earlier version of their order; {} in the wrong state.",
                f.partitions_before,
                f.partitions_after,
                m.keys_moved,
                m.keys_total,
                percent(m.moved_fraction()),
                count(violations as u64, "event", "events"),
                count(failure.orders_left_wrong as u64, "order ended", "orders ended")
            ));
            if let Some(line) = &f.first_violation {
                happened.push(format!("The first: {line}"));
            }
            why.extend(failure_why(plan, violations, failure));
        }
        _ => happened.push(format!(
            "The increase did not run on this cluster; by Kafka's partitioner it would move {} of {} keys \
             ({}).",
            m.keys_moved,
            m.keys_total,
            percent(m.moved_fraction())
        )),
    }
    let skipped = f.skipped_with_latest.unwrap_or(0);
    if skipped > 0 {
        happened.push(format!(
            "A group with Kafka's default auto.offset.reset=latest never read {} the producer wrote to \
             the new partitions before that group took them over: a loss, next to the reordering.",
            count(skipped, "event", "events")
        ));
        why.push(
            "A group starts a partition nobody committed on at auto.offset.reset: with latest, records \
             written to a new partition before the group takes it over are behind its start."
                .into(),
        );
    }
    happened.push(format!(
        "With {} partitions from the start, and with a drained migration to a new topic: {}.",
        f.fixes.provisioned.partitions,
        count(f.violations_after_fix as u64, "violation", "violations")
    ));
    if let Some(shrink) = &f.shrink {
        happened.push(match (shrink.refused, &shrink.message) {
            (true, Some(message)) => format!("Shrinking back was refused: {message}"),
            (true, None) => "Shrinking back was refused (INVALID_PARTITIONS).".to_string(),
            (false, _) => "Shrinking back was not refused.".to_string(),
        });
    }
    Summary {
        happened,
        why,
        what_to_do: vec![
            "Provision partitions for years of growth (3 to 5 times today's need); scale consumers within them.".into(),
            "If the count must change: a new topic and a versioned switch (block, drain to lag 0, switch).".into(),
            "Make consumers check versions and park or retry early events instead of dropping them.".into(),
            "Give groups on topics that may grow auto.offset.reset=earliest (Kafka's default, latest, skips \
             what lands on a new partition before the group takes it over)."
                .into(),
            "Before any change, count the keys that would move: client partition KEY --partitions N --to M.".into(),
        ],
    }
}

/// Why the increase reordered events, or why it did not.
fn failure_why(plan: &Plan, violations: usize, failure: &Scenario) -> Vec<String> {
    if violations > 0 {
        return vec![
            "The two partitions are read by different consumers at their own pace; the one with a backlog \
             loses the race to an idle one, so the store sees version 7 before version 1."
                .into(),
            "Nothing failed loudly in Kafka: CreatePartitions succeeded, the producer and the group did what \
             their metadata told them. The damage shows up only in the application's data."
                .into(),
        ];
    }
    // The largest capacity at which the group falls behind: capacity x partitions < rate.
    let behind = u64::from(plan.rate)
        .div_ceil(plan.before.max(1) as u64)
        .saturating_sub(1);
    vec![format!(
        "Here no moved key had an older event waiting: the largest lag when the count changed was {}, \
         so there was no race to lose{}.",
        failure.max_lag_at_change,
        if behind > 0 {
            format!(" (with --capacity {behind} or less the group falls behind)")
        } else {
            String::new()
        }
    )]
}
