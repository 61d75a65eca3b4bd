//! The payments the billing service applies: drawn from the seed, keyed by account (so one
//! account's payments stay in order in one partition), sent to `payments` by our producer.

use std::collections::BTreeMap;

use client::{Client, Producer, ProducerRecord};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::lab::target::{self, broker_error};
use crate::lab::LabError;

/// One charge: the command the consumer turns into a ledger effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// The idempotency key source 003's `processed_commands` table stores with the account.
    pub payment_id: String,
    /// The record key, hence the partition.
    pub account: String,
    pub amount_cents: i64,
}

impl Payment {
    /// The record value: the payment as JSON.
    pub fn encode(&self) -> Vec<u8> {
        // A struct of strings and an integer always serialises.
        serde_json::to_vec(self).expect("a payment serialises")
    }

    /// A record back into a payment; the key must be the account it names.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Payment, String> {
        let value = value.ok_or("a record without a value is not a payment")?;
        let payment: Payment =
            serde_json::from_slice(value).map_err(|e| format!("not a payment: {e}"))?;
        if key != Some(payment.account.as_bytes()) {
            return Err(format!(
                "payment {} is keyed {:?}, not by its account {}",
                payment.payment_id,
                key.map(String::from_utf8_lossy),
                payment.account
            ));
        }
        Ok(payment)
    }
}

/// `n` payments over `accounts` accounts, numbered in order, amounts between 1 and 500 euros.
pub fn generate(n: usize, accounts: u32, rng: &mut impl Rng) -> Vec<Payment> {
    (1..=n)
        .map(|i| Payment {
            payment_id: format!("pay-{i:06}"),
            account: format!("acct-{:04}", rng.gen_range(1..=accounts.max(1))),
            amount_cents: rng.gen_range(100..=50_000),
        })
        .collect()
}

/// Sends every payment to `topic` (acks=all) and returns the log end offset of each partition
/// written: what the group must have committed when everything has been applied.
pub async fn produce(
    client: &Client,
    topic: &str,
    payments: &[Payment],
) -> Result<BTreeMap<i32, i64>, LabError> {
    let what = format!("producing the payments to {topic}");
    let producer = Producer::new(client.clone(), target::producer_config())
        .map_err(|e| broker_error(&what, &e))?;
    let mut deliveries = Vec::with_capacity(payments.len());
    for payment in payments {
        let value = payment.encode();
        let record = ProducerRecord::new(topic)
            .key(&payment.account)
            .value(&value);
        deliveries.push(
            producer
                .send(record)
                .await
                .map_err(|e| broker_error(&what, &e))?,
        );
    }
    producer.flush().await;
    let mut ends: BTreeMap<i32, i64> = BTreeMap::new();
    for delivery in deliveries {
        let sent = delivery.wait().await.map_err(|e| broker_error(&what, &e))?;
        let end = ends.entry(sent.partition).or_default();
        *end = (*end).max(sent.offset + 1);
    }
    producer.close().await;
    Ok(ends)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn payments_round_trip_and_refuse_what_is_not_one() {
        let payments = generate(3, 10, &mut ChaCha8Rng::seed_from_u64(1));
        assert_eq!(payments[2].payment_id, "pay-000003");
        let p = &payments[0];
        let value = p.encode();
        assert_eq!(
            Payment::decode(Some(p.account.as_bytes()), Some(&value)).as_ref(),
            Ok(p)
        );
        assert!(Payment::decode(Some(b"acct-9999"), Some(&value)).is_err());
        assert!(Payment::decode(Some(p.account.as_bytes()), None).is_err());
        assert!(Payment::decode(None, Some(b"{\"x\":1}")).is_err());
        assert!(payments
            .iter()
            .all(|p| (100..=50_000).contains(&p.amount_cents)));
    }
}
