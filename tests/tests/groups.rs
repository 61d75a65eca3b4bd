//! The group coordinator over TCP, with the paused clock where time matters. Generations,
//! offsets, states and error codes are asserted exactly.
//!
//! Here: membership and rebalances, session expiry, static members. In `offsets`: committed
//! offsets, lag and the metrics endpoint. In `admin`: FindCoordinator, DescribeGroups,
//! ListGroups, DeleteGroups.

// A test crate's modules live beside its root file; these live in a folder of their own.
#[path = "groups/admin.rs"]
mod admin;
#[path = "groups/offsets.rs"]
mod offsets;
#[path = "groups/support.rs"]
mod support;

use std::time::Duration;

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use support::*;
use tests::*;
use tokio::time::{sleep_until, Instant};

#[tokio::test(start_paused = true)]
async fn two_members_split_six_partitions_exactly_as_the_leader_assigned() {
    let broker = broker().await;
    let (a, b) = two_members(&broker).await;
    let mut admin = RawClient::connect(broker.addr()).await;
    let described = describe(&mut admin, GROUP).await;
    assert_eq!(described.error_code, 0);
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.protocol_type.as_str(), "consumer");
    assert_eq!(described.protocol_data.as_str(), "range");
    assert_eq!(described.authorized_operations, i32::MIN);
    let members: Vec<(&str, &str, &str, Vec<i32>)> = described
        .members
        .iter()
        .map(|m| {
            assert_eq!(m.member_metadata, subscription(&[TOPIC]));
            (
                m.member_id.as_str(),
                m.client_id.as_str(),
                m.client_host.as_str(),
                assigned_partitions(&m.member_assignment),
            )
        })
        .collect();
    assert_eq!(
        members,
        vec![
            (a.id.as_str(), "raw-test", "/127.0.0.1", vec![0, 1, 2]),
            (b.id.as_str(), "raw-test", "/127.0.0.1", vec![3, 4, 5]),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn when_one_member_leaves_the_other_gets_all_six_partitions() {
    let broker = broker().await;
    let (mut a, mut b) = two_members(&broker).await;
    let leave = LeaveGroupRequest::default()
        .with_group_id(group(GROUP))
        .with_members(vec![MemberIdentity::default().with_member_id(s(&b.id))]);
    let left = b.client.call(&leave, 3).await;
    assert_eq!(left.error_code, 0);
    assert_eq!(left.members.len(), 1);
    assert_eq!(
        (
            left.members[0].member_id.as_str(),
            left.members[0].error_code
        ),
        (b.id.as_str(), 0)
    );

    assert_eq!(
        heartbeat(&mut a.client, &a.id, 2).await,
        code(ResponseError::RebalanceInProgress)
    );
    let rejoined = a
        .client
        .call(&join_request(GROUP, &a.id, None), JOIN_V)
        .await;
    assert_eq!(rejoined.generation_id, 3);
    assert_eq!(rejoined.members.len(), 1);
    let all = assignment(&[0, 1, 2, 3, 4, 5]);
    let synced = a
        .client
        .call(&sync_request(&a.id, 3, &[(&a.id, all.clone())]), SYNC_V)
        .await;
    assert_eq!(synced.assignment, all);
    assert_eq!(
        assigned_partitions(&synced.assignment),
        vec![0, 1, 2, 3, 4, 5]
    );

    // The last member leaving (v1, one member id) empties the group: generation 4, no members.
    let leave = LeaveGroupRequest::default()
        .with_group_id(group(GROUP))
        .with_member_id(s(&a.id));
    assert_eq!(a.client.call(&leave, 1).await.error_code, 0);
    let described = describe(&mut a.client, GROUP).await;
    assert_eq!(described.group_state.as_str(), "Empty");
    assert!(described.members.is_empty());
    assert_eq!(
        a.client.call(&leave, 1).await.error_code,
        code(ResponseError::UnknownMemberId)
    );
    let unknown = LeaveGroupRequest::default()
        .with_group_id(group("nobody"))
        .with_member_id(s("x"));
    assert_eq!(
        a.client.call(&unknown, 0).await.error_code,
        code(ResponseError::UnknownMemberId)
    );
}

#[tokio::test(start_paused = true)]
async fn a_member_that_stops_heartbeating_is_expired_after_its_session_timeout() {
    let broker = broker().await;
    let (mut a, b) = two_members(&broker).await;
    // Both sessions restarted when the leader's assignment went out.
    let synced_at = Instant::now();
    for seconds in [3, 6, 9] {
        sleep_until(synced_at + Duration::from_secs(seconds)).await;
        assert_eq!(heartbeat(&mut a.client, &a.id, 2).await, 0);
    }
    sleep_until(synced_at + Duration::from_millis(SESSION_MS as u64 - 1)).await;
    let described = describe(&mut a.client, GROUP).await;
    assert_eq!(
        (described.group_state.as_str(), described.members.len()),
        ("Stable", 2)
    );
    sleep_until(synced_at + Duration::from_millis(SESSION_MS as u64)).await;
    let described = describe(&mut a.client, GROUP).await;
    assert_eq!(described.group_state.as_str(), "PreparingRebalance");
    let members: Vec<&str> = described
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert_eq!(members, vec![a.id.as_str()]);
    // Not Stable: no metadata or assignment in the description.
    assert!(described.members[0].member_assignment.is_empty());

    assert_eq!(
        heartbeat(&mut a.client, &a.id, 2).await,
        code(ResponseError::RebalanceInProgress)
    );
    let rejoined = a
        .client
        .call(&join_request(GROUP, &a.id, None), JOIN_V)
        .await;
    assert_eq!((rejoined.generation_id, rejoined.members.len()), (3, 1));
    // The expired member is told so when it shows up again.
    let mut b = b;
    assert_eq!(
        heartbeat(&mut b.client, &b.id, 2).await,
        code(ResponseError::UnknownMemberId)
    );
}

#[tokio::test(start_paused = true)]
async fn the_rebalance_timeout_drops_a_member_that_does_not_rejoin() {
    let broker = broker().await;
    let (mut a, mut b) = two_members(&broker).await;
    // The leader rejoins, which starts a rebalance; B heartbeats on but never rejoins.
    let started = Instant::now();
    a.client
        .send(&join_request(GROUP, &a.id, None), JOIN_V)
        .await;
    for seconds in (3..REBALANCE_MS / 1000).step_by(3) {
        sleep_until(started + Duration::from_secs(seconds as u64)).await;
        assert_eq!(
            heartbeat(&mut b.client, &b.id, 2).await,
            code(ResponseError::RebalanceInProgress)
        );
    }
    let rejoined = joined(&mut a.client).await;
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(REBALANCE_MS as u64)
    );
    assert_eq!((rejoined.generation_id, rejoined.members.len()), (3, 1));
    assert_eq!(
        heartbeat(&mut b.client, &b.id, 2).await,
        code(ResponseError::UnknownMemberId)
    );
}

#[tokio::test(start_paused = true)]
async fn a_stale_generation_gets_illegal_generation() {
    let broker = broker().await;
    let (mut a, _b) = two_members(&broker).await;
    let illegal = code(ResponseError::IllegalGeneration);
    assert_eq!(heartbeat(&mut a.client, &a.id, 1).await, illegal);
    let stale_sync = a.client.call(&sync_request(&a.id, 1, &[]), SYNC_V).await;
    assert_eq!(stale_sync.error_code, illegal);
    let commit = commit_request(GROUP, &a.id, 1, &[(TOPIC, 0, 10, None)]);
    let committed = a.client.call(&commit, 8).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, illegal);
    // The current generation commits; an unknown member does not.
    let commit = commit_request(GROUP, &a.id, 2, &[(TOPIC, 0, 10, None)]);
    assert_eq!(
        a.client.call(&commit, 8).await.topics[0].partitions[0].error_code,
        0
    );
    let commit = commit_request(GROUP, "ghost", 2, &[(TOPIC, 0, 10, None)]);
    assert_eq!(
        a.client.call(&commit, 8).await.topics[0].partitions[0].error_code,
        code(ResponseError::UnknownMemberId)
    );
}

