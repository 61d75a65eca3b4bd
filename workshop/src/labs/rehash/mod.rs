//! Lab `rehash`: how many keys move when nodes change, under mod N, a consistent-hash ring,
//! rendezvous, jump hash and fixed slots (LABS.md, "Lab rehash"; source 003, sections 3.3 and 4;
//! source 004). Pure computation: no broker.
//!
//! Phases: source 004's twelve values under mod 3 then mod 4; source 004's ring by hand; every
//! scheme on the same seeded keys through the same change, side by side; jump hash asked to
//! lose a middle bucket; one node of twice the capacity. The verdict: mod N moves most keys,
//! the consistent schemes about the minimum, 1/(N+1) when one node joins N.
//!
//! Read `story` first: the phases in the order a trainer tells them, each one's question, what
//! it computes and what it shows.
//!
//! - [`crate::kit::schemes`]: the routing schemes, library code with their own tests (lab
//!   migrate routes with the ring too).
//! - `plan`: flags and their checks; `keys`: the seeded key set; `measure`: movement, spread,
//!   lookup time and state of one scheme through one change; `compare`: the line-up of schemes;
//!   `worked`: the sources' worked examples; `evidence`: what each phase shows; `figures`: the
//!   JSON figures and the verdict.

mod compare;
mod evidence;
mod figures;
mod keys;
mod measure;
mod plan;
mod story;
mod worked;

use crate::kit::schemes::{Membership, SchemeError};
use crate::lab::report::{LabReport, Narrator};
use crate::lab::{Lab, LabContext, LabError};
use compare::Spec;
use figures::{Refusal, SpreadLaw};
use keys::KeySet;
use measure::{mean_ring_spread, Measurement};
pub use plan::RehashArgs;

/// Token placements averaged for the ring's spread law: enough that the mean is steady to a
/// few percent of itself, few enough to cost milliseconds.
const PLACEMENTS: u32 = 64;

/// The heavy node's capacity in the weighted comparison: twice a standard node.
const HEAVY_WEIGHT: u32 = 2;

pub struct Rehash;

impl Lab for Rehash {
    const NAME: &'static str = "rehash";
    const SUMMARY: &'static str =
        "How many keys move when nodes change: mod N, a ring, rendezvous, jump hash, fixed slots";
    type Args = RehashArgs;

    fn run(args: &RehashArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
        story::run(args, ctx)
    }
}

/// Measures every spec through the change; a scheme that cannot express it is a refusal.
fn measure_all(
    n: &Narrator,
    specs: &[Spec],
    from: &Membership,
    to: &Membership,
    keys: &KeySet,
    salt: u64,
) -> (Vec<(Spec, Measurement)>, Vec<Refusal>) {
    let progress = n.progress(specs.len() as u64, "routing every key");
    let mut measured = Vec::new();
    let mut refused = Vec::new();
    for &spec in specs {
        progress.set_message(spec.label());
        match spec.measure(from, to, keys, salt) {
            Ok(m) => measured.push((spec, m)),
            Err(err) => refused.push(Refusal::new(spec, err.to_string())),
        }
        progress.inc();
    }
    progress.finish();
    (measured, refused)
}

/// For each ring measured, its spread next to the mean over many placements and 1/sqrt(v).
fn spread_law(
    to: &Membership,
    measured: &[(Spec, Measurement)],
    salt: u64,
) -> Result<Vec<SpreadLaw>, LabError> {
    let round = crate::lab::report::round;
    measured
        .iter()
        .filter_map(|(spec, m)| spec.vnodes().map(|v| (v, m)))
        .map(|(vnodes, m)| {
            let mean = mean_ring_spread(to, vnodes, PLACEMENTS, salt).map_err(scheme_error)?;
            Ok(SpreadLaw {
                vnodes,
                this_ring: round(m.spread.stddev_over_avg, 6),
                mean_stddev_over_avg: round(mean, 6),
                placements: PLACEMENTS,
                one_over_sqrt_v: round(1.0 / f64::from(vnodes).sqrt(), 6),
            })
        })
        .collect()
}

/// Scheme errors outside the measured line-up (the worked examples, the weighted memberships,
/// the spread law) cannot come from the flags, which `Plan` has checked: they would be bugs.
fn scheme_error(err: SchemeError) -> LabError {
    LabError::Internal(err.to_string())
}
