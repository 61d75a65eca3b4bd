//! `client produce TOPIC`: one record per stdin line, as kcat -P; a summary on stderr.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Args;
use client::record::Header;
use client::{Acks, Client, Compression, DeliveryFuture, Error, Producer, ProducerConfig};
use client::{ProducerRecord, RecordMetadata};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use super::report::explain;
use super::words::count;
use super::{Failure, Waited, Waiting};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  printf 'order-1:paid\\norder-2:new\\n' | client produce orders -K :
  seq 1000 | client produce numbers --partition 0 --acks 1 --compression zstd
  echo '{\"id\":1}' | client produce events -H source=billing -H trace")]
pub struct ProduceArgs {
    /// Topic to write to
    pub topic: String,
    /// Split each line at the first DELIM into key and value (kcat -K); lines without it get no key
    #[arg(short = 'K', long = "key-delimiter", value_name = "DELIM")]
    pub key_delimiter: Option<String>,
    /// A header on every record, NAME=VALUE (NAME alone: a null value); repeatable (kcat -H)
    #[arg(short = 'H', long = "header", value_name = "NAME=VALUE", value_parser = header_arg)]
    pub headers: Vec<(String, Option<String>)>,
    /// Send every record to this partition instead of partitioning by key
    #[arg(short, long, value_name = "P")]
    pub partition: Option<i32>,
    /// Acknowledgements to wait for
    #[arg(long, default_value = "all", value_name = "0|1|all")]
    pub acks: Acks,
    /// Batch compression
    #[arg(
        short = 'z',
        long,
        default_value = "none",
        value_name = "none|gzip|snappy|lz4|zstd"
    )]
    pub compression: Compression,
    /// How long a batch waits for more records
    #[arg(long, default_value_t = 5, value_name = "MS")]
    pub linger_ms: u64,
    /// Bytes per batch before it is sent
    #[arg(long, default_value_t = 16384, value_name = "BYTES")]
    pub batch_size: usize,
}

/// Delivery results, counted as they arrive.
#[derive(Default)]
struct Tally {
    per_partition: BTreeMap<i32, u64>,
    failed: u64,
    first_error: Option<Error>,
}

