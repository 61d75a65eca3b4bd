//! One Fetch request to one leader, and what its answer means for each partition.

use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;

use super::TopicPartition;
use crate::client::topic_name;
use crate::error::{Error, ServerError};
use crate::record::FetchedBatch;

/// Fetch sizes and waits (Kafka's fetch.max.wait.ms, fetch.min.bytes, fetch.max.bytes,
/// max.partition.fetch.bytes).
#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    pub max_wait: Duration,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    /// Kafka's `isolation.level=read_committed`: up to the last stable offset, with the
    /// aborted transactions listed.
    pub read_committed: bool,
}

/// A request for `asks` (partition and the offset to start at), without a fetch session: the
/// full list every time, which every broker accepts.
pub fn request(asks: &[(TopicPartition, i64)], limits: FetchLimits) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (tp, offset) in asks {
        let partition = FetchPartition::default()
            .with_partition(tp.partition)
            .with_fetch_offset(*offset)
            .with_partition_max_bytes(limits.partition_max_bytes);
        match topics.iter_mut().find(|t| t.topic.0.as_str() == tp.topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(topic_name(&tp.topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    FetchRequest::default()
        .with_max_wait_ms(i32::try_from(limits.max_wait.as_millis()).unwrap_or(i32::MAX))
        .with_min_bytes(limits.min_bytes)
        .with_max_bytes(limits.max_bytes)
        .with_isolation_level(i8::from(limits.read_committed))
        .with_topics(topics)
}

/// What the answer says about one partition.
#[derive(Debug)]
pub enum Outcome {
    Data {
        batches: Vec<FetchedBatch>,
        high_watermark: i64,
        /// Below it no transaction is open: where a read_committed consumer's partition ends.
        last_stable: i64,
        log_start: i64,
        /// read_committed: the aborted transactions among the batches, as (producer id, first
        /// offset).
        aborted: Vec<(i64, i64)>,
    },
    /// The position is outside the log: apply the reset policy.
    OutOfRange,
    /// Worth trying again after a metadata refresh (leader moved, topic being created).
    Retry(ServerError),
    Fatal(Error),
}

/// Sorts the answer into one outcome per asked partition, in the order asked. A partition the
/// broker left out is retried.
pub fn outcomes(
    resp: FetchResponse,
    asks: &[(TopicPartition, i64)],
    check_crcs: bool,
) -> Vec<(TopicPartition, Outcome)> {
    let top_error = resp.error_code;
    let mut answers = resp.responses;
    asks.iter()
        .map(|(tp, _)| {
            let ctx = |code: i16| {
                ServerError::new(code)
                    .topic(&tp.topic)
                    .partition(tp.partition)
            };
            if top_error != 0 {
                return (tp.clone(), classify(ctx(top_error)));
            }
            let data = answers
                .iter_mut()
                .filter(|t| t.topic.0.as_str() == tp.topic)
                .flat_map(|t| t.partitions.iter_mut())
                .find(|p| p.partition_index == tp.partition);
            let outcome = match data {
                None => Outcome::Retry(
                    ctx(ResponseError::UnknownServerError.code())
                        .message(Some("partition missing from the Fetch answer")),
                ),
                Some(p) if p.error_code != 0 => classify(ctx(p.error_code)),
                Some(p) => {
                    let records = p.records.take().unwrap_or_default();
                    match FetchedBatch::split_checking(records, &tp.topic, tp.partition, check_crcs)
                    {
                        Ok(batches) => Outcome::Data {
                            batches,
                            high_watermark: p.high_watermark,
                            last_stable: p.last_stable_offset,
                            log_start: p.log_start_offset,
                            aborted: p
                                .aborted_transactions
                                .iter()
                                .flatten()
                                .map(|a| (a.producer_id.0, a.first_offset))
                                .collect(),
                        },
                        Err(e) => Outcome::Fatal(e.into()),
                    }
                }
            };
            (tp.clone(), outcome)
        })
        .collect()
}

fn classify(err: ServerError) -> Outcome {
    if err.is(ResponseError::OffsetOutOfRange) {
        Outcome::OutOfRange
    } else if err.is_retriable() || err.invalidates_metadata() {
        Outcome::Retry(err)
    } else {
        Outcome::Fatal(err.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BatchBuilder, Compression, ProducerIdentity};
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::protocol::Encodable;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    fn limits() -> FetchLimits {
        FetchLimits {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 << 20,
            partition_max_bytes: 1 << 20,
            read_committed: false,
        }
    }

    #[test]
    fn one_topic_entry_per_topic_and_every_version_encodes() {
        let asks = [(tp("a", 0), 5), (tp("b", 0), 0), (tp("a", 1), 7)];
        let req = request(&asks, limits());
        assert_eq!(req.topics.len(), 2);
        assert_eq!(req.topics[0].partitions.len(), 2);
        assert_eq!(req.topics[0].partitions[1].fetch_offset, 7);
        assert_eq!(req.max_wait_ms, 500);
        assert_eq!(req.replica_id.0, -1);
        for v in 4..=12 {
            req.encode(&mut bytes::BytesMut::new(), v).unwrap();
        }
    }

    #[test]
    fn answers_sort_into_outcomes() {
        let mut b = BatchBuilder::new(1024);
        assert!(b.try_append(0, None, Some(b"v"), &[]));
        let batch = b.finish(Compression::None, ProducerIdentity::NONE).unwrap();
        let part = |p: i32, code: i16| {
            PartitionData::default()
                .with_partition_index(p)
                .with_error_code(code)
                .with_high_watermark(1)
                .with_records(Some(batch.clone()))
        };
        let resp = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(topic_name("a"))
            .with_partitions(vec![part(0, 0), part(1, 1), part(2, 6), part(3, 29)])]);
        let asks: Vec<_> = (0..5).map(|p| (tp("a", p), 0)).collect();
        let out = outcomes(resp, &asks, true);
        assert!(
            matches!(&out[0].1, Outcome::Data { batches, high_watermark: 1, .. } if batches.len() == 1)
        );
        assert!(matches!(out[1].1, Outcome::OutOfRange));
        assert!(matches!(out[2].1, Outcome::Retry(_)));
        assert!(
            matches!(out[3].1, Outcome::Fatal(_)),
            "TOPIC_AUTHORIZATION_FAILED is fatal"
        );
        assert!(matches!(out[4].1, Outcome::Retry(_)), "left out");
    }

    #[test]
    fn a_top_level_error_applies_to_every_partition() {
        let resp = FetchResponse::default().with_error_code(6);
        let out = outcomes(resp, &[(tp("a", 0), 0), (tp("a", 1), 0)], true);
        assert!(out.iter().all(|(_, o)| matches!(o, Outcome::Retry(_))));
    }
}
