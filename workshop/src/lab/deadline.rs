//! Every phase of a lab has a deadline, derived from the work it does, and names itself when it
//! is too slow.
//!
//! A lab against a slow or stuck cluster must end with one line saying which phase was too slow,
//! what it was waiting for and how far it got, never hang. The deadline is not one constant for
//! every phase: it is what the phase has to do ([`Work`]: requests made one after another,
//! records moved in bulk, group rebalances, the waits the scenario itself contains) times what
//! each may cost ([`Budget`]), with allowances taken from Kafka's defaults, so a healthy but
//! remote cluster, or one with Kafka's 3 s initial rebalance delay, is never cut short.
//!
//! Deadlines run on tokio's clock: on a paused clock (lab `rebalance` on the embedded broker,
//! and the tests) they elapse in virtual time, exactly.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::lab::report::Progress;
use crate::lab::LabError;

/// What each unit of work may cost before a phase counts as too slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// A request whose answer the phase waits for before the next one (a send with acks=all,
    /// an InitProducerId, a commit): a few milliseconds on a healthy cluster, seconds on a
    /// remote one; Kafka's own `request.timeout.ms` (30 s) is the worst case of one request,
    /// not of hundreds.
    pub round_trip: Duration,
    /// A record produced or consumed in bulk (batched, pipelined).
    pub record: Duration,
    /// A consumer group forming or rebalancing: Kafka's `group.initial.rebalance.delay.ms`
    /// (3 s), twice, since members joining during the delay extend it, plus the members'
    /// heartbeats and a margin.
    pub rebalance: Duration,
    /// What every phase gets besides: connections, topic creation, metadata that spreads.
    pub floor: Duration,
}

impl Budget {
    /// Generous enough for a healthy cluster across a network with Kafka's group defaults
    /// (a round trip 100 times a LAN's, 40,000 records a second), tight enough that a stuck
    /// phase ends in minutes rather than never.
    pub const KAFKA: Budget = Budget {
        round_trip: Duration::from_secs(1),
        record: Duration::from_micros(25),
        rebalance: Duration::from_secs(15),
        floor: Duration::from_secs(10),
    };
}

/// What a phase has to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Requests made one after another, each waiting for its answer.
    pub round_trips: u64,
    /// Records moved in bulk.
    pub records: u64,
    /// Times a consumer group has to form or rebalance.
    pub rebalances: u64,
    /// Time the scenario itself spends waiting (a stall, a session timeout, traffic paced at a
    /// rate), which no cluster can make shorter.
    pub waits: Duration,
}

/// A phase that does one thing, then another, has the work of both.
impl std::ops::Add for Work {
    type Output = Work;

    fn add(self, other: Work) -> Work {
        Work {
            round_trips: self.round_trips + other.round_trips,
            records: self.records + other.records,
            rebalances: self.rebalances + other.rebalances,
            waits: self.waits + other.waits,
        }
    }
}

impl Work {
    /// The phase's time limit under `budget`.
    pub fn limit(&self, budget: &Budget) -> Duration {
        let times =
            |unit: Duration, n: u64| unit.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX));
        budget.floor
            + self.waits
            + times(budget.round_trip, self.round_trips)
            + times(budget.record, self.records)
            + times(budget.rebalance, self.rebalances)
    }

    /// How the limit was derived, for the error line: `200 round trips x 1 s + 1 rebalance x
    /// 15 s + 10 s`.
    pub fn basis(&self, budget: &Budget) -> String {
        let mut terms = Vec::new();
        let mut term = |n: u64, what: &str, unit: Duration| {
            if n > 0 {
                let s = if n == 1 { "" } else { "s" };
                terms.push(format!("{n} {what}{s} x {}", seconds(unit)));
            }
        };
        term(self.round_trips, "round trip", budget.round_trip);
        term(self.records, "record", budget.record);
        term(self.rebalances, "rebalance", budget.rebalance);
        if !self.waits.is_zero() {
            terms.push(format!(
                "{} of the scenario's own waits",
                seconds(self.waits)
            ));
        }
        terms.push(seconds(budget.floor));
        terms.join(" + ")
    }
}

/// One phase's deadline, started when the phase starts; every step of the phase runs under it.
#[derive(Debug, Clone)]
pub struct Deadline {
    /// How the error names the phase: `phase 2 (The same, with idempotence)`.
    phase: String,
    at: Instant,
    limit: Duration,
    basis: String,
}

impl Deadline {
    /// A deadline for `work` under [`Budget::KAFKA`], from now.
    pub fn start(phase: impl Into<String>, work: Work) -> Self {
        Self::start_with(phase, work, &Budget::KAFKA)
    }

    pub fn start_with(phase: impl Into<String>, work: Work, budget: &Budget) -> Self {
        let limit = work.limit(budget);
        Deadline {
            phase: phase.into(),
            at: Instant::now() + limit,
            limit,
            basis: work.basis(budget),
        }
    }

    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Runs one step of the phase; once the deadline passes, fails with a line that says what
    /// the step was doing and how far it got, as `progress` tells.
    pub async fn run<T>(
        &self,
        progress: &Progress,
        step: impl Future<Output = Result<T, LabError>>,
    ) -> Result<T, LabError> {
        self.within(|| progress.status(), step).await
    }

