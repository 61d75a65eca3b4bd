//! JoinGroup in each state: new dynamic members (with the MEMBER_ID_REQUIRED round from v4),
//! new and returning static members (KIP-345), and rejoining members.

use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::info;

use super::{Group, GroupState};
use crate::group::member::{generate_member_id, Member};
use crate::group::messages::{JoinRequest, JoinResult, SyncResult};

impl Group {
    /// Handles a JoinGroup whose group id and session timeout the caller has checked. The answer
    /// goes to `respond`, at once or when the join phase completes.
    pub fn join(
        &mut self,
        request: JoinRequest,
        respond: oneshot::Sender<JoinResult>,
        now: Instant,
    ) {
        if request.member_id.is_empty() {
            self.join_new_member(request, respond, now);
        } else {
            self.join_existing_member(request, respond, now);
        }
    }

    fn join_new_member(
        &mut self,
        request: JoinRequest,
        respond: oneshot::Sender<JoinResult>,
        now: Instant,
    ) {
        if self.state == GroupState::Dead {
            // Removed while this request was on its way: the client finds the coordinator again
            // and rejoins a fresh group.
            refuse(respond, ResponseError::CoordinatorNotAvailable, "");
            return;
        }
        if !self.supports_protocols(&request.protocol_type, &request.protocols) {
            refuse(respond, ResponseError::InconsistentGroupProtocol, "");
            return;
        }
        match &request.group_instance_id {
            Some(instance) => {
                let new_id = generate_member_id(instance);
                match self.static_members.get(instance).cloned() {
                    Some(old_id) => {
                        info!(group = %self.id, %instance, %old_id, %new_id, state = self.state.name(),
                            "static member rejoins with an unknown member id; replacing the old id");
                        self.rejoin_static_member(request, &old_id, new_id, respond, now);
                    }
                    None => self.add_member_and_rebalance(request, new_id, respond, now),
                }
            }
            None => {
                let new_id = generate_member_id(&request.client_id);
                if request.require_known_member_id {
                    // The id is remembered as pending; the client must rejoin with it, which
                    // proves it received the answer (a client that times out and retries would
                    // otherwise leave a ghost member behind each time).
                    let timeout = Duration::from_millis(request.session_timeout_ms.max(0) as u64);
                    self.pending_members.insert(new_id.clone(), now + timeout);
                    refuse(respond, ResponseError::MemberIdRequired, new_id);
                } else {
                    self.add_member_and_rebalance(request, new_id, respond, now);
                }
            }
        }
    }

