//! Lab `migrate`: moving keys between shards while traffic flows (LABS.md, "Lab migrate";
//! source 004's migration protocol, source 001's online resharding, source 003's fencing).
//!
//! A profile service on shards A, B, C gains D, which takes (20, 40] of source 004's ring from B.
//! Commands arrive on a Kafka topic keyed by user id and a consumer group of two instances
//! applies them; each shard's changes go to its changelog topic; the routing table is versioned
//! records in a compacted topic. Nine runs of the same traffic: three naive moves (routers
//! only, copy once, no fencing) and the protocol, the protocol with D failing halfway, two
//! rollbacks, and source 001's tenant 42 split into virtual buckets by dual write, without and
//! with idempotency keys. Every figure is counted from a run's stores, changelogs and ledger.
//!
//! - `engine`: the state machine, stores, routing records and the world that drives them; no
//!   I/O, no narration, tested on its own (with property tests over random interleavings).
//! - `kafka`: the engine's logs on Kafka topics, the commands topic and the consumer group.
//! - `scenario`: the runs and their timeline (which decides only *when* things happen).
//! - `traffic`: the seeded commands and reads; `plan`: flags; `figures`: JSON and verdict;
//!   `verdict`: the checks; `story`: narration.

pub mod engine;
mod figures;
pub mod kafka;
mod plan;
pub mod scenario;
mod story;
pub mod traffic;
mod verdict;

use std::collections::BTreeMap;

use crate::lab::{Lab, LabContext, LabError};
use crate::report::{LabReport, Narrator};
use crate::target::{runtime, Cluster};
use figures::Runs;
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
        let measured = phases(&rt, &cluster, &plan, ctx.seed, n);
        rt.block_on(cluster.close());
        let figures = measured?;

        let checks = verdict::verdict(&figures);
        n.summary(&story::summary(&figures));
        let report = LabReport::new(Self::NAME, expected, checks.shown(), &figures)?;
        n.verdict(&report, &checks);
        Ok(report)
    }
}

/// Every run, each narrated as it happens.
fn phases(
    rt: &Runtime,
    cluster: &Cluster,
    plan: &Plan,
    seed: u64,
    n: &mut Narrator,
) -> Result<figures::Figures, LabError> {
    let profiles = traffic::profiles(plan, seed);
    let (orders, faults) = traffic::tenant(plan, seed);
    let users = kafka::Commands::produce(rt, cluster, "profile-commands", &profiles, Vec::new())?;
    let tenant = kafka::Commands::produce(rt, cluster, "tenant-42-commands", &orders, faults)?;
    let mut runs = Runner {
        rt,
        cluster,
        plan,
        users: &users,
        tenant: &tenant,
        runs: BTreeMap::new(),
    };

    story::ring(n, plan, &profiles, &users.topic);
    story::routers_only(n);
    story::routers_only_evidence(n, runs.run(Scenario::RoutersOnly)?);
    story::copy_once(n, plan);
    story::copy_once_evidence(n, runs.run(Scenario::CopyOnce)?);
    story::no_fencing(n, plan);
    story::no_fencing_evidence(n, runs.run(Scenario::NoFencing)?);
    story::protocol(n, plan);
    story::protocol_evidence(n, runs.run(Scenario::Protocol)?);
    story::failure(n);
    story::failure_evidence(n, runs.run(Scenario::Failure)?);
    story::rollback(n);
    runs.run(Scenario::RollbackRoutersOnly)?;
    runs.run(Scenario::Rollback)?;
    let done = Runs(&runs.runs);
    story::rollback_evidence(
        n,
        done.get(Scenario::RollbackRoutersOnly)?,
        done.get(Scenario::Rollback)?,
    );
    story::hot_tenant(n, plan, &tenant.topic);
    runs.run(Scenario::DualWriteNaive)?;
    runs.run(Scenario::DualWriteKeyed)?;
    let done = Runs(&runs.runs);
    story::hot_tenant_evidence(
        n,
        done.get(Scenario::DualWriteNaive)?,
        done.get(Scenario::DualWriteKeyed)?,
    );

    let target = match cluster.embedded() {
        Some(_) => "embedded".to_string(),
        None => cluster.addr().to_string(),
    };
    figures::figures(seed, target, &profiles, &done)
}

/// Runs scenarios on the cluster and keeps each run for the figures.
struct Runner<'a> {
    rt: &'a Runtime,
    cluster: &'a Cluster,
    plan: &'a Plan,
    users: &'a kafka::Commands<'a>,
    tenant: &'a kafka::Commands<'a>,
    runs: BTreeMap<Scenario, Run>,
}

impl Runner<'_> {
    fn run(&mut self, scenario: Scenario) -> Result<&Run, LabError> {
        let commands = if scenario.is_tenant() {
            self.tenant
        } else {
            self.users
        };
        // Runs are synchronous between their requests: a stop is seen between runs.
        self.cluster.check_stop()?;
        let run = kafka::run(self.rt, self.cluster, self.plan, scenario, commands)?;
        Ok(self.runs.entry(scenario).or_insert(run))
    }
}
