//! Consumer group administration, as Kafka's admin client does it: ListGroups on every broker,
//! DescribeGroups, OffsetFetch and OffsetCommit at each group's coordinator (assignments decoded
//! from the bytes the leader sent), DeleteGroups.

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest,
    ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::Admin;
use crate::consumer::TopicPartition;
use crate::error::{Error, ProtocolError, Result, ServerError};
use crate::group::coordinator::Coordinator;
use crate::group::offsets::{commit_once, fetch_committed, CommitAs, CommittedOffsets};
use crate::group::protocol::{decode_assignment, decode_subscription, PROTOCOL_TYPE};
use crate::group::requests::{group_id, leave_answer, leave_request};
use crate::metadata::BrokerInfo;

/// The states a consumer group can be in, as brokers name them (the last two belong to the
/// KIP-848 protocol, and Kafka's tools accept them in filters).
pub const GROUP_STATES: &[&str] = &[
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Assigning",
    "Reconciling",
];

/// A state name as Kafka's tools take it: any case, e.g. `stable` for `Stable`.
pub fn parse_group_state(s: &str) -> Result<&'static str> {
    GROUP_STATES
        .iter()
        .find(|known| known.eq_ignore_ascii_case(s.trim()))
        .copied()
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "invalid state '{s}': valid states are {}",
                GROUP_STATES.join(", ")
            ))
        })
}

/// One group in a ListGroups answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    /// "consumer" for consumer groups; "" for groups that only store offsets.
    pub protocol_type: String,
    /// Known from ListGroups v4 on.
    pub state: Option<String>,
}

impl GroupListing {
    /// What Kafka's tools count as a consumer group.
    pub fn is_consumer_group(&self) -> bool {
        self.protocol_type == PROTOCOL_TYPE || self.protocol_type.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    /// As the broker saw it, e.g. `/127.0.0.1`.
    pub client_host: String,
    /// Decoded from the leader's bytes; empty outside the Stable state.
    pub assignment: Vec<TopicPartition>,
    /// The topics the member subscribed to, from its JoinGroup metadata: known while it waits
    /// for an assignment too.
    pub subscription: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    /// Empty, PreparingRebalance, CompletingRebalance, Stable or Dead (unknown groups are Dead).
    pub state: String,
    pub protocol_type: String,
    /// The assignor in use (DescribeGroups' protocol data).
    pub assignment_strategy: String,
    pub coordinator: BrokerInfo,
    pub members: Vec<MemberDescription>,
}

impl GroupDescription {
    pub fn is_rebalancing(&self) -> bool {
        matches!(
            self.state.as_str(),
            "PreparingRebalance" | "CompletingRebalance" | "Assigning" | "Reconciling"
        )
    }
}

impl Admin {
    /// Every group on every broker, optionally only those in `states`. A broker whose
    /// ListGroups predates v4 (KIP-518) names no states and takes no filter: its groups' states
    /// come from DescribeGroups, and the filter is applied here.
    pub async fn list_groups(&self, states: &[&str]) -> Result<Vec<GroupListing>> {
        let cluster = self.cluster().await?;
        let ids: Vec<i32> = cluster.brokers.keys().copied().collect();
        let mut out: BTreeMap<String, GroupListing> = BTreeMap::new();
        for id in ids {
            let attempt = || async {
                let conn = self.client().broker(id).await?;
                let resp = conn.call(|v| list_request(states, v)).await?;
                Ok(list_answer(resp)?)
            };
            let listed = self.retrying("ListGroups", attempt).await?;
            for g in listed {
                out.insert(g.group_id.clone(), g);
            }
        }
        for listing in out.values_mut().filter(|g| g.state.is_none()) {
            listing.state = Some(self.describe_group(&listing.group_id).await?.state);
        }
        let wanted = |g: &GroupListing| {
            states.is_empty() || g.state.as_deref().is_some_and(|s| states.contains(&s))
        };
        Ok(out.into_values().filter(wanted).collect())
    }

    /// One group as its coordinator describes it. An unknown group is described as Dead with
    /// no members, as Kafka does.
    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        let coordinator = Coordinator::sharing(self.client(), group);
        let attempt = || async {
            let resp = coordinator.call(|_| describe_request(group), None).await?;
            let node = coordinator
                .known()
                .ok_or_else(|| ProtocolError::BadAnswer {
                    api: "FindCoordinator",
                    reason: format!("no coordinator for group {group}"),
                })?;
            describe_answer(resp, group, node, &coordinator)
        };
        self.retrying("DescribeGroups", attempt).await
    }

