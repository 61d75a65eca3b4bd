//! Topic administration as Kafka's controller validates it: Metadata by topic id, colliding
//! names, manual replica assignments, duplicate names in one request; each with Kafka's codes,
//! validate_only included.

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use tests::*;
use uuid::Uuid;

fn metadata_by_id(ids: &[Uuid]) -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(
        ids.iter()
            .map(|&id| {
                MetadataRequestTopic::default()
                    .with_name(None)
                    .with_topic_id(id)
            })
            .collect(),
    ))
}

async fn topic_id(client: &mut RawClient, name: &str) -> Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic_name(name))),
    ]));
    let topic = client.call(&request, 12).await.topics.remove(0);
    assert_eq!(topic.error_code, 0);
    topic.topic_id
}

async fn delete_topic(client: &mut RawClient, name: &str) -> i16 {
    let delete = DeleteTopicsRequest::default().with_topic_names(vec![topic_name(name)]);
    client.call(&delete, 4).await.responses[0].error_code
}

/// Java's `AdminClient.describeTopics(TopicCollection.ofTopicIds(..))` sends Metadata v12 with
/// ids and null names; Kafka answers a live id with its topic and an unknown one with
/// UNKNOWN_TOPIC_ID and a null name. Before v12 ids are an INVALID_REQUEST.
#[tokio::test]
async fn metadata_v12_finds_a_topic_by_its_id_and_answers_an_unknown_id_with_a_null_name() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "orders", 3).await, 0);
    let id = topic_id(&mut client, "orders").await;
    let unknown = Uuid::from_u128(42);
    let answer = client.call(&metadata_by_id(&[id, unknown]), 12).await;
    let found = &answer.topics[0];
    assert_eq!(found.error_code, 0);
    assert_eq!(found.name.as_deref().map(|n| n.as_str()), Some("orders"));
    assert_eq!((found.topic_id, found.partitions.len()), (id, 3));
    let missing = &answer.topics[1];
    assert_eq!(missing.error_code, ResponseError::UnknownTopicId.code());
    assert_eq!((missing.name.clone(), missing.topic_id), (None, unknown));
    let answer = client.call(&metadata_by_id(&[id]), 11).await;
    assert_eq!(
        answer.topics[0].error_code,
        ResponseError::InvalidRequest.code()
    );
    // Re-created under the same name: the old id is gone.
    assert_eq!(delete_topic(&mut client, "orders").await, 0);
    assert_eq!(create_topic(&mut client, "orders", 1).await, 0);
    let answer = client.call(&metadata_by_id(&[id]), 12).await;
    assert_eq!(
        answer.topics[0].error_code,
        ResponseError::UnknownTopicId.code()
    );
    let new_id = topic_id(&mut client, "orders").await;
    assert_ne!(new_id, id);
    let answer = client.call(&metadata_by_id(&[new_id]), 12).await;
    assert_eq!(answer.topics[0].partitions.len(), 1);
}

/// `(error code, message)` of each CreateTopics result, in answer order.
async fn create_all(
    client: &mut RawClient,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> Vec<(String, i16, String)> {
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_validate_only(validate_only);
    client
        .call(&request, 7)
        .await
        .topics
        .into_iter()
        .map(|t| {
            let message = t.error_message.map(|m| m.to_string()).unwrap_or_default();
            (t.name.to_string(), t.error_code, message)
        })
        .collect()
}

fn new_topic(name: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
}

async fn partition_count(client: &mut RawClient, name: &str) -> Option<usize> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic_name(name))),
    ]));
    let topic = client.call(&request, 12).await.topics.remove(0);
    (topic.error_code == 0).then_some(topic.partitions.len())
}

