//! Phases 1 and 2: the same payments sent without idempotence, through a producer on Kafka's
//! defaults, and with idempotence, while the producer loses the same acknowledgements
//! (client-side fault injection, so this works against any broker); on the embedded broker,
//! once more with the broker itself dropping the answers. Duplicates are counted by reading
//! each topic back.

use std::collections::BTreeMap;

use broker::faults::{DropBudget, Fault};
use client::{AckLoss, LostAck, ProducerConfig, ProducerIdAndEpoch, ProducerRecord};

use super::copies::LogCount;
use super::{producer_config, start, Plan};
use crate::lab::report::Progress;
use crate::lab::target::{self, broker_error, Cluster};
use crate::lab::LabError;

/// One payment as the producer saw it.
#[derive(Debug, Clone)]
pub struct Sent {
    pub id: String,
    pub partition: i32,
    /// Where the acknowledgement that finally came placed it.
    pub offset: i64,
    /// Acknowledgements lost on the way, each with the offset the broker had answered.
    pub lost: Vec<LostAck>,
}

/// One run of the payments through a producer that loses acknowledgements.
#[derive(Debug, Clone)]
pub struct LossRun {
    pub idempotent: bool,
    pub producer: Option<ProducerIdAndEpoch>,
    pub sent: Vec<Sent>,
    pub acks_lost: u64,
    pub log: LogCount,
}

impl LossRun {
    /// `count` of each payment, summed per partition.
    pub fn by_partition(&self, count: impl Fn(&Sent) -> u64) -> BTreeMap<i32, u64> {
        let mut sums = BTreeMap::new();
        for sent in &self.sent {
            *sums.entry(sent.partition).or_default() += count(sent);
        }
        sums
    }
}

pub fn payment_id(i: u32) -> String {
    format!("payment-{i:04}")
}

/// Payments are keyed by account, so each account's payments stay in order in one partition.
pub fn account_of(i: u32) -> String {
    format!("account-{:02}", i % 24)
}

/// Sends the plan's payments one at a time (one record per request, so one lost
/// acknowledgement is one record sent again), losing the plan's acknowledgements on the client
/// side, and reads the topic back.
pub async fn run(
    cluster: &Cluster,
    plan: &Plan,
    idempotent: bool,
    loss_seed: u64,
    progress: &Progress,
) -> Result<LossRun, LabError> {
    let base = if idempotent {
        "payments-idempotent"
    } else {
        "payments"
    };
    let topic = cluster.create_topic(base, plan.partitions).await?;
    let config = producer_config(idempotent, Some(lost(plan, loss_seed)));
    send_payments(cluster, plan, &topic, config, progress).await
}

/// The same through a producer left on Kafka's defaults, which since Kafka 3.0 (KIP-679) is
/// idempotent with acks=all: only the acknowledgements it loses are the lab's.
pub async fn run_on_defaults(
    cluster: &Cluster,
    plan: &Plan,
    loss_seed: u64,
    progress: &Progress,
) -> Result<LossRun, LabError> {
    let topic = cluster
        .create_topic("payments-defaults", plan.partitions)
        .await?;
    let config = ProducerConfig {
        // The one default of Kafka's producer this client does not share (see its docs).
        enable_idempotence: true,
        lose_acks: Some(lost(plan, loss_seed)),
        ..target::producer_config()
    };
    send_payments(cluster, plan, &topic, config, progress).await
}

/// The plan's lost acknowledgements, spread over the payments by the seed.
fn lost(plan: &Plan, loss_seed: u64) -> AckLoss {
    AckLoss::spread(plan.lost_acks, u64::from(plan.records), loss_seed)
}

/// The same through the embedded broker's own fault: it drops the answer by closing the
/// connection after the append, as a network would, for the same share of requests. `None`
/// against a cluster, which offers no such fault.
pub async fn run_broker_side(
    cluster: &Cluster,
    plan: &Plan,
    loss_seed: u64,
    progress: &Progress,
) -> Result<Option<LossRun>, LabError> {
    let Some(broker) = cluster.embedded() else {
        return Ok(None);
    };
    let topic = cluster
        .create_topic("payments-broker-loss", plan.partitions)
        .await?;
    let p = plan.lost_acks as f64 / f64::from(plan.records);
    broker.faults().add(Fault::DropAck {
        topic: Some(topic.clone()),
        partition: None,
        budget: DropBudget::Probability { p, seed: loss_seed },
    });
    let before = broker.faults().acks_dropped();
    let config = producer_config(true, None);
    let run = send_payments(cluster, plan, &topic, config, progress).await;
    let dropped = broker.faults().acks_dropped() - before;
    broker.faults().clear();
    Ok(Some(LossRun {
        acks_lost: dropped,
        ..run?
    }))
}

async fn send_payments(
    cluster: &Cluster,
    plan: &Plan,
    topic: &str,
    config: ProducerConfig,
    progress: &Progress,
) -> Result<LossRun, LabError> {
    let idempotent = config.enable_idempotence;
    let (producer, id) = start(cluster, config, "starting the producer").await?;
    let mut sent = Vec::with_capacity(plan.records as usize);
    for i in 0..plan.records {
        let (payment, account) = (payment_id(i), account_of(i));
        let before = producer.lost_acks().len();
        let record = ProducerRecord::new(topic).key(&account).value(&payment);
        let meta = producer
            .send_and_wait(record)
            .await
            .map_err(|e| broker_error(&format!("sending {payment}"), &e))?;
        sent.push(Sent {
            id: payment,
            partition: meta.partition,
            offset: meta.offset,
            lost: producer.lost_acks().split_off(before),
        });
        progress.inc();
    }
    let acks_lost = producer.acks_lost();
    producer.close().await;
    let log = LogCount::of(&cluster.read_topic(topic).await?);
    Ok(LossRun {
        idempotent,
        producer: id,
        sent,
        acks_lost,
        log,
    })
}
