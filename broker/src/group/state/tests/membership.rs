//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the commit checks, state by state.

use kafka_protocol::ResponseError;

use super::*;
use crate::group::messages::LeavingMember;

#[test]
fn a_v4_member_gets_an_id_first_and_the_first_rebalance_makes_it_leader() {
    let mut h = Harness::new();
    let first = h.join_now(join_request("", &["range"]));
    assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
    assert!(first.member_id.starts_with("c-"));
    // Kafka creates the group on that first request; it stays Empty until the member rejoins.
    assert_eq!(h.group.state(), GroupState::Empty);

    let mut joined = h.join(join_request(&first.member_id, &["range"]));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    // Even with no delay, the initial rebalance completes from its timer, not inside the join.
    assert!(answered(&mut joined).is_none());
    h.advance(0);
    let joined = answered(&mut joined).unwrap();
    assert_eq!(joined.error, None);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, first.member_id);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(joined.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(joined.members.len(), 1);
    assert_eq!(joined.members[0].metadata, bytes("range-meta"));
    assert_eq!(h.group.state(), GroupState::CompletingRebalance);
}

#[test]
fn before_v4_a_new_member_joins_without_the_extra_round() {
    let mut h = Harness::new();
    let mut request = join_request("", &["range"]);
    request.require_known_member_id = false;
    let mut rx = h.join(request);
    h.advance(0);
    let joined = answered(&mut rx).unwrap();
    assert_eq!(joined.error, None);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, joined.member_id);
}

#[test]
fn only_the_leader_gets_the_members_and_followers_wait_for_its_assignment() {
    let mut h = Harness::new();
    let (a, mut a_join) = h.new_member(&["range"]);
    let (b, mut b_join) = h.new_member(&["range"]);
    h.advance(0);
    let a_joined = answered(&mut a_join).unwrap();
    let b_joined = answered(&mut b_join).unwrap();
    let member_ids: Vec<&str> = a_joined
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert_eq!(member_ids, [a.as_str(), b.as_str()]);
    assert!(b_joined.members.is_empty());
    assert_eq!(b_joined.leader, a);

    let mut b_sync = h.sync(sync_request(&b, 1, vec![]));
    assert!(answered(&mut b_sync).is_none(), "follower parked");
    // Heartbeats while completing the rebalance are normal.
    assert_eq!(h.heartbeat(&b, 1), Ok(()));
    // The leader leaves its own assignment out: it gets empty bytes, B gets its bytes verbatim.
    let mut a_sync = h.sync(sync_request(&a, 1, vec![(b.clone(), bytes("\0\x01b"))]));
    assert_eq!(answered(&mut a_sync).unwrap().assignment, Bytes::new());
    let b_synced = answered(&mut b_sync).unwrap();
    assert_eq!(b_synced.assignment, bytes("\0\x01b"));
    assert_eq!(b_synced.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.group.state(), GroupState::Stable);
    // In Stable, a sync just returns the stored assignment.
    let mut again = h.sync(sync_request(&b, 1, vec![]));
    assert_eq!(answered(&mut again).unwrap().assignment, bytes("\0\x01b"));
}

#[test]
fn the_protocol_is_chosen_by_vote_among_those_everyone_supports() {
    let mut h = Harness::new();
    let (_, mut a) = h.new_member(&["range", "roundrobin"]);
    let (_, _b) = h.new_member(&["range", "roundrobin"]);
    let (_, _c) = h.new_member(&["roundrobin", "range"]);
    h.advance(0);
    assert_eq!(
        answered(&mut a).unwrap().protocol_name.as_deref(),
        Some("range")
    );

    // "range" is not supported by everyone here, so it cannot win despite the preferences.
    let mut h = Harness::new();
    let (_, mut a) = h.new_member(&["range", "roundrobin"]);
    let (_, _b) = h.new_member(&["range", "roundrobin"]);
    let (_, _c) = h.new_member(&["roundrobin"]);
    h.advance(0);
    assert_eq!(
        answered(&mut a).unwrap().protocol_name.as_deref(),
        Some("roundrobin")
    );
}

