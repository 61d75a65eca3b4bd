//! Lab `hot-tenant`: lag that averages hide (LABS.md, "Lab hot-tenant"; source 003 section 7,
//! sources 001 and 000).
//!
//! Three modes:
//! - default, the timed run: orders keyed by tenant through the broker, one super tenant sending
//!   as much as all the others; a consumer group processes each partition at a fixed rate; one
//!   partition's lag climbs into the millions while the others stay near zero and the group's
//!   average looks harmless. A Space-Saving sketch over the consumed keys names the tenant;
//!   more partitions would not help; salting the tenant into S sub-keys spreads the load, at
//!   the price of its order and an S-way read.
//! - `--model`: source 001's routing model, exactly (SHA-256 stable hash, 8 shards, 64 buckets).
//! - `--steps`: source 000's step model (12 keys, 3 partitions, 4 per step) on the real broker,
//!   queues measured as lag from the broker.
//!
//! Module map: [`plan`] flags; [`model`] and `model_mode` source 001; [`steps`] source 000;
//! `timed` the default run; [`sketch`] the heavy-hitter sketch; [`traffic`] the seeded tenant
//! traffic; [`groups`] a group's committed offsets and lag as the broker reports them;
//! [`reader`] one partition read in order at a consumer's own pace; [`verdict`] the checks and
//! their thresholds.

pub mod model;
mod model_mode;
pub mod plan;
pub mod sketch;
pub mod steps;
mod timed;
pub mod traffic;
pub mod verdict;

use crate::lab::report::{Checks, LabReport};
use crate::lab::target::{runtime, Cluster};
use crate::lab::{Lab, LabContext, LabError, Target};
pub use plan::HotTenantArgs;
use plan::Mode;

pub struct HotTenant;

impl Lab for HotTenant {
    const NAME: &'static str = "hot-tenant";
    const SUMMARY: &'static str =
        "One super tenant: a partition lags by millions while the average looks fine; find it, salt it";
    type Args = HotTenantArgs;

    fn run(args: &HotTenantArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
        match Mode::new(args)? {
            Mode::Model => {
                let n = &mut ctx.narrator;
                n.intro(Self::NAME, model_mode::EXPECTED);
                if let Target::Bootstrap(addr) = &ctx.target {
                    n.say(&format!(
                        "--model is pure computation and needs no broker: --bootstrap {addr} is not used."
                    ));
                }
                let (figures, checks) = model_mode::run(n);
                report(
                    ctx,
                    model_mode::EXPECTED.to_string(),
                    &figures,
                    None,
                    checks,
                )
            }
            Mode::Steps => {
                // The cluster first: a run that cannot start prints its error alone.
                let rt = runtime()?;
                let cluster = rt.block_on(Cluster::open(&ctx.target, &ctx.stop, Self::NAME))?;
                ctx.narrator.intro(Self::NAME, steps::EXPECTED);
                ctx.narrator
                    .say(&format!("Running against {}.", cluster.describe()));
                let outcome =
                    rt.block_on(cluster.until_stopped(steps::run(&cluster, &mut ctx.narrator)));
                rt.block_on(cluster.close());
                let (figures, checks) = outcome?;
                report(ctx, steps::EXPECTED.to_string(), &figures, None, checks)
            }
            Mode::Timed(plan) => {
                let expected = timed::expected(&plan);
                let rt = runtime()?;
                let cluster = rt.block_on(Cluster::open(&ctx.target, &ctx.stop, Self::NAME))?;
                ctx.narrator.intro(Self::NAME, &expected);
                let timed = timed::run(&cluster, &mut ctx.narrator, plan, ctx.seed);
                let outcome = rt.block_on(cluster.until_stopped(timed));
                rt.block_on(cluster.close());
                let (figures, measured, checks) = outcome?;
                report(ctx, expected, &figures, Some(&measured), checks)
            }
        }
    }
}

/// The report of any mode: its figures (and the timed run's wall-clock `measured`) as JSON, and
/// the verdict, told last.
fn report<F: serde::Serialize>(
    ctx: &mut LabContext,
    expected: String,
    figures: &F,
    measured: Option<&timed::Measured>,
    checks: Checks,
) -> Result<LabReport, LabError> {
    let mut report = LabReport::new(HotTenant::NAME, expected, checks.shown(), figures)?;
    if let Some(measured) = measured {
        report = report.with_measured(measured)?;
    }
    ctx.narrator.verdict(&report, &checks);
    Ok(report)
}
