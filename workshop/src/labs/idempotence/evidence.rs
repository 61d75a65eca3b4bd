//! The evidence of lab `idempotence`'s phases as the room sees it: per-partition tables, each
//! lost acknowledgement and what its retry got, the relay's instances, the zombie's writes, and
//! the sentences that read them. Every number comes from the runs.

use super::copies::place;
use super::figures::PartitionRow;
use super::lost_acks::{LossRun, Sent};
use super::plan::Plan;
use super::resize::ResizeRun;
use super::restart::RestartRun;
use super::zombie::{Refusal, ZombieRun, DEBIT, DEPOSIT, OPENING};
use client::LostAck;

use crate::lab::report::{self, Align, Narrator, Panel, Table};

/// Lines of per-record evidence shown before "... and N more".
const SHOWN: usize = 6;
/// Accounts shown in the zombie's tables; the rest are counted.
const ZOMBIE_ACCOUNTS: usize = 8;

pub fn lost_acks_evidence(n: &mut Narrator, run: &LossRun, rows: &[PartitionRow]) {
    n.answer();
    n.panel(acks_panel(rows, run.log.duplicates()));
    partition_table(n, rows, &[SENT, ACKS_LOST, IN_LOG, DUPLICATES]);
    let mut table = Table::new(&[
        ("payment", Align::Left),
        ("partition", Align::Right),
        ("sequence", Align::Right),
        ("lost ack said", Align::Right),
        ("retry got", Align::Right),
        ("", Align::Left),
    ]);
    let lost = run
        .sent
        .iter()
        .flat_map(|s| s.lost.iter().map(move |l| (s, l)));
    let mut shown = 0;
    for (sent, lost) in lost.clone().take(SHOWN) {
        let sequence = match lost.base_sequence {
            -1 => "-".to_string(),
            s => s.to_string(),
        };
        let (got, outcome) = match Retry::of(sent, lost) {
            Retry::OriginalOffset => (
                format!("offset {}", sent.offset),
                "recognised: the original offset",
            ),
            // Recognised, in the broker's words, which give no offset (explained below).
            Retry::AlreadyAppended => ("no offset".to_string(), "DUPLICATE_SEQUENCE_NUMBER"),
            Retry::Appended => (format!("offset {}", sent.offset), "appended again"),
        };
        table.row([
            sent.id.clone(),
            sent.partition.to_string(),
            sequence,
            format!("offset {}", lost.base_offset),
            got,
            outcome.to_string(),
        ]);
        shown += 1;
    }
    if shown > 0 {
        n.say("Lost acknowledgements, and what the retry got:");
        n.table(&table);
        let more = lost.count() - shown;
        if more > 0 {
            n.say(&format!("    ... and {more} more"));
        }
    }
    let dups = run.log.duplicates();
    let counts = format!(
        "{} records for {} payments: {dups} duplicates for {} lost acknowledgements.",
        run.log.records(),
        run.sent.len(),
        run.acks_lost
    );
    let meaning = match (run.acks_lost, dups) {
        (0, _) => "No acknowledgement was lost, so nothing was retried.".to_string(),
        (_, 0) if run.idempotent => {
            let who = run.producer.map_or(String::new(), |p| {
                format!(" {} (epoch {})", p.producer_id, p.epoch)
            });
            format!(
                "Each retry carried the producer id{who} and the sequence of the batch the broker \
                 already had, so {}. That is the whole mechanism: deduplication by (producer id, \
                 epoch, sequence), per partition, of the producer's own retries. The next three \
                 phases change one term each.",
                recognised(run)
            )
        }
        (lost, dups) if lost == dups => {
            "Every lost acknowledgement is a payment charged twice.".to_string()
        }
        (lost, dups) => format!(
            "{dups} of the {lost} retries were appended again{}.",
            if run.idempotent {
                ", although the producer is idempotent"
            } else {
                ""
            }
        ),
    };
    n.say(&format!("{counts} {meaning}"));
}

