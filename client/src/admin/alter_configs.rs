//! Changing a topic's configs, as kafka-configs.sh `--alter --add-config k=v --delete-config k`
//! does: IncrementalAlterConfigs (Kafka 2.3+) changes the configs named and leaves the others.
//! A broker without it gets AlterConfigs, which replaces the topic's configs with those given:
//! the ones set on the topic now (from DescribeConfigs) with the changes applied, as Kafka's
//! tools did before 2.3. That fallback is not atomic: a change made by someone else between the
//! two requests is lost.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::incremental_alter_configs_request as incremental;
use kafka_protocol::messages::{AlterConfigsRequest, ApiKey, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::configs::{ConfigSource, TOPIC};
use super::Admin;
use crate::error::{Error, ProtocolError, Result, ServerError};

/// IncrementalAlterConfigs' operations (`AlterConfigOp.OpType`).
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// One change to a topic's configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Sets the config on the topic (`--add-config name=value`).
    Set { name: String, value: String },
    /// Removes it from the topic, which then has the broker's default (`--delete-config name`).
    Delete { name: String },
}

impl Admin {
    /// Applies `changes` to `topic`'s configs and leaves the others as they are. The broker
    /// checks every change first: one it refuses (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION)
    /// fails the call, and nothing changes.
    pub async fn alter_topic_configs(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        match self
            .client()
            .api_version(ApiKey::IncrementalAlterConfigs)
            .await
        {
            Ok(_) => {}
            Err(e) if e.unsupported_api().is_some() => {
                return self.replace_topic_configs(topic, changes).await;
            }
            Err(e) => return Err(e),
        }
        let attempt = || async {
            let conn = self.client().any_connection().await?;
            let resp = conn.call(|_| incremental_request(topic, changes)).await?;
            let result = resp.responses.iter().find(|r| r.resource_type == TOPIC);
            outcome(
                "IncrementalAlterConfigs",
                topic,
                result.map(|r| (r.error_code, r.error_message.as_ref())),
            )
        };
        self.retrying("IncrementalAlterConfigs", attempt).await
    }

    /// The fallback: AlterConfigs with every config set on the topic, `changes` applied.
    async fn replace_topic_configs(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        let mut configs = BTreeMap::new();
        for entry in self.describe_topic_configs(topic).await? {
            if entry.source != ConfigSource::DynamicTopicConfig {
                continue;
            }
            // A value the broker does not show cannot be given back, and would be lost.
            let value = entry.value.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "this broker offers no IncrementalAlterConfigs, and {} is sensitive: it \
                     cannot be kept while the other configs are replaced",
                    entry.name
                ))
            })?;
            configs.insert(entry.name, value);
        }
        for change in changes {
            match change {
                ConfigChange::Set { name, value } => configs.insert(name.clone(), value.clone()),
                ConfigChange::Delete { name } => configs.remove(name),
            };
        }
        let attempt = || async {
            let conn = self.client().any_connection().await?;
            let resp = conn.call(|_| replace_request(topic, &configs)).await?;
            let result = resp.responses.iter().find(|r| r.resource_type == TOPIC);
            outcome(
                "AlterConfigs",
                topic,
                result.map(|r| (r.error_code, r.error_message.as_ref())),
            )
        };
        self.retrying("AlterConfigs", attempt).await
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn incremental_request(topic: &str, changes: &[ConfigChange]) -> IncrementalAlterConfigsRequest {
    let configs = changes
        .iter()
        .map(|change| {
            let (name, operation, value) = match change {
                ConfigChange::Set { name, value } => (name, OP_SET, Some(text(value))),
                ConfigChange::Delete { name } => (name, OP_DELETE, None),
            };
            incremental::AlterableConfig::default()
                .with_name(text(name))
                .with_config_operation(operation)
                .with_value(value)
        })
        .collect();
    IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(text(topic))
            .with_configs(configs),
    ])
}

fn replace_request(topic: &str, configs: &BTreeMap<String, String>) -> AlterConfigsRequest {
    let configs = configs
        .iter()
        .map(|(name, value)| {
            AlterableConfig::default()
                .with_name(text(name))
                .with_value(Some(text(value)))
        })
        .collect();
    AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(TOPIC)
        .with_resource_name(text(topic))
        .with_configs(configs)])
}

/// The topic's answer (its error code and message), as a result: Kafka's error, naming the
/// topic and carrying the broker's message (`Invalid value soon for configuration
/// retention.ms`).
fn outcome(api: &'static str, topic: &str, answer: Option<(i16, Option<&StrBytes>)>) -> Result<()> {
    let (code, message) = answer.ok_or_else(|| ProtocolError::BadAnswer {
        api,
        reason: format!("no answer for topic {topic}"),
    })?;
    ServerError::check(code).map_err(|e| {
        e.topic(topic)
            .message(message.map(|m| m.to_string()))
            .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn requests_encode_at_every_version_we_speak() {
        let changes = [
            ConfigChange::Set {
                name: "retention.ms".into(),
                value: "1000".into(),
            },
            ConfigChange::Delete {
                name: "cleanup.policy".into(),
            },
        ];
        let request = incremental_request("orders", &changes);
        let ops: Vec<(i8, Option<&str>)> = request.resources[0]
            .configs
            .iter()
            .map(|c| (c.config_operation, c.value.as_deref()))
            .collect();
        assert_eq!(ops, [(OP_SET, Some("1000")), (OP_DELETE, None)]);
        for v in 0..=1 {
            request.encode(&mut bytes::BytesMut::new(), v).unwrap();
        }
        let all = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
        for v in 0..=2 {
            replace_request("orders", &all)
                .encode(&mut bytes::BytesMut::new(), v)
                .unwrap();
        }
    }

    #[test]
    fn a_refusal_names_the_error_the_topic_and_the_brokers_message() {
        let message =
            StrBytes::from_static_str("Invalid value soon for configuration retention.ms");
        let err = outcome(
            "IncrementalAlterConfigs",
            "orders",
            Some((40, Some(&message))),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "INVALID_CONFIG (40) on topic orders: Invalid value soon for configuration retention.ms"
        );
        assert!(outcome("AlterConfigs", "orders", Some((0, None))).is_ok());
        assert!(outcome("AlterConfigs", "orders", None).is_err());
    }
}
