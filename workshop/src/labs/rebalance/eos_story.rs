//! The narration of the transactional run: the question, the stalled member's log, the output
//! topic against the gateway, and what Kafka's exactly-once covers (source 003, section 10).

use super::eos::{EosOutcome, OUTPUT};
use super::eos_figures::EosFigures;
use super::evidence::secs;
use super::figures::Figures;
use super::journal::Event;
use crate::lab::report::{thousands, Align, Narrator, Phase, Table};

pub const TITLE: &str = "Kafka's exactly-once: does the gateway see each payment once?";

fn about(f: &Figures) -> String {
    let output = f.eos.as_ref().map_or(OUTPUT, |e| e.output_topic.as_str());
    format!(
        "The same stall of {} once more, each member now in Kafka transactions: per batch it begins \
         a transaction, charges each payment at the payment gateway (a call outside Kafka, \
         counted), produces one record per payment to `{output}`, adds its consumed offsets as a \
         member of its generation (sendOffsetsToTransaction, KIP-447) and commits. Downstream, a \
         consumer with isolation.level=read_committed reads `{output}`.",
        f.stalled_member,
    )
}

fn phase(about: &str) -> Phase<'_> {
    Phase {
        title: TITLE,
        about,
        predict: "how often does each payment reach the output topic, and the gateway?",
    }
}

pub fn tell(n: &mut Narrator, f: &Figures, run: Option<&EosOutcome>, skipped: Option<&str>) {
    let (Some(eos), Some(run)) = (&f.eos, run) else {
        let reason = skipped.unwrap_or("the transactional run did not run");
        n.skip(phase(&about(f)), reason);
        return;
    };
    n.phase(phase(&about(f)));
    n.answer();
    n.say(&format!(
        "{} after its stall, as it logged it:",
        f.stalled_member
    ));
    let lines: Vec<_> = run
        .run
        .journal
        .entries()
        .iter()
        .filter(|e| e.member.as_deref() == Some(f.stalled_member))
        .filter(|e| {
            matches!(
                e.event,
                Event::CommitFailed { .. } | Event::TransactionAborted { .. }
            )
        })
        .filter_map(|e| e.log_line(&run.run.topic))
        .map(|line| line.event())
        .collect();
    n.log(lines);
    outputs(n, eos);
    n.say(&conclusion(f, eos));
}

fn outputs(n: &mut Narrator, eos: &EosFigures) {
    let mut table = Table::new(&[
        ("WHO SAW THE PAYMENTS", Align::Left),
        ("RECORDS OR CALLS", Align::Right),
        ("PAYMENTS TWICE", Align::Right),
    ]);
    let rows = [
        (
            format!("{}, read_committed", eos.output_topic),
            eos.output_read_committed,
            eos.output_duplicates_read_committed,
        ),
        (
            format!("{}, the log (read_uncommitted)", eos.output_topic),
            eos.output_in_log,
            eos.output_duplicates_in_log,
        ),
        (
            "the payment gateway".to_string(),
            eos.gateway_calls,
            eos.gateway_duplicates,
        ),
    ];
    for (who, seen, twice) in rows {
        table.row([who, thousands(seen), thousands(twice)]);
    }
    n.table(&table);
}

fn conclusion(f: &Figures, eos: &EosFigures) -> String {
    let stalled = f.stalled_member;
    let refused = eos.offsets_refused_with.as_deref().map_or_else(
        || "its offsets were not refused".to_string(),
        |e| format!("its offsets were refused ({})", first_words(e)),
    );
    let aborted = eos.output_in_log.saturating_sub(eos.output_read_committed);
    let aborts = match eos.aborted_transactions {
        1 => "its transaction".to_string(),
        n => format!("{n} transactions"),
    };
    let mut text = format!(
        "{stalled} had lost its partitions: {refused}, and it aborted {aborts}. Its {aborted} output \
         records stay in the log, and read_committed skips them: each payment reached `{}` exactly \
         once ({} duplicates, {} missing).",
        eos.output_topic,
        eos.output_duplicates_read_committed,
        eos.output_missing_read_committed
    );
    if eos.output_held_by_open_transaction > 0 {
        text.push_str(&format!(
            " While its transaction was open it held the last stable offset of the partitions it had \
             written: {} committed records of the new owners stayed invisible for up to {}, until it \
             aborted.",
            eos.output_held_by_open_transaction,
            secs(eos.longest_hold_ms)
        ));
    }
    text.push_str(&format!(
        " The gateway was called inside the same loop, outside Kafka, and no abort takes a charge \
         back: {} payments charged twice, the batch that was redelivered. Kafka's exactly-once holds \
         for read-from-Kafka, write-to-Kafka: the offsets and the output commit together or not at \
         all. A gateway or another database needs its own dedup by the payment's key, in its own \
         transaction (source 003, section 10).",
        eos.gateway_duplicates
    ));
    text
}

/// The transactional run's line in the summary's "what happened", and its "why".
pub fn summary(f: &Figures) -> Option<(String, String)> {
    let eos = f.eos.as_ref()?;
    Some((
        format!(
            "In Kafka transactions (read_committed downstream): {} output records for {} payments, \
             {} duplicates; the payment gateway charged {} payments twice.",
            thousands(eos.output_read_committed),
            thousands(f.payments as u64),
            eos.output_duplicates_read_committed,
            eos.gateway_duplicates
        ),
        "Kafka's exactly-once is a transaction over Kafka's own writes (output records and \
         consumed offsets); a call outside Kafka made in the loop happens again on redelivery."
            .to_string(),
    ))
}

/// The error's name and its first clause, for a sentence.
fn first_words(error: &str) -> &str {
    error.split([':', ';']).next().unwrap_or(error).trim()
}
