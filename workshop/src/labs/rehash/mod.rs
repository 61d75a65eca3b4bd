//! Lab `rehash`: how many keys move when nodes change, under mod N, a consistent-hash ring,
//! rendezvous, jump hash and fixed slots (LABS.md, "Lab rehash"; source 003, sections 3.3 and 4;
//! source 004). Pure computation: no broker.
//!
//! Phases: source 004's twelve values under mod 3 then mod 4; source 004's ring by hand; every
//! scheme on the same seeded keys through the same change, side by side; jump hash asked to
//! lose a middle bucket; one node of twice the capacity. The verdict: mod N moves most keys,
//! the consistent schemes about the minimum, 1/(N+1) when one node joins N.
//!
//! - [`schemes`]: the routing schemes, library code with their own tests.
//! - `plan`: flags and their checks; `keys`: the seeded key set; `measure`: movement, spread,
//!   lookup time and state of one scheme through one change; `compare`: the line-up of schemes;
//!   `worked`: the sources' worked examples; `figures`: the JSON figures and the verdict;
//!   `story`: the narration.

mod compare;
mod figures;
mod keys;
mod measure;
mod plan;
pub mod schemes;
mod story;
mod worked;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::lab::{Lab, LabContext, LabError, Target};
use crate::report::{LabReport, Narrator};
use compare::{lineup, Spec};
use figures::{
    Figures, LookupTime, Measured, Refusal, SchemeRow, SpreadLaw, Weighted, WeightedRow,
};
use keys::KeySet;
use measure::{ideal_moved_fraction, mean_ring_spread, Measurement};
use plan::Plan;
pub use plan::RehashArgs;
use schemes::{node_name, Membership, SchemeError};

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
        let plan = Plan::new(args)?;
        let (from_count, to_count) = (plan.from.len() as u32, plan.to.len() as u32);
        let ideal = ideal_moved_fraction(&plan.from, &plan.to);
        let cycle = worked::mod_cycle(from_count, to_count);
        let expected = figures::expected(
            from_count,
            to_count,
            &cycle,
            ideal,
            plan.vnodes.iter().copied().max(),
        );
        let n = &mut ctx.narrator;
        n.intro(Self::NAME, &expected);
        if let Target::Bootstrap(addr) = &ctx.target {
            n.say(&format!(
                "This lab is pure computation and needs no broker: --bootstrap {addr} is not used."
            ));
        }

        let cycles = story::cycles_to_show(from_count, to_count);
        story::twelve_values(n, &worked::twelve_values(), &cycles);

        let ring_example = worked::seed_004_ring().map_err(scheme_error)?;
        story::ring_by_hand(n, &ring_example);

        // Ring tokens and rendezvous node seeds are placed by the seed, as Cassandra allocates
        // random tokens; the keys are drawn next from the same stream.
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let salt: u64 = rng.gen();
        story::lineup_opening(n, &plan, ideal);
        let keys = KeySet::generate(plan.keys, &mut rng);
        let specs = lineup(&plan.vnodes, plan.partitions);
        let (measured, refused) = measure_all(n, &specs, &plan.from, &plan.to, &keys, salt);
        let ring_spread_law = spread_law(&plan.to, &measured, salt)?;
        let first_key = keys
            .iter()
            .next()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        let redis_hash_tags = worked::redis_hash_tags(&first_key);
        story::lineup_evidence(
            n,
            &plan,
            &measured,
            &refused,
            ideal,
            &ring_spread_law,
            &redis_hash_tags,
        );

        let jump_middle_removal = worked::jump_middle_removal(from_count).map_err(scheme_error)?;
        if let Some(probe) = &jump_middle_removal {
            story::jump_limit(n, probe);
        }

        let (weighted, weighted_lookup_ns) = weighted(n, &plan, &specs, &keys, salt)?;

        let schemes: Vec<SchemeRow> = measured
            .iter()
            .map(|(spec, m)| SchemeRow::new(*spec, m))
            .collect();
        let timings = Measured {
            lookup_ns: measured
                .iter()
                .map(|(spec, m)| LookupTime::new(*spec, m))
                .collect(),
            weighted_lookup_ns,
        };
        let figures = Figures {
            seed: ctx.seed,
            keys: keys.len(),
            from: from_count,
            to: to_count,
            added: plan.added.iter().map(|&id| node_name(id)).collect(),
            removed: plan.removed.iter().map(|&id| node_name(id)).collect(),
            ideal_moved_fraction: crate::report::round(ideal, 6),
            mod_3_to_4_kept_of_12: worked::mod_cycle(3, 4).kept,
            mod_n_cycles: cycles,
            ring_example,
            schemes,
            refused,
            ring_spread_law,
            jump_middle_removal,
            weighted,
            redis_crc16_check: format!("0x{:04X}", schemes::redis_slot_crc(b"123456789")),
            redis_hash_tags,
        };
        let checks = figures::verdict(ideal, &figures.schemes);
        n.summary(&story::summary(&figures));
        let report = LabReport::new(Self::NAME, expected, checks.shown(), &figures)?
            .with_measured(&timings)?;
        n.verdict(&report, &checks);
        Ok(report)
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
    let round = crate::report::round;
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

/// The same change with the plan's heavy node at twice the capacity, before and after; and the
/// lookup times of that comparison.
fn weighted(
    n: &mut Narrator,
    plan: &Plan,
    specs: &[Spec],
    keys: &KeySet,
    salt: u64,
) -> Result<(Weighted, Vec<LookupTime>), LabError> {
    let from = plan
        .from
        .with_weight(plan.heavy, HEAVY_WEIGHT)
        .map_err(scheme_error)?;
    let to = plan
        .to
        .with_weight(plan.heavy, HEAVY_WEIGHT)
        .map_err(scheme_error)?;
    let expected_share = f64::from(HEAVY_WEIGHT) / to.total_weight() as f64;
    let ideal = ideal_moved_fraction(&from, &to);
    story::weighted_opening(n, plan.heavy, HEAVY_WEIGHT, expected_share, ideal);
    let (measured, refused) = measure_all(n, specs, &from, &to, keys, salt);
    story::weighted_evidence(n, plan.heavy, &measured, &refused, expected_share, ideal);
    let round = crate::report::round;
    let lookups = measured
        .iter()
        .map(|(spec, m)| LookupTime::new(*spec, m))
        .collect();
    let weighted = Weighted {
        node: node_name(plan.heavy),
        weight: HEAVY_WEIGHT,
        expected_share: round(expected_share, 6),
        ideal_moved_fraction: round(ideal, 6),
        schemes: measured
            .iter()
            .map(|(spec, m)| WeightedRow {
                row: SchemeRow::new(*spec, m),
                heavy_share: round(m.share_of(plan.heavy), 6),
            })
            .collect(),
        refused,
    };
    Ok((weighted, lookups))
}

/// Scheme errors outside the measured line-up (the worked examples, the weighted memberships,
/// the spread law) cannot come from the flags, which `Plan` has checked: they would be bugs.
fn scheme_error(err: SchemeError) -> LabError {
    LabError::Internal(err.to_string())
}
