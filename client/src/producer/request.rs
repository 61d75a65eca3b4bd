//! The Produce request, written around its record batches instead of copied with them.
//!
//! The crate's encoder copies every batch into the request buffer: for a producer of megabyte
//! batches that copy, and the cache misses of reading the batch twice, cost more than the
//! socket write itself. Here the fields are encoded into the frame buffer and each batch of
//! [`SPLICE_FROM`] bytes or more follows as a piece of its own, which the messenger hands to one
//! `writev` with the rest. The bytes on the wire are the crate's, version for version (the
//! tests compare them).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ProduceRequest;

use super::batch::ProducerBatch;
use crate::connection::Outgoing;

/// Smaller batches are copied into the frame: one contiguous write beats a vector of small
/// pieces, and copying a few kilobytes costs next to nothing.
const SPLICE_FROM: usize = 4096;

/// The first version with compact lengths and tagged fields.
const FLEXIBLE_FROM: i16 = 9;

/// A Produce request carrying one batch per partition, without a transactional id.
pub struct ProduceBody {
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
        let mut topics: Vec<TopicBatches> = Vec::new();
        for (batch, bytes) in batches {
            let entry = (batch.partition, bytes.clone());
            match topics.iter_mut().find(|(name, _)| *name == batch.topic) {
                Some((_, partitions)) => partitions.push(entry),
                None => topics.push((Arc::clone(&batch.topic), vec![entry])),
            }
        }
        Self {
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
        // transactional_id: null
        if flexible {
            put_uvarint(out.buf(), 0);
        } else {
            out.buf().put_i16(-1);
        }
        out.buf().put_i16(self.acks);
        out.buf().put_i32(self.timeout_ms);
        put_count(out.buf(), flexible, self.topics.len())?;
        for (name, partitions) in &self.topics {
            put_name(out.buf(), flexible, name)?;
            put_count(out.buf(), flexible, partitions.len())?;
            for (index, records) in partitions {
                out.buf().put_i32(*index);
                put_count(out.buf(), flexible, records.len())?;
                out.records(records);
                if flexible {
                    put_uvarint(out.buf(), 0); // tagged fields of the partition
                }
            }
            if flexible {
                put_uvarint(out.buf(), 0); // of the topic
            }
        }
        if flexible {
            put_uvarint(out.buf(), 0); // of the request
        }
        Ok(out.finish())
    }
}

/// Where encoding stands: fields go into the frame buffer until the first spliced batch, then
/// into a buffer of their own after it, and so on.
struct Pieces<'a> {
    head: &'a mut BytesMut,
    /// Fields after the last spliced batch; `None` while still writing into `head`.
    tail: Option<BytesMut>,
    pieces: Vec<Bytes>,
}

impl<'a> Pieces<'a> {
    fn new(head: &'a mut BytesMut) -> Self {
        Self {
            head,
            tail: None,
            pieces: Vec::new(),
        }
    }

    fn buf(&mut self) -> &mut BytesMut {
        match &mut self.tail {
            Some(tail) => tail,
            None => self.head,
        }
    }

    fn records(&mut self, records: &Bytes) {
        if records.len() < SPLICE_FROM {
            self.buf().put_slice(records);
            return;
        }
        if let Some(tail) = self.tail.take() {
            self.pieces.push(tail.freeze());
        }
        self.pieces.push(records.clone());
        self.tail = Some(BytesMut::new());
    }

    fn finish(mut self) -> Vec<Bytes> {
        self.pieces.extend(
            self.tail
                .take()
                .filter(|t| !t.is_empty())
                .map(BytesMut::freeze),
        );
        self.pieces
    }
}

/// An array's element count or a byte string's length: INT32 before v9, UNSIGNED_VARINT of the
/// count plus one (0 meaning null) from v9 on.
fn put_count(buf: &mut BytesMut, flexible: bool, count: usize) -> Result<(), String> {
    let count =
        i32::try_from(count).map_err(|_| format!("{count} does not fit a Produce field"))?;
    if flexible {
        put_uvarint(buf, count as u32 + 1);
    } else {
        buf.put_i32(count);
    }
    Ok(())
}

/// A topic name: INT16 length before v9, compact from v9 on.
fn put_name(buf: &mut BytesMut, flexible: bool, name: &str) -> Result<(), String> {
    if flexible {
        put_count(buf, true, name.len())?;
    } else {
        let len =
            i16::try_from(name.len()).map_err(|_| format!("topic name of {} bytes", name.len()))?;
        buf.put_i16(len);
    }
    buf.put_slice(name.as_bytes());
    Ok(())
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8(v as u8 | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::topic_name;
    use crate::producer::accumulator::Accumulator;
    use crate::producer::partitioner::Target;
    use crate::record::Compression;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::protocol::Encodable;
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
        ready
            .into_iter()
            .map(|mut b| {
                let bytes = b.payload(Compression::None).unwrap();
                (b, bytes)
            })
            .collect()
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
