//! The billing service's database, in process: balances per account and an audit row per
//! effect, sharded by account with Kafka's partitioner, so a shard holds exactly the accounts of
//! one partition of `payments`. A transaction is one shard under its lock.
//!
//! Three designs of source 003, section 10 receive the same deliveries ([`Stores`]):
//! - no dedup: every delivery is an effect, so a redelivery charges twice;
//! - dedup in the same transaction as the effect, keyed by (account, payment): source 003's
//!   `processed_commands` row, in the account's own shard, so recording it and applying the
//!   charge are one local transaction and a redelivery finds the row;
//! - dedup in a separate store with a TTL (Redis' `SET key NX EX ttl`) in front of a ledger
//!   without one: a key that expired before the replay lets the duplicate through.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use protocol::partitioner::partition_for_key;
use serde::Serialize;
use tokio::time::Instant;

use super::payments::Payment;

/// Who applied a delivery: a member, in a generation of the group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Applier {
    pub member: String,
    pub generation: i32,
}

impl Applier {
    pub fn new(member: &str, generation: i32) -> Applier {
        Applier {
            member: member.to_string(),
            generation,
        }
    }
}

/// One record as a member hands it to the stores.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub payment: &'a Payment,
    pub partition: i32,
    pub offset: i64,
    pub by: &'a Applier,
    /// Milliseconds since the lab started, for reports.
    pub at_ms: u64,
    /// For the TTL store.
    pub at: Instant,
}

/// An audit row: one delivery the ledger turned into an effect (or, with dedup, refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// Order of application across the whole ledger.
    pub seq: u64,
    pub payment_id: String,
    pub account: String,
    pub amount_cents: i64,
    pub partition: i32,
    pub offset: i64,
    pub by: Applier,
    pub at_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Effect,
    /// The dedup row was there: the charge was not applied again.
    Suppressed,
}

#[derive(Debug, Default)]
struct Shard {
    balances: BTreeMap<String, i64>,
    /// `processed_commands (account_id, command_id)`, only with dedup in the transaction.
    processed: BTreeSet<(String, String)>,
    effects: Vec<Effect>,
    suppressed: Vec<Effect>,
}

#[derive(Debug)]
pub struct Ledger {
    dedup_in_transaction: bool,
    shards: Vec<Mutex<Shard>>,
    seq: AtomicU64,
}

impl Ledger {
    /// A ledger with one shard per partition of the topic.
    pub fn new(partitions: i32, dedup_in_transaction: bool) -> Ledger {
        Ledger {
            dedup_in_transaction,
            shards: (0..partitions.max(1)).map(|_| Mutex::default()).collect(),
            seq: AtomicU64::new(0),
        }
    }

    /// One transaction in the account's shard: with dedup, insert the (account, payment) row and
    /// apply the charge only if the row is new; without, apply the charge.
    pub fn apply(&self, d: &Delivery<'_>) -> Applied {
        let account = &d.payment.account;
        let index = partition_for_key(account.as_bytes(), self.shards.len() as i32) as usize;
        let mut shard = self.shards[index].lock();
        let effect = Effect {
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            payment_id: d.payment.payment_id.clone(),
            account: account.clone(),
            amount_cents: d.payment.amount_cents,
            partition: d.partition,
            offset: d.offset,
            by: d.by.clone(),
            at_ms: d.at_ms,
        };
        if self.dedup_in_transaction
            && !shard
                .processed
                .insert((account.clone(), d.payment.payment_id.clone()))
        {
            shard.suppressed.push(effect);
            return Applied::Suppressed;
        }
        *shard.balances.entry(account.clone()).or_default() += d.payment.amount_cents;
        shard.effects.push(effect);
        Applied::Effect
    }

    /// Every effect, in the order applied.
    pub fn effects(&self) -> Vec<Effect> {
        self.collect(|s| &s.effects)
    }

    /// Every delivery the dedup row refused, in the order they came.
    pub fn suppressed(&self) -> Vec<Effect> {
        self.collect(|s| &s.suppressed)
    }

    /// The sum of every balance.
    pub fn total_cents(&self) -> i64 {
        self.shards
            .iter()
            .map(|s| s.lock().balances.values().sum::<i64>())
            .sum()
    }

    fn collect(&self, rows: impl Fn(&Shard) -> &Vec<Effect>) -> Vec<Effect> {
        let mut all: Vec<Effect> = self
            .shards
            .iter()
            .flat_map(|s| rows(&s.lock()).clone())
            .collect();
        all.sort_by_key(|e| e.seq);
        all
    }
}

/// A dedup store apart from the ledger: keys that expire.
#[derive(Debug)]
pub struct TtlCache {
    ttl: Duration,
    expires: Mutex<HashMap<String, Instant>>,
    refused: AtomicU64,
}

