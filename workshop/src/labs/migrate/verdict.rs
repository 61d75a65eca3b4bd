//! The lab's verdict: every naive move loses something, the protocol nothing.

use super::figures::Figures;
use crate::lab::report::{count, Checks};

/// The phenomenon, short enough for the verdict line to fit 100 columns.
pub fn expected() -> String {
    "Naive moves of (20, 40] lose writes or reads; the protocol loses none".to_string()
}

/// The checks the verdict rests on: the phenomenon is shown when every one holds.
pub fn verdict(f: &Figures) -> Checks {
    let mut checks = Checks::new();
    let mut check = |name: &str, ok: bool, detail: String| {
        checks.check(name, ok, detail);
    };
    let r = &f.routers_only;
    check(
        "routers only misses reads",
        r.missed_reads_routers_only > 0,
        format!(
            "routers only: {} reads missed acknowledged writes, {} users looked missing",
            r.missed_reads_routers_only, r.users_missing_routers_only
        ),
    );
    check(
        "copy once loses writes",
        f.copy_once.lost_writes_copy_once > 0,
        format!(
            "copy once, then switch: {} writes lost",
            f.copy_once.lost_writes_copy_once
        ),
    );
    let u = &f.no_fencing;
    check(
        "no fencing: writes since handover",
        u.writes_since_handover_unfenced > 0
            && u.lost_writes_unfenced as u64 == u.writes_since_handover_unfenced
            && u.writes_since_handover_counted_by_b == u.writes_since_handover_unfenced,
        format!(
            "no fencing: {} writes since handover in B's changelog ({} by B's count), {} lost",
            u.writes_since_handover_unfenced,
            u.writes_since_handover_counted_by_b,
            u.lost_writes_unfenced
        ),
    );
    let p = &f.protocol;
    let clean = p.lost_writes_protocol + p.missed_reads_protocol + p.duplicated_effects_protocol;
    check(
        "the protocol loses nothing",
        clean == 0 && p.refused_stale_writes_fenced > 0 && p.writes_since_handover_fenced == 0,
        format!(
            "the protocol: {} lost, {} missed reads, {} duplicated; the stale instance was refused \
             {} and {}, {} writes since handover",
            p.lost_writes_protocol,
            p.missed_reads_protocol,
            p.duplicated_effects_protocol,
            count(p.refused_stale_writes_fenced as u64, "write", "writes"),
            count(p.refused_stale_reads_fenced as u64, "read", "reads"),
            p.writes_since_handover_fenced
        ),
    );
    check(
        "a second replay changes nothing",
        p.replayed_twice > 0 && p.replay_twice_changes == 0,
        format!(
            "replaying the {} records of the catch-up a second time changed {} rows",
            p.replayed_twice, p.replay_twice_changes
        ),
    );
    let d = &f.failure;
    check(
        "D fails halfway, nothing lost",
        d.lost_after_failure == 0 && d.duplicated_after_failure == 0 && d.restored_records > 0,
        format!(
            "D failed during its catch-up, came back from {} changelog records, resumed: \
             {} lost, {} duplicated",
            d.restored_records, d.lost_after_failure, d.duplicated_after_failure
        ),
    );
    let b = &f.rollback;
    check(
        "rollback",
        b.lost_writes_rollback_routers_only > 0 && b.lost_writes_rollback == 0,
        format!(
            "rollback after D took writes: routers set back lost {}, a migration back lost {}",
            b.lost_writes_rollback_routers_only, b.lost_writes_rollback
        ),
    );
    let t = &f.hot_tenant;
    check(
        "dual write",
        t.divergent_orders_naive > 0
            && t.divergent_orders_keyed == 0
            && t.duplicated_effects_keyed == 0,
        format!(
            "tenant 42 in {} buckets: without idempotency keys {} orders diverged \
             ({} effects doubled); with them {}",
            t.bucket_count,
            t.divergent_orders_naive,
            t.duplicated_effects_naive,
            t.divergent_orders_keyed
        ),
    );
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::labs::migrate::figures::{figures, Runs};
    use crate::labs::migrate::plan::tests::default_plan;
    use crate::labs::migrate::scenario::{tests::in_memory, Run, Scenario};
    use crate::labs::migrate::traffic;

    fn in_memory_figures(seed: u64) -> Figures {
        let runs: BTreeMap<Scenario, Run> = Scenario::ALL
            .into_iter()
            .map(|s| (s, in_memory(s, seed)))
            .collect();
        let profiles = traffic::profiles(&default_plan(), seed);
        figures(seed, "memory".into(), &profiles, &Runs(&runs)).unwrap()
    }

    #[test]
    fn the_verdict_needs_every_naive_loss_and_no_protocol_loss() {
        let f = in_memory_figures(5);
        let judged = verdict(&f);
        assert!(judged.shown(), "{:#?}", judged.failed().collect::<Vec<_>>());
        let spoiled: [fn(&mut Figures); 6] = [
            |f| f.routers_only.missed_reads_routers_only = 0,
            |f| f.copy_once.lost_writes_copy_once = 0,
            |f| f.no_fencing.lost_writes_unfenced += 1,
            |f| f.protocol.lost_writes_protocol = 1,
            |f| f.failure.duplicated_after_failure = 1,
            |f| f.hot_tenant.divergent_orders_naive = 0,
        ];
        for spoil in spoiled {
            let mut g = f.clone();
            spoil(&mut g);
            let judged = verdict(&g);
            assert!(!judged.shown());
            assert_eq!(judged.failed().count(), 1);
        }
    }
}
