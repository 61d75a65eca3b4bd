//! Timers on a hand-moved clock: the initial delay, session expiry, the rebalance timeout, the
//! sync deadline.

use kafka_protocol::ResponseError;

use super::*;

#[test]
fn the_initial_delay_waits_again_while_members_keep_arriving() {
    let mut h = Harness::with_delay(3_000);
    let (_a, mut a_join) = h.new_member(&["range"]);
    h.advance(1_000);
    let (_b, mut b_join) = h.new_member(&["range"]);
    // At 3 s a member has arrived since the delay began: wait another 3 s.
    h.advance(2_000);
    assert!(answered(&mut a_join).is_none());
    h.advance(2_999);
    assert!(answered(&mut a_join).is_none());
    h.advance(1);
    let a = answered(&mut a_join).unwrap();
    let b = answered(&mut b_join).unwrap();
    assert_eq!((a.generation_id, b.generation_id), (1, 1));
    assert_eq!(a.members.len(), 2);
}

#[test]
fn the_initial_delay_never_exceeds_the_rebalance_timeout() {
    let mut h = Harness::with_delay(3_000);
    let mut request = join_request("", &["range"]);
    request.require_known_member_id = false;
    request.rebalance_timeout_ms = 4_000;
    let mut first = h.join(request.clone());
    h.advance(1_000);
    let _second = h.join(request);
    // Extended by min(3 s, 4 s - 3 s) = 1 s: done at 4 s.
    h.advance(2_999);
    assert!(answered(&mut first).is_none());
    h.advance(1_000);
    assert_eq!(answered(&mut first).unwrap().generation_id, 1);
}

#[test]
fn a_silent_member_is_expired_after_its_session_and_the_other_takes_over() {
    let mut h = Harness::new();
    let (a, b) = h.stable_pair();
    // A heartbeats every 3 s; B has not been heard of since its sync at time 0.
    for _ in 0..3 {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&a, 1), Ok(()));
    }
    h.advance(SESSION_MS as u64 - 9_001);
    assert!(h.group.member(&b).is_some());
    h.advance(1);
    assert!(
        h.group.member(&b).is_none(),
        "expired at exactly the session timeout"
    );
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.heartbeat(&a, 1), Err(ResponseError::RebalanceInProgress));
    let joined = h.join_now(join_request(&a, &["range"]));
    assert_eq!((joined.generation_id, joined.members.len()), (2, 1));
}

#[test]
fn the_rebalance_timeout_drops_members_that_do_not_rejoin() {
    let mut h = Harness::new();
    let (a, b) = h.stable_pair();
    // B rejoins (changing nothing would not rebalance; the new protocol list does) and A, the
    // leader, keeps heartbeating without rejoining.
    let mut b_join = h.join(join_request(&b, &["range", "roundrobin"]));
    for _ in 0..(REBALANCE_MS / 3_000 - 1) {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&a, 1), Err(ResponseError::RebalanceInProgress));
    }
    assert!(answered(&mut b_join).is_none());
    h.advance(3_000);
    let joined = answered(&mut b_join).unwrap();
    // A is gone; B, the only member that rejoined, leads generation 2.
    assert_eq!(joined.generation_id, 2);
    assert_eq!(joined.leader, b);
    assert!(h.group.member(&a).is_none());
}

#[test]
fn a_pending_member_id_holds_the_rebalance_until_its_session_ends() {
    let mut h = Harness::new();
    let (a, _b) = h.stable_pair();
    // A third client gets an id but never comes back with it.
    let pending = h.join_now(join_request("", &["range"]));
    assert_eq!(pending.error, Some(ResponseError::MemberIdRequired));
    let mut a_join = h.join(join_request(&a, &["range"]));
    let mut b_join = h.join(join_request(&_b, &["range"]));
    assert!(answered(&mut a_join).is_none());
    h.advance(SESSION_MS as u64);
    assert_eq!(answered(&mut a_join).unwrap().generation_id, 2);
    assert_eq!(answered(&mut b_join).unwrap().generation_id, 2);
}

#[test]
fn members_that_never_sync_are_removed_after_the_rebalance_timeout() {
    let mut h = Harness::new();
    let (a, mut a_join) = h.new_member(&["range"]);
    let (b, mut b_join) = h.new_member(&["range"]);
    h.advance(0);
    answered(&mut a_join).unwrap();
    answered(&mut b_join).unwrap();
    // B keeps its session alive but never syncs; the leader's assignment still answers A.
    let mut a_sync = h.sync(sync_request(&a, 1, vec![(a.clone(), bytes("all"))]));
    assert_eq!(answered(&mut a_sync).unwrap().assignment, bytes("all"));
    for _ in 0..(REBALANCE_MS / 3_000 - 1) {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&b, 1), Ok(()));
        assert_eq!(h.heartbeat(&a, 1), Ok(()));
    }
    h.advance(3_000);
    assert!(h.group.member(&b).is_none());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn a_new_member_parked_too_long_is_dropped_and_told_so() {
    let mut h = Harness::new();
    let (a, _b) = h.stable_pair();
    // Long rebalance timeouts, and members that heartbeat but do not rejoin.
    let mut slow = join_request(&a, &["range", "roundrobin"]);
    slow.rebalance_timeout_ms = 600_000;
    let _a_join = h.join(slow);
    let (c, mut c_join) = h.new_member(&["range"]);
    for _ in 0..100 {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&_b, 1), Err(ResponseError::RebalanceInProgress));
    }
    // 300 s: the new member's join timed out.
    let dropped = answered(&mut c_join).unwrap();
    assert_eq!(dropped.error, Some(ResponseError::UnknownMemberId));
    assert!(h.group.member(&c).is_none());
}

#[test]
fn next_deadline_is_the_earliest_timer() {
    let mut h = Harness::new();
    assert_eq!(h.group.next_deadline(), None);
    let (_a, _b) = h.stable_pair();
    // Both sessions restarted at the sync, at time 0.
    let session = std::time::Duration::from_millis(SESSION_MS as u64);
    assert_eq!(h.group.next_deadline(), Some(h.now + session));
}
