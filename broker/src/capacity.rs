//! How many partitions the broker holds, and the topic changes that must stay within it.
//!
//! Every way a partition comes into being reserves here first: CreateTopics, CreatePartitions and
//! auto-creation (through [`crate::state::BrokerState`]) reserve their partitions before the
//! topic registry creates them, and give them
//! back when the creation fails or the topic is deleted. A partition costs a few hundred bytes
//! while empty (see the `partition_memory` test), so the limit is what keeps one 7 KB request
//! from asking for millions of them. Kafka has no broker-wide partition limit (KIP-578 proposed
//! one); its controller caps one request at 10,000 partitions, which `max_partitions_per_request`
//! mirrors with Kafka's messages.

use std::sync::atomic::{AtomicUsize, Ordering};

use kafka_protocol::ResponseError;

use crate::topic_error::TopicError;

/// Partitions held, against the most the broker may hold.
#[derive(Debug)]
pub struct PartitionBudget {
    held: AtomicUsize,
    max: usize,
}

/// Partitions reserved for a creation under way; given back when dropped unless kept.
#[must_use]
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a PartitionBudget,
    count: usize,
}

impl Reservation<'_> {
    /// The partitions exist now: they stay counted.
    pub fn keep(mut self) {
        self.count = 0;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.budget.release(self.count);
    }
}

impl PartitionBudget {
    /// A budget of `max` partitions of which `held` exist already (recovered from the data dir:
    /// those are served even above the limit, which only stops new ones).
    pub fn new(max: usize, held: usize) -> Self {
        Self {
            held: AtomicUsize::new(held),
            max,
        }
    }

    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Reserves `count` more partitions, or refuses with POLICY_VIOLATION.
    pub fn reserve(&self, count: usize) -> Result<Reservation<'_>, TopicError> {
        let mut held = self.held();
        loop {
            let after = held.saturating_add(count);
            if count > 0 && after > self.max {
                return Err(TopicError::new(
                    ResponseError::PolicyViolation,
                    format!(
                        "The broker would hold {after} partitions, above its limit of {} (--max-partitions).",
                        self.max
                    ),
                ));
            }
            match self
                .held
                .compare_exchange_weak(held, after, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Ok(Reservation {
                        budget: self,
                        count,
                    })
                }
                Err(now) => held = now,
            }
        }
    }

    pub(crate) fn release(&self, count: usize) {
        self.held.fetch_sub(count, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_given_back_unless_kept() {
        let budget = PartitionBudget::new(10, 4);
        let kept = budget.reserve(5).unwrap();
        assert_eq!(budget.held(), 9);
        assert_eq!(
            budget.reserve(2).unwrap_err().code,
            ResponseError::PolicyViolation
        );
        kept.keep();
        drop(budget.reserve(1).unwrap());
        assert_eq!(budget.held(), 9);
        // Nothing new above the limit, but asking for nothing always passes.
        let full = PartitionBudget::new(3, 5);
        assert!(full.reserve(1).is_err());
        full.reserve(0).unwrap().keep();
        assert_eq!(full.held(), 5);
    }
}
