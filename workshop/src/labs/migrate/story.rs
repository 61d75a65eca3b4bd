//! The narration of lab `migrate`: each phase's question before its run, the evidence after,
//! and the summary. Every number shown is passed in from what the runs measured; nothing here
//! decides anything.

use std::collections::BTreeMap;

use super::engine::keys::{LabTime, RowKey, ShardId};
use super::engine::machine::{Destination, MigrationRecord, Phase};
use super::engine::routing::{RoutingRecord, RoutingTable};
use super::engine::store::LogLine;
use super::figures::{
    self, CopyOnce, Failure, Figures, HotTenant, NoFencing, Protocol, Rollback, RoutersOnly,
};
use super::plan::{self, Plan};
use super::scenario::{ring_v7, ring_v8, Run, MOVED};
use super::traffic::{Traffic, BEN, HOT_TENANT, TENANT_MS, TENANT_RATE};
use crate::lab::report::{
    thousands, Align, Level, LogLine as Line, Narrator, Phase as Opening, Summary, Table,
};

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
    n.answer();
    let tables = [ring_v7(), ring_v8()].map(|ring| {
        RoutingTable::new(ring, BTreeMap::new()).expect("source 004's rings are valid")
    });
    let before = figures::users_per_shard(&profiles.users, &tables[0]);
    let after = figures::users_per_shard(&profiles.users, &tables[1]);
    let mut table = Table::new(&[
        ("shard", Align::Left),
        ("users, version 7", Align::Right),
        ("users, version 8", Align::Right),
    ]);
    for id in ShardId::ALL {
        table.row([
            id.to_string(),
            before[&id].to_string(),
            after[&id].to_string(),
        ]);
    }
    n.table(&table);
    let moved = profiles.users.iter().filter(|u| MOVED.contains(u)).count();
    n.say(&format!(
        "{moved} of {} users move, all from B to D: those at positions 21 to 40. Ben, at {}, is one.",
        profiles.users.len(),
        super::engine::keys::position(BEN)
    ));
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

pub fn routers_only_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    let f = RoutersOnly::of(run);
    let ben = RowKey::user(BEN);
    if let Some(read) = run.audit.missed_reads.iter().find(|r| r.key == ben) {
        let answer = match read.found {
            true => format!(
                "found, {} of {} acknowledged writes missing",
                read.missing, read.acknowledged
            ),
            false => format!("not found ({} acknowledged writes)", read.acknowledged),
        };
        let text = format!(
            "read {BEN} with ring version {} from shard {}: {answer}",
            read.version, read.shard
        );
        n.log(vec![line(
            read.at,
            format!("instance {}", read.instance + 1),
            text,
        )]);
    }
    n.say(&format!(
        "{} reads missed acknowledged writes; {} users appeared missing altogether, the others \
         showed only what was written after the switch. {} acknowledged writes are on B, where \
         no router looks any more.",
        f.missed_reads_routers_only, f.users_missing_routers_only, f.lost_writes_routers_only
    ));
}

pub fn copy_once(n: &mut Narrator, plan: &Plan) {
    n.phase(Opening {
        title: "Copy once, then switch",
        about: &format!(
            "At {} ms a snapshot of (20, 40] on B is copied to D, {} a ms (throttled), then \
             ring version 8. B takes writes all along.",
            plan::MIGRATE_AT,
            count(plan.copy_rate.into(), "row")
        ),
        predict: "how many writes are lost, and which?",
    });
}

pub fn copy_once_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    let f = CopyOnce::of(run);
    let copied = f.copied_rows_copy_once;
    n.say(&format!(
        "The copy of {copied} rows took {} ms. {} writes to B in that time never reached D: lost.",
        f.copy_ms, f.lost_writes_copy_once
    ));
    if let Some(lost) = &f.lost_write_example {
        let from = match (lost.command_partition, lost.command_offset) {
            (Some(p), Some(o)) => format!(" (commands partition {p}, offset {o})"),
            _ => String::new(),
        };
        let text = format!(
            "applied {} for {}{from} at changelog offset {}",
            lost.command,
            lost.key,
            lost.changelog_offset.map_or("-".into(), |o| o.to_string()),
        );
        let source = format!("shard-{}", lost.shard.to_lowercase());
        n.log(vec![line(LabTime(lost.at_ms), source, text)]);
        n.say(&format!("D, which owns {} now, never got it.", lost.key));
    }
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

