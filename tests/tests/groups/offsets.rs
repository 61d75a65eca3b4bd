//! Committed offsets (OffsetCommit v2-9, OffsetFetch v1-9), lag, and the metrics endpoint.

use std::time::Duration;

use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use tests::*;

use super::support::*;

#[tokio::test]
async fn committed_offsets_come_back_exactly_and_minus_one_before_any_commit() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, TOPIC, 3).await;
    create_topic(&mut client, "other", 1).await;
    for version in 1..=9 {
        assert_eq!(
            fetch_offsets(&mut client, "manual", Some(&[0, 1]), version).await,
            vec![
                (TOPIC.into(), 0, -1, String::new()),
                (TOPIC.into(), 1, -1, String::new())
            ],
            "v{version}"
        );
    }
    // Generation -1: a consumer without group management creates an Empty group by committing.
    for (version, offset) in (2..=9).zip(10..) {
        let request = commit_request(
            "manual",
            "",
            -1,
            &[
                (TOPIC, 0, offset, Some("meta")),
                (TOPIC, 2, 2 * offset, None),
                ("other", 0, 7, None),
            ],
        );
        let response = client.call(&request, version).await;
        let codes: Vec<i16> = response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect();
        assert_eq!(codes, vec![0, 0, 0], "v{version}");
    }
    // The last commit (v9) wins: offsets 17 and 34.
    let expected = vec![
        (TOPIC.to_string(), 0, 17, "meta".to_string()),
        (TOPIC.to_string(), 1, -1, String::new()),
        (TOPIC.to_string(), 2, 34, String::new()),
    ];
    for version in 1..=9 {
        assert_eq!(
            fetch_offsets(&mut client, "manual", Some(&[0, 1, 2]), version).await,
            expected,
            "v{version}"
        );
    }
    // Null topics: every committed partition, in every version.
    let all = vec![
        ("orders".to_string(), 0, 17, "meta".to_string()),
        ("orders".to_string(), 2, 34, String::new()),
        ("other".to_string(), 0, 7, String::new()),
    ];
    for version in 1..=9 {
        assert_eq!(
            fetch_offsets(&mut client, "manual", None, version).await,
            all,
            "v{version}"
        );
    }
    assert!(fetch_offsets(&mut client, "nobody", None, 7)
        .await
        .is_empty());

    // Per-partition refusals: unknown topic, unknown partition, metadata over 4096 characters.
    let big = "x".repeat(4097);
    let request = commit_request(
        "manual",
        "",
        -1,
        &[
            ("missing", 0, 1, None),
            (TOPIC, 9, 1, None),
            (TOPIC, 1, 5, Some(&big)),
            (TOPIC, 1, 6, None),
        ],
    );
    let codes: Vec<i16> = client
        .call(&request, 8)
        .await
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            code(ResponseError::UnknownTopicOrPartition),
            code(ResponseError::UnknownTopicOrPartition),
            code(ResponseError::OffsetMetadataTooLarge),
            0
        ]
    );
    // A member generation for a group that does not exist: ILLEGAL_GENERATION, and from v9
    // GROUP_ID_NOT_FOUND; nothing is created.
    let request = commit_request("ghost-group", "m", 3, &[(TOPIC, 0, 1, None)]);
    let error = |r: OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(
        error(client.call(&request, 8).await),
        code(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        error(client.call(&request, 9).await),
        code(ResponseError::GroupIdNotFound)
    );
    assert_eq!(
        describe(&mut client, "ghost-group")
            .await
            .group_state
            .as_str(),
        "Dead"
    );
}

/// librdkafka 2.x asks for several groups in one OffsetFetch (v8+): each group is answered as
/// the single-group form would answer it, in the order asked.
#[tokio::test]
async fn offset_fetch_v8_and_v9_answer_several_groups_at_once() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, TOPIC, 3).await;
    let commits = [(TOPIC, 0, 5, Some("a")), (TOPIC, 2, 9, None)];
    client
        .call(&commit_request("first", "", -1, &commits), 8)
        .await;
    let later = [(TOPIC, 1, 4, None)];
    client
        .call(&commit_request("second", "", -1, &later), 8)
        .await;
    let row = |p: i32, offset: i64, meta: &str| (TOPIC.to_string(), p, offset, meta.to_string());
    for version in [8, 9] {
        let asked = [
            ("second", None),
            ("first", Some(&[0, 1][..])),
            ("nobody", Some(&[2][..])),
            ("first", None),
        ];
        assert_eq!(
            fetch_batch(&mut client, &asked, version).await,
            vec![
                ("second".into(), 0, vec![row(1, 4, "")]),
                ("first".into(), 0, vec![row(0, 5, "a"), row(1, -1, "")]),
                ("nobody".into(), 0, vec![row(2, -1, "")]),
                ("first".into(), 0, vec![row(0, 5, "a"), row(2, 9, "")]),
            ],
            "v{version}"
        );
        // The same as v7, group by group.
        for (group_id, partitions) in asked {
            assert_eq!(
                fetch_offsets(&mut client, group_id, partitions, version).await,
                fetch_offsets(&mut client, group_id, partitions, 7).await,
            );
        }
    }
    assert!(fetch_batch(&mut client, &[], 9).await.is_empty());
}

