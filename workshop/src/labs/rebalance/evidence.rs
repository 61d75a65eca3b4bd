//! The evidence lab `rebalance`'s story shows, built from a run's journal and figures: the
//! members' table, the excerpt of their log around the stall, the lag view's per-member sum, the
//! comparison tables, and how numbers read (durations, amounts, ordinals, settings beside
//! Kafka's defaults).

use std::collections::BTreeSet;

use super::figures::Figures;
use super::journal::{hms, Event};
use super::scenario::Outcome;
use crate::lab::report::{self, thousands, Align, Level, Panel, Table};

pub fn secs(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// `101st`, `102nd`, `111th`.
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

pub fn euros(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let c = cents.unsigned_abs();
    format!("{sign}€{}.{:02}", thousands(c / 100), c % 100)
}

/// A setting as the lab runs it, with Kafka's default beside it when it differs: `30 s
/// (Kafka's default: 300 s)`. Our client's defaults are Kafka's (its tests say so).
pub fn setting(value: u64, kafka: u64, show: fn(u64) -> String) -> String {
    match value == kafka {
        true => format!("{} (Kafka's default)", show(value)),
        false => format!("{} (Kafka's default: {})", show(value), show(kafka)),
    }
}

pub fn ms_of(d: std::time::Duration) -> u64 {
    d.as_millis() as u64
}

/// A member's assignment when processing started.
struct Assignment<'a> {
    member: &'a str,
    generation: i32,
    partitions: Vec<i32>,
    /// The records of its partitions.
    payments: i64,
}

/// Each member's assignment when processing started, from the last join before it.
fn assignments<'a>(f: &'a Figures, base: &Outcome) -> Vec<Assignment<'a>> {
    let entries = base.journal.entries();
    let start = entries
        .iter()
        .position(|e| matches!(e.event, Event::ProcessingStarted { .. }))
        .unwrap_or(entries.len());
    f.members
        .iter()
        .filter_map(|member| {
            entries[..start].iter().rev().find_map(|e| match &e.event {
                Event::Joined {
                    generation,
                    partitions,
                    ..
                } if e.member.as_deref() == Some(member) => Some(Assignment {
                    member,
                    generation: *generation,
                    payments: partitions
                        .iter()
                        .map(|p| base.log_end.get(p).copied().unwrap_or(0))
                        .sum(),
                    partitions: partitions.clone(),
                }),
                _ => None,
            })
        })
        .collect()
}

/// Each member's assignment when processing started: generation, partitions, payments.
pub fn members_table(f: &Figures, base: &Outcome) -> Table {
    let mut table = Table::new(&[
        ("MEMBER", Align::Left),
        ("GENERATION", Align::Right),
        ("PARTITIONS", Align::Left),
        ("PAYMENTS", Align::Right),
    ]);
    for a in assignments(f, base) {
        table.row([
            a.member.to_string(),
            a.generation.to_string(),
            partition_names(f, &a.partitions),
            a.payments.to_string(),
        ]);
    }
    table
}

fn partition_names(f: &Figures, partitions: &[i32]) -> String {
    let names: Vec<String> = partitions
        .iter()
        .map(|p| format!("{}-{p}", f.topic))
        .collect();
    names.join(", ")
}

/// The members' table as a panel: each member's payments when processing started, under its
/// name, with its generation and partitions; the stalled member marked.
pub fn members_panel(f: &Figures, base: &Outcome) -> Panel {
    let members = assignments(f, base);
    let mut panel = Panel::new("members")
        .figure("members", members.len(), false)
        .figure("payments", thousands(f.payments as u64), false);
    for a in members {
        panel = panel.bar(
            a.member,
            a.payments.max(0) as u64,
            format!(
                "generation {} · {}",
                a.generation,
                partition_names(f, &a.partitions)
            ),
            a.member == f.stalled_member,
        );
    }
    panel
}

/// What the stall cost: the payments applied twice and what they charged.
pub fn twice_panel(f: &Figures) -> Panel {
    Panel::new("payments applied twice")
        .figure("applied twice", f.duplicates, f.duplicates > 0)
        .figure(
            "charged twice",
            euros(f.double_charged_cents),
            f.double_charged_cents > 0,
        )
        .figure(
            format!("processed by {}, not committed", f.stalled_member),
            f.processed_uncommitted,
            false,
        )
}

