//! Topic configs as Kafka 4.0 has them: every name its `LogConfig` defines, with its type, its
//! default and its validator, checked with Kafka's messages; and the ones this broker applies,
//! turned into a [`LogPolicy`] for each partition.
//!
//! A name Kafka does not know is refused (`Unknown topic config name: x`), and so is a value its
//! validator refuses; CreateTopics then creates nothing and AlterConfigs changes nothing. Known
//! configs that mean nothing to a single node without tiered storage (`min.insync.replicas`,
//! `unclean.leader.election.enable`, ...) are validated and stored, and reported by
//! DescribeConfigs, as Kafka would, without effect here; `remote.storage.enable=true` is refused
//! as by a Kafka without tiered storage.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use protocol::compression::Compression;

use crate::topic_error::TopicError;

/// The type Kafka's `ConfigDef` gives a config, which decides how its value is parsed and what
/// DescribeConfigs v3+ reports as `config_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Boolean,
    String,
    Int,
    Long,
    Double,
    List,
}

impl Kind {
    /// `DescribeConfigsResponse.config_type`.
    pub fn code(self) -> i8 {
        match self {
            Kind::Boolean => 1,
            Kind::String => 2,
            Kind::Int => 3,
            Kind::Long => 5,
            Kind::Double => 6,
            Kind::List => 7,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Boolean => "BOOLEAN",
            Kind::String => "STRING",
            Kind::Int => "INT",
            Kind::Long => "LONG",
            Kind::Double => "DOUBLE",
            Kind::List => "LIST",
        }
    }
}

/// A validator of Kafka's `ConfigDef`.
#[derive(Debug, Clone, Copy)]
enum Valid {
    Any,
    AtLeast(i64),
    Between(f64, f64),
    OneOf(&'static [&'static str]),
    /// Every element of the list is one of these.
    ListOf(&'static [&'static str]),
    /// A compression level: `min..=max`, or `also` (gzip's -1, "the codec's default").
    Level {
        min: i64,
        max: i64,
        also: Option<i64>,
    },
    /// `leader/follower.replication.throttled.replicas`: `*`, or `partition:broker` pairs.
    ThrottledReplicas,
}

/// One topic config.
#[derive(Debug)]
pub struct Def {
    pub name: &'static str,
    pub kind: Kind,
    /// The value Kafka reports when neither the topic nor the broker sets it.
    pub default: &'static str,
    valid: Valid,
    /// The broker config whose value is the topic's default (`log.retention.ms`, ...).
    pub synonym: Option<&'static str>,
    /// Kafka's `internal.*` configs: accepted, never listed.
    pub internal: bool,
}

const fn def(name: &'static str, kind: Kind, default: &'static str, valid: Valid) -> Def {
    Def {
        name,
        kind,
        default,
        valid,
        synonym: None,
        internal: false,
    }
}

const fn with_synonym(mut d: Def, synonym: &'static str) -> Def {
    d.synonym = Some(synonym);
    d
}

const LONG_MAX: &str = "9223372036854775807";

pub const CLEANUP_POLICY: &str = "cleanup.policy";
pub const COMPRESSION_TYPE: &str = "compression.type";
pub const DELETE_RETENTION_MS: &str = "delete.retention.ms";
pub const FILE_DELETE_DELAY_MS: &str = "file.delete.delay.ms";
pub const FLUSH_MESSAGES: &str = "flush.messages";
pub const FLUSH_MS: &str = "flush.ms";
pub const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";
pub const MAX_COMPACTION_LAG_MS: &str = "max.compaction.lag.ms";
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
pub const MESSAGE_TIMESTAMP_AFTER_MAX_MS: &str = "message.timestamp.after.max.ms";
pub const MESSAGE_TIMESTAMP_BEFORE_MAX_MS: &str = "message.timestamp.before.max.ms";
pub const MESSAGE_TIMESTAMP_TYPE: &str = "message.timestamp.type";
pub const MIN_CLEANABLE_DIRTY_RATIO: &str = "min.cleanable.dirty.ratio";
pub const MIN_COMPACTION_LAG_MS: &str = "min.compaction.lag.ms";
pub const REMOTE_STORAGE_ENABLE: &str = "remote.storage.enable";
pub const RETENTION_BYTES: &str = "retention.bytes";
pub const RETENTION_MS: &str = "retention.ms";
pub const SEGMENT_BYTES: &str = "segment.bytes";
pub const SEGMENT_MS: &str = "segment.ms";

