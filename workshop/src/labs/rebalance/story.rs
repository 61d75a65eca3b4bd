//! The narration of lab `rebalance`, in the order a trainer tells it: each phase's opening,
//! question and evidence, then the summary. Every number shown comes from the figures; every log
//! line is one a member wrote during the run. The tables and log excerpts are built in
//! [`evidence`](super::evidence).

use client::GroupConfig;

use super::evidence::{
    assignors_table, batches_table, euros, generations_panel, incident_lines, members_panel,
    members_table, membership_table, ms_of, ordinal, processed_per_member, redeliveries_said,
    redeliveries_table, secs, setting, twice_panel,
};
use super::figures::Figures;
use super::plan::{Kind, Plan};
use super::scenario::Outcome;
use crate::lab::report::{count, thousands, Narrator, Phase, Summary};

/// The at-least-once runs' phases, from the baseline run's journal and every run's figures.
pub fn tell(n: &mut Narrator, plan: &Plan, f: &Figures, outcomes: &[Outcome], paused: bool) {
    let Some(base) = outcomes.iter().find(|o| o.spec.kind == Kind::Baseline) else {
        return;
    };
    setup(n, plan, f, base, paused);
    stall(n, f, base);
    redeliveries(n, plan, f, base);
    cooperative(n, f);
    static_membership(n, f);
    small_batch(n, f);
    colocated(n, f);
    ttl(n, f);
}

fn setup(n: &mut Narrator, plan: &Plan, f: &Figures, base: &Outcome, paused: bool) {
    let t = &plan.timing;
    let clock = if paused {
        "The broker is embedded and shares tokio's paused clock with the members: every timeout \
         elapses in virtual time, exactly, and the whole run takes a moment of real time."
    } else {
        "Against a cluster time is real, so the timeouts are the shortest a broker accepts, and \
         the stall is stretched to outlast the cluster's own rebalances, measured first."
    };
    let kafka = GroupConfig::new(&f.group);
    let about = format!(
        "Topic `{}` ({} partitions) holds {} payments keyed by account. Group `{}` has four \
         members, each a real consumer of our client: poll up to {} records, apply each payment to \
         the ledger ({} each), commit the batch's offsets, poll again (at-least-once). \
         max.poll.records {}, session.timeout.ms {}, heartbeat.interval.ms {}, \
         max.poll.interval.ms {}: with Kafka's default, this lab's stall would pass unnoticed; \
         services that must notice a stuck consumer lower it.\n{clock}",
        f.topic,
        f.partitions,
        thousands(f.payments as u64),
        f.group,
        f.max_poll_records,
        secs(f.processing_ms),
        setting(
            f.max_poll_records as u64,
            kafka.max_poll_records as u64,
            |n| n.to_string()
        ),
        setting(f.session_timeout_ms, ms_of(kafka.session_timeout), secs),
        setting(
            f.heartbeat_interval_ms,
            ms_of(kafka.heartbeat_interval),
            secs
        ),
        setting(f.max_poll_interval_ms, ms_of(kafka.max_poll_interval), secs),
    );
    n.phase(Phase {
        title: "The billing service",
        about: &about,
        predict: &format!(
            "{} will stop for {} between processing a batch and committing it. What becomes of \
             the payments of that batch?",
            f.stalled_member,
            secs(t.stall.as_millis() as u64)
        ),
    });
    n.answer();
    n.panel(members_panel(f, base));
    n.table(&members_table(f, base));
}