#[tokio::test]
async fn lag_is_log_end_minus_committed_and_the_metrics_endpoint_shows_it() {
    let broker = start_broker(BrokerConfig {
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, TOPIC, 3).await;
    for (partition, records) in [(0, 5), (1, 3)] {
        assert_eq!(
            produce(&mut client, TOPIC, partition, values(records), 9)
                .await
                .error_code,
            0
        );
    }
    let commit = commit_request(
        "lagging",
        "",
        -1,
        &[(TOPIC, 0, 2, None), (TOPIC, 1, 3, None)],
    );
    client.call(&commit, 8).await;

    let lag = broker::lag::committed_lag(broker.state(), "lagging").unwrap();
    // (partition, committed, log end, lag)
    let rows: Vec<_> = lag
        .iter()
        .map(|p| (p.partition, p.committed, p.log_end, p.lag()))
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, Some(2), Some(5), Some(3)),
            (1, Some(3), Some(3), Some(0))
        ]
    );
    // Partition 2 was never committed: its lag is unknown ("-"), not its log end.
    let assigned: Vec<(String, i32)> = (0..3).map(|p| (TOPIC.to_string(), p)).collect();
    let lags: Vec<Option<i64>> = broker::lag::partitions_lag(broker.state(), "lagging", &assigned)
        .iter()
        .map(|p| p.lag())
        .collect();
    assert_eq!(lags, vec![Some(3), Some(0), None]);

    let metrics = http_get(broker.metrics_addr().unwrap(), "GET /metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
    assert!(metrics.contains("Content-Type: text/plain; version=0.0.4"));
    let body = metrics.split("\r\n\r\n").nth(1).unwrap();
    for line in [
        "# TYPE kafka_partition_log_end_offset gauge",
        "kafka_partition_log_start_offset{topic=\"orders\",partition=\"0\"} 0",
        "kafka_partition_log_end_offset{topic=\"orders\",partition=\"0\"} 5",
        "kafka_partition_log_end_offset{topic=\"orders\",partition=\"1\"} 3",
        "kafka_partition_log_end_offset{topic=\"orders\",partition=\"2\"} 0",
        "kafka_consumergroup_group_offset{group=\"lagging\",topic=\"orders\",partition=\"0\"} 2",
        "kafka_consumergroup_group_offset{group=\"lagging\",topic=\"orders\",partition=\"1\"} 3",
        "kafka_consumergroup_group_lag{group=\"lagging\",topic=\"orders\",partition=\"0\"} 3",
        "kafka_consumergroup_group_lag{group=\"lagging\",topic=\"orders\",partition=\"1\"} 0",
    ] {
        assert!(
            body.lines().any(|l| l == line),
            "missing {line:?} in\n{body}"
        );
    }
    // Time lag: the oldest record not consumed on partition 0 (offset 2) is stamped 1002, so a
    // scrape at 61002 sees it 60 s old; partition 1 has no lag, so none.
    let at = broker::metrics::render(broker.state(), 61_002);
    for line in [
        "# TYPE kafka_consumergroup_group_lag_seconds gauge",
        "kafka_consumergroup_group_lag_seconds{group=\"lagging\",topic=\"orders\",partition=\"0\"} 60",
        "kafka_consumergroup_group_lag_seconds{group=\"lagging\",topic=\"orders\",partition=\"1\"} 0",
    ] {
        assert!(at.lines().any(|l| l == line), "missing {line:?} in\n{at}");
    }
    // Nothing committed on partition 2: neither an offset nor a lag line for it.
    assert!(!body
        .lines()
        .any(|l| l.starts_with("kafka_consumergroup") && l.contains("partition=\"2\"")));

    // More records raise the lag; a new commit lowers it.
    produce(&mut client, TOPIC, 1, values(4), 9).await;
    let body = http_get(broker.metrics_addr().unwrap(), "GET /metrics").await;
    let lag_1 = "kafka_consumergroup_group_lag{group=\"lagging\",topic=\"orders\",partition=\"1\"}";
    assert!(body.contains(&format!("{lag_1} 4\n")));
    let commit = commit_request("lagging", "", -1, &[(TOPIC, 1, 6, None)]);
    client.call(&commit, 8).await;
    let body = http_get(broker.metrics_addr().unwrap(), "GET /metrics").await;
    assert!(body.contains(&format!("{lag_1} 1\n")));

    assert!(http_get(broker.metrics_addr().unwrap(), "GET /other")
        .await
        .starts_with("HTTP/1.1 404"));
    assert!(http_get(broker.metrics_addr().unwrap(), "POST /metrics")
        .await
        .starts_with("HTTP/1.1 405"));
}