    fn join_existing_member(
        &mut self,
        request: JoinRequest,
        respond: oneshot::Sender<JoinResult>,
        now: Instant,
    ) {
        let member_id = request.member_id.clone();
        if self.state == GroupState::Dead {
            refuse(respond, ResponseError::CoordinatorNotAvailable, member_id);
            return;
        }
        if !self.supports_protocols(&request.protocol_type, &request.protocols) {
            refuse(respond, ResponseError::InconsistentGroupProtocol, member_id);
            return;
        }
        // Pending ids are only ever handed to dynamic members; a static one naming it is
        // checked like any other request below (and refused).
        if self.pending_members.contains_key(&member_id) && request.group_instance_id.is_none() {
            self.add_member_and_rebalance(request, member_id, respond, now);
            return;
        }
        if let Err(error) = self.validate_member(&member_id, request.group_instance_id.as_deref()) {
            refuse(respond, error, member_id);
            return;
        }
        let (is_leader, unchanged) = match self.members.get(&member_id) {
            Some(member) => (
                self.leader.as_deref() == Some(member_id.as_str()),
                member.matches(&request.protocols),
            ),
            // validate_member found it; unreachable, but answered all the same.
            None => return refuse(respond, ResponseError::UnknownMemberId, member_id),
        };
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member_and_rebalance(request, respond, now)
            }
            GroupState::CompletingRebalance if unchanged => {
                // It missed the answer to its join (a timeout, a lost connection): repeat it.
                let members = if is_leader {
                    self.members_for_leader()
                } else {
                    Vec::new()
                };
                let leader = self.leader.clone().unwrap_or_default();
                let _ = respond.send(self.join_result(&member_id, leader, members));
            }
            GroupState::Stable if unchanged && !is_leader => {
                // A follower with nothing new just learns the current generation and syncs.
                let leader = self.leader.clone().unwrap_or_default();
                let _ = respond.send(self.join_result(&member_id, leader, Vec::new()));
            }
            // The leader rejoining a stable group asks for a rebalance (for example because
            // topic metadata changed); changed metadata needs one too.
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.update_member_and_rebalance(request, respond, now)
            }
            GroupState::Empty | GroupState::Dead => {
                refuse(respond, ResponseError::UnknownMemberId, member_id);
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        request: JoinRequest,
        member_id: String,
        respond: oneshot::Sender<JoinResult>,
        now: Instant,
    ) {
        let mut member = Member::new(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.protocol_type,
        );
        member.protocols = request.protocols;
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.is_new = true;
        // A new member cannot heartbeat while its join is parked, and a client that gave up
        // waiting would retry as yet another member: bound the wait instead.
        member.heartbeat_deadline = Some(now + self.timing.new_member_join_timeout);
        if self.state == GroupState::PreparingRebalance && self.previous_state == GroupState::Empty
        {
            self.new_member_added = true;
        }
        self.add_member(member, respond);
        self.maybe_prepare_rebalance_or_complete_join(now);
    }

    fn update_member_and_rebalance(
        &mut self,
        request: JoinRequest,
        respond: oneshot::Sender<JoinResult>,
        now: Instant,
    ) {
        self.update_member(
            &request.member_id,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            respond,
        );
        self.maybe_prepare_rebalance_or_complete_join(now);
    }

    /// A known static member came back with an empty member id (a restart): it takes over the
    /// old member, assignment included, and the old id is fenced. A stable group whose chosen
    /// protocol stays the same does not rebalance at all.
    fn rejoin_static_member(
        &mut self,
        request: JoinRequest,
        old_id: &str,
        new_id: String,
        respond: oneshot::Sender<JoinResult>,
        now: Instant,
    ) {
        let current_leader = self.leader.clone().unwrap_or_default();
        self.replace_static_member(old_id, &new_id);
        // Under the member's previous session timeout, as Kafka reschedules before updating.
        self.reschedule_heartbeat(&new_id, now);
        self.update_member(
            &new_id,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            respond,
        );
        match self.state {
            GroupState::Stable => {
                let next_protocol = self.select_protocol();
                if next_protocol.is_none() || next_protocol != self.protocol_name {
                    self.maybe_prepare_rebalance_or_complete_join(now);
                    return;
                }
                let result = if request.supports_skip_assignment {
                    // v9: the leader learns it leads but must not assign, since a stable group
                    // would not pass a new assignment on.
                    let is_leader = self.leader.as_deref() == Some(new_id.as_str());
                    let members = if is_leader {
                        self.members_for_leader()
                    } else {
                        Vec::new()
                    };
                    let leader = self.leader.clone().unwrap_or_default();
                    let mut result = self.join_result(&new_id, leader, members);
                    result.skip_assignment = is_leader;
                    result
                } else {
                    // Older versions: naming the old leader id makes even a returning leader
                    // act as a follower and just fetch its assignment.
                    self.join_result(&new_id, current_leader, Vec::new())
                };
                self.answer_join(&new_id, result);
            }
            // The leader may already be assigning to the old id, which would then get nothing:
            // start over.
            GroupState::CompletingRebalance => self.prepare_rebalance(now),
            GroupState::PreparingRebalance => self.maybe_complete_join_phase(now),
            // A static member exists, so the group has members: neither state is possible.
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Moves a static member to a new member id; a request parked under the old id is fenced.
    fn replace_static_member(&mut self, old_id: &str, new_id: &str) {
        let Some((index, _, mut member)) = self.members.shift_remove_full(old_id) else {
            return;
        };
        if let Some(join) = member.awaiting_join.take() {
            self.awaiting_join -= 1;
            let _ = join.send(JoinResult::error(ResponseError::FencedInstanceId, old_id));
        }
        if let Some(sync) = member.awaiting_sync.take() {
            let _ = sync.send(SyncResult::error(ResponseError::FencedInstanceId));
        }
        member.id = new_id.to_string();
        member.is_new = false;
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), new_id.to_string());
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.to_string());
        }
        self.members.shift_insert(index, new_id.to_string(), member);
    }
}

/// Answers a JoinGroup with an error; a client that has gone away is no concern.
fn refuse(
    respond: oneshot::Sender<JoinResult>,
    error: ResponseError,
    member_id: impl Into<String>,
) {
    let _ = respond.send(JoinResult::error(error, member_id));
}
