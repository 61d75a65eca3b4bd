//! The membership APIs, request by version and answer by meaning: JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup (FindCoordinator is in [`crate::coordinator`], shared with the
//! producer). No I/O here; [`super::coordinator`] sends them.
//!
//! Each builder fills only the fields of the version it is given: the crate refuses to encode a
//! field a version lacks.

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::protocol::PROTOCOL_TYPE;
use crate::error::ServerError;

pub(crate) fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// What a member sends in JoinGroup.
#[derive(Debug, Clone)]
pub struct JoinParams<'a> {
    pub group: &'a str,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    /// (assignor name, subscription bytes), in order of preference.
    pub protocols: Vec<(&'static str, Bytes)>,
    pub reason: Option<&'a str>,
}

pub fn join_request(p: &JoinParams<'_>, version: i16) -> JoinGroupRequest {
    let mut req = JoinGroupRequest::default()
        .with_group_id(group_id(p.group))
        .with_session_timeout_ms(p.session_timeout_ms)
        .with_member_id(text(p.member_id))
        .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
        .with_protocols(
            p.protocols
                .iter()
                .map(|(name, metadata)| {
                    JoinGroupRequestProtocol::default()
                        .with_name(StrBytes::from_static_str(name))
                        .with_metadata(metadata.clone())
                })
                .collect(),
        );
    // v0 has no rebalance timeout: the coordinator uses the session timeout.
    if version >= 1 {
        req.rebalance_timeout_ms = p.rebalance_timeout_ms;
    }
    if version >= 5 {
        req.group_instance_id = p.instance_id.map(text);
    }
    if version >= 8 {
        req.reason = p.reason.map(text);
    }
    req
}

/// One member as the leader sees it in the JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub generation_id: i32,
    pub member_id: String,
    /// The assignor the group chose (absent only from brokers that break the protocol).
    pub protocol: Option<String>,
    pub leader: String,
    /// Filled for the leader only.
    pub members: Vec<JoinedMember>,
    /// v9: the leader must not compute an assignment (its static rejoin changed nothing).
    pub skip_assignment: bool,
}

impl Joined {
    pub fn is_leader(&self) -> bool {
        self.leader == self.member_id
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinOutcome {
    Joined(Joined),
    /// v4+: join again with this member id (KIP-394).
    MemberIdRequired(String),
    Failed(ServerError),
}

pub fn join_answer(resp: JoinGroupResponse) -> JoinOutcome {
    let member_id = resp.member_id.to_string();
    // v7+ names the group's protocol type; a group of another kind is not ours to join.
    if let Some(t) = resp
        .protocol_type
        .as_ref()
        .filter(|t| t.as_str() != PROTOCOL_TYPE)
    {
        if resp.error_code == 0 {
            return JoinOutcome::Failed(
                ServerError::new(ResponseError::InconsistentGroupProtocol.code())
                    .message(Some(format!("JoinGroup names protocol type {t}"))),
            );
        }
    }
    match resp.error_code {
        0 => JoinOutcome::Joined(Joined {
            generation_id: resp.generation_id,
            member_id,
            protocol: resp.protocol_name.map(|p| p.to_string()),
            leader: resp.leader.to_string(),
            members: resp
                .members
                .into_iter()
                .map(|m| JoinedMember {
                    member_id: m.member_id.to_string(),
                    instance_id: m.group_instance_id.map(|i| i.to_string()),
                    metadata: m.metadata,
                })
                .collect(),
            skip_assignment: resp.skip_assignment,
        }),
        code if code == ResponseError::MemberIdRequired.code() && !member_id.is_empty() => {
            JoinOutcome::MemberIdRequired(member_id)
        }
        code => JoinOutcome::Failed(ServerError::new(code)),
    }
}

/// What a member sends in SyncGroup; only the leader sends assignments.
#[derive(Debug, Clone)]
pub struct SyncParams<'a> {
    pub group: &'a str,
    pub generation_id: i32,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub protocol: Option<&'a str>,
    pub assignments: Vec<(String, Bytes)>,
}

pub fn sync_request(p: &SyncParams<'_>, version: i16) -> SyncGroupRequest {
    let mut req = SyncGroupRequest::default()
        .with_group_id(group_id(p.group))
        .with_generation_id(p.generation_id)
        .with_member_id(text(p.member_id))
        .with_assignments(
            p.assignments
                .iter()
                .map(|(member, bytes)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(member))
                        .with_assignment(bytes.clone())
                })
                .collect(),
        );
    if version >= 3 {
        req.group_instance_id = p.instance_id.map(text);
    }
    if version >= 5 {
        req.protocol_type = Some(StrBytes::from_static_str(PROTOCOL_TYPE));
        req.protocol_name = p.protocol.map(text);
    }
    req
}

/// The member's assignment bytes. From v5 the answer names the protocol, which must be the one
/// joined with (Kafka's client raises INCONSISTENT_GROUP_PROTOCOL otherwise).
pub fn sync_answer(resp: SyncGroupResponse, protocol: Option<&str>) -> Result<Bytes, ServerError> {
    ServerError::check(resp.error_code)?;
    let inconsistent = |what: String| {
        ServerError::new(ResponseError::InconsistentGroupProtocol.code()).message(Some(what))
    };
    if let Some(t) = &resp.protocol_type {
        if t.as_str() != PROTOCOL_TYPE {
            return Err(inconsistent(format!("SyncGroup names protocol type {t}")));
        }
    }
    if let (Some(got), Some(joined)) = (&resp.protocol_name, protocol) {
        if got.as_str() != joined {
            return Err(inconsistent(format!(
                "SyncGroup names assignor {got}, the group joined with {joined}"
            )));
        }
    }
    Ok(resp.assignment)
}

