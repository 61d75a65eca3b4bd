//! What lab `rebalance` runs: its flag, the group and its members, the five scenarios, and the
//! timings (Kafka's own session and heartbeat defaults on the paused clock; the shortest a
//! broker accepts in real time against a cluster).

use std::path::PathBuf;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::payments::{self, Payment};
use crate::lab::deadline::Work;
use crate::lab::Target;

/// `workshop rebalance`: a stalled consumer, a rebalance, and payments applied twice.
#[derive(Debug, Clone, clap::Args)]
pub struct RebalanceArgs {
    /// Write the group's events (joins, generations, assignments, revocations, commits, failed
    /// commits) to FILE as JSON lines, each with its milliseconds since the start
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
}

/// The names of source 003, section 10; under `--bootstrap` the cluster suffixes them.
pub const TOPIC: &str = "payments";
pub const GROUP: &str = "billing";
pub const PARTITIONS: i32 = 12;
/// Client ids as in source 003's log. The broker makes member ids `client id + "-" + UUID`, and
/// the assignors order members by member id, so these names (not the UUIDs) decide who gets
/// which partitions: the same seed gives the same assignment every run.
pub const MEMBERS: [&str; 4] = ["billing-1", "billing-3", "billing-5", "billing-7"];
/// The member that stalls (source 003's billing-3).
pub const STALLED: &str = "billing-3";
/// The member that restarts in the membership comparison.
pub const RESTARTED: &str = "billing-5";
/// About 100 per partition, 300 per member: enough for several batches each.
pub const PAYMENTS: usize = 1200;
pub const ACCOUNTS: u32 = 400;
/// `max.poll.records` of the main run (Kafka's default is 500; 100 keeps batches several per
/// member with this many payments), and of the comparison.
pub const MAX_POLL_RECORDS: usize = 100;
pub const SMALL_MAX_POLL_RECORDS: usize = 10;

/// Every duration the lab runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `session.timeout.ms`.
    pub session: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat: Duration,
    /// `max.poll.interval.ms` (also the rebalance timeout, as in Kafka).
    pub max_poll_interval: Duration,
    /// How long the stalled member stops between processing a batch and committing it.
    pub stall: Duration,
    /// How long a restarting member is away: less than the session timeout.
    pub downtime: Duration,
    /// The time one payment takes to apply (the ledger's write).
    pub processing: Duration,
    /// `fetch.max.wait.ms`.
    pub fetch_max_wait: Duration,
    /// The separate dedup store's TTL: shorter than the replay.
    pub dedup_ttl: Duration,
    /// How long into the stall the lag table is read: the member is still in the group then.
    pub lag_snapshot: Duration,
}

impl Timing {
    /// On the paused clock time costs nothing, so the group runs with Kafka's session and
    /// heartbeat defaults, and a max.poll.interval of 30 s (Kafka's is 5 minutes; services that
    /// must notice a stuck consumer lower it). The stall is a 40 s call that hangs.
    pub const PAUSED: Timing = Timing {
        session: Duration::from_secs(45),
        heartbeat: Duration::from_secs(3),
        max_poll_interval: Duration::from_secs(30),
        stall: Duration::from_secs(40),
        downtime: Duration::from_secs(20),
        processing: Duration::from_millis(150),
        fetch_max_wait: Duration::from_millis(500),
        dedup_ttl: Duration::from_secs(10),
        lag_snapshot: Duration::from_secs(5),
    };

    /// Against a cluster time is real: the broker's minimum session timeout (6 s), and every
    /// other duration as short as keeps the same order of events.
    pub const REAL: Timing = Timing {
        session: Duration::from_secs(6),
        heartbeat: Duration::from_millis(300),
        max_poll_interval: Duration::from_secs(2),
        stall: Duration::from_secs(3),
        downtime: Duration::from_secs(1),
        processing: Duration::from_millis(1),
        fetch_max_wait: Duration::from_millis(100),
        dedup_ttl: Duration::from_millis(500),
        lag_snapshot: Duration::from_secs(1),
    };
}

/// The comparisons, each one run of the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Eager `range`, max.poll.records 100, billing-3 stalls: the failure itself.
    Baseline,
    /// The same stall with `cooperative-sticky`.
    Cooperative,
    /// The same stall with max.poll.records 10.
    SmallBatch,
    /// billing-5 restarts within the session timeout, as a static member.
    Static,
    /// The same restart as a dynamic member, for contrast.
    Dynamic,
    /// The baseline's stall with every member in Kafka transactions (run separately: a
    /// cluster may not offer them).
    Eos,
}

