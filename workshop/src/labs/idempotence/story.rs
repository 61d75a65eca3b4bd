//! The narration of lab `idempotence`: each phase's opening and evidence, and the summary.
//! Every number shown is passed in from what the phases measured.

use super::copies::place;
use super::figures::{Figures, PartitionRow};
use super::lost_acks::LossRun;
use super::plan::Plan;
use super::resize::ResizeRun;
use super::restart::RestartRun;
use super::zombie::{ZombieRun, DEBIT, DEPOSIT, OPENING};
use crate::report::{self, Align, Narrator, Phase, Summary, Table};

/// Lines of per-record evidence shown before "... and N more".
const SHOWN: usize = 6;
/// The zombie's story is told write by write: three per account, for a handful of accounts.
const ZOMBIE_LINES: usize = 24;

pub fn intro(n: &mut Narrator, lab: &str, expected: &str, target: &str) {
    n.intro(lab, expected);
    n.say(&format!("Running against {target}."));
}

pub fn lost_acks_opening(n: &mut Narrator, plan: &Plan, topic: &str) {
    let about = format!(
        "{} payments go to `{topic}` ({} partitions, keyed by account), one request each, acks=all.\n\
         The producer loses {} acknowledgements after the broker has appended the payment (fault\n\
         injection in the client: the answer arrives and is thrown away, as if the network dropped it).\n\
         It cannot tell a lost answer from a lost request, so it retries, as it must: a sender either\n\
         retries and risks a duplicate, or gives up and risks a loss (seed 003, section 10).",
        plan.records, plan.partitions, plan.lost_acks
    );
    n.phase(Phase {
        title: "Lost acknowledgements, no idempotence",
        about: &about,
        predict: "how many payments does the topic hold afterwards?",
    });
}

