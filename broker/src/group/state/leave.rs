//! LeaveGroup, and the member checks of OffsetCommit.

use kafka_protocol::ResponseError;
use tokio::time::Instant;
use tracing::info;

use super::{Group, GroupState};
use crate::group::messages::LeavingMember;

impl Group {
    /// Removes the named members and rebalances without them. The outer error fails the whole
    /// request; otherwise each member gets its own result, in request order.
    pub fn leave(
        &mut self,
        leaving: &[LeavingMember],
        now: Instant,
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let mut any_left = false;
        let results = leaving
            .iter()
            .map(|leaving| {
                let result = self.leave_one(leaving);
                any_left |= result.is_ok();
                result.err()
            })
            .collect();
        if any_left {
            match self.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(now)
                }
                GroupState::PreparingRebalance => self.maybe_complete_join_phase(now),
                GroupState::Empty | GroupState::Dead => {}
            }
        }
        Ok(results)
    }

    fn leave_one(&mut self, leaving: &LeavingMember) -> Result<(), ResponseError> {
        let instance = leaving.group_instance_id.as_deref();
        if leaving.member_id.is_empty() {
            // Administrative removal of a static member by instance id alone (KIP-345).
            let id = instance
                .and_then(|i| self.static_members.get(i))
                .cloned()
                .ok_or(ResponseError::UnknownMemberId)?;
            info!(group = %self.id, member = %id, instance = ?instance, "static member removed by LeaveGroup");
            self.remove_member(&id);
            return Ok(());
        }
        if self.pending_members.remove(&leaving.member_id).is_some() {
            info!(group = %self.id, member = %leaving.member_id, "pending member left");
            return Ok(());
        }
        self.validate_member(&leaving.member_id, instance)?;
        info!(group = %self.id, member = %leaving.member_id, "member left");
        self.remove_member(&leaving.member_id);
        Ok(())
    }

    /// Kafka's `validateOffsetCommit`: members commit within their generation; a commit without
    /// one (generation -1: manual assignment, admin tools) only into an Empty group. A member
    /// that commits keeps its session alive.
    pub fn validate_offset_commit(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
            self.validate_member(member_id, group_instance_id)?;
            if generation_id != self.generation {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if self.state != GroupState::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        match self.state {
            // The member has its new generation but not yet its assignment.
            GroupState::CompletingRebalance => Err(ResponseError::RebalanceInProgress),
            // Eager consumers commit in their revoke callback, during the rebalance.
            GroupState::Stable | GroupState::PreparingRebalance => {
                self.reschedule_heartbeat(member_id, now);
                Ok(())
            }
            GroupState::Empty | GroupState::Dead => Ok(()),
        }
    }
}