    /// The group's committed offsets: for `partitions`, or (`None`) every partition it committed.
    pub async fn list_group_offsets(
        &self,
        group: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<CommittedOffsets> {
        fetch_committed(&Coordinator::sharing(self.client(), group), partitions).await
    }

    /// Commits `offsets` (partition, next offset to read) for a group with no active members, as
    /// Kafka's `alterConsumerGroupOffsets` does: OffsetCommit with generation -1 and no member
    /// id. One answer per partition, in partition order: a group with members refuses every
    /// partition (UNKNOWN_MEMBER_ID), an unknown partition fails alone. A coordinator that moved
    /// or is loading is retried, as Kafka's admin retries it.
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<Vec<(TopicPartition, Result<(), ServerError>)>> {
        let coordinator = Coordinator::sharing(self.client(), group);
        let attempt = || async {
            let refused = commit_once(&coordinator, &CommitAs::NOBODY, offsets).await?;
            let loading = ResponseError::CoordinatorLoadInProgress.code();
            if refused.iter().any(|(_, code)| *code == loading) {
                return Err(Error::from(ServerError::new(loading)));
            }
            Ok(refused)
        };
        let refused = self.retrying("OffsetCommit", attempt).await?;
        Ok(offsets
            .keys()
            .map(|tp| {
                let result = match refused.iter().find(|(r, _)| r == tp) {
                    None => Ok(()),
                    Some((_, code)) => Err(ServerError::new(*code)
                        .topic(tp.topic.clone())
                        .partition(tp.partition)
                        .message(Some(format!("committing for group {group}")))),
                };
                (tp.clone(), result)
            })
            .collect())
    }

    /// Removes a member from its group, as LeaveGroup from the member itself would: by member
    /// id (and instance id, for a static member; Kafka's `removeMembersFromConsumerGroup` does
    /// the same by instance id alone). For a member that is gone without leaving (its process
    /// killed), whose group would otherwise wait out the session timeout before it can be
    /// deleted. UNKNOWN_MEMBER_ID means it has left meanwhile: that is no error.
    pub async fn remove_group_member(&self, group: &str, member: &MemberDescription) -> Result<()> {
        let coordinator = Coordinator::sharing(self.client(), group);
        let instance = member.group_instance_id.as_deref();
        let attempt = || async {
            let build =
                |v| leave_request(group, &member.member_id, instance, "removed by an admin", v);
            let resp = coordinator.call(build, None).await?;
            match leave_answer(resp) {
                Ok(()) => Ok(()),
                Err(e) if e.is(ResponseError::UnknownMemberId) => Ok(()),
                Err(e) => {
                    // A coordinator that moved is forgotten, so the retry asks for the new one.
                    let _ = coordinator.check(e.code);
                    Err(e.into())
                }
            }
        };
        self.retrying("LeaveGroup", attempt).await
    }

    /// Deletes groups (only Empty ones can go: NON_EMPTY_GROUP otherwise), one answer each.
    pub async fn delete_groups(
        &self,
        groups: &[&str],
    ) -> Result<Vec<(String, Result<(), ServerError>)>> {
        let mut out = Vec::with_capacity(groups.len());
        for &group in groups {
            let coordinator = Coordinator::sharing(self.client(), group);
            let attempt = || async {
                let resp = coordinator
                    .call(
                        |_| DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]),
                        None,
                    )
                    .await?;
                let code = resp
                    .results
                    .iter()
                    .find(|r| r.group_id.0.as_str() == group)
                    .map(|r| r.error_code)
                    .ok_or_else(|| ProtocolError::BadAnswer {
                        api: "DeleteGroups",
                        reason: format!("no answer for group {group}"),
                    })?;
                // Only a moved or loading coordinator is worth another try; the rest is the answer.
                match coordinator.check(code) {
                    Err(e) if e.is_retriable() => Err(Error::from(e)),
                    result => Ok(result.map_err(|e| e.message(Some(format!("group {group}"))))),
                }
            };
            let result = self.retrying("DeleteGroups", attempt).await?;
            out.push((group.to_string(), result));
        }
        Ok(out)
    }
}

fn list_request(states: &[&str], version: i16) -> ListGroupsRequest {
    let mut req = ListGroupsRequest::default();
    if version >= 4 {
        req.states_filter = states
            .iter()
            .map(|s| StrBytes::from_string(s.to_string()))
            .collect();
    }
    req
}

fn list_answer(resp: ListGroupsResponse) -> Result<Vec<GroupListing>, ServerError> {
    ServerError::check(resp.error_code)?;
    Ok(resp
        .groups
        .into_iter()
        .map(|g| GroupListing {
            group_id: g.group_id.0.to_string(),
            protocol_type: g.protocol_type.to_string(),
            state: Some(g.group_state.to_string()).filter(|s| !s.is_empty()),
        })
        .collect())
}

/// Authorized operations are not asked for (Kafka then answers i32::MIN for them).
fn describe_request(group: &str) -> DescribeGroupsRequest {
    DescribeGroupsRequest::default().with_groups(vec![group_id(group)])
}

