//! `--steps`: source 000's step model on the real broker.
//!
//! A topic of 3 partitions per run (a new run starts from empty queues, as changing the load
//! in source 000 does). Each step: the batch is produced with source 000's placement as an explicit
//! partition (`key % 3`, not murmur2) and acknowledged before anything is processed; then each
//! partition's consumer reads from the group's committed offset, completes at most 4 records,
//! and commits. Every figure comes from the broker: arrivals are log end offsets before and
//! after the batch, completed is the committed offset's advance, queued is the group's lag
//! (log end minus committed). Source 000's arithmetic ([`model::predict`]) is the expectation the
//! lab checks them against.

use serde::Serialize;

use crate::kit::offsets::lag_title;
use crate::kit::steps::model::{self, Load, Run, StepRow, CAPACITY, PARTITIONS};
use crate::kit::steps::{StepRun, START_ROUND_TRIPS, STEP_ROUND_TRIPS};
use crate::lab::deadline::Work;
use crate::lab::report::{
    thousands, Align, Checks, LagRow, Narrator, Phase, Progress, Summary, Table,
};
use crate::lab::target::Cluster;
use crate::lab::LabError;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub keys: u32,
    pub partitions: usize,
    pub capacity_per_step: u64,
    /// Every step of every run, as measured on the broker.
    pub steps: Vec<StepRow>,
    /// The first hot batch: the hot partition's share of its 12 requests.
    pub hot_share: f64,
    /// Requests completed in the first hot step, of a capacity of 12.
    pub hot_step_completed: u64,
    pub capacity: u64,
}

pub const EXPECTED: &str = "With 12 keys placed 4/4/4 on 3 partitions, a hot key sends 10 of 12 \
    requests to one partition: it completes 4 and queues 6 while the others idle (6 of a capacity \
    of 12 done), its queue grows to 12 and drains only 4 per step, and another hot key moves the \
    load to another partition; the broker's lag shows exactly source 000's queues.";

/// Runs source 000's sequence on the broker; narrates each run.
pub async fn run(cluster: &Cluster, n: &mut Narrator) -> Result<(Figures, Checks), LabError> {
    let runs = model::seed_000_runs();
    let mut measured: Vec<StepRow> = Vec::new();
    let mut predicted: Vec<StepRow> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        opening(n, i, run);
        let expected = model::predict(run);
        let steps = run.steps.len() as u64;
        let (rows, longest) = n
            .step(work(run), steps, "running the steps", async |progress| {
                run_on_broker(cluster, i, run, progress).await
            })
            .await?;
        n.answer();
        n.table(&steps_table(&rows));
        // The queue at its longest is worth the tool's own view: LAG is the queue.
        if let Some(lag) = longest {
            if let Some(row) = lag.first() {
                n.say(&lag_title(
                    &row.group,
                    "at the longest queue, where LAG is the queue",
                ));
            }
            n.lag(&lag);
        }
        if rows != expected {
            n.say("The broker's figures differ from source 000's arithmetic (see the verdict).");
        }
        measured.extend(rows);
        predicted.extend(expected);
    }
    let mut v = Checks::new();
    v.check(
        "the broker matches source 000",
        measured == predicted,
        format!(
            "{} steps measured on the broker (arrivals, completed, queued per partition) {} source 000's arithmetic",
            measured.len(),
            if measured == predicted { "match" } else { "do not match" }
        ),
    );
    let hot = measured.iter().find(|r| r.label.starts_with("hot key"));
    let (hot_share, hot_completed) = match hot {
        Some(r) => {
            let arrived: u64 = r.arrivals.iter().sum();
            let share =
                r.arrivals.iter().copied().max().unwrap_or(0) as f64 / arrived.max(1) as f64;
            let queued_one = r.queued.iter().filter(|&&q| q > 0).count() == 1;
            v.check(
                "one partition queues",
                queued_one && r.total_completed() < CAPACITY * PARTITIONS as u64,
                format!(
                    "{}: arrivals {:?}, one partition queues {} while {} of a capacity of {} are done",
                    r.label,
                    r.arrivals,
                    r.queued.iter().max().unwrap_or(&0),
                    r.total_completed(),
                    CAPACITY * PARTITIONS as u64
                ),
            );
            (crate::lab::report::round(share, 4), r.total_completed())
        }
        None => {
            v.check("one partition queues", false, "no hot step was measured");
            (0.0, 0)
        }
    };
    n.summary(&summary(&measured));
    Ok((
        Figures {
            keys: model::KEYS,
            partitions: PARTITIONS,
            capacity_per_step: CAPACITY,
            steps: measured,
            hot_share,
            hot_step_completed: hot_completed,
            capacity: CAPACITY * PARTITIONS as u64,
        },
        v,
    ))
}