pub fn no_fencing_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    let f = NoFencing::of(run);
    let refreshed = run
        .events
        .stale_until
        .map_or("-".into(), |at| at.to_string());
    n.say(&format!(
        "The shards' log (source 003, section 5); Ben's instance read the routing topic at {refreshed}:"
    ));
    let lines: Vec<&LogLine> = run
        .lines
        .iter()
        .filter(|l| l.text.contains("serving writes") || l.text.contains("relinquishing"))
        .collect();
    n.log(lines.into_iter().map(shard_line).collect());
    n.say(&format!(
        "B's changelog holds {} writes to (20, 40] tagged version 7 after the handover; no reader \
         will ever see them: {} acknowledged writes lost.",
        f.writes_since_handover_unfenced, f.lost_writes_unfenced
    ));
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
            count(plan.copy_rate.into(), "row"),
            plan.replay_rate
        ),
        predict: "how long are writes to (20, 40] blocked, and how many are lost?",
    });
}

pub fn protocol_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    let f = Protocol::of(run);
    n.say("The routing topic, record by record (offset, key, what it says):");
    n.table(&trail(&run.routing_log));
    if let Some(v) = &f.validation {
        let mut table = Table::new(&[
            ("validation", Align::Left),
            ("rows", Align::Right),
            ("key set", Align::Left),
            ("checksum", Align::Left),
        ]);
        table.row([
            "B".into(),
            v.source_rows.to_string(),
            v.source_key_set.clone(),
            v.source_checksum.clone(),
        ]);
        table.row([
            "D".into(),
            v.destination_rows.to_string(),
            v.destination_key_set.clone(),
            v.destination_checksum.clone(),
        ]);
        n.table(&table);
    }
    let refusals = run.lines.iter().filter(|l| l.level == "WARN");
    n.log(refusals.map(shard_line).collect());
    n.say(&format!(
        "{} records of B's changelog applied to D, from the snapshot's offset through validation \
         and the block; replaying a second time the {} of the range up to where the catch-up \
         first reached B's end changed {} rows. Writes to the range were blocked {} ms, {} held \
         meanwhile. {} {} writes lost, {} reads missed, {} duplicated.",
        f.replayed_records,
        f.replayed_twice,
        f.replay_twice_changes,
        f.write_block_ms.map_or("-".into(), |ms| ms.to_string()),
        f.held_writes,
        stale_refusals(&f),
        f.lost_writes_protocol,
        f.missed_reads_protocol,
        f.duplicated_effects_protocol
    ));
}

