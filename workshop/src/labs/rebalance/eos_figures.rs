//! The transactional run's figures (`figures.eos` in the JSON) and its checks: what the output
//! topic holds under read_committed and in the log, and what the payment gateway was asked.

use std::collections::BTreeSet;

use serde::Serialize;

use super::accounting;
use super::eos::{EosOutcome, Seen};
use super::journal::{Entry, Event};
use crate::lab::report::{count, thousands, Checks};

#[derive(Debug, Clone, Serialize)]
pub struct EosFigures {
    pub topic: String,
    pub group: String,
    pub output_topic: String,
    /// Charges at the payment gateway (every application, redeliveries included).
    pub gateway_calls: u64,
    /// Charges beyond the first for the same payment.
    pub gateway_duplicates: u64,
    /// Records processed that no committed transaction of their member covered.
    pub processed_uncommitted: u64,
    /// What the stalled member was told when it added its offsets to its transaction.
    pub offsets_refused_with: Option<String>,
    pub aborted_transactions: u64,
    /// Output records a read_committed consumer read, and how many payments it saw more than
    /// once or never.
    pub output_read_committed: u64,
    pub output_duplicates_read_committed: u64,
    pub output_missing_read_committed: u64,
    /// Output records in the log (read_uncommitted): the aborted ones too.
    pub output_in_log: u64,
    pub output_duplicates_in_log: u64,
    /// Committed output records read_committed saw only after the stalled member aborted: its
    /// open transaction held the partition's last stable offset below them.
    pub output_held_by_open_transaction: u64,
    /// The longest of those waits, from the record's commit to its reading.
    pub longest_hold_ms: u64,
    /// From the gate opening until everything was applied and committed.
    pub run_ms: u64,
}

/// Payments seen more than once, counted beyond the first; and payments never seen.
fn duplicates_and_missing(seen: &[Seen], payments: usize) -> (u64, u64) {
    let distinct: BTreeSet<&str> = seen.iter().map(|s| s.payment_id.as_str()).collect();
    let missing = payments.saturating_sub(distinct.len());
    ((seen.len() - distinct.len()) as u64, missing as u64)
}

/// When the transaction holding `record` committed: the first commit covering its source
/// offset (offsets are committed cumulatively, so that is the commit of its own batch).
fn committed_at(entries: &[Entry], record: &Seen) -> Option<u64> {
    entries.iter().find_map(|e| match &e.event {
        Event::Commit { offsets, .. }
            if offsets
                .get(&record.partition)
                .is_some_and(|&next| next > record.source_offset) =>
        {
            Some(e.at_ms)
        }
        _ => None,
    })
}

pub fn build(o: &EosOutcome, payments: usize) -> EosFigures {
    let entries = o.run.journal.entries();
    let effects = o.run.stores.plain.effects();
    let refused = entries.iter().find_map(|e| match &e.event {
        Event::CommitFailed { error, .. } => Some(error.clone()),
        _ => None,
    });
    let aborted_at: Vec<u64> = entries
        .iter()
        .filter(|e| matches!(e.event, Event::TransactionAborted { .. }))
        .map(|e| e.at_ms)
        .collect();
    // The output partitions the refused transactions had written (the same numbers as the
    // partitions they read).
    let written: BTreeSet<i32> = entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::CommitFailed { offsets, .. } => Some(offsets.keys().copied()),
            _ => None,
        })
        .flatten()
        .collect();
    let mut held = 0;
    let mut longest_hold_ms = 0;
    for record in o
        .read_committed
        .iter()
        .filter(|r| written.contains(&r.partition))
    {
        let Some(committed) = committed_at(&entries, record) else {
            continue;
        };
        let waited_for_abort = aborted_at
            .iter()
            .any(|&abort| committed < abort && record.at_ms >= abort);
        if waited_for_abort {
            held += 1;
            longest_hold_ms = longest_hold_ms.max(record.at_ms - committed);
        }
    }
    let (output_duplicates_read_committed, output_missing_read_committed) =
        duplicates_and_missing(&o.read_committed, payments);
    let (output_duplicates_in_log, _) = duplicates_and_missing(&o.read_uncommitted, payments);
    EosFigures {
        topic: o.run.topic.clone(),
        group: o.run.group.clone(),
        output_topic: o.output.clone(),
        gateway_calls: effects.len() as u64,
        gateway_duplicates: accounting::duplicates(&effects),
        processed_uncommitted: accounting::processed_uncommitted(&entries),
        offsets_refused_with: refused,
        aborted_transactions: aborted_at.len() as u64,
        output_read_committed: o.read_committed.len() as u64,
        output_duplicates_read_committed,
        output_missing_read_committed,
        output_in_log: o.read_uncommitted.len() as u64,
        output_duplicates_in_log,
        output_held_by_open_transaction: held,
        longest_hold_ms,
        run_ms: o.run.settled_ms.saturating_sub(o.run.started_ms),
    }
}

