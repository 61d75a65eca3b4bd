//! Time lag, exact: for each partition with lag, the timestamp of the record at the group's
//! committed offset, read with one small fetch from there (kafka-lag-exporter estimates the same
//! figure from a history of offsets; the record says it).
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
//! use client::{Admin, Client, ClientConfig, NewTopic, Producer, ProducerConfig, ProducerRecord};
//! use client::TopicPartition;
//!
//! let kafka = Client::connect(ClientConfig::new(&broker.addr().to_string())).await?;
//! let admin = Admin::new(kafka.clone());
//! admin.create_topic(&NewTopic::new("orders", 1)).await?;
//! let producer = Producer::new(kafka, ProducerConfig::default())?;
//! for (i, stamp) in [1_000, 2_000, 3_000].into_iter().enumerate() {
//!     let value = format!("v{i}");
//!     producer.send_and_wait(ProducerRecord::new("orders").value(&value).timestamp(stamp)).await?;
//! }
//! // The group read the first record: the second, stamped 2 s, is the oldest waiting.
//! admin.commit_offsets("billing", &BTreeMap::from([(TopicPartition::new("orders", 0), 1)])).await?;
//! let lag = admin.group_time_lag("billing").await?;
//! let row = &lag.partitions[0];
//! assert_eq!((row.lag, row.oldest_unconsumed), (Some(2), Some(2_000)));
//! assert_eq!(row.time_lag_ms(62_000), Some(60_000));
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use super::lag::GroupLag;
use super::Admin;
use crate::consumer::{Consumer, ConsumerConfig, OffsetReset, SeekTo, TopicPartition};
use crate::error::Result;

/// Polls that may bring nothing new before the remaining partitions are left without a time
/// lag (their leaders answer, but not with records: a batch too large to hand out, say).
const IDLE_POLLS: u32 = 3;

impl Admin {
    /// [`Admin::group_lag`], with the oldest unconsumed record's timestamp of every partition
    /// that has lag.
    pub async fn group_time_lag(&self, group: &str) -> Result<GroupLag> {
        self.with_time_lag(self.group_lag(group).await?).await
    }

    /// `lag` with the oldest unconsumed record's timestamp of every partition that has lag: the
    /// record at the committed offset, or at the log start where nothing is committed
    /// ([`Admin::group_unread`] gives such partitions their whole log as lag).
    pub async fn with_time_lag(&self, mut lag: GroupLag) -> Result<GroupLag> {
        let wanted: Vec<(TopicPartition, i64)> = lag
            .partitions
            .iter()
            .filter(|p| p.lag.is_some_and(|l| l > 0))
            .map(|p| {
                // Offset 0 is below any log start: the read is reset to the earliest record.
                let at = p.current_offset.unwrap_or(0);
                (TopicPartition::new(&p.topic, p.partition), at)
            })
            .collect();
        let found = self.timestamps_at(&wanted).await?;
        for p in &mut lag.partitions {
            p.oldest_unconsumed = found
                .get(&TopicPartition::new(&p.topic, p.partition))
                .copied();
        }
        Ok(lag)
    }

    /// The timestamp of the first record at or after each offset (the log start's, where
    /// retention removed the offset).
    async fn timestamps_at(
        &self,
        wanted: &[(TopicPartition, i64)],
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        let mut found = BTreeMap::new();
        if wanted.is_empty() {
            return Ok(found);
        }
        let config = ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            max_wait: Duration::from_millis(10),
            // One batch per partition is what is needed; KIP-74 hands out a larger first one.
            partition_max_bytes: 64 << 10,
            max_bytes: 8 << 20,
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::new(self.client().clone(), config);
        consumer.assign(wanted.iter().map(|(tp, _)| tp.clone()));
        for (tp, offset) in wanted {
            consumer.seek(tp, SeekTo::Offset(*offset))?;
        }
        let mut idle = 0;
        while found.len() < wanted.len() && idle < IDLE_POLLS {
            let before = found.len();
            for part in consumer.poll().await? {
                if let Some(first) = part.records().next() {
                    let tp = TopicPartition::new(part.topic.clone(), part.partition);
                    found.insert(tp, first?.timestamp);
                }
            }
            let left: Vec<TopicPartition> = wanted
                .iter()
                .map(|(tp, _)| tp)
                .filter(|tp| !found.contains_key(*tp))
                .cloned()
                .collect();
            consumer.assign(left);
            idle = if found.len() > before { 0 } else { idle + 1 };
        }
        Ok(found)
    }
}