/// Phase 1 once more through a producer on Kafka's defaults, or why it did not run.
pub fn on_defaults(n: &mut Narrator, run: Option<&LossRun>, lacking: Option<&str>) {
    match (run, lacking) {
        (Some(run), _) => n.say(&format!(
            "The same payments through a producer left on Kafka's defaults (since 3.0: \
             enable.idempotence=true, acks=all), losing {} acknowledgements the same way: {} \
             records for {} payments, {} duplicates. Phase 2 shows how.",
            run.acks_lost,
            run.log.records(),
            run.sent.len(),
            run.log.duplicates()
        )),
        (None, Some(reason)) => n.say(&format!(
            "(A producer on Kafka's defaults is idempotent, and did not run here: {reason}.)"
        )),
        (None, None) => {}
    }
}

/// How the broker answered the retry of a batch whose acknowledgement was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// The offset the lost acknowledgement had said: recognised, and told where it is.
    OriginalOffset,
    /// DUPLICATE_SEQUENCE_NUMBER, which the producer takes as success with offset -1: Kafka's
    /// valid answer to a retry it recognises but whose offset it no longer has at hand.
    AlreadyAppended,
    /// Another offset: written a second time.
    Appended,
}

impl Retry {
    fn of(sent: &Sent, lost: &LostAck) -> Self {
        match sent.offset {
            offset if offset == lost.base_offset => Retry::OriginalOffset,
            -1 => Retry::AlreadyAppended,
            _ => Retry::Appended,
        }
    }
}

/// What the retries of an idempotent run got, when none was appended again: the original
/// offsets, DUPLICATE_SEQUENCE_NUMBER, or some of each, as the broker answered.
fn recognised(run: &LossRun) -> String {
    let retries = run
        .sent
        .iter()
        .flat_map(|s| s.lost.iter().map(move |l| Retry::of(s, l)));
    let original = retries
        .clone()
        .filter(|r| *r == Retry::OriginalOffset)
        .count();
    let already = retries.filter(|r| *r == Retry::AlreadyAppended).count();
    const DUPLICATE: &str = "DUPLICATE_SEQUENCE_NUMBER (already appended; it gives no offset, and \
                             the producer reports -1)";
    match (original, already) {
        (_, 0) => "it got the original offset back".to_string(),
        (0, _) => format!("the broker answered each one with {DUPLICATE}"),
        (original, already) => {
            format!("{original} got the original offset back and {already} the answer {DUPLICATE}")
        }
    }
}

/// The embedded broker's own version of phase 2, or why there is none.
pub fn broker_side(n: &mut Narrator, plan: &Plan, run: Option<&LossRun>) {
    match run {
        Some(run) => n.say(&format!(
            "Once more with the embedded broker itself dropping answers (its drop-ack fault: it appends, \
             then closes the connection instead of answering, as a network would), each request with \
             a chance of {}, so the count is a draw of its own: {} acknowledgements dropped (against {} \
             above), {} records for {} payments, {} duplicates.",
            report::percent(plan.lost_acks as f64 / f64::from(plan.records)),
            run.acks_lost,
            plan.lost_acks,
            run.log.records(),
            run.sent.len(),
            run.log.duplicates()
        )),
        None => n.say(
            "(A cluster offers no fault injection, so only the client loses acknowledgements here; on the \
             embedded broker the lab also lets the broker drop them.)",
        ),
    }
}

