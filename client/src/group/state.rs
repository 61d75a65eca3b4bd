//! A group member's state as Kafka's `AbstractCoordinator` keeps it: where it is in a rebalance,
//! the generation it belongs to, whether it must rejoin and why, and the clocks behind heartbeats
//! and the poll interval.
//!
//! Plain data, changed by methods that take the time, so the unit tests drive it without sockets.
//! The poll loop and the heartbeat task share one instance behind a lock.
//!
//! ```text
//!            start_join              joined               synced
//! Unjoined ───────────▶ Joining ───────────▶ Syncing ───────────▶ Stable
//!    ▲                    ▲                                          │
//!    │                    └──────── start_join (rejoin requested) ───┘
//!    └── reset_generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, poll timeout) from any phase
//! ```

use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::time::Instant;

use crate::error::{Error, ServerError, COMMIT_FAILED_NOT_IN_GROUP, COMMIT_FAILED_REBALANCED};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not in the group: never joined, left, or reset after an error.
    Unjoined,
    /// JoinGroup sent; waiting for the other members (Kafka's PREPARING_REBALANCE).
    Joining,
    /// Joined; SyncGroup sent, waiting for the leader's assignment (COMPLETING_REBALANCE).
    Syncing,
    /// Has an assignment for the current generation.
    Stable,
}

/// A generation of the group as this member knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// -1 when the member belongs to no generation.
    pub id: i32,
    /// Empty until the coordinator gives one.
    pub member_id: String,
    pub protocol: Option<String>,
}

impl Generation {
    pub const NONE_ID: i32 = -1;

    pub fn none() -> Self {
        Self {
            id: Self::NONE_ID,
            member_id: String::new(),
            protocol: None,
        }
    }

    pub fn is_valid(&self) -> bool {
        self.id != Self::NONE_ID && !self.member_id.is_empty()
    }
}

/// What the heartbeat task should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatStep {
    /// Nothing until this time (or until woken); `None`: until woken.
    Wait(Option<Instant>),
    Send(Generation),
    /// The member has not polled within max.poll.interval: leave the group.
    LeaveForPollTimeout(Generation),
    /// No heartbeat answer for a whole session: look for the coordinator again.
    SessionExpired,
}

/// What a heartbeat's error means for the member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatVerdict {
    Ok,
    /// Rejoin on the next poll (the group is rebalancing, or we were dropped).
    Rejoin,
    /// The coordinator moved or went away: find it again, then retry.
    FindCoordinator,
    /// Not for us to fix: stop and report on the next poll.
    Fatal(ServerError),
    /// Something passing: retry after the backoff.
    Retry,
}

#[derive(Debug)]
pub struct MemberState {
    phase: Phase,
    generation: Generation,
    leader: bool,
    /// Why the member must rejoin, when it must.
    rejoin: Option<String>,
    /// An error that ends membership (FENCED_INSTANCE_ID, ...), reported by the next poll.
    fatal: Option<Error>,
    /// When the application last left `poll`, or entered it.
    last_poll: Instant,
    /// The application is inside `poll` (joining, syncing, fetching): its poll interval does not
    /// run, as in Java, whose `poll` resets it at least every heartbeat interval while it waits.
    in_poll: bool,
    next_heartbeat: Instant,
    last_heartbeat_answer: Instant,
}