#[tokio::test(start_paused = true)]
async fn member_id_required_from_v4_only_and_never_for_static_members() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    // kafka-python 2.0.2 sends v2: straight in, with an id made of the client id and a UUID.
    let joined = client.call(&join_request("old", "", None), 2).await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    assert!(joined.member_id.starts_with("raw-test-"));
    assert_eq!(joined.leader, joined.member_id);
    for version in 0..=3 {
        let group_id = format!("old-v{version}");
        let joined = client
            .call(&join_request(&group_id, "", None), version)
            .await;
        assert_eq!(
            (joined.error_code, joined.generation_id),
            (0, 1),
            "v{version}"
        );
    }
    for version in 4..=9 {
        let group_id = format!("new-v{version}");
        let first = client
            .call(&join_request(&group_id, "", None), version)
            .await;
        assert_eq!(
            first.error_code,
            code(ResponseError::MemberIdRequired),
            "v{version}"
        );
        assert_eq!(first.generation_id, -1);
        let second = client
            .call(&join_request(&group_id, &first.member_id, None), version)
            .await;
        assert_eq!(
            (second.error_code, second.generation_id),
            (0, 1),
            "v{version}"
        );
        assert_eq!(second.member_id, first.member_id);
        // From v7 the protocol type comes back too.
        let protocol_type = second.protocol_type.as_ref().map(|t| t.as_str());
        assert_eq!(protocol_type, (version >= 7).then_some("consumer"));
    }
    let static_join = join_request("static", "", Some("instance-1"));
    let joined = client.call(&static_join, 5).await;
    assert_eq!(joined.error_code, 0);
    assert!(joined.member_id.starts_with("instance-1-"));
    // Out-of-range session timeouts and empty group ids are refused.
    let short = join_request("g", "", None).with_session_timeout_ms(5_999);
    assert_eq!(
        client.call(&short, 5).await.error_code,
        code(ResponseError::InvalidSessionTimeout)
    );
    assert_eq!(
        client.call(&join_request("", "", None), 5).await.error_code,
        code(ResponseError::InvalidGroupId)
    );
    // A member id the group does not know.
    assert_eq!(
        client
            .call(&join_request("fresh", "ghost", None), 5)
            .await
            .error_code,
        code(ResponseError::UnknownMemberId)
    );
}