pub fn resize_evidence(n: &mut Narrator, run: &ResizeRun, rows: &[PartitionRow]) {
    n.answer();
    n.panel(acks_panel(rows, run.log.duplicates()));
    let mut table = Table::new(&[
        ("order", Align::Left),
        ("first copy", Align::Left),
        ("re-sent copy", Align::Left),
        ("", Align::Left),
    ]);
    for r in run.resent.iter().take(SHOWN * 2) {
        table.row([
            r.id.clone(),
            place((r.first.partition, r.first.offset)),
            place((r.again.partition, r.again.offset)),
            if r.moved() { "moved" } else { "same partition" }.to_string(),
        ]);
    }
    n.table(&table);
    if run.resent.len() > SHOWN * 2 {
        n.say(&format!(
            "    ... and {} more",
            run.resent.len() - SHOWN * 2
        ));
    }
    let columns = [
        ("first copies", (|r| r.sent) as fn(&PartitionRow) -> u64),
        ("re-sent here", |r| r.resent),
        IN_LOG,
        DUPLICATES,
        ("twin elsewhere", |r| r.split),
    ];
    partition_table(n, rows, &columns);
    let (resent, dups, split) = (
        run.resent.len() as u64,
        run.log.duplicates(),
        run.log.split_ids(),
    );
    let moved = run.resent.iter().filter(|r| r.moved()).count() as u64;
    let stayed = resent - moved;
    let recognised = if dups == resent {
        format!(
            "All {resent} re-sends are duplicates, the {stayed} that went to their first copy's \
             partition too: a record the application sends again is new to the broker, with a new \
             sequence, wherever it lands."
        )
    } else {
        format!(
            "Of the {resent} re-sends, {dups} are duplicates in the log and {} are not.",
            resent.saturating_sub(dups)
        )
    };
    let elsewhere = if split > 0 {
        format!(
            "The partition change decided only where the copies are: {split} of them in another \
             partition than their first copy, where no deduplication kept per partition downstream \
             (a consumer's seen-set, a Kafka Streams store, a table sharded like the topic) can \
             pair them with it. Source 003: idempotence is bound to (PID, partition)."
        )
    } else {
        "None of them went to another partition than its first copy.".to_string()
    };
    n.say(&format!("{recognised} {elsewhere}"));
}

pub fn restart_evidence(n: &mut Narrator, run: &RestartRun, rows: &[PartitionRow]) {
    n.answer();
    n.panel(acks_panel(rows, run.log.duplicates()));
    let mut table = Table::new(&[
        ("instance", Align::Right),
        ("producer id", Align::Right),
        ("acknowledged", Align::Right),
        ("died with", Align::Left),
        ("copies in the log", Align::Left),
    ]);
    for (i, instance) in run.instances.iter().enumerate() {
        let (died, copies) = match &instance.died_on {
            Some((event, _, _)) => {
                let places: Vec<String> = run.log.copies(event).iter().map(|p| place(*p)).collect();
                (event.clone(), places.join(", "))
            }
            None => ("-".to_string(), String::new()),
        };
        table.row([
            (i + 1).to_string(),
            instance.producer.producer_id.to_string(),
            instance.acknowledged.to_string(),
            died,
            copies,
        ]);
    }
    n.table(&table);
    let columns = [
        ("events", (|r| r.sent) as fn(&PartitionRow) -> u64),
        ACKS_LOST,
        ("re-sent", |r| r.resent),
        IN_LOG,
        DUPLICATES,
    ];
    partition_table(n, rows, &columns);
    let dups = run.log.duplicates();
    let ids: std::collections::BTreeSet<i64> = run
        .instances
        .iter()
        .map(|i| i.producer.producer_id)
        .collect();
    n.say(&if dups > 0 && ids.len() == run.instances.len() {
        format!(
            "{dups} duplicates. Each of the {} instances started with a new producer id, so its \
             sequences began at 0 in a window nobody had filled: the broker's memory is per producer \
             id, and the id dies with the process. (With a transactional id and each event sent in \
             a transaction, the next instance's initTransactions() aborts the dead one's open \
             transaction, so a read_committed consumer sees one copy; only an event whose \
             transaction had committed before the death comes twice, and only a consumer-side \
             check recognises that one.)",
            run.instances.len()
        )
    } else {
        format!(
            "{dups} duplicates, with {} producer ids for {} instances.",
            ids.len(),
            run.instances.len()
        )
    });
}

