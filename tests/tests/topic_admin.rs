//! Topic administration as Kafka's controller validates it: Metadata by topic id, colliding
//! names, manual replica assignments, duplicate names in one request; each with Kafka's codes,
//! validate_only included.

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
