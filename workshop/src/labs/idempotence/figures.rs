//! The lab's figures as the `--json` report carries them, and the verdict drawn from them.
//! Every number comes from the runs: what the producers were told and what the topics hold.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::copies::LogCount;
use super::lost_acks::LossRun;
use super::resize::ResizeRun;
use super::restart::RestartRun;
use super::zombie::ZombieRun;
use crate::lab::report::Checks;

/// One partition of a topic after a phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionRow {
    pub partition: i32,
    /// Records the application sent there (each counted once, where its first copy went).
    pub sent: u64,
    /// Acknowledgements the producer lost there.
    pub acks_lost: u64,
    /// Records the application sent there again (the producer's own retries not counted).
    pub resent: u64,
    /// Records read back from it.
    pub in_log: u64,
    /// Copies read back whose id this partition already held.
    pub duplicates: u64,
    /// Records read back whose id also sits in another partition.
    pub split: u64,
}

/// Per-partition tables, one per phase that counts duplicates.
#[derive(Debug, Clone, Serialize)]
pub struct PerPartition {
    pub without_idempotence: Vec<PartitionRow>,
    /// Null when phase 2 was skipped, and so on: a phase the cluster could not run has no table.
    pub with_idempotence: Option<Vec<PartitionRow>>,
    pub after_partition_change: Option<Vec<PartitionRow>>,
    pub after_producer_restart: Option<Vec<PartitionRow>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub seed: u64,
    pub records_sent: u64,
    pub partitions: i32,
    /// Acknowledgements lost in phase 1 (no idempotence).
    pub acks_lost: u64,
    pub duplicates_without_idempotence: u64,
    /// Phase 1 again through a producer on Kafka's defaults (idempotent since Kafka 3.0),
    /// losing the same acknowledgements; left out when the cluster offers no producer ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates_with_defaults: Option<u64>,
    /// Phase 2's figures, left out when the cluster offers no idempotent producers (nor do
    /// phases 3 to 5 then run).
    #[serde(flatten)]
    pub idempotence: Option<WithIdempotence>,
    /// Phase 3's figures, left out when the cluster cannot change a partition count.
    #[serde(flatten)]
    pub partition_change: Option<PartitionChange>,
    /// Phase 4's figures, left out when the cluster offers no idempotent producers.
    #[serde(flatten)]
    pub restarts: Option<Restarts>,
    /// Phase 5's figures, left out when the cluster offers no transactional ids.
    #[serde(flatten)]
    pub fencing: Option<Fencing>,
    pub per_partition: PerPartition,
}

/// What phase 2 measured.
#[derive(Debug, Clone, Serialize)]
pub struct WithIdempotence {
    /// Acknowledgements lost in phase 2: the same ones, so the fix faced the same failure.
    pub acks_lost_with_idempotence: u64,
    pub duplicates_with_idempotence: u64,
    /// With idempotence, acknowledgements the embedded broker dropped (it closes the connection
    /// after the append) and the duplicates left; null under --bootstrap. Not in the verdict:
    /// the client-side loss above is the failure every target can show.
    pub broker_side_acks_dropped: Option<u64>,
    pub broker_side_duplicates: Option<u64>,
}

/// What phase 4 measured.
#[derive(Debug, Clone, Serialize)]
pub struct Restarts {
    pub producer_restarts: u64,
    /// Distinct producer ids the relay's instances got.
    pub producer_ids_after_restarts: u64,
    pub duplicates_after_producer_restart: u64,
}

/// What phase 5 measured.
#[derive(Debug, Clone, Serialize)]
pub struct Fencing {
    pub zombie_fenced: bool,
    /// The error that stopped the zombie (INVALID_PRODUCER_EPOCH from Kafka 2.7 on).
    pub zombie_fenced_with: Option<String>,
    pub zombie_writes_accepted_without_fencing: u64,
    pub updates_lost_without_fencing: u64,
    pub zombie_writes_accepted_with_fencing: u64,
    pub updates_lost_with_fencing: u64,
}

/// What phase 3 measured.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionChange {
    pub partitions_after_change: i32,
    pub resends_after_partition_change: u64,
    /// The orders re-sent after the change, chosen by the seed (their keys are their ids).
    pub resent_orders: Vec<String>,
    pub duplicates_after_partition_change: u64,
    /// Re-sent orders whose copies sit in two partitions.
    pub duplicates_in_another_partition: u64,
}

/// Everything the phases measured.
pub struct Runs {
    pub seed: u64,
    pub plain: LossRun,
    /// Phase 1 through a producer on Kafka's defaults; `None` when the cluster offers no
    /// producer ids.
    pub defaults: Option<LossRun>,
    /// Phase 2, or why the cluster could not run it; the same for phases 3 to 5.
    pub idempotent: Result<LossRun, String>,
    /// Phase 2 again with the embedded broker dropping the answers; `None` under --bootstrap,
    /// and when phase 2 did not run.
    pub broker_side: Option<LossRun>,
    pub partitions: i32,
    pub resize: Result<ResizeRun, String>,
    pub restart: Result<RestartRun, String>,
    pub zombie: Result<Zombies, String>,
}

