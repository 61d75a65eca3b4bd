//! "Has my consumer caught up?": a group is within `max_lag` when it has partitions and each has
//! at most `max_lag` records not consumed. Its partitions are every partition of every topic it
//! reads: those its members subscribe to, those it committed on, and those named. A partition the
//! group committed nothing on counts all its records as not consumed, so a consumer that has not
//! started yet, or has read one partition of twelve, is never taken for one that is done.
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
//! // Partition 0 done: partition 1 of the same topic still counts, named or not.
//! let first = BTreeMap::from([(TopicPartition::new("orders", 0), 1)]);
//! admin.commit_offsets("billing", &first).await?;
//! let look = admin.catch_up("billing", 0, &[]).await?;
//! assert_eq!((look.caught_up, look.lag.total()), (false, 1));
//! let done = BTreeMap::from([(TopicPartition::new("orders", 1), 1)]);
//! admin.commit_offsets("billing", &done).await?;
//! let waited = admin.wait_for_lag("billing", 0, &[], Duration::from_millis(100));
//! let lag = tokio::time::timeout(Duration::from_secs(10), waited).await??;
//! assert_eq!(lag.total(), 0);
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::lag::{GroupLag, PartitionLag};
use super::Admin;
use crate::consumer::TopicPartition;
use crate::error::{Error, Result};
use crate::offsets::{list_offsets, OffsetSpec};

/// A look at whether a group has caught up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatchUp {
    /// What the group has not consumed ([`Admin::group_unread`]).
    pub lag: GroupLag,
    pub caught_up: bool,
}

impl Admin {
    /// The group's lag over every partition of every topic it reads (members' subscriptions,
    /// committed offsets and assignments) and of `topics`, with a partition the group committed
    /// nothing on behind by its whole log: its `lag` is log end minus log start. Kafka's tool
    /// shows such a partition without lag ([`Admin::group_lag`]); a test asking whether a
    /// consumer is done must count it. A topic in `topics` that does not exist is an error; one
    /// the group committed on or subscribes to and that is gone keeps the rows it has.
    pub async fn group_unread(&self, group: &str, topics: &[String]) -> Result<GroupLag> {
        let mut lag = self.group_lag(group).await?;
        let mut read: BTreeSet<&str> = topics.iter().map(String::as_str).collect();
        read.extend(lag.partitions.iter().map(|p| p.topic.as_str()));
        for member in &lag.description.members {
            read.extend(member.subscription.iter().map(String::as_str));
        }
        let read: Vec<String> = read.into_iter().map(str::to_string).collect();
        let known: BTreeSet<TopicPartition> = lag
            .partitions
            .iter()
            .map(|p| TopicPartition::new(&p.topic, p.partition))
            .collect();
        for topic in &read {
            let info = match self.client().topic(topic, false).await {
                Ok(info) => info,
                Err(Error::UnknownTopic { .. }) if !topics.contains(topic) => continue,
                Err(e) => return Err(e),
            };
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
        for p in lag
            .partitions
            .iter_mut()
            .filter(|p| p.current_offset.is_none())
        {
            let start = starts.get(&TopicPartition::new(&p.topic, p.partition));
            p.lag = p
                .log_end_offset
                .zip(start)
                .map(|(end, start)| end.saturating_sub(*start));
        }
        Ok(lag)
    }

    /// Whether `group` has at most `max_lag` records not consumed on each partition of
    /// [`Admin::group_unread`]; a group with no partition at all has not caught up.
    pub async fn catch_up(&self, group: &str, max_lag: i64, topics: &[String]) -> Result<CatchUp> {
        let lag = self.group_unread(group, topics).await?;
        let caught_up = !lag.partitions.is_empty()
            && lag
                .partitions
                .iter()
                .all(|p| p.lag.is_some_and(|l| l <= max_lag));
        Ok(CatchUp { lag, caught_up })
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
