//! `client topics list | describe | create | alter | delete`, printed as kafka-topics.sh does.

use std::io::{self, Write};

use clap::Subcommand;
use client::{Admin, NewTopic, TopicInfo};

use super::Failure;

#[derive(Debug, Subcommand)]
pub enum TopicsVerb {
    /// List topic names, one per line
    #[command(after_help = "Example:\n  client topics list")]
    List,
    /// Describe a topic's partitions, leaders and replicas (every topic when none is named)
    #[command(after_help = "Example:\n  client topics describe orders")]
    Describe { topic: Option<String> },
    /// Create a topic
    #[command(after_help = "Example:\n  client topics create orders --partitions 12")]
    Create {
        topic: String,
        #[arg(short, long, value_name = "N")]
        partitions: i32,
        /// Replicas per partition (default: the broker's)
        #[arg(short, long, value_name = "N", default_value_t = -1, hide_default_value = true)]
        replication_factor: i16,
        /// Topic configuration, repeatable
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = key_value)]
        configs: Vec<(String, String)>,
    },
    /// Grow a topic to N partitions (keys then map to other partitions)
    #[command(after_help = "Example:\n  client topics alter orders --partitions 24")]
    Alter {
        topic: String,
        #[arg(short, long, value_name = "N")]
        partitions: i32,
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
        TopicsVerb::List => {
            let names = admin.list_topics().await?;
            let mut out = stdout.lock();
            for name in names {
                writeln!(out, "{name}")?;
            }
        }
        TopicsVerb::Describe { topic } => {
            let topics = match &topic {
                Some(name) => vec![admin.describe_topic(name).await?],
                None => admin.describe_topics(None).await?,
            };
            let mut out = stdout.lock();
            for t in &topics {
                describe(&mut out, t)?;
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
            admin.create_topic(&new).await?;
            writeln!(stdout.lock(), "Created topic {topic}.")?;
        }
        TopicsVerb::Alter { topic, partitions } => {
            admin.create_partitions(&topic, partitions).await?;
            writeln!(
                stdout.lock(),
                "Topic {topic} now has {partitions} partitions."
            )?;
        }
        TopicsVerb::Delete { topic } => {
            admin.delete_topic(&topic).await?;
            writeln!(stdout.lock(), "Deleted topic {topic}.")?;
        }
    }
    Ok(())
}

/// kafka-topics.sh --describe layout: a topic line, then a tab-indented line per partition.
fn describe(out: &mut impl Write, t: &TopicInfo) -> io::Result<()> {
    let ids = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    write!(out, "Topic: {}", t.name)?;
    if !t.id.is_nil() {
        write!(out, "\tTopicId: {}", kafka_uuid(&t.id))?;
    }
    writeln!(
        out,
        "\tPartitionCount: {}\tReplicationFactor: {}",
        t.partition_count(),
        t.replication_factor()
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
        let mut out = Vec::new();
        describe(&mut out, &t).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Topic: orders\tPartitionCount: 1\tReplicationFactor: 1\n\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n"
        );
        assert_eq!(key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(key_value("ab").is_err());
    }
}
