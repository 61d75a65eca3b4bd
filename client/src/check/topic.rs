//! `check order`: is a topic in order per key? Reads every partition from a start (the
//! beginning, or where a group stands) to the end it had when the check began, reads each keyed
//! record's sequence number, and runs the [`OrderingChecker`] over them.
//!
//! Kafka keeps a key's records in order within one partition only; a consumer reads partitions
//! in whatever interleaving its fetches give. So the records of a key are handed to the checker
//! partition by partition in offset order, and when a key is in several partitions (the topic
//! grew, or a producer routed by something else), the partition holding its newest records first:
//! the order a consumer lagging on the older partition sees, which is how lab `partitions`
//! loses order. A record is then a violation when it arrives while a lower sequence number of
//! its key, still to be read, has not.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let broker = broker::Broker::start(broker::BrokerConfig {
//! #     listen: "127.0.0.1:0".parse()?,
//! #     ..Default::default()
//! # })
//! # .await?;
//! use client::check::{check_order, StartAt};
//! use client::{Admin, Client, ClientConfig, NewTopic, Producer, ProducerConfig, ProducerRecord};
//!
//! let kafka = Client::connect(ClientConfig::new(&broker.addr().to_string())).await?;
//! Admin::new(kafka.clone()).create_topic(&NewTopic::new("events", 1)).await?;
//! let producer = Producer::new(kafka.clone(), ProducerConfig::default())?;
//! for (key, seq) in [("a", "1"), ("b", "1"), ("a", "3"), ("a", "2"), ("b", "2")] {
//!     let record = ProducerRecord::new("events").key(key).value(seq);
//!     producer.send_and_wait(record).await?;
//! }
//! let report = check_order(&kafka, "events", &"value".parse()?, &StartAt::Beginning).await?;
//! assert_eq!((report.records, report.keys), (5, 2));
//! let found: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
//! assert_eq!(found, ["a: version 3 read from events-0@2 before version 2, written to events-0@3"]);
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

use super::{Numbering, OrderingChecker, Position, Violation};
use crate::admin::Admin;
use crate::client::Client;
use crate::consumer::{Consumer, ConsumerConfig, OffsetReset, SeekTo, TopicPartition};
use crate::error::{Error, Result};
use crate::offsets::{list_offsets, OffsetSpec};
use crate::record::Record;

/// Where a record carries its sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeqSource {
    /// `header:NAME`: the value of header NAME (the first, if it repeats), as decimal text.
    Header(String),
    /// `json:FIELD`: a field of the JSON value (`a.b` for a nested one), a number or a string of
    /// digits.
    Json(String),
    /// `value`: the whole value, as decimal text.
    Value,
}

impl FromStr for SeqSource {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad = || format!("bad sequence source '{s}': use header:NAME, json:FIELD or value");
        match s.split_once(':') {
            None if s == "value" => Ok(Self::Value),
            Some(("header", name)) if !name.is_empty() => Ok(Self::Header(name.to_string())),
            Some(("json", field)) if !field.is_empty() => Ok(Self::Json(field.to_string())),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for SeqSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Header(name) => write!(f, "header:{name}"),
            Self::Json(field) => write!(f, "json:{field}"),
            Self::Value => f.write_str("value"),
        }
    }
}

impl SeqSource {
    /// The record's sequence number, or why it has none.
    pub fn read(&self, record: &Record) -> std::result::Result<i64, String> {
        match self {
            Self::Header(name) => {
                let header = record
                    .headers()
                    .find(|h| h.key.as_ref() == name.as_bytes())
                    .ok_or_else(|| format!("no header '{name}'"))?;
                let value = header
                    .value
                    .ok_or_else(|| format!("header '{name}' is null"))?;
                decimal(&value).ok_or_else(|| {
                    format!(
                        "header '{name}' is '{}', not a whole number",
                        String::from_utf8_lossy(&value)
                    )
                })
            }
            Self::Value => {
                let value = record.value.as_deref().ok_or("the value is null")?;
                decimal(value).ok_or_else(|| {
                    format!(
                        "the value '{}' is not a whole number",
                        String::from_utf8_lossy(value)
                    )
                })
            }
            Self::Json(field) => {
                let value = record.value.as_deref().ok_or("the value is null")?;
                let doc: serde_json::Value = serde_json::from_slice(value)
                    .map_err(|e| format!("the value is not JSON: {e}"))?;
                let found = field
                    .split('.')
                    .try_fold(&doc, |at, name| at.get(name))
                    .ok_or_else(|| format!("no field '{field}' in the value"))?;
                match found {
                    serde_json::Value::Number(n) => n.as_i64(),
                    serde_json::Value::String(s) => decimal(s.as_bytes()),
                    _ => None,
                }
                .ok_or_else(|| format!("field '{field}' is {found}, not a whole number"))
            }
        }
    }
}