/// What one run does on the broker, for its phase's deadline: every step's requests, and its
/// batch produced and consumed.
fn work(run: &Run) -> Work {
    let steps = run.steps.len() as u64;
    let records: usize = run.steps.iter().map(|load| load.keys().len()).sum();
    Work {
        round_trips: START_ROUND_TRIPS + steps * STEP_ROUND_TRIPS,
        records: 2 * records as u64,
        ..Work::default()
    }
}

/// One run: a fresh topic and group, then its steps; with the group's lag at the step where a
/// queue first reaches 12, if one does.
async fn run_on_broker(
    cluster: &Cluster,
    index: usize,
    run: &Run,
    progress: &Progress,
) -> Result<(Vec<StepRow>, Option<Vec<LagRow>>), LabError> {
    let mut on_broker = StepRun::start(cluster, &format!("hot-tenant-steps-{}", index + 1)).await?;
    let mut rows = Vec::new();
    let mut longest = None;
    for &load in &run.steps {
        let (row, lag) = on_broker.step(load).await?;
        if longest.is_none() && row.queued.iter().copied().max() == Some(12) {
            longest = Some(lag);
        }
        rows.push(row);
        progress.inc();
    }
    on_broker.close().await;
    Ok((rows, longest))
}

fn opening(n: &mut Narrator, index: usize, run: &Run) {
    let (title, about, predict) = match run.steps.first() {
        Some(Load::Uniform) => (
            "A uniform batch".to_string(),
            "Twelve keys, 0 to 11, on three partitions by partition = key % 3: P0 owns 0, 3, 6, 9; P1 owns \
             1, 4, 7, 10; P2 owns 2, 5, 8, 11. Each partition's consumer completes at most 4 records per \
             step. A batch of 12 requests, one per key, is produced and acknowledged, then the consumers work.",
            "how many of the 12 are done after one step?",
        ),
        Some(Load::Hot(key)) if run.steps.len() > 1 => (
            format!("Hot key {key}: two batches, then three steps without arrivals"),
            "A fresh topic and group, the same placement. Now key 0 gets 9 requests and keys 1, 2 and 3 one \
             each: still 12 requests, still four keys per partition.",
            "which partition gets most of the work, and how long is its queue after two batches?",
        ),
        Some(Load::Hot(key)) => (
            format!("Hot key {key}"),
            "A fresh topic and group: 9 requests to this key, one each to the next three keys round the circle.",
            "which partition does the load move to?",
        ),
        _ => (format!("Run {}", index + 1), "", "what happens?"),
    };
    n.phase(Phase {
        title: &title,
        about,
        predict,
    });
}

fn steps_table(rows: &[StepRow]) -> Table {
    let mut table = Table::new(&[
        ("step", Align::Left),
        ("arrived P0/P1/P2", Align::Right),
        ("completed", Align::Right),
        ("queued (lag)", Align::Right),
        ("done of 12", Align::Right),
        ("longest queue", Align::Left),
    ]);
    let slash = |v: [u64; PARTITIONS]| format!("{}/{}/{}", v[0], v[1], v[2]);
    for r in rows {
        table.row([
            r.label.clone(),
            slash(r.arrivals),
            slash(r.completed),
            slash(r.queued),
            thousands(r.total_completed()),
            crate::lab::report::bar(r.queued.iter().copied().max().unwrap_or(0), 12, 12),
        ]);
    }
    table
}