pub fn heartbeat_request(
    group: &str,
    generation_id: i32,
    member_id: &str,
    instance_id: Option<&str>,
    version: i16,
) -> HeartbeatRequest {
    let mut req = HeartbeatRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id(generation_id)
        .with_member_id(text(member_id));
    if version >= 3 {
        req.group_instance_id = instance_id.map(text);
    }
    req
}

/// LeaveGroup for one member: the member id up to v2, a batch of one from v3 (which can also
/// name a static member's instance, and from v5 a reason).
pub fn leave_request(
    group: &str,
    member_id: &str,
    instance_id: Option<&str>,
    reason: &str,
    version: i16,
) -> LeaveGroupRequest {
    let req = LeaveGroupRequest::default().with_group_id(group_id(group));
    if version <= 2 {
        return req.with_member_id(text(member_id));
    }
    let mut member = MemberIdentity::default()
        .with_member_id(text(member_id))
        .with_group_instance_id(instance_id.map(text));
    if version >= 5 {
        member.reason = Some(text(reason));
    }
    req.with_members(vec![member])
}

/// The top-level error, else the first member's.
pub fn leave_answer(resp: LeaveGroupResponse) -> Result<(), ServerError> {
    ServerError::check(resp.error_code)?;
    for m in resp.members {
        ServerError::check(m.error_code)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::KeyType;
    use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
    use kafka_protocol::protocol::Encodable;

    fn encodes<T: Encodable>(req: &T, versions: std::ops::RangeInclusive<i16>) {
        for v in versions {
            let mut buf = bytes::BytesMut::new();
            req.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
    }

    #[test]
    fn every_request_encodes_at_every_version_we_speak() {
        for v in 0..=4 {
            let find = crate::coordinator::find_coordinator_request(KeyType::Group, "g", v);
            encodes(&find.unwrap(), v..=v);
        }
        let params = JoinParams {
            group: "g",
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: 300_000,
            member_id: "",
            instance_id: Some("i-1"),
            protocols: vec![("range", Bytes::from_static(b"\0\x01"))],
            reason: Some("joining"),
        };
        for v in 0..=9 {
            let mut p = params.clone();
            if v < 5 {
                p.instance_id = None;
            }
            encodes(&join_request(&p, v), v..=v);
        }
        let sync = SyncParams {
            group: "g",
            generation_id: 3,
            member_id: "m",
            instance_id: Some("i-1"),
            protocol: Some("range"),
            assignments: vec![("m".into(), Bytes::new())],
        };
        for v in 0..=5 {
            encodes(&sync_request(&sync, v), v..=v);
            encodes(&leave_request("g", "m", None, "closing", v), v..=v);
        }
        for v in 0..=4 {
            encodes(&heartbeat_request("g", 3, "m", Some("i-1"), v), v..=v);
        }
        assert_eq!(join_request(&params, 0).rebalance_timeout_ms, -1);
        assert_eq!(
            join_request(&params, 5).group_instance_id.unwrap().as_str(),
            "i-1"
        );
    }

    #[test]
    fn join_answers_by_meaning() {
        let ok = JoinGroupResponse::default()
            .with_generation_id(4)
            .with_member_id(text("m-1"))
            .with_leader(text("m-1"))
            .with_protocol_name(Some(text("range")))
            .with_members(vec![
                JoinGroupResponseMember::default().with_member_id(text("m-1"))
            ]);
        let JoinOutcome::Joined(j) = join_answer(ok) else {
            panic!("joined")
        };
        assert!(j.is_leader());
        assert_eq!((j.generation_id, j.members.len()), (4, 1));
        let required = JoinGroupResponse::default()
            .with_error_code(79)
            .with_member_id(text("m-2"));
        assert_eq!(
            join_answer(required),
            JoinOutcome::MemberIdRequired("m-2".into())
        );
        let other = JoinGroupResponse::default()
            .with_protocol_type(Some(text("connect")))
            .with_member_id(text("m-1"));
        assert!(matches!(join_answer(other), JoinOutcome::Failed(e) if e.code == 23));
        // MEMBER_ID_REQUIRED without an id would loop forever: a plain failure.
        let broken = JoinGroupResponse::default().with_error_code(79);
        assert!(matches!(join_answer(broken), JoinOutcome::Failed(_)));
    }

    #[test]
    fn sync_answers_check_the_protocol() {
        let resp = SyncGroupResponse::default()
            .with_protocol_type(Some(text("consumer")))
            .with_protocol_name(Some(text("range")))
            .with_assignment(Bytes::from_static(b"x"));
        assert_eq!(sync_answer(resp.clone(), Some("range")).unwrap(), "x");
        assert_eq!(sync_answer(resp, Some("roundrobin")).unwrap_err().code, 23);
        let err = SyncGroupResponse::default().with_error_code(27);
        assert_eq!(sync_answer(err, None).unwrap_err().code, 27);
    }
}
