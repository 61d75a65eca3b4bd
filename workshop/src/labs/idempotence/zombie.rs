//! Phase 5: where the guarantee ends (3), and what the epoch buys. Writer A owns some accounts
//! and writes their balances; it stalls (a long GC pause), ownership moves to writer B, which
//! reads the balances and books a deposit; then A wakes up, still sure it owns the accounts, and
//! books a debit on the balance it remembers. The balances topic is read the way a compacted
//! topic or a materialised view reads it: the last value of each key wins.
//!
//! Without fencing, A and B are two idempotent producers with different ids and both writes
//! succeed: B's deposits vanish under A's stale balances. With fencing, both share a
//! transactional id and write in transactions, as Java's producer requires of one
//! (initTransactions, beginTransaction, send, commitTransaction). B's InitProducerId bumps the
//! epoch; A's late transaction must add its partitions at the transaction coordinator
//! (AddPartitionsToTxn) with the old epoch, which Kafka answers PRODUCER_FENCED: Java raises
//! ProducerFencedException, fatal, and the producer can only be closed.

use std::collections::BTreeMap;

use client::{Error, Producer, ProducerConfig, ProducerIdAndEpoch, ProducerRecord};

use super::{producer_config, start_idempotent, Plan};
use crate::lab::target::{broker_error, Cluster};
use crate::lab::LabError;

/// PRODUCER_FENCED (the transaction coordinator, Kafka 2.7+, KIP-588) and INVALID_PRODUCER_EPOCH
/// (a partition leader, or a coordinator before 2.7): the answers that mean "a newer instance
/// holds this transactional id".
const FENCING_CODES: [i16; 2] = [47, 90];

pub const OPENING: i64 = 100;
pub const DEPOSIT: i64 = 50;
pub const DEBIT: i64 = 30;

/// One write of a balance and how the broker took it.
#[derive(Debug, Clone)]
pub struct Write {
    pub writer: &'static str,
    pub producer: ProducerIdAndEpoch,
    pub account: String,
    /// `Ok((partition, offset))`, or who refused it and why.
    pub result: Result<(i32, i64), Refusal>,
}

/// A write that did not reach the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The broker answered with an error; otherwise the producer refused to send, having
    /// stopped after an earlier one.
    pub by_broker: bool,
    /// Kafka's name for the error (PRODUCER_FENCED).
    pub error: String,
}

#[derive(Debug, Clone)]
pub struct ZombieRun {
    pub fencing: bool,
    /// Every write in the order it was made.
    pub writes: Vec<Write>,
    /// The last balance of each account in the log.
    pub balances: BTreeMap<String, i64>,
    /// The fencing error that stopped the zombie, by Kafka's name (PRODUCER_FENCED).
    pub refused_with: Option<String>,
    /// Every late write of the zombie was refused: the first by the broker with a fencing error,
    /// the rest by the stopped producer itself.
    pub zombie_stopped: bool,
}

impl ZombieRun {
    /// Late writes of the zombie that the broker accepted.
    pub fn zombie_accepted(&self) -> u64 {
        self.late_zombie_writes()
            .filter(|w| w.result.is_ok())
            .count() as u64
    }

    /// Accounts whose final balance is not the new owner's.
    pub fn lost_updates(&self) -> u64 {
        let expected = OPENING + DEPOSIT;
        self.balances.values().filter(|b| **b != expected).count() as u64
    }

    fn late_zombie_writes(&self) -> impl Iterator<Item = &Write> {
        let handover = self.writes.iter().position(|w| w.writer == "B");
        self.writes
            .iter()
            .skip(handover.unwrap_or(self.writes.len()))
            .filter(|w| w.writer == "A")
    }
}

pub fn account(i: u32) -> String {
    format!("acct-{:02}", i + 1)
}

fn value(balance: i64, writer: &str) -> String {
    format!("balance={balance} writer={writer}")
}

fn balance_of(value: &str) -> Option<i64> {
    value
        .strip_prefix("balance=")?
        .split(' ')
        .next()?
        .parse()
        .ok()
}

