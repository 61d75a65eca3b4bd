//! Static membership (KIP-345): restarts within the session keep the assignment.

use kafka_protocol::ResponseError;

use super::*;
use crate::group::messages::LeavingMember;

fn static_join(member_id: &str, instance: &str, names: &[&str]) -> JoinRequest {
    let mut request = join_request(member_id, names);
    request.group_instance_id = Some(instance.to_string());
    request
}

/// Static members A ("i-a", leader) and B ("i-b"), Stable in generation 1.
fn static_pair(h: &mut Harness) -> (String, String) {
    static_pair_with(h, &["range"])
}

fn static_pair_with(h: &mut Harness, names: &[&str]) -> (String, String) {
    let mut a = h.join(static_join("", "i-a", names));
    let mut b = h.join(static_join("", "i-b", names));
    h.advance(0);
    let a = answered(&mut a).unwrap();
    let b = answered(&mut b).unwrap();
    // No MEMBER_ID_REQUIRED round for static members; ids start with the instance id.
    assert!(a.member_id.starts_with("i-a-") && b.member_id.starts_with("i-b-"));
    let (a, b) = (a.member_id, b.member_id);
    let _b_sync = h.sync(sync_request(&b, 1, vec![]));
    let _a_sync = h.sync(sync_request(
        &a,
        1,
        vec![(a.clone(), bytes("A")), (b.clone(), bytes("B"))],
    ));
    assert_eq!(h.group.state(), GroupState::Stable);
    (a, b)
}

#[test]
fn a_restarted_static_member_keeps_its_assignment_without_a_rebalance() {
    let mut h = Harness::new();
    let (a, b) = static_pair(&mut h);
    h.advance(3_000);
    let rejoined = h.join_now(static_join("", "i-b", &["range"]));
    assert_eq!(rejoined.error, None);
    assert_eq!(rejoined.generation_id, 1);
    assert_ne!(rejoined.member_id, b);
    assert_eq!(rejoined.leader, a);
    assert_eq!(h.group.state(), GroupState::Stable);
    let mut sync = h.sync(sync_request(&rejoined.member_id, 1, vec![]));
    assert_eq!(answered(&mut sync).unwrap().assignment, bytes("B"));

    // The old incarnation is fenced wherever it shows up.
    let fenced = h.group.heartbeat(&b, Some("i-b"), 1, h.now);
    assert_eq!(fenced, Err(ResponseError::FencedInstanceId));
    assert_eq!(
        h.join_now(static_join(&b, "i-b", &["range"])).error,
        Some(ResponseError::FencedInstanceId)
    );
    assert_eq!(
        h.group.validate_offset_commit(&b, Some("i-b"), 1, h.now),
        Err(ResponseError::FencedInstanceId)
    );
}

#[test]
fn a_restarted_static_leader_is_told_the_old_leader_id_before_v9_and_to_skip_from_v9() {
    let mut h = Harness::new();
    let (a, _b) = static_pair(&mut h);
    let rejoined = h.join_now(static_join("", "i-a", &["range"]));
    assert_eq!(
        rejoined.leader, a,
        "the old id: the client acts as a follower"
    );
    assert!(rejoined.members.is_empty() && !rejoined.skip_assignment);

    let mut v9 = static_join("", "i-a", &["range"]);
    v9.supports_skip_assignment = true;
    let rejoined = h.join_now(v9);
    assert_eq!(rejoined.leader, rejoined.member_id);
    assert!(rejoined.skip_assignment);
    assert_eq!(rejoined.members.len(), 2);
    assert_eq!(h.group.state(), GroupState::Stable);
}

#[test]
fn a_static_member_rebalances_only_when_the_chosen_protocol_changes() {
    let mut h = Harness::new();
    let (_a, _b) = static_pair_with(&mut h, &["range", "roundrobin"]);
    assert_eq!(h.group.protocol_name(), Some("range"));
    // B now prefers roundrobin: one vote each, and the earliest member's preference breaks the
    // tie, so range stays and nothing rebalances.
    let rejoined = h.join_now(static_join("", "i-b", &["roundrobin", "range"]));
    assert_eq!(rejoined.generation_id, 1);
    assert_eq!(h.group.state(), GroupState::Stable);
    // Without range, only roundrobin is left to choose: the group must rebalance onto it.
    let mut rx = h.join(static_join("", "i-b", &["roundrobin"]));
    assert!(answered(&mut rx).is_none());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn static_members_outlive_the_rebalance_timeout_but_not_their_session() {
    let mut h = Harness::new();
    let (a, b) = static_pair(&mut h);
    // A rejoins as leader and starts a rebalance; B neither rejoins nor heartbeats.
    let mut a_join = h.join(static_join(&a, "i-a", &["range"]));
    h.advance(SESSION_MS as u64 - 1);
    assert!(h.group.member(&b).is_some());
    h.advance(1);
    // B's session ran out: it goes, and the rebalance completes without it.
    assert!(h.group.member(&b).is_none());
    let joined = answered(&mut a_join).unwrap();
    assert_eq!((joined.generation_id, joined.members.len()), (2, 1));
}

#[test]
fn a_static_member_leaves_by_instance_id() {
    let mut h = Harness::new();
    let (_a, b) = static_pair(&mut h);
    let left = h.group.leave(
        &[LeavingMember {
            member_id: String::new(),
            group_instance_id: Some("i-b".into()),
        }],
        h.now,
    );
    assert_eq!(left, Ok(vec![None]));
    assert!(h.group.member(&b).is_none());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}