fn stall(n: &mut Narrator, f: &Figures, base: &Outcome) {
    let about = format!(
        "After the batch in which it processes its {} payment, {} stops for {} before committing: a GC \
         pause, or a payment-gateway call that hangs. max.poll.interval.ms is {} here (Kafka's \
         default, {}, would outlast the stall).",
        ordinal(f.stall_after_payments),
        f.stalled_member,
        secs(f.stall_ms),
        secs(f.max_poll_interval_ms),
        secs(ms_of(GroupConfig::new(&f.group).max_poll_interval)),
    );
    n.phase(Phase {
        title: "A stall longer than max.poll.interval.ms",
        about: &about,
        predict: "are the payments of that batch lost, or applied twice? How many?",
    });
    n.answer();
    n.panel(twice_panel(f));
    n.say("As the members logged it (time since the lab started):");
    n.log(incident_lines(base, f.stalled_member));
    n.say(&format!(
        "{} resumed and tried to commit. Its consumer had left the group, so it failed the commit \
         itself without sending it, as Java's consumer does (CommitFailedException: \"not part of \
         an active group\"). Sent anyway, with {}'s old generation and member id, the \
         coordinator answers {}.",
        f.stalled_member,
        f.stalled_member,
        f.late_commit_broker_answer.as_deref().unwrap_or("nothing"),
    ));
    let balanced = f.processed == f.committed + f.duplicates;
    n.say(&format!(
        "{} processed {} payments it never committed. The ledger applied {} payments twice ({} charged \
         twice): processed {}, committed {}, duplicates {}{}.",
        f.stalled_member,
        f.processed_uncommitted,
        f.duplicates,
        euros(f.double_charged_cents),
        thousands(f.processed),
        thousands(f.committed),
        f.duplicates,
        if balanced {
            " (processed = committed + duplicates)"
        } else {
            " (processed is not committed + duplicates: see the checks)"
        }
    ));
}

fn redeliveries(n: &mut Narrator, plan: &Plan, f: &Figures, base: &Outcome) {
    n.phase(Phase {
        title: "Redelivery accounting, per generation",
        about: &format!(
            "Every payment the ledger applied twice, by partition and offset: who applied it first, in \
             which generation of the group, and who applied it again. A new owner starts at the \
             committed offset, as the lag view below showed it {} into the stall (ours: the \
             offsets and lag `kafka-consumer-groups.sh --describe --group {}` reports, CONSUMER \
             being the member's client id, without the tool's GROUP, CONSUMER-ID and HOST).",
            secs(plan.timing.lag_snapshot.as_millis() as u64),
            f.group,
        ),
        predict: "whose generation is the first application in, and whose the second?",
    });
    n.answer();
    n.panel(generations_panel(f));
    n.lag(&base.lag_during);
    n.say(&processed_per_member(f, base));
    n.table(&redeliveries_table(f));
    n.say(&redeliveries_said(f, base));
}

fn cooperative(n: &mut Narrator, f: &Figures) {
    n.phase(Phase {
        title: "Eager vs cooperative-sticky",
        about: "The same stall with assignor cooperative-sticky (KIP-429): members keep what they own \
                through a rebalance and give up only the partitions that move. Counted below: partitions \
                revoked from members that kept running, from the stall until the group settled, and how \
                long each waited for its next owner.",
        predict: "how many partitions stop on members that were never stuck?",
    });
    n.answer();
    let b = &f.scenarios["baseline"];
    let c = &f.scenarios["cooperative"];
    n.table(&assignors_table(f));
    let fewer = if c.revoked.partitions < b.revoked.partitions {
        format!(
            "Eager members gave up everything they owned at each of the {} rebalances and waited for the \
             slowest member to rejoin: {} partitions stopped on members that were never stuck. \
             Cooperative members kept consuming what they kept: only {} stopped, each for a second \
             rebalance that the others learn of at their next heartbeat.",
            b.rebalances, b.revoked.partitions, c.revoked.partitions
        )
    } else {
        format!(
            "Cooperative-sticky did not stop fewer partitions here: {} against {} eager.",
            c.revoked.partitions, b.revoked.partitions
        )
    };
    let kept = if b.duplicates > 0 && c.duplicates > 0 {
        format!(
            "Neither saves {}'s uncommitted batch: {} and {} duplicates.",
            f.stalled_member, b.duplicates, c.duplicates
        )
    } else {
        format!(
            "Duplicates: {} eager, {} cooperative.",
            b.duplicates, c.duplicates
        )
    };
    n.say(&format!("{fewer} {kept}"));
}

