//! What the routing lab's phases show once they have run: the cluster's own counters, the
//! model's clients side by side, the source's log line, and the summary. The story
//! ([`super::story`]) says when.

use std::collections::BTreeMap;

use super::figures::{self, AfterMove, Figures};
use super::kafka::{NeverRefreshed, Sent, CLIENT_ID};
use super::metrics::NodeProduce;
use super::plan::MOVED_PARTITION;
use super::redis::Tally;
use crate::lab::report::{count, percent, Align, Level, LogLine, Narrator, Panel, Summary, Table};
use client::ServerError;

/// Each node, the partitions it leads and the records the producer sent it, by its map.
pub fn leaders_table(n: &mut Narrator, node_ids: &[i32], map: &[i32], sent: &Sent) {
    let mut table = Table::new(&[
        ("node", Align::Right),
        ("leads", Align::Right),
        ("records", Align::Right),
    ]);
    let mut panel = stale_answers_panel("the producer's map of leaders", sent);
    for id in node_ids {
        let leads = map.iter().filter(|&l| l == id).count();
        let records = sent.by_node.get(id).copied().unwrap_or(0);
        table.row([id.to_string(), leads.to_string(), records.to_string()]);
        panel = panel.bar(
            format!("node {id}"),
            records,
            format!("leads {leads}"),
            false,
        );
    }
    n.panel(panel);
    n.table(&table);
}

/// The answers that told a producer its map of leaders was stale, and what it asked to learn it.
pub fn stale_answers_panel(title: &str, sent: &Sent) -> Panel {
    let answers = sent.invalid_metadata.len();
    Panel::new(title)
        .figure("NOT_LEADER_OR_FOLLOWER answers", answers, answers > 0)
        .figure("metadata requests", sent.metadata_requests, false)
}

/// A client that never re-reads its map: its requests the old leader refused.
pub fn never_panel(never: &NeverRefreshed) -> Panel {
    Panel::new("a map never refreshed")
        .figure(
            "refused: not stored",
            never.not_leader,
            never.not_leader > 0,
        )
        .figure("requests", never.requests, false)
        .figure(
            "redirect ratio",
            percent(figures::never_ratio(never)),
            false,
        )
}

/// Java's producer's line for each answer that said its map was stale, as source 003 quotes it.
pub fn warnings(answers: &[ServerError]) -> Vec<LogLine> {
    answers
        .iter()
        .map(|e| LogLine {
            at: None,
            level: Level::Warn,
            source: None,
            text: format!(
                "o.a.k.c.NetworkClient - [Producer clientId={CLIENT_ID}] Received invalid \
                 metadata error in produce request on partition {}-{} due to {}",
                e.topic.as_deref().unwrap_or("?"),
                e.partition.unwrap_or(-1),
                java_exception(&e.name())
            ),
        })
        .collect()
}

/// The cluster's own Produce counters per node over the never-refreshing client's sends.
pub fn node_evidence(
    n: &mut Narrator,
    nodes: Option<&BTreeMap<i32, NodeProduce>>,
    old_leader: i32,
) {
    let Some(nodes) = nodes else {
        n.say(
            "This cluster's metrics are not readable here (give --metrics HOST:PORT for a broker \
             started with --metrics). On Kafka the same counter is the JMX metric \
             kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=Produce,\
             error=NOT_LEADER_OR_FOLLOWER, over RequestsPerSec.",
        );
        return;
    };
    let mut table = Table::new(&[
        ("node", Align::Right),
        ("Produce requests", Align::Right),
        ("NOT_LEADER_OR_FOLLOWER", Align::Right),
        ("redirect ratio", Align::Right),
    ]);
    for (node, c) in nodes {
        let ratio = c.not_leader as f64 / c.requests.max(1) as f64;
        table.row([
            node.to_string(),
            c.requests.to_string(),
            c.not_leader.to_string(),
            percent(ratio),
        ]);
    }
    n.say(
        "The cluster's own counters (kafka_network_requests_total and \
           kafka_network_request_redirects_total, read from its metrics) over those sends:",
    );
    n.table(&table);
    if let Some(old) = nodes.get(&old_leader) {
        n.say(&format!(
            "Node {old_leader}, the old leader, refused {} of its {} Produce requests. No error \
             rate of the application shows this; the redirect ratio per node does, and it is the \
             metric source 003 says to set up in advance.",
            old.not_leader, old.requests
        ));
    }
}

/// `NOT_LEADER_OR_FOLLOWER` as Java's client names it: `NotLeaderOrFollowerException`.
fn java_exception(name: &str) -> String {
    let mut out = String::new();
    for word in name.split('_') {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first);
            out.extend(chars.map(|c| c.to_ascii_lowercase()));
        }
    }
    out + "Exception"
}
pub fn tallies(n: &mut Narrator, rows: [(&str, &Tally); 2]) {
    let mut table = Table::new(&[
        ("client", Align::Left),
        ("requests", Align::Right),
        ("hops", Align::Right),
        ("redirects", Align::Right),
        ("map changes", Align::Right),
        ("gave up", Align::Right),
    ]);
    for (name, t) in rows {
        table.row([
            name.to_string(),
            t.requests.to_string(),
            t.hops.to_string(),
            t.redirects.to_string(),
            t.map_changes.to_string(),
            t.failed.to_string(),
        ]);
    }
    n.table(&table);
}

pub fn summary(f: &Figures, after: Option<&AfterMove>) -> Summary {
    let mut happened = vec![format!(
        "With a fresh map the producer met {} NOT_LEADER_OR_FOLLOWER on {}.",
        f.fresh_map_not_leader_errors,
        count(f.nodes as u64, "node", "nodes")
    )];
    if let Some(a) = after {
        happened.push(format!(
            "After {}-{MOVED_PARTITION}'s leader moved from node {} to node {}, the producer met \
             {} NOT_LEADER_OR_FOLLOWER, made {} and lost {} of {} records; a \
             client that never re-read its map had {} of {} records refused ({}).",
            a.topic,
            a.from,
            a.to,
            a.stale.invalid_metadata.len(),
            count(
                a.stale.metadata_requests,
                "metadata request",
                "metadata requests"
            ),
            a.sent.saturating_sub(a.stored.1),
            a.sent,
            a.never.not_leader,
            a.never.requests,
            percent(figures::never_ratio(&a.never))
        ));
    }
    happened.push(format!(
        "In the Redis model, ASK treated as MOVED changed a map {} times during one slot's \
         migration; MOVED ignored cost {}x the hops.",
        f.ask_treated_as_moved_flaps, f.moved_ignored_latency_multiple
    ));
    Summary {
        happened,
        why: vec![
            "Every client caches the map of who owns what; the map changes without telling \
             anyone, so a stale map is a mode of operation, not a bug (source 003, section 6)."
                .to_string(),
            "The protocols correct it per request: Kafka answers NOT_LEADER_OR_FOLLOWER and the \
             producer re-reads metadata; Redis answers MOVED (update the map) or ASK (go there \
             once, keep the map)."
                .to_string(),
        ],
        what_to_do: vec![
            "Use clients that re-read metadata on these errors; do not write your own routing \
             without it."
                .to_string(),
            "Graph redirect answers over requests per node (Kafka: ErrorsPerSec with \
             NOT_LEADER_OR_FOLLOWER over RequestsPerSec) before you need it."
                .to_string(),
            "In Redis Cluster, keep keys used together under one hash tag, and treat ASK and \
             MOVED differently."
                .to_string(),
        ],
    }
}