impl Kind {
    /// The at-least-once runs (every cluster runs them).
    pub const ALL: [Kind; 5] = [
        Kind::Baseline,
        Kind::Cooperative,
        Kind::SmallBatch,
        Kind::Static,
        Kind::Dynamic,
    ];

    /// The scenario's name in the timeline, and the suffix of its topic and group.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Baseline => "baseline",
            Kind::Cooperative => "cooperative",
            Kind::SmallBatch => "small-batch",
            Kind::Static => "static",
            Kind::Dynamic => "dynamic",
            Kind::Eos => "eos",
        }
    }
}

/// What happens to one member, once, after it has processed a number of payments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incident {
    /// After the batch that reaches `after` payments, the member stops for `duration` before
    /// committing: a GC pause, or a call that hangs.
    Stall {
        member: &'static str,
        after: usize,
        duration: Duration,
    },
    /// After committing the batch that reaches `after` payments, the member's process restarts:
    /// the consumer is closed, and a new one with the same configuration starts `downtime` later.
    Restart {
        member: &'static str,
        after: usize,
        downtime: Duration,
    },
}

impl Incident {
    pub fn member(&self) -> &'static str {
        match self {
            Incident::Stall { member, .. } | Incident::Restart { member, .. } => member,
        }
    }
}

/// One run of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub kind: Kind,
    /// The topic and group as the lab calls them (the cluster may suffix them).
    pub topic: String,
    pub group: String,
    pub assignor: &'static str,
    pub max_poll_records: usize,
    /// Members with `group.instance.id` = their client id (KIP-345).
    pub static_members: bool,
    pub incident: Incident,
}

/// Everything the lab runs, drawn from the seed.
#[derive(Debug, Clone)]
pub struct Plan {
    pub timing: Timing,
    pub payments: Vec<Payment>,
    /// The stall comes after the batch in which billing-3 reaches this many payments: always
    /// its second batch of 100, so something is committed before it (the new owner resumes from
    /// a real committed offset) and something is left after it.
    pub stall_after: usize,
    pub restart_after: usize,
    pub specs: Vec<Spec>,
}