/// Why each phase that did not run was skipped (`this cluster does not offer ...`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Skips<'a> {
    pub idempotent: Option<&'a str>,
    pub resize: Option<&'a str>,
    pub restart: Option<&'a str>,
    pub zombie: Option<&'a str>,
}

impl Runs {
    pub fn skips(&self) -> Skips<'_> {
        fn why<T>(phase: &Result<T, String>) -> Option<&str> {
            phase.as_ref().err().map(String::as_str)
        }
        Skips {
            idempotent: why(&self.idempotent),
            resize: why(&self.resize),
            restart: why(&self.restart),
            zombie: why(&self.zombie),
        }
    }
}

/// Phase 5's two runs: the zombie without fencing and with it.
pub struct Zombies {
    pub unfenced: ZombieRun,
    pub fenced: ZombieRun,
}

impl Figures {
    pub fn new(runs: &Runs) -> Self {
        Figures {
            seed: runs.seed,
            records_sent: runs.plain.sent.len() as u64,
            partitions: runs.partitions,
            acks_lost: runs.plain.acks_lost,
            duplicates_without_idempotence: runs.plain.log.duplicates(),
            duplicates_with_defaults: runs.defaults.as_ref().map(|run| run.log.duplicates()),
            idempotence: runs.idempotent.as_ref().ok().map(|run| WithIdempotence {
                acks_lost_with_idempotence: run.acks_lost,
                duplicates_with_idempotence: run.log.duplicates(),
                broker_side_acks_dropped: runs.broker_side.as_ref().map(|r| r.acks_lost),
                broker_side_duplicates: runs.broker_side.as_ref().map(|r| r.log.duplicates()),
            }),
            partition_change: runs.resize.as_ref().ok().map(|resize| PartitionChange {
                partitions_after_change: resize.after,
                resends_after_partition_change: resize.resent.len() as u64,
                resent_orders: resize.resent.iter().map(|r| r.id.clone()).collect(),
                duplicates_after_partition_change: resize.log.duplicates(),
                duplicates_in_another_partition: resize.log.split_ids(),
            }),
            restarts: runs.restart.as_ref().ok().map(Restarts::of),
            fencing: runs.zombie.as_ref().ok().map(|z| Fencing {
                zombie_fenced: z.fenced.zombie_stopped,
                zombie_fenced_with: z.fenced.refused_with.clone(),
                zombie_writes_accepted_without_fencing: z.unfenced.zombie_accepted(),
                updates_lost_without_fencing: z.unfenced.lost_updates(),
                zombie_writes_accepted_with_fencing: z.fenced.zombie_accepted(),
                updates_lost_with_fencing: z.fenced.lost_updates(),
            }),
            per_partition: PerPartition {
                without_idempotence: loss_rows(&runs.plain),
                with_idempotence: runs.idempotent.as_ref().ok().map(loss_rows),
                after_partition_change: runs.resize.as_ref().ok().map(resize_rows),
                after_producer_restart: runs.restart.as_ref().ok().map(restart_rows),
            },
        }
    }
}

impl Restarts {
    fn of(run: &RestartRun) -> Self {
        let ids: BTreeSet<i64> = run
            .instances
            .iter()
            .map(|i| i.producer.producer_id)
            .collect();
        Restarts {
            producer_restarts: run.instances.len().saturating_sub(1) as u64,
            producer_ids_after_restarts: ids.len() as u64,
            duplicates_after_producer_restart: run.log.duplicates(),
        }
    }
}

/// Per-partition counts the log alone cannot give, from what the application did.
#[derive(Default)]
struct Sends {
    sent: BTreeMap<i32, u64>,
    lost: BTreeMap<i32, u64>,
    resent: BTreeMap<i32, u64>,
}

fn get(counts: &BTreeMap<i32, u64>, partition: i32) -> u64 {
    counts.get(&partition).copied().unwrap_or(0)
}

fn rows(log: &LogCount, sends: &Sends) -> Vec<PartitionRow> {
    let mut split: BTreeMap<i32, u64> = BTreeMap::new();
    for places in log.places.values() {
        let partitions: BTreeSet<i32> = places.iter().map(|(p, _)| *p).collect();
        if partitions.len() > 1 {
            for (p, _) in places {
                *split.entry(*p).or_default() += 1;
            }
        }
    }
    log.partitions
        .iter()
        .map(|(&partition, count)| PartitionRow {
            partition,
            sent: get(&sends.sent, partition),
            acks_lost: get(&sends.lost, partition),
            resent: get(&sends.resent, partition),
            in_log: count.records,
            duplicates: count.duplicates,
            split: get(&split, partition),
        })
        .collect()
}

pub fn loss_rows(run: &LossRun) -> Vec<PartitionRow> {
    let sends = Sends {
        sent: run.by_partition(|_| 1),
        lost: run.by_partition(|s| s.lost.len() as u64),
        resent: BTreeMap::new(),
    };
    rows(&run.log, &sends)
}

