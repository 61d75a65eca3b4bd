//! Lab `migrate`: moving keys between shards while traffic flows (LABS.md, "Lab migrate";
//! source 004's migration protocol, source 001's online resharding, source 003's fencing).
//!
//! A profile service on shards A, B, C gains D, which takes (20, 40] of source 004's ring from B.
//! Commands arrive on a Kafka topic keyed by user id and a consumer group of two instances
//! applies them; each shard's changes go to its changelog topic; the routing table is versioned
//! records in a topic that keeps them all (the audit trail). Nine runs of the same traffic: three naive moves (routers
//! only, copy once, no fencing) and the protocol, the protocol with D failing halfway, two
//! rollbacks, and source 001's tenant 42 split into virtual buckets by dual write, without and
//! with idempotency keys. Every figure is counted from a run's stores, changelogs and ledger.
//!
//! - `engine`: the state machine, stores, routing records and the world that drives them; no
//!   I/O, no narration, tested on its own (with property tests over random interleavings).
//! - `kafka`: the engine's logs on Kafka topics, the commands topic and the consumer group.
//! - `scenario`: the runs and their timeline (which decides only *when* things happen).
//! - `story`: the lab as a trainer tells it, run by run (opening, question, run, evidence), and
//!   the summary; `evidence`: how each run's evidence is laid out.
//! - `traffic`: the seeded commands and reads; `plan`: flags; `figures`: JSON and verdict;
//!   `verdict`: the checks.

mod engine;
mod evidence;
mod figures;
mod kafka;
mod plan;
mod scenario;
mod story;
mod traffic;
mod verdict;

use std::collections::BTreeMap;

use crate::lab::deadline::Work;
use crate::lab::report::{LabReport, Narrator};
use crate::lab::target::{runtime, Cluster};
use crate::lab::{Lab, LabContext, LabError};
use kafka::{Commands, Limit};
pub use plan::MigrateArgs;
use plan::Plan;
use scenario::{Run, Scenario};
use tokio::runtime::Runtime;

pub struct Migrate;

impl Lab for Migrate {
    const NAME: &'static str = "migrate";
    const SUMMARY: &'static str =
        "Online resharding: routers only, copy once and no fencing lose writes; the protocol does not";
    type Args = MigrateArgs;

    fn run(args: &MigrateArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
        let plan = Plan::new(args)?;
        let expected = verdict::expected();
        let n = &mut ctx.narrator;
        n.intro(Self::NAME, &expected);
        let rt = runtime()?;
        let cluster = rt.block_on(Cluster::open(&ctx.target, &ctx.stop, Self::NAME))?;
        n.say(&format!("Running against {}.", cluster.describe()));
        let measured = story::phases(&rt, &cluster, &plan, ctx.seed, n);
        rt.block_on(cluster.close());
        let figures = measured?;

        let checks = verdict::verdict(&figures);
        n.summary(&story::summary(&figures));
        let report = LabReport::new(Self::NAME, expected, checks.shown(), &figures)?;
        n.verdict(&report, &checks);
        Ok(report)
    }
}

/// Runs scenarios on the cluster and keeps each run for the figures.
struct Runner<'a> {
    rt: &'a Runtime,
    cluster: &'a Cluster,
    plan: &'a Plan,
    users: &'a Commands<'a>,
    tenant: &'a Commands<'a>,
    runs: BTreeMap<Scenario, Run>,
}

impl Runner<'_> {
    /// The runs of the phase just opened, within one deadline derived from what they do.
    fn phase(&mut self, n: &Narrator, scenarios: &[Scenario]) -> Result<(), LabError> {
        let mut work = Work::default();
        let mut lab_ms = 0;
        for &scenario in scenarios {
            let commands = self.commands(scenario);
            work = work + kafka::work(self.plan, scenario, commands)?;
            lab_ms += commands.traffic.duration;
        }
        let deadline = n.deadline(work);
        let progress = n.progress(lab_ms, "lab milliseconds of traffic");
        let limit = Limit {
            deadline: &deadline,
            progress: &progress,
        };
        for &scenario in scenarios {
            // Runs are synchronous between their requests: a stop is seen between runs.
            self.cluster.check_stop()?;
            let commands = self.commands(scenario);
            let run = kafka::run(self.rt, self.cluster, self.plan, scenario, commands, limit)?;
            self.runs.insert(scenario, run);
        }
        progress.finish();
        Ok(())
    }

    fn commands(&self, scenario: Scenario) -> &Commands<'_> {
        if scenario.is_tenant() {
            self.tenant
        } else {
            self.users
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use client::ApiKey;

    /// A broker that answers every ListOffsets 5 s late: the commands are written (no offsets
    /// listed), then the first run, which lists end offsets as it goes, overruns the deadline
    /// its rehearsal in memory gave it and ends with one line naming the phase and the lab
    /// millisecond it reached (paused clock).
    #[test]
    fn a_slow_phase_ends_at_its_deadline_and_says_where() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let small = "--users 20 --rate 1 --duration-ms 600 --orders 16 --buckets 4";
        let plan = plan::tests::parse(&small.split(' ').collect::<Vec<_>>()).unwrap();
        let cluster = rt.block_on(Cluster::slowed(ApiKey::ListOffsets, Duration::from_secs(5)));
        let started = rt.block_on(async { tokio::time::Instant::now() });
        let ran = story::phases(&rt, &cluster, &plan, 5, &mut Narrator::new());
        let elapsed = rt.block_on(async { started.elapsed() });
        rt.block_on(cluster.close());
        crate::lab::deadline::assert_too_slow(
            ran,
            elapsed,
            Duration::from_millis(78_041),
            "phase 2 (Routers only) was too slow: not done within 78 s (53 round trips x 1 s + \
             1642 records x 25 µs + 1 rebalance x 15 s + 10 s); it was listing the end offset of \
             migrate.routers-only.changelog-D (lab milliseconds of traffic, 600 of 600 done). Is \
             the broker overloaded or slowed down? A smaller run (fewer records) needs less time",
        );
    }
}