pub fn zombie_evidence(n: &mut Narrator, unfenced: &ZombieRun, fenced: &ZombieRun) {
    n.answer();
    for run in [unfenced, fenced] {
        n.say(&writers(run));
        n.table(&writes_table(run));
        if run.balances.len() > ZOMBIE_ACCOUNTS {
            n.say(&format!(
                "(the first {ZOMBIE_ACCOUNTS} of {} accounts)",
                run.balances.len()
            ));
        }
    }
    let (accepted, lost) = (unfenced.zombie_accepted(), unfenced.lost_updates());
    let without = format!(
        "Without fencing {accepted} of the zombie's late writes were accepted and {lost} of B's deposits \
         vanished under its stale balances{}.",
        if accepted > 0 && lost > 0 {
            ": both writers \"succeed\", source 003's \"relinquishing ownership, 41822 writes since \
             handover\""
        } else {
            ""
        }
    );
    let with = match (&fenced.refused_with, fenced.zombie_stopped) {
        (Some(error), true) => format!(
            "With the shared transactional id, B's start bumped the epoch. A's late transaction \
             carried the old one and its first write was refused ({error}){}. A sent nothing \
             more: {} of its late writes reached the log.",
            in_java(error),
            fenced.zombie_accepted()
        ),
        _ => format!(
            "With the shared transactional id the zombie was not stopped: {} of its late writes reached \
             the log and {} deposits were lost.",
            fenced.zombie_accepted(),
            fenced.lost_updates()
        ),
    };
    n.say(&format!("{without} {with}"));
}

/// What Java's producer makes of a fencing error, as a clause.
fn in_java(error: &str) -> &'static str {
    match error {
        "PRODUCER_FENCED" => {
            ", the transaction coordinator's answer when A added the partition to its \
             transaction; Java's producer raises it as ProducerFencedException, fatal: the \
             producer can only be closed (a batch with the old epoch that reaches a partition \
             leader gets INVALID_PRODUCER_EPOCH instead, in Java InvalidProducerEpochException, \
             which is abortable: the abortTransaction() that follows meets PRODUCER_FENCED)"
        }
        "INVALID_PRODUCER_EPOCH" => {
            ", which Java's producer raises as InvalidProducerEpochException, abortable: the \
             abortTransaction() that follows meets PRODUCER_FENCED at the coordinator, fatal"
        }
        _ => "",
    }
}

/// Who the writers were: their producer ids and epochs.
fn writers(run: &ZombieRun) -> String {
    let of = |writer: &str| {
        run.writes
            .iter()
            .find(|w| w.writer == writer)
            .map_or("-".to_string(), |w| {
                format!(
                    "producer {} epoch {}",
                    w.producer.producer_id, w.producer.epoch
                )
            })
    };
    format!(
        "{}: A is {}, B is {}. Each write, and the balance the log ends with:",
        if run.fencing {
            "With a shared transactional id"
        } else {
            "Without fencing"
        },
        of("A"),
        of("B")
    )
}

/// One row per account: where each of the three writes went, and the last balance.
fn writes_table(run: &ZombieRun) -> Table {
    let opening = format!("A writes {OPENING}");
    let deposit = format!("B: +{DEPOSIT} = {}", OPENING + DEPOSIT);
    let debit = format!("A, late: -{DEBIT} = {}", OPENING - DEBIT);
    let mut table = Table::new(&[
        ("account", Align::Left),
        (opening.as_str(), Align::Left),
        (deposit.as_str(), Align::Left),
        (debit.as_str(), Align::Left),
        ("last in the log", Align::Right),
        ("expected", Align::Right),
    ]);
    for (account, balance) in run.balances.iter().take(ZOMBIE_ACCOUNTS) {
        let mut cells = vec![account.clone()];
        // The account's writes in order: A's opening, B's deposit, A's late debit.
        for w in run.writes.iter().filter(|w| &w.account == account) {
            cells.push(match &w.result {
                Ok(at) => place(*at),
                Err(Refusal {
                    by_broker: true,
                    error,
                }) => format!("refused: {error}"),
                Err(Refusal {
                    by_broker: false, ..
                }) => "not sent: A stopped".to_string(),
            });
        }
        cells.resize(4, "-".to_string());
        cells.push(balance.to_string());
        cells.push((OPENING + DEPOSIT).to_string());
        table.row(cells);
    }
    table
}

