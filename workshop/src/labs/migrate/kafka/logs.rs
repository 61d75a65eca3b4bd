//! The engine's logs on Kafka: each shard's changelog is a topic of one partition (an offset
//! there is where a snapshot starts), and the routing table is a topic that keeps every record
//! (`cleanup.policy=delete`, `retention.ms=-1`, see [`super::run`]): each router reads it to its
//! end, the latest record per key in force; the auditor reads every record.
//!
//! Public Kafka APIs only: Produce, Fetch, ListOffsets, through our client. The engine is
//! synchronous, so each call runs on the lab's runtime with `block_on`, from the lab's thread.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use client::{
    Admin, Client, Consumer, ConsumerConfig, OffsetReset, OffsetSpec, Producer, ProducerConfig,
    ProducerRecord, SeekTo, TopicPartition,
};
use tokio::runtime::Runtime;

use crate::lab::target::{self, broker_error};
use crate::lab::LabError;
use crate::labs::migrate::engine::backend::{Backend, Reader};
use crate::labs::migrate::engine::keys::ShardId;
use crate::labs::migrate::engine::routing::{RoutingRecord, RoutingState};
use crate::labs::migrate::engine::store::Change;

use super::Limit;

/// Appends are sent in batches of at most this many records.
const MAX_UNSENT: usize = 500;

/// The topics of one run.
#[derive(Debug, Clone)]
pub struct Topics {
    pub changelogs: BTreeMap<ShardId, String>,
    pub routing: String,
}

/// A router's position in the routing topic and what it has read.
struct RoutingReader {
    consumer: Consumer,
    state: RoutingState,
}

pub struct KafkaLogs<'r> {
    rt: &'r Runtime,
    /// Every call runs within the deadline of the run's phase.
    limit: Limit<'r>,
    client: Client,
    admin: Admin,
    producer: Producer,
    topics: Topics,
    /// Changes appended and not yet sent: (shard, the offset the shard counted, key, value).
    unsent: Vec<(ShardId, u64, Vec<u8>, Vec<u8>)>,
    changelog_readers: BTreeMap<ShardId, Consumer>,
    routing_readers: BTreeMap<Reader, RoutingReader>,
}

impl<'r> KafkaLogs<'r> {
    pub fn new(
        rt: &'r Runtime,
        client: Client,
        topics: Topics,
        limit: Limit<'r>,
    ) -> Result<Self, LabError> {
        let config = ProducerConfig {
            linger: Duration::from_millis(1),
            ..target::producer_config()
        };
        // The producer's sender runs on the lab's runtime.
        let _runtime = rt.enter();
        let producer = Producer::new(client.clone(), config)
            .map_err(|e| broker_error("starting the shards' producer", &e))?;
        Ok(KafkaLogs {
            rt,
            limit,
            admin: Admin::new(client.clone()),
            client,
            producer,
            topics,
            unsent: Vec::new(),
            changelog_readers: BTreeMap::new(),
            routing_readers: BTreeMap::new(),
        })
    }

    /// Sends every change appended so far and checks each landed at the offset its shard
    /// counted: nobody else writes these topics, and our producer keeps their order.
    fn flush(&mut self) -> Result<(), LabError> {
        if self.unsent.is_empty() {
            return Ok(());
        }
        let unsent = std::mem::take(&mut self.unsent);
        let (producer, topics) = (&self.producer, &self.topics);
        let sending = async {
            let mut pending = Vec::with_capacity(unsent.len());
            for (shard, offset, key, value) in &unsent {
                let topic = &topics.changelogs[shard];
                let record = ProducerRecord::new(topic)
                    .partition(0)
                    .key(key)
                    .value(value);
                let delivery = producer
                    .send(record)
                    .await
                    .map_err(|e| broker_error(&format!("writing to {topic}"), &e))?;
                pending.push((topic, *offset, delivery));
            }
            for (topic, offset, delivery) in pending {
                let sent = delivery
                    .wait()
                    .await
                    .map_err(|e| broker_error(&format!("writing to {topic}"), &e))?;
                if sent.offset != offset as i64 {
                    return Err(LabError::Broker(format!(
                        "a change went to offset {} of {topic}, where its shard counted {offset}: {}",
                        sent.offset,
                        crate::labs::migrate::engine::world::offsets_apart(sent.offset, offset as i64)
                    )));
                }
            }
            Ok(())
        };
        self.call("writing the changelogs", sending)?
    }

    fn end(&self, topic: &str) -> Result<u64, LabError> {
        let what = format!("listing the end offset of {topic}");
        let listed = self.call(&what, self.admin.list_offsets(topic, OffsetSpec::Latest))?;
        let listed = listed.map_err(|e| broker_error(&what, &e))?;
        listed
            .iter()
            .find(|l| l.partition == 0)
            .map(|l| l.offset.max(0) as u64)
            .ok_or_else(|| LabError::Broker(format!("{what}: partition 0 is missing")))
    }

