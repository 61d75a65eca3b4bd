//! Lab `idempotence` as a trainer tells it: each phase's opening and question, what the phase
//! causes, and the evidence it measured ([`super::evidence`] lays that out), then the summary.
//! Every number shown is passed in from what the phases measured.

use client::ApiKey;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::evidence;
use super::figures::{self, Figures, Runs, Skips, Zombies};
use super::lost_acks::{self, LossRun};
use super::plan::Plan;
use super::zombie::{DEBIT, DEPOSIT, OPENING};
use super::{resize, restart, zombie};
use crate::lab::report::{thousands, Narrator, Phase, Summary};
use crate::lab::target::Cluster;
use crate::lab::{Lab, LabContext, LabError};

pub const IDEMPOTENT_TITLE: &str = "The same, with idempotence";
pub const RESIZE_TITLE: &str = "Where it ends (1): the partition count changes";
pub const RESTART_TITLE: &str = "Where it ends (2): the producer restarts";
pub const ZOMBIE_TITLE: &str = "Where it ends (3): a zombie writer, without fencing and with it";

/// The five phases in the order they are told, each opened (or shown as skipped when the
/// cluster lacks what it needs), run within its deadline, and answered with its evidence.
pub async fn phases(
    cluster: &Cluster,
    plan: &Plan,
    ctx: &mut LabContext,
) -> Result<Runs, LabError> {
    let n = &mut ctx.narrator;
    n.intro(super::Idempotence::NAME, super::EXPECTED);
    n.say(&format!("Running against {}.", cluster.describe()));
    // Every random choice comes from the seed: which acknowledgements are lost (the same ones
    // in phases 1 and 2), which orders are re-sent, where the relay dies.
    let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
    let loss_seed: u64 = rng.gen();

    // Every phase but the first needs a producer id, and so does phase 1's producer on Kafka's
    // defaults; a cluster without InitProducerId runs phase 1 without it.
    let no_ids = cluster.lacks_producer_ids().await?;
    let records = u64::from(plan.records);
    lost_acks_opening(n, plan, &cluster.name("payments"));
    let runs = if no_ids.is_some() { 1 } else { 2 };
    let progress = n.progress(records * runs, "sending payments");
    let deadline = n.deadline(plan.sends(runs, plan.payments()));
    let plain = deadline
        .run(
            &progress,
            lost_acks::run(cluster, plan, false, loss_seed, &progress),
        )
        .await;
    let defaults = match (&plain, &no_ids) {
        (Ok(_), None) => {
            let again = lost_acks::run_on_defaults(cluster, plan, loss_seed, &progress);
            Some(deadline.run(&progress, again).await)
        }
        _ => None,
    };
    progress.finish();
    let plain = plain?;
    let defaults = defaults.transpose()?;
    evidence::lost_acks_evidence(n, &plain, &figures::loss_rows(&plain));
    evidence::on_defaults(n, defaults.as_ref(), no_ids.as_deref());

    idempotent_opening(
        n,
        plan,
        &cluster.name("payments-idempotent"),
        no_ids.as_deref(),
    );
    let (idempotent, broker_side) = match &no_ids {
        Some(reason) => (Err(reason.clone()), None),
        None => {
            let (run, broker_side) = idempotent_phase(cluster, plan, loss_seed, n).await?;
            (Ok(run), broker_side)
        }
    };

    let lacking = match &no_ids {
        Some(reason) => Some(reason.clone()),
        None => cluster.lacks(ApiKey::CreatePartitions).await?,
    };
    resize_opening(n, plan, &cluster.name("orders"), lacking.as_deref());
    let chosen = resize::choose_resends(plan, &mut rng);
    let resize = match lacking {
        Some(reason) => Err(reason),
        None => {
            let progress = n.progress(records, "sending orders");
            // The orders, the re-sends, and the partition change with its metadata.
            let mut work = plan.sends(1, records + u64::from(plan.resends));
            work.round_trips += 2;
            let deadline = n.deadline(work);
            let resize = deadline
                .run(&progress, resize::run(cluster, plan, chosen, &progress))
                .await;
            progress.finish();
            let resize = resize?;
            evidence::resize_evidence(n, &resize, &figures::resize_rows(&resize));
            Ok(resize)
        }
    };

    restart_opening(n, plan, &cluster.name("events"), no_ids.as_deref());
    let restart = match &no_ids {
        Some(reason) => Err(reason.clone()),
        None => {
            let progress = n.progress(records, "relaying events");
            // Each instance starts with its own InitProducerId and re-sends the event it died on.
            let mut work = plan.sends(1, records + u64::from(plan.restarts));
            work.round_trips += u64::from(plan.restarts);
            let deadline = n.deadline(work);
            let restart = deadline
                .run(&progress, restart::run(cluster, plan, &mut rng, &progress))
                .await;
            progress.finish();
            let restart = restart?;
            evidence::restart_evidence(n, &restart, &figures::restart_rows(&restart));
            Ok(restart)
        }
    };

    let lacking = match &no_ids {
        Some(reason) => Some(reason.clone()),
        None => cluster.lacks_transactional_ids().await?,
    };
    zombie_opening(n, plan, lacking.as_deref());
    let zombie = match lacking {
        Some(reason) => Err(reason),
        None => {
            let deadline = n.deadline(plan.zombie_work());
            let writing = "writing balances as the zombie and its successor";
            let unfenced = deadline
                .wait(writing, zombie::run(cluster, plan, false))
                .await?;
            let fenced = deadline
                .wait(writing, zombie::run(cluster, plan, true))
                .await?;
            evidence::zombie_evidence(n, &unfenced, &fenced);
            Ok(Zombies { unfenced, fenced })
        }
    };

    Ok(Runs {
        seed: ctx.seed,
        partitions: plan.partitions,
        plain,
        defaults,
        idempotent,
        broker_side,
        resize,
        restart,
        zombie,
    })
}

