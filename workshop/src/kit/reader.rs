//! One partition, read in offset order from a given offset, by a consumer that may take fewer
//! records than a fetch brings. The client's consumer fetches whole batches and moves its
//! position past them; a consumer that processes at a fixed rate (`max.poll.records` in Kafka's
//! terms) keeps the rest in a buffer here, and only fetches again when the buffer runs short,
//! so a backlog of millions stays in the broker, where it is counted as lag.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use client::{Client, Consumer, ConsumerConfig, OffsetReset, SeekTo, TopicPartition};

use crate::lab::target::broker_error;
use crate::lab::LabError;

/// A record as the lab's consumers use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub offset: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// Fetches in a row that may come back empty before [`PartitionReader::take`] gives up.
const MAX_EMPTY_FETCHES: u32 = 200;

pub struct PartitionReader {
    consumer: Consumer,
    tp: TopicPartition,
    buffer: VecDeque<Taken>,
}

impl PartitionReader {
    /// A reader of `tp` starting at `from`; each fetch waits at most `max_wait` for data.
    pub fn new(
        client: &Client,
        tp: TopicPartition,
        from: i64,
        max_wait: Duration,
    ) -> Result<Self, LabError> {
        let config = ConsumerConfig {
            max_wait,
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::new(client.clone(), config);
        consumer.assign([tp.clone()]);
        consumer
            .seek(&tp, SeekTo::Offset(from.max(0)))
            .map_err(|e| broker_error(&format!("seeking {tp} to {from}"), &e))?;
        Ok(PartitionReader {
            consumer,
            tp,
            buffer: VecDeque::new(),
        })
    }

    /// Fetches once (waiting up to the reader's `max_wait`) and buffers what came; returns how
    /// many records were added.
    async fn fetch(&mut self) -> Result<usize, LabError> {
        let fetched = self
            .consumer
            .poll()
            .await
            .map_err(|e| broker_error(&format!("fetching {}", self.tp), &e))?;
        let before = self.buffer.len();
        for part in fetched {
            for record in part.records() {
                let record =
                    record.map_err(|e| LabError::Internal(format!("a fetched batch: {e}")))?;
                self.buffer.push_back(Taken {
                    offset: record.offset,
                    key: record.key,
                    value: record.value,
                });
            }
        }
        Ok(self.buffer.len() - before)
    }

    /// Takes up to `n` records that are already buffered.
    fn take_buffered(&mut self, n: usize) -> Vec<Taken> {
        let n = n.min(self.buffer.len());
        self.buffer.drain(..n).collect()
    }

    /// Takes `n` records, fetching until that many are buffered; `end` is the log end offset
    /// the caller knows of, so asking past it takes what there is instead of waiting forever.
    pub async fn take(&mut self, n: usize, end: i64) -> Result<Vec<Taken>, LabError> {
        let mut empty_fetches = 0;
        loop {
            let caught_up = match self.buffer.back() {
                Some(last) => last.offset + 1 >= end,
                None => self.consumer.position(&self.tp) >= Some(end),
            };
            if self.buffer.len() >= n || caught_up {
                return Ok(self.take_buffered(n));
            }
            if self.fetch().await? == 0 {
                empty_fetches += 1;
                // The records below `end` were acknowledged, so they come; a broker that keeps
                // answering with nothing is broken, and the lab says so rather than hang.
                if empty_fetches >= MAX_EMPTY_FETCHES {
                    return Err(LabError::Broker(format!(
                        "{} returned no records below its log end offset {end} after \
                         {MAX_EMPTY_FETCHES} fetches; the broker is not serving what it acknowledged",
                        self.tp
                    )));
                }
            } else {
                empty_fetches = 0;
            }
        }
    }
}
