//! One rebalance round from the member's side: JoinGroup (again with the member id the
//! coordinator hands out, KIP-394), the leader's assignment over every member's subscription
//! and fresh partition counts, and SyncGroup. What the round means for the member's partitions
//! (revoking, fetching committed offsets) is the caller's business.
//!
//! Errors that only mean "join again" (the group moved on, our member id or generation is stale)
//! change the member state and come back as `Ok(None)`; the caller loops. Errors worth retrying
//! later (the coordinator moved or is loading) come back as retriable errors; the rest are final.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, SyncGroupRequest};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::assignor::{
    Assignor, GroupAssignment, MemberSubscription, PartitionCounts, RebalanceProtocol,
};
use super::config::millis;
use super::member::Member;
use super::protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use super::requests::{
    join_answer, join_request, sync_answer, sync_request, JoinOutcome, JoinParams, Joined,
    SyncParams,
};
use super::state::Generation;
use crate::consumer::TopicPartition;
use crate::error::{Error, ProtocolError, Result, ServerError};

/// Kafka's JOIN_GROUP_TIMEOUT_LAPSE: a JoinGroup may be parked for the whole rebalance timeout,
/// so it gets that much and a margin before the client gives up on it.
const JOIN_TIMEOUT_LAPSE: Duration = Duration::from_secs(5);

/// A completed round.
#[derive(Debug)]
pub struct Synced {
    pub generation: Generation,
    pub assignment: Vec<TopicPartition>,
    /// For the leader: the partition count of every topic the group subscribes to (0 for a
    /// topic that does not exist), to notice when one changes.
    pub leader_counts: Option<PartitionCounts>,
}

/// Joins and syncs once. `owned` is what the member still holds (cooperative members keep
/// their partitions through the rebalance).
pub async fn join_and_sync(
    member: &Member,
    subscription: &[String],
    owned: &[TopicPartition],
    reason: &str,
) -> Result<Option<Synced>> {
    let Some(joined) = join(member, subscription, owned, reason).await? else {
        return Ok(None);
    };
    let generation = Generation {
        id: joined.generation_id,
        member_id: joined.member_id.clone(),
        protocol: joined.protocol.clone(),
    };
    member
        .state()
        .joined(generation.clone(), joined.is_leader(), Instant::now());
    member.wake_heartbeat();
    tracing::info!(
        group = %member.config.group_id,
        generation = generation.id,
        member_id = %generation.member_id,
        leader = joined.is_leader(),
        protocol = generation.protocol.as_deref().unwrap_or("-"),
        "joined the group"
    );

    let (assignments, leader_counts) = if joined.is_leader() {
        let (assignments, counts) = lead(member, &joined).await?;
        (assignments, Some(counts))
    } else {
        (Vec::new(), None)
    };
    let Some(bytes) = sync(member, &generation, assignments).await? else {
        return Ok(None);
    };
    let assignment = decode_assignment(&bytes).map_err(|reason| ProtocolError::Decode {
        api: "SyncGroup",
        version: -1,
        reason: format!("the member's assignment: {reason}"),
    })?;
    let mut state = member.state();
    // The heartbeat task may have learned meanwhile that this generation is over.
    if state.generation() != &generation {
        return Ok(None);
    }
    state.synced(Instant::now(), member.config.heartbeat_interval);
    drop(state);
    member.wake_heartbeat();
    Ok(Some(Synced {
        generation,
        assignment,
        leader_counts,
    }))
}