    /// [`run`](Self::run) for a step without a progress bar: `doing` says what it waits for.
    pub async fn wait<T>(
        &self,
        doing: &str,
        step: impl Future<Output = Result<T, LabError>>,
    ) -> Result<T, LabError> {
        self.within(|| doing.to_string(), step).await
    }

    /// [`run`](Self::run) for a step whose state only a closure can tell: `doing` is asked
    /// only once the deadline has passed, so it says how far the step got by then (a progress
    /// bar, the members of a group as they are).
    pub async fn within<T>(
        &self,
        doing: impl FnOnce() -> String,
        step: impl Future<Output = Result<T, LabError>>,
    ) -> Result<T, LabError> {
        match tokio::time::timeout_at(self.at, step).await {
            Ok(result) => result,
            Err(_) => Err(self.passed(&doing())),
        }
    }

    /// The error once the deadline has passed, while the phase was `doing`.
    fn passed(&self, doing: &str) -> LabError {
        LabError::TooSlow(format!(
            "{} was too slow: not done within {} ({}); it was {doing}. Is the broker overloaded or \
             slowed down? A smaller run (fewer records) needs less time",
            self.phase,
            seconds(self.limit),
            self.basis
        ))
    }
}

/// For the labs' tests: `ran` failed at a phase's deadline, `elapsed` after the lab started,
/// with `line`. The phase starts a moment after the lab (its broker, earlier phases), so the
/// lab ends within a second after the phase's `limit`.
#[cfg(test)]
pub fn assert_too_slow<T>(
    ran: Result<T, LabError>,
    elapsed: Duration,
    limit: Duration,
    line: &str,
) {
    let err = match ran {
        Err(e) => e.to_string(),
        Ok(_) => panic!("finished against a broker too slow for it"),
    };
    assert!(
        elapsed >= limit && elapsed < limit + Duration::from_secs(1),
        "ended after {elapsed:?} for a limit of {limit:?}: {err}"
    );
    assert_eq!(err, line);
}

/// `1.5 s`, `25 µs`, `3 min 20 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 0.001 {
        format!("{} µs", d.as_micros())
    } else if s < 1.0 {
        format!("{} ms", d.as_millis())
    } else if s < 120.0 {
        let text = format!("{s:.1}");
        format!("{} s", text.trim_end_matches(".0"))
    } else {
        format!("{} min {} s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::report::Narrator;

    #[test]
    fn the_limit_is_the_work_times_its_budget() {
        let work = Work {
            round_trips: 200,
            records: 4_000_000,
            rebalances: 2,
            waits: Duration::from_secs(2),
        };
        // 10 s + 2 s + 200 x 1 s + 4,000,000 x 25 µs + 2 x 15 s.
        assert_eq!(work.limit(&Budget::KAFKA), Duration::from_secs(342));
        assert_eq!(
            work.basis(&Budget::KAFKA),
            "200 round trips x 1 s + 4000000 records x 25 µs + 2 rebalances x 15 s + 2 s of the \
             scenario's own waits + 10 s"
        );
        assert_eq!(
            Work::default().limit(&Budget::KAFKA),
            Duration::from_secs(10)
        );
        let one = Work {
            rebalances: 1,
            ..Work::default()
        };
        assert_eq!(one.basis(&Budget::KAFKA), "1 rebalance x 15 s + 10 s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(seconds(Duration::from_secs(200)), "3 min 20 s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_past_the_deadline_names_the_phase_and_how_far_it_got() {
        let n = Narrator::new();
        let progress = n.progress(200, "sending payments");
        let work = Work {
            round_trips: 20,
            ..Work::default()
        };
        let deadline = Deadline::start("phase 1 (Lost acknowledgements)", work);
        assert_eq!(deadline.limit(), Duration::from_secs(30));
        let started = Instant::now();
        let slow = async {
            for _ in 0..200 {
                // A broker answering each send after 2 s.
                tokio::time::sleep(Duration::from_secs(2)).await;
                progress.inc();
            }
            Ok(())
        };
        let err = deadline.run(&progress, slow).await.unwrap_err().to_string();
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(
            err,
            "phase 1 (Lost acknowledgements) was too slow: not done within 30 s (20 round trips \
             x 1 s + 10 s); it was sending payments, 15 of 200 done. Is the broker overloaded or \
             slowed down? A smaller run (fewer records) needs less time"
        );
        // Later steps share the deadline: already passed.
        let err = deadline
            .wait("reading the topic back", async { Ok(()) })
            .await;
        assert!(err.is_ok(), "a ready step still completes");
        let never = deadline
            .wait(
                "reading the topic back",
                std::future::pending::<Result<(), _>>(),
            )
            .await
            .unwrap_err();
        assert!(
            never.to_string().contains("it was reading the topic back"),
            "{never}"
        );
    }
}