const CHECKS: [&str; 3] = [
    "output exactly once (read_committed)",
    "gateway charged twice",
    "late transaction aborted",
];

/// The run's checks; skipped with the reason when the cluster could not run it.
pub fn verdict(checks: &mut Checks, eos: Result<&EosFigures, &str>) {
    let f = match eos {
        Ok(f) => f,
        Err(reason) => {
            CHECKS.iter().for_each(|name| checks.skip(name, reason));
            return;
        }
    };
    checks.check(
        CHECKS[0],
        f.output_duplicates_read_committed == 0
            && f.output_missing_read_committed == 0
            && f.output_read_committed > 0,
        format!(
            "read_committed read {} output records: {} duplicates, {} payments missing",
            f.output_read_committed,
            f.output_duplicates_read_committed,
            f.output_missing_read_committed
        ),
    );
    checks.check(
        CHECKS[1],
        f.gateway_duplicates > 0 && f.gateway_duplicates == f.processed_uncommitted,
        format!(
            "{} gateway calls, {} of them a second charge = {} processed in the aborted transaction",
            thousands(f.gateway_calls),
            f.gateway_duplicates,
            f.processed_uncommitted
        ),
    );
    let aborted_records = f.output_in_log - f.output_read_committed.min(f.output_in_log);
    checks.check(
        CHECKS[2],
        f.aborted_transactions > 0
            && f.offsets_refused_with.is_some()
            && aborted_records == f.processed_uncommitted,
        format!(
            "{} after the offsets were refused ({}); {} aborted records in the log",
            count(
                f.aborted_transactions,
                "transaction aborted",
                "transactions aborted"
            ),
            f.offsets_refused_with.as_deref().unwrap_or("not refused"),
            aborted_records
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn seen(payment: &str, partition: i32, source_offset: i64, at_ms: u64) -> Seen {
        Seen {
            payment_id: payment.to_string(),
            partition,
            source_offset,
            at_ms,
        }
    }

    fn commit(at_ms: u64, partition: i32, next: i64) -> Entry {
        Entry {
            at_ms,
            member: Some("billing-1".to_string()),
            event: Event::Commit {
                generation: 5,
                offsets: BTreeMap::from([(partition, next)]),
            },
        }
    }

    #[test]
    fn a_record_was_committed_by_the_first_commit_past_its_source_offset() {
        let entries = [commit(10, 3, 50), commit(20, 3, 100), commit(30, 4, 10)];
        assert_eq!(committed_at(&entries, &seen("p", 3, 49, 0)), Some(10));
        assert_eq!(committed_at(&entries, &seen("p", 3, 50, 0)), Some(20));
        assert_eq!(committed_at(&entries, &seen("p", 3, 100, 0)), None);
        assert_eq!(committed_at(&entries, &seen("p", 4, 0, 0)), Some(30));
    }

    #[test]
    fn duplicates_count_beyond_the_first_and_missing_payments_count_too() {
        let records = [
            seen("a", 0, 0, 0),
            seen("b", 0, 1, 0),
            seen("a", 1, 0, 0),
            seen("a", 2, 0, 0),
        ];
        assert_eq!(duplicates_and_missing(&records, 3), (2, 1));
        assert_eq!(duplicates_and_missing(&[], 2), (0, 2));
    }
}
