//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, as Kafka answers them for topics
//! (every config, with where its value comes from) and for the broker (its flags, which cannot
//! be altered while it runs).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{code, str_bytes};
use crate::config::BrokerConfig;
use crate::state::BrokerState;
use crate::topic_config::{self, Def, Kind};
use crate::topic_error::TopicError;

/// Resource types of the config APIs.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Config sources (`DescribeConfigsResponse.config_source`).
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// A topic config's value when the topic does not set it: this broker's default (a flag's
/// default may differ from Kafka's: `--log-segment-bytes` is 64 MiB, not 1 GiB), reported as
/// DEFAULT_CONFIG; a flag set to something else is STATIC_BROKER_CONFIG, as Kafka reports a
/// `server.properties` setting.
fn broker_default(def: &Def, config: &BrokerConfig) -> (String, i8) {
    let ours = BrokerConfig::default();
    let flag = |name: &str, c: &BrokerConfig| match name {
        topic_config::MAX_MESSAGE_BYTES => Some(c.max_message_bytes.to_string()),
        topic_config::SEGMENT_BYTES => Some(c.log_segment_bytes.to_string()),
        _ => None,
    };
    match (flag(def.name, config), flag(def.name, &ours)) {
        (Some(set), Some(default)) if set != default => (set, SOURCE_STATIC_BROKER),
        (Some(default), _) => (default, SOURCE_DEFAULT),
        _ => (def.default.to_string(), SOURCE_DEFAULT),
    }
}

pub fn describe(
    state: &BrokerState,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            // Null or empty: every config.
            let keys = resource.configuration_keys.filter(|k| !k.is_empty());
            let wanted = |name: &str| keys.as_ref().is_none_or(|k| k.iter().any(|k| k == name));
            let entry = |name: &str, value: String, source: i8, kind: Option<Kind>| {
                let entry = DescribeConfigsResourceResult::default()
                    .with_name(str_bytes(name))
                    .with_value(Some(owned(value)))
                    .with_config_source(source);
                match kind {
                    // The type is reported from v3.
                    Some(kind) if version >= 3 => entry.with_config_type(kind.code()),
                    _ => entry,
                }
            };
            match resource.resource_type {
                RESOURCE_TOPIC => match state.topics.get(&resource.resource_name) {
                    Some(topic) => {
                        let set = topic.configs();
                        let configs = topic_config::DEFS
                            .iter()
                            .filter(|d| !d.internal && wanted(d.name))
                            .map(|d| {
                                let (default, default_source) = broker_default(d, &state.config);
                                let (value, source) = match set.get(d.name) {
                                    Some(value) => (value.clone(), SOURCE_TOPIC),
                                    None => (default.clone(), default_source),
                                };
                                let mut e = entry(d.name, value, source, Some(d.kind));
                                if request.include_synonyms {
                                    e.synonyms =
                                        synonyms(d, set.get(d.name), &default, default_source);
                                }
                                e
                            })
                            .collect();
                        result.with_configs(configs)
                    }
                    None => refused(result, TopicError::unknown_topic()),
                },
                RESOURCE_BROKER => {
                    let configs = broker_configs(&state.config)
                        .into_iter()
                        .filter(|(k, _)| wanted(k))
                        .map(|(k, v)| entry(k, v, SOURCE_DEFAULT, None).with_read_only(true))
                        .collect();
                    result.with_configs(configs)
                }
                other => refused(result, unsupported(other)),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Kafka's synonyms of a topic config, most significant first: the topic's own value, then the
/// broker's under its broker-config name.
fn synonyms(
    def: &Def,
    set: Option<&String>,
    default: &str,
    default_source: i8,
) -> Vec<DescribeConfigsSynonym> {
    let mut out = Vec::new();
    if let Some(value) = set {
        out.push(
            DescribeConfigsSynonym::default()
                .with_name(str_bytes(def.name))
                .with_value(Some(str_bytes(value)))
                .with_source(SOURCE_TOPIC),
        );
    }
    if let Some(broker_name) = def.synonym {
        out.push(
            DescribeConfigsSynonym::default()
                .with_name(str_bytes(broker_name))
                .with_value(Some(str_bytes(default)))
                .with_source(default_source),
        );
    }
    out
}

/// The broker's own configs: its flags under Kafka's names.
fn broker_configs(config: &BrokerConfig) -> Vec<(&'static str, String)> {
    vec![
        (
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
        ),
        ("message.max.bytes", config.max_message_bytes.to_string()),
        ("num.partitions", config.default_partitions.to_string()),
        (
            "socket.request.max.bytes",
            config.max_request_bytes.to_string(),
        ),
        (
            "transaction.max.timeout.ms",
            config.transaction_max_timeout_ms.to_string(),
        ),
    ]
}

fn owned(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

fn refused(result: DescribeConfigsResult, e: TopicError) -> DescribeConfigsResult {
    result
        .with_error_code(code(e.code))
        .with_error_message(Some(str_bytes(&e.message)))
}

fn unsupported(resource_type: i8) -> TopicError {
    TopicError::new(
        ResponseError::InvalidRequest,
        format!("Unsupported resource type {resource_type}"),
    )
}

fn invalid_request(message: impl Into<String>) -> TopicError {
    TopicError::new(ResponseError::InvalidRequest, message)
}

/// What an alteration of a broker resource gets: this broker's configs are its flags.
fn broker_not_alterable() -> TopicError {
    invalid_request(
        "This broker's configs are set by its command-line flags at start; they cannot be \
         altered while it runs.",
    )
}

/// What both alterations check first: a topic (a broker's configs are its flags), each config
/// named once.
fn alterable<'a>(
    resource_type: i8,
    names: impl Iterator<Item = &'a str>,
) -> Result<(), TopicError> {
    match resource_type {
        RESOURCE_TOPIC => duplicates(names),
        RESOURCE_BROKER => Err(broker_not_alterable()),
        other => Err(unsupported(other)),
    }
}

/// One config named twice in one resource: Kafka refuses the resource.
fn duplicates<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), TopicError> {
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(invalid_request("Error due to duplicate config keys"));
        }
    }
    Ok(())
}

