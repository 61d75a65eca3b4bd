//! A consumer-group member as every lab runs one: it commits only what it has processed, so a
//! member that leaves has processed records no commit covers (the new owner processes them
//! again), and a partition nobody committed on is read from its start.

use std::time::Duration;

use client::{GroupConfig, OffsetReset};

/// The configuration of a member of `group`: Kafka's defaults, except that
/// - the lab commits what it processed (`enable.auto.commit=false`: committing what was merely
///   fetched would lose records on a rebalance);
/// - a partition nobody committed on starts at its beginning (`auto.offset.reset=earliest`:
///   with `latest`, Kafka's default, records written to a new partition before its consumer is
///   assigned would be skipped);
/// - heartbeats every `heartbeat`: members learn that the group is rebalancing from a
///   heartbeat's answer, and Kafka's 3 s would add up to 3 s to every rebalance of a lab;
/// - a fetch waits at most `max_wait` for data (`fetch.max.wait.ms`).
pub fn manual_commit(group: &str, heartbeat: Duration, max_wait: Duration) -> GroupConfig {
    let mut config = GroupConfig::new(group);
    config.auto_commit = false;
    config.heartbeat_interval = heartbeat;
    config.consumer.max_wait = max_wait;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_commits_the_heartbeat_and_the_fetch_wait_differ_from_kafka_s_defaults() {
        let config = manual_commit("g", Duration::from_millis(100), Duration::from_millis(20));
        let default = GroupConfig::new("g");
        assert!(!config.auto_commit && default.auto_commit);
        assert_eq!(config.heartbeat_interval, Duration::from_millis(100));
        assert_eq!(config.consumer.max_wait, Duration::from_millis(20));
        assert_eq!(config.consumer.auto_offset_reset, OffsetReset::Earliest);
        assert_eq!(config.session_timeout, default.session_timeout);
        assert_eq!(config.max_poll_records, default.max_poll_records);
        assert_eq!(config.consumer.max_bytes, default.consumer.max_bytes);
    }
}
