//! OffsetDelete (KIP-496) as Kafka's `ClassicGroup` decides it: a group with members may drop the
//! offsets of topics none of them subscribes to, never of one they read.
//!
//! The subscriptions are the topics in each member's metadata for the protocol the group chose,
//! read through the consumer protocol's version-0 layout (which every later version starts
//! with), once per generation, as Kafka computes them in `initNextGeneration`. Metadata that does
//! not parse leaves them unknown, and a consumer group with unknown subscriptions counts as
//! subscribed to every topic, so nothing it may be reading loses its offset.

use std::collections::BTreeSet;

use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError;
use tracing::warn;

use super::{Group, GroupState};

/// The protocol type of consumer groups.
const CONSUMER: &str = "consumer";

impl Group {
    /// Whether offsets of this group may be deleted at all: `GROUP_ID_NOT_FOUND` for a dead
    /// group, `NON_EMPTY_GROUP` for an active group that is not a consumer group (its members'
    /// subscriptions cannot be known).
    pub fn validate_offset_delete(&self) -> Result<(), ResponseError> {
        match self.state {
            GroupState::Dead => Err(ResponseError::GroupIdNotFound),
            GroupState::Stable
            | GroupState::PreparingRebalance
            | GroupState::CompletingRebalance
                if !self.uses_consumer_protocol() =>
            {
                Err(ResponseError::NonEmptyGroup)
            }
            _ => Ok(()),
        }
    }

    /// True when a member of the current generation subscribes to `topic`, or when the group is
    /// a consumer group whose subscriptions could not be read.
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        match &self.subscribed_topics {
            Some(topics) => topics.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }

    fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER)
    }

    /// Kafka's `computeSubscribedTopics`, called when a generation starts.
    pub(super) fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for member in self.members.values() {
            match subscription_topics(&member.metadata(protocol)) {
                Some(theirs) => topics.extend(theirs),
                None => {
                    warn!(group = %self.id, member = %member.id, protocol,
                        "subscription metadata does not parse: the group's topics are unknown");
                    return None;
                }
            }
        }
        Some(topics)
    }
}

/// The topics of a serialized consumer-protocol subscription: its version, then the version-0
/// fields.
fn subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut buf = metadata.get(2..)?;
    let subscription = ConsumerProtocolSubscription::decode(&mut buf, 0).ok()?;
    Some(subscription.topics.iter().map(|t| t.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, Bytes, BytesMut};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::super::tests::{answered, join_request, Harness};
    use super::*;
    use crate::group::messages::Protocol;

    /// A consumer's "range" metadata subscribing to `topics`, at `version` (3 adds rack and
    /// owned partitions after the version-0 fields).
    fn subscribing(topics: &[&str], version: i16) -> Bytes {
        let subscription = ConsumerProtocolSubscription::default().with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string(t.to_string()))
                .collect(),
        );
        let mut buf = BytesMut::new();
        buf.put_i16(version);
        subscription.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    fn join_with(h: &mut Harness, metadata: Bytes) -> String {
        let mut request = join_request("", &["range"]);
        request.protocols = vec![Protocol {
            name: "range".into(),
            metadata: metadata.clone(),
        }];
        let first = h.join_now(request.clone());
        request.member_id = first.member_id.clone();
        let mut rx = h.join(request);
        h.advance(0);
        answered(&mut rx).expect("the join completes");
        first.member_id
    }

    #[test]
    fn members_protect_the_topics_they_subscribe_to() {
        let mut h = Harness::new();
        join_with(&mut h, subscribing(&["orders", "audit"], 3));
        assert_eq!(h.group.state(), GroupState::CompletingRebalance);
        assert_eq!(h.group.validate_offset_delete(), Ok(()));
        assert!(h.group.is_subscribed_to("orders"));
        assert!(h.group.is_subscribed_to("audit"));
        assert!(!h.group.is_subscribed_to("payments"));
    }

    #[test]
    fn unreadable_subscriptions_protect_every_topic() {
        let mut h = Harness::new();
        join_with(&mut h, Bytes::from_static(b"not a subscription"));
        assert!(h.group.is_subscribed_to("payments"));
    }

    #[test]
    fn an_empty_or_simple_group_protects_nothing_and_a_dead_one_is_not_found() {
        let mut h = Harness::new();
        assert_eq!(h.group.validate_offset_delete(), Ok(()));
        assert!(!h.group.is_subscribed_to("orders"), "a simple group");
        h.group.delete().unwrap();
        assert_eq!(
            h.group.validate_offset_delete(),
            Err(ResponseError::GroupIdNotFound)
        );
    }

    #[test]
    fn an_active_group_of_another_protocol_is_not_empty() {
        let mut h = Harness::new();
        let mut request = join_request("", &["range"]);
        request.protocol_type = "connect".into();
        let first = h.join_now(request.clone());
        request.member_id = first.member_id;
        let mut rx = h.join(request);
        h.advance(0);
        answered(&mut rx).unwrap();
        assert_eq!(
            h.group.validate_offset_delete(),
            Err(ResponseError::NonEmptyGroup)
        );
        assert!(!h.group.is_subscribed_to("orders"));
    }

    #[test]
    fn subscriptions_of_every_version_read_their_topics() {
        for version in 0..=3 {
            assert_eq!(
                subscription_topics(&subscribing(&["a", "b"], version)),
                Some(vec!["a".to_string(), "b".to_string()]),
                "v{version}"
            );
        }
        assert_eq!(subscription_topics(&[0]), None);
        assert_eq!(subscription_topics(&[0, 0, 0xff, 0xff, 0xff]), None);
    }
}