/// A per-partition column: its header and its value.
type Column = (&'static str, fn(&PartitionRow) -> u64);

const SENT: Column = ("sent", |r| r.sent);
const ACKS_LOST: Column = ("acks lost", |r| r.acks_lost);
const IN_LOG: Column = ("in log", |r| r.in_log);
const DUPLICATES: Column = ("duplicates here", |r| r.duplicates);

/// A phase's acknowledgements lost and the duplicates read back: in all (`duplicates` counts
/// copies in any partition), and per partition.
fn acks_panel(rows: &[PartitionRow], duplicates: u64) -> Panel {
    let lost: u64 = rows.iter().map(|r| r.acks_lost).sum();
    let mut panel = Panel::new("acks lost and duplicates")
        .figure("acks lost", lost, false)
        .figure("duplicates", duplicates, duplicates > 0);
    for r in rows {
        panel = panel.bar(
            format!("partition {}", r.partition),
            r.duplicates,
            format!("{} acks lost · {} in the log", r.acks_lost, r.in_log),
            r.duplicates > 0,
        );
    }
    panel
}

fn partition_table(n: &mut Narrator, rows: &[PartitionRow], columns: &[Column]) {
    let mut headers = vec![("partition", Align::Right)];
    headers.extend(columns.iter().map(|(name, _)| (*name, Align::Right)));
    let mut table = Table::new(&headers);
    for r in rows {
        let mut cells = vec![r.partition.to_string()];
        cells.extend(columns.iter().map(|(_, value)| value(r).to_string()));
        table.row(cells);
    }
    n.table(&table);
}

#[cfg(test)]
mod tests {
    use super::super::copies::LogCount;
    use super::*;
    use crate::lab::report::Recorder;
    use crate::view::terminal::{Terminal, TerminalOptions};

    fn lost(base_offset: i64) -> LostAck {
        LostAck {
            topic: "payments".into(),
            partition: 0,
            base_offset,
            base_sequence: 7,
            records: 1,
        }
    }

    fn told(run: &LossRun) -> String {
        let recorder = Recorder::new();
        let mut n = Narrator::new();
        n.subscribe(Box::new(recorder.clone()));
        lost_acks_evidence(&mut n, run, &[]);
        let text = Terminal::render(&recorder.events(), TerminalOptions::plain(100));
        // Words only, so that wrapping and column widths do not matter.
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// A broker may answer a retry it recognises with DUPLICATE_SEQUENCE_NUMBER and no offset
    /// (Kafka does, for a batch older than the last five): the narration says so, rather than
    /// "appended again" or "the original offset".
    #[test]
    fn a_retry_answered_with_duplicate_sequence_number_is_told_as_such() {
        let sent = |id: &str, offset: i64, lost_at: i64| Sent {
            id: id.into(),
            partition: 0,
            offset,
            lost: vec![lost(lost_at)],
        };
        let mut run = LossRun {
            idempotent: true,
            producer: None,
            sent: vec![sent("payment-0000", -1, 4)],
            acks_lost: 1,
            log: LogCount::default(),
        };
        let text = told(&run);
        assert!(
            text.contains(
                "payment-0000 0 7 offset 4 no offset DUPLICATE_SEQUENCE_NUMBER 0 records"
            ),
            "{text}"
        );
        assert!(
            text.contains("so the broker answered each one with DUPLICATE_SEQUENCE_NUMBER"),
            "{text}"
        );
        assert!(!text.contains("appended again"), "{text}");
        assert!(!text.contains("original offset back"), "{text}");

        run.sent.push(sent("payment-0001", 9, 9));
        run.acks_lost = 2;
        let text = told(&run);
        assert!(
            text.contains("payment-0001 0 7 offset 9 offset 9 recognised: the original offset"),
            "{text}"
        );
        assert!(
            text.contains(
                "so 1 got the original offset back and 1 the answer DUPLICATE_SEQUENCE_NUMBER"
            ),
            "{text}"
        );
    }
}
