//! The Produce request, written around its record batches instead of copied with them.
//!
//! The crate's encoder copies every batch into the request buffer: for a producer of megabyte
//! batches that copy, and the cache misses of reading the batch twice, cost more than the
//! socket write itself. Here the fields are encoded into the frame buffer and each batch of
//! [`SPLICE_FROM`](protocol::pieces::SPLICE_FROM) bytes or more follows as a piece of its own
//! ([`protocol::pieces`]), which the messenger hands to one `writev` with the rest. The bytes on
//! the wire are the crate's, version for version (the tests compare them).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ProduceRequest;
use protocol::pieces::{put_len, put_no_tagged_fields, put_string, put_uvarint, Pieces};

use super::batch::ProducerBatch;
use crate::connection::Outgoing;

/// The first version with compact lengths and tagged fields.
const FLEXIBLE_FROM: i16 = 9;

/// A Produce request carrying one batch per partition, with the transactional id when its
/// batches belong to a transaction.
pub struct ProduceBody {
    transactional_id: Option<Arc<str>>,
    acks: i16,
    timeout_ms: i32,
    /// Topics in the order their first batch came.
    topics: Vec<TopicBatches>,
}

/// A topic's batches: partition index and batch bytes.
type TopicBatches = (Arc<str>, Vec<(i32, Bytes)>);

impl ProduceBody {
    /// `batches` holds at most one batch per partition (Kafka refuses more).
    pub fn new(batches: &[(ProducerBatch, Bytes)], acks: i16, timeout_ms: i32) -> Self {
        Self::transactional(batches, None, acks, timeout_ms)
    }

    pub fn transactional(
        batches: &[(ProducerBatch, Bytes)],
        transactional_id: Option<Arc<str>>,
        acks: i16,
        timeout_ms: i32,
    ) -> Self {
        let mut topics: Vec<TopicBatches> = Vec::new();
        for (batch, bytes) in batches {
            let entry = (batch.partition, bytes.clone());
            match topics.iter_mut().find(|(name, _)| *name == batch.topic) {
                Some((_, partitions)) => partitions.push(entry),
                None => topics.push((Arc::clone(&batch.topic), vec![entry])),
            }
        }
        Self {
            transactional_id,
            acks,
            timeout_ms,
            topics,
        }
    }
}

impl Outgoing for ProduceBody {
    type Request = ProduceRequest;

    fn encode(&self, head: &mut BytesMut, version: i16) -> Result<Vec<Bytes>, String> {
        if !(3..=FLEXIBLE_FROM).contains(&version) {
            return Err(format!(
                "this client writes Produce v3 to v9, not v{version}"
            ));
        }
        let flexible = version >= FLEXIBLE_FROM;
        let mut out = Pieces::new(head);
        let too_long = |e: protocol::pieces::TooLong| format!("Produce: {e}");
        match &self.transactional_id {
            Some(id) => put_string(out.buf(), flexible, id).map_err(too_long)?,
            // null
            None if flexible => put_uvarint(out.buf(), 0),
            None => out.buf().put_i16(-1),
        }
        out.buf().put_i16(self.acks);
        out.buf().put_i32(self.timeout_ms);
        put_len(out.buf(), flexible, "topics", self.topics.len()).map_err(too_long)?;
        for (name, partitions) in &self.topics {
            put_string(out.buf(), flexible, name).map_err(too_long)?;
            put_len(out.buf(), flexible, "partitions", partitions.len()).map_err(too_long)?;
            for (index, records) in partitions {
                out.buf().put_i32(*index);
                put_len(out.buf(), flexible, "records", records.len()).map_err(too_long)?;
                out.bytes(records);
                put_no_tagged_fields(out.buf(), flexible); // of the partition
            }
            put_no_tagged_fields(out.buf(), flexible); // of the topic
        }
        put_no_tagged_fields(out.buf(), flexible); // of the request
        Ok(out.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::topic_name;
    use crate::producer::accumulator::Accumulator;
    use crate::producer::batch::sealed;
    use crate::producer::partitioner::Target;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::protocol::Encodable;
    use protocol::pieces::SPLICE_FROM;
    use std::time::Duration;
    use tokio::time::Instant;

    /// Batches of two topics: partitions with one small record and partitions with records of
    /// 3 KiB, so some batches are copied into the frame and some spliced.
    fn batches() -> Vec<(ProducerBatch, Bytes)> {
        let now = Instant::now();
        let mut acc = Accumulator::new(1 << 20, Duration::ZERO, 1);
        for (topic, partition, records) in [("a", 0, 1), ("b", 1, 3), ("a", 2, 2), ("b", 4, 1)] {
            for _ in 0..records {
                let value = vec![partition as u8; if records > 1 { 3000 } else { 10 }];
                acc.append(
                    topic,
                    Target::Partition(partition),
                    0,
                    None,
                    Some(&value),
                    &[],
                    1,
                    now,
                );
            }
        }
        let (mut ready, _) = acc.drain(now, true, None);
        // In partition order, whatever order the accumulator keeps its topics in: topic a
        // first, each topic's spliced batch followed by fields.
        ready.sort_by_key(|b| b.partition);
        sealed(ready)
    }

    /// The same request built for the crate's encoder.
    fn crate_request(batches: &[(ProducerBatch, Bytes)]) -> ProduceRequest {
        let mut topics: Vec<TopicProduceData> = Vec::new();
        for (batch, bytes) in batches {
            let data = PartitionProduceData::default()
                .with_index(batch.partition)
                .with_records(Some(bytes.clone()));
            match topics
                .iter_mut()
                .find(|t| t.name.0.as_str() == &*batch.topic)
            {
                Some(t) => t.partition_data.push(data),
                None => topics.push(
                    TopicProduceData::default()
                        .with_name(topic_name(&batch.topic))
                        .with_partition_data(vec![data]),
                ),
            }
        }
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(topics)
    }

    #[test]
    fn the_bytes_are_the_crates_at_every_version_and_big_batches_are_not_copied() {
        let batches = batches();
        let sizes: Vec<usize> = batches.iter().map(|(_, b)| b.len()).collect();
        assert_eq!(
            sizes.iter().filter(|s| **s >= SPLICE_FROM).count(),
            2,
            "{sizes:?}"
        );
        let body = ProduceBody::new(&batches, -1, 30_000);
        let expected = crate_request(&batches);
        for version in 3..=9 {
            let mut head = BytesMut::from(&b"header"[..]);
            let pieces = Outgoing::encode(&body, &mut head, version).unwrap();
            let mut wire = head.to_vec();
            for piece in &pieces {
                wire.extend_from_slice(piece);
            }
            let mut theirs = BytesMut::from(&b"header"[..]);
            Encodable::encode(&expected, &mut theirs, version).unwrap();
            assert_eq!(wire, theirs.to_vec(), "v{version}");
            for (_, spliced) in batches.iter().filter(|(_, b)| b.len() >= SPLICE_FROM) {
                assert!(
                    pieces.iter().any(|p| p.as_ptr() == spliced.as_ptr()),
                    "v{version}: a big batch goes out as it is"
                );
            }
            // Two spliced batches, each followed by the fields after it.
            assert_eq!(pieces.len(), 4, "v{version}");
        }
    }

    #[test]
    fn versions_outside_three_to_nine_are_refused() {
        let body = ProduceBody::new(&batches(), 1, 1);
        for version in [2, 10] {
            assert!(Outgoing::encode(&body, &mut BytesMut::new(), version).is_err());
        }
    }
}