fn decimal(text: &[u8]) -> Option<i64> {
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// Where the check starts reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartAt {
    /// Every partition's log start.
    Beginning,
    /// Where the group stands: its committed offset, or the log start where it committed none
    /// (nothing there was consumed yet). A group that does not exist is
    /// [`Error::UnknownGroup`].
    Committed(String),
}

/// What a check read and found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OrderReport {
    pub topic: String,
    /// Keyed records checked.
    pub records: u64,
    /// Records without a key: no order to keep, not checked.
    pub unkeyed: u64,
    /// Distinct keys.
    pub keys: usize,
    /// Records whose key and sequence number repeat one read before.
    pub duplicates: u64,
    /// What was read of each partition.
    pub ranges: Vec<ReadRange>,
    /// Every record read ahead of a lower sequence number of its key, by where it was read.
    pub violations: Vec<Violation>,
    /// Keys with at least one violation.
    pub keys_out_of_order: usize,
}

/// Offsets `from..to` of one partition: from the start asked for to the end when the check
/// began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ReadRange {
    pub partition: i32,
    pub from: i64,
    pub to: i64,
}

/// One keyed record as the check keeps it.
struct Read {
    key: String,
    seq: i64,
    offset: i64,
}

/// Reads `topic` from `from` up to its current end and checks per-key order (see the module
/// docs). A keyed record whose sequence number cannot be read fails the check, naming it.
pub async fn check_order(
    client: &Client,
    topic: &str,
    seq: &SeqSource,
    from: &StartAt,
) -> Result<OrderReport> {
    let ranges = ranges(client, topic, from).await?;
    let mut by_partition: BTreeMap<i32, Vec<Read>> = BTreeMap::new();
    let mut unkeyed = 0;
    read(client, topic, &ranges, |partition, record| {
        let Some(key) = record.key.as_deref() else {
            unkeyed += 1;
            return Ok(());
        };
        let seq = seq.read(record).map_err(|reason| {
            Error::InvalidArgument(format!(
                "{topic}-{partition}@{}: {reason} (--seq {seq})",
                record.offset
            ))
        })?;
        by_partition.entry(partition).or_default().push(Read {
            key: key_text(key),
            seq,
            offset: record.offset,
        });
        Ok(())
    })
    .await?;

    let mut checker = OrderingChecker::with_numbering(Numbering::Increasing);
    // Per key: its partitions, each in offset order.
    let mut keys: BTreeMap<&str, BTreeMap<i32, Vec<&Read>>> = BTreeMap::new();
    let mut records = 0;
    for (&partition, reads) in &by_partition {
        for r in reads {
            records += 1;
            checker.written(&r.key, r.seq, Position::new(topic, partition, r.offset));
            keys.entry(&r.key)
                .or_default()
                .entry(partition)
                .or_default()
                .push(r);
        }
    }
    for (key, partitions) in keys {
        let mut order: Vec<(i32, Vec<&Read>)> = partitions.into_iter().collect();
        // The partition whose first record is newest comes first; ties by partition number.
        order.sort_by_key(|(p, reads)| (std::cmp::Reverse(reads[0].seq), *p));
        for (partition, reads) in order {
            for r in reads {
                checker.arrived(key, r.seq, Position::new(topic, partition, r.offset));
            }
        }
    }
    let mut violations = checker.violations().to_vec();
    violations.sort_by_key(|v| (v.arrived_at.partition, v.arrived_at.offset));
    Ok(OrderReport {
        topic: topic.to_string(),
        records,
        unkeyed,
        keys: checker.keys(),
        duplicates: checker.duplicates(),
        ranges,
        violations,
        keys_out_of_order: checker.keys_out_of_order(),
    })
}

