//! Source 000's step model on the real broker, one step at a time ([`StepRun`]): what lab
//! hot-tenant's `--steps` runs in sequence and the playground's exercise steps as its buttons
//! say. The model itself, its keys, placement and arithmetic, is [`model`].

pub mod model;

use std::time::Duration;

use client::{Producer, ProducerRecord, TopicPartition};

use super::offsets::GroupOffsets;
use super::reader::PartitionReader;
use crate::lab::report::LagRow;
use crate::lab::target::{self, broker_error, Cluster};
use crate::lab::LabError;
use model::{Load, StepRow, CAPACITY, PARTITIONS};

/// How long a consumer's fetch waits for records it knows are there (they were acknowledged).
const FETCH_WAIT: Duration = Duration::from_millis(100);
/// Requests of one step, one after the other: the log ends and committed offsets before, the
/// batch, the log ends after, a fetch and a commit per partition, the group's lag and its
/// committed offsets after.
pub const STEP_ROUND_TRIPS: u64 = 5 + 2 * PARTITIONS as u64 + 3;
/// Starting a run: its topic, and the producer's metadata.
pub const START_ROUND_TRIPS: u64 = 2;

/// One run of source 000's model on the broker, a step at a time: its own topic of 3 partitions
/// and its own group, one consumer per partition. The playground (`workshop playground`)
/// steps one as its buttons say.
pub struct StepRun {
    topic: String,
    group: GroupOffsets,
    producer: Producer,
    readers: Vec<PartitionReader>,
    steps: usize,
}

impl StepRun {
    /// Creates the topic the lab calls `base` and the group of the same name.
    pub async fn start(cluster: &Cluster, base: &str) -> Result<StepRun, LabError> {
        let topic = cluster.create_topic(base, PARTITIONS as i32).await?;
        let group = GroupOffsets::new(cluster.client(), &cluster.group(base));
        let producer = Producer::new(cluster.client().clone(), target::producer_config())
            .map_err(|e| broker_error("starting the producer", &e))?;
        let readers = (0..PARTITIONS as i32)
            .map(|p| {
                PartitionReader::new(
                    cluster.client(),
                    TopicPartition::new(topic.clone(), p),
                    0,
                    FETCH_WAIT,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StepRun {
            topic,
            group,
            producer,
            readers,
            steps: 0,
        })
    }

    /// The topic, as created (unique under `--bootstrap`).
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// One step: the batch of `load` is produced and acknowledged, then each partition's
    /// consumer completes at most [`CAPACITY`] records and commits. Returns what the broker
    /// shows (arrivals from log ends, completed from commits, queued from the group's lag) and
    /// the group's lag rows after the step.
    pub async fn step(&mut self, load: Load) -> Result<(StepRow, Vec<LagRow>), LabError> {
        let (topic, group) = (&self.topic, &self.group);
        let ends_before = group.log_ends(topic, PARTITIONS as i32).await?;
        let committed_before = committed_or_zero(group, topic).await?;
        produce_batch(&self.producer, topic, load, self.steps).await?;
        self.steps += 1;
        let ends = group.log_ends(topic, PARTITIONS as i32).await?;
        // Each partition's consumer completes at most CAPACITY records from where the group is.
        for (p, reader) in self.readers.iter_mut().enumerate() {
            let taken = reader.take(CAPACITY as usize, ends[p]).await?;
            if let Some(last) = taken.last() {
                group
                    .commit_unassigned(topic, &[(p as i32, last.offset + 1)])
                    .await?;
            }
        }
        let lag = group.lag_rows(topic, PARTITIONS as i32).await?;
        let committed = committed_or_zero(group, topic).await?;
        let mut row = StepRow {
            label: load.label(),
            arrivals: [0; PARTITIONS],
            completed: [0; PARTITIONS],
            queued: [0; PARTITIONS],
        };
        for p in 0..PARTITIONS {
            row.arrivals[p] = (ends[p] - ends_before[p]).max(0) as u64;
            row.completed[p] = (committed[p] - committed_before[p]).max(0) as u64;
            row.queued[p] = lag[p].lag().unwrap_or(ends[p]).max(0) as u64;
        }
        Ok((row, lag))
    }

    /// Waits for the producer's last acknowledgements; the topic and group stay until the
    /// cluster closes.
    pub async fn close(self) {
        self.producer.close().await;
    }
}

/// Sends the batch of `load` with source 000's placement and waits for every acknowledgement:
/// the batch arrives before anything is processed.
async fn produce_batch(
    producer: &Producer,
    topic: &str,
    load: Load,
    step: usize,
) -> Result<(), LabError> {
    let mut pending = Vec::new();
    for (i, key) in load.keys().into_iter().enumerate() {
        let key_text = key.to_string();
        let value = format!("step {step} request {i}");
        let record = ProducerRecord::new(topic)
            .key(&key_text)
            .value(&value)
            .partition(model::partition_of(key) as i32);
        pending.push(
            producer
                .send(record)
                .await
                .map_err(|e| broker_error("producing a batch", &e))?,
        );
    }
    for delivery in pending {
        delivery
            .wait()
            .await
            .map_err(|e| broker_error("producing a batch", &e))?;
    }
    Ok(())
}

async fn committed_or_zero(group: &GroupOffsets, topic: &str) -> Result<Vec<i64>, LabError> {
    Ok(group
        .committed(topic, PARTITIONS as i32)
        .await?
        .into_iter()
        .map(|c| c.unwrap_or(0))
        .collect())
}