/// Every topic config of Kafka 4.0, sorted by name.
pub static DEFS: &[Def] = &[
    with_synonym(
        def(
            CLEANUP_POLICY,
            Kind::List,
            "delete",
            Valid::ListOf(&["compact", "delete"]),
        ),
        "log.cleanup.policy",
    ),
    def(
        "compression.gzip.level",
        Kind::Int,
        "-1",
        Valid::Level {
            min: 1,
            max: 9,
            also: Some(-1),
        },
    ),
    def(
        "compression.lz4.level",
        Kind::Int,
        "9",
        Valid::Level {
            min: 1,
            max: 17,
            also: None,
        },
    ),
    def(
        COMPRESSION_TYPE,
        Kind::String,
        "producer",
        Valid::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
    ),
    def(
        "compression.zstd.level",
        Kind::Int,
        "3",
        Valid::Level {
            min: -131_072,
            max: 22,
            also: None,
        },
    ),
    with_synonym(
        def(
            DELETE_RETENTION_MS,
            Kind::Long,
            "86400000",
            Valid::AtLeast(0),
        ),
        "log.cleaner.delete.retention.ms",
    ),
    with_synonym(
        def(FILE_DELETE_DELAY_MS, Kind::Long, "60000", Valid::AtLeast(0)),
        "log.segment.delete.delay.ms",
    ),
    with_synonym(
        def(FLUSH_MESSAGES, Kind::Long, LONG_MAX, Valid::AtLeast(1)),
        "log.flush.interval.messages",
    ),
    with_synonym(
        def(FLUSH_MS, Kind::Long, LONG_MAX, Valid::AtLeast(0)),
        "log.flush.interval.ms",
    ),
    def(
        "follower.replication.throttled.replicas",
        Kind::List,
        "",
        Valid::ThrottledReplicas,
    ),
    with_synonym(
        def("index.interval.bytes", Kind::Int, "4096", Valid::AtLeast(0)),
        "log.index.interval.bytes",
    ),
    Def {
        internal: true,
        ..def(INTERNAL_SEGMENT_BYTES, Kind::Int, "", Valid::AtLeast(1))
    },
    def(
        "leader.replication.throttled.replicas",
        Kind::List,
        "",
        Valid::ThrottledReplicas,
    ),
    with_synonym(
        def(
            "local.retention.bytes",
            Kind::Long,
            "-2",
            Valid::AtLeast(-2),
        ),
        "log.local.retention.bytes",
    ),
    with_synonym(
        def("local.retention.ms", Kind::Long, "-2", Valid::AtLeast(-2)),
        "log.local.retention.ms",
    ),
    with_synonym(
        def(
            MAX_COMPACTION_LAG_MS,
            Kind::Long,
            LONG_MAX,
            Valid::AtLeast(1),
        ),
        "log.cleaner.max.compaction.lag.ms",
    ),
    with_synonym(
        def(MAX_MESSAGE_BYTES, Kind::Int, "1048588", Valid::AtLeast(0)),
        "message.max.bytes",
    ),
    with_synonym(
        def(
            MESSAGE_TIMESTAMP_AFTER_MAX_MS,
            Kind::Long,
            "3600000",
            Valid::AtLeast(0),
        ),
        "log.message.timestamp.after.max.ms",
    ),
    with_synonym(
        def(
            MESSAGE_TIMESTAMP_BEFORE_MAX_MS,
            Kind::Long,
            LONG_MAX,
            Valid::AtLeast(0),
        ),
        "log.message.timestamp.before.max.ms",
    ),
    with_synonym(
        def(
            MESSAGE_TIMESTAMP_TYPE,
            Kind::String,
            "CreateTime",
            Valid::OneOf(&["CreateTime", "LogAppendTime"]),
        ),
        "log.message.timestamp.type",
    ),
    with_synonym(
        def(
            MIN_CLEANABLE_DIRTY_RATIO,
            Kind::Double,
            "0.5",
            Valid::Between(0.0, 1.0),
        ),
        "log.cleaner.min.cleanable.ratio",
    ),
    with_synonym(
        def(MIN_COMPACTION_LAG_MS, Kind::Long, "0", Valid::AtLeast(0)),
        "log.cleaner.min.compaction.lag.ms",
    ),
    with_synonym(
        def("min.insync.replicas", Kind::Int, "1", Valid::AtLeast(1)),
        "min.insync.replicas",
    ),
    with_synonym(
        def("preallocate", Kind::Boolean, "false", Valid::Any),
        "log.preallocate",
    ),
    def(
        "remote.log.copy.disable",
        Kind::Boolean,
        "false",
        Valid::Any,
    ),
    def(
        "remote.log.delete.on.disable",
        Kind::Boolean,
        "false",
        Valid::Any,
    ),
    def(REMOTE_STORAGE_ENABLE, Kind::Boolean, "false", Valid::Any),
    with_synonym(
        def(RETENTION_BYTES, Kind::Long, "-1", Valid::Any),
        "log.retention.bytes",
    ),
    with_synonym(
        def(RETENTION_MS, Kind::Long, "604800000", Valid::AtLeast(-1)),
        "log.retention.ms",
    ),
    with_synonym(
        def(
            SEGMENT_BYTES,
            Kind::Int,
            "1073741824",
            Valid::AtLeast(1 << 20),
        ),
        "log.segment.bytes",
    ),
    with_synonym(
        def(
            "segment.index.bytes",
            Kind::Int,
            "10485760",
            Valid::AtLeast(4),
        ),
        "log.index.size.max.bytes",
    ),
    with_synonym(
        def("segment.jitter.ms", Kind::Long, "0", Valid::AtLeast(0)),
        "log.roll.jitter.ms",
    ),
    with_synonym(
        def(SEGMENT_MS, Kind::Long, "604800000", Valid::AtLeast(1)),
        "log.roll.ms",
    ),
    with_synonym(
        def(
            "unclean.leader.election.enable",
            Kind::Boolean,
            "false",
            Valid::Any,
        ),
        "unclean.leader.election.enable",
    ),
];