/// A key as text: UTF-8 as it is, other bytes in hex.
fn key_text(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) => text.to_string(),
        Err(_) => {
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
    }
}

/// Every partition of `topic`: from the start asked for, to the log end now.
async fn ranges(client: &Client, topic: &str, from: &StartAt) -> Result<Vec<ReadRange>> {
    let info = client.topic(topic, false).await?;
    let asks = |spec| -> Vec<(i32, OffsetSpec)> {
        info.partitions
            .iter()
            .map(|p| (p.partition, spec))
            .collect()
    };
    let starts = list_offsets(client, topic, &asks(OffsetSpec::Earliest)).await?;
    let ends = list_offsets(client, topic, &asks(OffsetSpec::Latest)).await?;
    let committed: HashMap<i32, i64> = match from {
        StartAt::Beginning => HashMap::new(),
        StartAt::Committed(group) => {
            let admin = Admin::new(client.clone());
            // A typo in the group would otherwise read from the beginning and pass.
            if admin.describe_group(group).await?.state == "Dead" {
                return Err(Error::UnknownGroup {
                    group: group.clone(),
                });
            }
            let partitions: Vec<TopicPartition> = info
                .partitions
                .iter()
                .map(|p| TopicPartition::new(topic, p.partition))
                .collect();
            admin
                .list_group_offsets(group, Some(&partitions))
                .await?
                .into_iter()
                .filter_map(|(tp, offset)| Some((tp.partition, offset?)))
                .collect()
        }
    };
    starts
        .iter()
        .zip(&ends)
        .map(|(start, end)| {
            let committed = committed.get(&start.partition).copied();
            if let (StartAt::Committed(group), Some(c)) = (from, committed) {
                // Starting at the log end instead would check nothing and pass.
                if c > end.offset {
                    return Err(Error::InvalidArgument(format!(
                        "{topic}-{}: group {group}'s committed offset {c} is past the log end {}: \
                         no consumer can have read that far (the log was truncated under the \
                         group, or the broker reports a wrong end), so what it has yet to read \
                         is unknown",
                        start.partition, end.offset
                    )));
                }
            }
            // Retention may have removed what the group had yet to read: the rest is read.
            let from = committed.map_or(start.offset, |c| c.max(start.offset));
            Ok(ReadRange {
                partition: start.partition,
                from,
                to: end.offset,
            })
        })
        .collect()
}

/// Hands every record of `ranges` to `each`, partition by partition in offset order.
async fn read(
    client: &Client,
    topic: &str,
    ranges: &[ReadRange],
    mut each: impl FnMut(i32, &Record) -> Result<()>,
) -> Result<()> {
    let wanted: Vec<&ReadRange> = ranges.iter().filter(|r| r.from < r.to).collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let config = ConsumerConfig {
        // Retention may remove the start meanwhile; what is left is read.
        auto_offset_reset: OffsetReset::Earliest,
        max_wait: std::time::Duration::from_millis(100),
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(client.clone(), config);
    consumer.assign(
        wanted
            .iter()
            .map(|r| TopicPartition::new(topic, r.partition)),
    );
    for r in &wanted {
        consumer.seek(
            &TopicPartition::new(topic, r.partition),
            SeekTo::Offset(r.from),
        )?;
    }
    let ends: HashMap<i32, i64> = wanted.iter().map(|r| (r.partition, r.to)).collect();
    let done = |consumer: &Consumer| {
        ends.iter().all(|(p, end)| {
            consumer
                .position(&TopicPartition::new(topic, *p))
                .is_some_and(|at| at >= *end)
        })
    };
    while !done(&consumer) {
        for part in consumer.poll().await? {
            let end = ends.get(&part.partition).copied().unwrap_or(0);
            for record in part.records() {
                let record = record?;
                if record.offset < end {
                    each(part.partition, &record)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_print_back() {
        for text in ["header:seq", "json:meta.seq", "value"] {
            assert_eq!(text.parse::<SeqSource>().unwrap().to_string(), text);
        }
        for bad in ["header:", "json", "seq", "body:x"] {
            assert!(bad.parse::<SeqSource>().is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_that_are_not_text_print_in_hex() {
        assert_eq!(key_text(b"order-1"), "order-1");
        assert_eq!(key_text(&[0xff, 0x01]), "0xff01");
    }
}
