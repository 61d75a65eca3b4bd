//! The state machine driven directly: requests and timers on a [`Group`] with a hand-moved
//! clock, parked requests read from their channels.

mod membership;
mod static_members;
mod timers;

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot::{self, error::TryRecvError, Receiver};
use tokio::time::Instant;

use super::{Group, GroupState, Timing};
use crate::group::messages::{JoinRequest, JoinResult, Protocol, SyncRequest, SyncResult};

pub(super) const SESSION_MS: i32 = 10_000;
pub(super) const REBALANCE_MS: i32 = 60_000;

/// A group and the time it lives in.
pub(super) struct Harness {
    pub group: Group,
    pub now: Instant,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_delay(0)
    }

    pub fn with_delay(initial_rebalance_delay_ms: u64) -> Self {
        let timing = Timing {
            initial_rebalance_delay: Duration::from_millis(initial_rebalance_delay_ms),
            ..Timing::default()
        };
        Self {
            group: Group::new("g", timing),
            now: Instant::now(),
        }
    }

    /// Moves the clock and fires what is due, as the timer task does.
    pub fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        self.group.on_timers(self.now);
    }

    pub fn join(&mut self, request: JoinRequest) -> Receiver<JoinResult> {
        let (tx, rx) = oneshot::channel();
        self.group.join(request, tx, self.now);
        rx
    }

    /// A join that must be answered at once.
    pub fn join_now(&mut self, request: JoinRequest) -> JoinResult {
        let mut rx = self.join(request);
        answered(&mut rx).expect("answered at once")
    }

    pub fn sync(&mut self, request: SyncRequest) -> Receiver<SyncResult> {
        let (tx, rx) = oneshot::channel();
        self.group.sync(request, tx, self.now);
        rx
    }

    pub fn heartbeat(&mut self, member: &str, generation: i32) -> Result<(), ResponseError> {
        self.group.heartbeat(member, None, generation, self.now)
    }

    /// A v4+ dynamic member through its MEMBER_ID_REQUIRED round: its id and parked join.
    pub fn new_member(&mut self, protocols: &[&str]) -> (String, Receiver<JoinResult>) {
        let first = self.join_now(join_request("", protocols));
        assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
        let id = first.member_id;
        let rx = self.join(join_request(&id, protocols));
        (id, rx)
    }

    /// Two members, A the leader, synced and Stable in generation 1 with A assigned "a" and B
    /// assigned "b".
    pub fn stable_pair(&mut self) -> (String, String) {
        let (a, mut a_join) = self.new_member(&["range"]);
        let (b, mut b_join) = self.new_member(&["range"]);
        self.advance(0);
        let a_joined = answered(&mut a_join).expect("join complete");
        let b_joined = answered(&mut b_join).expect("join complete");
        assert_eq!((a_joined.generation_id, b_joined.generation_id), (1, 1));
        assert_eq!(a_joined.leader, a);
        let mut b_sync = self.sync(sync_request(&b, 1, vec![]));
        let mut a_sync = self.sync(sync_request(
            &a,
            1,
            vec![(a.clone(), bytes("a")), (b.clone(), bytes("b"))],
        ));
        assert_eq!(answered(&mut a_sync).unwrap().assignment, bytes("a"));
        assert_eq!(answered(&mut b_sync).unwrap().assignment, bytes("b"));
        assert_eq!(self.group.state(), GroupState::Stable);
        (a, b)
    }
}

/// The answer if one was sent.
pub(super) fn answered<T>(rx: &mut Receiver<T>) -> Option<T> {
    match rx.try_recv() {
        Ok(answer) => Some(answer),
        Err(TryRecvError::Empty) => None,
        Err(TryRecvError::Closed) => panic!("request dropped without an answer"),
    }
}

pub(super) fn bytes(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Each protocol's metadata is its name with a "-meta" suffix.
pub(super) fn protocols(names: &[&str]) -> Vec<Protocol> {
    names
        .iter()
        .map(|name| Protocol {
            name: name.to_string(),
            metadata: bytes(&format!("{name}-meta")),
        })
        .collect()
}

/// A v4-style JoinGroup from client "c".
pub(super) fn join_request(member_id: &str, names: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_string(),
        group_instance_id: None,
        client_id: "c".to_string(),
        client_host: "/127.0.0.1".to_string(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".to_string(),
        protocols: protocols(names),
        require_known_member_id: true,
        supports_skip_assignment: false,
    }
}

pub(super) fn sync_request(
    member_id: &str,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncRequest {
    SyncRequest {
        member_id: member_id.to_string(),
        group_instance_id: None,
        generation_id: generation,
        protocol_type: None,
        protocol_name: None,
        assignments,
    }
}

#[test]
fn transitions_are_kafkas() {
    use GroupState::*;
    let all = [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead];
    let allowed: Vec<(GroupState, GroupState)> = all
        .iter()
        .flat_map(|&from| all.iter().map(move |&to| (from, to)))
        .filter(|&(from, to)| from.can_transition_to(to))
        .collect();
    assert_eq!(
        allowed,
        vec![
            (Empty, PreparingRebalance),
            (Empty, Dead),
            (PreparingRebalance, Empty),
            (PreparingRebalance, CompletingRebalance),
            (PreparingRebalance, Dead),
            (CompletingRebalance, PreparingRebalance),
            (CompletingRebalance, Stable),
            (CompletingRebalance, Dead),
            (Stable, PreparingRebalance),
            (Stable, Dead),
            (Dead, Dead),
        ]
    );
    let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
    assert_eq!(
        names,
        [
            "Empty",
            "PreparingRebalance",
            "CompletingRebalance",
            "Stable",
            "Dead"
        ]
    );
}
