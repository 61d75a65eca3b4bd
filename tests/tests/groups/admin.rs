//! FindCoordinator, DescribeGroups, ListGroups and DeleteGroups.

use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use tests::*;

use super::support::*;

#[tokio::test(start_paused = true)]
async fn describe_and_list_report_each_state_exactly() {
    let broker = broker().await;
    let mut admin = RawClient::connect(broker.addr()).await;
    create_topic(&mut admin, TOPIC, 6).await;
    let unknown = describe(&mut admin, "nobody").await;
    assert_eq!(
        (
            unknown.error_code,
            unknown.group_state.as_str(),
            unknown.members.len()
        ),
        (0, "Dead", 0)
    );
    let list = |states: &[&str]| {
        ListGroupsRequest::default().with_states_filter(states.iter().map(|st| s(st)).collect())
    };
    let listed = |response: ListGroupsResponse| -> Vec<(String, String, String)> {
        response
            .groups
            .iter()
            .map(|g| {
                (
                    g.group_id.to_string(),
                    g.protocol_type.to_string(),
                    g.group_state.to_string(),
                )
            })
            .collect()
    };

    // Committing alone makes an Empty group without a protocol type.
    admin
        .call(
            &commit_request("offsets-only", "", -1, &[(TOPIC, 0, 1, None)]),
            8,
        )
        .await;
    let empty = describe(&mut admin, "offsets-only").await;
    assert_eq!(
        (empty.group_state.as_str(), empty.protocol_type.as_str()),
        ("Empty", "")
    );

    // One member joined and not synced: CompletingRebalance.
    let mut a = RawClient::connect(broker.addr()).await;
    let a_id = start_join(&mut a).await;
    joined(&mut a).await;
    let completing = describe(&mut admin, GROUP).await;
    assert_eq!(completing.group_state.as_str(), "CompletingRebalance");
    assert_eq!(completing.protocol_data.as_str(), "");
    assert!(completing.members[0].member_metadata.is_empty());
    assert_eq!(
        listed(admin.call(&list(&[]), 4).await),
        vec![
            ("offsets-only".into(), "".into(), "Empty".into()),
            (
                GROUP.into(),
                "consumer".into(),
                "CompletingRebalance".into()
            ),
        ]
    );
    // The state filter is case-insensitive, as Kafka's.
    assert_eq!(
        listed(admin.call(&list(&["completingrebalance"]), 4).await),
        vec![(
            GROUP.into(),
            "consumer".into(),
            "CompletingRebalance".into()
        )]
    );
    // Before v4, no filter and no state.
    assert_eq!(
        listed(admin.call(&list(&[]), 3).await),
        vec![
            ("offsets-only".into(), "".into(), "".into()),
            (GROUP.into(), "consumer".into(), "".into())
        ]
    );

    a.call(
        &sync_request(&a_id, 1, &[(&a_id, assignment(&[0]))]),
        SYNC_V,
    )
    .await;
    let stable = admin
        .call(
            &DescribeGroupsRequest::default()
                .with_groups(vec![group(GROUP)])
                .with_include_authorized_operations(true),
            5,
        )
        .await
        .groups
        .remove(0);
    assert_eq!(stable.group_state.as_str(), "Stable");
    // READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS and ALTER_CONFIGS, as an unsecured Kafka answers.
    assert_eq!(stable.authorized_operations, 3400);
    assert_eq!(
        listed(admin.call(&list(&["Stable", "Empty"]), 4).await).len(),
        2
    );

    let mut b = RawClient::connect(broker.addr()).await;
    start_join(&mut b).await;
    let preparing = describe(&mut admin, GROUP).await;
    assert_eq!(preparing.group_state.as_str(), "PreparingRebalance");
    // B is already a member, parked in its join; metadata and assignments are not shown.
    assert_eq!(preparing.members.len(), 2);
    assert!(preparing
        .members
        .iter()
        .all(|m| m.member_metadata.is_empty() && m.member_assignment.is_empty()));
    assert_eq!(
        listed(admin.call(&list(&["PreparingRebalance"]), 4).await),
        vec![(GROUP.into(), "consumer".into(), "PreparingRebalance".into())]
    );
}

#[tokio::test(start_paused = true)]
async fn delete_groups_takes_only_empty_groups_and_their_offsets() {
    let broker = broker().await;
    let (a, _b) = two_members(&broker).await;
    let mut admin = RawClient::connect(broker.addr()).await;
    admin
        .call(&commit_request("done", "", -1, &[(TOPIC, 0, 5, None)]), 8)
        .await;
    let request = DeleteGroupsRequest::default().with_groups_names(vec![
        group(GROUP),
        group("done"),
        group("nobody"),
    ]);
    let results: Vec<(String, i16)> = admin
        .call(&request, 2)
        .await
        .results
        .iter()
        .map(|r| (r.group_id.to_string(), r.error_code))
        .collect();
    assert_eq!(
        results,
        vec![
            (GROUP.into(), code(ResponseError::NonEmptyGroup)),
            ("done".into(), 0),
            ("nobody".into(), code(ResponseError::GroupIdNotFound)),
        ]
    );
    assert_eq!(
        describe(&mut admin, "done").await.group_state.as_str(),
        "Dead"
    );
    assert_eq!(
        fetch_offsets(&mut admin, "done", Some(&[0]), 7).await,
        vec![(TOPIC.into(), 0, -1, String::new())]
    );
    drop(a);
}

#[tokio::test]
async fn find_coordinator_names_this_broker_in_each_versions_layout() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let port = broker.addr().port() as i32;
    for version in 0..=3 {
        let response = client
            .call(
                &FindCoordinatorRequest::default().with_key(s(GROUP)),
                version,
            )
            .await;
        assert_eq!(response.error_code, 0);
        assert_eq!(
            (response.node_id, response.host.as_str(), response.port),
            (BrokerId(1), "127.0.0.1", port)
        );
        // Kafka's message for "no error", from v1 where the field exists.
        if version >= 1 {
            let message = response.error_message.as_ref().map(|m| m.as_str());
            assert_eq!(message, Some("NONE"));
        }
    }
    let response = client
        .call(
            &FindCoordinatorRequest::default().with_coordinator_keys(vec![s("a"), s("b")]),
            4,
        )
        .await;
    let found: Vec<(&str, i32, &str, i32, i16)> = response
        .coordinators
        .iter()
        .map(|c| {
            (
                c.key.as_str(),
                c.node_id.0,
                c.host.as_str(),
                c.port,
                c.error_code,
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            ("a", 1, "127.0.0.1", port, 0),
            ("b", 1, "127.0.0.1", port, 0)
        ]
    );
    // Share-group coordinators (type 2) need v6: refused.
    let response = client
        .call(
            &FindCoordinatorRequest::default()
                .with_key(s("x"))
                .with_key_type(2),
            3,
        )
        .await;
    assert_eq!(
        (response.error_code, response.node_id),
        (code(ResponseError::InvalidRequest), BrokerId(-1))
    );
}