impl TtlCache {
    pub fn new(ttl: Duration) -> TtlCache {
        TtlCache {
            ttl,
            expires: Mutex::default(),
            refused: AtomicU64::new(0),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// `SET key NX EX ttl`: true if the key was absent or expired (and is now set until
    /// `now + ttl`), false if it is still there.
    pub fn set_nx(&self, key: &str, now: Instant) -> bool {
        let mut expires = self.expires.lock();
        match expires.get(key) {
            Some(&until) if now < until => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                false
            }
            _ => {
                expires.insert(key.to_string(), now + self.ttl);
                true
            }
        }
    }

    /// Deliveries the cache stopped.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// The three designs, fed the same deliveries.
#[derive(Debug)]
pub struct Stores {
    pub plain: Ledger,
    pub colocated: Ledger,
    pub cache: TtlCache,
    /// The ledger behind the cache, without dedup of its own.
    pub behind_cache: Ledger,
}

impl Stores {
    pub fn new(partitions: i32, ttl: Duration) -> Stores {
        Stores {
            plain: Ledger::new(partitions, false),
            colocated: Ledger::new(partitions, true),
            cache: TtlCache::new(ttl),
            behind_cache: Ledger::new(partitions, false),
        }
    }

    pub fn apply(&self, d: &Delivery<'_>) {
        self.plain.apply(d);
        self.colocated.apply(d);
        // Two steps, two stores: nothing makes the key and the effect atomic.
        if self.cache.set_nx(&d.payment.payment_id, d.at) {
            self.behind_cache.apply(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payment(id: &str, account: &str, cents: i64) -> Payment {
        Payment {
            payment_id: id.into(),
            account: account.into(),
            amount_cents: cents,
        }
    }

    fn deliver<'a>(
        p: &'a Payment,
        offset: i64,
        by: &'a Applier,
        at: Instant,
        at_ms: u64,
    ) -> Delivery<'a> {
        Delivery {
            payment: p,
            partition: partition_for_key(p.account.as_bytes(), 12),
            offset,
            by,
            at_ms,
            at,
        }
    }

    #[test]
    fn without_dedup_a_redelivery_charges_twice_and_with_it_once() {
        let (a, b) = (Applier::new("billing-3", 4), Applier::new("billing-5", 5));
        let p = payment("pay-1", "acct-0042", 1999);
        let q = payment("pay-2", "acct-0042", 1);
        let now = Instant::now();
        for dedup in [false, true] {
            let ledger = Ledger::new(12, dedup);
            assert_eq!(ledger.apply(&deliver(&p, 7, &a, now, 0)), Applied::Effect);
            assert_eq!(ledger.apply(&deliver(&q, 8, &a, now, 0)), Applied::Effect);
            let again = ledger.apply(&deliver(&p, 7, &b, now, 30_000));
            let effects = ledger.effects();
            if dedup {
                assert_eq!(again, Applied::Suppressed);
                assert_eq!(ledger.total_cents(), 2000);
                assert_eq!(effects.len(), 2);
                assert_eq!(ledger.suppressed()[0].by, b);
            } else {
                assert_eq!(again, Applied::Effect);
                assert_eq!(ledger.total_cents(), 3999);
                let order: Vec<(&str, &Applier)> = effects
                    .iter()
                    .map(|e| (e.payment_id.as_str(), &e.by))
                    .collect();
                assert_eq!(order, [("pay-1", &a), ("pay-2", &a), ("pay-1", &b)]);
                assert!(ledger.suppressed().is_empty());
            }
        }
    }

    #[test]
    fn the_dedup_row_is_keyed_by_account_and_payment() {
        let a = Applier::new("m", 1);
        let ledger = Ledger::new(12, true);
        let now = Instant::now();
        let one = payment("pay-1", "acct-0001", 5);
        let other_account = payment("pay-1", "acct-0002", 5);
        assert_eq!(ledger.apply(&deliver(&one, 0, &a, now, 0)), Applied::Effect);
        assert_eq!(
            ledger.apply(&deliver(&other_account, 0, &a, now, 0)),
            Applied::Effect
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_ttl_shorter_than_the_replay_lets_the_duplicate_through() {
        let cache = TtlCache::new(Duration::from_secs(10));
        let start = Instant::now();
        assert!(cache.set_nx("pay-1", start));
        assert!(!cache.set_nx("pay-1", start + Duration::from_secs(9)));
        assert!(cache.set_nx("pay-1", start + Duration::from_secs(10)));
        assert_eq!(cache.refused(), 1);

        let stores = Stores::new(12, Duration::from_secs(10));
        let (a, b) = (Applier::new("billing-3", 4), Applier::new("billing-5", 5));
        let p = payment("pay-9", "acct-0009", 100);
        stores.apply(&deliver(&p, 3, &a, start, 0));
        // A quick redelivery is caught by the cache; the replay 31 s later is not.
        stores.apply(&deliver(&p, 3, &b, start + Duration::from_secs(2), 2_000));
        stores.apply(&deliver(&p, 3, &b, start + Duration::from_secs(31), 31_000));
        assert_eq!(stores.plain.effects().len(), 3);
        assert_eq!(stores.colocated.effects().len(), 1);
        assert_eq!(stores.colocated.suppressed().len(), 2);
        assert_eq!(stores.behind_cache.effects().len(), 2);
        assert_eq!(stores.cache.refused(), 1);
    }
}
