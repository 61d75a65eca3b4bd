//! The Fetch answer, written around the stored batches instead of copied with them.
//!
//! The crate's encoder copies every batch into the answer frame. Here the fields go into the
//! frame buffer and each stored batch of [`SPLICE_FROM`](protocol::pieces::SPLICE_FROM) bytes or
//! more follows as a piece of its own ([`protocol::pieces`]): the connection writes the frame and
//! the batches, as the log holds them, with one `writev`. The bytes on the wire are the crate's,
//! version for version (the tests compare them).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::TopicName;
use protocol::pieces::{put_len, put_no_tagged_fields, put_string, Pieces, TooLong};

use crate::log::AbortedTxn;

/// The versions this encoder writes: what the broker accepts.
const VERSIONS: std::ops::RangeInclusive<i16> = 4..=12;

/// The first version with compact lengths and tagged fields.
const FLEXIBLE_FROM: i16 = 12;

/// A Fetch answer: no throttle, no fetch session (session id 0) and no preferred read replica
/// (this broker is the only one).
#[derive(Debug, Default)]
pub struct FetchBody {
    /// The top-level error (v7+).
    pub error_code: i16,
    pub topics: Vec<FetchedTopic>,
}

#[derive(Debug)]
pub struct FetchedTopic {
    pub name: TopicName,
    pub partitions: Vec<FetchedPartition>,
}

#[derive(Debug)]
pub struct FetchedPartition {
    pub index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// read_committed: the aborted transactions among the batches (an empty list otherwise).
    pub aborted: Vec<AbortedTxn>,
    /// Stored batches in offset order. None is an empty record set, never a null one:
    /// librdkafka rejects a size of -1.
    pub records: Vec<Bytes>,
}

impl FetchedPartition {
    /// Bytes of record batches.
    pub fn records_size(&self) -> usize {
        self.records
            .iter()
            .fold(0, |sum, batch| sum.saturating_add(batch.len()))
    }
}

impl FetchBody {
    /// Adds NOT_LEADER_OR_FOLLOWER for partitions another node leads (taken out of the request
    /// by the cluster's routing).
    pub fn add_not_led(&mut self, partitions: &[(TopicName, Vec<i32>)]) {
        super::route::merge_partitions(
            &mut self.topics,
            partitions,
            |t| &t.name,
            |name| FetchedTopic {
                name,
                partitions: Vec::new(),
            },
            |t, index| {
                t.partitions.push(FetchedPartition {
                    index,
                    error_code: kafka_protocol::ResponseError::NotLeaderOrFollower.code(),
                    high_watermark: -1,
                    last_stable_offset: -1,
                    log_start_offset: -1,
                    aborted: Vec::new(),
                    records: Vec::new(),
                })
            },
        );
    }

