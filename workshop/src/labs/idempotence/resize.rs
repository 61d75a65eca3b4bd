//! Phase 3: where the guarantee ends (1). Orders go out through an idempotent producer, the
//! topic's partition count is raised with a real CreatePartitions, and the application sends
//! some orders again: an outbox replay of the orders it could not prove were delivered. The
//! re-sends go through the partitioner with the new count, so a share of them lands in another
//! partition than the first copy.

use client::{Producer, ProducerRecord, RecordMetadata};
use rand::seq::index::sample;
use rand_chacha::ChaCha8Rng;

use super::copies::LogCount;
use super::{producer_config, Plan};
use crate::lab::report::Progress;
use crate::lab::target::{broker_error, Cluster};
use crate::lab::LabError;

/// One order sent twice.
#[derive(Debug, Clone)]
pub struct Resend {
    pub id: String,
    pub first: RecordMetadata,
    pub again: RecordMetadata,
}

impl Resend {
    pub fn moved(&self) -> bool {
        self.first.partition != self.again.partition
    }
}

#[derive(Debug, Clone)]
pub struct ResizeRun {
    pub after: i32,
    pub resent: Vec<Resend>,
    pub log: LogCount,
}

pub fn order_id(i: u32) -> String {
    format!("order-{i:04}")
}

/// The orders the application re-sends, drawn from the seed. A run that skips the phase
/// draws them all the same, so the later phases see the seed's same choices.
pub fn choose_resends(plan: &Plan, rng: &mut ChaCha8Rng) -> Vec<u32> {
    let mut chosen: Vec<u32> = sample(rng, plan.records as usize, plan.resends as usize)
        .into_iter()
        .map(|i| i as u32)
        .collect();
    chosen.sort_unstable();
    chosen
}

pub async fn run(
    cluster: &Cluster,
    plan: &Plan,
    chosen: Vec<u32>,
    progress: &Progress,
) -> Result<ResizeRun, LabError> {
    let (before, after) = (plan.partitions, plan.partitions * 2);
    let topic = cluster.create_topic("orders", before).await?;
    let producer = Producer::new(cluster.client().clone(), producer_config(true, None))
        .map_err(|e| broker_error("starting the producer", &e))?;
    // Keyed by order id: every event of an order goes to the order's partition. All in flight
    // at once; offsets still follow the send order within each partition.
    let mut deliveries = Vec::with_capacity(plan.records as usize);
    for i in 0..plan.records {
        let id = order_id(i);
        let record = ProducerRecord::new(&topic).key(&id).value(&id);
        let delivery = producer.send(record).await;
        deliveries.push(delivery.map_err(|e| broker_error(&format!("sending {id}"), &e))?);
    }
    let mut first = Vec::with_capacity(deliveries.len());
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let sent = delivery.wait().await;
        first.push(sent.map_err(|e| broker_error(&format!("sending order {i}"), &e))?);
        progress.inc();
    }
    cluster.grow_topic(&topic, after).await?;
    let mut resent = Vec::with_capacity(chosen.len());
    for i in chosen {
        let id = order_id(i);
        let record = ProducerRecord::new(&topic).key(&id).value(&id);
        let again = producer
            .send_and_wait(record)
            .await
            .map_err(|e| broker_error(&format!("re-sending {id}"), &e))?;
        let first = first[i as usize];
        resent.push(Resend { id, first, again });
    }
    producer.close().await;
    let log = LogCount::of(&cluster.read_topic(&topic).await?);
    Ok(ResizeRun { after, resent, log })
}
