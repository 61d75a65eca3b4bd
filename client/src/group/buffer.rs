//! Fetched records not yet handed to the application. A fetch can bring more than
//! `max.poll.records`; the rest waits here for the next poll, and a partition's consumed
//! position (what a commit records) is its first waiting record, not the fetch position.

use std::collections::VecDeque;

use crate::consumer::TopicPartition;
use crate::error::Result;
use crate::record::{PartitionRecords, Record};

/// Records of one partition returned by one poll, in offset order.
#[derive(Debug, Clone)]
pub struct PolledRecords {
    pub topic: String,
    pub partition: i32,
    pub records: Vec<Record>,
}

impl PolledRecords {
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }
}

#[derive(Debug, Default)]
pub struct RecordBuffer {
    chunks: VecDeque<(TopicPartition, VecDeque<Record>)>,
}

impl RecordBuffer {
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Decodes fetched data into the buffer, partition by partition in fetch order. A corrupt
    /// record fails the poll, as Kafka's consumer fails it.
    pub fn push(&mut self, fetched: Vec<PartitionRecords>) -> Result<()> {
        for part in fetched {
            let records = part.records().collect::<Result<VecDeque<Record>, _>>()?;
            if !records.is_empty() {
                let tp = TopicPartition::new(part.topic.clone(), part.partition);
                self.chunks.push_back((tp, records));
            }
        }
        Ok(())
    }

    /// Up to `max` records, whole partitions first, as Java's fetcher drains completed fetches.
    pub fn take(&mut self, max: usize) -> Vec<PolledRecords> {
        let mut out: Vec<PolledRecords> = Vec::new();
        let mut left = max;
        while left > 0 {
            let Some((tp, records)) = self.chunks.front_mut() else {
                break;
            };
            let n = left.min(records.len());
            let taken: Vec<Record> = records.drain(..n).collect();
            left -= n;
            match out.last_mut() {
                Some(last) if last.topic == tp.topic && last.partition == tp.partition => {
                    last.records.extend(taken)
                }
                _ => out.push(PolledRecords {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    records: taken,
                }),
            }
            if records.is_empty() {
                self.chunks.pop_front();
            }
        }
        out
    }

    /// The offset of the partition's first record still waiting, if any.
    pub fn next_offset(&self, tp: &TopicPartition) -> Option<i64> {
        self.chunks
            .iter()
            .find(|(t, _)| t == tp)
            .and_then(|(_, records)| records.front())
            .map(|r| r.offset)
    }

    /// Drops what waits for partitions the member no longer owns (or was re-positioned).
    pub fn retain(&mut self, mut keep: impl FnMut(&TopicPartition) -> bool) {
        self.chunks.retain(|(tp, _)| keep(tp));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fetched::test_batches;

    fn fetched(partition: i32, base: i64, count: usize) -> PartitionRecords {
        PartitionRecords {
            topic: "t".into(),
            partition,
            high_watermark: base + count as i64,
            from_offset: base,
            batches: test_batches("t", partition, base, count),
        }
    }

    #[test]
    fn hands_out_at_most_max_and_keeps_the_rest_in_order() {
        let mut buf = RecordBuffer::default();
        buf.push(vec![fetched(0, 10, 3), fetched(1, 0, 4)]).unwrap();
        let first = buf.take(2);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].records.len(), 2);
        assert_eq!(buf.next_offset(&TopicPartition::new("t", 0)), Some(12));
        let second = buf.take(3);
        let counts: Vec<(i32, usize)> = second
            .iter()
            .map(|p| (p.partition, p.records.len()))
            .collect();
        assert_eq!(counts, vec![(0, 1), (1, 2)]);
        assert_eq!(buf.next_offset(&TopicPartition::new("t", 0)), None);
        assert_eq!(buf.next_offset(&TopicPartition::new("t", 1)), Some(2));
        buf.retain(|tp| tp.partition != 1);
        assert!(buf.is_empty());
    }
}
