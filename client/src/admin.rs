//! Topic administration: create, delete, grow, describe, list offsets, configs
//! (`admin/configs.rs`); and consumer groups: list, describe, committed offsets and committing
//! them, delete (`admin/groups.rs`), lag (`admin/lag.rs`) and time lag (`admin/time_lag.rs`),
//! resetting and deleting offsets (`admin/reset.rs`), waiting for a group to catch up
//! (`admin/catch_up.rs`); and moving partitions between brokers (`admin/reassign.rs`).
//! Topic changes go to the controller named in a fresh Metadata answer, as Kafka requires;
//! NOT_CONTROLLER and transient failures are retried.

mod alter_configs;
mod catch_up;
mod configs;
mod groups;
mod lag;
mod reassign;
mod reset;
mod time_lag;

use std::sync::Arc;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::client::{topic_name, Client};
use crate::connection::BrokerConnection;
use crate::error::{Error, ProtocolError, Result, ServerError};
use crate::metadata::{ClusterInfo, TopicInfo};
use crate::offsets::{self, ListedOffset, OffsetSpec};

pub use alter_configs::ConfigChange;
pub use catch_up::CatchUp;
pub use configs::{ConfigEntry, ConfigSource};
pub use groups::{
    parse_group_state, GroupDescription, GroupListing, MemberDescription, GROUP_STATES,
};
pub use lag::{lag_rows, GroupLag, Owner, PartitionLag};
pub use reassign::{OngoingReassignment, Reassignment};
pub use reset::{DeletedOffset, ResetPlan, ResetScope, ResetTo};

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker's default.
    pub partitions: i32,
    /// -1: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        Self {
            name: name.into(),
            partitions,
            replication_factor: -1,
            configs: Vec::new(),
        }
    }
}

/// One topic's answer in a batch operation.
pub type TopicResult = (String, Result<(), ServerError>);

#[derive(Clone)]
pub struct Admin {
    client: Client,
}

impl Admin {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Creates topics; each gets its own answer (an existing topic is TOPIC_ALREADY_EXISTS).
    pub async fn create_topics(&self, topics: &[NewTopic]) -> Result<Vec<TopicResult>> {
        for t in topics {
            protocol::names::validate_topic_name(&t.name).map_err(Error::InvalidArgument)?;
        }
        let timeout_ms = self.timeout_ms();
        let results = self
            .on_controller("CreateTopics", |conn| async move {
                let resp = conn.call(|_| create_request(topics, timeout_ms)).await?;
                let results = resp.topics.into_iter().map(|t| {
                    let message = t.error_message.map(|m| m.to_string());
                    (t.name.0.to_string(), t.error_code, message)
                });
                settle(results.collect())
            })
            .await?;
        for (name, result) in &results {
            if result.is_ok() {
                self.wait_until_visible(name).await?;
            }
        }
        Ok(results)
    }

    pub async fn create_topic(&self, topic: &NewTopic) -> Result<()> {
        only(
            self.create_topics(std::slice::from_ref(topic)).await?,
            &topic.name,
        )
    }

    pub async fn delete_topics(&self, names: &[&str]) -> Result<Vec<TopicResult>> {
        let timeout_ms = self.timeout_ms();
        let results = self
            .on_controller("DeleteTopics", |conn| async move {
                let resp = conn.call(|_| delete_request(names, timeout_ms)).await?;
                let results = resp.responses.into_iter().map(|t| {
                    let name = t.name.map_or_else(String::new, |n| n.0.to_string());
                    (name, t.error_code, t.error_message.map(|m| m.to_string()))
                });
                settle(results.collect())
            })
            .await?;
        for name in names {
            self.client.invalidate(name);
        }
        Ok(results)
    }

    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        only(self.delete_topics(&[name]).await?, name)
    }

    /// Grows `topic` to `total` partitions (Kafka cannot shrink a topic: INVALID_PARTITIONS).
    pub async fn create_partitions(&self, topic: &str, total: i32) -> Result<()> {
        let timeout_ms = self.timeout_ms();
        let results = self
            .on_controller("CreatePartitions", |conn| async move {
                let resp = conn
                    .call(|_| grow_request(topic, total, timeout_ms))
                    .await?;
                let results = resp.results.into_iter().map(|t| {
                    let message = t.error_message.map(|m| m.to_string());
                    (t.name.0.to_string(), t.error_code, message)
                });
                settle(results.collect())
            })
            .await?;
        self.client.invalidate(topic);
        only(results, topic)
    }

    /// One offset per partition of `topic`, in partition order.
    pub async fn list_offsets(&self, topic: &str, spec: OffsetSpec) -> Result<Vec<ListedOffset>> {
        let info = self.client.topic(topic, false).await?;
        let asks: Vec<(i32, OffsetSpec)> = info
            .partitions
            .iter()
            .map(|p| (p.partition, spec))
            .collect();
        offsets::list_offsets(&self.client, topic, &asks).await
    }

    /// Describes the named topics, or every topic when `names` is `None`, sorted by name.
    pub async fn describe_topics(&self, names: Option<&[&str]>) -> Result<Vec<TopicInfo>> {
        let snapshot = self
            .retrying("Metadata", || self.client.fetch_metadata(names, false))
            .await?;
        let mut topics = Vec::new();
        for (name, topic) in snapshot.topics {
            match topic {
                Ok(info) => topics.push(info),
                Err(e) if e.is(ResponseError::UnknownTopicOrPartition) => {
                    return Err(Error::UnknownTopic { topic: name })
                }
                Err(e) => return Err(e.into()),
            }
        }
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    pub async fn describe_topic(&self, name: &str) -> Result<TopicInfo> {
        let mut topics = self.describe_topics(Some(&[name])).await?;
        topics.pop().ok_or_else(|| Error::UnknownTopic {
            topic: name.to_string(),
        })
    }

    /// Every topic name, sorted.
    pub async fn list_topics(&self) -> Result<Vec<String>> {
        let topics = self.describe_topics(None).await?;
        Ok(topics.into_iter().map(|t| t.name).collect())
    }

    /// Brokers and controller, freshly asked.
    pub async fn cluster(&self) -> Result<ClusterInfo> {
        Ok(self.client.fetch_metadata(Some(&[]), false).await?.cluster)
    }

    /// Runs `op` against the current controller, retrying transient failures and NOT_CONTROLLER
    /// (the controller is looked up afresh each time).
    async fn on_controller<'a, T, F, Fut>(&'a self, what: &str, op: F) -> Result<T>
    where
        F: Fn(Arc<BrokerConnection>) -> Fut,
        Fut: std::future::Future<Output = Result<T>> + 'a,
    {
        let attempt = || async {
            let controller = self.client.fetch_metadata(Some(&[]), false).await?;
            let conn = match controller.cluster.controller {
                Some(id) => self.client.broker(id).await?,
                None => self.client.any_connection().await?,
            };
            op(conn).await
        };
        self.retrying(what, attempt).await
    }

    /// Kafka creates topics asynchronously; wait until metadata shows a new topic, so the
    /// caller can produce to it at once.
    async fn wait_until_visible(&self, name: &str) -> Result<()> {
        let look = || async {
            match self
                .client
                .fetch_metadata(Some(&[name]), false)
                .await?
                .topic(name)
            {
                Some(Ok(_)) => Ok(()),
                _ => Err(ServerError::new(ResponseError::LeaderNotAvailable.code())
                    .topic(name)
                    .into()),
            }
        };
        self.retrying("topic creation", look).await
    }

    /// Runs `attempt` again while it fails with a retriable error, as the client's retry policy
    /// allows.
    async fn retrying<T, F, Fut>(&self, what: &str, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.client.config().retry.run(what, attempt, |_| {}).await
    }

    fn timeout_ms(&self) -> i32 {
        i32::try_from(self.client.config().request_timeout.as_millis()).unwrap_or(i32::MAX)
    }
}