/// Kafka refuses a topic whose name equals an existing one's with `.` read as `_`
/// (`ReplicationControlManager.validateNewTopicNames`): CreateTopics answers
/// INVALID_TOPIC_EXCEPTION; an auto-creation is refused too, and the topic stays unknown.
#[tokio::test]
async fn a_name_colliding_with_an_existing_topic_by_dot_and_underscore_is_invalid() {
    let broker = start_broker(BrokerConfig {
        auto_create_topics: true,
        ..Default::default()
    })
    .await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "metrics.events", 1).await, 0);
    let invalid = ResponseError::InvalidTopicException.code();
    for validate_only in [true, false] {
        assert_eq!(
            create_all(
                &mut client,
                vec![new_topic("metrics_events", 1)],
                validate_only
            )
            .await,
            vec![(
                "metrics_events".into(),
                invalid,
                "Topic 'metrics_events' collides with existing topic: metrics.events".into()
            )]
        );
    }
    assert_eq!(
        create_topic(&mut client, "metrics.events", 1).await,
        ResponseError::TopicAlreadyExists.code()
    );
    // Auto-creation by Metadata (and by Produce, which Kafka never auto-creates by): Kafka's
    // broker answers INVALID_TOPIC_EXCEPTION only for a name `Topic.validate` refuses; the
    // controller refuses the collision, and the client sees the topic missing.
    let auto_create = |name: &str| {
        MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(name)))
            ]))
            .with_allow_auto_topic_creation(true)
    };
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let answer = client.call(&auto_create("metrics_events"), 12).await;
    assert_eq!(answer.topics[0].error_code, unknown);
    let answer = client.call(&auto_create("metrics events"), 12).await;
    assert_eq!(answer.topics[0].error_code, invalid);
    let produced = produce(&mut client, "metrics_events", 0, values(1), 9).await;
    assert_eq!(produced.error_code, unknown);
    assert_eq!(partition_count(&mut client, "metrics_events").await, None);
    // Once the first is deleted the name is free.
    assert_eq!(delete_topic(&mut client, "metrics.events").await, 0);
    assert_eq!(create_topic(&mut client, "metrics_events", 2).await, 0);
    assert_eq!(
        partition_count(&mut client, "metrics_events").await,
        Some(2)
    );
}

fn assigned(partition: i32, brokers: &[i32]) -> CreatableReplicaAssignment {
    CreatableReplicaAssignment::default()
        .with_partition_index(partition)
        .with_broker_ids(brokers.iter().map(|&b| BrokerId(b)).collect())
}

fn with_assignments(name: &str, assignments: Vec<CreatableReplicaAssignment>) -> CreatableTopic {
    new_topic(name, -1)
        .with_replication_factor(-1)
        .with_assignments(assignments)
}

/// Manual assignments as Kafka's controller checks them (`ReplicationControlManager`): only
/// registered brokers (node 1 here), none twice, each partition once and numbered from 0 without
/// a gap, and never with a partition count or replication factor beside them. Nothing is created
/// on a refusal, validate_only or not.
#[tokio::test]
async fn manual_replica_assignments_are_checked_as_kafkas_controller_checks_them() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let replica = ResponseError::InvalidReplicaAssignment.code();
    let request = ResponseError::InvalidRequest.code();
    let cases = [
        (with_assignments("t", vec![assigned(0, &[7])]), replica, "The manual partition assignment includes broker 7, but no such broker is registered."),
        (with_assignments("t", vec![assigned(0, &[1, 1])]), replica, "The manual partition assignment includes the broker 1 more than once."),
        (with_assignments("t", vec![assigned(0, &[])]), replica, "The manual partition assignment includes an empty replica list."),
        (with_assignments("t", vec![assigned(0, &[1]), assigned(2, &[1])]), replica, "partitions should be a consecutive 0-based integer sequence"),
        (with_assignments("t", vec![assigned(1, &[1])]), replica, "partitions should be a consecutive 0-based integer sequence"),
        (with_assignments("t", vec![assigned(0, &[1]), assigned(0, &[1])]), replica, "Found multiple manual partition assignments for partition 0"),
        (with_assignments("t", vec![assigned(0, &[1])]).with_num_partitions(1), request, "A manual partition assignment was specified, but numPartitions was not set to -1."),
        (with_assignments("t", vec![assigned(0, &[1])]).with_replication_factor(1), request, "A manual partition assignment was specified, but replication factor was not set to -1."),
    ];
    for (topic, code, message) in cases {
        for validate_only in [true, false] {
            let answer = create_all(&mut client, vec![topic.clone()], validate_only).await;
            assert_eq!(
                answer,
                vec![("t".into(), code, message.into())],
                "{topic:?}"
            );
        }
    }
    assert_eq!(partition_count(&mut client, "t").await, None);
    let good = with_assignments("t", vec![assigned(1, &[1]), assigned(0, &[1])]);
    assert_eq!(create_all(&mut client, vec![good], false).await[0].1, 0);
    assert_eq!(partition_count(&mut client, "t").await, Some(2));

    let grow = |assignments: Option<Vec<Vec<i32>>>, validate_only: bool| {
        let assignments = assignments.map(|a| {
            a.into_iter()
                .map(|brokers| {
                    CreatePartitionsAssignment::default()
                        .with_broker_ids(brokers.into_iter().map(BrokerId).collect())
                })
                .collect()
        });
        CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name("t"))
                .with_count(4)
                .with_assignments(assignments)])
            .with_validate_only(validate_only)
    };
    let refusals = [
        // Null is "no manual assignment"; an empty list is too few of them.
        (
            Some(vec![]),
            "Attempted to add 2 additional partition(s), but only 0 assignment(s) were specified.",
        ),
        (
            Some(vec![vec![1]]),
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            Some(vec![vec![1], vec![9]]),
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            Some(vec![vec![1], vec![1, 1]]),
            "The manual partition assignment includes the broker 1 more than once.",
        ),
    ];
    for (assignments, message) in refusals {
        for validate_only in [true, false] {
            let answer = client
                .call(&grow(assignments.clone(), validate_only), 3)
                .await;
            let result = &answer.results[0];
            assert_eq!(result.error_code, replica, "{assignments:?}");
            assert_eq!(
                result.error_message.as_ref().map(|m| m.to_string()),
                Some(message.to_string())
            );
        }
    }
    assert_eq!(partition_count(&mut client, "t").await, Some(2));
    let answer = client
        .call(&grow(Some(vec![vec![1], vec![1]]), false), 3)
        .await;
    assert_eq!(answer.results[0].error_code, 0);
    assert_eq!(partition_count(&mut client, "t").await, Some(4));
}