/// What B's refusals did to the stale instance, from their counts.
fn stale_refusals(f: &Protocol) -> String {
    let (writes, reads) = (
        f.refused_stale_writes_fenced as u64,
        f.refused_stale_reads_fenced as u64,
    );
    let reads_went_on = match reads {
        0 => String::new(),
        n => format!(
            " {} went on to D without refreshing its table;",
            if n == 1 { "the read" } else { "each read" }
        ),
    };
    let write = match writes {
        0 => " no write of it reached B after the handover.".to_string(),
        _ => " its first refused write made it refresh and write to D.".to_string(),
    };
    format!(
        "B refused {} and {} of the stale instance:{reads_went_on}{write}",
        count(writes, "write"),
        count(reads, "read")
    )
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

pub fn failure_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    let f = Failure::of(run);
    let records: Vec<&MigrationRecord> = run
        .routing_log
        .iter()
        .filter_map(|(_, r)| match r {
            RoutingRecord::Migration(m) => Some(m),
            _ => None,
        })
        .collect();
    let around: Vec<Line> = records
        .windows(2)
        .filter(|w| w[0].state == Phase::Interrupted || w[1].state == Phase::Interrupted)
        .flat_map(|w| [record_line(w[0]), record_line(w[1])])
        .fold(Vec::new(), |mut lines, line| {
            if !lines.contains(&line) {
                lines.push(line);
            }
            lines
        });
    n.log(around);
    let at = |t: Option<LabTime>| t.map_or("-".into(), |t| t.to_string());
    n.say(&format!(
        "D failed at {} and came back at {} with the {} records of its changelog. \
         The worker resumed from the checkpoint in the routing topic, offset {} of B's changelog: \
         {} records D already had were skipped (idempotent apply). {} writes lost, {} duplicated.",
        at(run.events.failed_at),
        at(run.events.recovered_at),
        f.restored_records,
        f.resumed_from_offset.map_or("-".into(), |o| o.to_string()),
        f.skipped_already_applied,
        f.lost_after_failure,
        f.duplicated_after_failure
    ));
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

pub fn rollback_evidence(n: &mut Narrator, naive: &Run, back: &Run) {
    n.answer();
    let f = Rollback::of(naive, back);
    let mut table = Table::new(&[
        ("rollback", Align::Left),
        ("D's changes replayed", Align::Right),
        ("writes lost", Align::Right),
    ]);
    let replayed = |run: &Run| run.rollback().map_or(0, |m| m.stats.replayed).to_string();
    table.row([
        "routers set back".into(),
        replayed(naive),
        f.lost_writes_rollback_routers_only.to_string(),
    ]);
    table.row([
        "migration back".into(),
        replayed(back),
        f.lost_writes_rollback.to_string(),
    ]);
    n.table(&table);
    let at = back
        .events
        .rolled_back_at
        .map_or("-".into(), |t| t.to_string());
    n.say(&format!(
        "Both began at {at}. Once D accepts writes, going back means moving them back \
         (source 004): setting routers back to B is not enough."
    ));
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
            count(plan.copy_rate.into(), "row"),
            plan.failure_percent
        ),
        predict: "do the old and new copies agree at validation?",
    });
}

pub fn hot_tenant_evidence(n: &mut Narrator, naive: &Run, keyed: &Run) {
    n.answer();
    let t = &HotTenant::of(naive, keyed);
    if let Some(route) = keyed.routing_log.iter().find_map(|(_, r)| match r {
        RoutingRecord::Tenant(t) if t.route_version > 1 => Some(*t),
        _ => None,
    }) {
        n.say(&format!(
            "The tenant's record in the routing topic, in source 001's form:\n\
             tenants:\n  \"{}\":\n    strategy: bucketed\n    bucket_count: {}\n    \
             route_version: {}\n    migration_state: {}",
            route.tenant,
            route.bucket_count,
            route.route_version,
            route.migration_state.name()
        ));
    }
    let mut load = Table::new(&[
        ("tenant 42 writes / 100 ms", Align::Left),
        ("A", Align::Right),
        ("B", Align::Right),
        ("C", Align::Right),
        ("D", Align::Right),
    ]);
    for (when, per) in [
        ("before the split", &t.writes_per_100ms_before),
        ("after", &t.writes_per_100ms_after),
    ] {
        let mut row = vec![when.to_string()];
        row.extend(
            ShardId::ALL
                .iter()
                .map(|s| per.get(s.name()).copied().unwrap_or(0).to_string()),
        );
        load.row(row);
    }
    n.table(&load);
    n.say(&format!(
        "The backfill copied {} rows in {} ms, at most {} a ms into one shard.",
        t.backfill_rows, t.backfill_ms, t.backfill_peak_rows_per_ms
    ));
    n.table(&dual_write_table(t));
    if t.naive_state != t.keyed_state {
        n.say(&format!(
            "Without keys the validation failed, so the split ended {} and the tenant stayed in \
             dual write, where more writes met a failure; with keys it ended {}.",
            t.naive_state, t.keyed_state
        ));
    }
}

fn dual_write_table(t: &HotTenant) -> Table {
    let mut table = Table::new(&[
        ("dual write", Align::Left),
        ("failed writes", Align::Right),
        ("orders differing", Align::Right),
        ("effects doubled", Align::Right),
        ("migration", Align::Left),
    ]);
    table.row([
        "no idempotency keys".into(),
        t.dual_write_failures_naive.to_string(),
        t.divergent_orders_naive.to_string(),
        t.duplicated_effects_naive.to_string(),
        t.naive_state.clone(),
    ]);
    table.row([
        "idempotency keys".into(),
        t.dual_write_failures_keyed.to_string(),
        t.divergent_orders_keyed.to_string(),
        t.duplicated_effects_keyed.to_string(),
        t.keyed_state.clone(),
    ]);
    table
}