    /// Reads the routing topic with `consumer` up to its end, handing each record to `each`.
    fn read_routing(
        &self,
        consumer: &mut Consumer,
        mut each: impl FnMut(u64, RoutingRecord),
    ) -> Result<(), LabError> {
        let topic = &self.topics.routing;
        let end = self.end(topic)?;
        let reading = read_until(consumer, topic, 0, end, |offset, value| {
            let record = RoutingRecord::decode(value.unwrap_or_default())
                .map_err(|e| LabError::Broker(format!("{topic} at offset {offset}: {e}")))?;
            each(offset, record);
            Ok(())
        });
        self.call(&format!("reading {topic}"), reading)?
    }

    fn call<T>(&self, what: &str, work: impl Future<Output = T>) -> Result<T, LabError> {
        self.limit.block_on(self.rt, what, async { Ok(work.await) })
    }

    fn consumer(&self, topic: &str) -> Consumer {
        let mut consumer = Consumer::new(
            self.client.with_own_connections(),
            ConsumerConfig {
                max_wait: Duration::from_millis(50),
                auto_offset_reset: OffsetReset::Earliest,
                ..ConsumerConfig::default()
            },
        );
        consumer.assign([TopicPartition::new(topic, 0)]);
        consumer
    }
}

/// Polls `consumer` (assigned partition 0 of `topic`) until its position reaches `to`,
/// handing each record from `from` on to `each`.
async fn read_until(
    consumer: &mut Consumer,
    topic: &str,
    from: u64,
    to: u64,
    mut each: impl FnMut(u64, Option<&[u8]>) -> Result<(), LabError>,
) -> Result<(), LabError> {
    let tp = TopicPartition::new(topic, 0);
    let what = format!("reading {topic}");
    while consumer.position(&tp).is_none_or(|at| at < to as i64) {
        let parts = consumer.poll().await.map_err(|e| broker_error(&what, &e))?;
        for part in parts {
            for record in part.records() {
                let record = record.map_err(|e| broker_error(&what, &e.into()))?;
                let offset = record.offset as u64;
                if (from..to).contains(&offset) {
                    each(offset, record.value.as_deref())?;
                }
            }
        }
    }
    Ok(())
}

impl Backend for KafkaLogs<'_> {
    fn append(&mut self, shard: ShardId, offset: u64, change: &Change) -> Result<(), LabError> {
        let key = change.key.to_string().into_bytes();
        self.unsent.push((shard, offset, key, change.encode()));
        if self.unsent.len() >= MAX_UNSENT {
            self.flush()?;
        }
        Ok(())
    }

    fn end_offset(&mut self, shard: ShardId) -> Result<u64, LabError> {
        self.flush()?;
        self.end(&self.topics.changelogs[&shard])
    }

    fn read(&mut self, shard: ShardId, from: u64, to: u64) -> Result<Vec<(u64, Change)>, LabError> {
        self.flush()?;
        if from >= to {
            return Ok(Vec::new());
        }
        let topic = self.topics.changelogs[&shard].clone();
        let mut consumer = match self.changelog_readers.remove(&shard) {
            Some(consumer) => consumer,
            None => self.consumer(&topic),
        };
        let tp = TopicPartition::new(topic.as_str(), 0);
        let sought = consumer.seek(&tp, SeekTo::Offset(from as i64));
        let mut changes = Vec::new();
        let reading = async {
            sought.map_err(|e| broker_error(&format!("seeking in {topic}"), &e))?;
            read_until(&mut consumer, &topic, from, to, |offset, value| {
                let change = Change::decode(value.unwrap_or_default())
                    .map_err(|e| LabError::Broker(format!("{topic} at offset {offset}: {e}")))?;
                changes.push((offset, change));
                Ok(())
            })
            .await
        };
        let result = self.call(&format!("reading {topic}"), reading);
        self.changelog_readers.insert(shard, consumer);
        result??;
        Ok(changes)
    }

    fn publish(&mut self, record: &RoutingRecord) -> Result<(), LabError> {
        let topic = &self.topics.routing;
        let (key, value) = (record.key(), record.encode());
        let sending = self.producer.send_and_wait(
            ProducerRecord::new(topic)
                .partition(0)
                .key(key.as_bytes())
                .value(&value),
        );
        let what = format!("writing {key} to {topic}");
        self.call(&what, sending)?
            .map(|_| ())
            .map_err(|e| broker_error(&what, &e))
    }

    fn routing(&mut self, reader: Reader) -> Result<RoutingState, LabError> {
        let mut entry = match self.routing_readers.remove(&reader) {
            Some(entry) => entry,
            None => RoutingReader {
                consumer: self.consumer(&self.topics.routing),
                state: RoutingState::default(),
            },
        };
        let RoutingReader { consumer, state } = &mut entry;
        let result = self.read_routing(consumer, |_, record| state.apply(record));
        let state = entry.state.clone();
        self.routing_readers.insert(reader, entry);
        result?;
        Ok(state)
    }

    fn routing_log(&mut self) -> Result<Vec<(u64, RoutingRecord)>, LabError> {
        let mut consumer = self.consumer(&self.topics.routing);
        let mut log = Vec::new();
        self.read_routing(&mut consumer, |offset, record| log.push((offset, record)))?;
        Ok(log)
    }
}
