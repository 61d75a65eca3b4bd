//! ListOffsets: the earliest or latest offset of partitions, or the first offset at or after a
//! time. Shared by the admin API and by the consumer when it resolves a seek.

use std::collections::{BTreeMap, HashMap, HashSet};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse};

use crate::client::{topic_name, Client};
use crate::error::{Error, ProtocolError, Result, ServerError};

/// Which offset to look up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OffsetSpec {
    /// The log start.
    Earliest,
    /// The log end (high watermark): the offset the next record will get.
    Latest,
    /// The first record with a timestamp at or after these milliseconds; -1 when none is.
    Timestamp(i64),
}

impl OffsetSpec {
    /// Kafka's encoding: -2 earliest, -1 latest, else a timestamp.
    fn wire(self) -> i64 {
        match self {
            Self::Earliest => -2,
            Self::Latest => -1,
            Self::Timestamp(t) => t,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    pub partition: i32,
    /// -1 when a timestamp lookup finds no record at or after the time.
    pub offset: i64,
    /// The found record's timestamp for a timestamp lookup, else -1.
    pub timestamp: i64,
}

/// Looks up one offset per `(partition, spec)` of `topic`, asking each partition's leader and
/// retrying transient failures. Each partition may appear once (Kafka refuses duplicates in one
/// request). The answer is in the order asked.
pub async fn list_offsets(
    client: &Client,
    topic: &str,
    asks: &[(i32, OffsetSpec)],
) -> Result<Vec<ListedOffset>> {
    let mut partitions: Vec<i32> = asks.iter().map(|(p, _)| *p).collect();
    partitions.sort_unstable();
    if partitions.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::InvalidArgument(format!(
            "ListOffsets for {topic} names a partition twice"
        )));
    }
    client
        .config()
        .retry
        .run(
            "ListOffsets",
            || list_once(client, topic, asks),
            |e| {
                if matches!(e, Error::Transport(_))
                    || e.server().is_some_and(ServerError::invalidates_metadata)
                {
                    client.invalidate(topic);
                }
            },
        )
        .await
}

async fn list_once(
    client: &Client,
    topic: &str,
    asks: &[(i32, OffsetSpec)],
) -> Result<Vec<ListedOffset>> {
    let mut by_leader: BTreeMap<i32, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
    for &(partition, spec) in asks {
        let leader = client.leader(topic, partition, false).await?;
        by_leader.entry(leader).or_default().push((partition, spec));
    }
    // By partition: a lag table asks for thousands at once, so no lookup here may be linear.
    let mut found: HashMap<i32, ListedOffset> = HashMap::with_capacity(asks.len());
    for (leader, asks) in by_leader {
        let conn = client.broker(leader).await?;
        let resp = conn.call(|_version| request(topic, &asks)).await?;
        found.extend(
            parse(resp, topic, &asks)?
                .into_iter()
                .map(|f| (f.partition, f)),
        );
    }
    // Back in the order asked.
    asks.iter()
        .map(|(p, _)| found.get(p).copied().ok_or_else(|| missing(topic, *p)))
        .collect()
}

fn request(topic: &str, asks: &[(i32, OffsetSpec)]) -> ListOffsetsRequest {
    let partitions = asks
        .iter()
        .map(|&(p, spec)| {
            ListOffsetsPartition::default()
                .with_partition_index(p)
                .with_timestamp(spec.wire())
        })
        .collect();
    ListOffsetsRequest::default()
        // -1: a consumer, not a follower replica. The crate's default (0) would be a broker.
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(partitions)])
}

fn parse(
    resp: ListOffsetsResponse,
    topic: &str,
    asks: &[(i32, OffsetSpec)],
) -> Result<Vec<ListedOffset>> {
    let asked: HashSet<i32> = asks.iter().map(|(p, _)| *p).collect();
    let mut out = Vec::with_capacity(asks.len());
    for t in resp
        .topics
        .into_iter()
        .filter(|t| t.name.0.as_str() == topic)
    {
        for p in t.partitions {
            if !asked.contains(&p.partition_index) {
                continue;
            }
            if p.error_code != 0 {
                return Err(ServerError::new(p.error_code)
                    .topic(topic)
                    .partition(p.partition_index)
                    .into());
            }
            out.push(ListedOffset {
                partition: p.partition_index,
                offset: p.offset,
                timestamp: p.timestamp,
            });
        }
    }
    Ok(out)
}

fn missing(topic: &str, partition: i32) -> Error {
    ProtocolError::BadAnswer {
        api: "ListOffsets",
        reason: format!("no answer for {topic}-{partition}"),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn requests_encode_at_every_version_we_speak() {
        let asks = [(0, OffsetSpec::Earliest), (1, OffsetSpec::Timestamp(1234))];
        let req = request("orders", &asks);
        assert_eq!(req.replica_id, BrokerId(-1));
        let times: Vec<i64> = req.topics[0]
            .partitions
            .iter()
            .map(|p| p.timestamp)
            .collect();
        assert_eq!(times, vec![-2, 1234]);
        for v in 1..=7 {
            let mut buf = bytes::BytesMut::new();
            req.encode(&mut buf, v).unwrap();
        }
    }

    #[test]
    fn answers_become_offsets_or_partition_errors() {
        let answer = |code| {
            ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
                .with_name(topic_name("orders"))
                .with_partitions(vec![ListOffsetsPartitionResponse::default()
                    .with_partition_index(1)
                    .with_error_code(code)
                    .with_offset(42)
                    .with_timestamp(-1)])])
        };
        let asks = [(1, OffsetSpec::Latest)];
        let found = parse(answer(0), "orders", &asks).unwrap();
        assert_eq!(
            found,
            vec![ListedOffset {
                partition: 1,
                offset: 42,
                timestamp: -1
            }]
        );
        let err = parse(answer(6), "orders", &asks).unwrap_err();
        assert_eq!(err.server().unwrap().partition, Some(1));
        assert!(err.is_retriable());
        assert!(parse(answer(0), "other", &asks).unwrap().is_empty());
    }

    #[test]
    fn partitions_not_asked_for_are_left_out_of_large_answers() {
        let partitions = (0..10_000)
            .map(|p| {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(p)
                    .with_offset(i64::from(p) * 2)
                    .with_timestamp(-1)
            })
            .collect();
        let answer =
            ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
                .with_name(topic_name("orders"))
                .with_partitions(partitions)]);
        let asks: Vec<(i32, OffsetSpec)> = (0..10_000)
            .filter(|p| p % 3 == 0)
            .map(|p| (p, OffsetSpec::Latest))
            .collect();
        let found = parse(answer, "orders", &asks).unwrap();
        assert_eq!(found.len(), asks.len());
        assert!(found
            .iter()
            .all(|f| f.partition % 3 == 0 && f.offset == i64::from(f.partition) * 2));
    }
}
