//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, as Kafka answers them for topics
//! (every config, with where its value comes from) and for the broker (its flags, which cannot
//! be altered while it runs).

use std::collections::{BTreeMap, HashMap};

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

/// One topic config as it applies to a topic: its value and where that comes from, and the
/// default it would have unset.
pub struct Effective {
    pub def: &'static Def,
    pub value: String,
    pub source: i8,
    default: String,
    default_source: i8,
}

/// Every listed topic config of a topic whose own configs are `set`, in name order: what
/// DescribeConfigs reports, and CreateTopics v5+ with the topic it created.
pub fn effective<'a>(
    config: &'a BrokerConfig,
    set: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = Effective> + 'a {
    topic_config::DEFS
        .iter()
        .filter(|d| !d.internal)
        .map(move |def| {
            let (default, default_source) = broker_default(def, config);
            let (value, source) = match set.get(def.name) {
                Some(value) => (value.clone(), SOURCE_TOPIC),
                None => (default.clone(), default_source),
            };
            Effective {
                def,
                value,
                source,
                default,
                default_source,
            }
        })
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
                        let configs = effective(&state.config, &set)
                            .filter(|c| wanted(c.def.name))
                            .map(|c| {
                                let d = c.def;
                                let mut e = entry(d.name, c.value, c.source, Some(d.kind));
                                if request.include_synonyms {
                                    e.synonyms =
                                        synonyms(d, set.get(d.name), &c.default, c.default_source);
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
                    let mut edit = Edit::new(topic.configs());
                    for c in &resource.configs {
                        let value = c.value.as_ref().map(|v| v.as_str());
                        edit.apply(&c.name, c.config_operation, value)?;
                    }
                    Ok(edit.finish())
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

/// A LIST config being appended to or subtracted from: its items in order (a subtracted one
/// leaves a hole) and where each is, so that each item an operation names costs O(1) and a
/// request costs what its items do, however many operations it has.
struct EditedList {
    items: Vec<Option<String>>,
    positions: HashMap<String, usize>,
    /// The joined value's length (items and commas), checked against the bound as it grows.
    joined_len: usize,
}

impl EditedList {
    fn parse(value: &str) -> Self {
        let mut list = Self {
            items: Vec::new(),
            positions: HashMap::new(),
            joined_len: 0,
        };
        for item in topic_config::list(value) {
            list.append(item);
        }
        list
    }

    fn append(&mut self, item: &str) {
        if self.positions.contains_key(item) {
            return;
        }
        self.joined_len += item.len() + usize::from(!self.positions.is_empty());
        self.positions.insert(item.to_string(), self.items.len());
        self.items.push(Some(item.to_string()));
    }

    fn subtract(&mut self, item: &str) {
        if let Some(at) = self.positions.remove(item) {
            self.items[at] = None;
            self.joined_len -= item.len() + usize::from(!self.positions.is_empty());
        }
    }

    fn join(self) -> String {
        let items: Vec<String> = self.items.into_iter().flatten().collect();
        items.join(",")
    }
}

/// IncrementalAlterConfigs' operations on one topic's configs, in order.
struct Edit {
    configs: BTreeMap<String, String>,
    /// Lists being appended to or subtracted from, joined into `configs` at the end.
    lists: HashMap<String, EditedList>,
}

impl Edit {
    fn new(configs: BTreeMap<String, String>) -> Self {
        Self {
            configs,
            lists: HashMap::new(),
        }
    }

    fn apply(&mut self, name: &str, operation: i8, value: Option<&str>) -> Result<(), TopicError> {
        if let Some(value) = value {
            topic_config::check_value_len(name, value.len())?;
        }
        let list_only = |verb: &str| {
            TopicError::new(
                ResponseError::InvalidConfig,
                format!("Config value {verb} is not allowed for config key: {name}"),
            )
        };
        match operation {
            OP_SET => {
                let value = value.ok_or_else(|| null_value(name))?;
                self.lists.remove(name);
                self.configs.insert(name.to_string(), value.to_string());
            }
            OP_DELETE => {
                self.lists.remove(name);
                self.configs.remove(name);
            }
            OP_APPEND | OP_SUBTRACT => {
                let def = topic_config::lookup(name).ok_or_else(|| {
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
                let value = value.ok_or_else(|| null_value(name))?;
                let configs = &self.configs;
                let list = self.lists.entry(name.to_string()).or_insert_with(|| {
                    EditedList::parse(configs.get(name).map_or(def.default, String::as_str))
                });
                for item in topic_config::list(value) {
                    if operation == OP_APPEND {
                        list.append(item);
                    } else {
                        list.subtract(item);
                    }
                }
                topic_config::check_value_len(name, list.joined_len)?;
            }
            other => {
                return Err(invalid_request(format!(
                    "Unknown config operation {other} for {name}"
                )))
            }
        }
        Ok(())
    }

    fn finish(mut self) -> BTreeMap<String, String> {
        for (name, list) in self.lists {
            self.configs.insert(name, list.join());
        }
        self.configs
    }
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
        let mut edit = Edit::new(BTreeMap::new());
        edit.apply("retention.ms", OP_SET, Some("1000")).unwrap();
        edit.apply("cleanup.policy", OP_APPEND, Some("compact"))
            .unwrap();
        edit.apply("cleanup.policy", OP_APPEND, Some("compact,delete"))
            .unwrap();
        assert_eq!(edit.finish()["cleanup.policy"], "delete,compact");
        let mut edit = Edit::new(BTreeMap::from([(
            "cleanup.policy".to_string(),
            "delete,compact".to_string(),
        )]));
        edit.apply("cleanup.policy", OP_SUBTRACT, Some("delete"))
            .unwrap();
        edit.apply("retention.ms", OP_SET, Some("1000")).unwrap();
        edit.apply("retention.ms", OP_DELETE, None).unwrap();
        let err = edit
            .apply("retention.ms", OP_APPEND, Some("1"))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Config value append is not allowed for config key: retention.ms"
        );
        let err = edit.apply("retention.ms", OP_SET, None).unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidRequest);
        let configs = edit.finish();
        assert_eq!(configs["cleanup.policy"], "compact");
        assert!(!configs.contains_key("retention.ms"));
        assert!(duplicates(["a", "b", "a"].into_iter()).is_err());
    }

    #[test]
    fn a_hundred_thousand_list_operations_cost_what_their_items_do() {
        const KEY: &str = "leader.replication.throttled.replicas";
        let mut edit = Edit::new(BTreeMap::new());
        // Appends and subtracts of the same few items, 100k operations, beside what Kafka's
        // list semantics give (a short list, so a plain vector models it).
        let mut expected: Vec<String> = Vec::new();
        for i in 0..100_000 {
            let item = format!("{}:1", i % 10);
            if i % 3 == 2 {
                edit.apply(KEY, OP_SUBTRACT, Some(&item)).unwrap();
                expected.retain(|e| *e != item);
            } else {
                edit.apply(KEY, OP_APPEND, Some(&item)).unwrap();
                if !expected.contains(&item) {
                    expected.push(item);
                }
            }
        }
        assert_eq!(edit.finish()[KEY], expected.join(","));
        // 100k distinct items in one value: refused once the list passes the bound.
        let items: Vec<String> = (0..100_000).map(|i| format!("{i}:1")).collect();
        let mut edit = Edit::new(BTreeMap::new());
        let err = edit
            .apply(KEY, OP_APPEND, Some(&items.join(",")))
            .unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidRequest);
        let mut edit = Edit::new(BTreeMap::new());
        let mut refused = None;
        for (i, item) in items.iter().enumerate() {
            if let Err(e) = edit.apply(KEY, OP_APPEND, Some(item)) {
                refused = Some((i, e.code));
                break;
            }
        }
        // Refused at the item that takes the joined value past the bound, not before.
        let (at, code) = refused.expect("the bound is reached");
        let joined: usize = items[..=at].iter().map(|i| i.len() + 1).sum::<usize>() - 1;
        assert!(joined > topic_config::MAX_VALUE_BYTES, "{joined}");
        assert!(joined - items[at].len() - 1 <= topic_config::MAX_VALUE_BYTES);
        assert_eq!(code, ResponseError::InvalidRequest);
    }
}
