//! Which partition a record goes to.
//!
//! - An explicit partition is used as given.
//! - A key goes to `(murmur2(key) & 0x7fffffff) % partitions`, bit for bit Kafka's Java default,
//!   so our producer, Java, kafka-python, kafkajs and `kcat -X partitioner=murmur2_random` agree.
//! - Records without a key are **sticky** (KIP-480): all go to one randomly chosen partition
//!   until the batch there is closed (full, or sent after `linger`), then the next null-key record
//!   picks another partition at random. Batches fill up instead of one record being sent per
//!   partition, and over many batches the load evens out. Round-robin would spread single
//!   records thinly, which is what KIP-480 replaced.

use protocol::partitioner::partition_for_key;
use rand::Rng;

use super::ProducerRecord;
use crate::error::{Error, Result};

/// Where a record is headed, before the sticky choice (which needs the accumulator's state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Partition(i32),
    Sticky { partitions: i32 },
}

/// Applies the rules above for a topic with `partitions` partitions.
pub fn target(
    topic: &str,
    explicit: Option<i32>,
    key: Option<&[u8]>,
    partitions: i32,
) -> Result<Target> {
    if partitions <= 0 {
        return Err(Error::UnknownTopic {
            topic: topic.to_string(),
        });
    }
    match (explicit, key) {
        (Some(p), _) if (0..partitions).contains(&p) => Ok(Target::Partition(p)),
        (Some(p), _) => Err(Error::UnknownPartition {
            topic: topic.to_string(),
            partition: p,
            count: partitions,
        }),
        (None, Some(key)) => Ok(Target::Partition(partition_for_key(key, partitions))),
        (None, None) => Ok(Target::Sticky { partitions }),
    }
}

/// [`target`] for a record about to be sent.
pub fn target_of(record: &ProducerRecord<'_>, partitions: i32) -> Result<Target> {
    target(record.topic, record.partition, record.key, partitions)
}

/// The sticky choice for one topic.
#[derive(Debug, Default)]
pub struct Sticky {
    current: Option<i32>,
    previous: Option<i32>,
}

impl Sticky {
    /// The partition for the next null-key record.
    pub fn partition(&mut self, partitions: i32, rng: &mut impl Rng) -> i32 {
        if let Some(p) = self.current.filter(|p| *p < partitions) {
            return p;
        }
        let p = match self.previous {
            // Move on to a different partition when there is one.
            Some(prev) if partitions > 1 && prev < partitions => {
                let p = rng.gen_range(0..partitions - 1);
                if p >= prev {
                    p + 1
                } else {
                    p
                }
            }
            _ => rng.gen_range(0..partitions),
        };
        self.current = Some(p);
        p
    }

    /// A batch on `partition` was closed; if it was the sticky one, the next record moves on.
    pub fn batch_closed(&mut self, partition: i32) {
        if self.current == Some(partition) {
            self.previous = self.current.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn keys_follow_javas_partitioner() {
        assert_eq!(
            target("t", None, Some(b"kafka"), 3).unwrap(),
            Target::Partition(1)
        );
        assert_eq!(
            target("t", None, Some(b"key1"), 3).unwrap(),
            Target::Partition(2)
        );
        assert_eq!(
            target("t", None, Some(b"order-8842"), 12).unwrap(),
            Target::Partition(4)
        );
        assert_eq!(
            target("t", None, Some(b"order-8842"), 24).unwrap(),
            Target::Partition(16)
        );
    }

    #[test]
    fn explicit_partitions_win_and_are_checked() {
        assert_eq!(
            target("t", Some(2), Some(b"kafka"), 3).unwrap(),
            Target::Partition(2)
        );
        assert!(matches!(
            target("t", Some(3), None, 3),
            Err(Error::UnknownPartition { count: 3, .. })
        ));
        assert!(target("t", Some(-1), None, 3).is_err());
        assert_eq!(
            target("t", None, None, 5).unwrap(),
            Target::Sticky { partitions: 5 }
        );
        assert!(target("t", None, None, 0).is_err());
    }

    #[test]
    fn sticky_stays_until_its_batch_closes_then_moves() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut sticky = Sticky::default();
        let first = sticky.partition(4, &mut rng);
        for _ in 0..100 {
            assert_eq!(sticky.partition(4, &mut rng), first);
        }
        // Closing another partition's batch changes nothing.
        sticky.batch_closed((first + 1) % 4);
        assert_eq!(sticky.partition(4, &mut rng), first);
        let mut seen = std::collections::HashSet::new();
        let mut prev = first;
        for _ in 0..200 {
            sticky.batch_closed(prev);
            let next = sticky.partition(4, &mut rng);
            assert_ne!(next, prev, "a closed batch moves the sticky partition");
            seen.insert(next);
            prev = next;
        }
        assert_eq!(seen.len(), 4, "over many batches every partition is used");
    }

    #[test]
    fn sticky_survives_a_shrinking_view_and_single_partitions() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut sticky = Sticky::default();
        assert_eq!(sticky.partition(1, &mut rng), 0);
        sticky.batch_closed(0);
        assert_eq!(sticky.partition(1, &mut rng), 0);
        let mut sticky = Sticky {
            current: Some(9),
            previous: None,
        };
        assert!(sticky.partition(3, &mut rng) < 3);
    }
}