fn summary(rows: &[StepRow]) -> Summary {
    let busiest = |r: &StepRow| {
        (0..PARTITIONS)
            .max_by_key(|&p| (r.arrivals[p], r.queued[p]))
            .unwrap_or(0)
    };
    let hot = rows.iter().find(|r| r.label.starts_with("hot key"));
    let mut happened = Vec::new();
    match hot {
        Some(r) => {
            let p = busiest(r);
            let others: Vec<String> = (0..PARTITIONS)
                .filter(|&o| o != p)
                .map(|o| r.completed[o].to_string())
                .collect();
            let arrived: u64 = r.arrivals.iter().sum();
            happened.push(format!(
                "A hot key sent {} of {arrived} requests to P{p}, about {:.0} %: it completed {} and \
                 queued {}, the other two completed {} of their {CAPACITY}; {} of a capacity of {} were \
                 done.",
                r.arrivals[p],
                r.arrivals[p] as f64 * 100.0 / arrived.max(1) as f64,
                r.completed[p],
                r.queued[p],
                others.join(" and "),
                r.total_completed(),
                CAPACITY * PARTITIONS as u64
            ));
            // The same run's next steps: the queue with a second batch, then without arrivals.
            let run: Vec<&StepRow> = rows
                .iter()
                .skip_while(|x| !std::ptr::eq(*x, r))
                .take_while(|x| x.label == r.label || x.label == "no arrivals")
                .collect();
            let queue: Vec<String> = run.iter().map(|x| x.queued[p].to_string()).collect();
            happened.push(format!(
                "P{p}'s queue, step by step: {}; {CAPACITY} a step is all it can drain.",
                queue.join(", ")
            ));
        }
        None => happened.push("No hot step ran.".to_string()),
    }
    let moved: Vec<String> = rows
        .iter()
        .filter(|r| r.label.starts_with("hot key"))
        .map(|r| format!("{} to P{}", r.label, busiest(r)))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    Summary {
        happened,
        why: vec![
            "Placement is not traffic: every partition owns four keys, but one key got most of the \
             requests and its owner most of the work. Idle capacity elsewhere does not help: work stays \
             with its owner."
                .into(),
            format!(
                "Moving the hot key only moves the queue to another partition: {}.",
                moved.join(", ")
            ),
        ],
        what_to_do: vec![
            "Watch activity per key and per partition (requests, queue, lag), not keys stored or averages.".into(),
            "Cache repeated reads in front of the owner; split a hot logical key into several physical \
             ones (reads then fan out and ordering across them is lost); more partitions spread other \
             keys, never one indivisible key."
                .into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::ApiKey;
    use std::time::Duration;

    /// A broker that answers every produce ten minutes late: the first run ends at its phase's
    /// deadline, derived from its step's requests, with one line naming the phase and how far
    /// it got (paused clock).
    #[tokio::test(start_paused = true)]
    async fn a_stuck_run_ends_at_its_deadline_and_says_where() {
        let cluster = Cluster::slowed(ApiKey::Produce, Duration::from_secs(600)).await;
        let started = tokio::time::Instant::now();
        let ran = run(&cluster, &mut Narrator::new()).await;
        crate::lab::deadline::assert_too_slow(
            ran,
            started.elapsed(),
            Duration::from_secs(26),
            "phase 1 (A uniform batch) was too slow: not done within 26 s (16 round trips x 1 s \
             + 24 records x 25 µs + 10 s); it was running the steps, 0 of 1 done. Is the broker \
             overloaded or slowed down? A smaller run (fewer records) needs less time",
        );
        cluster.close().await;
    }
}