#[tokio::test(start_paused = true)]
async fn a_static_member_restarting_within_its_session_causes_no_rebalance() {
    let broker = broker().await;
    let mut setup = RawClient::connect(broker.addr()).await;
    create_topic(&mut setup, TOPIC, 6).await;
    let mut a = RawClient::connect(broker.addr()).await;
    let a_id = a
        .call(&join_request(GROUP, "", Some("a")), JOIN_V)
        .await
        .member_id
        .to_string();
    let everything = sync_request(&a_id, 1, &[(&a_id, assignment(&[0, 1, 2, 3, 4, 5]))]);
    assert_eq!(a.call(&everything, SYNC_V).await.error_code, 0);
    let mut b = RawClient::connect(broker.addr()).await;
    b.send(&join_request(GROUP, "", Some("b")), JOIN_V).await;
    assert_eq!(
        heartbeat(&mut a, &a_id, 1).await,
        code(ResponseError::RebalanceInProgress)
    );
    a.call(&join_request(GROUP, &a_id, Some("a")), JOIN_V).await;
    let b_id = joined(&mut b).await.member_id.to_string();
    b.send(&sync_request(&b_id, 2, &[]), SYNC_V).await;
    let split = [
        (a_id.as_str(), assignment(&[0, 1, 2])),
        (b_id.as_str(), assignment(&[3, 4, 5])),
    ];
    a.call(&sync_request(&a_id, 2, &split), SYNC_V).await;
    assert_eq!(
        assigned_partitions(&synced(&mut b).await.assignment),
        vec![3, 4, 5]
    );

    // B's process restarts 5 s later: a new connection, no member id, the same instance id.
    tokio::time::sleep(Duration::from_secs(5)).await;
    drop(b);
    let mut restarted = RawClient::connect(broker.addr()).await;
    let rejoined = restarted
        .call(&join_request(GROUP, "", Some("b")), JOIN_V)
        .await;
    assert_eq!(rejoined.error_code, 0);
    assert_eq!(rejoined.generation_id, 2, "same generation: no rebalance");
    assert_eq!(rejoined.leader.as_str(), a_id);
    let new_id = rejoined.member_id.to_string();
    assert_ne!(new_id, b_id);
    let synced = restarted.call(&sync_request(&new_id, 2, &[]), SYNC_V).await;
    assert_eq!(
        synced.assignment,
        assignment(&[3, 4, 5]),
        "the old assignment"
    );
    assert_eq!(
        heartbeat(&mut a, &a_id, 2).await,
        0,
        "A never saw a rebalance"
    );
    assert_eq!(describe(&mut a, GROUP).await.group_state.as_str(), "Stable");

    // The old incarnation, if it shows up, is fenced.
    let stale = HeartbeatRequest::default()
        .with_group_id(group(GROUP))
        .with_generation_id(2)
        .with_member_id(s(&b_id))
        .with_group_instance_id(Some(s("b")));
    assert_eq!(
        restarted.call(&stale, HEARTBEAT_V).await.error_code,
        code(ResponseError::FencedInstanceId)
    );
    let stale_join = join_request(GROUP, &b_id, Some("b"));
    assert_eq!(
        restarted.call(&stale_join, JOIN_V).await.error_code,
        code(ResponseError::FencedInstanceId)
    );
}
