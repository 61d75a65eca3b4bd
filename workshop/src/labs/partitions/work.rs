//! What each phase of the lab has to do, for its deadline (see [`crate::lab::deadline`]): the
//! scenario's rounds, the group forming and rebalancing, and the waits the change itself
//! contains (the service's clients noticing new partitions only on their metadata refresh).

use super::plan::Plan;
use super::run::Change;
use super::traffic::Traffic;
use super::METADATA_MAX_AGE;
use crate::lab::deadline::Work;

/// Requests of one round, one after the other: the shop's produce, whose acknowledgements the
/// round waits for, and the members' fetch of what the round takes (commits are not waited for).
const ROUND_TRIPS_PER_ROUND: u64 = 2;
/// Connecting a client: its connection's ApiVersions, and the metadata it starts with.
const ROUND_TRIPS_PER_CLIENT: u64 = 2;
/// The group's lag as the lab reads it: the last commits, then the group's offsets and the
/// log ends.
const LAG_ROUND_TRIPS: u64 = 3;

/// What the phases of the lab do, given the plan and the traffic.
pub struct Phases<'a> {
    pub plan: &'a Plan,
    pub traffic: &'a Traffic,
}

impl Phases<'_> {
    /// The rounds of one scenario, as the progress bars count them: the traffic's rounds, then
    /// the backlog drained at the larger count.
    pub fn rounds(&self) -> u64 {
        let (plan, events) = (self.plan, self.traffic.events.len() as u64);
        let produce = events.div_ceil(u64::from(plan.rate));
        let backlog = events.saturating_sub(plan.throughput(plan.before) * produce / 2);
        produce + backlog / plan.throughput(plan.after).max(1)
    }

    /// Phase 1: the scenario starts, and its rounds until the change (half of them) move the
    /// first half of the traffic.
    pub fn until_change(&self) -> Work {
        self.start() + rounds_of(self.rounds() / 2, self.traffic.change_at) + lag()
    }

    /// Phase 2: the operator's increase, the first event after it, one round.
    pub fn change(&self, change: &Change) -> Work {
        let after = rounds_of(1, 1);
        match change {
            Change::Nothing => after,
            Change::Grow { .. } => {
                after
                    + Work {
                        // CreatePartitions and the metadata that shows it; the `latest` group's
                        // commits before it is held.
                        round_trips: 3,
                        // The producer's metadata goes stale, then the members' does.
                        waits: METADATA_MAX_AGE * 2,
                        // The service's group, then the `latest` group.
                        rebalances: 2,
                        ..Work::default()
                    }
            }
            // The new topic, the old one drained (in the scenario's rounds), its lag, and the
            // group moving over.
            Change::Migrate { .. } => {
                after
                    + lag()
                    + Work {
                        round_trips: 1,
                        rebalances: 1,
                        ..Work::default()
                    }
            }
        }
    }

    /// Phase 3: the rest of the rounds, then the scenario ends.
    pub fn after_change(&self) -> Work {
        let rest = self.traffic.events.len() - self.traffic.change_at;
        rounds_of(self.rounds() - self.rounds() / 2, rest) + self.finish()
    }

    /// Phases 4 and 5: a whole scenario.
    pub fn scenario(&self, change: &Change) -> Work {
        self.start()
            + rounds_of(self.rounds(), self.traffic.events.len())
            + self.change(change)
            + self.finish()
    }

    /// Phase 6: one CreatePartitions.
    pub fn shrink() -> Work {
        Work {
            round_trips: 1,
            ..Work::default()
        }
    }

    /// Creating the topic, connecting the producer and each member one after another, and the
    /// group forming.
    fn start(&self) -> Work {
        Work {
            round_trips: 1 + ROUND_TRIPS_PER_CLIENT * (1 + u64::from(self.plan.members)),
            rebalances: 1,
            ..Work::default()
        }
    }

    /// The lag at the end, the members leaving, the producer's last requests.
    fn finish(&self) -> Work {
        lag()
            + Work {
                round_trips: 2,
                ..Work::default()
            }
    }
}

/// `rounds` rounds moving `events` events, each produced and consumed.
fn rounds_of(rounds: u64, events: usize) -> Work {
    Work {
        round_trips: rounds * ROUND_TRIPS_PER_ROUND,
        records: 2 * events as u64,
        ..Work::default()
    }
}

fn lag() -> Work {
    Work {
        round_trips: LAG_ROUND_TRIPS,
        ..Work::default()
    }
}