/// Each redelivered range as a bar: who applied it in which generation, and who again.
pub fn generations_panel(f: &Figures) -> Panel {
    let mut panel =
        Panel::new("generations").figure("applied twice", f.duplicates, f.duplicates > 0);
    for r in &f.redeliveries {
        panel = panel.bar(
            format!("{}-{}", f.topic, r.partition),
            r.count,
            format!(
                "{} (gen {}) then {} (gen {})",
                r.first.member, r.first.generation, r.second.member, r.second.generation
            ),
            true,
        );
    }
    panel
}

/// Source 003's sequence from the run's journal: the stall, the poll timeout, the revocations of
/// the first rebalance, where the new owners of the stalled member's partitions start, the
/// failed commit, and the stalled member's return.
pub fn incident_lines(o: &Outcome, stalled: &str) -> Vec<report::LogLine> {
    let entries = o.journal.entries();
    let Some(start) = entries
        .iter()
        .position(|e| matches!(e.event, Event::StallStarted { .. }))
    else {
        return vec![note(None, "no stall happened".to_string())];
    };
    let owned: BTreeSet<i32> = entries[..start]
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::Joined { partitions, .. } if e.member.as_deref() == Some(stalled) => {
                Some(partitions.iter().copied().collect())
            }
            _ => None,
        })
        .unwrap_or_default();
    let mut lines = Vec::new();
    let mut timed_out = false;
    let mut reassigned = false;
    let mut offsets_shown = BTreeSet::new();
    for e in &entries[start..] {
        let by_stalled = e.member.as_deref() == Some(stalled);
        let show = match &e.event {
            Event::StallStarted { duration_ms } => {
                lines.push(note(
                    Some(e.at_ms),
                    format!(
                        "{stalled} stops for {} before committing (the lab's stall)",
                        secs(*duration_ms)
                    ),
                ));
                false
            }
            Event::StallEnded => {
                lines.push(note(
                    Some(e.at_ms),
                    format!("{stalled} resumes and commits its batch"),
                ));
                false
            }
            Event::PollTimeout { .. } => {
                timed_out = true;
                true
            }
            Event::Left { .. } => by_stalled,
            Event::Revoked { .. } => timed_out && !reassigned && !by_stalled,
            Event::Assigned { .. } => {
                reassigned |= timed_out;
                false
            }
            Event::SettingOffset { partition, .. } | Event::NoCommittedOffset { partition } => {
                timed_out && owned.contains(partition) && offsets_shown.insert(*partition)
            }
            Event::CommitFailed { .. } | Event::LateCommitAnswered { .. } => by_stalled,
            Event::Lost { .. } => by_stalled,
            _ => false,
        };
        if show {
            if let Some(line) = e.log_line(&o.topic) {
                lines.push(line.event());
            }
        }
        if by_stalled && matches!(e.event, Event::Lost { .. }) {
            break;
        }
    }
    lines
}

/// The lab's own marker in the members' log.
fn note(at_ms: Option<u64>, text: String) -> report::LogLine {
    report::LogLine {
        at: at_ms.map(hms),
        level: Level::Note,
        source: None,
        text,
    }
}

/// The lag table's last column summed per member, the stalled one first.
pub fn processed_per_member(f: &Figures, base: &Outcome) -> String {
    let mut per_member: Vec<(String, u64)> = Vec::new();
    for row in &base.lag_during {
        let (Some(member), Some(n)) = (&row.client_id, row.processed_uncommitted) else {
            continue;
        };
        match per_member.iter_mut().find(|(m, _)| m == member) {
            Some((_, total)) => *total += n,
            None => per_member.push((member.clone(), n)),
        }
    }
    per_member.sort_by_key(|(m, _)| (*m != f.stalled_member, m.clone()));
    let list: Vec<String> = per_member
        .iter()
        .map(|(m, n)| {
            let stalled = if *m == f.stalled_member {
                " (stalled)"
            } else {
                ""
            };
            format!("{m}{stalled} {n}")
        })
        .collect();
    format!(
        "PROCESSED is the members' own count, which the tool cannot see: payments applied to the \
         ledger at or past the committed offset (offset 0 where nothing is committed), which a new \
         owner would apply again. Per member: {}.",
        list.join(", ")
    )
}

/// Each redelivered range: who applied it first and who again, in which generations.
pub fn redeliveries_table(f: &Figures) -> Table {
    let mut table = Table::new(&[
        ("PARTITION", Align::Left),
        ("OFFSETS", Align::Right),
        ("RECORDS", Align::Right),
        ("FIRST APPLIED BY", Align::Left),
        ("APPLIED AGAIN BY", Align::Left),
    ]);
    for r in &f.redeliveries {
        table.row([
            format!("{}-{}", f.topic, r.partition),
            format!("{}..{}", r.first_offset, r.last_offset),
            r.count.to_string(),
            format!("{} (generation {})", r.first.member, r.first.generation),
            format!("{} (generation {})", r.second.member, r.second.generation),
        ]);
    }
    table
}