/// Phase 2: the payments of phase 1 through an idempotent producer, losing the same
/// acknowledgements; on the embedded broker once more with the broker dropping the answers.
async fn idempotent_phase(
    cluster: &Cluster,
    plan: &Plan,
    loss_seed: u64,
    n: &mut Narrator,
) -> Result<(LossRun, Option<LossRun>), LabError> {
    let progress = n.progress(u64::from(plan.records) * 2, "sending payments");
    // Once against any cluster, once more with the embedded broker dropping the answers.
    let deadline = n.deadline(plan.sends(2, plan.payments()));
    let idempotent = deadline
        .run(
            &progress,
            lost_acks::run(cluster, plan, true, loss_seed, &progress),
        )
        .await;
    let broker_side = match idempotent {
        Ok(_) => {
            let again = lost_acks::run_broker_side(cluster, plan, loss_seed, &progress);
            deadline.run(&progress, again).await
        }
        Err(_) => Ok(None),
    };
    progress.finish();
    let (idempotent, broker_side) = (idempotent?, broker_side?);
    evidence::lost_acks_evidence(n, &idempotent, &figures::loss_rows(&idempotent));
    evidence::broker_side(n, plan, broker_side.as_ref());
    Ok((idempotent, broker_side))
}

pub fn lost_acks_opening(n: &mut Narrator, plan: &Plan, topic: &str) {
    let about = format!(
        "{} payments go to `{topic}` ({} partitions, keyed by account), one request each, acks=all, \
         through a producer with enable.idempotence=false: the lab turns off what Kafka's producer \
         does by default since 3.0 (KIP-679), to show what it prevents. The producer loses {} \
         acknowledgements after the broker has appended the payment (fault injection in the \
         client: the answer arrives and is thrown away, as if the network dropped it). \
         It cannot tell a lost answer from a lost request, so it retries, as it must: a sender either \
         retries and risks a duplicate, or gives up and risks a loss (source 003, section 10).",
        thousands(plan.records.into()),
        plan.partitions,
        plan.lost_acks
    );
    n.phase(Phase {
        title: "Lost acknowledgements, no idempotence",
        about: &about,
        predict: "how many payments does the topic hold afterwards?",
    });
}

