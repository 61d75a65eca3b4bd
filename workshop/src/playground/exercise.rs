//! Source 000's exercise, button by button, on the real broker: 12 keys, 3 partitions,
//! partition = key % 3, each partition completes at most 4 requests a step, the batch arrives
//! before processing.
//!
//! Every step is a step of lab hot-tenant's `--steps` ([`StepRun`]): the batch is produced and
//! acknowledged, each partition's consumer completes at most 4 records and commits, and the
//! figures are the broker's (arrivals from log ends, completed from commits, queued from the
//! group's lag). As in source 000, changing the load or the hot key starts a new run (a fresh
//! topic and group), and so does "reset", which keeps the settings.

use serde::Serialize;

use crate::kit::steps::model::{self, Load, StepRow, CAPACITY, KEYS, PARTITIONS};
use crate::kit::steps::StepRun;
use crate::lab::target::Cluster;
use crate::lab::LabError;

/// What source 000's buttons set: the load of the next batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Uniform,
    Hot(u32),
}

/// A button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// "Uniform": each key once per batch.
    Uniform,
    /// "Hot key": 9 requests to this key, one each to the next three.
    Hot(u32),
    /// "12 requests + step".
    Batch,
    /// "Step without new requests".
    Drain,
    /// "Reset": a new run, the same settings.
    Reset,
}

/// One partition's row of source 000's table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub partition: usize,
    pub keys: Vec<u32>,
    /// Arrived in the last step.
    pub arrived: u64,
    /// Arrived in this run.
    pub received: u64,
    pub completed: u64,
    /// Queued now: the group's lag on the partition.
    pub queued: u64,
    /// Share of the run's requests, in whole percent (the bars' 0-100 % scale).
    pub share_percent: u64,
}

/// What the page shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct View {
    /// `uniform` or `hot`.
    pub load: &'static str,
    pub hot_key: Option<u32>,
    pub keys: u32,
    pub capacity_per_step: u64,
    /// Runs started so far; the current one is the last.
    pub run: u32,
    pub topic: Option<String>,
    pub steps: usize,
    pub rows: Vec<Row>,
    /// Every step of this run, as measured.
    pub history: Vec<StepRow>,
    /// One sentence about the last step, from its figures.
    pub message: String,
}

/// The exercise's state.
pub struct Exercise {
    setting: Setting,
    run: Option<StepRun>,
    runs: u32,
    history: Vec<StepRow>,
}

impl Default for Exercise {
    fn default() -> Self {
        Exercise {
            setting: Setting::Uniform,
            run: None,
            runs: 0,
            history: Vec::new(),
        }
    }
}

impl Exercise {
    /// Does what the button says, on `cluster`.
    pub async fn act(&mut self, cluster: &Cluster, action: Action) -> Result<(), LabError> {
        match action {
            Action::Uniform => self.set(Setting::Uniform).await,
            Action::Hot(key) if key < KEYS => self.set(Setting::Hot(key)).await,
            Action::Hot(key) => {
                return Err(LabError::InvalidInput(format!(
                    "there is no key {key}: keys are 0 to {}",
                    KEYS - 1
                )))
            }
            Action::Batch => self.step(cluster, self.load()).await?,
            Action::Drain => self.step(cluster, Load::Nothing).await?,
            Action::Reset => self.new_run().await,
        }
        Ok(())
    }

    pub fn view(&self) -> View {
        let mut rows: Vec<Row> = (0..PARTITIONS)
            .map(|p| Row {
                partition: p,
                keys: (0..KEYS).filter(|&k| model::partition_of(k) == p).collect(),
                arrived: self.history.last().map_or(0, |r| r.arrivals[p]),
                received: self.history.iter().map(|r| r.arrivals[p]).sum(),
                completed: self.history.iter().map(|r| r.completed[p]).sum(),
                queued: self.history.last().map_or(0, |r| r.queued[p]),
                share_percent: 0,
            })
            .collect();
        let total: u64 = rows.iter().map(|r| r.received).sum();
        for row in &mut rows {
            // Rounded each on its own: the shares may not add up to 100, as source 000 warns.
            row.share_percent = (row.received * 200 + total) / (2 * total.max(1));
        }
        View {
            load: match self.setting {
                Setting::Uniform => "uniform",
                Setting::Hot(_) => "hot",
            },
            hot_key: match self.setting {
                Setting::Hot(key) => Some(key),
                Setting::Uniform => None,
            },
            keys: KEYS,
            capacity_per_step: CAPACITY,
            run: self.runs,
            topic: self.run.as_ref().map(|r| r.topic().to_string()),
            steps: self.history.len(),
            rows,
            history: self.history.clone(),
            message: message(self.history.last()),
        }
    }

