//! Phase changes shared by the requests, and the timers that drive them: the initial delay, the
//! rebalance timeout, session expiry and the deadline for SyncGroups.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use tracing::{info, warn};

use super::{Group, GroupState, JoinTimer, SyncTimer};
use crate::group::messages::SyncResult;

/// When no member at all rejoined, the join phase is retried after the rebalance timeout; a
/// client may set that to 0, and this floor keeps such a group from spinning the timer task.
const MIN_JOIN_RETRY: Duration = Duration::from_millis(1);

/// A timer pass handles at most this many expiries, so a bug can never spin under the lock.
const MAX_EXPIRIES_PER_PASS: usize = 100_000;

impl Group {
    pub(super) fn maybe_prepare_rebalance_or_complete_join(&mut self, now: Instant) {
        if GroupState::PreparingRebalance
            .valid_previous_states()
            .contains(&self.state)
        {
            self.prepare_rebalance(now);
        } else {
            self.maybe_complete_join_phase(now);
        }
    }

    /// Starts collecting JoinGroups for the next generation.
    pub(super) fn prepare_rebalance(&mut self, now: Instant) {
        if self.state == GroupState::CompletingRebalance {
            // Followers waiting for an assignment that will never come are told to rejoin.
            self.reset_and_propagate_assignment(ResponseError::RebalanceInProgress, now);
        }
        self.pending_sync.clear();
        self.sync_timer = None;
        let initial = self.state == GroupState::Empty;
        self.transition(GroupState::PreparingRebalance);
        info!(group = %self.id, generation = self.generation, "preparing to rebalance");
        if initial {
            // A new group waits a little for more members, so that a set of consumers started
            // together does not rebalance once per member.
            let delay = self.timing.initial_rebalance_delay;
            let remaining = self.rebalance_timeout().saturating_sub(delay);
            self.join_timer = Some(JoinTimer::InitialDelay {
                at: now + delay,
                delay_ms: delay.as_millis() as u64,
                remaining_ms: remaining.as_millis() as u64,
            });
        } else if self.all_members_joined() {
            self.complete_join(now);
        } else {
            self.join_timer = Some(JoinTimer::Rebalance {
                at: now + self.rebalance_timeout(),
            });
        }
    }

    /// Completes the join phase once every member rejoined; the initial rebalance only ends by
    /// its timer.
    pub(super) fn maybe_complete_join_phase(&mut self, now: Instant) {
        if self.state == GroupState::PreparingRebalance
            && self.previous_state != GroupState::Empty
            && self.all_members_joined()
        {
            self.complete_join(now);
        }
    }