/// JoinGroup until the coordinator answers with a generation, or with an error.
async fn join(
    member: &Member,
    subscription: &[String],
    owned: &[TopicPartition],
    reason: &str,
) -> Result<Option<Joined>> {
    let config = &member.config;
    let version = member.coordinator.version(ApiKey::JoinGroup).await?;
    if config.group_instance_id.is_some() && version < 5 {
        return Err(Error::InvalidArgument(format!(
            "static membership (group.instance.id) needs JoinGroup v5, the coordinator speaks v{version}"
        )));
    }
    let timeout = config.max_poll_interval + JOIN_TIMEOUT_LAPSE;
    // MEMBER_ID_REQUIRED comes at most once per join; a second one is a broker bug, and a loop
    // bound keeps it from spinning forever.
    for _ in 0..3 {
        let generation = {
            let mut state = member.state();
            state.start_join();
            state.generation().clone()
        };
        let protocols: Vec<(&'static str, Bytes)> = config
            .assignors
            .iter()
            .map(|a| {
                let user_data = a.user_data(generation.id);
                let bytes = encode_subscription(subscription, owned, generation.id, user_data);
                (a.name(), bytes)
            })
            .collect();
        let params = JoinParams {
            group: &config.group_id,
            session_timeout_ms: millis(config.session_timeout),
            rebalance_timeout_ms: millis(config.max_poll_interval),
            member_id: &generation.member_id,
            instance_id: config.group_instance_id.as_deref(),
            protocols,
            reason: Some(reason),
        };
        let resp = member
            .coordinator
            .call(
                |v| -> JoinGroupRequest { join_request(&params, v) },
                Some(timeout),
            )
            .await?;
        match join_answer(resp) {
            JoinOutcome::Joined(joined) => return Ok(Some(joined)),
            JoinOutcome::MemberIdRequired(id) => {
                tracing::debug!(member_id = %id, "the coordinator asks to join with a member id");
                member.state().member_id_assigned(id);
            }
            JoinOutcome::Failed(e) => return membership_error(member, e, "JoinGroup"),
        }
    }
    Err(ProtocolError::BadAnswer {
        api: "JoinGroup",
        reason: "MEMBER_ID_REQUIRED again after joining with the member id given".into(),
    }
    .into())
}

async fn sync(
    member: &Member,
    generation: &Generation,
    assignments: Vec<(String, Bytes)>,
) -> Result<Option<Bytes>> {
    let config = &member.config;
    let params = SyncParams {
        group: &config.group_id,
        generation_id: generation.id,
        member_id: &generation.member_id,
        instance_id: config.group_instance_id.as_deref(),
        protocol: generation.protocol.as_deref(),
        assignments,
    };
    let resp = member
        .coordinator
        .call(|v| -> SyncGroupRequest { sync_request(&params, v) }, None)
        .await?;
    match sync_answer(resp, generation.protocol.as_deref()) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) => membership_error(member, e, "SyncGroup"),
    }
}

/// What a JoinGroup or SyncGroup error means (Kafka's `JoinGroupResponseHandler` and
/// `SyncGroupResponseHandler`).
fn membership_error<T>(member: &Member, e: ServerError, api: &str) -> Result<Option<T>> {
    let mut state = member.state();
    match e.kind() {
        ResponseError::UnknownMemberId => {
            state.reset_generation(
                &format!("{api}: the coordinator does not know our member id"),
                false,
            );
            Ok(None)
        }
        ResponseError::IllegalGeneration => {
            state.reset_generation(&format!("{api}: our generation is stale"), true);
            Ok(None)
        }
        ResponseError::RebalanceInProgress => {
            state.request_rejoin(format!("{api}: the group started another rebalance"));
            Ok(None)
        }
        ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
            drop(state);
            let _ = member.coordinator.check(e.code);
            Err(e.into())
        }
        ResponseError::FencedInstanceId => {
            let err: Error = e
                .message(Some(format!(
                    "another member with group.instance.id {} joined",
                    member.config.group_instance_id.as_deref().unwrap_or("?")
                )))
                .into();
            state.fail(err.clone());
            Err(err)
        }
        _ => Err(e.into()),
    }
}