#[test]
fn incompatible_protocols_are_refused() {
    let mut h = Harness::new();
    assert_eq!(
        h.join_now(join_request("", &[])).error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    let (_, _a) = h.new_member(&["range"]);
    h.advance(0);
    assert_eq!(
        h.join_now(join_request("", &["cooperative-sticky"])).error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    let mut connect = join_request("", &["range"]);
    connect.protocol_type = "connect".into();
    assert_eq!(
        h.join_now(connect).error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
}

#[test]
fn a_new_member_makes_a_stable_group_rebalance_and_heartbeats_say_so() {
    let mut h = Harness::new();
    let (a, b) = h.stable_pair();
    let (c, mut c_join) = h.new_member(&["range"]);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.heartbeat(&a, 1), Err(ResponseError::RebalanceInProgress));
    let mut sync = h.sync(sync_request(&b, 1, vec![]));
    assert_eq!(
        answered(&mut sync).unwrap().error,
        Some(ResponseError::RebalanceInProgress)
    );
    let mut a_join = h.join(join_request(&a, &["range"]));
    assert!(answered(&mut c_join).is_none(), "B has not rejoined yet");
    let mut b_join = h.join(join_request(&b, &["range"]));
    for rx in [&mut a_join, &mut b_join, &mut c_join] {
        let joined = answered(rx).unwrap();
        assert_eq!(
            (joined.generation_id, joined.leader.as_str()),
            (2, a.as_str())
        );
    }
    assert_eq!(h.group.member_ids().collect::<Vec<_>>(), [&a, &b, &c]);
}

#[test]
fn a_follower_rejoining_unchanged_gets_the_current_generation_but_the_leader_rebalances() {
    let mut h = Harness::new();
    let (a, b) = h.stable_pair();
    let again = h.join_now(join_request(&b, &["range"]));
    assert_eq!((again.error, again.generation_id), (None, 1));
    assert_eq!(h.group.state(), GroupState::Stable);
    let mut changed = h.join(join_request(&b, &["range", "roundrobin"]));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    let _a = h.join(join_request(&a, &["range"]));
    assert_eq!(answered(&mut changed).unwrap().generation_id, 2);

    let mut h = Harness::new();
    let (a, _b) = h.stable_pair();
    let _leader = h.join(join_request(&a, &["range"]));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn sync_and_heartbeat_check_member_generation_and_protocol() {
    let mut h = Harness::new();
    let (a, b) = h.stable_pair();
    let sync_error = |h: &mut Harness, request: SyncRequest| {
        let mut rx = h.sync(request);
        answered(&mut rx).unwrap().error
    };
    assert_eq!(
        sync_error(&mut h, sync_request("ghost", 1, vec![])),
        Some(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        sync_error(&mut h, sync_request(&b, 0, vec![])),
        Some(ResponseError::IllegalGeneration)
    );
    let mut v5 = sync_request(&b, 1, vec![]);
    v5.protocol_name = Some("roundrobin".into());
    assert_eq!(
        sync_error(&mut h, v5),
        Some(ResponseError::InconsistentGroupProtocol)
    );
    let mut v5 = sync_request(&b, 1, vec![]);
    v5.protocol_type = Some("consumer".into());
    v5.protocol_name = Some("range".into());
    assert_eq!(sync_error(&mut h, v5), None);

    assert_eq!(h.heartbeat(&a, 1), Ok(()));
    assert_eq!(h.heartbeat(&a, 2), Err(ResponseError::IllegalGeneration));
    assert_eq!(h.heartbeat("ghost", 1), Err(ResponseError::UnknownMemberId));
}

#[test]
fn leaving_rebalances_and_the_last_member_leaving_empties_the_group() {
    let mut h = Harness::new();
    let (a, b) = h.stable_pair();
    let left = h.group.leave(
        &[LeavingMember {
            member_id: b.clone(),
            group_instance_id: None,
        }],
        h.now,
    );
    assert_eq!(left, Ok(vec![None]));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    let mut a_join = h.join(join_request(&a, &["range"]));
    assert_eq!(answered(&mut a_join).unwrap().generation_id, 2);

    let leave_a = [LeavingMember {
        member_id: a.clone(),
        group_instance_id: None,
    }];
    assert_eq!(h.group.leave(&leave_a, h.now), Ok(vec![None]));
    assert_eq!(h.group.state(), GroupState::Empty);
    assert_eq!(h.group.generation(), 3);
    assert_eq!(
        h.group.leave(&leave_a, h.now),
        Ok(vec![Some(ResponseError::UnknownMemberId)])
    );
    assert_eq!(h.heartbeat(&a, 3), Err(ResponseError::UnknownMemberId));
    let mut sync = h.sync(sync_request(&a, 3, vec![]));
    assert_eq!(
        answered(&mut sync).unwrap().error,
        Some(ResponseError::UnknownMemberId)
    );
}

#[test]
fn a_batch_leave_answers_each_member() {
    let mut h = Harness::new();
    let (a, _b) = h.stable_pair();
    let left = h.group.leave(
        &[
            LeavingMember {
                member_id: a.clone(),
                group_instance_id: None,
            },
            LeavingMember {
                member_id: "ghost".into(),
                group_instance_id: None,
            },
            LeavingMember {
                member_id: String::new(),
                group_instance_id: Some("nobody".into()),
            },
        ],
        h.now,
    );
    assert_eq!(
        left,
        Ok(vec![
            None,
            Some(ResponseError::UnknownMemberId),
            Some(ResponseError::UnknownMemberId)
        ])
    );
    assert_eq!(h.group.member_ids().count(), 1);
}

#[test]
fn commits_follow_the_generation_and_the_state() {
    let mut h = Harness::new();
    // Generation -1 into an Empty group: manual assignment and admin tools.
    assert_eq!(h.group.validate_offset_commit("", None, -1, h.now), Ok(()));
    let (a, mut a_join) = h.new_member(&["range"]);
    h.advance(0);
    answered(&mut a_join).unwrap();
    assert_eq!(
        h.group.validate_offset_commit(&a, None, 1, h.now),
        Err(ResponseError::RebalanceInProgress),
        "CompletingRebalance"
    );
    let _sync = h.sync(sync_request(&a, 1, vec![]));
    assert_eq!(h.group.validate_offset_commit(&a, None, 1, h.now), Ok(()));
    assert_eq!(
        h.group.validate_offset_commit(&a, None, 0, h.now),
        Err(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        h.group.validate_offset_commit("", None, -1, h.now),
        Err(ResponseError::UnknownMemberId),
        "no generation, but the group has members"
    );
    assert_eq!(
        h.group.validate_offset_commit("ghost", None, 1, h.now),
        Err(ResponseError::UnknownMemberId)
    );
    // A new member starts a rebalance: the current generation may still commit (eager
    // consumers commit while revoking).
    let (_b, _b_join) = h.new_member(&["range"]);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.group.validate_offset_commit(&a, None, 1, h.now), Ok(()));
}

#[test]
fn only_an_empty_group_is_deleted_and_a_dead_one_refuses_everything() {
    let mut h = Harness::new();
    let (a, b) = h.stable_pair();
    assert_eq!(h.group.delete(), Err(ResponseError::NonEmptyGroup));
    let leaving = [a, b].map(|member_id| LeavingMember {
        member_id,
        group_instance_id: None,
    });
    h.group.leave(&leaving, h.now).unwrap();
    assert_eq!(h.group.state(), GroupState::Empty);
    assert_eq!(h.group.delete(), Ok(()));
    assert_eq!(h.group.state(), GroupState::Dead);
    assert_eq!(h.group.delete(), Err(ResponseError::GroupIdNotFound));
    assert_eq!(
        h.join_now(join_request("", &["range"])).error,
        Some(ResponseError::CoordinatorNotAvailable)
    );
    assert_eq!(
        h.heartbeat("x", 0),
        Err(ResponseError::CoordinatorNotAvailable)
    );
    assert_eq!(
        h.group.validate_offset_commit("", None, -1, h.now),
        Err(ResponseError::CoordinatorNotAvailable)
    );
    assert_eq!(h.group.next_deadline(), None, "nothing left to time");
}

#[test]
fn describe_shows_metadata_and_assignments_only_when_stable() {
    let mut h = Harness::new();
    let (_a, mut a_join) = h.new_member(&["range"]);
    h.advance(0);
    let a = answered(&mut a_join).unwrap().member_id;
    let summary = h.group.describe();
    assert_eq!(summary.state, "CompletingRebalance");
    assert_eq!(summary.protocol_data, "");
    assert_eq!(summary.members[0].client_host, "/127.0.0.1");
    assert!(summary.members[0].metadata.is_empty());
    let _sync = h.sync(sync_request(&a, 1, vec![(a.clone(), bytes("mine"))]));
    let summary = h.group.describe();
    assert_eq!(
        (
            summary.state,
            summary.protocol_type.as_str(),
            summary.protocol_data.as_str()
        ),
        ("Stable", "consumer", "range")
    );
    assert_eq!(summary.members[0].metadata, bytes("range-meta"));
    assert_eq!(summary.members[0].assignment, bytes("mine"));
}
