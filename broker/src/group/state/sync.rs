//! SyncGroup and Heartbeat in each state.

use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::info;

use super::{Group, GroupState};
use crate::group::messages::{SyncRequest, SyncResult};

impl Group {
    /// Handles a SyncGroup. Followers in CompletingRebalance wait for the leader's; the leader's
    /// assignment answers everyone and makes the group Stable.
    pub fn sync(
        &mut self,
        request: SyncRequest,
        respond: oneshot::Sender<SyncResult>,
        now: Instant,
    ) {
        if self.state == GroupState::Empty {
            let _ = respond.send(SyncResult::error(ResponseError::UnknownMemberId));
            return;
        }
        if let Err(error) = self.validate_sync(&request) {
            let _ = respond.send(SyncResult::error(error));
            return;
        }
        let member_id = request.member_id;
        match self.state {
            GroupState::PreparingRebalance => {
                let _ = respond.send(SyncResult::error(ResponseError::RebalanceInProgress));
            }
            GroupState::CompletingRebalance => {
                if let Some(member) = self.members.get_mut(&member_id) {
                    if let Some(earlier) = member.awaiting_sync.replace(respond) {
                        // A repeated SyncGroup supersedes the parked one; that one rejoins.
                        let _ = earlier.send(SyncResult::error(ResponseError::RebalanceInProgress));
                    }
                }
                self.remove_pending_sync(&member_id);
                if self.leader.as_deref() == Some(member_id.as_str()) {
                    info!(group = %self.id, generation = self.generation, leader = %member_id,
                        "assignment received from the leader");
                    self.set_and_propagate_assignment(request.assignments, now);
                    self.transition(GroupState::Stable);
                }
            }
            GroupState::Stable => {
                self.remove_pending_sync(&member_id);
                let assignment = self
                    .members
                    .get(&member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                let _ = respond.send(SyncResult {
                    error: None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment,
                });
                // A sync counts as a sign of life (Kafka's Scala coordinator did this too).
                self.reschedule_heartbeat(&member_id, now);
            }
            // Both refused above.
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    fn validate_sync(&self, request: &SyncRequest) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        self.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
        if request.generation_id != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        let inconsistent = |asked: &Option<String>, ours: &Option<String>| matches!((asked, ours), (Some(a), Some(o)) if a != o);
        if inconsistent(&request.protocol_type, &self.protocol_type)
            || inconsistent(&request.protocol_name, &self.protocol_name)
        {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        Ok(())
    }

    /// Once every member has synced, nobody can miss the sync deadline.
    fn remove_pending_sync(&mut self, member_id: &str) {
        self.pending_sync.remove(member_id);
        if self.pending_sync.is_empty() {
            self.sync_timer = None;
        }
    }

    /// Handles a Heartbeat: it keeps the session alive, and during a rebalance tells the member
    /// to rejoin.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        self.validate_member(member_id, group_instance_id)?;
        if generation_id != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => Err(ResponseError::UnknownMemberId),
            GroupState::PreparingRebalance => {
                self.reschedule_heartbeat(member_id, now);
                Err(ResponseError::RebalanceInProgress)
            }
            // Consumers heartbeat as soon as they have their join answer, before syncing.
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.reschedule_heartbeat(member_id, now);
                Ok(())
            }
        }
    }
}