fn create_request(topics: &[NewTopic], timeout_ms: i32) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(topics.iter().map(creatable).collect())
}

// DeleteTopics v1-5 name topics in `topic_names`; v6 would move to `topics` with ids.
fn delete_request(names: &[&str], timeout_ms: i32) -> DeleteTopicsRequest {
    DeleteTopicsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topic_names(names.iter().map(|n| topic_name(n)).collect())
}

fn grow_request(topic: &str, total: i32, timeout_ms: i32) -> CreatePartitionsRequest {
    CreatePartitionsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(topic))
            .with_count(total)
            // No manual assignment is null: Kafka reads an empty list as too few of them.
            .with_assignments(None)])
}

fn creatable(t: &NewTopic) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(&t.name))
        .with_num_partitions(t.partitions)
        .with_replication_factor(t.replication_factor)
        .with_configs(
            t.configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.clone()))
                        .with_value(Some(StrBytes::from_string(v.clone())))
                })
                .collect(),
        )
}

/// Per-topic codes become per-topic results; NOT_CONTROLLER anywhere fails the whole call so
/// that it is retried on the right broker.
fn settle(results: Vec<(String, i16, Option<String>)>) -> Result<Vec<TopicResult>> {
    let mut out = Vec::with_capacity(results.len());
    for (name, code, message) in results {
        let result =
            ServerError::check(code).map_err(|e| e.topic(name.clone()).message(message.clone()));
        if let Err(e) = &result {
            if e.is(ResponseError::NotController) {
                return Err(e.clone().into());
            }
        }
        out.push((name, result));
    }
    Ok(out)
}

/// The one result of a single-topic call.
fn only(results: Vec<TopicResult>, name: &str) -> Result<()> {
    match results.into_iter().find(|(n, _)| n == name) {
        Some((_, result)) => Ok(result?),
        None => Err(ProtocolError::BadAnswer {
            api: "admin",
            reason: format!("no answer for topic {name}"),
        }
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn requests_encode_at_every_version_we_speak() {
        let mut t = NewTopic::new("orders", 3);
        t.configs.push(("retention.ms".into(), "1000".into()));
        let create = create_request(&[t], 1000);
        assert_eq!(create.topics[0].replication_factor, -1);
        let buf = &mut bytes::BytesMut::new();
        for v in 2..=7 {
            create.encode(buf, v).unwrap();
        }
        for v in 1..=5 {
            delete_request(&["orders"], 1000).encode(buf, v).unwrap();
        }
        for v in 0..=3 {
            grow_request("orders", 6, 1000).encode(buf, v).unwrap();
        }
    }

    #[test]
    fn per_topic_codes_become_results_and_not_controller_retries() {
        let out = settle(vec![
            ("a".into(), 0, None),
            ("b".into(), 36, Some("exists".into())),
        ])
        .unwrap();
        assert!(out[0].1.is_ok());
        let e = out[1].1.as_ref().unwrap_err();
        assert_eq!((e.code, e.topic.as_deref()), (36, Some("b")));
        let err = settle(vec![("a".into(), 41, None)]).unwrap_err();
        assert!(err.is_retriable());
        assert!(only(out, "c").is_err());
    }
}
