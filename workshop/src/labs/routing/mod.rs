//! Lab `routing`: who knows where a key lives, and what happens when a client's map is stale
//! (source 003, section 6; issue 32).
//!
//! Phases, against the real cluster (embedded: `broker --nodes 3` in-process; or `--bootstrap`)
//! through our client, then a model of Redis Cluster: a producer with a fresh map goes straight
//! to each leader; `orders-7`'s leader moves (AlterPartitionReassignments); the same producer,
//! its map now stale, meets NOT_LEADER_OR_FOLLOWER, re-reads metadata and delivers everything;
//! a client that never re-reads its map keeps failing on the old leader, which the cluster's
//! per-node redirect counter reveals; then MOVED and ASK, hash tags and CROSSSLOT.
//!
//! Read `story` first: the phases in the order a trainer tells them.
//!
//! - `plan`: flags; `kafka`: the Kafka clients' runs; `metrics`: the cluster's own counters;
//!   `redis`: the Redis Cluster model; `evidence`: what the phases show once run; `figures`: the
//!   JSON figures and the verdict.

mod evidence;
mod figures;
mod kafka;
mod metrics;
mod plan;
mod redis;
mod story;

use crate::lab::report::LabReport;
use crate::lab::{Lab, LabContext, LabError};
pub use plan::RoutingArgs;

pub struct Routing;

impl Lab for Routing {
    const NAME: &'static str = "routing";
    const SUMMARY: &'static str =
        "Stale partition maps: NOT_LEADER_OR_FOLLOWER, redirect ratios, Redis MOVED and ASK";
    type Args = RoutingArgs;

    fn run(args: &RoutingArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
        story::run(args, ctx)
    }
}