/// A name repeated in one CreateTopics, DeleteTopics or CreatePartitions is answered once with
/// INVALID_REQUEST ("Duplicate topic name.", Kafka's `ControllerApis`) and none of its copies
/// acts; the other names of the request do.
#[tokio::test]
async fn a_name_repeated_in_one_request_is_an_invalid_request_and_no_copy_acts() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    let duplicate = (
        ResponseError::InvalidRequest.code(),
        "Duplicate topic name.".to_string(),
    );
    let answer = create_all(
        &mut client,
        vec![
            new_topic("twice", 1),
            new_topic("once", 1),
            new_topic("twice", 3),
        ],
        false,
    )
    .await;
    assert_eq!(
        answer,
        vec![
            ("twice".into(), duplicate.0, duplicate.1.clone()),
            ("once".into(), 0, String::new())
        ]
    );
    assert_eq!(partition_count(&mut client, "twice").await, None);
    assert_eq!(create_topic(&mut client, "twice", 1).await, 0);

    let grow = |name: &str, count: i32| {
        CreatePartitionsTopic::default()
            .with_name(topic_name(name))
            .with_count(count)
            .with_assignments(None)
    };
    let request = CreatePartitionsRequest::default().with_topics(vec![
        grow("twice", 2),
        grow("once", 2),
        grow("twice", 3),
    ]);
    let answer: Vec<(String, i16)> = client
        .call(&request, 3)
        .await
        .results
        .into_iter()
        .map(|r| (r.name.to_string(), r.error_code))
        .collect();
    assert_eq!(
        answer,
        vec![("twice".into(), duplicate.0), ("once".into(), 0)]
    );
    assert_eq!(partition_count(&mut client, "twice").await, Some(1));
    assert_eq!(partition_count(&mut client, "once").await, Some(2));

    let delete = DeleteTopicsRequest::default().with_topic_names(vec![
        topic_name("twice"),
        topic_name("once"),
        topic_name("twice"),
    ]);
    let answer: Vec<(String, i16, Option<String>)> = client
        .call(&delete, 5)
        .await
        .responses
        .into_iter()
        .map(|r| {
            let name = r.name.map(|n| n.to_string()).unwrap_or_default();
            (name, r.error_code, r.error_message.map(|m| m.to_string()))
        })
        .collect();
    assert_eq!(
        answer,
        vec![
            ("twice".into(), duplicate.0, Some(duplicate.1)),
            ("once".into(), 0, None)
        ]
    );
    assert_eq!(partition_count(&mut client, "twice").await, Some(1));
    assert_eq!(partition_count(&mut client, "once").await, None);
}