#[tokio::test]
async fn with_a_data_dir_committed_offsets_survive_a_restart_and_a_deletion_too() {
    let dir = std::env::temp_dir().join(format!("workshop-offsets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = BrokerConfig {
        data_dir: Some(dir.clone()),
        ..Default::default()
    };
    let broker = start_broker(config.clone()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, TOPIC, 2).await;
    let commits = [(TOPIC, 0, 40, Some("first")), (TOPIC, 1, 7, None)];
    let response = client
        .call(&commit_request("billing", "", -1, &commits), 8)
        .await;
    assert!(response
        .topics
        .iter()
        .all(|t| t.partitions[0].error_code == 0));
    let later = commit_request("billing", "", -1, &[(TOPIC, 0, 42, Some("second"))]);
    client.call(&later, 8).await;
    client
        .call(&commit_request("gone", "", -1, &[(TOPIC, 1, 3, None)]), 8)
        .await;
    broker.shutdown().await;

    let broker = start_broker(config.clone()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(
        fetch_offsets(&mut client, "billing", None, 7).await,
        vec![
            (TOPIC.into(), 0, 42, "second".into()),
            (TOPIC.into(), 1, 7, String::new())
        ]
    );
    assert_eq!(
        describe(&mut client, "billing").await.group_state.as_str(),
        "Empty"
    );
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![group("gone")]);
    assert_eq!(client.call(&delete, 2).await.results[0].error_code, 0);
    broker.shutdown().await;

    let broker = start_broker(config).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(fetch_offsets(&mut client, "gone", None, 7).await, vec![]);
    assert_eq!(
        fetch_offsets(&mut client, "billing", None, 7).await.len(),
        2
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Deletes `TOPIC` and creates it again with `partitions`.
async fn recreate_topic(client: &mut RawClient, partitions: i32) {
    let delete = DeleteTopicsRequest::default().with_topic_names(vec![topic_name(TOPIC)]);
    assert_eq!(client.call(&delete, 4).await.responses[0].error_code, 0);
    assert_eq!(create_topic(client, TOPIC, partitions).await, 0);
}

/// Kafka's coordinator drops every group's offsets of a deleted topic, so a consumer of the
/// re-created topic starts by its `auto.offset.reset` instead of at an offset of the old one.
#[tokio::test]
async fn deleting_a_topic_deletes_every_groups_offsets_of_it_also_after_a_restart() {
    let dir = data_dir("offsets-deleted-topic");
    let config = data_dir_config(&dir);
    let broker = start_broker(config.clone()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, TOPIC, 2).await;
    create_topic(&mut client, "other", 1).await;
    for group_id in ["billing", "audit"] {
        let request = commit_request(
            group_id,
            "",
            -1,
            &[
                (TOPIC, 0, 20, None),
                (TOPIC, 1, 5, None),
                ("other", 0, 3, None),
            ],
        );
        let response = client.call(&request, 8).await;
        assert!(response
            .topics
            .iter()
            .all(|t| t.partitions[0].error_code == 0));
    }
    recreate_topic(&mut client, 2).await;
    for group_id in ["billing", "audit"] {
        assert_eq!(
            fetch_offsets(&mut client, group_id, Some(&[0, 1]), 7).await,
            vec![
                (TOPIC.into(), 0, -1, String::new()),
                (TOPIC.into(), 1, -1, String::new())
            ]
        );
        assert_eq!(
            fetch_offsets(&mut client, group_id, None, 7).await,
            vec![("other".into(), 0, 3, String::new())]
        );
    }
    let request = commit_request("billing", "", -1, &[(TOPIC, 1, 2, None)]);
    client.call(&request, 8).await;
    broker.shutdown().await;

    let broker = start_broker(config).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(
        fetch_offsets(&mut client, "billing", None, 7).await,
        vec![
            ("orders".into(), 1, 2, String::new()),
            ("other".into(), 0, 3, String::new())
        ]
    );
    assert_eq!(
        fetch_offsets(&mut client, "audit", None, 7).await,
        vec![("other".into(), 0, 3, String::new())]
    );
    broker.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every committed offset of GROUP: `(topic, offset)`.
async fn committed(admin: &mut RawClient) -> Vec<(String, i64)> {
    let request = OffsetFetchRequest::default()
        .with_group_id(group(GROUP))
        .with_topics(None);
    let answer = admin.call(&request, 7).await;
    answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.committed_offset))
        })
        .collect()
}