impl Tally {
    fn record(&mut self, partition: i32, result: client::Result<RecordMetadata>) {
        match result {
            Ok(_) => *self.per_partition.entry(partition).or_default() += 1,
            Err(e) => {
                self.failed += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    fn delivered(&self) -> u64 {
        self.per_partition.values().sum()
    }

    fn summary(&self, topic: &str, acks: Acks, took: Duration) -> String {
        let parts: Vec<String> = self
            .per_partition
            .iter()
            .map(|(p, n)| format!("partition {p}: {n}"))
            .collect();
        let mut line = format!(
            "produced {} to {topic} in {:.2} s",
            count(self.delivered(), "record"),
            took.as_secs_f64()
        );
        if !parts.is_empty() {
            line.push_str(&format!(" ({})", parts.join(", ")));
        }
        if acks == Acks::None {
            line.push_str(", unconfirmed (acks=0)");
        }
        line
    }
}

/// kcat's -H: `name=value`, or `name` for a header with a null value.
fn header_arg(s: &str) -> Result<(String, Option<String>), String> {
    let (name, value) = match s.split_once('=') {
        Some((name, value)) => (name, Some(value.to_string())),
        None => (s, None),
    };
    if name.is_empty() {
        return Err(format!("'{s}' has no header name: use NAME=VALUE"));
    }
    Ok((name.to_string(), value))
}

/// kcat's -K: key before the first delimiter, value after; no delimiter, no key.
fn split_key<'a>(line: &'a [u8], delimiter: Option<&[u8]>) -> (Option<&'a [u8]>, &'a [u8]) {
    let Some(d) = delimiter.filter(|d| !d.is_empty()) else {
        return (None, line);
    };
    match line.windows(d.len()).position(|w| w == d) {
        Some(at) => (Some(&line[..at]), &line[at + d.len()..]),
        None => (None, line),
    }
}

pub async fn run(client: Client, args: ProduceArgs, waiting: &Waiting) -> Result<(), Failure> {
    let config = ProducerConfig {
        acks: args.acks,
        linger: Duration::from_millis(args.linger_ms),
        batch_size: args.batch_size,
        compression: args.compression,
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client, config)?;
    let started = Instant::now();
    // Deliveries are counted by a second task while lines are still being read; the bound keeps
    // memory flat on endless input.
    let (tx, mut rx) = mpsc::channel::<DeliveryFuture>(8192);
    let counter = tokio::spawn(async move {
        let mut tally = Tally::default();
        while let Some(delivery) = rx.recv().await {
            let partition = delivery.partition();
            tally.record(partition, delivery.wait().await);
        }
        tally
    });
    let delimiter = args.key_delimiter.as_deref().map(str::as_bytes);
    let headers: Vec<Header<'_>> = args
        .headers
        .iter()
        .map(|(key, value)| Header {
            key,
            value: value.as_deref().map(str::as_bytes),
        })
        .collect();
    let mut input = BufReader::new(tokio::io::stdin());
    let mut line = Vec::with_capacity(4096);
    let mut send_error = None;
    loop {
        line.clear();
        // Ctrl-C or SIGTERM ends the input as its end would: what was sent is still delivered.
        let read = tokio::select! {
            biased;
            _ = waiting.stop.asked() => break,
            read = input.read_until(b'\n', &mut line) => read?,
        };
        if read == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let (key, value) = split_key(&line, delimiter);
        let mut record = ProducerRecord::new(&args.topic)
            .value(value)
            .headers(&headers);
        record.key = key;
        record.partition = args.partition;
        // The send's own error is reported below with the counts; only the wait is bounded here.
        let send = async { Ok::<_, Failure>(producer.send(record).await) };
        let sent = match waiting.on(send).await? {
            Waited::Done(sent) => sent,
            Waited::Stopped => break,
        };
        match sent {
            Ok(delivery) => {
                if tx.send(delivery).await.is_err() {
                    break;
                }
            }
            Err(e) => {
                send_error = Some(e);
                break;
            }
        }
    }
    drop(tx);
    let delivered = async {
        producer.close().await;
        counter
            .await
            .map_err(|e| Failure::new(format!("delivery counting failed: {e}")))
    };
    let tally = waiting.within(delivered).await?;
    // A failure is reported on one line that carries the counts; the summary is for success.
    if let Some(e) = send_error {
        let message = match tally.delivered() {
            0 => explain(&e),
            n => format!("{} (after {} produced)", explain(&e), count(n, "record")),
        };
        return Err(Failure::new(message));
    }
    if let Some(e) = &tally.first_error {
        return Err(Failure::new(format!(
            "{} of {} not delivered: {}",
            tally.failed,
            count(tally.failed + tally.delivered(), "record"),
            explain(e)
        )));
    }
    eprintln!(
        "{}",
        tally.summary(&args.topic, args.acks, started.elapsed())
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_at_the_first_delimiter() {
        assert_eq!(
            split_key(b"k:v:w", Some(b":")),
            (Some(&b"k"[..]), &b"v:w"[..])
        );
        assert_eq!(split_key(b"no-delim", Some(b":")), (None, &b"no-delim"[..]));
        assert_eq!(split_key(b":v", Some(b":")), (Some(&b""[..]), &b"v"[..]));
        assert_eq!(
            split_key(b"a::b", Some(b"::")),
            (Some(&b"a"[..]), &b"b"[..])
        );
        assert_eq!(split_key(b"a:b", None), (None, &b"a:b"[..]));
    }

    #[test]
    fn headers_with_and_without_a_value() {
        assert_eq!(
            header_arg("seq=a=1"),
            Ok(("seq".into(), Some("a=1".into())))
        );
        assert_eq!(header_arg("trace"), Ok(("trace".into(), None)));
        assert_eq!(
            header_arg("empty="),
            Ok(("empty".into(), Some(String::new())))
        );
        assert!(header_arg("=v").is_err());
    }

    #[test]
    fn the_summary_counts_per_partition() {
        let mut t = Tally::default();
        let ok = |p| {
            Ok(RecordMetadata {
                partition: p,
                offset: 0,
                timestamp: 0,
            })
        };
        t.record(2, ok(2));
        t.record(0, ok(0));
        t.record(2, ok(2));
        assert_eq!(
            t.summary("orders", Acks::All, Duration::from_millis(10)),
            "produced 3 records to orders in 0.01 s (partition 0: 1, partition 2: 2)"
        );
        t.record(1, Err(Error::ProducerClosed));
        assert_eq!(t.failed, 1);
        assert!(t
            .summary("o", Acks::None, Duration::ZERO)
            .ends_with("unconfirmed (acks=0)"));
    }
}
