//! What each phase of lab `rehash` shows once it has computed (the line-up's table and notes,
//! the per-node loads, the weighted comparison, the refusals) and the summary at the end.
//! Every number shown is passed in from what the lab computed. The phases and their questions
//! are in [`super::story`].

use super::compare::Spec;
use super::figures::{Figures, HashTag, Refusal, SchemeRow, SpreadLaw};
use super::measure::Measurement;
use super::plan::Plan;
use crate::kit::schemes::{node_name, NodeId};
use crate::lab::report::{self, percent, thousands, Align, Narrator, Panel, Summary, Table};

/// Nodes shown in the per-node table; the rest are summarised by the spread columns.
const NODES_SHOWN: usize = 12;

pub fn lineup_evidence(
    n: &mut Narrator,
    plan: &Plan,
    measured: &[(Spec, Measurement)],
    refused: &[Refusal],
    ideal: f64,
    law: &[SpreadLaw],
    tags: &[HashTag],
) {
    n.answer();
    n.panel(moving_panel(measured, ideal));
    let mut table = Table::new(&[
        ("scheme", Align::Left),
        ("moved", Align::Right),
        ("between survivors", Align::Right),
        ("max/avg", Align::Right),
        ("stddev/avg", Align::Right),
        ("lookup", Align::Right),
        ("state", Align::Right),
    ]);
    for (spec, m) in measured {
        table.row([
            spec.label(),
            percent(m.moved_fraction()),
            percent(m.moved_between_survivors_fraction()),
            format!("{:.3}", m.spread.max_over_avg),
            percent(m.spread.stddev_over_avg),
            format!("{:.0} ns", m.lookup_ns),
            bytes(m.state_bytes),
        ]);
    }
    n.table(&table);
    say_refusals(n, refused);
    n.say(&format!(
        "moved: keys whose node changed (at least {}); between survivors: moves between two nodes there \
         before and after, never needed; lookup: time per key here; max/avg, stddev/avg: keys per node:",
        percent(ideal)
    ));
    node_loads(n, plan, measured);
    hash_tags(n, tags);
    ring_notes(n, law);
}

/// The keys each scheme moved, beside the fewest any scheme must move; moves between two
/// surviving nodes, never needed, marked.
fn moving_panel(measured: &[(Spec, Measurement)], ideal: f64) -> Panel {
    let keys = measured.first().map_or(0, |(_, m)| m.keys);
    let mut panel = Panel::new("keys moving")
        .figure("keys", thousands(keys as u64), false)
        .figure("must move, at least", percent(ideal), false);
    for (spec, m) in measured {
        panel = panel.bar(
            spec.label(),
            m.moved as u64,
            format!(
                "{} moved · {} between survivors",
                percent(m.moved_fraction()),
                percent(m.moved_between_survivors_fraction())
            ),
            m.moved_between_survivors > 0,
        );
    }
    panel
}

/// Redis Cluster's hash-tag rule, on the lab's first key: what is hashed, and the slot.
fn hash_tags(n: &mut Narrator, tags: &[HashTag]) {
    let [key, tagged, tagged_too, untagged, empty] = tags else {
        return;
    };
    n.say(&format!(
        "Redis hashes the tag: with K = {}, {} and {} are slots {} and {} as K is {}; {} (no tag) is \
         {}, {} (empty braces: no tag) {}.",
        key.key,
        tagged.key.replace(&key.key, "K"),
        tagged_too.key.replace(&key.key, "K"),
        tagged.slot,
        tagged_too.slot,
        key.slot,
        untagged.key.replace(&key.key, "K"),
        untagged.slot,
        empty.key,
        empty.slot
    ));
}

/// Keys per node after the change, one column per scheme: the spread columns, in detail.
fn node_loads(n: &mut Narrator, plan: &Plan, measured: &[(Spec, Measurement)]) {
    let labels: Vec<String> = measured.iter().map(|(spec, _)| spec.short()).collect();
    let mut columns = vec![("node", Align::Left)];
    columns.extend(labels.iter().map(|l| (l.as_str(), Align::Right)));
    let mut table = Table::new(&columns);
    for (i, id) in plan.to.ids().enumerate().take(NODES_SHOWN) {
        let mut row = vec![node_name(id)];
        row.extend(measured.iter().map(|(_, m)| m.loads[i].keys.to_string()));
        table.row(row);
    }
    n.table(&table);
    if plan.to.len() > NODES_SHOWN {
        n.say(&format!("(first {NODES_SHOWN} of {} nodes)", plan.to.len()));
    }
}

