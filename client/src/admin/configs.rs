//! A topic's configuration, as DescribeConfigs reports it: every entry with its value and where
//! the value comes from, so a tool can show what was set (kafka-topics.sh `--describe` shows the
//! entries that are not defaults).

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::Admin;
use crate::error::{Error, ProtocolError, Result, ServerError};

/// The resource type of topics in DescribeConfigs and the alterations.
pub(super) const TOPIC: i8 = 2;

/// Where a config's value comes from (Kafka's `ConfigEntry.ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConfigSource {
    /// Set on the topic (at creation or by AlterConfigs).
    DynamicTopicConfig,
    DynamicBrokerConfig,
    DynamicDefaultBrokerConfig,
    StaticBrokerConfig,
    /// Nobody set it: the default.
    DefaultConfig,
    DynamicBrokerLoggerConfig,
    Unknown,
}

impl ConfigSource {
    fn from_wire(source: i8) -> Self {
        match source {
            1 => Self::DynamicTopicConfig,
            2 => Self::DynamicBrokerConfig,
            3 => Self::DynamicDefaultBrokerConfig,
            4 => Self::StaticBrokerConfig,
            5 => Self::DefaultConfig,
            6 => Self::DynamicBrokerLoggerConfig,
            _ => Self::Unknown,
        }
    }
}

/// One config of a topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` for a sensitive value the broker does not show.
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
}

impl ConfigEntry {
    /// Kafka's `ConfigEntry.isDefault`: nobody set it.
    pub fn is_default(&self) -> bool {
        self.source == ConfigSource::DefaultConfig
    }
}

impl Admin {
    /// Every config of `topic`, sorted by name.
    pub async fn describe_topic_configs(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        let attempt = || async {
            let conn = self.client().any_connection().await?;
            let resp = conn.call(|_| describe_request(topic)).await?;
            configs_answer(resp, topic)
        };
        self.retrying("DescribeConfigs", attempt).await
    }
}

fn describe_request(topic: &str) -> DescribeConfigsRequest {
    DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(TOPIC)
        .with_resource_name(StrBytes::from_string(topic.to_string()))
        .with_configuration_keys(None)])
}

fn configs_answer(resp: DescribeConfigsResponse, topic: &str) -> Result<Vec<ConfigEntry>> {
    let result = resp
        .results
        .into_iter()
        .find(|r| r.resource_type == TOPIC && r.resource_name.as_str() == topic)
        .ok_or_else(|| ProtocolError::BadAnswer {
            api: "DescribeConfigs",
            reason: format!("no answer for topic {topic}"),
        })?;
    if result.error_code == ResponseError::UnknownTopicOrPartition.code() {
        return Err(Error::UnknownTopic {
            topic: topic.to_string(),
        });
    }
    ServerError::check(result.error_code).map_err(|e| {
        e.topic(topic)
            .message(result.error_message.as_ref().map(|m| m.to_string()))
    })?;
    let mut entries: Vec<ConfigEntry> = result
        .configs
        .into_iter()
        .map(|c| ConfigEntry {
            name: c.name.to_string(),
            value: c.value.map(|v| v.to_string()),
            source: ConfigSource::from_wire(c.config_source),
            read_only: c.read_only,
            sensitive: c.is_sensitive,
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn the_request_encodes_at_every_version_we_speak() {
        for v in 1..=4 {
            describe_request("orders")
                .encode(&mut bytes::BytesMut::new(), v)
                .unwrap();
        }
    }

    #[test]
    fn entries_come_sorted_with_their_source_and_errors_name_the_topic() {
        let entry = |name: &str, source| {
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_string(name.into()))
                .with_value(Some(StrBytes::from_static_str("1")))
                .with_config_source(source)
        };
        let answer = |code: i16| {
            DescribeConfigsResponse::default().with_results(vec![DescribeConfigsResult::default()
                .with_error_code(code)
                .with_resource_type(TOPIC)
                .with_resource_name(StrBytes::from_static_str("orders"))
                .with_configs(vec![entry("retention.ms", 1), entry("cleanup.policy", 5)])])
        };
        let entries = configs_answer(answer(0), "orders").unwrap();
        let shown: Vec<(&str, bool)> = entries
            .iter()
            .map(|e| (e.name.as_str(), e.is_default()))
            .collect();
        assert_eq!(shown, [("cleanup.policy", true), ("retention.ms", false)]);
        assert!(matches!(
            configs_answer(answer(3), "orders"),
            Err(Error::UnknownTopic { .. })
        ));
        assert!(configs_answer(answer(0), "other").is_err());
    }
}
