//! The classic group state machine, as Kafka's `ClassicGroup` and `GroupMetadataManager` run it.
//!
//! A [`Group`] is plain data behind its own lock: every request and every timer is a method that
//! takes the current time and changes the group, with no sockets or tasks involved, so the unit
//! tests drive it directly. Parked JoinGroup and SyncGroup requests are the `oneshot` senders
//! kept on their members; a method answers them when the phase they wait for completes.
//!
//! What each request does in each state (Kafka's `ClassicGroupState`):
//!
//! | state | JoinGroup | SyncGroup | Heartbeat | LeaveGroup | OffsetCommit |
//! |---|---|---|---|---|---|
//! | Empty | new member: rebalance (after the initial delay) | UNKNOWN_MEMBER_ID | UNKNOWN_MEMBER_ID | UNKNOWN_MEMBER_ID | generation -1 only |
//! | PreparingRebalance | parked until all members rejoined or the rebalance timeout | REBALANCE_IN_PROGRESS | REBALANCE_IN_PROGRESS | remove, maybe complete the join | current generation |
//! | CompletingRebalance | same metadata: current generation; else rebalance | followers parked until the leader's | NONE | remove, rebalance | REBALANCE_IN_PROGRESS |
//! | Stable | unchanged follower: current generation; leader or change: rebalance | the stored assignment | NONE | remove, rebalance | current generation |
//! | Dead | COORDINATOR_NOT_AVAILABLE | COORDINATOR_NOT_AVAILABLE | COORDINATOR_NOT_AVAILABLE | COORDINATOR_NOT_AVAILABLE | COORDINATOR_NOT_AVAILABLE |
//!
//! The submodules hold the requests ([`join`], [`sync`], [`leave`]), the phase changes and
//! timers they share ([`rebalance`]), which offsets OffsetDelete may drop
//! ([`offset_delete`]), and which expire ([`offset_expiry`]).

mod join;
mod leave;
mod offset_delete;
mod offset_expiry;
mod rebalance;
mod sync;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use indexmap::IndexMap;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::error;

use super::member::{protocol_names, Member};
use super::messages::{
    GroupListing, GroupSummary, JoinResult, JoinedMember, MemberSummary, Protocol, SyncResult,
};
use super::offsets::Offsets;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members; committed offsets may exist (also the state of groups that only commit).
    Empty,
    /// Collecting JoinGroups from every member of the next generation.
    PreparingRebalance,
    /// The join phase is done; waiting for the leader's SyncGroup with the assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Removed (DeleteGroups); a request that raced with the removal sees this.
    Dead,
}

impl GroupState {
    /// The name DescribeGroups and ListGroups carry.
    pub const fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// The states a group may be in just before entering this one.
    pub const fn valid_previous_states(self) -> &'static [GroupState] {
        use GroupState::*;
        match self {
            Empty => &[PreparingRebalance],
            PreparingRebalance => &[Stable, CompletingRebalance, Empty],
            CompletingRebalance => &[PreparingRebalance],
            Stable => &[CompletingRebalance],
            Dead => &[Stable, PreparingRebalance, CompletingRebalance, Empty, Dead],
        }
    }

    pub fn can_transition_to(self, next: GroupState) -> bool {
        next.valid_previous_states().contains(&self)
    }
}

/// Timing a group gets from the broker's configuration.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Kafka's `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay: Duration,
    /// How long a new member's parked JoinGroup may wait (Kafka: 5 minutes).
    pub new_member_join_timeout: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            initial_rebalance_delay: Duration::ZERO,
            new_member_join_timeout: Duration::from_secs(300),
        }
    }
}

/// The pending end of the join phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JoinTimer {
    /// An Empty group's first rebalance: wait `delay_ms` and again while members keep arriving,
    /// up to `remaining_ms` more.
    InitialDelay {
        at: Instant,
        delay_ms: u64,
        remaining_ms: u64,
    },
    /// The rebalance timeout: stragglers are dropped when it passes.
    Rebalance { at: Instant },
}

impl JoinTimer {
    fn at(self) -> Instant {
        match self {
            JoinTimer::InitialDelay { at, .. } | JoinTimer::Rebalance { at } => at,
        }
    }
}

/// Members that have not sent SyncGroup by `at` are removed (if still in `generation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SyncTimer {
    at: Instant,
    generation: i32,
}

