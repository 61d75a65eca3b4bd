//! FindCoordinator (always this broker), DescribeGroups, ListGroups and DeleteGroups.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::group_membership::{error_code, owned};
use super::str_bytes;
use crate::state::BrokerState;

/// Coordinator key types: consumer groups and transactional ids; this broker is both
/// coordinators. Share groups (2) need FindCoordinator v6, which is not advertised.
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The operations on a group an unsecured Kafka reports as allowed when asked (READ, DELETE,
/// DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS as bits of their ACL codes).
const GROUP_AUTHORIZED_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);

/// What Kafka sends when the client did not ask for authorized operations.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub fn find_coordinator(
    state: &BrokerState,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let error = match request.key_type {
        KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION => None,
        _ => Some(ResponseError::InvalidRequest),
    };
    let node = || {
        (
            BrokerId(state.node_id()),
            str_bytes(&state.advertised_host),
            state.advertised_port,
        )
    };
    let no_node = || (BrokerId(-1), StrBytes::default(), -1);
    if version >= 4 {
        // v4+ batch the keys; the top-level node fields must stay unset.
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let (node_id, host, port) = if error.is_none() { node() } else { no_node() };
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(node_id)
                    .with_host(host)
                    .with_port(port)
                    .with_error_code(error_code(error))
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (node_id, host, port) = if error.is_none() { node() } else { no_node() };
    // Kafka puts its error's message here, even "NONE" on success; v0 has no such field.
    let message = match error {
        None => "NONE".to_string(),
        Some(e) => e.to_string(),
    };
    FindCoordinatorResponse::default()
        .with_error_code(error_code(error))
        .with_error_message((version >= 1).then(|| owned(message)))
        .with_node_id(node_id)
        .with_host(host)
        .with_port(port)
}

pub fn describe_groups(
    state: &BrokerState,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let operations = if version >= 3 && request.include_authorized_operations {
        GROUP_AUTHORIZED_OPERATIONS
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    let groups = request
        .groups
        .into_iter()
        .map(|group_id| {
            let summary = state.groups.describe(&group_id);
            let members = summary
                .members
                .into_iter()
                .map(|m| {
                    DescribedGroupMember::default()
                        .with_member_id(owned(m.member_id))
                        // Instance ids exist from v4.
                        .with_group_instance_id(
                            m.group_instance_id.filter(|_| version >= 4).map(owned),
                        )
                        .with_client_id(owned(m.client_id))
                        .with_client_host(owned(m.client_host))
                        .with_member_metadata(m.metadata)
                        .with_member_assignment(m.assignment)
                })
                .collect();
            DescribedGroup::default()
                .with_group_id(group_id)
                .with_group_state(str_bytes(summary.state))
                .with_protocol_type(owned(summary.protocol_type))
                .with_protocol_data(owned(summary.protocol_data))
                .with_members(members)
                .with_authorized_operations(operations)
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

pub fn list_groups(
    state: &BrokerState,
    request: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_string())
        .collect();
    let groups = state
        .groups
        .list(&states)
        .into_iter()
        .map(|g| {
            let listed = ListedGroup::default()
                .with_group_id(GroupId(owned(g.group_id)))
                .with_protocol_type(owned(g.protocol_type));
            // The state is reported from v4, with the filter.
            if version >= 4 {
                listed.with_group_state(str_bytes(g.state))
            } else {
                listed
            }
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

pub fn delete_groups(state: &BrokerState, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let results = request
        .groups_names
        .into_iter()
        .map(|group_id| {
            let result = state.groups.delete(&group_id);
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(error_code(result.err()))
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}