impl MemberState {
    pub fn new(now: Instant) -> Self {
        Self {
            phase: Phase::Unjoined,
            generation: Generation::none(),
            leader: false,
            rejoin: Some("the member has not joined yet".into()),
            fatal: None,
            last_poll: now,
            in_poll: false,
            next_heartbeat: now,
            last_heartbeat_answer: now,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    pub fn is_leader(&self) -> bool {
        self.leader && self.phase == Phase::Stable
    }

    /// The reason to rejoin, if the member must (or has not joined at all).
    pub fn rejoin_reason(&self) -> Option<&str> {
        match self.phase {
            Phase::Stable => self.rejoin.as_deref(),
            _ => Some(
                self.rejoin
                    .as_deref()
                    .unwrap_or("a rebalance was interrupted"),
            ),
        }
    }

    pub fn take_fatal(&mut self) -> Option<Error> {
        self.fatal.take()
    }

    /// The application called `poll`. Until it returns, the time is the client's: Java's
    /// `KafkaConsumer.poll` resets the poll timer on every round of its loop
    /// (`ConsumerCoordinator.poll` -> `pollHeartbeat`), and a round waits at most until the next
    /// heartbeat is due, so a JoinGroup or SyncGroup that takes seconds never counts against
    /// max.poll.interval.ms (KIP-62: the interval bounds the application's processing).
    pub fn poll_started(&mut self, now: Instant) {
        self.last_poll = now;
        self.in_poll = true;
    }

    /// `poll` returned (or was dropped): the application's processing time starts now.
    pub fn poll_ended(&mut self, now: Instant) {
        self.last_poll = now;
        self.in_poll = false;
    }

    pub fn request_rejoin(&mut self, reason: impl Into<String>) {
        if self.rejoin.is_none() {
            let reason = reason.into();
            tracing::info!(%reason, "rejoining the group");
            self.rejoin = Some(reason);
        }
    }

    pub fn start_join(&mut self) {
        self.phase = Phase::Joining;
        self.leader = false;
    }

    /// MEMBER_ID_REQUIRED: the coordinator named our member id; join again with it.
    pub fn member_id_assigned(&mut self, member_id: String) {
        self.generation.member_id = member_id;
    }

    /// JoinGroup answered: heartbeats start, and the session runs from now.
    pub fn joined(&mut self, generation: Generation, leader: bool, now: Instant) {
        self.generation = generation;
        self.leader = leader;
        self.phase = Phase::Syncing;
        self.heartbeat_answered(now);
    }

    /// The assignment arrived: the member is Stable and heartbeats start an interval from now.
    pub fn synced(&mut self, now: Instant, heartbeat_interval: Duration) {
        self.phase = Phase::Stable;
        self.rejoin = None;
        self.next_heartbeat = now + heartbeat_interval;
        self.heartbeat_answered(now);
    }

    /// Leaves the current generation (Kafka's `resetStateAndGeneration`). The member id is kept
    /// when it may still be valid (ILLEGAL_GENERATION), so the coordinator need not wait for the
    /// old id to time out.
    pub fn reset_generation(&mut self, reason: &str, keep_member_id: bool) {
        tracing::info!(reason, keep_member_id, "resetting the member's generation");
        let member_id = std::mem::take(&mut self.generation.member_id);
        self.generation = Generation::none();
        if keep_member_id {
            self.generation.member_id = member_id;
        }
        self.phase = Phase::Unjoined;
        self.leader = false;
        self.rejoin = Some(reason.to_string());
    }

    pub fn fail(&mut self, error: Error) {
        self.fatal = Some(error);
        self.phase = Phase::Unjoined;
    }

    pub fn heartbeat_sent(&mut self, now: Instant, interval: Duration) {
        self.next_heartbeat = now + interval;
    }

    pub fn heartbeat_answered(&mut self, now: Instant) {
        self.last_heartbeat_answer = now;
    }

    /// A heartbeat failed to get through: try again after `backoff`, not a full interval.
    pub fn heartbeat_retry_after(&mut self, now: Instant, backoff: Duration) {
        self.next_heartbeat = now + backoff;
    }

    /// Decides the heartbeat task's next move. Heartbeats run while Syncing and Stable; during a
    /// JoinGroup the coordinator needs none. The poll interval is watched only while Stable and
    /// the application is outside `poll`, so a long rebalance inside `poll` (a slow SyncGroup,
    /// the group's initial delay) does not count against it.
    pub fn heartbeat_step(
        &self,
        now: Instant,
        max_poll_interval: Duration,
        session_timeout: Duration,
    ) -> HeartbeatStep {
        if !matches!(self.phase, Phase::Syncing | Phase::Stable) || self.fatal.is_some() {
            return HeartbeatStep::Wait(None);
        }
        let poll_deadline = (self.phase == Phase::Stable && !self.in_poll)
            .then(|| self.last_poll + max_poll_interval);
        if poll_deadline.is_some_and(|deadline| now >= deadline) {
            return HeartbeatStep::LeaveForPollTimeout(self.generation.clone());
        }
        if now >= self.last_heartbeat_answer + session_timeout {
            return HeartbeatStep::SessionExpired;
        }
        if now >= self.next_heartbeat {
            return HeartbeatStep::Send(self.generation.clone());
        }
        let wake = poll_deadline.map_or(self.next_heartbeat, |d| d.min(self.next_heartbeat));
        HeartbeatStep::Wait(Some(wake))
    }

    /// The member stopped polling: it leaves its generation, and its next commit fails.
    pub fn left_for_poll_timeout(&mut self) {
        self.reset_generation("the member did not poll within max.poll.interval.ms", false);
    }

    /// Takes in a heartbeat's error code for the generation it was sent with (Kafka's
    /// `HeartbeatResponseHandler`). An answer about an older generation changes nothing.
    pub fn on_heartbeat(
        &mut self,
        sent_for: &Generation,
        code: i16,
        now: Instant,
    ) -> HeartbeatVerdict {
        let current = *sent_for == self.generation;
        let verdict = heartbeat_verdict(code);
        if code == 0 || verdict == HeartbeatVerdict::Rejoin {
            self.heartbeat_answered(now);
        }
        if !current {
            return HeartbeatVerdict::Ok;
        }
        match ResponseError::try_from_code(code) {
            // While Syncing the SyncGroup answer brings the news itself.
            Some(ResponseError::RebalanceInProgress) if self.phase == Phase::Stable => {
                self.request_rejoin("the group is rebalancing");
            }
            None | Some(ResponseError::RebalanceInProgress) => {}
            Some(ResponseError::IllegalGeneration) => {
                self.reset_generation("the heartbeat's generation is stale", true);
            }
            Some(ResponseError::UnknownMemberId) => {
                self.reset_generation("the coordinator does not know this member", false);
            }
            Some(_) => {
                if let HeartbeatVerdict::Fatal(e) = &verdict {
                    self.fail(e.clone().into());
                }
            }
        }
        verdict
    }

    /// The generation a commit goes out with, or why it cannot go out (Java's
    /// `generationIfStable` and the errors `sendOffsetCommitRequest` raises without it).
    pub fn commit_generation(&self) -> Result<Generation, Error> {
        match self.phase {
            Phase::Stable if self.generation.is_valid() => Ok(self.generation.clone()),
            Phase::Joining | Phase::Syncing => Err(ServerError::new(
                ResponseError::RebalanceInProgress.code(),
            )
            .message(Some(
                "the member is rebalancing; poll to complete the rebalance, then commit again",
            ))
            .into()),
            // Java fails the commit itself and sends nothing: the coordinator would refuse it.
            _ => Err(Error::CommitFailed {
                message: COMMIT_FAILED_NOT_IN_GROUP.to_string(),
            }),
        }
    }

    /// Takes in a commit's error codes (Kafka's `OffsetCommitResponseHandler`): a member the
    /// coordinator no longer counts in this generation has lost its partitions.
    pub fn on_commit_error(&mut self, sent_for: &Generation, code: i16) -> Option<Error> {
        let kind = ResponseError::try_from_code(code)?;
        let current = *sent_for == self.generation;
        match kind {
            ResponseError::UnknownMemberId | ResponseError::IllegalGeneration => {
                if current {
                    self.reset_generation(
                        &format!("the coordinator refused a commit with {kind}"),
                        kind == ResponseError::IllegalGeneration,
                    );
                }
                Some(Error::CommitFailed {
                    message: format!(
                        "{COMMIT_FAILED_REBALANCED} (The coordinator answered {}.)",
                        ServerError::new(code).name()
                    ),
                })
            }
            ResponseError::RebalanceInProgress => {
                if current {
                    self.request_rejoin("a commit found the group rebalancing");
                }
                None
            }
            ResponseError::FencedInstanceId => {
                let e: Error = ServerError::new(code).into();
                self.fail(e.clone());
                Some(e)
            }
            _ => None,
        }
    }
}

/// The heartbeat verdict an error code carries, before state is considered.
fn heartbeat_verdict(code: i16) -> HeartbeatVerdict {
    let Some(kind) = ResponseError::try_from_code(code) else {
        return HeartbeatVerdict::Ok;
    };
    match kind {
        ResponseError::RebalanceInProgress
        | ResponseError::IllegalGeneration
        | ResponseError::UnknownMemberId => HeartbeatVerdict::Rejoin,
        ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
            HeartbeatVerdict::FindCoordinator
        }
        ResponseError::CoordinatorLoadInProgress => HeartbeatVerdict::Retry,
        _ => HeartbeatVerdict::Fatal(ServerError::new(code)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_secs(300);
    const SESSION: Duration = Duration::from_secs(45);
    const BEAT: Duration = Duration::from_secs(3);

    fn generation(id: i32) -> Generation {
        Generation {
            id,
            member_id: "m-1".into(),
            protocol: Some("range".into()),
        }
    }

    fn stable(now: Instant) -> MemberState {
        let mut s = MemberState::new(now);
        s.start_join();
        s.joined(generation(4), false, now);
        s.synced(now, BEAT);
        s
    }

    #[test]
    fn joining_then_syncing_then_stable() {
        let t = Instant::now();
        let mut s = MemberState::new(t);
        assert_eq!(s.phase(), Phase::Unjoined);
        assert!(s.rejoin_reason().is_some());
        s.start_join();
        s.member_id_assigned("m-1".into());
        assert_eq!(s.generation().member_id, "m-1");
        assert_eq!(
            s.heartbeat_step(t, POLL, SESSION),
            HeartbeatStep::Wait(None)
        );
        s.joined(generation(4), true, t);
        assert_eq!(s.phase(), Phase::Syncing);
        assert!(!s.is_leader(), "leader only once Stable");
        s.synced(t, BEAT);
        assert!(s.is_leader());
        assert_eq!(s.rejoin_reason(), None);
        assert_eq!(s.commit_generation().unwrap().id, 4);
    }

    #[test]
    fn heartbeats_every_interval_while_stable() {
        let t = Instant::now();
        let mut s = stable(t);
        assert_eq!(
            s.heartbeat_step(t, POLL, SESSION),
            HeartbeatStep::Wait(Some(t + BEAT))
        );
        let later = t + BEAT;
        assert_eq!(
            s.heartbeat_step(later, POLL, SESSION),
            HeartbeatStep::Send(generation(4))
        );
        s.heartbeat_sent(later, BEAT);
        assert_eq!(
            s.on_heartbeat(&generation(4), 0, later),
            HeartbeatVerdict::Ok
        );
        assert_eq!(
            s.heartbeat_step(later, POLL, SESSION),
            HeartbeatStep::Wait(Some(later + BEAT))
        );
    }

    #[test]
    fn rebalance_in_progress_asks_for_a_rejoin_and_keeps_the_generation() {
        let t = Instant::now();
        let mut s = stable(t);
        assert_eq!(
            s.on_heartbeat(&generation(4), 27, t),
            HeartbeatVerdict::Rejoin
        );
        assert_eq!(s.rejoin_reason(), Some("the group is rebalancing"));
        // Commits of the current generation are still allowed while the group prepares.
        assert_eq!(s.commit_generation().unwrap().id, 4);
    }

    #[test]
    fn unknown_member_and_stale_generation_reset() {
        let t = Instant::now();
        let mut s = stable(t);
        s.on_heartbeat(&generation(4), 22, t);
        assert_eq!(s.phase(), Phase::Unjoined);
        assert_eq!(s.generation().id, -1);
        assert_eq!(
            s.generation().member_id,
            "m-1",
            "ILLEGAL_GENERATION keeps the member id"
        );
        assert!(matches!(
            s.commit_generation(),
            Err(Error::CommitFailed { .. })
        ));

        let mut s = stable(t);
        s.on_heartbeat(&generation(4), 25, t);
        assert_eq!(s.generation(), &Generation::none());
    }

    #[test]
    fn answers_about_an_older_generation_are_ignored() {
        let t = Instant::now();
        let mut s = stable(t);
        assert_eq!(s.on_heartbeat(&generation(3), 25, t), HeartbeatVerdict::Ok);
        assert_eq!(s.phase(), Phase::Stable);
        assert!(
            s.on_commit_error(&generation(3), 22).is_some(),
            "still a failed commit"
        );
        assert_eq!(s.phase(), Phase::Stable);
    }

    #[test]
    fn fenced_is_fatal_and_reported_once() {
        let t = Instant::now();
        let mut s = stable(t);
        assert!(matches!(
            s.on_heartbeat(&generation(4), 82, t),
            HeartbeatVerdict::Fatal(_)
        ));
        assert!(s.take_fatal().is_some());
        assert!(s.take_fatal().is_none());
        assert_eq!(
            s.heartbeat_step(t, POLL, SESSION),
            HeartbeatStep::Wait(None)
        );
    }

    #[test]
    fn no_poll_within_the_interval_means_leaving_and_failed_commits() {
        let t = Instant::now();
        let mut s = stable(t);
        s.poll_ended(t);
        let late = t + POLL;
        assert_eq!(
            s.heartbeat_step(late, POLL, SESSION),
            HeartbeatStep::LeaveForPollTimeout(generation(4))
        );
        s.left_for_poll_timeout();
        assert_eq!(s.phase(), Phase::Unjoined);
        // Failed here, as Java's consumer fails it, without asking the coordinator.
        let Err(Error::CommitFailed { message }) = s.commit_generation() else {
            panic!("the commit must fail");
        };
        assert_eq!(
            message,
            "Offset commit cannot be completed since the consumer is not part of an active group \
             for auto partition assignment; it is likely that the consumer was kicked out of the \
             group."
        );
        // The next poll rejoins.
        s.poll_started(late);
        assert!(s.rejoin_reason().is_some());
    }

    /// A rebalance inside `poll` takes longer than the whole interval, JoinGroup and SyncGroup
    /// alike (a cluster answering SyncGroup seconds late): the member stays; the interval runs
    /// from the moment `poll` returns.
    #[test]
    fn the_time_spent_rebalancing_inside_poll_does_not_count_against_the_poll_interval() {
        let t = Instant::now();
        let mut s = MemberState::new(t);
        s.poll_started(t);
        s.start_join();
        let joined = t + POLL + BEAT;
        s.joined(generation(4), false, joined);
        assert_eq!(
            s.heartbeat_step(joined, POLL, SESSION),
            HeartbeatStep::Send(generation(4)),
            "heartbeats while syncing, no poll timeout"
        );
        s.heartbeat_sent(joined, BEAT);
        let synced = joined + POLL + BEAT;
        s.on_heartbeat(&generation(4), 0, synced - BEAT);
        s.synced(synced, BEAT);
        assert_eq!(
            s.heartbeat_step(synced, POLL, SESSION),
            HeartbeatStep::Wait(Some(synced + BEAT)),
            "stable, still inside poll: only the next heartbeat is scheduled"
        );
        let returned = synced + BEAT / 2;
        s.poll_ended(returned);
        assert_eq!(
            s.heartbeat_step(returned, POLL, SESSION),
            HeartbeatStep::Wait(Some(synced + BEAT))
        );
        assert_eq!(
            s.heartbeat_step(returned + POLL, POLL, SESSION),
            HeartbeatStep::LeaveForPollTimeout(generation(4))
        );
    }

    #[test]
    fn a_silent_coordinator_is_looked_up_again_after_a_session() {
        let t = Instant::now();
        let mut s = stable(t);
        s.poll_ended(t + SESSION);
        assert_eq!(
            s.heartbeat_step(t + SESSION, POLL, SESSION),
            HeartbeatStep::SessionExpired
        );
    }

    #[test]
    fn commits_refused_for_the_generation_reset_it() {
        let t = Instant::now();
        let mut s = stable(t);
        let e = s.on_commit_error(&generation(4), 25).unwrap();
        assert!(matches!(e, Error::CommitFailed { .. }));
        assert_eq!(s.generation(), &Generation::none());

        let mut s = stable(t);
        assert!(s.on_commit_error(&generation(4), 27).is_none());
        assert!(s.rejoin_reason().is_some());
        assert!(
            s.on_commit_error(&generation(4), 3).is_none(),
            "not about membership"
        );
    }

    #[test]
    fn rebalancing_members_cannot_commit() {
        let t = Instant::now();
        let mut s = stable(t);
        s.start_join();
        let err = s.commit_generation().unwrap_err();
        assert_eq!(err.server().map(|e| e.code), Some(27));
    }
}
