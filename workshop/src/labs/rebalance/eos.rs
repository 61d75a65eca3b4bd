//! Run `eos`: the baseline's stall once more, with every member consuming and producing in Kafka
//! transactions (source 003, section 10: "exactly-once" as Kafka means it).
//!
//! For each batch a member begins a transaction, charges each payment at the payment gateway
//! (the ledger's effect: outside Kafka), produces one record per payment to `payments-applied`
//! (same partition as the payment), adds its consumed offsets to the transaction with its group
//! generation and member id (KIP-447), and commits. The stalled member's late offsets are refused
//! by the group coordinator, and it aborts its transaction. A downstream consumer with
//! `isolation.level=read_committed` tails the output topic throughout; once the run is over the
//! log is read once more with read_uncommitted, which also returns the aborted records.
//!
//! Nothing here waits for a transaction timeout: the broker's run on the wall clock, while the
//! embedded run is on tokio's paused one. The stalled member ends its own transaction, aborting
//! it as soon as its offsets are refused.
//!
//! Everything counted here was done through the broker: the members' transactions
//! ([`Txn`]), the downstream reads ([`Downstream`]), the gateway's charges (the run's plain
//! ledger, one effect per call).

use std::time::Duration;

use client::group::Generation;
use client::{
    Client, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerConfig, ProducerRecord,
    SeekTo, TopicPartition,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::capture::Journals;
use super::journal::Clock;
use super::payments::Payment;
use super::plan::{Kind, Plan, PARTITIONS};
use super::scenario::{self, Outcome};
use crate::lab::deadline::{Deadline, Work};
use crate::lab::target::{self, broker_error, Cluster};
use crate::lab::LabError;

/// The output topic, as the lab calls it (suffixed under `--bootstrap`).
pub const OUTPUT: &str = "payments-applied";
/// The members' transactional ids start with this (then the member's name).
const TRANSACTIONAL_ID: &str = "billing-eos";

/// What the members of the transactional run share.
#[derive(Debug, Clone)]
pub struct Transactional {
    /// The output topic as named on the broker.
    pub output: String,
    /// The transactional ids' prefix as named on the broker.
    pub id_prefix: String,
}

/// One output record: the payment applied, and where it was read from.
#[derive(Debug, Serialize, Deserialize)]
struct Applied {
    #[serde(flatten)]
    payment: Payment,
    source_offset: i64,
}

/// Why a transaction did not commit, and whether aborting it worked.
pub struct Refused {
    pub error: String,
    pub aborted: Result<(), String>,
}

/// One member's transactional producer.
pub struct Txn {
    producer: Producer,
    output: String,
}

impl Txn {
    /// A producer with the member's own transactional id, on the member's client.
    pub fn start(client: &Client, t: &Transactional, member: &str) -> Result<Txn, String> {
        let config = ProducerConfig {
            enable_idempotence: true,
            transactional_id: Some(format!("{}-{member}", t.id_prefix)),
            linger: Duration::ZERO,
            ..target::producer_config()
        };
        let producer = Producer::new(client.clone(), config)
            .map_err(|e| format!("cannot start the transactional producer: {e}"))?;
        Ok(Txn {
            producer,
            output: t.output.clone(),
        })
    }

    pub async fn begin(&self) -> Result<(), String> {
        self.producer
            .begin_transaction()
            .await
            .map_err(|e| format!("beginning a transaction failed: {e}"))
    }

    /// The payment's output record, in the open transaction, to the payment's partition.
    pub async fn produce(
        &self,
        payment: &Payment,
        partition: i32,
        offset: i64,
    ) -> Result<(), String> {
        let applied = Applied {
            payment: payment.clone(),
            source_offset: offset,
        };
        // A struct of strings and integers always serialises.
        let value = serde_json::to_vec(&applied).expect("an applied payment serialises");
        let record = ProducerRecord::new(&self.output)
            .partition(partition)
            .key(&payment.account)
            .value(&value);
        // Delivery is awaited by the commit, which flushes first.
        self.producer
            .send(record)
            .await
            .map(drop)
            .map_err(|e| format!("producing to {} failed: {e}", self.output))
    }

    /// Adds the consumed offsets as the member of `generation` and commits; when either is
    /// refused, aborts.
    pub async fn commit(
        &self,
        group: &str,
        generation: &Generation,
        instance: Option<&str>,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), Refused> {
        let p = &self.producer;
        let done = match p
            .send_offsets_as_member(group, generation, instance, offsets)
            .await
        {
            Ok(()) => p.commit_transaction().await,
            Err(e) => Err(e),
        };
        let error = match done {
            Ok(()) => return Ok(()),
            Err(e) => e.to_string(),
        };
        let aborted = p
            .abort_transaction()
            .await
            .map_err(|e| format!("aborting the transaction failed: {e}"));
        Err(Refused { error, aborted })
    }

    pub async fn close(self) {
        self.producer.close().await;
    }
}

/// What the transactional run left behind.
pub struct EosOutcome {
    pub run: Outcome,
    pub output: String,
    /// Every record of the output topic read_committed saw, in the order seen.
    pub read_committed: Vec<Seen>,
    /// Every record in the output topic's log, aborted ones included (read_uncommitted).
    pub read_uncommitted: Vec<Seen>,
}

/// One output record as a downstream consumer saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub payment_id: String,
    pub partition: i32,
    pub source_offset: i64,
    /// When the downstream consumer first got it (journal clock).
    pub at_ms: u64,
}

