//! Lab `migrate` as a trainer tells it: each run's opening and question, the run, and its
//! evidence ([`super::evidence`] lays that out), then the summary. Every number shown is passed
//! in from what the runs measured; nothing here decides anything.

use std::collections::BTreeMap;

use tokio::runtime::Runtime;

use super::evidence;
use super::figures::{self, Figures, Runs};
use super::kafka::{produce_commands, USERS_TOPIC};
use super::plan::{self, Plan};
use super::scenario::{ring_v7, Scenario};
use super::traffic::{self, Traffic, HOT_TENANT, TENANT_MS, TENANT_RATE};
use super::Runner;
use crate::lab::report::{count, thousands, Narrator, Phase as Opening, Summary};
use crate::lab::target::Cluster;
use crate::lab::LabError;

/// Every run, each narrated as it happens.
pub fn phases(
    rt: &Runtime,
    cluster: &Cluster,
    plan: &Plan,
    seed: u64,
    n: &mut Narrator,
) -> Result<figures::Figures, LabError> {
    let profiles = traffic::profiles(plan, seed);
    let (orders, faults) = traffic::tenant(plan, seed);
    ring(n, plan, &profiles, &cluster.name(USERS_TOPIC));
    evidence::ring_evidence(n, &profiles);
    // The commands, written once for every run, within the first phase.
    let (users, tenant) = produce_commands(rt, cluster, n, &profiles, &orders, faults)?;
    let mut runs = Runner {
        rt,
        cluster,
        plan,
        users: &users,
        tenant: &tenant,
        runs: BTreeMap::new(),
    };

    routers_only(n);
    runs.phase(n, &[Scenario::RoutersOnly])?;
    evidence::routers_only_evidence(n, Runs(&runs.runs).get(Scenario::RoutersOnly)?);
    copy_once(n, plan);
    runs.phase(n, &[Scenario::CopyOnce])?;
    evidence::copy_once_evidence(n, Runs(&runs.runs).get(Scenario::CopyOnce)?);
    no_fencing(n, plan);
    runs.phase(n, &[Scenario::NoFencing])?;
    evidence::no_fencing_evidence(n, Runs(&runs.runs).get(Scenario::NoFencing)?);
    protocol(n, plan);
    runs.phase(n, &[Scenario::Protocol])?;
    evidence::protocol_evidence(n, Runs(&runs.runs).get(Scenario::Protocol)?);
    failure(n);
    runs.phase(n, &[Scenario::Failure])?;
    evidence::failure_evidence(n, Runs(&runs.runs).get(Scenario::Failure)?);
    rollback(n);
    runs.phase(n, &[Scenario::RollbackRoutersOnly, Scenario::Rollback])?;
    let done = Runs(&runs.runs);
    evidence::rollback_evidence(
        n,
        done.get(Scenario::RollbackRoutersOnly)?,
        done.get(Scenario::Rollback)?,
    );
    hot_tenant(n, plan, &tenant.topic);
    runs.phase(n, &[Scenario::DualWriteNaive, Scenario::DualWriteKeyed])?;
    let done = Runs(&runs.runs);
    evidence::hot_tenant_evidence(
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

pub fn ring(n: &mut Narrator, plan: &Plan, profiles: &Traffic, commands: &str) {
    let about = format!(
        "A profile service keeps {users} users on shards A, B and C, placed on source 004's ring \
         of positions 0..99 (XXH3 of the user id, mod 100). Ring version 7 is {v7}; \
         version 8 adds D at 40, which takes (20, 40] from B. \
         Writes arrive as commands on {commands}, \
         keyed by user id (2 partitions); a consumer group of 2 service instances applies each \
         to the shard its routing table names. Each shard's changes go to its own changelog \
         topic; the routing table is versioned records in a topic that keeps every one \
         (cleanup.policy=delete, retention.ms=-1): the latest per key is in force, and the \
         rest is the audit trail. \
         Every run: {ms} lab ms, {rate} writes and 1 read a ms, Ben writing every 20 ms.",
        users = thousands(profiles.users.len() as u64),
        v7 = ring_v7().describe(),
        ms = thousands(plan.duration_ms),
        rate = plan.rate,
    );
    n.phase(Opening {
        title: "Source 004's ring: D joins at 40",
        about: &about,
        predict: "how many users change shard, and from where to where?",
    });
}

pub fn routers_only(n: &mut Narrator) {
    n.phase(Opening {
        title: "Routers only",
        about: &format!(
            "At {} ms the routing topic gets ring version 8, and every instance reads it. No data \
             moves: the profiles of (20, 40] stay on B.",
            plan::MIGRATE_AT
        ),
        predict: "what does Ben's next read return?",
    });
}

pub fn copy_once(n: &mut Narrator, plan: &Plan) {
    n.phase(Opening {
        title: "Copy once, then switch",
        about: &format!(
            "At {} ms a snapshot of (20, 40] on B is copied to D, {} a ms (throttled), then \
             ring version 8. B takes writes all along.",
            plan::MIGRATE_AT,
            count(plan.copy_rate.into(), "row", "rows")
        ),
        predict: "how many writes are lost, and which?",
    });
}

pub fn no_fencing(n: &mut Narrator, plan: &Plan) {
    n.phase(Opening {
        title: "No fencing",
        about: &format!(
            "Every step of the protocol (next phase), but B does not check the version a write \
             carries. Ben's instance stops following the routing topic at {} ms and reads it \
             again only {} ms after the handover: until then it routes with version 7.",
            plan::MIGRATE_AT,
            plan.stale_ms
        ),
        predict: "what happens to that instance's writes to (20, 40] after the handover?",
    });
}

pub fn protocol(n: &mut Narrator, plan: &Plan) {
    n.phase(Opening {
        title: "The protocol",
        about: &format!(
            "Source 004's five steps, source 001's stages, each recorded in the routing topic: prepare; \
             snapshot at a recorded changelog offset, copied {} a ms; catch up by replaying \
             B's changelog from it ({} records a ms, idempotent); validate; block writes to the \
             range, apply the rest, commit version 8 (B now refuses version 7); keep B's copy. \
             Ben's instance is stale again, as before.",
            count(plan.copy_rate.into(), "row", "rows"),
            plan.replay_rate
        ),
        predict: "how long are writes to (20, 40] blocked, and how many are lost?",
    });
}

pub fn failure(n: &mut Narrator) {
    n.phase(Opening {
        title: "D fails halfway",
        about: &format!(
            "The protocol again; {} ms into its catch-up, D crashes and loses its memory, and the \
             worker beside it with it. D is back {} ms later, rebuilt from its own changelog.",
            plan::FAIL_AFTER_MS,
            plan::DOWN_MS
        ),
        predict: "does the migration start over, or resume? What is lost?",
    });
}

pub fn rollback(n: &mut Narrator) {
    n.phase(Opening {
        title: "Rolling back after D took writes",
        about: &format!(
            "The protocol commits; {} ms later (B still keeps its copy) the move is undone, two \
             ways: ring version 9 gives (20, 40] back to B (routers set back); or a migration back, \
             replaying D's changelog from the handover offset into B's copy, then version 9.",
            plan::ROLLBACK_AFTER_MS
        ),
        predict: "what happens to the writes D took in between?",
    });
}

pub fn hot_tenant(n: &mut Narrator, plan: &Plan, commands: &str) {
    n.phase(Opening {
        title: "Source 001's hot tenant: 64 virtual buckets",
        about: &format!(
            "Tenant {HOT_TENANT}'s orders ({} of them, {TENANT_RATE} writes a ms, each adding to an order's \
             total, on {commands}) all live on its own shard. \
             At {} ms its route becomes bucketed by hash(order_id) % {}, by dual write: writes to \
             both places, a backfill {} a ms, validate, switch reads, stop old writes. \
             {} % of second writes fail once and are retried: first without idempotency keys, \
             then with them. Traffic: {TENANT_MS} ms.",
            thousands(plan.orders.into()),
            plan::SPLIT_AT,
            plan.buckets,
            count(plan.copy_rate.into(), "row", "rows"),
            plan.failure_percent
        ),
        predict: "do the old and new copies agree at validation?",
    });
}

pub fn summary(f: &Figures) -> Summary {
    let t = &f.hot_tenant;
    Summary {
        happened: vec![
            format!(
                "Routers only: {} reads missed writes ({} users looked missing). Copy once: {} writes \
                 lost. No fencing: {} writes since handover, all lost.",
                f.routers_only.missed_reads_routers_only,
                f.routers_only.users_missing_routers_only,
                f.copy_once.lost_writes_copy_once,
                f.no_fencing.writes_since_handover_unfenced
            ),
            format!(
                "The protocol: {} lost, {} missed, writes to the range blocked {} ms; D failing halfway \
                 and a rollback that replays D's changes: {} and {} lost. Routers set back: {} lost.",
                f.protocol.lost_writes_protocol,
                f.protocol.missed_reads_protocol,
                f.protocol.write_block_ms.map_or("-".into(), |ms| ms.to_string()),
                f.failure.lost_after_failure,
                f.rollback.lost_writes_rollback,
                f.rollback.lost_writes_rollback_routers_only
            ),
            format!(
                "Tenant 42 in {} buckets: {} orders diverged without idempotency keys, {} with them.",
                t.bucket_count, t.divergent_orders_naive, t.divergent_orders_keyed
            ),
        ],
        why: vec![
            "A route says where to look, not what is there: data and routing must move together.".into(),
            "Writes keep coming while data is copied; only a change stream replayed from the \
             snapshot's offset carries them over, and only a brief block makes the tail final."
                .into(),
            "Refreshing routers does not stop old writers; a version checked on every write does.".into(),
            "Retries repeat effects; an idempotency key makes a repeat a no-op, on both copies.".into(),
        ],
        what_to_do: vec![
            "Keep routing versioned and central in a topic that keeps its history (the audit \
             log; a compacted topic would keep only the latest record per key, so add one for \
             the current map if routers must start fast); log the version with each request."
                .into(),
            "Move data with snapshot + changelog from a recorded offset, idempotently, then validate.".into(),
            "Fence: old owners refuse requests carrying an older version; stale routers refresh.".into(),
            "Keep the old copy for a while; undo by replaying the new owner's changes back.".into(),
        ],
    }
}