/// Whose the first and second applications were, and where the new owners started.
pub fn redeliveries_said(f: &Figures, base: &Outcome) -> String {
    let stalled_first = f
        .redeliveries
        .iter()
        .all(|r| r.first.member == f.stalled_member && r.second.generation > r.first.generation);
    // Where the group's commits left each partition: the log start when nothing was committed.
    let committed = |partition: i32| {
        base.lag_during
            .iter()
            .find(|row| row.partition == partition)
            .map(|row| row.current_offset.unwrap_or(0))
    };
    let from_committed = f
        .redeliveries
        .iter()
        .all(|r| committed(r.partition) == Some(r.first_offset));
    if f.redeliveries.is_empty() {
        "No payment was applied twice.".to_string()
    } else if stalled_first {
        let firsts: BTreeSet<i32> = f.redeliveries.iter().map(|r| r.first.generation).collect();
        let seconds: BTreeSet<i32> = f.redeliveries.iter().map(|r| r.second.generation).collect();
        let list = |g: &BTreeSet<i32>| {
            g.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let starts: Vec<String> = f
            .redeliveries
            .iter()
            .map(|r| format!("{}-{} at {}", f.topic, r.partition, r.first_offset))
            .collect();
        format!(
            "Every first application is {}'s, in generation {}; every second one is the new owner's, \
             in generation {}, {} ({}). Neither member did anything wrong.",
            f.stalled_member,
            list(&firsts),
            list(&seconds),
            if from_committed {
                "starting at the committed offset"
            } else {
                "starting at"
            },
            starts.join(", ")
        )
    } else {
        format!(
            "Not every payment applied twice was first applied by {}: see the table.",
            f.stalled_member
        )
    }
}

/// The eager and the cooperative run side by side.
pub fn assignors_table(f: &Figures) -> Table {
    let mut table = Table::new(&[
        ("ASSIGNOR", Align::Left),
        ("REVOKED FROM OTHERS", Align::Right),
        ("LONGEST PAUSE", Align::Right),
        ("TOTAL PAUSE", Align::Right),
        ("REBALANCES", Align::Right),
        ("DUPLICATES", Align::Right),
    ]);
    for s in [&f.scenarios["baseline"], &f.scenarios["cooperative"]] {
        table.row([
            s.assignor.to_string(),
            s.revoked.partitions.to_string(),
            secs(s.revoked.longest_pause_ms),
            secs(s.revoked.total_pause_ms),
            s.rebalances.to_string(),
            s.duplicates.to_string(),
        ]);
    }
    table
}

/// The dynamic and the static restart side by side.
pub fn membership_table(f: &Figures) -> Table {
    let mut table = Table::new(&[
        ("MEMBERSHIP", Align::Left),
        ("REBALANCES", Align::Right),
        ("REVOKED FROM OTHERS", Align::Right),
        ("DUPLICATES", Align::Right),
    ]);
    for (label, key) in [
        ("dynamic", "dynamic"),
        ("static (group.instance.id)", "static"),
    ] {
        let s = &f.scenarios[key];
        table.row([
            label.to_string(),
            s.rebalances.to_string(),
            s.revoked.partitions.to_string(),
            s.duplicates.to_string(),
        ]);
    }
    table
}

/// The two batch sizes side by side.
pub fn batches_table(f: &Figures) -> Table {
    let mut table = Table::new(&[
        ("MAX.POLL.RECORDS", Align::Right),
        ("PROCESSED, NOT COMMITTED", Align::Right),
        ("DUPLICATES", Align::Right),
    ]);
    for key in ["baseline", "small-batch"] {
        let s = &f.scenarios[key];
        table.row([
            s.max_poll_records.to_string(),
            s.processed_uncommitted.to_string(),
            s.duplicates.to_string(),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_durations_and_ordinals_read_well() {
        assert_eq!(
            [1, 2, 3, 4, 11, 12, 13, 101, 102, 111, 123].map(ordinal),
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "101st", "102nd", "111th",
                "123rd"
            ]
        );
        assert_eq!(euros(123_456), "€1,234.56");
        assert_eq!(euros(-5), "-€0.05");
        assert_eq!(secs(40_000), "40 s");
        assert_eq!(secs(150), "150 ms");
        assert_eq!(secs(1_260), "1.3 s");
    }
}
