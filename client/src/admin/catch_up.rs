//! "Has my consumer caught up?": a group is within `max_lag` when it has partitions (committed
//! or assigned, and every partition of the topics named) and each has at most `max_lag` records
//! not consumed. A partition the group committed nothing on counts all its records as not
//! consumed, so a consumer that has not started yet is never taken for one that is done.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let broker = broker::Broker::start(broker::BrokerConfig {
//! #     listen: "127.0.0.1:0".parse()?,
//! #     ..Default::default()
//! # })
//! # .await?;
//! use std::collections::BTreeMap;
//! use std::time::Duration;
//! use client::{Admin, Client, ClientConfig, NewTopic, Producer, ProducerConfig, ProducerRecord};
//! use client::TopicPartition;
//!
//! let kafka = Client::connect(ClientConfig::new(&broker.addr().to_string())).await?;
//! let admin = Admin::new(kafka.clone());
//! admin.create_topic(&NewTopic::new("orders", 2)).await?;
//! let producer = Producer::new(kafka, ProducerConfig::default())?;
//! for p in [0, 1] {
//!     producer.send_and_wait(ProducerRecord::new("orders").partition(p).value("v")).await?;
//! }
//! let topics = ["orders".to_string()];
//! // Nothing committed: both records count as not consumed.
//! assert!(!admin.catch_up("billing", 0, &topics).await?.caught_up);
//! let done = BTreeMap::from([(TopicPartition::new("orders", 0), 1), (TopicPartition::new("orders", 1), 1)]);
//! admin.commit_offsets("billing", &done).await?;
//! let waited = admin.wait_for_lag("billing", 0, &topics, Duration::from_millis(100));
//! let lag = tokio::time::timeout(Duration::from_secs(10), waited).await??;
//! assert_eq!(lag.total(), 0);
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::lag::{GroupLag, PartitionLag};
use super::Admin;
use crate::consumer::TopicPartition;
use crate::error::Result;
use crate::offsets::{list_offsets, OffsetSpec};

/// A look at whether a group has caught up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatchUp {
    /// The group's lag, with a row for every partition of the topics named.
    pub lag: GroupLag,
    /// Records not consumed per row, in the rows' order: the lag, or all the partition's
    /// records where nothing is committed; `None` when the log could not be read.
    pub unread: Vec<Option<i64>>,
    pub caught_up: bool,
}

impl Admin {
    /// Whether `group` has at most `max_lag` records not consumed on each of its partitions and
    /// of `topics`'.
    pub async fn catch_up(&self, group: &str, max_lag: i64, topics: &[String]) -> Result<CatchUp> {
        let mut lag = self.group_lag(group).await?;
        let known: BTreeSet<TopicPartition> = lag
            .partitions
            .iter()
            .map(|p| TopicPartition::new(&p.topic, p.partition))
            .collect();
        for topic in topics {
            let info = self.client().topic(topic, false).await?;
            let missing: Vec<(i32, OffsetSpec)> = info
                .partitions
                .iter()
                .map(|p| p.partition)
                .filter(|&p| !known.contains(&TopicPartition::new(topic, p)))
                .map(|p| (p, OffsetSpec::Latest))
                .collect();
            if missing.is_empty() {
                continue;
            }
            for end in list_offsets(self.client(), topic, &missing).await? {
                lag.partitions.push(PartitionLag {
                    topic: topic.clone(),
                    partition: end.partition,
                    current_offset: None,
                    log_end_offset: Some(end.offset),
                    lag: None,
                    owner: None,
                    oldest_unconsumed: None,
                });
            }
        }
        let starts = self.uncommitted_starts(&lag).await?;
        let unread: Vec<Option<i64>> = lag
            .partitions
            .iter()
            .map(|p| match (p.lag, p.log_end_offset) {
                (Some(lag), _) => Some(lag),
                (None, Some(end)) => {
                    let start = starts.get(&TopicPartition::new(&p.topic, p.partition))?;
                    Some(end.saturating_sub(*start))
                }
                (None, None) => None,
            })
            .collect();
        let caught_up =
            !unread.is_empty() && unread.iter().all(|u| u.is_some_and(|u| u <= max_lag));
        Ok(CatchUp {
            lag,
            unread,
            caught_up,
        })
    }

    /// Looks every `every` until the group has caught up ([`Admin::catch_up`]), then returns its
    /// lag. It never gives up by itself: bound it with a timeout.
    pub async fn wait_for_lag(
        &self,
        group: &str,
        max_lag: i64,
        topics: &[String],
        every: Duration,
    ) -> Result<GroupLag> {
        loop {
            let look = self.catch_up(group, max_lag, topics).await?;
            if look.caught_up {
                return Ok(look.lag);
            }
            tokio::time::sleep(every).await;
        }
    }

    /// The log start of every row the group committed nothing on.
    async fn uncommitted_starts(&self, lag: &GroupLag) -> Result<BTreeMap<TopicPartition, i64>> {
        let mut by_topic: BTreeMap<&str, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
        for p in lag.partitions.iter().filter(|p| p.current_offset.is_none()) {
            by_topic
                .entry(&p.topic)
                .or_default()
                .push((p.partition, OffsetSpec::Earliest));
        }
        let mut out = BTreeMap::new();
        for (topic, asks) in by_topic {
            for start in list_offsets(self.client(), topic, &asks).await? {
                out.insert(TopicPartition::new(topic, start.partition), start.offset);
            }
        }
        Ok(out)
    }
}