/// Phase 2's opening; `lacking` says why the cluster cannot run it (the phase is then shown as
/// skipped, with no question), as for the phases after it.
pub fn idempotent_opening(n: &mut Narrator, plan: &Plan, topic: &str, lacking: Option<&str>) {
    let about = format!(
        "The same {} payments to `{topic}`, with the same {} acknowledgements lost (the same \
         seed), through a producer with enable.idempotence: it asks for a producer id (InitProducerId), \
         numbers each partition's records, and resends a batch with the same bytes and sequence. The \
         broker keeps the last five batches of each producer per partition; a retry equal to one of \
         them is answered with its original offset instead of being appended.",
        thousands(plan.records.into()),
        plan.lost_acks
    );
    let phase = Phase {
        title: IDEMPOTENT_TITLE,
        about: &about,
        predict: "how many duplicates now? Which offset does a retry get back?",
    };
    open(n, phase, lacking);
}

/// Opens a phase, or shows it as skipped when the cluster lacks what it needs.
fn open(n: &mut Narrator, phase: Phase<'_>, lacking: Option<&str>) {
    match lacking {
        Some(reason) => n.skip(phase, reason),
        None => n.phase(phase),
    }
}

/// Phase 3's opening; `lacking` says why the cluster cannot run it (the phase is then shown
/// as skipped, with no question).
pub fn resize_opening(n: &mut Narrator, plan: &Plan, topic: &str, lacking: Option<&str>) {
    let about = format!(
        "{} orders, keyed by order id, go through an idempotent producer to `{topic}` ({} partitions). \
         Then an operator raises the partition count to {} (a real CreatePartitions). After an incident \
         the application replays {} orders from its outbox, the ones it could not prove were delivered: \
         \"the same messages\", sent again. The partitioner now divides by {}.",
        thousands(plan.records.into()),
        plan.partitions,
        plan.partitions * 2,
        plan.resends,
        plan.partitions * 2
    );
    let phase = Phase {
        title: RESIZE_TITLE,
        about: &about,
        predict: "how many re-sent orders does the broker recognise? How many land in another partition than their first copy?",
    };
    open(n, phase, lacking);
}

pub fn restart_opening(n: &mut Narrator, plan: &Plan, topic: &str, lacking: Option<&str>) {
    let about = format!(
        "{} events go to `{topic}` through a relay, one at a time, with idempotence. {} times an \
         acknowledgement is lost and the relay dies before it retries (in the lab: it has no retries \
         left, so the send fails and the instance is replaced). Each new instance asks for a producer \
         id and sends the unconfirmed event again.",
        thousands(plan.records.into()),
        plan.restarts
    );
    let phase = Phase {
        title: RESTART_TITLE,
        about: &about,
        predict: "does the broker recognise an event re-sent by the next instance?",
    };
    open(n, phase, lacking);
}

/// Phase 5's opening; `lacking` says why the cluster cannot run it (shown as skipped).
pub fn zombie_opening(n: &mut Narrator, plan: &Plan, lacking: Option<&str>) {
    let about = format!(
        "Writer A owns {} accounts and writes their balances ({OPENING}). A stalls (a long GC pause); \
         ownership moves to writer B, which reads the balances and books a deposit of +{DEPOSIT}. Then A \
         wakes up, still sure it owns the accounts, and books a debit of -{DEBIT} on the balance it \
         remembers. The last balance of each key wins, as in a compacted topic or a materialised view. \
         First with two plain idempotent producers (two producer ids), then with a shared \
         transactional id, each writer's turn one transaction as Java's producer requires of \
         one (initTransactions, beginTransaction, send, commitTransaction): the id's epoch is \
         the fencing token of source 003, section 5.",
        plan.accounts
    );
    let phase = Phase {
        title: ZOMBIE_TITLE,
        about: &about,
        predict: "without fencing, which balance survives? With fencing, what happens to A?",
    };
    open(n, phase, lacking);
}

