//! What the coordinator takes from a request and gives back, free of wire versions: the
//! handlers translate to and from the `kafka-protocol` messages of each version.

use bytes::Bytes;
use kafka_protocol::ResponseError;

/// One protocol a member can use, with its metadata (for consumers, the serialized subscription)
/// exactly as the member sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

/// A JoinGroup, with the version-dependent behaviour resolved by the handler.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    /// As Kafka prints the peer address, e.g. `/127.0.0.1`.
    pub client_host: String,
    pub session_timeout_ms: i32,
    /// v0 has none; the handler passes the session timeout, as Kafka does.
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// v4+: a new dynamic member first gets MEMBER_ID_REQUIRED and an id to rejoin with.
    pub require_known_member_id: bool,
    /// v9+: a static leader rejoining a stable group is told to skip the assignment.
    pub supports_skip_assignment: bool,
}

/// A member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// The metadata of the chosen protocol.
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    pub error: Option<ResponseError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    /// Only the leader gets the members.
    pub members: Vec<JoinedMember>,
}

impl JoinResult {
    /// A refusal: generation -1, no protocol, no leader, as Kafka answers errors.
    pub fn error(error: ResponseError, member_id: impl Into<String>) -> Self {
        Self {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.into(),
            members: Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    /// v5 sends the protocol type and name it expects; `None` means not checked.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment per member id, bytes untouched; followers send none.
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResult {
    pub error: Option<ResponseError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub fn error(error: ResponseError) -> Self {
        Self {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// One member named by a LeaveGroup (v0-2 name exactly one, by member id).
#[derive(Debug, Clone)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    pub state: &'static str,
    pub protocol_type: String,
    /// The chosen protocol name when Stable, else empty.
    pub protocol_data: String,
    pub members: Vec<MemberSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSummary {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Empty unless the group is Stable.
    pub metadata: Bytes,
    /// Empty unless the group is Stable.
    pub assignment: Bytes,
}

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
}

/// One partition of an OffsetCommit that passed the topic checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    /// `None` (a null string) is stored as empty, as Kafka does.
    pub metadata: Option<String>,
}
