//! Lab `rehash` as a trainer tells it: source 004's twelve values under mod 3 then mod 4, its
//! ring by hand, then every scheme on the same seeded keys through the same change side by side,
//! jump hash asked to lose a middle bucket, one node of twice the capacity; then the summary
//! ([`super::evidence::summary`]): what happened, why, and what to do. Each phase opens with a
//! question for the room; what it
//! shows once computed is in [`super::evidence`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::compare::{lineup, Spec};
use super::evidence::{self, keep_mark, names, refusal};
use super::figures::{self, Figures, LookupTime, Measured, SchemeRow, Weighted, WeightedRow};
use super::keys::KeySet;
use super::measure::ideal_moved_fraction;
use super::plan::{Plan, RehashArgs};
use super::worked::{self, mod_cycle, Cycle, JumpProbe, RingExample};
use super::{measure_all, scheme_error, spread_law, Rehash, HEAVY_WEIGHT};
use crate::kit::schemes::{self, node_name, NodeId};
use crate::lab::report::{self, percent, thousands, Align, LabReport, Narrator, Phase, Table};
use crate::lab::{Lab, LabContext, LabError, Target};

pub(super) fn run(args: &RehashArgs, ctx: &mut LabContext) -> Result<LabReport, LabError> {
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
    n.intro(Rehash::NAME, &expected);
    if let Target::Bootstrap(addr) = &ctx.target {
        n.say(&format!(
            "This lab is pure computation and needs no broker: --bootstrap {addr} is not used."
        ));
    }

    let cycles = cycles_to_show(from_count, to_count);
    twelve_values(n, &worked::twelve_values(), &cycles);

    let ring_example = worked::seed_004_ring().map_err(scheme_error)?;
    ring_by_hand(n, &ring_example);

    // Ring tokens and rendezvous node seeds are placed by the seed, as Cassandra allocates
    // random tokens; the keys are drawn next from the same stream.
    let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
    let salt: u64 = rng.gen();
    lineup_opening(n, &plan, ideal);
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
    evidence::lineup_evidence(
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
        jump_limit(n, probe);
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
        ideal_moved_fraction: crate::lab::report::round(ideal, 6),
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
    n.summary(&evidence::summary(&figures));
    let report = LabReport::new(Rehash::NAME, expected, checks.shown(), &figures)?
        .with_measured(&timings)?;
    n.verdict(&report, &checks);
    Ok(report)
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
    weighted_opening(n, plan.heavy, HEAVY_WEIGHT, expected_share, ideal);
    let (measured, refused) = measure_all(n, specs, &from, &to, keys, salt);
    evidence::weighted_evidence(n, plan.heavy, &measured, &refused, expected_share, ideal);
    let round = crate::lab::report::round;
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

/// The sources' mod N cases (source 004's 3 to 4; source 003's 4 to 5, 10 to 11 and the memcached
/// tier's 8 to 7) and this run's change, if it is not one of them.
pub fn cycles_to_show(from: u32, to: u32) -> Vec<Cycle> {
    let mut pairs = vec![(3, 4), (4, 5), (10, 11), (8, 7)];
    if !pairs.contains(&(from, to)) {
        pairs.push((from, to));
    }
    pairs.into_iter().map(|(a, b)| mod_cycle(a, b)).collect()
}

pub fn twelve_values(n: &mut Narrator, values: &[(u64, u32, u32)], cycles: &[Cycle]) {
    n.phase(Phase {
        title: "mod N: twelve values, three shards, then four",
        about: "Source 004 routes users with shard = hash(userId) % shardCount. Take the hash values 0 to 11 \
                (a full cycle of both 3 and 4) and add a fourth shard. A value keeps its shard only if \
                h % 3 == h % 4.",
        predict: "how many of the twelve keep their shard?",
    });
    n.answer();
    let mut table = Table::new(&[
        ("hash", Align::Right),
        ("% 3", Align::Right),
        ("% 4", Align::Right),
        ("kept", Align::Left),
    ]);
    for &(v, a, b) in values {
        table.row([
            v.to_string(),
            a.to_string(),
            b.to_string(),
            keep_mark(a == b),
        ]);
    }
    n.table(&table);
    let kept = values.iter().filter(|(_, a, b)| a == b).count();
    n.say(&format!(
        "{kept} of {} keep their shard. Over a full cycle of lcm(N, M) hash values the share is exact:",
        values.len()
    ));
    let mut table = Table::new(&[
        ("change", Align::Left),
        ("cycle", Align::Right),
        ("kept", Align::Right),
        ("moved", Align::Right),
    ]);
    for c in cycles {
        table.row([
            format!("{} to {}", c.from, c.to),
            c.cycle.to_string(),
            c.kept.to_string(),
            percent(c.moved_fraction),
        ]);
    }
    n.table(&table);
    n.say("N to N+1 keeps only 1/(N+1) of keys in place.");
    if let Some(storm) = cycles.iter().find(|c| (c.from, c.to) == (8, 7)) {
        n.say(&format!(
            "Source 003's cache storm: a memcached tier of 8 loses a node, the client switches to mod 7, \
             and {} of keys miss at once; the hit ratio falls from 0.968 to 0.121 and the database \
             behind it runs out of connections.",
            percent(storm.moved_fraction)
        ));
    }
}

pub fn ring_by_hand(n: &mut Narrator, ex: &RingExample) {
    n.phase(Phase {
        title: "A ring by hand (source 004)",
        about: "Positions 0 to 99. A sits at 20, B at 50, C at 80. A hash belongs to the first node at or \
                after it; past 99 the search wraps to 0. Now D joins at 40.",
        predict: "which hashes change owner, and to whom? Where do 35 and 90 go?",
    });
    n.answer();
    let mut table = Table::new(&[
        ("hash", Align::Right),
        ("owner before D", Align::Left),
        ("owner after D", Align::Left),
    ]);
    for (h, before, after) in &ex.samples {
        let moved = if before == after { "" } else { "  (moved)" };
        table.row([h.to_string(), before.clone(), format!("{after}{moved}")]);
    }
    n.table(&table);
    n.say(&format!(
        "D owns {}: {} of the 100 positions changed owner, {}. A hash of 35 now belongs to {}; \
         90 wraps past the end to {}.{}",
        ex.d_owns,
        ex.moved_positions,
        if ex.moved_only_to_d {
            "all of them to D"
        } else {
            "not all of them to D"
        },
        ex.owner_of_35,
        ex.owner_of_90,
        if ex.moved_only_to_d {
            " A new position takes one arc from one neighbour; nothing else moves."
        } else {
            ""
        }
    ));
}

pub fn lineup_opening(n: &mut Narrator, plan: &Plan, ideal: f64) {
    let change = if plan.added.is_empty() {
        format!(
            "{} leave{}",
            names(&plan.removed),
            if plan.removed.len() == 1 { "s" } else { "" }
        )
    } else {
        format!(
            "{} join{}",
            names(&plan.added),
            if plan.added.len() == 1 { "s" } else { "" }
        )
    };
    let about = format!(
        "{} seeded keys, {} nodes, then {change}. Each scheme routes every key before and after:\n\
         - mod N: hash % N.\n\
         - ring: v tokens per node at hashes of node-3#0, node-3#1, ...; a key's owner: the next token.\n\
         - rendezvous: every node scores the key, the highest score wins.\n\
         - jump: Lamping and Veach's jump consistent hash over buckets 0 to n-1.\n\
         - fixed slots: hash % 4096 (source 004); Redis Cluster: CRC16 % 16384 of the key, or of its \
         hash tag (its first non-empty {{...}}); Kafka: murmur2 % {} (Java's producer's partitioner).\n\
         No scheme can move fewer than {} of the keys: the share the change takes from the old nodes.",
        thousands(plan.keys as u64),
        plan.from.len(),
        plan.partitions,
        percent(ideal)
    );
    n.phase(Phase {
        title: "Every scheme, the same keys, the same change",
        about: &about,
        predict: "which schemes move about the minimum? Which spreads keys least evenly?",
    });
}

pub fn jump_limit(n: &mut Narrator, probe: &JumpProbe) {
    let about = format!(
        "{} fails. It is bucket {} of {}, not the last, and jump hash numbers its buckets 0 to n-1.",
        node_name(probe.bucket),
        probe.bucket,
        probe.buckets
    );
    n.phase(Phase {
        title: "What jump hash cannot do",
        about: &about,
        predict: "can jump hash drop that bucket and leave everyone else's keys in place?",
    });
    n.answer();
    n.log(vec![match &probe.error {
        Some(error) => refusal(format!("refused: {error}")),
        None => report::LogLine {
            at: None,
            level: report::Level::Info,
            source: None,
            text: "accepted".to_string(),
        },
    }]);
    if probe.refused {
        n.say(
            "Only the last bucket can go: removing another would renumber every bucket after it, and \
             their keys with it. Jump hash suits a fixed set of logical buckets that a directory maps \
             to machines, not a ring replacement under arbitrary failures (source 003, section 4.1).",
        );
    }
}

pub fn weighted_opening(n: &mut Narrator, heavy: NodeId, weight: u32, share: f64, ideal: f64) {
    let about = format!(
        "The same change, but {} has {weight} times the capacity of the others, before and after. Its \
         fair share afterwards is {}, and the minimum move becomes {}. A ring gives it {weight} times the \
         tokens, rendezvous {weight} times the weight in -w/ln(x), fixed slots {weight} times the slots.",
        node_name(heavy),
        percent(share),
        percent(ideal)
    );
    n.phase(Phase {
        title: "A node with twice the capacity",
        about: &about,
        predict: "which schemes can honour a weight at all?",
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_cases_come_first_and_this_run_last() {
        let pairs = |c: Vec<Cycle>| c.iter().map(|c| (c.from, c.to)).collect::<Vec<_>>();
        assert_eq!(
            pairs(cycles_to_show(4, 5)),
            vec![(3, 4), (4, 5), (10, 11), (8, 7)]
        );
        assert_eq!(pairs(cycles_to_show(5, 3)).last(), Some(&(5, 3)));
    }
}