/// The config of that name, internal ones included.
pub fn lookup(name: &str) -> Option<&'static Def> {
    DEFS.binary_search_by(|d| d.name.cmp(name))
        .ok()
        .map(|at| &DEFS[at])
}

fn invalid(message: String) -> TopicError {
    TopicError::new(ResponseError::InvalidConfig, message)
}

/// Kafka's `ConfigException` message: "Invalid value V for configuration N: why".
fn refused(def: &Def, value: &str, why: &str) -> TopicError {
    invalid(format!(
        "Invalid value {value} for configuration {}: {why}",
        def.name
    ))
}

/// Checks one value as Kafka's `ConfigDef` parses and validates it (numbers and strings
/// trimmed, lists split at commas).
pub fn check_value(def: &Def, value: &str) -> Result<(), TopicError> {
    let trimmed = value.trim();
    let number = |value: &str| -> Result<i64, TopicError> {
        let parsed = match def.kind {
            Kind::Int => trimmed.parse::<i32>().map(i64::from).ok(),
            _ => trimmed.parse::<i64>().ok(),
        };
        parsed.ok_or_else(|| {
            refused(
                def,
                value,
                &format!("Not a number of type {}", def.kind.name()),
            )
        })
    };
    match def.kind {
        Kind::Boolean => {
            if !trimmed.eq_ignore_ascii_case("true") && !trimmed.eq_ignore_ascii_case("false") {
                return Err(refused(
                    def,
                    value,
                    "Expected value to be either true or false",
                ));
            }
        }
        Kind::Int | Kind::Long => {
            let n = number(value)?;
            match def.valid {
                Valid::AtLeast(min) if n < min => {
                    return Err(refused(
                        def,
                        value,
                        &format!("Value must be at least {min}"),
                    ));
                }
                Valid::Level { min, max, also } if also != Some(n) && !(min..=max).contains(&n) => {
                    let or = also.map_or(String::new(), |a| format!(", or {a}"));
                    return Err(refused(
                        def,
                        value,
                        &format!("Value must be between {min} and {max}{or}"),
                    ));
                }
                _ => {}
            }
        }
        Kind::Double => {
            let x: f64 = trimmed
                .parse()
                .map_err(|_| refused(def, value, "Not a number of type DOUBLE"))?;
            if let Valid::Between(min, max) = def.valid {
                if x < min {
                    return Err(refused(
                        def,
                        value,
                        &format!("Value must be at least {min:?}"),
                    ));
                }
                if x > max {
                    return Err(refused(
                        def,
                        value,
                        &format!("Value must be no more than {max:?}"),
                    ));
                }
            }
        }
        Kind::String => {
            if let Valid::OneOf(allowed) = def.valid {
                if !allowed.contains(&trimmed) {
                    let why = format!("String must be one of: {}", allowed.join(", "));
                    return Err(refused(def, trimmed, &why));
                }
            }
        }
        Kind::List => {
            let items = list(trimmed);
            match def.valid {
                Valid::ListOf(allowed) => {
                    if let Some(bad) = items.iter().find(|i| !allowed.contains(i)) {
                        let why = format!("String must be one of: {}", allowed.join(", "));
                        return Err(refused(def, bad, &why));
                    }
                }
                Valid::ThrottledReplicas => {
                    let pair = |i: &&str| {
                        i.split_once(':').is_some_and(|(p, b)| {
                            p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok()
                        })
                    };
                    let wildcard = items.len() == 1 && items[0] == "*";
                    if !wildcard && !items.iter().all(pair) {
                        return Err(refused(
                            def,
                            value,
                            "Value should be either '*' or a list of 'partitionId:brokerId' pairs",
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The longest config name or value Kafka can carry: every string of its protocol and of its
/// metadata records (a config lives in a `ConfigRecord`) is at most 32,767 UTF-8 bytes, and its
/// generated code refuses a longer one (`MessageDataGenerator`: "too long to be serialized").
pub const MAX_VALUE_BYTES: usize = 0x7fff;

/// A config name or value of `len` bytes is refused past [`MAX_VALUE_BYTES`], before anything
/// else is done with it.
pub fn check_value_len(name: &str, len: usize) -> Result<(), TopicError> {
    if len > MAX_VALUE_BYTES {
        return Err(TopicError::new(
            ResponseError::InvalidRequest,
            format!(
                "The value of {name} would be {len} bytes long, above the {MAX_VALUE_BYTES} \
                 bytes a Kafka string can hold."
            ),
        ));
    }
    Ok(())
}

/// A LIST value's elements, as Kafka splits them (an empty string is an empty list).
pub fn list(value: &str) -> Vec<&str> {
    if value.trim().is_empty() {
        return Vec::new();
    }
    value.split(',').map(str::trim).collect()
}

/// Checks a topic's whole set of configs: every name known, every value valid, and Kafka's
/// checks across configs.
pub fn validate(configs: &BTreeMap<String, String>) -> Result<(), TopicError> {
    for (name, value) in configs {
        check_value_len("a config name", name.len())?;
        check_value_len(name, value.len())?;
        let def =
            lookup(name).ok_or_else(|| invalid(format!("Unknown topic config name: {name}")))?;
        check_value(def, value)?;
    }
    // Kafka's `LogConfig.validateRemoteStorageOnlyIfSystemEnabled`: this broker has no tiered
    // storage, as a Kafka without `remote.log.storage.system.enable`.
    let enabled = |name: &str| {
        configs
            .get(name)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    };
    if enabled(REMOTE_STORAGE_ENABLE) {
        return Err(invalid(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured \
             with remote log storage."
                .to_string(),
        ));
    }
    let long = |name: &str| configs.get(name).and_then(|v| v.trim().parse::<i64>().ok());
    let min_lag = long(MIN_COMPACTION_LAG_MS).unwrap_or(0);
    let max_lag = long(MAX_COMPACTION_LAG_MS).unwrap_or(i64::MAX);
    if min_lag > max_lag {
        return Err(invalid(format!(
            "conflict topic config setting {MIN_COMPACTION_LAG_MS} ({min_lag}) > \
             {MAX_COMPACTION_LAG_MS} ({max_lag})"
        )));
    }
    Ok(())
}

/// What a partition's log does with its topic's configs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogPolicy {
    /// `cleanup.policy` holds `delete`: retention applies.
    pub delete: bool,
    /// `cleanup.policy` holds `compact`: the cleaner keeps the last record of each key, and
    /// records without a key are refused.
    pub compact: bool,
    /// `retention.bytes` (with `delete`); `None` keeps everything (Kafka's -1).
    pub retention_bytes: Option<usize>,
    /// `retention.ms` (with `delete`); `None` keeps everything (Kafka's -1).
    pub retention_ms: Option<i64>,
    /// `message.timestamp.type=LogAppendTime`: the broker stamps each batch with its own time.
    pub log_append_time: bool,
    /// How long the cleaner keeps a tombstone (a record with a null value).
    pub delete_retention_ms: i64,
    /// How long the file of a segment the cleaner replaced stays (`file.delete.delay.ms`).
    pub file_delete_delay_ms: i64,
    /// The cleaner starts on a partition once this share of it has not been cleaned.
    pub min_cleanable_dirty_ratio: f64,
    /// Records younger than this are never cleaned.
    pub min_compaction_lag_ms: i64,
    /// A log whose earliest dirty record is older than this is cleaned whatever its dirty
    /// ratio (`max.compaction.lag.ms`; Kafka's Long.MAX default never is).
    pub max_compaction_lag_ms: i64,
    /// `max.message.bytes` when the topic sets it: the largest batch Produce accepts. `None`
    /// leaves the broker's `--max-message-bytes` (Kafka's `message.max.bytes`, its synonym).
    pub max_message_bytes: Option<usize>,
    /// KIP-937's window around the broker's clock that a CreateTime record's timestamp must
    /// fall in: `message.timestamp.before.max.ms` before now, `after.max.ms` after it.
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    /// `flush.messages`; `None` when unset (Kafka's Long.MAX): the broker's default applies.
    pub flush_messages: Option<u64>,
    /// `flush.ms`; `None` when unset, as `flush.messages`.
    pub flush_ms: Option<u64>,
    /// `segment.ms`: on disk, how far a batch's timestamp may be past the active segment's
    /// first before a new segment starts.
    pub segment_ms: i64,
    /// `compression.type` when it names a codec (`uncompressed` is [`Compression::None`]), with
    /// the topic's `compression.<codec>.level`: a batch sent in another codec is stored
    /// recompressed into this one. `None` for `producer`: batches are stored as sent.
    pub compression: Option<(Compression, i32)>,
}

impl Default for LogPolicy {
    fn default() -> Self {
        Self::from_configs(&BTreeMap::new())
    }
}

impl LogPolicy {
    /// The policy of validated `configs` (a value that does not parse falls back to Kafka's
    /// default, so a stored topic from before validation still loads).
    pub fn from_configs(configs: &BTreeMap<String, String>) -> Self {
        let value = |name: &str| {
            configs
                .get(name)
                .map(String::as_str)
                .or_else(|| lookup(name).map(|d| d.default))
                .unwrap_or_default()
                .trim()
        };
        let long = |name: &str, fallback: i64| value(name).parse::<i64>().unwrap_or(fallback);
        // Set on the topic and below Long.MAX (Kafka's "never"): a value to apply.
        let set_long = |name: &str| {
            let value = configs.get(name)?.trim().parse::<i64>().ok()?;
            u64::try_from(value).ok().filter(|v| *v < i64::MAX as u64)
        };
        let policies = list(value(CLEANUP_POLICY));
        let delete = policies.contains(&"delete");
        let retention_bytes = usize::try_from(long(RETENTION_BYTES, -1)).ok();
        let retention_ms = Some(long(RETENTION_MS, 604_800_000)).filter(|ms| *ms >= 0);
        Self {
            delete,
            compact: policies.contains(&"compact"),
            retention_bytes: retention_bytes.filter(|_| delete),
            retention_ms: retention_ms.filter(|_| delete),
            log_append_time: value(MESSAGE_TIMESTAMP_TYPE) == "LogAppendTime",
            delete_retention_ms: long(DELETE_RETENTION_MS, 86_400_000),
            file_delete_delay_ms: long(FILE_DELETE_DELAY_MS, 60_000),
            min_cleanable_dirty_ratio: value(MIN_CLEANABLE_DIRTY_RATIO).parse().unwrap_or(0.5),
            min_compaction_lag_ms: long(MIN_COMPACTION_LAG_MS, 0),
            max_compaction_lag_ms: long(MAX_COMPACTION_LAG_MS, i64::MAX),
            max_message_bytes: configs
                .get(MAX_MESSAGE_BYTES)
                .and_then(|v| v.trim().parse::<usize>().ok()),
            timestamp_before_max_ms: long(MESSAGE_TIMESTAMP_BEFORE_MAX_MS, i64::MAX),
            timestamp_after_max_ms: long(MESSAGE_TIMESTAMP_AFTER_MAX_MS, 3_600_000),
            flush_messages: set_long(FLUSH_MESSAGES),
            flush_ms: set_long(FLUSH_MS),
            segment_ms: long(SEGMENT_MS, 604_800_000),
            compression: codec(value(COMPRESSION_TYPE)).map(|codec| {
                let level = format!("compression.{}.level", codec.name());
                (codec, long(&level, 0).try_into().unwrap_or(0))
            }),
        }
    }
}

/// The codec a `compression.type` names; `None` for `producer`.
fn codec(compression_type: &str) -> Option<Compression> {
    match compression_type {
        "uncompressed" => Some(Compression::None),
        "gzip" => Some(Compression::Gzip),
        "snappy" => Some(Compression::Snappy),
        "lz4" => Some(Compression::Lz4),
        "zstd" => Some(Compression::Zstd),
        _ => None,
    }
}

/// The segment size a topic's configs ask for: `internal.segment.bytes` (Kafka's way for tests
/// to go below the 1 MiB minimum), else `segment.bytes`; `None` when neither is set.
pub fn segment_bytes(configs: &BTreeMap<String, String>) -> Option<u64> {
    [INTERNAL_SEGMENT_BYTES, SEGMENT_BYTES]
        .iter()
        .find_map(|name| configs.get(*name)?.trim().parse::<u64>().ok())
        .filter(|bytes| *bytes > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn message(pairs: &[(&str, &str)]) -> String {
        let err = validate(&configs(pairs)).unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidConfig);
        err.message
    }

    #[test]
    fn the_table_is_sorted_so_lookups_find_every_name() {
        assert!(DEFS.windows(2).all(|w| w[0].name < w[1].name));
        for d in DEFS {
            assert!(std::ptr::eq(lookup(d.name).unwrap(), d));
            if !d.internal {
                check_value(d, d.default).unwrap_or_else(|e| panic!("{}: {e}", d.name));
            }
        }
        assert!(lookup("bogus.key").is_none());
    }

    #[test]
    fn names_and_values_are_refused_with_kafkas_messages() {
        assert_eq!(
            message(&[("bogus.key", "1")]),
            "Unknown topic config name: bogus.key"
        );
        assert_eq!(
            message(&[("retention.bytes", "1MB")]),
            "Invalid value 1MB for configuration retention.bytes: Not a number of type LONG"
        );
        assert_eq!(
            message(&[("retention.ms", "-2")]),
            "Invalid value -2 for configuration retention.ms: Value must be at least -1"
        );
        assert_eq!(
            message(&[("segment.bytes", "4096")]),
            "Invalid value 4096 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(
            message(&[("segment.bytes", "3000000000")]),
            "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"
        );
        assert_eq!(
            message(&[("message.timestamp.type", "Now")]),
            "Invalid value Now for configuration message.timestamp.type: String must be one of: \
             CreateTime, LogAppendTime"
        );
        assert_eq!(
            message(&[("cleanup.policy", "compact,forever")]),
            "Invalid value forever for configuration cleanup.policy: String must be one of: \
             compact, delete"
        );
        assert_eq!(
            message(&[("preallocate", "yes")]),
            "Invalid value yes for configuration preallocate: Expected value to be either true \
             or false"
        );
        assert_eq!(
            message(&[("min.cleanable.dirty.ratio", "1.5")]),
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no \
             more than 1.0"
        );
        assert_eq!(
            message(&[
                ("min.compaction.lag.ms", "10"),
                ("max.compaction.lag.ms", "5")
            ]),
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
        );
        validate(&configs(&[
            ("cleanup.policy", "compact, delete"),
            ("retention.bytes", "-1"),
            ("retention.ms", " 60000 "),
            ("internal.segment.bytes", "4096"),
            ("leader.replication.throttled.replicas", "0:1,1:1"),
            ("compression.gzip.level", "-1"),
        ]))
        .unwrap();
    }

    #[test]
    fn the_policy_follows_the_configs() {
        let default = LogPolicy::default();
        assert!(default.delete && !default.compact && !default.log_append_time);
        assert_eq!(default.retention_ms, Some(604_800_000));
        assert_eq!(default.retention_bytes, None);
        assert_eq!(default.max_compaction_lag_ms, i64::MAX);
        let compacted = LogPolicy::from_configs(&configs(&[
            ("cleanup.policy", "compact"),
            ("retention.bytes", "1000"),
            ("message.timestamp.type", "LogAppendTime"),
        ]));
        assert!(compacted.compact && !compacted.delete && compacted.log_append_time);
        // Retention belongs to the delete policy.
        assert_eq!(
            (compacted.retention_bytes, compacted.retention_ms),
            (None, None)
        );
        let both = LogPolicy::from_configs(&configs(&[
            ("cleanup.policy", "compact,delete"),
            ("retention.ms", "-1"),
        ]));
        assert!(both.compact && both.delete);
        assert_eq!(both.retention_ms, None);
        // Unset, or Kafka's Long.MAX ("never"): the broker's default applies.
        assert_eq!((default.flush_messages, default.flush_ms), (None, None));
        let flush = |messages: &str, ms: &str| {
            let policy = LogPolicy::from_configs(&configs(&[
                ("flush.messages", messages),
                ("flush.ms", ms),
            ]));
            (policy.flush_messages, policy.flush_ms)
        };
        assert_eq!(flush("1", "250"), (Some(1), Some(250)));
        assert_eq!(flush(LONG_MAX, LONG_MAX), (None, None));
        let compression =
            |pairs: &[(&str, &str)]| LogPolicy::from_configs(&configs(pairs)).compression;
        assert_eq!(default.compression, None);
        assert_eq!(
            compression(&[("compression.type", "uncompressed")]),
            Some((Compression::None, 0))
        );
        assert_eq!(
            compression(&[("compression.type", "gzip")]),
            Some((Compression::Gzip, -1))
        );
        assert_eq!(
            compression(&[
                ("compression.type", "zstd"),
                ("compression.zstd.level", "-5")
            ]),
            Some((Compression::Zstd, -5))
        );
        assert_eq!(
            compression(&[("compression.type", "lz4"), ("compression.zstd.level", "7")]),
            Some((Compression::Lz4, 9))
        );
        assert_eq!(
            segment_bytes(&configs(&[
                ("segment.bytes", "2097152"),
                ("internal.segment.bytes", "4096")
            ])),
            Some(4096)
        );
    }
}