    /// Stops the current run (its topic stays until the playground ends).
    pub async fn close(&mut self) {
        if let Some(run) = self.run.take() {
            run.close().await;
        }
    }

    fn load(&self) -> Load {
        match self.setting {
            Setting::Uniform => Load::Uniform,
            Setting::Hot(key) => Load::Hot(key),
        }
    }

    /// A new setting starts a new run; the same one changes nothing.
    async fn set(&mut self, setting: Setting) {
        if setting != self.setting {
            self.setting = setting;
            self.new_run().await;
        }
    }

    async fn new_run(&mut self) {
        self.close().await;
        self.history.clear();
    }

    async fn step(&mut self, cluster: &Cluster, load: Load) -> Result<(), LabError> {
        if self.run.is_none() {
            self.runs += 1;
            let base = format!("playground-{}", self.runs);
            self.run = Some(StepRun::start(cluster, &base).await?);
        }
        let run = self.run.as_mut().expect("started above");
        let (row, _) = run.step(load).await?;
        self.history.push(row);
        Ok(())
    }
}

/// The last step in one sentence, from its figures.
fn message(last: Option<&StepRow>) -> String {
    let Some(row) = last else {
        return "No requests yet. Predict the distribution and send a batch.".to_string();
    };
    let slash = |v: [u64; PARTITIONS]| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("/")
    };
    let head = if row.arrivals.iter().sum::<u64>() == 0 {
        "No new requests".to_string()
    } else {
        format!("Arrivals {}", slash(row.arrivals))
    };
    let queues: Vec<String> = (0..PARTITIONS)
        .filter(|&p| row.queued[p] > 0)
        .map(|p| format!("P{p} keeps {} queued", row.queued[p]))
        .collect();
    let queues = match queues.is_empty() {
        true => "every queue is empty".to_string(),
        false => queues.join(", "),
    };
    format!(
        "{head}: {} of a capacity of {} done this step; {queues}.",
        row.total_completed(),
        CAPACITY * PARTITIONS as u64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(arrivals: [u64; 3], completed: [u64; 3], queued: [u64; 3]) -> StepRow {
        StepRow {
            label: String::new(),
            arrivals,
            completed,
            queued,
        }
    }

    #[test]
    fn the_sentence_says_what_the_figures_say() {
        assert_eq!(
            message(None),
            "No requests yet. Predict the distribution and send a batch."
        );
        assert_eq!(
            message(Some(&row([10, 1, 1], [4, 1, 1], [6, 0, 0]))),
            "Arrivals 10/1/1: 6 of a capacity of 12 done this step; P0 keeps 6 queued."
        );
        assert_eq!(
            message(Some(&row([0, 0, 0], [4, 0, 0], [0, 0, 0]))),
            "No new requests: 4 of a capacity of 12 done this step; every queue is empty."
        );
    }

    #[test]
    fn shares_are_whole_percent_of_the_runs_requests() {
        let ex = Exercise {
            history: vec![row([10, 1, 1], [4, 1, 1], [6, 0, 0])],
            ..Exercise::default()
        };
        let view = ex.view();
        let shares: Vec<u64> = view.rows.iter().map(|r| r.share_percent).collect();
        // 10/12 = 83.3 %, 1/12 = 8.3 %: the rounded shares add up to 99.
        assert_eq!(shares, [83, 8, 8]);
        assert_eq!(view.rows[0].keys, [0, 3, 6, 9]);
        assert_eq!(Exercise::default().view().rows[2].share_percent, 0);
    }
}