#[derive(Debug)]
pub struct Group {
    id: String,
    state: GroupState,
    previous_state: GroupState,
    /// When the group entered its state (Kafka's `currentStateTimestamp`): an Empty group's
    /// offsets are kept `offsets.retention.minutes` from then.
    state_since: Instant,
    generation: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    /// In join order: the leader falls to the earliest remaining member.
    members: IndexMap<String, Member>,
    /// Static members: instance id to current member id.
    static_members: HashMap<String, String>,
    /// Ids handed out with MEMBER_ID_REQUIRED, until they rejoin or their session times out.
    pending_members: HashMap<String, Instant>,
    /// Members of the current generation that have not sent SyncGroup yet.
    pending_sync: HashSet<String>,
    /// Members with a parked JoinGroup.
    awaiting_join: usize,
    /// Protocol name to the number of members supporting it.
    supported_protocols: HashMap<String, usize>,
    /// A member joined during the initial delay, which extends it.
    new_member_added: bool,
    join_timer: Option<JoinTimer>,
    sync_timer: Option<SyncTimer>,
    offsets: Offsets,
    /// The topics the current generation's members subscribe to; `None` when unknown (see
    /// [`offset_delete`]).
    subscribed_topics: Option<BTreeSet<String>>,
    timing: Timing,
}

impl Group {
    pub fn new(id: impl Into<String>, timing: Timing) -> Self {
        Self {
            id: id.into(),
            state: GroupState::Empty,
            previous_state: GroupState::Dead,
            state_since: Instant::now(),
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: IndexMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            pending_sync: HashSet::new(),
            awaiting_join: 0,
            supported_protocols: HashMap::new(),
            new_member_added: false,
            join_timer: None,
            sync_timer: None,
            offsets: Offsets::default(),
            subscribed_topics: None,
            timing,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    pub fn member(&self, id: &str) -> Option<&Member> {
        self.members.get(id)
    }

    /// Member ids in join order.
    pub fn member_ids(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    pub fn offsets(&self) -> &Offsets {
        &self.offsets
    }

    pub(super) fn offsets_mut(&mut self) -> &mut Offsets {
        &mut self.offsets
    }

    /// The earliest timer, for the task that fires them.
    pub fn next_deadline(&self) -> Option<Instant> {
        let members = self.members.values().filter_map(|m| m.heartbeat_deadline);
        let pending = self.pending_members.values().copied();
        let join = self.join_timer.map(JoinTimer::at);
        let sync = self.sync_timer.map(|t| t.at);
        members.chain(pending).chain(join).chain(sync).min()
    }

    /// DescribeGroups: metadata and assignments only once Stable, as Kafka reports them.
    pub fn describe(&self) -> GroupSummary {
        let stable = self.state == GroupState::Stable;
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        GroupSummary {
            state: self.state.name(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_data: if stable {
                protocol.to_string()
            } else {
                String::new()
            },
            members: self
                .members
                .values()
                .map(|m| MemberSummary {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }

    pub fn listing(&self) -> GroupListing {
        GroupListing {
            group_id: self.id.clone(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            state: self.state.name(),
        }
    }

    /// DeleteGroups: only an Empty group goes, with its offsets.
    pub fn delete(&mut self) -> Result<(), ResponseError> {
        match self.state {
            GroupState::Dead => Err(ResponseError::GroupIdNotFound),
            GroupState::Stable
            | GroupState::PreparingRebalance
            | GroupState::CompletingRebalance => Err(ResponseError::NonEmptyGroup),
            GroupState::Empty => {
                self.transition(GroupState::Dead);
                self.offsets.clear();
                self.pending_members.clear();
                self.join_timer = None;
                self.sync_timer = None;
                Ok(())
            }
        }
    }

    fn transition(&mut self, next: GroupState) {
        if !self.state.can_transition_to(next) {
            // Only a bug in this module can get here; a client cannot.
            debug_assert!(false, "group {}: {:?} -> {next:?}", self.id, self.state);
            error!(group = %self.id, from = ?self.state, to = ?next, "invalid group state transition");
        }
        self.previous_state = self.state;
        self.state = next;
        self.state_since = Instant::now();
    }

    /// Kafka's `validateMember`: a static member must be the instance's current member id.
    fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                None => return Err(ResponseError::UnknownMemberId),
                Some(current) if current != member_id => {
                    return Err(ResponseError::FencedInstanceId)
                }
                Some(_) => {}
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ResponseError::UnknownMemberId)
        }
    }

    /// Kafka's `supportsProtocols`: an Empty group takes any non-empty type and list; otherwise
    /// the type must match and one of the protocols must be supported by every member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        let names = protocol_names(protocols);
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !names.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && names.iter().any(|name| {
                self.supported_protocols.get(*name).copied().unwrap_or(0) == self.members.len()
            })
    }

    /// The protocol with most votes among those every member supports; each member votes for
    /// its first supported preference. Kafka breaks ties arbitrarily; here the earliest member's
    /// preference order does, so the choice is reproducible.
    fn select_protocol(&self) -> Option<String> {
        let candidates: HashSet<&str> = self
            .supported_protocols
            .iter()
            .filter(|&(_, &count)| count == self.members.len())
            .map(|(name, _)| name.as_str())
            .collect();
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for member in self.members.values() {
            if let Some(name) = member.vote(&candidates) {
                *votes.entry(name).or_default() += 1;
            }
        }
        let most = votes.values().copied().max()?;
        let first = self.members.values().next()?;
        first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|name| votes.get(name) == Some(&most))
            .map(str::to_string)
    }

    /// The largest rebalance timeout of the members: how long a join phase may take.
    fn rebalance_timeout(&self) -> Duration {
        let ms = self
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0);
        Duration::from_millis(ms.max(0) as u64)
    }

    fn all_members_joined(&self) -> bool {
        self.members.len() == self.awaiting_join && self.pending_members.is_empty()
    }

    fn add_member(&mut self, mut member: Member, join: oneshot::Sender<JoinResult>) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), member.id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        for name in member.protocol_names() {
            *self
                .supported_protocols
                .entry(name.to_string())
                .or_default() += 1;
        }
        member.awaiting_join = Some(join);
        self.awaiting_join += 1;
        self.pending_members.remove(&member.id);
        self.members.insert(member.id.clone(), member);
    }