/// The leader's part: decode every subscription, count the partitions of every subscribed
/// topic afresh, run the assignor the group chose, and encode each member's share. A static
/// leader back within its session (v9 `skip_assignment`) keeps the group's assignment and sends
/// none, but still takes the counts, since the leader is the one watching them (as in Kafka).
async fn lead(member: &Member, joined: &Joined) -> Result<(Vec<(String, Bytes)>, PartitionCounts)> {
    let config = &member.config;
    let chosen = joined.protocol.as_deref().unwrap_or_default();
    let assignor = config
        .assignors
        .iter()
        .find(|a| a.name() == chosen)
        .ok_or_else(|| ProtocolError::BadAnswer {
            api: "JoinGroup",
            reason: format!(
                "the coordinator chose assignor '{chosen}', which this member did not offer"
            ),
        })?;
    let members = joined
        .members
        .iter()
        .map(|m| subscription_of(assignor.as_ref(), m))
        .collect::<Result<Vec<_>>>()?;
    let topics: BTreeSet<&str> = members
        .iter()
        .flat_map(|m| m.topics.iter().map(String::as_str))
        .collect();
    let counts = partition_counts(member, &topics).await?;
    if joined.skip_assignment {
        tracing::info!(group = %config.group_id, "returning static leader: assignment kept");
        return Ok((Vec::new(), counts));
    }
    let existing: PartitionCounts = counts
        .iter()
        .filter(|(_, &c)| c > 0)
        .map(|(t, &c)| (t.clone(), c))
        .collect();
    let assignment = assignor.assign(&existing, &members);
    if assignor.rebalance_protocol() == RebalanceProtocol::Cooperative {
        check_cooperative(&assignment, &members)?;
    }
    tracing::info!(
        group = %config.group_id,
        assignor = assignor.name(),
        members = members.len(),
        "assigned partitions as leader"
    );
    let encoded = assignment
        .iter()
        .map(|(member_id, partitions)| (member_id.clone(), encode_assignment(partitions)))
        .collect();
    Ok((encoded, counts))
}

fn subscription_of(
    assignor: &dyn Assignor,
    m: &super::requests::JoinedMember,
) -> Result<MemberSubscription> {
    let sub = decode_subscription(&m.metadata).map_err(|reason| ProtocolError::Decode {
        api: "JoinGroup",
        version: -1,
        reason: format!("member {}'s subscription: {reason}", m.member_id),
    })?;
    let generation = sub.generation.or_else(|| {
        sub.user_data
            .as_deref()
            .and_then(|d| assignor.generation_from_user_data(d))
    });
    let mut out = MemberSubscription::new(m.member_id.clone(), sub.topics);
    out.group_instance_id = m.instance_id.clone();
    out.owned = sub.owned;
    out.generation = generation;
    Ok(out)
}

/// Fresh counts for `topics` (0 for a topic that does not exist), asked in one Metadata request.
async fn partition_counts(member: &Member, topics: &BTreeSet<&str>) -> Result<PartitionCounts> {
    let client = member.coordinator.client();
    let names: Vec<&str> = topics.iter().copied().collect();
    let auto_create = member.config.allow_auto_create_topics;
    let snapshot = client
        .config()
        .retry
        .run(
            "Metadata",
            || client.fetch_metadata(Some(&names), auto_create),
            |_| {},
        )
        .await?;
    Ok(names
        .iter()
        .map(|&name| {
            let count = match snapshot.topic(name) {
                Some(Ok(info)) => info.partition_count(),
                Some(Err(e)) => {
                    tracing::warn!(topic = name, %e, "subscribed topic not assignable");
                    0
                }
                None => 0,
            };
            (name.to_string(), count)
        })
        .collect())
}

/// KIP-429's rule, checked as Kafka's leader checks any cooperative assignor's answer: no
/// partition is added to one member in the same round another member must revoke it.
fn check_cooperative(assignment: &GroupAssignment, members: &[MemberSubscription]) -> Result<()> {
    let mut added: BTreeMap<&TopicPartition, &str> = BTreeMap::new();
    let mut revoked: BTreeSet<&TopicPartition> = BTreeSet::new();
    for m in members {
        let assigned = assignment.get(&m.member_id).map_or(&[][..], Vec::as_slice);
        for tp in assigned.iter().filter(|tp| !m.owned.contains(tp)) {
            added.insert(tp, &m.member_id);
        }
        revoked.extend(m.owned.iter().filter(|tp| !assigned.contains(tp)));
    }
    match added.iter().find(|(tp, _)| revoked.contains(*tp)) {
        None => Ok(()),
        Some((tp, to)) => Err(Error::InvalidArgument(format!(
            "the cooperative assignor gave {tp} to {to} while another member must revoke it first"
        ))),
    }
}