fn static_membership(n: &mut Narrator, f: &Figures) {
    let about = format!(
        "{} restarts (its process is replaced) and is back after {}, within session.timeout.ms ({}). \
         Once as a dynamic member (close sends LeaveGroup, the new process joins with a new member \
         id), once with group.instance.id (KIP-345: no LeaveGroup, the instance takes its place back).",
        f.restarted_member,
        secs(f.restart_downtime_ms),
        secs(f.session_timeout_ms)
    );
    n.phase(Phase {
        title: "Static membership",
        about: &about,
        predict: "how many rebalances does each restart cost the group?",
    });
    n.answer();
    n.table(&membership_table(f));
    let st = &f.scenarios["static"];
    n.say(&if st.rebalances == 0 {
        format!(
            "The static member came back within the session timeout and took its old assignment in the \
             same generation: 0 rebalances, {} partitions revoked from the others. Past the session \
             timeout it is removed like any.",
            st.revoked.partitions
        )
    } else {
        format!(
            "The static restart still cost {}, {} revoked from the others.",
            count(st.rebalances, "rebalance", "rebalances"),
            count(st.revoked.partitions, "partition", "partitions"),
        )
    });
}

fn small_batch(n: &mut Narrator, f: &Figures) {
    n.phase(Phase {
        title: "A smaller max.poll.records",
        about: &format!(
            "The same stall with max.poll.records {} instead of {}: the member commits after every \
             {} payments.",
            f.small_max_poll_records, f.max_poll_records, f.small_max_poll_records
        ),
        predict: "how many duplicates now?",
    });
    n.answer();
    n.table(&batches_table(f));
    let (big, small) = (f.duplicates, f.duplicates_small_poll_batch);
    n.say(&if small > 0 && small < big {
        format!(
            "Nothing is lost to a stall: what the member processed and did not commit, at most one \
             batch, is processed again: {small} payments instead of {big}. Smaller batches shrink \
             it, at the price of a commit per few records. Fewer duplicates, never none."
        )
    } else {
        format!("{small} duplicates with the smaller batches, {big} with the larger.")
    });
}

fn colocated(n: &mut Narrator, f: &Figures) {
    n.phase(Phase {
        title: "Dedup in the same transaction, keyed by the partition key",
        about: "Source 003's `processed_commands (account_id, command_id)`: the ledger is sharded by \
                account like the topic, the dedup row lives in the account's shard, and inserting it and \
                applying the charge are one local transaction. The same deliveries as the first run.",
        predict: "how many charges are applied twice?",
    });
    n.answer();
    n.say(&format!(
        "{} redeliveries found their row and were refused; duplicate effects: {}; charged twice: {}.",
        f.redeliveries_refused_colocated_dedup,
        f.duplicate_effects_colocated_dedup,
        euros(f.double_charged_cents_colocated_dedup)
    ));
}

fn ttl(n: &mut Narrator, f: &Figures) {
    n.phase(Phase {
        title: "Dedup in a separate store with a TTL",
        about: &format!(
            "`SET cmd:<payment> NX EX ttl` in a cache, then the charge in the ledger: two stores, two \
             steps. The TTL is {}, chosen \"so the cache does not grow\". The same deliveries again.",
            secs(f.dedup_ttl_ms)
        ),
        predict: "does the cache stop the replay?",
    });
    n.answer();
    let replay = f.shortest_replay_ms;
    n.say(&match replay {
        Some(ms) if ms > f.dedup_ttl_ms && f.duplicates_ttl_dedup > 0 => format!(
            "The replay came {} after the first application, when the keys had expired: {} duplicates, \
             {} charged twice. A dedup TTL must outlast the longest replay (a topic's retention).",
            secs(ms),
            f.duplicates_ttl_dedup,
            euros(f.double_charged_cents_ttl_dedup)
        ),
        Some(ms) => format!(
            "The replay came {} after the first application, with a TTL of {}: {} duplicates, {} \
             charged twice.",
            secs(ms),
            secs(f.dedup_ttl_ms),
            f.duplicates_ttl_dedup,
            euros(f.double_charged_cents_ttl_dedup)
        ),
        None => "Nothing was replayed, so the cache had nothing to stop.".to_string(),
    });
}