pub fn lost_acks_evidence(n: &mut Narrator, run: &LossRun, rows: &[PartitionRow]) {
    n.answer();
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
        let outcome = if sent.offset == lost.base_offset {
            "recognised: the original offset"
        } else {
            "appended again"
        };
        table.row([
            sent.id.clone(),
            sent.partition.to_string(),
            sequence,
            format!("offset {}", lost.base_offset),
            format!("offset {}", sent.offset),
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
    if run.idempotent {
        let who = run.producer.map_or(String::new(), |p| {
            format!(" {} (epoch {})", p.producer_id, p.epoch)
        });
        n.say(&format!(
            "{} records for {} payments: {dups} duplicates. Each retry carried the producer id{who}\n\
             and the sequence of the batch the broker already had, so it got the original offset back.\n\
             That is the whole mechanism: deduplication by (producer id, epoch, sequence), per\n\
             partition, of the producer's own retries. The next three phases change one term each.",
            run.log.records(),
            run.sent.len()
        ));
    } else {
        n.say(&format!(
            "{} records for {} payments: {dups} duplicates for {} lost acknowledgements. Every lost\n\
             acknowledgement is a payment charged twice.",
            run.log.records(),
            run.sent.len(),
            run.acks_lost
        ));
    }
}

pub fn idempotent_opening(n: &mut Narrator, plan: &Plan, topic: &str) {
    let about = format!(
        "The same {} payments to `{topic}`, with the same {} acknowledgements lost (the same\n\
         seed), through a producer with enable.idempotence: it asks for a producer id (InitProducerId),\n\
         numbers each partition's records, and resends a batch with the same bytes and sequence. The\n\
         broker keeps the last five batches of each producer per partition; a retry equal to one of\n\
         them is answered with its original offset instead of being appended.",
        plan.records, plan.lost_acks
    );
    n.phase(Phase {
        title: "The same, with idempotence",
        about: &about,
        predict: "how many duplicates now? Which offset does a retry get back?",
    });
}

/// The embedded broker's own version of phase 2, or why there is none.
pub fn broker_side(n: &mut Narrator, run: Option<&LossRun>) {
    match run {
        Some(run) => n.say(&format!(
            "The same once more, with the embedded broker itself dropping the answers (its drop-ack\n\
             fault: it appends, then closes the connection instead of answering, as a network would):\n\
             {} acknowledgements dropped, {} records for {} payments, {} duplicates.",
            run.acks_lost,
            run.log.records(),
            run.sent.len(),
            run.log.duplicates()
        )),
        None => n.say(
            "(A cluster offers no fault injection, so only the client loses acknowledgements here;\n\
             on the embedded broker the lab also lets the broker drop them.)",
        ),
    }
}

pub fn resize_opening(n: &mut Narrator, plan: &Plan, topic: &str) {
    let about = format!(
        "{} orders, keyed by order id, go through an idempotent producer to `{topic}` ({} partitions).\n\
         Then an operator raises the partition count to {} (a real CreatePartitions). After an incident\n\
         the application replays {} orders from its outbox, the ones it could not prove were delivered:\n\
         \"the same messages\", sent again. The partitioner now divides by {}.",
        plan.records,
        plan.partitions,
        plan.partitions * 2,
        plan.resends,
        plan.partitions * 2
    );
    n.phase(Phase {
        title: "Where it ends (1): the partition count changes",
        about: &about,
        predict: "how many re-sent orders does the broker recognise? How many land in another\npartition than their first copy?",
    });
}

pub fn resize_evidence(n: &mut Narrator, run: &ResizeRun, rows: &[PartitionRow]) {
    n.answer();
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
    n.say(&format!(
        "The broker recognised none of the {} re-sends: to it, a record the application sends again\n\
         is new, with a new sequence, wherever it lands. {} of them went to another partition than\n\
         their first copy, where the producer's state for that partition never saw them, and where no\n\
         deduplication kept per partition (a consumer's seen-set, a Kafka Streams store, a table\n\
         sharded like the topic) can see both copies. Seed 003: idempotence is bound to (PID,\n\
         partition); a partition change moves \"the same message\" to where nobody knows it.",
        run.resent.len(),
        run.log.split_ids()
    ));
}

pub fn restart_opening(n: &mut Narrator, plan: &Plan, topic: &str) {
    let about = format!(
        "{} events go to `{topic}` through a relay, one at a time, with idempotence. {} times an\n\
         acknowledgement is lost and the relay dies before it retries (in the lab: it has no retries\n\
         left, so the send fails and the instance is replaced). Each new instance asks for a producer\n\
         id and sends the unconfirmed event again.",
        plan.records, plan.restarts
    );
    n.phase(Phase {
        title: "Where it ends (2): the producer restarts",
        about: &about,
        predict: "does the broker recognise an event re-sent by the next instance?",
    });
}

pub fn restart_evidence(n: &mut Narrator, run: &RestartRun, rows: &[PartitionRow]) {
    n.answer();
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
    n.say(&format!(
        "{} duplicates. Each instance started with a new producer id, so its sequences began at 0 in a\n\
         window nobody had filled: the broker's memory is per producer id, and the id dies with the\n\
         process. (A transactional id keeps the producer id across restarts, but the re-sent event is\n\
         still a new record with a new sequence: only a consumer-side check can recognise it.)",
        run.log.duplicates()
    ));
}

pub fn zombie_opening(n: &mut Narrator, plan: &Plan) {
    let about = format!(
        "Writer A owns {} accounts and writes their balances ({OPENING}). A stalls (a long GC pause);\n\
         ownership moves to writer B, which reads the balances and books a deposit of +{DEPOSIT}. Then A\n\
         wakes up, still sure it owns the accounts, and books a debit of -{DEBIT} on the balance it\n\
         remembers. The last balance of each key wins, as in a compacted topic or a materialised view.\n\
         First with two plain idempotent producers (two producer ids), then with a shared\n\
         transactional id: its epoch is the fencing token of seed 003, section 5.",
        plan.accounts
    );
    n.phase(Phase {
        title: "Where it ends (3): a zombie writer, without fencing and with it",
        about: &about,
        predict: "without fencing, which balance survives? With fencing, what happens to A?",
    });
}

pub fn zombie_evidence(n: &mut Narrator, unfenced: &ZombieRun, fenced: &ZombieRun) {
    n.answer();
    for run in [unfenced, fenced] {
        n.say(if run.fencing {
            "With a shared transactional id:"
        } else {
            "Without fencing:"
        });
        let lines = run
            .writes
            .iter()
            .map(|w| {
                let result = match &w.result {
                    Ok(at) => format!("ok {}", place(*at)),
                    Err(e) => e.clone(),
                };
                format!(
                    "writer-{}  producer {} epoch {}  {} balance={:<4}  {result}",
                    w.writer, w.producer.producer_id, w.producer.epoch, w.account, w.balance
                )
            })
            .collect();
        capped(n, lines, ZOMBIE_LINES);
    }
    let mut table = Table::new(&[
        ("account", Align::Left),
        ("without fencing", Align::Right),
        ("with fencing", Align::Right),
        ("expected", Align::Right),
    ]);
    for (account, balance) in &unfenced.balances {
        let with = fenced
            .balances
            .get(account)
            .map_or("-".into(), i64::to_string);
        table.row([
            account.clone(),
            balance.to_string(),
            with,
            (OPENING + DEPOSIT).to_string(),
        ]);
    }
    n.table(&table);
    n.say(&format!(
        "Without fencing both writers \"succeed\": {} writes of the zombie were accepted and {} deposits\n\
         vanished under its stale balances, the seed's \"relinquishing ownership, 41822 writes since\n\
         handover\". With the shared transactional id, B's start bumped the epoch; A's first late\n\
         write carried the old one and was refused ({}), then A stopped for good:\n\
         {} of its late writes reached the log.",
        unfenced.zombie_accepted(),
        unfenced.lost_updates(),
        fenced.refused_with.as_deref().unwrap_or("no fencing error"),
        fenced.zombie_accepted()
    ));
}

pub fn summary(f: &Figures) -> Summary {
    Summary {
        happened: vec![
            format!(
                "{} lost acknowledgements gave {} duplicate payments without idempotence and {} with it.",
                f.acks_lost, f.duplicates_without_idempotence, f.duplicates_with_idempotence
            ),
            format!(
                "After {} -> {} partitions, {} re-sent orders were {} duplicates, {} of them in another\npartition than their first copy.",
                f.partitions,
                f.partitions_after_change,
                f.resends_after_partition_change,
                f.duplicates_after_partition_change,
                f.duplicates_in_another_partition
            ),
            format!(
                "{} producer restarts gave {} producer ids and {} duplicates.",
                f.producer_restarts, f.producer_ids_after_restarts, f.duplicates_after_producer_restart
            ),
            format!(
                "Without fencing the zombie's {} writes were accepted and {} deposits lost; with the epoch\nit was refused ({}) and stopped.",
                f.zombie_writes_accepted_without_fencing,
                f.updates_lost_without_fencing,
                f.zombie_fenced_with.as_deref().unwrap_or("not at all")
            ),
        ],
        why: vec![
            "A sender cannot tell a lost request from a lost answer: it must retry, and a retry of\nsomething already written is a duplicate. Exactly-once delivery is not a property of a channel.".into(),
            "The broker deduplicates by (producer id, epoch, sequence), per partition: retries of the same\nbatch by the same producer to the same partition. A re-send by the application, a new producer\nid or another partition is new data to it.".into(),
            "Two writers who both believe they own something both succeed unless every write carries a\nfencing token that only grows; Kafka's epoch is one, checked by the broker on every batch.".into(),
        ],
        what_to_do: vec![
            "Deduplicate where the effect happens: derive the idempotency key from the partition key\n(f(account_id, command_id)) and record \"command applied\" in the same transaction and the same\npartition as the effect (seed 003's processed_commands, INSERT ... ON CONFLICT DO NOTHING); keep\nthat record at least as long as the source's retention.".into(),
            "Use a transactional outbox: the state change and the event in one database transaction; the\nrelay may send twice, the consumer's check absorbs it.".into(),
            "Keep partition counts of keyed topics stable (over-provision up front); never grow a topic\nwhile replays are pending, and key deduplication state by message id, not by partition.".into(),
            "Give each writer role a transactional id, so a restarted instance fences its zombie; any\nownership handover needs an epoch checked on every write.".into(),
            "Prefer naturally idempotent operations: SET status = 'paid' rather than INCREMENT.".into(),
        ],
    }
}

/// A per-partition column: its header and its value.
type Column = (&'static str, fn(&PartitionRow) -> u64);

const SENT: Column = ("sent", |r| r.sent);
const ACKS_LOST: Column = ("acks lost", |r| r.acks_lost);
const IN_LOG: Column = ("in log", |r| r.in_log);
const DUPLICATES: Column = ("duplicates here", |r| r.duplicates);

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

fn capped(n: &mut Narrator, mut lines: Vec<String>, cap: usize) {
    if lines.len() > cap {
        let more = lines.len() - cap;
        lines.truncate(cap);
        lines.push(format!("... and {more} more"));
    }
    n.log(
        lines
            .into_iter()
            .map(|text| report::LogLine {
                at: None,
                level: report::Level::Info,
                source: None,
                text,
            })
            .collect(),
    );
}
