//! The lab's figures, computed from what happened: the ledger's audit rows (who applied which
//! payment, from which partition and offset, in which generation) and the journal (batches,
//! commits, revocations, assignments). Two independent counts must agree: duplicates in the
//! ledger, and records processed but never committed by the member that processed them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::journal::{Entry, Event};
use super::ledger::{Applier, Effect};

/// A run of consecutive offsets of one partition applied twice by the same two hands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redelivery {
    pub partition: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub count: u64,
    /// Who applied these records first, and who again.
    pub first: Applier,
    pub second: Applier,
}

/// Every application of a payment after its first, paired with the application before it, as
/// runs of consecutive offsets. Effects must be in the order applied.
pub fn redeliveries(effects: &[Effect]) -> Vec<Redelivery> {
    let mut previous: HashMap<&str, &Effect> = HashMap::new();
    let mut again: Vec<(&Effect, &Effect)> = Vec::new();
    for e in effects {
        if let Some(before) = previous.insert(&e.payment_id, e) {
            again.push((before, e));
        }
    }
    again.sort_by(|(a1, b1), (a2, b2)| {
        (b1.partition, b1.offset, &a1.by, &b1.by).cmp(&(b2.partition, b2.offset, &a2.by, &b2.by))
    });
    let mut runs: Vec<Redelivery> = Vec::new();
    for (first, second) in again {
        match runs.last_mut() {
            Some(run)
                if run.partition == second.partition
                    && run.last_offset + 1 == second.offset
                    && run.first == first.by
                    && run.second == second.by =>
            {
                run.last_offset = second.offset;
                run.count += 1;
            }
            _ => runs.push(Redelivery {
                partition: second.partition,
                first_offset: second.offset,
                last_offset: second.offset,
                count: 1,
                first: first.by.clone(),
                second: second.by.clone(),
            }),
        }
    }
    runs
}

/// Applications beyond the first of each payment.
pub fn duplicates(effects: &[Effect]) -> u64 {
    let mut seen = BTreeSet::new();
    effects
        .iter()
        .filter(|e| !seen.insert(e.payment_id.as_str()))
        .count() as u64
}

/// The shortest time between a payment's application and its next one: how soon the replay
/// came (a dedup TTL must outlast it).
pub fn shortest_replay_ms(effects: &[Effect]) -> Option<u64> {
    let mut last: HashMap<&str, u64> = HashMap::new();
    let mut shortest: Option<u64> = None;
    for e in effects {
        if let Some(before) = last.insert(&e.payment_id, e.at_ms) {
            let gap = e.at_ms.saturating_sub(before);
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
        }
    }
    shortest
}

/// Records handed out by polls and processed.
pub fn processed(entries: &[Entry]) -> u64 {
    entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Batch { ranges, .. } => Some(ranges.iter().map(|r| r.len()).sum::<u64>()),
            _ => None,
        })
        .sum()
}

/// The highest offset the group accepted a commit of, per partition.
pub fn committed(entries: &[Entry]) -> BTreeMap<i32, i64> {
    let mut out: BTreeMap<i32, i64> = BTreeMap::new();
    for e in entries {
        if let Event::Commit { offsets, .. } = &e.event {
            for (&p, &o) in offsets {
                let c = out.entry(p).or_insert(o);
                *c = (*c).max(o);
            }
        }
    }
    out
}

/// The offsets of `partition` the ledger applied at or past `from` (a committed offset, or the
/// log start where nothing is committed): what an owner starting at `from` applies again.
pub fn applied_from(effects: &[Effect], partition: i32, from: i64) -> u64 {
    let offsets: BTreeSet<i64> = effects
        .iter()
        .filter(|e| e.partition == partition && e.offset >= from)
        .map(|e| e.offset)
        .collect();
    offsets.len() as u64
}

