//! `consume`: one consumer reads a full partition from offset 0 to its end (performance.md
//! C.2), records of 100 B and 1 KiB stored in batches of 16 KiB (Kafka's default batch size, so
//! each 1 MiB fetch answer is many stored batches) and of 1 MiB (one stored batch per answer).
//! Every record is decoded and its value length summed, so lazy decoding cannot skip work; the
//! client always checks batch CRCs. The ceiling is the raw 1 MiB fetch, one request in flight,
//! which is what `max.partition.fetch.bytes` = 1 MiB makes of a one-partition consumer.

use std::time::{Duration, Instant};

use client::{Acks, Consumer, ConsumerConfig, SeekTo, TopicPartition};
use serde_json::json;

use super::cluster::{with_target, Cluster};
use super::host::own_cpu_s;
use super::produce::{produce_once, Variant};
use super::raw::{size_name, Probe};
use super::report::{Figure, Goal};
use super::stats::{sig, Runs};
use super::{Bench, BenchError, Plan};

const FETCH_BYTES: i32 = 1 << 20;

pub async fn run(bench: &mut Bench) -> Result<(), BenchError> {
    let mut cluster = Cluster::start(&bench.plan).await?;
    for record in [1024, 100] {
        for stored_batch in [1 << 20, 16 << 10] {
            let ceiling = bench
                .raw
                .throughput(
                    Probe::Fetch {
                        frame: FETCH_BYTES as usize,
                    },
                    &bench.plan,
                    &mut bench.reporter,
                )
                .await?;
            let label = format!(
                "{} rec, stored in {} batches",
                size_name(record),
                size_name(stored_batch)
            );
            let topic = cluster.create_topic("consume", 1, &[]).await?;
            let measured = fill_and_read(&mut cluster, &topic, record, stored_batch, &bench.plan)
                .await
                .map_err(|e| BenchError::new(format!("{label}: {e}")));
            cluster.delete_topic(&topic).await;
            let (mib, records, stored, client_cpu) = measured?;
            let mut figure = Figure::new("consume", label, "MiB/s");
            figure.params = with_target(
                json!({
                    "record_bytes": record,
                    "stored_batch_bytes": stored_batch,
                    "partition_max_bytes": FETCH_BYTES,
                    "records_in_partition": stored,
                    "crc_checked": true,
                }),
                &bench.plan,
            );
            figure.runs = mib;
            figure.ceiling = Some(ceiling);
            figure.broker = cluster.usage_since_last();
            let records_per_s = records.median();
            figure
                .extra("records_per_s", sig(records_per_s))
                .extra("client_cpu_s", sig(client_cpu));
            figure.goal = Some(if record >= 1024 {
                Goal::ratio_at_least(figure.ratio(), 0.5)
            } else {
                Goal::at_least(records_per_s, 4e6, "records/s")
            });
            bench.reporter.emit(&figure);
        }
    }
    Ok(())
}

/// Fills the partition (not timed), then reads it from the start once per scheduled run:
/// MiB/s and records/s of the measured runs, records in the partition, and the client's CPU
/// seconds over all the reads.
async fn fill_and_read(
    cluster: &mut Cluster,
    topic: &str,
    record: usize,
    stored_batch: usize,
    plan: &Plan,
) -> Result<(Runs, Runs, i64, f64), BenchError> {
    let client = cluster.client().await?;
    let filler = Variant {
        record,
        batch: stored_batch,
        acks: Acks::Leader,
        partitions: 1,
    };
    produce_once(&client, topic, filler, plan).await?;
    let end = cluster.records_in(topic).await?;
    let tp = TopicPartition::new(topic, 0);
    let mut consumer = Consumer::new(
        client,
        ConsumerConfig {
            partition_max_bytes: FETCH_BYTES,
            ..ConsumerConfig::default()
        },
    );
    consumer.assign([tp.clone()]);
    // One untimed fetch of the last record: connection, version negotiation and metadata are
    // set up before the clock starts.
    read(&mut consumer, &tp, end - 1, end, plan.deadline).await?;
    cluster.reset_usage();
    let client_cpu = own_cpu_s();
    let (mut mib, mut records) = (Runs::default(), Runs::default());
    for counts in plan.schedule() {
        let (n, bytes, elapsed) = read(&mut consumer, &tp, 0, end, plan.deadline).await?;
        if counts {
            let secs = elapsed.as_secs_f64().max(1e-9);
            mib.push(bytes as f64 / (1u64 << 20) as f64 / secs);
            records.push(n as f64 / secs);
        }
    }
    Ok((mib, records, end, own_cpu_s() - client_cpu))
}

/// Reads from `from` until `end` (or the deadline): records, value bytes, time taken.
async fn read(
    consumer: &mut Consumer,
    tp: &TopicPartition,
    from: i64,
    end: i64,
    deadline: Duration,
) -> Result<(u64, u64, Duration), BenchError> {
    let failed = |e: client::Error| BenchError::new(format!("consumer: {e}"));
    consumer
        .seek(tp, SeekTo::Offset(from.max(0)))
        .map_err(failed)?;
    let started = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    while consumer.position(tp).unwrap_or(from) < end && started.elapsed() < deadline {
        for part in consumer.poll().await.map_err(failed)? {
            for record in part.records() {
                let record = record.map_err(|e| BenchError::new(format!("consumer: {e}")))?;
                records += 1;
                bytes += record.value.map_or(0, |v| v.len() as u64);
            }
        }
    }
    Ok((records, bytes, started.elapsed()))
}