/// The routing topic's records, consecutive ones of the same key and state as one row.
fn trail(log: &[(u64, RoutingRecord)]) -> Table {
    let mut table = Table::new(&[
        ("offset", Align::Right),
        ("key", Align::Left),
        ("record", Align::Left),
    ]);
    let mut rows: Vec<(String, String, String, usize)> = Vec::new();
    for (offset, record) in log {
        let (key, text) = (record.key(), describe(record));
        let state = text.split_whitespace().next().unwrap_or("").to_string();
        match rows.last_mut() {
            Some((_, k, t, n)) if *k == key && t.split_whitespace().next() == Some(&state) => {
                *t = text;
                *n += 1;
            }
            _ => rows.push((offset.to_string(), key, text, 1)),
        }
    }
    for (offset, key, text, count) in rows {
        let text = match count {
            1 => text,
            n => format!("{text} (x{n}, the last shown)"),
        };
        table.row([offset, key, text]);
    }
    table
}

fn describe(record: &RoutingRecord) -> String {
    match record {
        RoutingRecord::Ring(ring) => format!("version {}: {}", ring.version, ring.describe()),
        RoutingRecord::Tenant(t) => format!(
            "route_version {}, {}",
            t.route_version,
            t.migration_state.name()
        ),
        RoutingRecord::Migration(m) => {
            let to = match m.destination {
                Destination::Shard(s) => s.to_string(),
                Destination::Buckets { bucket_count } => format!("{bucket_count} buckets"),
            };
            let detail = match m.state {
                Phase::Prepared => format!(
                    "{} -> {to}, {}, version {} -> {}",
                    m.source, m.scope, m.from_version, m.target_version
                ),
                Phase::Copying => format!("snapshot at {}@{}", m.source, show(m.snapshot_offset)),
                Phase::CatchingUp | Phase::Interrupted => {
                    format!("next {}@{}", m.source, show(m.next_offset))
                }
                Phase::Validating | Phase::Blocked | Phase::Aborted => match m.validation {
                    Some(v) => format!(
                        "rows {} / {}, {} differing",
                        v.source.rows, v.destination.rows, v.differing_rows
                    ),
                    None => String::new(),
                },
                Phase::Committed => match m.handover {
                    Some(h) => format!(
                        "handover at {}@{} {to}@{}",
                        m.source, h.source_end, h.destination_end
                    ),
                    None => String::new(),
                },
                _ => String::new(),
            };
            format!("{} {detail}", m.state.name())
                .trim_end()
                .to_string()
        }
    }
}

/// A migration record as a line of the routing topic's log.
fn record_line(m: &MigrationRecord) -> Line {
    let text = describe(&RoutingRecord::Migration(m.clone()));
    let text = match m.interrupted {
        Some(phase) => format!("{text} (during {})", phase.name()),
        None => text,
    };
    line(m.at, format!("migration/{}", m.id), text)
}

/// A line of the service's own log, at a moment of lab time.
fn line(at: LabTime, source: String, text: String) -> Line {
    Line {
        at: Some(at.to_string()),
        level: Level::Info,
        source: Some(source),
        text,
    }
}

/// A shard's log line, as the views show logs.
fn shard_line(l: &LogLine) -> Line {
    Line {
        at: Some(l.at.to_string()),
        level: match l.level {
            "WARN" => Level::Warn,
            "ERROR" => Level::Error,
            _ => Level::Info,
        },
        source: Some(format!("shard-{}", l.shard.name().to_lowercase())),
        text: l.text.clone(),
    }
}

/// `n` and `noun`, plural unless `n` is 1: "1 row", "4 rows".
pub(super) fn count(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

fn show(offset: Option<u64>) -> String {
    offset.map_or("-".into(), |o| o.to_string())
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