fn null_value(name: &str) -> TopicError {
    invalid_request(format!("Null value not supported for : {name}"))
}

/// AlterConfigs: the topic's configs become exactly those given (an omitted one is back to its
/// default).
pub fn alter(state: &BrokerState, request: AlterConfigsRequest) -> AlterConfigsResponse {
    use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
    let responses = request
        .resources
        .into_iter()
        .map(|resource| {
            let names = resource.configs.iter().map(|c| c.name.as_str());
            let (error_code, message) = alter_one(
                state,
                &resource.resource_name,
                resource.resource_type,
                names,
                request.validate_only,
                || {
                    let mut configs = BTreeMap::new();
                    for c in &resource.configs {
                        let value = c.value.as_ref().ok_or_else(|| null_value(&c.name))?;
                        configs.insert(c.name.to_string(), value.to_string());
                    }
                    Ok(configs)
                },
            );
            AlterConfigsResourceResponse::default()
                .with_error_code(error_code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

/// IncrementalAlterConfigs: each config set, deleted (back to its default), or, for a list,
/// added to or removed from.
pub fn incremental_alter(
    state: &BrokerState,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
    let responses = request
        .resources
        .into_iter()
        .map(|resource| {
            let names = resource.configs.iter().map(|c| c.name.as_str());
            let (error_code, message) = alter_one(
                state,
                &resource.resource_name,
                resource.resource_type,
                names,
                request.validate_only,
                || {
                    let topic = state
                        .topics
                        .get(&resource.resource_name)
                        .ok_or_else(TopicError::unknown_topic)?;
                    let mut configs = topic.configs();
                    for c in &resource.configs {
                        let name = c.name.to_string();
                        let value = c.value.as_ref().map(|v| v.to_string());
                        apply(&mut configs, name, c.config_operation, value)?;
                    }
                    Ok(configs)
                },
            );
            AlterConfigsResourceResponse::default()
                .with_error_code(error_code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// One resource of AlterConfigs or IncrementalAlterConfigs: its config names checked, its new
/// configs built by `configs`, then stored (or, with `validate_only`, only validated); the
/// error code and message of its answer.
fn alter_one<'a>(
    state: &BrokerState,
    topic: &str,
    resource_type: i8,
    names: impl Iterator<Item = &'a str>,
    validate_only: bool,
    configs: impl FnOnce() -> Result<BTreeMap<String, String>, TopicError>,
) -> (i16, Option<StrBytes>) {
    answer((|| {
        alterable(resource_type, names)?;
        state.topics.alter_configs(topic, configs()?, validate_only)
    })())
}

/// One operation of IncrementalAlterConfigs on a topic's configs.
fn apply(
    configs: &mut BTreeMap<String, String>,
    name: String,
    operation: i8,
    value: Option<String>,
) -> Result<(), TopicError> {
    let list_only = |verb: &str| {
        TopicError::new(
            ResponseError::InvalidConfig,
            format!("Config value {verb} is not allowed for config key: {name}"),
        )
    };
    match operation {
        OP_SET => {
            let value = value.ok_or_else(|| null_value(&name))?;
            configs.insert(name, value);
        }
        OP_DELETE => {
            configs.remove(&name);
        }
        OP_APPEND | OP_SUBTRACT => {
            let def = topic_config::lookup(&name).ok_or_else(|| {
                TopicError::new(
                    ResponseError::InvalidConfig,
                    format!("Unknown topic config name: {name}"),
                )
            })?;
            if def.kind != Kind::List {
                return Err(list_only(if operation == OP_APPEND {
                    "append"
                } else {
                    "subtract"
                }));
            }
            let value = value.ok_or_else(|| null_value(&name))?;
            let current = configs
                .get(&name)
                .map_or(def.default.to_string(), Clone::clone);
            let mut items: Vec<String> = topic_config::list(&current)
                .into_iter()
                .map(str::to_string)
                .collect();
            for item in topic_config::list(&value) {
                if operation == OP_APPEND {
                    if !items.iter().any(|i| i == item) {
                        items.push(item.to_string());
                    }
                } else {
                    items.retain(|i| i != item);
                }
            }
            configs.insert(name, items.join(","));
        }
        other => {
            return Err(invalid_request(format!(
                "Unknown config operation {other} for {name}"
            )))
        }
    }
    Ok(())
}

fn answer(outcome: Result<(), TopicError>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        // Kafka sends no message for an unknown topic.
        Err(e) if e == TopicError::unknown_topic() => (code(e.code), None),
        Err(e) => (code(e.code), Some(owned(e.message))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_operations_set_delete_append_and_subtract() {
        let mut configs = BTreeMap::new();
        apply(
            &mut configs,
            "retention.ms".into(),
            OP_SET,
            Some("1000".into()),
        )
        .unwrap();
        apply(
            &mut configs,
            "cleanup.policy".into(),
            OP_APPEND,
            Some("compact".into()),
        )
        .unwrap();
        assert_eq!(configs["cleanup.policy"], "delete,compact");
        apply(
            &mut configs,
            "cleanup.policy".into(),
            OP_SUBTRACT,
            Some("delete".into()),
        )
        .unwrap();
        assert_eq!(configs["cleanup.policy"], "compact");
        apply(&mut configs, "retention.ms".into(), OP_DELETE, None).unwrap();
        assert!(!configs.contains_key("retention.ms"));
        let err = apply(
            &mut configs,
            "retention.ms".into(),
            OP_APPEND,
            Some("1".into()),
        );
        assert_eq!(
            err.unwrap_err().message,
            "Config value append is not allowed for config key: retention.ms"
        );
        let err = apply(&mut configs, "retention.ms".into(), OP_SET, None).unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidRequest);
        assert!(duplicates(["a", "b", "a"].into_iter()).is_err());
    }
}
