//! The consumer protocol: what members of protocol type `"consumer"` put in JoinGroup metadata
//! (their subscription) and what the leader puts in SyncGroup (each member's assignment). The
//! broker stores both as opaque bytes; Kafka's admin tools and every other client read them, so
//! they are the crate's `ConsumerProtocolSubscription`/`ConsumerProtocolAssignment`, each
//! preceded by its i16 version.
//!
//! Versions only ever append fields, so a reader takes the prefix it knows of a newer version,
//! as Kafka's own reader does.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::client::topic_name;
use crate::consumer::TopicPartition;

/// The protocol type of consumer groups.
pub const PROTOCOL_TYPE: &str = "consumer";

/// v1 added owned partitions (needed by cooperative rebalancing), v2 the generation they belong
/// to; v3's rack id is of no use to a single-rack cluster.
const SUBSCRIPTION_VERSION: i16 = 2;
/// Every version carries the same fields; v1 matches the subscription era.
const ASSIGNMENT_VERSION: i16 = 1;
const NEWEST: i16 = 3;

/// A member's subscription as read from JoinGroup metadata.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    pub topics: Vec<String>,
    pub user_data: Option<Bytes>,
    pub owned: Vec<TopicPartition>,
    /// Present from v2 on (-1 for a member that never had a generation).
    pub generation: Option<i32>,
}

pub fn encode_subscription(
    topics: &[String],
    owned: &[TopicPartition],
    generation: i32,
    user_data: Option<Bytes>,
) -> Bytes {
    let message = ConsumerProtocolSubscription::default()
        .with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_user_data(user_data)
        .with_owned_partitions(
            by_topic(owned)
                .into_iter()
                .map(|(topic, partitions)| {
                    OwnedTopic::default()
                        .with_topic(topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_generation_id(generation);
    encode_versioned(&message, SUBSCRIPTION_VERSION)
}

pub fn decode_subscription(bytes: &[u8]) -> Result<Subscription, String> {
    let (version, m): (i16, ConsumerProtocolSubscription) = decode_versioned(bytes)?;
    Ok(Subscription {
        topics: m.topics.iter().map(|t| t.to_string()).collect(),
        user_data: m.user_data,
        owned: m
            .owned_partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| TopicPartition::new(t.topic.0.to_string(), p))
            })
            .collect(),
        generation: (version >= 2).then_some(m.generation_id),
    })
}

pub fn encode_assignment(partitions: &[TopicPartition]) -> Bytes {
    let message = ConsumerProtocolAssignment::default().with_assigned_partitions(
        by_topic(partitions)
            .into_iter()
            .map(|(topic, partitions)| {
                AssignedTopic::default()
                    .with_topic(topic_name(topic))
                    .with_partitions(partitions)
            })
            .collect(),
    );
    encode_versioned(&message, ASSIGNMENT_VERSION)
}

/// The partitions in an assignment, sorted. Empty bytes (what the broker hands a member the
/// leader left out) mean no partitions.
pub fn decode_assignment(bytes: &[u8]) -> Result<Vec<TopicPartition>, String> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let (_, m): (i16, ConsumerProtocolAssignment) = decode_versioned(bytes)?;
    let mut out: Vec<TopicPartition> = m
        .assigned_partitions
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| TopicPartition::new(t.topic.0.to_string(), p))
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// Partition numbers grouped by topic, topics and partitions sorted.
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        out.entry(tp.topic.as_str()).or_default().push(tp.partition);
    }
    for partitions in out.values_mut() {
        partitions.sort_unstable();
        partitions.dedup();
    }
    out
}

fn encode_versioned(message: &impl Encodable, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    message
        .encode(&mut buf, version)
        // Every field exists at the versions chosen, and every string fits an i16 length: topic
        // names are validated or were themselves read from i16-length strings.
        .expect("consumer protocol messages always encode");
    buf.freeze()
}

fn decode_versioned<M: Decodable>(bytes: &[u8]) -> Result<(i16, M), String> {
    let mut buf = bytes;
    if buf.len() < 2 {
        return Err(format!("{} bytes, too short for a version", buf.len()));
    }
    let version = buf.get_i16();
    if version < 0 {
        return Err(format!("version {version}"));
    }
    let message = M::decode(&mut buf, version.min(NEWEST)).map_err(|e| e.to_string())?;
    Ok((version, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(list: &[(&str, i32)]) -> Vec<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect()
    }

    #[test]
    fn subscriptions_round_trip_with_owned_partitions_and_generation() {
        let owned = tps(&[("b", 1), ("a", 2), ("a", 0)]);
        let bytes = encode_subscription(
            &["a".into(), "b".into()],
            &owned,
            7,
            Some(Bytes::from_static(b"\0\0\0\x07")),
        );
        assert_eq!(&bytes[..2], &[0, 2], "sent as v2");
        let s = decode_subscription(&bytes).unwrap();
        assert_eq!(s.topics, ["a", "b"]);
        assert_eq!(s.owned, tps(&[("a", 0), ("a", 2), ("b", 1)]));
        assert_eq!(s.generation, Some(7));
        assert_eq!(s.user_data.as_deref(), Some(&b"\0\0\0\x07"[..]));
    }

    #[test]
    fn older_and_newer_subscriptions_are_read() {
        // v0 as kafka-python 2.0.2 writes it: version, topics, user data.
        let v0 = ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("orders")]);
        let mut bytes = BytesMut::new();
        bytes.put_i16(0);
        v0.encode(&mut bytes, 0).unwrap();
        let s = decode_subscription(&bytes).unwrap();
        assert_eq!((s.topics.len(), s.generation), (1, None));

        // A future v4 that appends a field: the v3 prefix is read.
        let v3 = ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("orders")])
            .with_generation_id(3);
        let mut bytes = BytesMut::new();
        bytes.put_i16(4);
        v3.encode(&mut bytes, 3).unwrap();
        bytes.put_slice(b"future");
        assert_eq!(decode_subscription(&bytes).unwrap().generation, Some(3));
    }

    #[test]
    fn assignments_round_trip_and_empty_bytes_mean_nothing() {
        let bytes = encode_assignment(&tps(&[("t", 2), ("t", 0), ("s", 1)]));
        assert_eq!(
            decode_assignment(&bytes).unwrap(),
            tps(&[("s", 1), ("t", 0), ("t", 2)])
        );
        assert!(decode_assignment(&[]).unwrap().is_empty());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_assignment(&[0]).is_err());
        assert!(decode_assignment(&[0, 1, 0, 0, 0, 9]).is_err());
        assert!(decode_subscription(&[0xff, 0xff]).is_err());
        assert!(decode_subscription(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_err());
    }
}
