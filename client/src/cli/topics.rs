//! `client topics list | describe | create | alter | delete`, printed as kafka-topics.sh does
//! (or as one JSON document with `--format json`); `alter --config` as kafka-configs.sh does.

use std::io::{self, Write};

use clap::Subcommand;
use client::admin::{ConfigChange, ConfigEntry};
use client::{Admin, NewTopic, TopicInfo};
use serde_json::json;

use super::json::{self, Output};
use super::report::{explain_topic_change, TopicChange};
use super::words::count;
use super::Failure;

#[derive(Debug, Subcommand)]
pub enum TopicsVerb {
    /// List topic names, one per line
    #[command(after_help = "Examples:\n  client topics list\n  client topics list --format json")]
    List {
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
    /// Describe a topic's partitions, leaders, replicas and the configs set on it (every topic
    /// when none is named)
    #[command(
        after_help = "Examples:\n  client topics describe orders\n  client topics describe --format json"
    )]
    Describe {
        topic: Option<String>,
        #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
        format: Output,
    },
    /// Create a topic
    #[command(after_help = "Examples:
  client topics create orders --partitions 12
  client topics create audit --partitions -1 --config retention.ms=86400000")]
    Create {
        topic: String,
        /// Partitions; -1: the broker's default (--default-partitions)
        #[arg(short, long, value_name = "N", default_value_t = -1, allow_negative_numbers = true)]
        partitions: i32,
        /// Replicas per partition; -1: the broker's default
        #[arg(
            short,
            long,
            value_name = "N",
            default_value_t = -1,
            allow_negative_numbers = true
        )]
        replication_factor: i16,
        /// Topic configuration, repeatable
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = key_value)]
        configs: Vec<(String, String)>,
    },
    /// Grow a topic to N partitions (keys then map to other partitions), or change its configs
    /// as kafka-configs.sh --alter does (only the configs named change)
    #[command(
        // clap lists the required group in full, past 100 columns.
        override_usage = "client topics alter <TOPIC> (--partitions <N> | --config <KEY=VALUE> |\n         \
                          --delete-config <KEY>)...",
        after_help = "Examples:
  client topics alter orders --partitions 24
  client topics alter orders --config retention.ms=86400000 --delete-config cleanup.policy",
        group(clap::ArgGroup::new("change").required(true).multiple(true)
            .args(["partitions", "configs", "delete_configs"]))
    )]
    Alter {
        topic: String,
        #[arg(short, long, value_name = "N")]
        partitions: Option<i32>,
        /// Set a topic config, repeatable (kafka-configs.sh --add-config)
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = key_value)]
        configs: Vec<(String, String)>,
        /// Remove a config from the topic, back to the broker's default; repeatable
        #[arg(long = "delete-config", value_name = "KEY")]
        delete_configs: Vec<String>,
    },
    /// Delete a topic and its records
    #[command(after_help = "Example:\n  client topics delete orders")]
    Delete { topic: String },
}

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("'{s}' is not KEY=VALUE"))
}

pub async fn run(admin: &Admin, verb: TopicsVerb) -> Result<(), Failure> {
    let stdout = io::stdout();
    match verb {
        TopicsVerb::List { format } => {
            let names = admin.list_topics().await?;
            if format == Output::Json {
                return json::print(&json!({ "topics": names }));
            }
            let mut out = stdout.lock();
            for name in names {
                writeln!(out, "{name}")?;
            }
        }
        TopicsVerb::Describe { topic, format } => {
            let topics = match &topic {
                Some(name) => vec![admin.describe_topic(name).await?],
                None => admin.describe_topics(None).await?,
            };
            let mut described = Vec::with_capacity(topics.len());
            for t in topics {
                let configs = admin.describe_topic_configs(&t.name).await?;
                described.push((t, configs));
            }
            if format == Output::Json {
                let docs: Vec<_> = described.iter().map(|(t, c)| topic_json(t, c)).collect();
                return json::print(&json!({ "topics": docs }));
            }
            let mut out = stdout.lock();
            for (t, configs) in &described {
                describe(&mut out, t, configs)?;
            }
        }
        TopicsVerb::Create {
            topic,
            partitions,
            replication_factor,
            configs,
        } => {
            let new = NewTopic {
                name: topic.clone(),
                partitions,
                replication_factor,
                configs,
            };
            admin
                .create_topic(&new)
                .await
                .map_err(|e| Failure::new(explain_topic_change(&e, TopicChange::Create)))?;
            writeln!(stdout.lock(), "Created topic {topic}.")?;
        }
        TopicsVerb::Alter {
            topic,
            partitions,
            configs,
            delete_configs,
        } => {
            let explained =
                |e: client::Error| Failure::new(explain_topic_change(&e, TopicChange::Alter));
            // Configs first, as kafka-topics.sh did: a refused config leaves the count alone.
            let changes: Vec<ConfigChange> = configs
                .into_iter()
                .map(|(name, value)| ConfigChange::Set { name, value })
                .chain(
                    delete_configs
                        .into_iter()
                        .map(|name| ConfigChange::Delete { name }),
                )
                .collect();
            if !changes.is_empty() {
                admin
                    .alter_topic_configs(&topic, &changes)
                    .await
                    .map_err(explained)?;
                writeln!(
                    stdout.lock(),
                    "Completed updating config for topic {topic}."
                )?;
            }
            if let Some(partitions) = partitions {
                admin
                    .create_partitions(&topic, partitions)
                    .await
                    .map_err(explained)?;
                writeln!(
                    stdout.lock(),
                    "Topic {topic} now has {}.",
                    count(partitions, "partition")
                )?;
            }
        }
        TopicsVerb::Delete { topic } => {
            admin.delete_topic(&topic).await?;
            writeln!(stdout.lock(), "Deleted topic {topic}.")?;
        }
    }
    Ok(())
}