fn ring_notes(n: &mut Narrator, law: &[SpreadLaw]) {
    if law.is_empty() {
        return;
    }
    let mut table = Table::new(&[
        ("tokens per node", Align::Right),
        ("this ring", Align::Right),
        ("mean of placements", Align::Right),
        ("1/sqrt(v)", Align::Right),
    ]);
    for l in law {
        table.row([
            l.vnodes.to_string(),
            percent(l.this_ring),
            percent(l.mean_stddev_over_avg),
            percent(l.one_over_sqrt_v),
        ]);
    }
    n.say(&format!(
        "A ring's spread falls as 1/sqrt(v), and one ring's is a draw: the mean over {} token placements:",
        law[0].placements
    ));
    n.table(&table);
    n.say(
        "Source 003's rule of thumb: 200,000 keys, a fifth node added to four, expect about 20 % moved and \
         5-8 % spread; 40 % moved means it is not really a ring, 30 % spread means too few tokens.",
    );
}

pub fn weighted_evidence(
    n: &mut Narrator,
    heavy: NodeId,
    measured: &[(Spec, Measurement)],
    refused: &[Refusal],
    share: f64,
    ideal: f64,
) {
    n.answer();
    let heavy_column = format!("{} share", node_name(heavy));
    let mut table = Table::new(&[
        ("scheme", Align::Left),
        (heavy_column.as_str(), Align::Right),
        ("moved", Align::Right),
        ("between survivors", Align::Right),
        ("max/avg", Align::Right),
        ("stddev/avg", Align::Right),
    ]);
    for (spec, m) in measured {
        table.row([
            spec.label(),
            percent(m.share_of(heavy)),
            percent(m.moved_fraction()),
            percent(m.moved_between_survivors_fraction()),
            format!("{:.3}", m.spread.max_over_avg),
            percent(m.spread.stddev_over_avg),
        ]);
    }
    n.table(&table);
    say_refusals(n, refused);
    n.say(&format!(
        "Fair share {}, minimum move {}; spread is per unit of capacity, so a node of weight 2 holding \
         twice the keys counts as even.",
        percent(share),
        percent(ideal)
    ));
}

fn say_refusals(n: &mut Narrator, refused: &[Refusal]) {
    let lines: Vec<report::LogLine> = refused
        .iter()
        .map(|r| refusal(format!("{}: refused: {}", r.scheme, r.reason)))
        .collect();
    if !lines.is_empty() {
        n.log(lines);
    }
}

/// A scheme's own answer to a change it cannot express, set off as a log line.
pub(super) fn refusal(text: String) -> report::LogLine {
    report::LogLine {
        at: None,
        level: report::Level::Error,
        source: None,
        text,
    }
}

pub(super) fn keep_mark(kept: bool) -> String {
    if kept { "kept" } else { "" }.to_string()
}