/// The summary; `skips` says why each phase that did not run was skipped.
pub fn summary(f: &Figures, skips: &Skips) -> Summary {
    let why = |reason: Option<&str>| reason.unwrap_or("its phase did not run").to_string();
    Summary {
        happened: vec![
            match &f.idempotence {
                Some(i) => format!(
                    "{} lost acknowledgements gave {} duplicate payments without idempotence{} and {} with it.",
                    f.acks_lost,
                    f.duplicates_without_idempotence,
                    f.duplicates_with_defaults
                        .map_or(String::new(), |d| format!(", {d} on Kafka's defaults")),
                    i.duplicates_with_idempotence
                ),
                None => format!(
                    "{} lost acknowledgements gave {} duplicate payments without idempotence; the idempotent producer did not run: {}.",
                    f.acks_lost, f.duplicates_without_idempotence, why(skips.idempotent)
                ),
            },
            match &f.partition_change {
                Some(c) => format!(
                    "After {} -> {} partitions, {} re-sent orders were {} duplicates, {} of them in another partition than their first copy.",
                    f.partitions,
                    c.partitions_after_change,
                    c.resends_after_partition_change,
                    c.duplicates_after_partition_change,
                    c.duplicates_in_another_partition
                ),
                None => format!("The partition count was not changed: {}.", why(skips.resize)),
            },
            match &f.restarts {
                Some(r) => format!(
                    "{} producer restarts gave {} producer ids and {} duplicates.",
                    r.producer_restarts, r.producer_ids_after_restarts, r.duplicates_after_producer_restart
                ),
                None => format!("The relay and its restarts were not run: {}.", why(skips.restart)),
            },
            match &f.fencing {
                Some(z) => format!(
                    "Without fencing the zombie's {} late writes were accepted and {} deposits lost; {}.",
                    z.zombie_writes_accepted_without_fencing,
                    z.updates_lost_without_fencing,
                    match (z.zombie_fenced, &z.zombie_fenced_with) {
                        (true, Some(error)) => format!("with the epoch it was refused ({error}) and stopped"),
                        _ => format!(
                            "with the epoch it was not stopped: {} late writes accepted, {} deposits lost",
                            z.zombie_writes_accepted_with_fencing, z.updates_lost_with_fencing
                        ),
                    }
                ),
                None => format!("The zombie writer was not run: {}.", why(skips.zombie)),
            },
        ],
        why: vec![
            "A sender cannot tell a lost request from a lost answer: it must retry, and a retry of something already written is a duplicate. Exactly-once delivery is not a property of a channel.".into(),
            "The broker deduplicates by (producer id, epoch, sequence), per partition: retries of the same batch by the same producer to the same partition. A re-send by the application, a new producer id or another partition is new data to it.".into(),
            "Two writers who both believe they own something both succeed unless every write carries a fencing token that only grows; Kafka's epoch is one, checked by the broker on every batch.".into(),
        ],
        what_to_do: vec![
            "Deduplicate where the effect happens: derive the idempotency key from the partition key (f(account_id, command_id)) and record \"command applied\" in the same transaction and the same partition as the effect (source 003's processed_commands, INSERT ... ON CONFLICT DO NOTHING); keep that record at least as long as the input topic's retention.".into(),
            "Use a transactional outbox: the state change and the event in one database transaction; the relay may send twice, the consumer's check absorbs it.".into(),
            "Keep partition counts of keyed topics stable (over-provision up front); never grow a topic while replays are pending, and key deduplication state by message id, not by partition.".into(),
            "Give each writer role a transactional id, so a restarted instance fences its zombie; any ownership handover needs an epoch checked on every write.".into(),
            "Prefer naturally idempotent operations: SET status = 'paid' rather than INCREMENT.".into(),
        ],
    }
}
