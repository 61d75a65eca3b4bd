//! A group's committed offsets, per topic and partition.
//!
//! Kept in a sorted map so that "every committed partition" (OffsetFetch with null topics, the lag
//! endpoint) comes out in a stable order.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

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

/// When an offset was committed, and until when its commit asked to keep it (OffsetCommit
/// v2-4's `retention_time_ms`; Kafka's `expireTimestampMs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitTime {
    pub at: Instant,
    pub expires_at: Option<Instant>,
}

impl CommitTime {
    pub fn now() -> Self {
        Self {
            at: Instant::now(),
            expires_at: None,
        }
    }
}

/// Where an offset's retention period starts (Kafka's `OffsetExpirationConditionImpl`).
#[derive(Debug, Clone, Copy)]
pub enum RetentionStart {
    /// At its commit (simple groups, and unsubscribed topics of a Stable consumer group).
    Commit,
    /// When the group became Empty.
    Since(Instant),
}

#[derive(Debug, Clone)]
struct Stored {
    committed: CommittedOffset,
    time: CommitTime,
}

#[derive(Debug, Default)]
pub struct Offsets {
    by_topic: BTreeMap<String, BTreeMap<i32, Stored>>,
}

impl Offsets {
    pub fn commit(
        &mut self,
        topic: &str,
        partition: i32,
        committed: CommittedOffset,
        time: CommitTime,
    ) {
        let committed = Stored { committed, time };
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
        Some(&self.by_topic.get(topic)?.get(&partition)?.committed)
    }

    /// Every committed partition, by topic then partition.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, &CommittedOffset)> {
        self.by_topic.iter().flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |(&partition, stored)| (topic.as_str(), partition, &stored.committed))
        })
    }

    /// The partitions, of topics `may_expire` accepts, whose offsets have expired at `now`
    /// (Kafka's `OffsetExpirationConditionImpl.isOffsetExpired`): past the expiry their commit
    /// asked for, else `retention` after `start`.
    pub fn expired(
        &self,
        now: Instant,
        retention: Duration,
        start: RetentionStart,
        may_expire: impl Fn(&str) -> bool,
    ) -> Vec<(String, i32)> {
        let is_expired = |time: &CommitTime| match time.expires_at {
            Some(expires_at) => now >= expires_at,
            None => {
                let from = match start {
                    RetentionStart::Commit => time.at,
                    RetentionStart::Since(since) => since,
                };
                now.saturating_duration_since(from) >= retention
            }
        };
        self.by_topic
            .iter()
            .filter(|(topic, _)| may_expire(topic))
            .flat_map(|(topic, partitions)| {
                partitions
                    .iter()
                    .filter(|(_, stored)| is_expired(&stored.time))
                    .map(move |(&partition, _)| (topic.clone(), partition))
            })
            .collect()
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
        let now = CommitTime::now();
        offsets.commit("b", 1, at(5), now);
        offsets.commit("a", 2, at(7), now);
        offsets.commit("a", 0, at(1), now);
        offsets.commit("b", 1, at(9), now);
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

    #[tokio::test(start_paused = true)]
    async fn offsets_expire_by_their_own_expiry_else_by_retention_from_the_start_given() {
        let mut offsets = Offsets::default();
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let kept = |expires_at| CommitTime {
            at: start,
            expires_at,
        };
        offsets.commit("a", 0, at(1), kept(None));
        offsets.commit("a", 1, at(1), kept(Some(start + second)));
        offsets.commit("b", 0, at(1), kept(None));
        let hour = Duration::from_secs(3600);
        let all = |_: &str| true;
        assert!(offsets
            .expired(start, hour, RetentionStart::Commit, all)
            .is_empty());
        let later = start + second;
        assert_eq!(
            offsets.expired(later, hour, RetentionStart::Commit, all),
            vec![("a".to_string(), 1)]
        );
        let much_later = start + hour;
        assert_eq!(
            offsets.expired(much_later, hour, RetentionStart::Commit, |t| t == "b"),
            vec![("b".to_string(), 0)]
        );
        // From the time the group became Empty, not from the commits.
        let emptied = RetentionStart::Since(start + hour);
        assert_eq!(
            offsets.expired(much_later, hour, emptied, all),
            vec![("a".to_string(), 1)]
        );
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