pub fn summary(f: &Figures) -> Summary {
    let removed = match (&f.late_commit_broker_answer, f.failed_commits) {
        (Some(answer), failed) if failed > 0 => format!(
            "its consumer left the group, the group rebalanced, and its late commit failed in the \
             consumer, unsent, as in Java (sent anyway, the coordinator answers {answer})"
        ),
        _ => "yet its late commit did not fail".to_string(),
    };
    let replayed = if f.duplicates == f.processed_uncommitted {
        format!(
            "exactly the {} that {} had processed and not committed",
            f.processed_uncommitted, f.stalled_member
        )
    } else {
        format!(
            "while {} had processed {} it did not commit",
            f.stalled_member, f.processed_uncommitted
        )
    };
    Summary {
        happened: vec![
            format!(
                "{} stopped for {}, longer than max.poll.interval.ms ({}): {removed}.",
                f.stalled_member,
                secs(f.stall_ms),
                secs(f.max_poll_interval_ms),
            ),
            format!(
                "The new owners started from the committed offsets: {} payments ({}) applied twice, \
                 {replayed}.",
                f.duplicates,
                euros(f.double_charged_cents),
            ),
            format!(
                "cooperative-sticky: {} partitions revoked from running members instead of {}; static \
                 membership: {} rebalances for a restart instead of {}; max.poll.records {}: {} \
                 duplicates instead of {}.",
                f.partitions_revoked_cooperative,
                f.partitions_revoked_eager,
                f.static_membership_rebalances,
                f.dynamic_restart_rebalances,
                f.small_max_poll_records,
                f.duplicates_small_poll_batch,
                f.duplicates
            ),
            format!(
                "Dedup in the ledger's transaction: {} duplicate effects; in a cache with a {} TTL: {}.",
                f.duplicate_effects_colocated_dedup,
                secs(f.dedup_ttl_ms),
                f.duplicates_ttl_dedup
            ),
        ],
        why: vec![
            "Kafka's consumer is at-least-once: offsets are committed after processing, and a member \
             that loses its partitions between the two leaves that work to be done again. It is the \
             contract, not a bug (source 003, section 10)."
                .to_string(),
            "A rebalance is how the group takes partitions from a member that stopped polling; the \
             committed offset is all the next owner knows."
                .to_string(),
            "A dedup record outside the effect's transaction can expire, be evicted or live on another \
             node: only the same transaction in the same partition makes \"already applied\" and \
             \"applied\" one fact."
                .to_string(),
        ],
        what_to_do: vec![
            "Record the idempotency key, derived from the partition key (account_id, payment_id), in \
             the same transaction and shard as the effect."
                .to_string(),
            "Keep the time between polls well under max.poll.interval.ms: smaller max.poll.records, or \
             hand slow calls off and pause the partition meanwhile."
                .to_string(),
            "Use cooperative-sticky so running members keep consuming, and group.instance.id so \
             rolling restarts do not rebalance at all. On Kafka 4.0 and later, the consumer \
             rebalance protocol (KIP-848, group.protocol=consumer) goes further: the coordinator \
             moves partitions member by member and there is no group-wide stop. That is advice \
             about Kafka, not shown here: this lab's broker and client speak the classic protocol \
             (JoinGroup, SyncGroup) only."
                .to_string(),
            "Make a dedup TTL at least the input topic's retention; treat CommitFailedException as \"this \
             batch will be processed again\"."
                .to_string(),
        ],
    }
}