    /// Encodes the body into `head` and returns what follows it on the wire, written as is.
    pub fn encode(&self, head: &mut BytesMut, version: i16) -> Result<Vec<Bytes>, String> {
        if !VERSIONS.contains(&version) {
            return Err(format!("Fetch v{version} is not written here"));
        }
        let flexible = version >= FLEXIBLE_FROM;
        let mut out = Pieces::new(head);
        let too_long = |e: TooLong| format!("Fetch: {e}");
        out.buf().put_i32(0); // throttle_time_ms
        if version >= 7 {
            out.buf().put_i16(self.error_code);
            out.buf().put_i32(0); // session_id
        }
        put_len(out.buf(), flexible, "topics", self.topics.len()).map_err(too_long)?;
        for topic in &self.topics {
            put_string(out.buf(), flexible, &topic.name).map_err(too_long)?;
            put_len(out.buf(), flexible, "partitions", topic.partitions.len()).map_err(too_long)?;
            for p in &topic.partitions {
                let buf = out.buf();
                buf.put_i32(p.index);
                buf.put_i16(p.error_code);
                buf.put_i64(p.high_watermark);
                buf.put_i64(p.last_stable_offset);
                if version >= 5 {
                    buf.put_i64(p.log_start_offset);
                }
                // aborted_transactions (v4+): never null.
                put_len(buf, flexible, "aborted transactions", p.aborted.len())
                    .map_err(too_long)?;
                for aborted in &p.aborted {
                    buf.put_i64(aborted.producer_id);
                    buf.put_i64(aborted.first_offset);
                    put_no_tagged_fields(buf, flexible);
                }
                if version >= 11 {
                    buf.put_i32(-1); // preferred_read_replica
                }
                put_len(buf, flexible, "records", p.records_size()).map_err(too_long)?;
                for batch in &p.records {
                    out.bytes(batch);
                }
                put_no_tagged_fields(out.buf(), flexible); // of the partition
            }
            put_no_tagged_fields(out.buf(), flexible); // of the topic
        }
        put_no_tagged_fields(out.buf(), flexible); // of the answer
        Ok(out.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{BrokerId, FetchResponse, ProducerId};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use protocol::pieces::SPLICE_FROM;

    fn batch(fill: u8, len: usize) -> Bytes {
        Bytes::from(vec![fill; len])
    }

    fn partition(index: i32, error_code: i16, records: Vec<Bytes>) -> FetchedPartition {
        FetchedPartition {
            index,
            error_code,
            high_watermark: 1000 + index as i64,
            last_stable_offset: 900 + index as i64,
            log_start_offset: 10 + index as i64,
            aborted: (0..index as i64 % 3)
                .map(|i| AbortedTxn {
                    producer_id: 40 + i,
                    first_offset: 100 * i,
                    last_offset: 100 * i + 50,
                })
                .collect(),
            records,
        }
    }

    /// Two topics; partitions with small (copied) and big (spliced) batches, mixed and in runs,
    /// with no records, and with errors.
    fn body(error_code: i16) -> FetchBody {
        let topic = |name: &str, partitions| FetchedTopic {
            name: TopicName(StrBytes::from_string(name.to_string())),
            partitions,
        };
        FetchBody {
            error_code,
            topics: vec![
                topic(
                    "orders",
                    vec![
                        partition(0, 0, vec![batch(1, 100), batch(2, 3000)]),
                        partition(1, 0, vec![batch(3, SPLICE_FROM), batch(4, 20_000)]),
                        partition(2, 0, vec![]),
                        partition(3, 1, vec![]), // OffsetOutOfRange
                        partition(
                            4,
                            0,
                            vec![batch(5, 50), batch(6, 70_000), batch(7, 61), batch(8, 5000)],
                        ),
                    ],
                ),
                topic("missing", vec![partition(0, 3, vec![])]),
                topic("empty", vec![]),
                topic(
                    "t",
                    vec![
                        partition(7, 0, vec![batch(9, 16_384)]),
                        partition(8, 0, vec![]),
                    ],
                ),
            ],
        }
    }

    /// The same answer built for the crate's encoder, as the broker built it before.
    fn crate_response(body: &FetchBody) -> FetchResponse {
        let topics = body
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        PartitionData::default()
                            .with_partition_index(p.index)
                            .with_error_code(p.error_code)
                            .with_high_watermark(p.high_watermark)
                            .with_last_stable_offset(p.last_stable_offset)
                            .with_log_start_offset(p.log_start_offset)
                            .with_preferred_read_replica(BrokerId(-1))
                            .with_aborted_transactions(Some(
                                p.aborted
                                    .iter()
                                    .map(|a| {
                                        AbortedTransaction::default()
                                            .with_producer_id(ProducerId(a.producer_id))
                                            .with_first_offset(a.first_offset)
                                    })
                                    .collect(),
                            ))
                            .with_records(Some(Bytes::from(p.records.concat())))
                    })
                    .collect();
                FetchableTopicResponse::default()
                    .with_topic(t.name.clone())
                    .with_partitions(partitions)
            })
            .collect();
        FetchResponse::default()
            .with_error_code(body.error_code)
            .with_responses(topics)
    }

    #[test]
    fn the_bytes_are_the_crates_at_every_version_and_big_batches_are_not_copied() {
        for error_code in [0, 70] {
            let body = body(error_code);
            let expected = crate_response(&body);
            let batches: Vec<&Bytes> = body
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .flat_map(|p| &p.records)
                .collect();
            for version in VERSIONS {
                let mut head = BytesMut::from(&b"header"[..]);
                let pieces = body.encode(&mut head, version).unwrap();
                let mut wire = head.to_vec();
                for piece in &pieces {
                    wire.extend_from_slice(piece);
                }
                let mut theirs = BytesMut::from(&b"header"[..]);
                Encodable::encode(&expected, &mut theirs, version).unwrap();
                assert_eq!(wire, theirs.to_vec(), "v{version} error {error_code}");
                for big in batches.iter().filter(|b| b.len() >= SPLICE_FROM) {
                    assert!(
                        pieces.iter().any(|p| p.as_ptr() == big.as_ptr()),
                        "v{version}: a big batch goes out as it is"
                    );
                }
                for small in batches.iter().filter(|b| b.len() < SPLICE_FROM) {
                    assert!(
                        pieces.iter().all(|p| p.as_ptr() != small.as_ptr()),
                        "v{version}: a small batch is copied"
                    );
                }
                // Five spliced batches, and the fields (and small batches) after the second to
                // the fifth; nothing between the first two, spliced back to back.
                assert_eq!(pieces.len(), 9, "v{version}");
                assert!(pieces.iter().all(|p| !p.is_empty()));
            }
        }
    }

    #[test]
    fn an_answer_without_topics_is_the_crates_too() {
        let body = FetchBody::default();
        for version in VERSIONS {
            let mut ours = BytesMut::new();
            assert!(body.encode(&mut ours, version).unwrap().is_empty());
            let mut theirs = BytesMut::new();
            Encodable::encode(&crate_response(&body), &mut theirs, version).unwrap();
            assert_eq!(ours, theirs, "v{version}");
        }
    }

    #[test]
    fn versions_outside_four_to_twelve_are_refused() {
        for version in [3, 13] {
            assert!(FetchBody::default()
                .encode(&mut BytesMut::new(), version)
                .is_err());
        }
    }

    #[test]
    fn records_past_two_gib_are_an_error_not_a_wrapped_length() {
        // 64 MiB shared 32 times: 2 GiB of records, one allocation.
        let chunk = batch(0, 64 << 20);
        let body = FetchBody {
            error_code: 0,
            topics: vec![FetchedTopic {
                name: TopicName(StrBytes::from_static_str("t")),
                partitions: vec![partition(0, 0, vec![chunk; 32])],
            }],
        };
        for version in [4, 12] {
            let err = body.encode(&mut BytesMut::new(), version).unwrap_err();
            assert!(err.contains("records"), "{err}");
        }
    }
}
