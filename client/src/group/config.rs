//! What a group member is configured with, under Kafka's names and with Kafka's defaults.

use std::sync::Arc;
use std::time::Duration;

use super::assignor::{self, Assignor};
use crate::consumer::ConsumerConfig;
use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.id`.
    pub group_id: String,
    /// `group.instance.id`: set for a static member (KIP-345), which keeps its partitions across
    /// a restart within the session timeout and never sends LeaveGroup on close.
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms`: without a heartbeat for this long the coordinator drops the member.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`: a member that does not poll for this long leaves the group. It is
    /// also the rebalance timeout, the time members get to rejoin.
    pub max_poll_interval: Duration,
    /// `max.poll.records`.
    pub max_poll_records: usize,
    /// `enable.auto.commit`.
    pub auto_commit: bool,
    /// `auto.commit.interval.ms`.
    pub auto_commit_interval: Duration,
    /// `partition.assignment.strategy`, in order of preference.
    pub assignors: Vec<Arc<dyn Assignor>>,
    /// `allow.auto.create.topics`: subscribing asks the broker to create missing topics. Off by
    /// default, as in librdkafka (Java's consumer defaults to on): a consumer whose topic was
    /// just deleted would otherwise bring it back, with the broker's default partition count.
    pub allow_auto_create_topics: bool,
    /// Fetch sizes, waits and `auto.offset.reset`, for partitions with no committed offset.
    pub consumer: ConsumerConfig,
}

impl GroupConfig {
    /// Kafka's consumer defaults (Java 3.x and later): session 45 s, heartbeats every 3 s,
    /// 5 minutes between polls, 500 records a poll, auto-commit every 5 s, and the assignors
    /// `range` then `cooperative-sticky`.
    pub fn new(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            group_instance_id: None,
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            max_poll_interval: Duration::from_secs(300),
            max_poll_records: 500,
            auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            assignors: vec![
                Arc::new(assignor::range::RangeAssignor),
                Arc::new(assignor::sticky::CooperativeStickyAssignor),
            ],
            allow_auto_create_topics: false,
            consumer: ConsumerConfig::default(),
        }
    }

    /// Replaces the assignors with the built-in ones named (Kafka's names).
    pub fn assignors_named(mut self, names: &[&str]) -> Result<Self> {
        let mut assignors = Vec::new();
        for name in names {
            assignors.push(assignor::by_name(name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown assignor '{name}': use one of {}",
                    assignor::BUILT_IN.join(", ")
                ))
            })?);
        }
        self.assignors = assignors;
        Ok(self)
    }

    /// Refuses what a broker would refuse later, or what cannot work at all.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        if self.group_id.is_empty() {
            return bad("a group member needs a non-empty group id".into());
        }
        if self.group_instance_id.as_deref() == Some("") {
            return bad("group.instance.id must not be empty".into());
        }
        if self.assignors.is_empty() {
            return bad("at least one partition assignor is needed".into());
        }
        if self.heartbeat_interval >= self.session_timeout {
            return bad(format!(
                "heartbeat.interval.ms ({:?}) must be lower than session.timeout.ms ({:?})",
                self.heartbeat_interval, self.session_timeout
            ));
        }
        if self.max_poll_records == 0 {
            return bad("max.poll.records must be at least 1".into());
        }
        // The wire carries milliseconds as i32, which also keeps timer arithmetic far from
        // overflowing.
        let limit = Duration::from_millis(i32::MAX as u64);
        for (name, d) in [
            ("session.timeout.ms", self.session_timeout),
            ("heartbeat.interval.ms", self.heartbeat_interval),
            ("max.poll.interval.ms", self.max_poll_interval),
            ("auto.commit.interval.ms", self.auto_commit_interval),
        ] {
            if d < Duration::from_millis(1) || d > limit {
                return bad(format!("{name} must be between 1 ms and {limit:?}"));
            }
        }
        Ok(())
    }
}

/// Milliseconds as the wire carries them, saturating.
pub(crate) fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas_and_valid() {
        let c = GroupConfig::new("g");
        c.validate().unwrap();
        let names: Vec<&str> = c.assignors.iter().map(|a| a.name()).collect();
        assert_eq!(names, ["range", "cooperative-sticky"]);
        assert_eq!(millis(c.max_poll_interval), 300_000);
    }

    #[test]
    fn nonsense_is_refused() {
        assert!(GroupConfig::new("").validate().is_err());
        let mut c = GroupConfig::new("g");
        c.heartbeat_interval = c.session_timeout;
        assert!(c.validate().is_err());
        assert!(GroupConfig::new("g").assignors_named(&["sticky"]).is_err());
        let mut c = GroupConfig::new("g");
        c.max_poll_interval = Duration::MAX;
        assert!(c.validate().is_err());
        let c = GroupConfig::new("g")
            .assignors_named(&["roundrobin"])
            .unwrap();
        assert_eq!(c.assignors[0].name(), "roundrobin");
    }
}