/// Runs the transactional scenario, or says why this cluster cannot.
pub async fn run(
    cluster: &Cluster,
    plan: &Plan,
    journals: &Journals,
    clock: Clock,
) -> Result<Result<EosOutcome, String>, LabError> {
    if let Some(reason) = cluster.lacks_transactional_ids().await? {
        return Ok(Err(reason));
    }
    let output = cluster.create_topic(OUTPUT, PARTITIONS).await?;
    let transactional = Transactional {
        output: output.clone(),
        id_prefix: cluster.name(TRANSACTIONAL_ID),
    };
    let (stop, stopped) = watch::channel(false);
    let downstream = Downstream::new(cluster.client(), &output, clock);
    let mut tail = std::pin::pin!(downstream.tail(stopped));
    let spec = plan.spec(Kind::Eos);
    let group = scenario::run(cluster, plan, spec, journals, clock, Some(&transactional));
    // The tail reads beside the group; a failed run drops it (nothing to read to the end).
    let run = tokio::select! {
        run = group => run?,
        failed = &mut tail => {
            let why = failed.err();
            return Err(why.unwrap_or_else(|| LabError::Internal("the downstream consumer stopped early".into())));
        }
    };
    // Every member has left, so no transaction is open: the last stable offset is the end.
    stop.send_replace(true);
    // What is left to read: at most every output record, a fetch per partition or two.
    let reading = Deadline::start(
        format!("the eos run's downstream read of {output}"),
        Work {
            round_trips: 2 * PARTITIONS as u64,
            records: 2 * plan.payments.len() as u64,
            ..Work::default()
        },
    );
    let doing = format!("reading {output} with read_committed to its end");
    let read_committed = reading.wait(&doing, tail).await?;
    let read_uncommitted = log_of(cluster, &output, clock).await?;
    Ok(Ok(EosOutcome {
        run,
        output,
        read_committed,
        read_uncommitted,
    }))
}

/// A downstream consumer of the output topic, with `isolation.level=read_committed`.
struct Downstream {
    consumer: Consumer,
    topic: String,
    clock: Clock,
}

impl Downstream {
    fn new(client: &Client, topic: &str, clock: Clock) -> Downstream {
        let mut consumer = Consumer::new(
            client.with_own_connections(),
            ConsumerConfig {
                max_wait: Duration::from_millis(100),
                auto_offset_reset: OffsetReset::Earliest,
                read_committed: true,
                ..ConsumerConfig::default()
            },
        );
        consumer.assign((0..PARTITIONS).map(|p| TopicPartition::new(topic, p)));
        Downstream {
            consumer,
            topic: topic.to_string(),
            clock,
        }
    }

    /// Reads until `stop`, then on to the end (the last stable offset with read_committed).
    async fn tail(mut self, mut stop: watch::Receiver<bool>) -> Result<Vec<Seen>, LabError> {
        let what = format!("reading {} downstream", self.topic);
        self.consumer
            .seek_all(SeekTo::Beginning)
            .map_err(|e| broker_error(&what, &e))?;
        let mut seen = Vec::new();
        loop {
            let stopping = *stop.borrow_and_update();
            if stopping && self.consumer.at_end() {
                return Ok(seen);
            }
            let polled = tokio::select! {
                polled = self.consumer.poll() => polled,
                _ = stop.changed(), if !stopping => continue,
            };
            let at_ms = self.clock.ms();
            for part in polled.map_err(|e| broker_error(&what, &e))? {
                for record in part.records() {
                    let record = record.map_err(|e| broker_error(&what, &e.into()))?;
                    seen.push(decode(part.partition, &record, at_ms)?);
                }
            }
        }
    }
}

fn decode(partition: i32, record: &client::Record, at_ms: u64) -> Result<Seen, LabError> {
    let applied: Applied = record
        .value
        .as_deref()
        .and_then(|v| serde_json::from_slice(v).ok())
        .ok_or_else(|| {
            LabError::Internal(format!(
                "{OUTPUT}-{partition}@{}: not an applied payment",
                record.offset
            ))
        })?;
    Ok(Seen {
        payment_id: applied.payment.payment_id,
        partition,
        source_offset: applied.source_offset,
        at_ms,
    })
}

/// The whole output log as read_uncommitted reads it, aborted transactions' records included.
async fn log_of(cluster: &Cluster, topic: &str, clock: Clock) -> Result<Vec<Seen>, LabError> {
    let at_ms = clock.ms();
    let mut seen = Vec::new();
    for (partition, records) in cluster.read_topic(topic).await? {
        for record in &records {
            seen.push(decode(partition, record, at_ms)?);
        }
    }
    Ok(seen)
}