pub async fn run(cluster: &Cluster, plan: &Plan, fencing: bool) -> Result<ZombieRun, LabError> {
    let topic = cluster
        .create_topic(
            if fencing {
                "balances-fenced"
            } else {
                "balances"
            },
            plan.partitions,
        )
        .await?;
    // A transactional id is cluster-wide state: unique per run under --bootstrap, like topics.
    let transactional_id = fencing.then(|| cluster.name("ledger-writer"));
    let accounts: Vec<String> = (0..plan.accounts).map(account).collect();
    let mut writes = Vec::new();

    let owner = Writer::start(cluster, &transactional_id, "A").await?;
    owner.begin().await?;
    for acct in &accounts {
        writes.push(owner.write(&topic, acct, OPENING).await);
    }
    owner.commit().await?;
    // A stalls. Ownership moves to B, which starts (bumping the epoch when fenced), reads the
    // balances and books the deposit.
    let successor = Writer::start(cluster, &transactional_id, "B").await?;
    let seen = balances(cluster, &topic).await?;
    successor.begin().await?;
    for acct in &accounts {
        let balance = seen.get(acct).copied().unwrap_or(0) + DEPOSIT;
        writes.push(successor.write(&topic, acct, balance).await);
    }
    successor.commit().await?;
    // A wakes up and books its debit on the balance it remembers, in a transaction of its own
    // when fenced: it does not know it is a zombie.
    owner.begin().await?;
    let mut all_refused = true;
    for acct in &accounts {
        let w = owner.write(&topic, acct, OPENING - DEBIT).await;
        all_refused &= w.result.is_err();
        writes.push(w);
    }
    // Without fencing A's writes went through; with it, the commit fails as the writes did
    // (a fenced producer can only be closed), and that failure is the one already counted.
    if !fencing || !all_refused {
        owner.commit().await?;
    }
    let fenced_by = owner
        .producer
        .fatal_error()
        .as_ref()
        .and_then(Error::fatal_cause)
        .and_then(Error::server)
        .filter(|e| FENCING_CODES.contains(&e.code))
        .map(|e| e.name());
    let zombie_stopped = all_refused && fenced_by.is_some();
    for writer in [owner, successor] {
        writer.producer.close().await;
    }
    let balances = balances(cluster, &topic).await?;
    Ok(ZombieRun {
        fencing,
        writes,
        balances,
        refused_with: fenced_by,
        zombie_stopped,
    })
}

/// One writer's turn: its writes, in one transaction when the writers share a transactional id.
struct Writer {
    producer: Producer,
    id: ProducerIdAndEpoch,
    name: &'static str,
    transactional: bool,
}

impl Writer {
    async fn start(
        cluster: &Cluster,
        transactional_id: &Option<String>,
        name: &'static str,
    ) -> Result<Self, LabError> {
        let config = ProducerConfig {
            transactional_id: transactional_id.clone(),
            ..producer_config(true, None)
        };
        let what = format!("starting writer {name}");
        let (producer, id) = start_idempotent(cluster, config, &what).await?;
        Ok(Writer {
            producer,
            id,
            name,
            transactional: transactional_id.is_some(),
        })
    }

    async fn begin(&self) -> Result<(), LabError> {
        self.transaction("beginning", self.producer.begin_transaction())
            .await
    }

    async fn commit(&self) -> Result<(), LabError> {
        self.transaction("committing", self.producer.commit_transaction())
            .await
    }

    /// `step` of the writer's transaction, when it has one.
    async fn transaction(
        &self,
        step: &str,
        call: impl std::future::Future<Output = client::Result<()>>,
    ) -> Result<(), LabError> {
        if !self.transactional {
            return Ok(());
        }
        let what = format!("{step} writer {}'s transaction", self.name);
        call.await.map_err(|e| broker_error(&what, &e))
    }

    async fn write(&self, topic: &str, account: &str, balance: i64) -> Write {
        let text = value(balance, self.name);
        let record = ProducerRecord::new(topic).key(account).value(&text);
        let result = match self.producer.send(record).await {
            Ok(delivery) => delivery
                .wait()
                .await
                .map(|meta| (meta.partition, meta.offset))
                .map_err(|e| Refusal {
                    by_broker: true,
                    error: name(&e),
                }),
            Err(e) => Err(Refusal {
                by_broker: false,
                error: name(&e),
            }),
        };
        Write {
            writer: self.name,
            producer: self.id,
            account: account.to_string(),
            result,
        }
    }
}

/// An error as the narration names it: Kafka's name for its code when a broker gave one.
fn name(e: &Error) -> String {
    let cause = e.fatal_cause().unwrap_or(e);
    cause
        .server()
        .map_or_else(|| cause.to_string(), |s| s.name())
}

/// The last balance of each account: each key lives in one partition, so offset order is the
/// order of its writes.
async fn balances(cluster: &Cluster, topic: &str) -> Result<BTreeMap<String, i64>, LabError> {
    let mut last = BTreeMap::new();
    for records in cluster.read_topic(topic).await?.values() {
        for record in records {
            let key = record.key.as_deref().map(String::from_utf8_lossy);
            let value = record.value.as_deref().map(String::from_utf8_lossy);
            if let (Some(key), Some(balance)) = (key, value.as_deref().and_then(balance_of)) {
                last.insert(key.into_owned(), balance);
            }
        }
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balances_round_trip_through_their_text() {
        assert_eq!(balance_of(&value(150, "B")), Some(150));
        assert_eq!(balance_of(&value(-3, "A")), Some(-3));
        assert_eq!(balance_of("nonsense"), None);
        assert_eq!(account(0), "acct-01");
    }
}