/// Records that a member processed and that no later commit of that member, in the same
/// generation, covered: what the next owner of the partition reads again.
pub fn processed_uncommitted(entries: &[Entry]) -> u64 {
    let mut total = 0;
    for (i, e) in entries.iter().enumerate() {
        let Event::Batch { generation, ranges } = &e.event else {
            continue;
        };
        for r in ranges {
            let covered = entries[i + 1..]
                .iter()
                .filter(|c| c.member == e.member)
                .filter_map(|c| match &c.event {
                    Event::Commit {
                        generation: g,
                        offsets,
                    } if g == generation => offsets.get(&r.partition).copied(),
                    _ => None,
                })
                .max();
            let from = covered.map_or(r.first, |c| c.max(r.first));
            total += (r.last + 1 - from).max(0) as u64;
        }
    }
    total
}

/// Partitions taken from members that kept running, and how long each stayed without an owner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Revocations {
    pub partitions: u64,
    /// The longest time one of them waited for its next owner.
    pub longest_pause_ms: u64,
    /// Their waits added up: partition-milliseconds without consumption.
    pub total_pause_ms: u64,
}

/// Revocations between `from_ms` and `to_ms` from members other than `except` (the one whose
/// incident caused the rebalances), each paired with the next assignment of the partition.
pub fn revocations(entries: &[Entry], from_ms: u64, to_ms: u64, except: &str) -> Revocations {
    let mut out = Revocations::default();
    for (i, e) in entries.iter().enumerate() {
        let Event::Revoked { partitions, .. } = &e.event else {
            continue;
        };
        if e.at_ms < from_ms || e.at_ms > to_ms || e.member.as_deref() == Some(except) {
            continue;
        }
        for p in partitions {
            out.partitions += 1;
            let next = entries[i + 1..].iter().find(|a| {
                matches!(&a.event, Event::Assigned { partitions, .. } if partitions.contains(p))
            });
            if let Some(a) = next {
                let pause = a.at_ms.saturating_sub(e.at_ms);
                out.longest_pause_ms = out.longest_pause_ms.max(pause);
                out.total_pause_ms += pause;
            }
        }
    }
    out
}

/// Generations the group went through after `from_ms`: the new generation numbers members
/// joined from then on.
pub fn rebalances_after(entries: &[Entry], from_ms: u64) -> u64 {
    let joined = |e: &Entry| match e.event {
        Event::Joined { generation, .. } => Some(generation),
        _ => None,
    };
    let before = entries
        .iter()
        .filter(|e| e.at_ms < from_ms)
        .filter_map(joined)
        .max()
        .unwrap_or(-1);
    let after: BTreeSet<i32> = entries
        .iter()
        .filter(|e| e.at_ms >= from_ms)
        .filter_map(joined)
        .filter(|&g| g > before)
        .collect();
    after.len() as u64
}

