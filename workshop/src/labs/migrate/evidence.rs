//! The evidence of lab `migrate`'s runs as the room sees it: the ring's table, the service's
//! and the shards' log lines, the routing topic record by record, validation and rollback
//! tables, tenant 42's load. Every number comes from the runs.

use std::collections::BTreeMap;

use super::engine::keys::{LabTime, RowKey, ShardId};
use super::engine::machine::{Destination, MigrationRecord, Phase};
use super::engine::routing::{RoutingRecord, RoutingTable};
use super::engine::store::{ChangeBody, LogLine};
use super::figures::{
    self, CopyOnce, Failure, HotTenant, NoFencing, Protocol, Rollback, RoutersOnly,
};
use super::scenario::{ring_v7, ring_v8, Run, MOVED};
use super::traffic::{Traffic, BEN};
use crate::lab::report::{count, Align, Level, LogLine as Line, Narrator, Panel, Table};

/// The ring's answer: users per shard before and after D joins, and who moves.
pub fn ring_evidence(n: &mut Narrator, profiles: &Traffic) {
    n.answer();
    let tables = [ring_v7(), ring_v8()].map(|ring| {
        RoutingTable::new(ring, BTreeMap::new()).expect("source 004's rings are valid")
    });
    let before = figures::users_per_shard(&profiles.users, &tables[0]);
    let after = figures::users_per_shard(&profiles.users, &tables[1]);
    let moving = profiles.users.iter().filter(|u| MOVED.contains(u)).count();
    let mut panel = Panel::new("shards, ring version 7 to 8").figure("users moving", moving, false);
    for id in ShardId::ALL {
        let note = format!("version 7: {}", before[&id]);
        panel = panel.bar(format!("shard {id}"), after[&id] as u64, note, false);
    }
    n.panel(panel);
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

/// A run's writes and reads as its audit counts them, and the writes each shard's changelog
/// holds at its end: what the routers' versions and the fencing made of them.
fn run_panel(run: &Run) -> Panel {
    let f = figures::run_figures(run);
    let mut panel = Panel::new(format!("run {}", f.run))
        .figure("acknowledged writes", f.acknowledged, false)
        .figure("lost writes", f.lost_writes, f.lost_writes > 0)
        .figure("missed reads", f.missed_reads, f.missed_reads > 0)
        .figure("refused as stale (fenced)", f.refused_stale, false);
    for (id, changes) in &run.changelogs {
        let writes = changes
            .iter()
            .filter(|(_, c)| matches!(c.body, ChangeBody::Write { .. }))
            .count();
        panel = panel.bar(format!("writes on {id}"), writes as u64, "", false);
    }
    panel
}

pub fn routers_only_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    n.panel(run_panel(run));
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

pub fn copy_once_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    n.panel(run_panel(run));
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

pub fn no_fencing_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    n.panel(run_panel(run));
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

pub fn protocol_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    n.panel(run_panel(run));
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
        count(writes, "write", "writes"),
        count(reads, "read", "reads")
    )
}

pub fn failure_evidence(n: &mut Narrator, run: &Run) {
    n.answer();
    n.panel(run_panel(run));
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

pub fn rollback_evidence(n: &mut Narrator, naive: &Run, back: &Run) {
    n.answer();
    n.panel(run_panel(naive));
    n.panel(run_panel(back));
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

pub fn hot_tenant_evidence(n: &mut Narrator, naive: &Run, keyed: &Run) {
    n.answer();
    n.panel(run_panel(naive));
    n.panel(run_panel(keyed));
    let t = &HotTenant::of(naive, keyed);
    // The figures hold the tenant's bucketed route as the routing topic does (version 0: none).
    if t.route_version > 1 {
        n.say(&format!(
            "The tenant's record in the routing topic, in source 001's form:\n\
             tenants:\n  \"{}\":\n    strategy: bucketed\n    bucket_count: {}\n    \
             route_version: {}\n    migration_state: {}",
            t.tenant, t.bucket_count, t.route_version, t.migration_state
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
                .map(|s| per.get(&s.to_string()).copied().unwrap_or(0).to_string()),
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
        source: Some(format!("shard-{}", l.shard.to_string().to_lowercase())),
        text: l.text.clone(),
    }
}

fn show(offset: Option<u64>) -> String {
    offset.map_or("-".into(), |o| o.to_string())
}
