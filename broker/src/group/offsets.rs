//! A group's committed offsets, per topic and partition.
//!
//! Kept in a sorted map so that "every committed partition" (OffsetFetch with null topics, the lag
//! endpoint) comes out in a stable order.

use std::collections::BTreeMap;

/// Kafka's `offset.metadata.max.bytes`.
pub const OFFSET_METADATA_MAX_SIZE: usize = 4096;

/// What OffsetFetch returns for a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// -1 when the committer did not know it (OffsetCommit before v6).
    pub leader_epoch: i32,
    pub metadata: String,
}

#[derive(Debug, Default)]
pub struct Offsets {
    by_topic: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
}

impl Offsets {
    pub fn commit(&mut self, topic: &str, partition: i32, committed: CommittedOffset) {
        match self.by_topic.get_mut(topic) {
            Some(partitions) => {
                partitions.insert(partition, committed);
            }
            None => {
                self.by_topic
                    .insert(topic.to_string(), BTreeMap::from([(partition, committed)]));
            }
        }
    }

    /// Forgets one partition's offset (OffsetDelete); false when none was committed.
    pub fn remove(&mut self, topic: &str, partition: i32) -> bool {
        let Some(partitions) = self.by_topic.get_mut(topic) else {
            return false;
        };
        let removed = partitions.remove(&partition).is_some();
        if partitions.is_empty() {
            self.by_topic.remove(topic);
        }
        removed
    }

    /// The partitions of `topic` with an offset, in order.
    pub fn partitions_of(&self, topic: &str) -> Vec<i32> {
        self.by_topic
            .get(topic)
            .map_or_else(Vec::new, |partitions| partitions.keys().copied().collect())
    }

    /// Forgets every offset of `topic` (the topic was deleted).
    pub fn remove_topic(&mut self, topic: &str) {
        self.by_topic.remove(topic);
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.by_topic.get(topic)?.get(&partition)
    }

    /// Every committed partition, by topic then partition.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, &CommittedOffset)> {
        self.by_topic.iter().flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |(&partition, committed)| (topic.as_str(), partition, committed))
        })
    }

    pub fn is_empty(&self) -> bool {
        self.by_topic.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_topic.clear();
    }
}

/// Kafka compares the metadata's `String.length()`, which counts UTF-16 code units.
pub fn metadata_too_large(metadata: &str) -> bool {
    // Each UTF-16 unit takes at least one UTF-8 byte: short strings need no count.
    metadata.len() > OFFSET_METADATA_MAX_SIZE
        && metadata.encode_utf16().count() > OFFSET_METADATA_MAX_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
        }
    }

    #[test]
    fn later_commits_replace_earlier_ones_and_iterate_in_order() {
        let mut offsets = Offsets::default();
        offsets.commit("b", 1, at(5));
        offsets.commit("a", 2, at(7));
        offsets.commit("a", 0, at(1));
        offsets.commit("b", 1, at(9));
        let all: Vec<_> = offsets.iter().map(|(t, p, c)| (t, p, c.offset)).collect();
        assert_eq!(all, vec![("a", 0, 1), ("a", 2, 7), ("b", 1, 9)]);
        assert_eq!(offsets.get("a", 2), Some(&at(7)));
        assert_eq!(offsets.get("a", 1), None);
        assert!(offsets.remove("a", 2));
        assert!(!offsets.remove("a", 2));
        assert!(offsets.remove("a", 0));
        let left: Vec<_> = offsets.iter().map(|(t, p, _)| (t, p)).collect();
        assert_eq!(left, vec![("b", 1)]);
    }

    #[test]
    fn metadata_limit_counts_utf16_units_like_java() {
        assert!(!metadata_too_large(&"x".repeat(4096)));
        assert!(metadata_too_large(&"x".repeat(4097)));
        // 4096 characters of two UTF-8 bytes each are still 4096 UTF-16 units.
        assert!(!metadata_too_large(&"é".repeat(4096)));
        // Characters outside the BMP take two UTF-16 units.
        assert!(metadata_too_large(&"😀".repeat(2049)));
    }
}
