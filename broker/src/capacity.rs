//! How many partitions the broker holds, and the topic changes that must stay within it.
//!
//! Every way a partition comes into being goes through here: CreateTopics, CreatePartitions and
//! auto-creation reserve their partitions before the topic registry creates them, and give them
//! back when the creation fails or the topic is deleted. A partition costs a few hundred bytes
//! while empty (see the `partition_memory` test), so the limit is what keeps one 7 KB request
//! from asking for millions of them. Kafka has no broker-wide partition limit (KIP-578 proposed
//! one); its controller caps one request at 10,000 partitions, which `max_partitions_per_request`
//! mirrors with Kafka's messages.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kafka_protocol::ResponseError;

use crate::state::BrokerState;
use crate::topics::{NewTopic, Topic, TopicError};

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

    fn release(&self, count: usize) {
        self.held.fetch_sub(count, Ordering::AcqRel);
    }
}

impl BrokerState {
    /// Creates a topic (or checks that it could be, with `validate_only`) within the budget.
    pub fn create_topic(
        &self,
        new: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let reservation = self
            .partitions
            .reserve(usize::try_from(new.partitions).unwrap_or(0))?;
        let topic = self.topics.create(new, validate_only)?;
        if !validate_only {
            reservation.keep();
        }
        Ok(topic)
    }

    /// The topic, auto-created with the default partition count if it does not exist yet.
    pub fn topic_or_create(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        if let Some(topic) = self.topics.get(name) {
            return Ok(topic);
        }
        let partitions = self.config.default_partitions;
        let reservation = self
            .partitions
            .reserve(usize::try_from(partitions).unwrap_or(0))?;
        let new = NewTopic {
            name: name.to_string(),
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        };
        match self.topics.create(new, false) {
            Ok(topic) => {
                reservation.keep();
                Ok(topic)
            }
            // Another request created it in between: its partitions are counted already.
            Err(e) if e.code == ResponseError::TopicAlreadyExists => {
                self.topics.get(name).ok_or_else(TopicError::unknown_topic)
            }
            Err(e) => Err(e),
        }
    }

    pub fn delete_topic(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        let topic = self.topics.delete(name)?;
        self.partitions
            .release(usize::try_from(topic.partition_count()).unwrap_or(0));
        Ok(topic)
    }

    /// Grows a topic to `count` partitions within the budget.
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let current = self.topics.get(name).map_or(0, |t| t.partition_count());
        let reservation = self
            .partitions
            .reserve(usize::try_from(count.saturating_sub(current)).unwrap_or(0))?;
        self.topics.add_partitions(name, count, validate_only)?;
        if !validate_only {
            reservation.keep();
        }
        Ok(())
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