    /// Removes a member; a parked request of its own is told it is no longer a member.
    fn remove_member(&mut self, id: &str) -> Option<Member> {
        let mut member = self.members.shift_remove(id)?;
        for name in member.protocol_names() {
            if let Some(count) = self.supported_protocols.get_mut(name) {
                *count = count.saturating_sub(1);
            }
        }
        if let Some(join) = member.awaiting_join.take() {
            self.awaiting_join -= 1;
            let _ = join.send(JoinResult::error(ResponseError::UnknownMemberId, ""));
        }
        if let Some(sync) = member.awaiting_sync.take() {
            let _ = sync.send(SyncResult::error(ResponseError::UnknownMemberId));
        }
        if let Some(instance) = &member.instance_id {
            self.static_members.remove(instance);
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = self.members.keys().next().cloned();
        }
        self.pending_sync.remove(id);
        Some(member)
    }

    /// New protocols and timeouts for a rejoining member, whose JoinGroup is now parked.
    fn update_member(
        &mut self,
        id: &str,
        protocols: Vec<Protocol>,
        rebalance_timeout_ms: i32,
        session_timeout_ms: i32,
        join: oneshot::Sender<JoinResult>,
    ) {
        let Some(member) = self.members.get_mut(id) else {
            return;
        };
        for name in member.protocol_names() {
            if let Some(count) = self.supported_protocols.get_mut(name) {
                *count = count.saturating_sub(1);
            }
        }
        for name in protocol_names(&protocols) {
            *self
                .supported_protocols
                .entry(name.to_string())
                .or_default() += 1;
        }
        member.protocols = protocols;
        member.rebalance_timeout_ms = rebalance_timeout_ms;
        member.session_timeout_ms = session_timeout_ms;
        match member.awaiting_join.replace(join) {
            // Kafka drops the earlier request silently and its client waits out its timeout;
            // telling it to rejoin frees its connection at once.
            Some(earlier) => {
                let _ = earlier.send(JoinResult::error(ResponseError::RebalanceInProgress, id));
            }
            None => self.awaiting_join += 1,
        }
    }

    /// Answers a member's parked JoinGroup; false when none was parked.
    fn answer_join(&mut self, id: &str, result: JoinResult) -> bool {
        let Some(join) = self
            .members
            .get_mut(id)
            .and_then(|m| m.awaiting_join.take())
        else {
            return false;
        };
        self.awaiting_join -= 1;
        let _ = join.send(result);
        true
    }

    /// Answers a member's parked SyncGroup; false when none was parked.
    fn answer_sync(&mut self, id: &str, result: SyncResult) -> bool {
        match self
            .members
            .get_mut(id)
            .and_then(|m| m.awaiting_sync.take())
        {
            Some(sync) => {
                let _ = sync.send(result);
                true
            }
            None => false,
        }
    }

    fn reschedule_heartbeat(&mut self, id: &str, now: Instant) {
        if let Some(member) = self.members.get_mut(id) {
            let timeout = Duration::from_millis(member.session_timeout_ms.max(0) as u64);
            member.heartbeat_deadline = Some(now + timeout);
        }
    }

    /// What the leader's JoinGroup response lists: every member with its metadata for the
    /// chosen protocol.
    fn members_for_leader(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    /// A successful JoinGroup answer for the current generation.
    fn join_result(
        &self,
        member_id: &str,
        leader: String,
        members: Vec<JoinedMember>,
    ) -> JoinResult {
        JoinResult {
            error: None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader,
            skip_assignment: false,
            member_id: member_id.to_string(),
            members,
        }
    }
}