fn describe_answer(
    resp: DescribeGroupsResponse,
    group: &str,
    coordinator: BrokerInfo,
    route: &Coordinator,
) -> Result<GroupDescription> {
    let g = resp
        .groups
        .into_iter()
        .find(|g| g.group_id.0.as_str() == group)
        .ok_or_else(|| ProtocolError::BadAnswer {
            api: "DescribeGroups",
            reason: format!("no answer for group {group}"),
        })?;
    route.check(g.error_code).map_err(|e| {
        e.message(
            g.error_message
                .map(|m| m.to_string())
                .or(Some(format!("group {group}"))),
        )
    })?;
    // Kafka's admin decodes assignments of consumer groups only (and of groups with no type yet).
    let consumer = g.protocol_type.is_empty() || g.protocol_type.as_str() == PROTOCOL_TYPE;
    let mut members = Vec::with_capacity(g.members.len());
    for m in g.members {
        let decode_error = |what: &str, reason: String| ProtocolError::Decode {
            api: "DescribeGroups",
            version: -1,
            reason: format!("the {what} of member {}: {reason}", m.member_id),
        };
        let (assignment, subscription) = if consumer {
            let assignment = decode_assignment(&m.member_assignment)
                .map_err(|reason| decode_error("assignment", reason))?;
            // Only a help to count the topics a member waits for (Kafka's admin never decodes
            // it): metadata absent, or of a subscription version this client does not know, is
            // no subscription rather than a failed describe.
            let subscription = match decode_subscription(&m.member_metadata) {
                Ok(subscription) => subscription.topics,
                Err(reason) => {
                    if !m.member_metadata.is_empty() {
                        tracing::debug!(member = %m.member_id, reason, "subscription not read");
                    }
                    Vec::new()
                }
            };
            (assignment, subscription)
        } else {
            (Vec::new(), Vec::new())
        };
        members.push(MemberDescription {
            member_id: m.member_id.to_string(),
            group_instance_id: m.group_instance_id.map(|i| i.to_string()),
            client_id: m.client_id.to_string(),
            client_host: m.client_host.to_string(),
            assignment,
            subscription,
        });
    }
    Ok(GroupDescription {
        group_id: group.to_string(),
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        assignment_strategy: g.protocol_data.to_string(),
        coordinator,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::protocol::{encode_assignment, encode_subscription};
    use kafka_protocol::messages::describe_groups_response::{
        DescribedGroup, DescribedGroupMember,
    };
    use kafka_protocol::protocol::Encodable;

    fn text(s: &str) -> StrBytes {
        StrBytes::from_string(s.to_string())
    }

    #[test]
    fn requests_encode_at_every_version_we_speak() {
        for v in 0..=4 {
            let states = if v >= 4 { &["Stable"][..] } else { &[][..] };
            list_request(states, v)
                .encode(&mut bytes::BytesMut::new(), v)
                .unwrap();
        }
        for v in 0..=5 {
            describe_request("g")
                .encode(&mut bytes::BytesMut::new(), v)
                .unwrap();
        }
        for v in 0..=2 {
            DeleteGroupsRequest::default()
                .with_groups_names(vec![group_id("g")])
                .encode(&mut bytes::BytesMut::new(), v)
                .unwrap();
        }
    }

    #[test]
    fn states_parse_in_any_case() {
        assert_eq!(parse_group_state("stable").unwrap(), "Stable");
        assert_eq!(
            parse_group_state(" PreparingRebalance").unwrap(),
            "PreparingRebalance"
        );
        assert!(parse_group_state("sleeping").is_err());
    }

    fn node() -> BrokerInfo {
        BrokerInfo {
            id: 1,
            host: "h".into(),
            port: 1,
            rack: None,
        }
    }

    #[test]
    fn descriptions_decode_consumer_assignments() {
        let client = crate::Client::unconnected(crate::ClientConfig::new("127.0.0.1:9"));
        let route = Coordinator::sharing(&client, "g");
        let member = DescribedGroupMember::default()
            .with_member_id(text("m-1"))
            .with_client_id(text("c"))
            .with_client_host(text("/127.0.0.1"))
            .with_member_metadata(encode_subscription(&["t".to_string()], &[], -1, None))
            .with_member_assignment(encode_assignment(&[TopicPartition::new("t", 2)]));
        let resp = DescribeGroupsResponse::default().with_groups(vec![DescribedGroup::default()
            .with_group_id(group_id("g"))
            .with_group_state(text("Stable"))
            .with_protocol_type(text("consumer"))
            .with_protocol_data(text("range"))
            .with_members(vec![member.clone()])]);
        let d = describe_answer(resp, "g", node(), &route).unwrap();
        assert_eq!(d.assignment_strategy, "range");
        assert_eq!(d.members[0].assignment, vec![TopicPartition::new("t", 2)]);
        assert_eq!(d.members[0].subscription, ["t"]);

        let broken = member.with_member_assignment(bytes::Bytes::from_static(&[0, 1, 0]));
        let resp = DescribeGroupsResponse::default().with_groups(vec![DescribedGroup::default()
            .with_group_id(group_id("g"))
            .with_protocol_type(text("consumer"))
            .with_members(vec![broken])]);
        assert!(describe_answer(resp, "g", node(), &route).is_err());
        let missing = DescribeGroupsResponse::default();
        assert!(describe_answer(missing, "g", node(), &route).is_err());
    }
}
