//! Source 000's step model as arithmetic: 12 keys, 3 partitions, `partition = key % 3`, each
//! partition completes at most 4 equal requests per step, a batch of 12 arrives before the
//! partitions process. The broker run (see the parent module) must measure exactly what this
//! predicts; the lab checks that it does.
//!
//! Source 000's batches: "uniform" has each key once; "hot key k" has 9 copies of k and one copy
//! of each of the next three keys round the circle (k+1, k+2, k+3 mod 12); a step without
//! arrivals still processes. Changing the load or the hot key starts a fresh run, so the
//! source's sequence is four runs: uniform; hot key 0 twice then three empty steps; hot key 1;
//! hot key 3.

use serde::Serialize;

pub const KEYS: u32 = 12;
pub const PARTITIONS: usize = 3;
/// Requests one partition completes per step.
pub const CAPACITY: u64 = 4;
/// Copies of the hot key in a hot batch; the other 3 go to the next keys round the circle.
const HOT_COPIES: usize = 9;

/// Source 000's rule, an explicit placement rather than a hash.
pub fn partition_of(key: u32) -> usize {
    (key % PARTITIONS as u32) as usize
}

/// What arrives in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    Uniform,
    Hot(u32),
    /// A step without arrivals: the partitions only drain their queues.
    Nothing,
}

impl Load {
    /// The keys of the batch, in the order they are sent.
    pub fn keys(self) -> Vec<u32> {
        match self {
            Load::Uniform => (0..KEYS).collect(),
            Load::Hot(key) => {
                let mut keys = vec![key % KEYS; HOT_COPIES];
                keys.extend((1..=3).map(|i| (key + i) % KEYS));
                keys
            }
            Load::Nothing => Vec::new(),
        }
    }

    /// Requests per partition in the batch.
    pub fn arrivals(self) -> [u64; PARTITIONS] {
        let mut per = [0; PARTITIONS];
        for key in self.keys() {
            per[partition_of(key)] += 1;
        }
        per
    }

    pub fn label(self) -> String {
        match self {
            Load::Uniform => "uniform".into(),
            Load::Hot(key) => format!("hot key {key}"),
            Load::Nothing => "no arrivals".into(),
        }
    }
}

/// One run of source 000: steps from empty queues. A new run is a fresh topic on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub steps: Vec<Load>,
}

/// Source 000's sequence.
pub fn seed_000_runs() -> Vec<Run> {
    vec![
        Run {
            steps: vec![Load::Uniform],
        },
        Run {
            steps: vec![
                Load::Hot(0),
                Load::Hot(0),
                Load::Nothing,
                Load::Nothing,
                Load::Nothing,
            ],
        },
        Run {
            steps: vec![Load::Hot(1)],
        },
        Run {
            steps: vec![Load::Hot(3)],
        },
    ]
}

/// What one step did, per partition. The same shape for the model and the broker's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepRow {
    pub label: String,
    pub arrivals: [u64; PARTITIONS],
    pub completed: [u64; PARTITIONS],
    pub queued: [u64; PARTITIONS],
}

impl StepRow {
    pub fn total_completed(&self) -> u64 {
        self.completed.iter().sum()
    }
}

/// What source 000's rule predicts for a run: arrivals join the queue, then each partition
/// completes up to its capacity. Capacity a partition does not use is lost for that step.
pub fn predict(run: &Run) -> Vec<StepRow> {
    let mut queued = [0u64; PARTITIONS];
    run.steps
        .iter()
        .map(|&load| {
            let arrivals = load.arrivals();
            let mut completed = [0; PARTITIONS];
            for p in 0..PARTITIONS {
                queued[p] += arrivals[p];
                completed[p] = queued[p].min(CAPACITY);
                queued[p] -= completed[p];
            }
            StepRow {
                label: load.label(),
                arrivals,
                completed,
                queued,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<StepRow> {
        seed_000_runs().iter().flat_map(predict).collect()
    }

    #[test]
    fn placement_gives_four_keys_to_each_partition() {
        let mut keys = [0; PARTITIONS];
        (0..KEYS).for_each(|k| keys[partition_of(k)] += 1);
        assert_eq!(keys, [4, 4, 4]);
    }

    #[test]
    fn batches_have_twelve_requests() {
        assert_eq!(Load::Uniform.keys().len(), 12);
        assert_eq!(
            Load::Hot(0).keys(),
            vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]
        );
        // Round the circle.
        assert_eq!(&Load::Hot(11).keys()[9..], &[0, 1, 2]);
        assert!(Load::Nothing.keys().is_empty());
    }

    #[test]
    fn the_seeds_figures() {
        let rows = rows();
        let got: Vec<([u64; 3], [u64; 3], [u64; 3])> = rows
            .iter()
            .map(|r| (r.arrivals, r.completed, r.queued))
            .collect();
        assert_eq!(
            got,
            vec![
                // Uniform: 4/4/4 arrive, all 12 done.
                ([4, 4, 4], [4, 4, 4], [0, 0, 0]),
                // Hot key 0: 10/1/1; P0 does 4 and keeps 6; 6 of a capacity of 12 done.
                ([10, 1, 1], [4, 1, 1], [6, 0, 0]),
                // A second hot batch: P0's queue grows to 12.
                ([10, 1, 1], [4, 1, 1], [12, 0, 0]),
                // Three steps without arrivals drain it: 8, 4, 0.
                ([0, 0, 0], [4, 0, 0], [8, 0, 0]),
                ([0, 0, 0], [4, 0, 0], [4, 0, 0]),
                ([0, 0, 0], [4, 0, 0], [0, 0, 0]),
                // Hot key 1 moves the load to P1.
                ([1, 10, 1], [1, 4, 1], [0, 6, 0]),
                // Hot key 3 moves it back to P0.
                ([10, 1, 1], [4, 1, 1], [6, 0, 0]),
            ]
        );
        assert_eq!(rows[1].total_completed(), 6);
        assert_eq!(rows[1].label, "hot key 0");
        assert_eq!(rows[3].label, "no arrivals");
    }
}