/// OffsetCommit v2's `retention_time_ms` (Kafka's `expireTimestampMs`): a simple group's offset
/// goes at the first check past it (`offsets.retention.check.interval.ms`, 600 s by default).
#[tokio::test(start_paused = true)]
async fn an_offset_committed_with_a_retention_time_expires_at_the_next_check() {
    let broker = broker().await;
    let started = tokio::time::Instant::now();
    let mut client = RawClient::connect(broker.addr()).await;
    create_topic(&mut client, TOPIC, 2).await;
    let request = commit_request(
        "manual",
        "",
        -1,
        &[(TOPIC, 0, 20, None), (TOPIC, 1, 4, None)],
    )
    .with_retention_time_ms(1000);
    let kept = commit_request("kept", "", -1, &[(TOPIC, 0, 9, None)]);
    for request in [request, kept] {
        let answer = client.call(&request, 2).await;
        assert!(answer
            .topics
            .iter()
            .all(|t| t.partitions[0].error_code == 0));
    }
    tokio::time::sleep_until(started + Duration::from_secs(599)).await;
    assert_eq!(fetch_offsets(&mut client, "manual", None, 7).await.len(), 2);
    tokio::time::sleep_until(started + Duration::from_secs(630)).await;
    assert_eq!(fetch_offsets(&mut client, "manual", None, 7).await, vec![]);
    // Its group went with its last offset; the other keeps its offset for 7 days.
    assert_eq!(
        describe(&mut client, "manual").await.group_state.as_str(),
        "Dead"
    );
    assert_eq!(
        fetch_offsets(&mut client, "kept", None, 7).await,
        vec![(TOPIC.into(), 0, 9, String::new())]
    );
}

/// `offsets.retention.minutes` as Kafka's `ClassicGroup.offsetExpirationCondition` applies it:
/// in a Stable consumer group only offsets of topics no member subscribes to expire, from their
/// commit; once the group is Empty, all of them, counted from when it became Empty; then the
/// group itself is deleted.
#[tokio::test(start_paused = true)]
async fn offsets_expire_from_the_commit_when_unsubscribed_and_from_emptiness_otherwise() {
    let retention = Duration::from_secs(120);
    let broker = start_broker(BrokerConfig {
        offsets_retention: retention,
        offsets_retention_check_interval: Duration::from_secs(10),
        ..Default::default()
    })
    .await;
    let (mut a, mut b) = two_members(&broker).await;
    let mut admin = RawClient::connect(broker.addr()).await;
    create_topic(&mut admin, "other", 1).await;
    let committed_at = tokio::time::Instant::now();
    let request = commit_request(
        GROUP,
        &a.id,
        2,
        &[(TOPIC, 0, 5, None), ("other", 0, 7, None)],
    );
    let answer = a.client.call(&request, 8).await;
    assert!(answer
        .topics
        .iter()
        .all(|t| t.partitions[0].error_code == 0));
    // Stable, heartbeating: "other" goes at the first check 120 s after its commit.
    let mut at = committed_at;
    while at < committed_at + Duration::from_secs(140) {
        at += Duration::from_secs(3);
        tokio::time::sleep_until(at).await;
        assert_eq!(heartbeat(&mut a.client, &a.id, 2).await, 0);
        assert_eq!(heartbeat(&mut b.client, &b.id, 2).await, 0);
        if at < committed_at + retention {
            assert_eq!(
                committed(&mut admin).await.len(),
                2,
                "{:?}",
                at - committed_at
            );
        }
    }
    assert_eq!(committed(&mut admin).await, vec![(TOPIC.to_string(), 5)]);
    // Both members stop: their sessions end and the group is Empty.
    let last_heartbeat = at;
    tokio::time::sleep_until(last_heartbeat + Duration::from_millis(SESSION_MS as u64 + 1)).await;
    assert_eq!(
        describe(&mut admin, GROUP).await.group_state.as_str(),
        "Empty"
    );
    let emptied = last_heartbeat + Duration::from_millis(SESSION_MS as u64);
    tokio::time::sleep_until(emptied + Duration::from_secs(110)).await;
    assert_eq!(committed(&mut admin).await, vec![(TOPIC.to_string(), 5)]);
    tokio::time::sleep_until(emptied + retention + Duration::from_secs(11)).await;
    assert_eq!(committed(&mut admin).await, vec![]);
    assert_eq!(
        describe(&mut admin, GROUP).await.group_state.as_str(),
        "Dead"
    );
}