pub(super) fn names(ids: &[NodeId]) -> String {
    ids.iter()
        .map(|&id| node_name(id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Bytes for people: `48 B`, `15.0 KiB`, `1.2 MiB`.
pub(super) fn bytes(n: usize) -> String {
    match n {
        0..=1023 => format!("{n} B"),
        1024..=1_048_575 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}

pub fn summary(f: &Figures) -> Summary {
    let mut happened = Vec::new();
    if let Some(m) = f.schemes.iter().find(|r| r.scheme == "mod-n") {
        happened.push(format!(
            "mod N moved {} of {} keys going from {} to {} nodes; {} of all keys moved between \
             nodes that were there before and after.",
            percent(m.moved_fraction),
            thousands(f.keys as u64),
            f.from,
            f.to,
            percent(m.moved_between_survivors)
        ));
    }
    let max_vnodes = f.schemes.iter().filter_map(|r| r.vnodes).max();
    let judged: Vec<&SchemeRow> = f.schemes.iter().filter(|r| r.judged(max_vnodes)).collect();
    let moved = judged.iter().map(|r| r.moved_fraction);
    if let (Some(lo), Some(hi)) = (moved.clone().reduce(f64::min), moved.reduce(f64::max)) {
        let needless: Vec<String> = judged
            .iter()
            .filter(|r| r.moved_between_survivors > 0.0)
            .map(|r| r.name())
            .collect();
        happened.push(format!(
            "The consistent schemes moved between {} and {}, against a minimum of {}; {}.",
            percent(lo),
            percent(hi),
            percent(f.ideal_moved_fraction),
            if needless.is_empty() {
                "none moved a key between two nodes that stayed".to_string()
            } else {
                format!(
                    "{} moved keys between nodes that stayed",
                    needless.join(", ")
                )
            }
        ));
    }
    let few_tokens: Vec<String> = f
        .schemes
        .iter()
        .filter(|r| r.scheme == "ring" && !r.judged(max_vnodes))
        .map(|r| {
            format!(
                "{} token{}: {} moved, spread {}",
                r.vnodes.unwrap_or(0),
                if r.vnodes == Some(1) { "" } else { "s" },
                percent(r.moved_fraction),
                percent(r.stddev_over_avg)
            )
        })
        .collect();
    if !few_tokens.is_empty() {
        happened.push(format!(
            "Rings with fewer tokens per node ({}): \
             with few tokens, what changes hands is a handful of random arcs.",
            few_tokens.join("; ")
        ));
    }
    if let Some(probe) = f.jump_middle_removal.as_ref().filter(|p| p.refused) {
        happened.push(format!(
            "Jump hash refused to remove bucket {} of {}.",
            probe.bucket, probe.buckets
        ));
    }
    let w = &f.weighted;
    let shares: Vec<String> = w
        .schemes
        .iter()
        .filter(|r| r.row.judged(max_vnodes))
        .map(|r| format!("{} {}", r.row.name(), percent(r.heavy_share)))
        .collect();
    let refused: Vec<&str> = w.refused.iter().map(|r| r.scheme).collect();
    happened.push(format!(
        "With {} at twice the capacity (fair share {}): {}{}.",
        w.node,
        percent(w.expected_share),
        shares.join(", "),
        if refused.is_empty() {
            String::new()
        } else {
            format!("; {} refused weights", refused.join(" and "))
        }
    ));

    Summary {
        happened,
        why: vec![
            "mod N ties the divisor to the node count: a key stays only when h % N == h % M, about \
             1/(N+1) of keys from N to N+1, so N/(N+1) move, most of them between nodes that did not \
             change (source 003, section 3.3)."
                .into(),
            "A ring token takes only the arc before it; with v tokens per node the arcs average out and \
             the spread falls as 1/sqrt(v) (source 003, section 4; source 004)."
                .into(),
            "Rendezvous moves a key only when the new node outscores its owner; jump hash only to the \
             new last bucket; fixed slots never re-hash a key, only entries of the placement table move."
                .into(),
        ],
        what_to_do: vec![
            "Never route by hash % node count. Decouple slots from nodes: fixed slots or partitions, \
             created with headroom (x3 to x5 in Kafka, source 003, section 3.4), because changing their \
             number is mod N again (lab partitions)."
                .into(),
            "With a ring, use enough tokens (Cassandra: 16 since 4.0, 256 before) and test it: 200,000 \
             keys, add a fifth node to four, expect about 20 % moved and 5-8 % spread."
                .into(),
            "Rendezvous for small clusters and replica lists (its ranking is a preference list); jump \
             hash for numbered logical buckets behind a directory; weights where nodes differ."
                .into(),
            "Routing is not data: a new ring needs a migration protocol (source 004: copy, catch up, block \
             writes briefly, switch with a ring version, old owners refuse stale versions)."
                .into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(bytes(48), "48 B");
        assert_eq!(bytes(15_360), "15.0 KiB");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
    }
}
