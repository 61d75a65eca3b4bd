//! Which committed offsets expire, as Kafka's `ClassicGroup.offsetExpirationCondition` and
//! `OffsetMetadataManager.cleanupExpiredOffsets` decide it: those of a group without members
//! `offsets.retention.minutes` after it became Empty, those of a simple group (one that only
//! commits) that long after their commit, and, in a Stable consumer group, those of topics no
//! member subscribes to that long after their commit. An offset committed with a retention time
//! (OffsetCommit v2-4) expires at its end instead, when one of those applies. The offsets of a
//! topic a member reads never expire.

use std::time::Duration;

use tokio::time::Instant;

use super::super::offsets::RetentionStart;
use super::{Group, GroupState};

impl Group {
    /// The partitions whose offsets have expired at `now`.
    pub fn expired_offsets(&self, now: Instant, retention: Duration) -> Vec<(String, i32)> {
        let start = match (&self.protocol_type, self.state) {
            (None, _) => RetentionStart::Commit,
            (Some(_), GroupState::Empty) => RetentionStart::Since(self.state_since),
            (Some(_), GroupState::Stable) if self.subscribed_topics.is_some() => {
                RetentionStart::Commit
            }
            _ => return Vec::new(),
        };
        self.offsets
            .expired(now, retention, start, |topic| !self.is_subscribed_to(topic))
    }
}
