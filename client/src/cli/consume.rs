//! `client consume TOPIC`: records to stdout in a kcat-style format, until `--count`, the end of
//! the partitions (`--exit`), Ctrl-C or SIGTERM. With `--group` the work is done by `groups.rs`.
//! A poll that gets no answer within `--timeout` (the broker died) ends it with an error.

use std::io::{self, BufWriter, Write};

use clap::Args;
use client::{Client, Consumer, ConsumerConfig, Error, SeekTo, TopicPartition};

use super::format::Format;
use super::words::count;
use super::{Failure, Waited, Waiting};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  client consume orders --exit
  client consume orders --partition 4 --offset -10 --format '%k => %s (offset %o)\\n'
  client consume orders --offset end --count 1
  client consume orders --group billing
  client consume orders -J --exit")]
pub struct ConsumeArgs {
    /// Topic to read
    pub topic: String,
    /// Partition to read, repeatable (default: all)
    #[arg(short, long = "partition", value_name = "P")]
    pub partitions: Vec<i32>,
    /// Consume as a member of this consumer group (kcat -G): the group's assignor shares out the
    /// partitions and offsets are committed; --offset then only applies without a commit
    #[arg(short = 'G', long, value_name = "GROUP", conflicts_with = "partitions")]
    pub group: Option<String>,
    /// Where to start: beginning, end, N, -N (N before the end) or s@MILLIS
    #[arg(
        short,
        long,
        default_value = "beginning",
        value_name = "OFFSET",
        allow_hyphen_values = true
    )]
    pub offset: SeekTo,
    /// Stop after N records
    #[arg(short, long, value_name = "N")]
    pub count: Option<u64>,
    /// Stop once every partition is read to its end (kcat -e)
    #[arg(short, long)]
    pub exit: bool,
    /// Output format: %t topic, %p partition, %o offset, %k key, %K key length, %s value,
    /// %S value length, %T timestamp, %h headers, %% percent; \n \t escapes
    #[arg(short, long, value_name = "FMT", value_parser = Format::parse)]
    pub format: Option<Format>,
    /// kcat's -J: one JSON envelope per record (topic, partition, offset, ts, headers, key,
    /// payload)
    #[arg(short = 'J', long = "json", conflicts_with = "format")]
    pub json: bool,
    /// Kafka's isolation.level: read_committed reads committed transactions only, up to the
    /// last stable offset (kcat -X isolation.level=read_committed)
    #[arg(long, value_name = "LEVEL", default_value = "read_uncommitted",
          value_parser = ["read_uncommitted", "read_committed"])]
    pub isolation_level: String,
}

impl ConsumeArgs {
    pub fn read_committed(&self) -> bool {
        self.isolation_level == "read_committed"
    }

    /// The format asked for: --format, -J, or the default.
    pub fn output(&self) -> Format {
        if self.json {
            return Format::kcat_json();
        }
        self.format.clone().unwrap_or_else(Format::default_format)
    }
}

pub async fn run(client: Client, args: ConsumeArgs, waiting: &Waiting) -> Result<(), Failure> {
    if let Some(group) = &args.group {
        return super::groups::consume_in_group(client, &args, group, waiting).await;
    }
    let format = args.output();
    let topic = match waiting.on(client.topic(&args.topic, false)).await? {
        Waited::Done(topic) => topic,
        Waited::Stopped => return Ok(()),
    };
    let partitions: Vec<i32> = if args.partitions.is_empty() {
        topic.partitions.iter().map(|p| p.partition).collect()
    } else {
        for &p in &args.partitions {
            if topic.partition(p).is_none() {
                return Err(Error::UnknownPartition {
                    topic: args.topic.clone(),
                    partition: p,
                    count: topic.partition_count(),
                }
                .into());
            }
        }
        args.partitions.clone()
    };
    let config = ConsumerConfig {
        read_committed: args.read_committed(),
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(client, config);
    consumer.assign(
        partitions
            .iter()
            .map(|p| TopicPartition::new(&args.topic, *p)),
    );
    consumer.seek_all(args.offset)?;

    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    let done = |printed: u64| args.count.is_some_and(|n| printed >= n);
    'polling: while !done(printed) {
        let polled = match waiting.on(consumer.poll()).await? {
            Waited::Done(polled) => polled,
            Waited::Stopped => break 'polling,
        };
        for part in &polled {
            for record in part.records() {
                format.write(
                    &mut out,
                    &part.topic,
                    part.partition,
                    &record.map_err(Error::from)?,
                )?;
                printed += 1;
                if done(printed) {
                    break 'polling;
                }
            }
        }
        out.flush()?;
        if args.exit && consumer.at_end() {
            break;
        }
    }
    out.flush()?;
    if args.exit || args.count.is_some() {
        eprintln!("consumed {} from {}", count(printed, "record"), args.topic);
    }
    Ok(())
}
