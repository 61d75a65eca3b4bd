//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup: requests translated for the group
//! coordinator, its answers encoded per version.

use std::net::SocketAddr;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, RequestHeader, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::group::member::java_client_host;
use crate::group::messages::{
    JoinRequest, JoinResult, LeavingMember, Protocol, SyncRequest, SyncResult,
};
use crate::state::BrokerState;

/// The wire's error code for an optional error.
pub(super) fn error_code(error: Option<ResponseError>) -> i16 {
    error.map_or(0, |e| e.code())
}

/// A string field from an owned `String`, without copying it again.
pub(super) fn owned(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

pub async fn join(
    state: &BrokerState,
    header: &RequestHeader,
    peer: SocketAddr,
    request: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let join = JoinRequest {
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|i| i.to_string()),
        client_id: header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        client_host: java_client_host(peer.ip()),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout for both.
        rebalance_timeout_ms: if version == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata,
            })
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
    };
    let result = state.groups.join(&request.group_id, join).await;
    join_response(result, version)
}

fn join_response(result: JoinResult, version: i16) -> JoinGroupResponse {
    // Before v7 the protocol name is not nullable: "" stands for none; from v7 null does.
    let protocol_name = match result.protocol_name.filter(|n| !n.is_empty()) {
        Some(name) => Some(owned(name)),
        None if version < 7 => Some(StrBytes::default()),
        None => None,
    };
    let members = result
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(owned(m.member_id))
                .with_group_instance_id(m.group_instance_id.filter(|_| version >= 5).map(owned))
                .with_metadata(m.metadata)
        })
        .collect();
    JoinGroupResponse::default()
        .with_error_code(error_code(result.error))
        .with_generation_id(result.generation_id)
        .with_protocol_type(result.protocol_type.filter(|_| version >= 7).map(owned))
        .with_protocol_name(protocol_name)
        .with_leader(owned(result.leader))
        .with_skip_assignment(version >= 9 && result.skip_assignment)
        .with_member_id(owned(result.member_id))
        .with_members(members)
}

pub async fn sync(
    state: &BrokerState,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let sync = SyncRequest {
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|i| i.to_string()),
        generation_id: request.generation_id,
        protocol_type: request.protocol_type.map(|t| t.to_string()),
        protocol_name: request.protocol_name.map(|n| n.to_string()),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let result: SyncResult = state.groups.sync(&request.group_id, sync).await;
    // Only v5 carries the protocol type and name.
    let v5 = |s: Option<String>| s.filter(|_| version >= 5).map(owned);
    SyncGroupResponse::default()
        .with_error_code(error_code(result.error))
        .with_protocol_type(v5(result.protocol_type))
        .with_protocol_name(v5(result.protocol_name))
        .with_assignment(result.assignment)
}

pub fn heartbeat(state: &BrokerState, request: HeartbeatRequest) -> HeartbeatResponse {
    let result = state.groups.heartbeat(
        &request.group_id,
        &request.member_id,
        request.group_instance_id.as_deref(),
        request.generation_id,
    );
    HeartbeatResponse::default().with_error_code(error_code(result.err()))
}

/// v0-2 name one member by id and carry its error at the top; v3+ name a batch, each member
/// (static ones possibly by instance id alone) with its own error.
pub fn leave(state: &BrokerState, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let leaving: Vec<LeavingMember> = if version <= 2 {
        vec![LeavingMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    } else {
        request
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
            })
            .collect()
    };
    match state.groups.leave(&request.group_id, &leaving) {
        Err(error) => LeaveGroupResponse::default().with_error_code(error.code()),
        Ok(results) if version <= 2 => LeaveGroupResponse::default()
            .with_error_code(error_code(results.into_iter().flatten().next())),
        Ok(results) => LeaveGroupResponse::default().with_members(
            leaving
                .into_iter()
                .zip(results)
                .map(|(member, error)| {
                    MemberResponse::default()
                        .with_member_id(owned(member.member_id))
                        .with_group_instance_id(member.group_instance_id.map(owned))
                        .with_error_code(error_code(error))
                })
                .collect(),
        ),
    }
}