    /// Ends the join phase: dynamic members that did not rejoin are dropped, the generation
    /// advances, a protocol is chosen and every parked JoinGroup is answered (the leader's with
    /// the member list).
    pub(super) fn complete_join(&mut self, now: Instant) {
        self.join_timer = None;
        let stragglers: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.is_awaiting_join() && !m.is_static())
            .map(|m| m.id.clone())
            .collect();
        if !stragglers.is_empty() {
            info!(group = %self.id, ?stragglers, "removing members that did not rejoin in time");
        }
        for id in &stragglers {
            self.remove_member(id);
        }
        if self.state == GroupState::Dead {
            return;
        }
        if !self.elect_joined_leader() && !self.members.is_empty() {
            // Only static members that have not rejoined are left; wait for them or for their
            // sessions to expire.
            warn!(group = %self.id, "no member rejoined; extending the join phase");
            self.join_timer = Some(JoinTimer::Rebalance {
                at: now + self.rebalance_timeout().max(MIN_JOIN_RETRY),
            });
            return;
        }
        // Java's int arithmetic: a generation wraps rather than failing.
        self.generation = self.generation.wrapping_add(1);
        self.pending_sync.clear();
        if self.members.is_empty() {
            self.protocol_name = None;
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition(GroupState::Empty);
            info!(group = %self.id, generation = self.generation, "group is now empty");
            return;
        }
        self.protocol_name = self.select_protocol();
        self.subscribed_topics = self.compute_subscribed_topics();
        self.transition(GroupState::CompletingRebalance);
        info!(group = %self.id, generation = self.generation, members = self.members.len(),
            protocol = ?self.protocol_name, "join phase complete");
        let leader = self.leader.clone().unwrap_or_default();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in &ids {
            let members = if *id == leader {
                self.members_for_leader()
            } else {
                Vec::new()
            };
            let result = self.join_result(id, leader.clone(), members);
            self.answer_join(id, result);
            self.reschedule_heartbeat(id, now);
            if let Some(member) = self.members.get_mut(id) {
                member.is_new = false;
            }
            self.pending_sync.insert(id.clone());
        }
        self.sync_timer = Some(SyncTimer {
            at: now + self.rebalance_timeout(),
            generation: self.generation,
        });
    }

    /// Keeps the leader if it rejoined, else picks a member that did; false when none did.
    fn elect_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|m| m.is_awaiting_join())
        {
            return true;
        }
        match self.members.values().find(|m| m.is_awaiting_join()) {
            Some(member) => {
                info!(group = %self.id, old = %leader, new = %member.id,
                    "leader did not rejoin before the rebalance timeout; electing another");
                self.leader = Some(member.id.clone());
                true
            }
            None => false,
        }
    }

    /// Stores the leader's assignment (missing members get empty bytes) and answers every
    /// parked SyncGroup with its own part.
    pub(super) fn set_and_propagate_assignment(
        &mut self,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) {
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
        }
        for (id, assignment) in assignments {
            if let Some(member) = self.members.get_mut(&id) {
                member.assignment = assignment;
            }
        }
        self.propagate_assignment(None, now);
    }

    fn reset_and_propagate_assignment(&mut self, error: ResponseError, now: Instant) {
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
        }
        self.propagate_assignment(Some(error), now);
    }

    fn propagate_assignment(&mut self, error: Option<ResponseError>, now: Instant) {
        let (protocol_type, protocol_name) = match error {
            None => (self.protocol_type.clone(), self.protocol_name.clone()),
            Some(_) => (None, None),
        };
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in &ids {
            let assignment = self
                .members
                .get(id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default();
            let result = SyncResult {
                error,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                assignment,
            };
            if self.answer_sync(id, result) {
                // Its session was on hold while it waited; it starts again now.
                self.reschedule_heartbeat(id, now);
            }
        }
    }

    /// Fires every timer due at `now`.
    pub fn on_timers(&mut self, now: Instant) {
        for _ in 0..MAX_EXPIRIES_PER_PASS {
            if !self.fire_next_timer(now) {
                return;
            }
        }
        warn!(group = %self.id, "timer pass stopped after {MAX_EXPIRIES_PER_PASS} expiries");
    }

    /// Fires the earliest due timer; false when none is due. Equal deadlines fire pending
    /// members first, then sessions in join order, then the join and sync deadlines.
    fn fire_next_timer(&mut self, now: Instant) -> bool {
        if let Some(id) = self
            .pending_members
            .iter()
            .filter(|&(_, &at)| at <= now)
            .min_by_key(|&(_, &at)| at)
            .map(|(id, _)| id.clone())
        {
            info!(group = %self.id, member = %id, "pending member expired");
            self.pending_members.remove(&id);
            self.maybe_complete_join_phase_after_removal(now);
            return true;
        }
        let expired = self
            .members
            .values()
            .filter_map(|m| Some((m.heartbeat_deadline?, m)))
            .filter(|&(at, _)| at <= now)
            .min_by_key(|&(at, _)| at)
            .map(|(_, m)| (m.id.clone(), m.has_satisfied_heartbeat()));
        if let Some((id, satisfied)) = expired {
            if satisfied {
                // Waiting on the group counts as alive; the wait's end restarts the session.
                if let Some(member) = self.members.get_mut(&id) {
                    member.heartbeat_deadline = None;
                }
            } else {
                info!(group = %self.id, member = %id, "session expired; removing member");
                self.remove_member_and_update_group(&id, now);
            }
            return true;
        }
        if let Some(timer) = self.join_timer.filter(|t| t.at() <= now) {
            self.join_timer = None;
            match timer {
                JoinTimer::InitialDelay {
                    delay_ms,
                    remaining_ms,
                    ..
                } => self.initial_delay_passed(delay_ms, remaining_ms, now),
                JoinTimer::Rebalance { .. } => self.complete_join(now),
            }
            return true;
        }
        if let Some(timer) = self.sync_timer.filter(|t| t.at <= now) {
            self.sync_timer = None;
            self.expire_pending_sync(timer.generation, now);
            return true;
        }
        false
    }

    /// Extends the initial delay while members keep arriving, within the rebalance timeout.
    fn initial_delay_passed(&mut self, delay_ms: u64, remaining_ms: u64, now: Instant) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if self.new_member_added && remaining_ms != 0 {
            self.new_member_added = false;
            let configured = self.timing.initial_rebalance_delay.as_millis() as u64;
            let next_delay = configured.min(remaining_ms);
            self.join_timer = Some(JoinTimer::InitialDelay {
                at: now + Duration::from_millis(next_delay),
                delay_ms: next_delay,
                remaining_ms: remaining_ms.saturating_sub(delay_ms),
            });
        } else {
            self.complete_join(now);
        }
    }

    /// Removes members of `generation` that never sent SyncGroup, and rebalances without them.
    fn expire_pending_sync(&mut self, generation: i32, now: Instant) {
        if generation != self.generation
            || !matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            )
            || self.pending_sync.is_empty()
        {
            return;
        }
        let missing: Vec<String> = self.pending_sync.iter().cloned().collect();
        info!(group = %self.id, ?missing, "members did not sync in time; removing them");
        for id in &missing {
            self.remove_member(id);
        }
        self.prepare_rebalance(now);
    }

    /// After a member left or expired: a rebalance, or the end of the one under way.
    pub(super) fn remove_member_and_update_group(&mut self, id: &str, now: Instant) {
        self.remove_member(id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(now)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join_phase_after_removal(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Unlike a join, a removal may end even the initial rebalance: nobody is left to wait for.
    fn maybe_complete_join_phase_after_removal(&mut self, now: Instant) {
        if self.state == GroupState::PreparingRebalance && self.all_members_joined() {
            self.complete_join(now);
        }
    }
}