/// kafka-topics.sh --describe layout: a topic line ending with the configs that are not
/// defaults, then a tab-indented line per partition.
fn describe(out: &mut impl Write, t: &TopicInfo, configs: &[ConfigEntry]) -> io::Result<()> {
    let ids = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    write!(out, "Topic: {}", t.name)?;
    if !t.id.is_nil() {
        write!(out, "\tTopicId: {}", kafka_uuid(&t.id))?;
    }
    let set: Vec<String> = configs
        .iter()
        .filter(|c| !c.is_default())
        .map(|c| format!("{}={}", c.name, c.value.as_deref().unwrap_or("null")))
        .collect();
    writeln!(
        out,
        "\tPartitionCount: {}\tReplicationFactor: {}\tConfigs: {}",
        t.partition_count(),
        t.replication_factor(),
        set.join(",")
    )?;
    for p in &t.partitions {
        let leader = if p.leader < 0 {
            "none".to_string()
        } else {
            p.leader.to_string()
        };
        writeln!(
            out,
            "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}",
            t.name,
            p.partition,
            leader,
            ids(&p.replicas),
            ids(&p.isr)
        )?;
    }
    Ok(())
}

/// One topic of `topics describe --format json`, with the configs set on it (name to value).
fn topic_json(t: &TopicInfo, configs: &[ConfigEntry]) -> serde_json::Value {
    let set: serde_json::Map<String, serde_json::Value> = configs
        .iter()
        .filter(|c| !c.is_default())
        .map(|c| (c.name.clone(), json!(c.value)))
        .collect();
    let partitions: Vec<serde_json::Value> = t
        .partitions
        .iter()
        .map(|p| {
            json!({
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": p.replicas,
                "isr": p.isr,
                "offline_replicas": p.offline_replicas,
            })
        })
        .collect();
    json!({
        "name": t.name,
        "id": (!t.id.is_nil()).then(|| kafka_uuid(&t.id)),
        "internal": t.internal,
        "partition_count": t.partition_count(),
        "replication_factor": t.replication_factor(),
        "configs": set,
        "partitions": partitions,
    })
}

/// Kafka prints topic ids as URL-safe base64 without padding (`Uuid.toString()` in Java).
fn kafka_uuid(id: &uuid::Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::admin::ConfigSource;
    use client::PartitionInfo;

    #[test]
    fn topic_ids_print_like_java() {
        // Java: new Uuid(0x0102030405060708L, 0x090a0b0c0d0e0f10L).toString()
        let id = uuid::Uuid::from_bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
        assert_eq!(kafka_uuid(&id), "AQIDBAUGBwgJCgsMDQ4PEA");
    }

    #[test]
    fn describe_looks_like_kafka_topics() {
        let t = TopicInfo {
            name: "orders".into(),
            id: uuid::Uuid::nil(),
            internal: false,
            partitions: vec![PartitionInfo {
                partition: 0,
                leader: 1,
                leader_epoch: 0,
                replicas: vec![1],
                isr: vec![1],
                offline_replicas: vec![],
                error_code: 0,
            }],
        };
        let entry = |name: &str, source| ConfigEntry {
            name: name.into(),
            value: Some("1000".into()),
            source,
            read_only: false,
            sensitive: false,
        };
        let configs = [
            entry("retention.ms", ConfigSource::DynamicTopicConfig),
            entry("segment.ms", ConfigSource::DefaultConfig),
        ];
        let mut out = Vec::new();
        describe(&mut out, &t, &configs).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Topic: orders\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: retention.ms=1000\n\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n"
        );
        let doc = topic_json(&t, &configs);
        assert_eq!(doc["configs"], json!({"retention.ms": "1000"}));
        assert_eq!(doc["partitions"][0]["isr"], json!([1]));
        assert_eq!(key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(key_value("ab").is_err());
    }
}