/// Each order counted once where its first copy went; re-sends where they landed.
pub fn resize_rows(run: &ResizeRun) -> Vec<PartitionRow> {
    let mut sends = Sends::default();
    for places in run.log.places.values() {
        *sends.sent.entry(places[0].0).or_default() += 1;
    }
    for resend in &run.resent {
        *sends.resent.entry(resend.again.partition).or_default() += 1;
    }
    rows(&run.log, &sends)
}

/// Each event counted once; the lost acknowledgement and the next instance's re-send in the
/// event's partition.
pub fn restart_rows(run: &RestartRun) -> Vec<PartitionRow> {
    let mut sends = Sends::default();
    for places in run.log.places.values() {
        *sends.sent.entry(places[0].0).or_default() += 1;
    }
    for instance in &run.instances {
        if let Some((_, partition, _)) = &instance.died_on {
            *sends.lost.entry(*partition).or_default() += 1;
            *sends.resent.entry(*partition).or_default() += 1;
        }
    }
    rows(&run.log, &sends)
}

/// Each failure must have been caused and measured, and each fix must have removed it while
/// facing the same failure: a run without lost acknowledgements, a partition change that moved
/// nothing, or a zombie nobody fenced is not shown.
///
/// `skips` says why a phase did not run, when it did not: its checks are skipped.
pub fn verdict(f: &Figures, skips: &Skips) -> Checks {
    let mut checks = Checks::new();
    checks.check(
        "duplicates without idempotence",
        f.acks_lost > 0 && f.duplicates_without_idempotence == f.acks_lost,
        format!(
            "without idempotence: {} acknowledgements lost, {} duplicates in the log (must be equal and above 0)",
            f.acks_lost, f.duplicates_without_idempotence
        ),
    );
    let no_idempotence = not_run("no idempotent producer ran", skips.idempotent);
    let mut check = |name: &str, ran: Option<(bool, String)>, why: &str| match ran {
        Some((ok, detail)) => {
            checks.check(name, ok, detail);
        }
        None => checks.skip(name, why),
    };
    check(
        "none on Kafka's defaults",
        f.duplicates_with_defaults.map(|dups| {
            let detail = format!("a producer on Kafka's defaults: {dups} duplicates (must be 0)");
            (dups == 0, detail)
        }),
        &no_idempotence,
    );
    check(
        "none with idempotence",
        f.idempotence.as_ref().map(|i| {
            (
                i.acks_lost_with_idempotence == f.acks_lost && i.duplicates_with_idempotence == 0,
                format!(
                    "with idempotence: the same {} acknowledgements lost, {} duplicates (must be 0)",
                    i.acks_lost_with_idempotence, i.duplicates_with_idempotence
                ),
            )
        }),
        &no_idempotence,
    );
    check(
        "duplicates after the partition change",
        f.partition_change.as_ref().map(|c| {
            (
                c.duplicates_after_partition_change > 0 && c.duplicates_in_another_partition > 0,
                format!(
                    "after {} -> {} partitions: {} duplicates, {} of them in another partition than their first copy (both must be above 0)",
                    f.partitions,
                    c.partitions_after_change,
                    c.duplicates_after_partition_change,
                    c.duplicates_in_another_partition
                ),
            )
        }),
        &not_run("the partition change was not made", skips.resize),
    );
    check(
        "duplicates after restarts",
        f.restarts.as_ref().map(|r| {
            (
                r.duplicates_after_producer_restart > 0
                    && r.producer_ids_after_restarts == r.producer_restarts + 1,
                format!(
                    "after {} restarts ({} producer ids): {} duplicates (must be above 0)",
                    r.producer_restarts,
                    r.producer_ids_after_restarts,
                    r.duplicates_after_producer_restart
                ),
            )
        }),
        &not_run("the relay's producers did not run", skips.restart),
    );
    let no_zombie = not_run("the zombie writer did not run", skips.zombie);
    check(
        "zombie accepted without fencing",
        f.fencing.as_ref().map(|z| {
            (
                z.zombie_writes_accepted_without_fencing > 0 && z.updates_lost_without_fencing > 0,
                format!(
                    "without fencing: {} writes of the zombie accepted, {} updates of its successor lost (must be above 0)",
                    z.zombie_writes_accepted_without_fencing, z.updates_lost_without_fencing
                ),
            )
        }),
        &no_zombie,
    );
    check(
        "zombie fenced",
        f.fencing.as_ref().map(|z| {
            (
                z.zombie_fenced
                    && z.zombie_writes_accepted_with_fencing == 0
                    && z.updates_lost_with_fencing == 0,
                format!(
                    "with fencing: zombie fenced = {} ({}), {} of its writes accepted, {} updates lost (must be 0)",
                    z.zombie_fenced,
                    z.zombie_fenced_with.as_deref().unwrap_or("no fencing error"),
                    z.zombie_writes_accepted_with_fencing,
                    z.updates_lost_with_fencing
                ),
            )
        }),
        &no_zombie,
    );
    checks
}

/// A skipped check's detail: what did not happen, and why.
fn not_run(what: &str, reason: Option<&str>) -> String {
    format!("{what}: {}", reason.unwrap_or("its phase did not run"))
}