/// For every "Setting offset ... to the committed offset N": whether the member's next batch of
/// that partition started at N; for every partition found without a committed offset, whether it
/// started at 0, where `auto.offset.reset=earliest` puts it (the lab's topics are new, and
/// nothing is deleted from them). Returns (checked, mismatches as text).
pub fn resumed_at_committed(entries: &[Entry]) -> (u64, Vec<String>) {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let (partition, offset) = match e.event {
            Event::SettingOffset { partition, offset } => (partition, offset),
            Event::NoCommittedOffset { partition } => (partition, 0),
            _ => continue,
        };
        // The member's next batch of the partition, unless it gave the partition up first (an
        // assignment during the lab's warm-up is given up before anything is produced).
        let first = entries[i + 1..]
            .iter()
            .filter(|b| b.member == e.member)
            .find_map(|b| match &b.event {
                Event::Batch { ranges, .. } => ranges
                    .iter()
                    .find(|r| r.partition == partition)
                    .map(|r| Some(r.first)),
                Event::Revoked { partitions, .. } | Event::Lost { partitions, .. }
                    if partitions.contains(&partition) =>
                {
                    Some(None)
                }
                _ => None,
            })
            .flatten();
        if let Some(first) = first {
            checked += 1;
            if first != offset {
                wrong.push(format!(
                    "{} resumed partition {partition} at {first}, not at {offset}",
                    e.member.as_deref().unwrap_or("?")
                ));
            }
        }
    }
    (checked, wrong)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labs::rebalance::journal::Range;

    fn effect(
        seq: u64,
        payment: &str,
        partition: i32,
        offset: i64,
        who: &Applier,
        at_ms: u64,
    ) -> Effect {
        Effect {
            seq,
            payment_id: payment.into(),
            account: "a".into(),
            amount_cents: 1,
            partition,
            offset,
            by: who.clone(),
            at_ms,
        }
    }

    fn entry(at_ms: u64, member: &str, event: Event) -> Entry {
        Entry {
            at_ms,
            member: Some(member.into()),
            event,
        }
    }

    /// One poll's records of one partition, `first..=last`, processed in `generation`.
    fn batch(generation: i32, partition: i32, first: i64, last: i64) -> Event {
        let ranges = vec![Range {
            partition,
            first,
            last,
        }];
        Event::Batch { generation, ranges }
    }

    fn commit(generation: i32, partition: i32, next: i64) -> Event {
        let offsets = BTreeMap::from([(partition, next)]);
        Event::Commit {
            generation,
            offsets,
        }
    }

    #[test]
    fn redeliveries_are_runs_of_offsets_with_both_hands_and_generations() {
        let (b3, b5, b7) = (
            Applier::new("billing-3", 4),
            Applier::new("billing-5", 5),
            Applier::new("billing-7", 5),
        );
        let mut effects = Vec::new();
        let mut seq = 0;
        let mut add = |p: &str, part, off, who: &Applier, at| {
            effects.push(effect(seq, p, part, off, who, at));
            seq += 1;
        };
        // billing-3 applies 3@10..12 and 4@20..21; the new owners apply them again.
        add("p10", 3, 10, &b3, 100);
        add("p11", 3, 11, &b3, 110);
        add("p12", 3, 12, &b3, 120);
        add("p20", 4, 20, &b3, 130);
        add("p21", 4, 21, &b3, 140);
        add("p13", 3, 13, &b5, 31_000);
        add("p10", 3, 10, &b5, 31_000);
        add("p11", 3, 11, &b5, 31_020);
        add("p12", 3, 12, &b5, 31_040);
        add("p20", 4, 20, &b7, 31_100);
        add("p21", 4, 21, &b7, 31_120);
        assert_eq!(duplicates(&effects), 5);
        assert_eq!(shortest_replay_ms(&effects), Some(30_900));
        assert_eq!(
            redeliveries(&effects),
            [
                Redelivery {
                    partition: 3,
                    first_offset: 10,
                    last_offset: 12,
                    count: 3,
                    first: b3.clone(),
                    second: b5.clone()
                },
                Redelivery {
                    partition: 4,
                    first_offset: 20,
                    last_offset: 21,
                    count: 2,
                    first: b3,
                    second: b7
                },
            ]
        );
        assert!(redeliveries(&effects[..6]).is_empty());
    }

    #[test]
    fn applied_from_counts_each_offset_at_or_past_the_commit_once() {
        let (b3, b5) = (Applier::new("billing-3", 4), Applier::new("billing-5", 5));
        let effects = [
            effect(0, "p1", 5, 0, &b3, 0),
            effect(1, "p2", 5, 1, &b3, 0),
            effect(2, "p3", 5, 2, &b3, 0),
            effect(3, "p4", 4, 2, &b3, 0),
            // A redelivery of offset 1: one offset, applied twice.
            effect(4, "p2", 5, 1, &b5, 0),
        ];
        assert_eq!(applied_from(&effects, 5, 0), 3);
        assert_eq!(applied_from(&effects, 5, 1), 2);
        assert_eq!(applied_from(&effects, 5, 3), 0);
        assert_eq!(applied_from(&effects, 4, 0), 1);
    }

    #[test]
    fn uncommitted_is_what_no_later_commit_of_the_same_member_and_generation_covers() {
        let entries = vec![
            entry(0, "billing-3", batch(4, 3, 0, 99)),
            entry(1, "billing-3", commit(4, 3, 100)),
            entry(2, "billing-3", batch(4, 3, 100, 199)),
            entry(3, "billing-1", commit(4, 3, 200)), // someone else's commit covers nothing
            entry(
                4,
                "billing-3",
                Event::CommitFailed {
                    generation: 4,
                    offsets: BTreeMap::from([(3, 200)]),
                    error: "CommitFailed".into(),
                },
            ),
            entry(5, "billing-5", batch(5, 3, 100, 149)),
            entry(6, "billing-5", commit(5, 3, 150)),
            entry(7, "billing-5", batch(5, 3, 150, 159)),
            entry(8, "billing-5", commit(6, 3, 160)), // another generation
        ];
        assert_eq!(processed(&entries), 100 + 100 + 50 + 10);
        assert_eq!(processed_uncommitted(&entries), 100 + 10);
        assert_eq!(committed(&entries), BTreeMap::from([(3, 200)]));
    }

    #[test]
    fn revocations_count_running_members_and_wait_for_the_next_assignment() {
        let revoked = |g, ps: &[i32]| Event::Revoked {
            generation: g,
            partitions: ps.to_vec(),
        };
        let assigned = |g, ps: &[i32]| Event::Assigned {
            generation: g,
            partitions: ps.to_vec(),
        };
        let entries = vec![
            entry(5, "billing-1", revoked(1, &[0, 1])), // before the window
            entry(100, "billing-1", revoked(4, &[0, 1, 2])),
            entry(200, "billing-3", revoked(4, &[3])), // the incident's member
            entry(400, "billing-5", revoked(4, &[6])),
            entry(1_100, "billing-1", assigned(5, &[0, 1, 2, 3])),
            entry(1_300, "billing-5", assigned(5, &[6])),
        ];
        let r = revocations(&entries, 50, 2_000, "billing-3");
        assert_eq!(
            r,
            Revocations {
                partitions: 4,
                longest_pause_ms: 1_000,
                total_pause_ms: 3 * 1_000 + 900
            }
        );
    }

    #[test]
    fn rebalances_are_new_generations_and_resumption_is_checked_per_partition() {
        let joined = |g| Event::Joined {
            generation: g,
            member_id: "m".into(),
            protocol: None,
            partitions: vec![],
        };
        let entries = vec![
            entry(0, "billing-1", joined(4)),
            entry(10, "billing-5", joined(4)), // a static member back in the same generation
            entry(20, "billing-1", joined(5)),
            entry(30, "billing-1", joined(6)),
            entry(
                40,
                "billing-1",
                Event::SettingOffset {
                    partition: 3,
                    offset: 120,
                },
            ),
            entry(50, "billing-1", batch(6, 3, 120, 130)),
        ];
        assert_eq!(rebalances_after(&entries, 10), 2);
        assert_eq!(rebalances_after(&entries, 31), 0);
        assert_eq!(resumed_at_committed(&entries), (1, vec![]));
        let mut more = entries.clone();
        more.push(entry(
            60,
            "billing-1",
            Event::NoCommittedOffset { partition: 5 },
        ));
        more.push(entry(70, "billing-1", batch(6, 5, 3, 9)));
        let (checked, wrong) = resumed_at_committed(&more);
        assert_eq!(checked, 2);
        assert_eq!(wrong, ["billing-1 resumed partition 5 at 3, not at 0"]);
        // Given up before any batch: nothing to check.
        more.insert(
            7,
            entry(
                65,
                "billing-1",
                Event::Revoked {
                    generation: 6,
                    partitions: vec![5],
                },
            ),
        );
        assert_eq!(resumed_at_committed(&more), (1, vec![]));
    }
}