impl Plan {
    pub fn new(seed: u64, target: &Target) -> Plan {
        let timing = match target {
            Target::Embedded => Timing::PAUSED,
            Target::Bootstrap(_) => Timing::REAL,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let payments = payments::generate(PAYMENTS, ACCOUNTS, &mut rng);
        let second_batch = MAX_POLL_RECORDS + 1..=2 * MAX_POLL_RECORDS;
        let stall_after = rng.gen_range(second_batch.clone());
        let restart_after = rng.gen_range(second_batch);
        let stall = Incident::Stall {
            member: STALLED,
            after: stall_after,
            duration: timing.stall,
        };
        let restart = Incident::Restart {
            member: RESTARTED,
            after: restart_after,
            downtime: timing.downtime,
        };
        // What each run changes from the baseline: the assignor, the batch size, static
        // membership, or the incident (a restart instead of the stall).
        let specs = Kind::ALL
            .into_iter()
            .chain([Kind::Eos])
            .map(|kind| Spec {
                kind,
                topic: named(TOPIC, kind),
                group: named(GROUP, kind),
                assignor: match kind {
                    Kind::Cooperative => "cooperative-sticky",
                    _ => "range",
                },
                max_poll_records: match kind {
                    Kind::SmallBatch => SMALL_MAX_POLL_RECORDS,
                    _ => MAX_POLL_RECORDS,
                },
                static_members: kind == Kind::Static,
                incident: match kind {
                    Kind::Static | Kind::Dynamic => restart.clone(),
                    _ => stall.clone(),
                },
            })
            .collect();
        Plan {
            timing,
            payments,
            stall_after,
            restart_after,
            specs,
        }
    }

    /// Scales the timing to a cluster whose rebalances take `rebalance` (measured).
    ///
    /// max.poll.interval.ms is also the rebalance timeout, as in Kafka: the time the
    /// coordinator gives every member to rejoin once a rebalance starts. A member still waiting
    /// for a slow SyncGroup answer when the next rebalance starts rejoins only after it; given
    /// less than two rebalances, it is removed, rejoins as a new member, which starts another
    /// rebalance, and the group never settles. So the interval is at least two rebalances.
    ///
    /// The stall must outlast the interval and then the rebalance without the stalled member,
    /// or its partitions go straight back to it and nobody else applies its batch: after the
    /// interval the others learn of the rebalance at a heartbeat and finish the batch in hand
    /// before they rejoin, so the stall leaves two measured rebalances for it. Neither is ever
    /// shorter than the plan's own.
    pub fn fit_to_rebalance(&mut self, rebalance: Duration) {
        let t = &mut self.timing;
        t.max_poll_interval = t.max_poll_interval.max(2 * rebalance);
        t.stall = t.stall.max(t.max_poll_interval + 2 * rebalance);
        for spec in &mut self.specs {
            if let Incident::Stall { duration, .. } = &mut spec.incident {
                *duration = t.stall;
            }
        }
    }

    pub fn spec(&self, kind: Kind) -> &Spec {
        self.specs
            .iter()
            .find(|s| s.kind == kind)
            .expect("the plan has one spec of each kind")
    }

    /// What the run of `spec` has to do, for its deadline (see [`crate::lab::deadline`]): the
    /// members joining one at a time, the payments produced and applied batch by batch, and the
    /// incident with the timeouts it waits out.
    pub fn work(&self, spec: &Spec) -> Work {
        let t = &self.timing;
        let payments = self.payments.len() as u64;
        let batches = payments.div_ceil(spec.max_poll_records as u64);
        let incident = match spec.incident {
            // Polls stop until the poll interval has passed, then the stall itself, and the
            // lag read into it.
            Incident::Stall { duration, .. } => t.max_poll_interval + duration + t.lag_snapshot,
            // Away, and for a dynamic member a session that has to expire.
            Incident::Restart { downtime, .. } => downtime + t.session,
        };
        // In a transaction a batch also adds its partitions and offsets, commits its offsets
        // and ends the transaction.
        let per_batch = if spec.kind == Kind::Eos { 6 } else { 2 };
        Work {
            // The topic, each batch fetched and committed, the lag read twice (the group's
            // offsets and the log ends).
            round_trips: 1 + per_batch * batches + 4,
            // Produced, then applied.
            records: 2 * payments,
            // Each member joining, the incident's two (out and back), and the members leaving.
            rebalances: MEMBERS.len() as u64 + 3,
            // Every payment applied one after another, as if by one member, and the incident.
            waits: t.processing * u32::try_from(payments).unwrap_or(u32::MAX) + incident,
        }
    }
}

/// The main run keeps source 003's names; each comparison gets its own topic and group.
fn named(base: &str, kind: Kind) -> String {
    match kind {
        Kind::Baseline => base.to_string(),
        other => format!("{base}-{}", other.key()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_fixes_everything_and_the_stall_hits_the_second_batch() {
        let a = Plan::new(5, &Target::Embedded);
        let b = Plan::new(5, &Target::Embedded);
        assert_eq!(a.payments, b.payments);
        assert_eq!(
            (a.stall_after, a.restart_after),
            (b.stall_after, b.restart_after)
        );
        assert!((101..=200).contains(&a.stall_after));
        assert_ne!(
            Plan::new(6, &Target::Embedded).payments,
            a.payments,
            "another seed, other payments"
        );
        assert_eq!(a.spec(Kind::Baseline).topic, "payments");
        assert_eq!(a.spec(Kind::SmallBatch).group, "billing-small-batch");
        assert_eq!(a.timing, Timing::PAUSED);
        let real = Plan::new(5, &Target::Bootstrap("h:1".into()));
        assert_eq!(real.timing, Timing::REAL);
    }

    #[test]
    fn a_slow_rebalance_lengthens_every_stall_and_a_quick_one_none() {
        let mut plan = Plan::new(5, &Target::Bootstrap("h:1".into()));
        plan.fit_to_rebalance(Duration::from_millis(300));
        assert_eq!(
            plan.timing,
            Timing::REAL,
            "2 s + 2 x 0.3 s is within the 3 s stall"
        );
        plan.fit_to_rebalance(Duration::from_millis(3_400));
        assert_eq!(plan.timing.max_poll_interval, Duration::from_millis(6_800));
        assert_eq!(plan.timing.stall, Duration::from_millis(13_600));
        for spec in &plan.specs {
            if let Incident::Stall { duration, .. } = spec.incident {
                assert_eq!(duration, Duration::from_millis(13_600), "{:?}", spec.kind);
            }
        }
    }

    #[test]
    fn timings_keep_the_order_of_events() {
        for t in [Timing::PAUSED, Timing::REAL] {
            assert!(
                t.stall > t.max_poll_interval,
                "the stall outlasts the poll interval"
            );
            assert!(
                t.downtime < t.session,
                "a restart fits in the session timeout"
            );
            assert!(t.heartbeat < t.session);
            assert!(
                t.dedup_ttl < t.max_poll_interval,
                "the TTL is shorter than the replay"
            );
            assert!(
                t.lag_snapshot < t.max_poll_interval,
                "read while still a member"
            );
            assert!(t.processing * MAX_POLL_RECORDS as u32 + t.lag_snapshot < t.max_poll_interval);
        }
        assert!(
            Timing::REAL.session >= Duration::from_secs(6),
            "the broker's minimum"
        );
    }
}
