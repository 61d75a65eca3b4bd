//! `consume`: one consumer reads a full partition from offset 0 to its end (performance.md
//! C.2), records of 100 B and 1 KiB stored in batches of 16 KiB (Kafka's default batch size, so
//! each 1 MiB fetch answer is many stored batches) and of 1 MiB (one stored batch per answer).
//! Every record is decoded and its value length summed, so lazy decoding cannot skip work. The
//! client checks batch CRCs, as Kafka's consumer does by default; for 1 KiB records in 1 MiB
//! batches it also reads with `check.crcs=false`, to show what checking costs (C.3: at most
//! 5 %). The ceiling is the raw 1 MiB fetch, one request in flight,
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
            // C.3 asks what checking CRCs costs: measured once, on the main shape.
            let crc_settings: &[bool] = if (record, stored_batch) == (1024, 1 << 20) {
                &[false, true]
            } else {
                &[true]
            };
            let topic = cluster.create_topic("consume", 1, &[]).await?;
            let measured = fill_and_read(
                &mut cluster,
                &topic,
                record,
                stored_batch,
                crc_settings,
                &bench.plan,
            )
            .await
            .map_err(|e| BenchError::new(format!("{label}: {e}")));
            cluster.delete_topic(&topic).await;
            let mut unchecked_median = None;
            for reads in measured? {
                let label = if reads.check_crcs {
                    label.clone()
                } else {
                    format!("{label}, CRC not checked")
                };
                let mut figure = Figure::new("consume", label, "MiB/s");
                figure.params = with_target(
                    json!({
                        "record_bytes": record,
                        "stored_batch_bytes": stored_batch,
                        "partition_max_bytes": FETCH_BYTES,
                        "records_in_partition": reads.stored,
                        "crc_checked": reads.check_crcs,
                    }),
                    &bench.plan,
                );
                figure.runs = reads.mib;
                figure.ceiling = Some(ceiling.clone());
                figure.broker = reads.broker;
                let records_per_s = reads.records.median();
                figure
                    .extra("records_per_s", sig(records_per_s))
                    .extra("client_cpu_s", sig(reads.client_cpu));
                if !reads.check_crcs {
                    unchecked_median = Some(figure.median());
                    bench.reporter.emit(&figure);
                    continue;
                }
                let mut goals = vec![if record >= 1024 {
                    Goal::ratio_at_least(figure.ratio(), 0.5)
                } else {
                    Goal::at_least(records_per_s, 4e6, "records/s")
                }];
                if let Some(unchecked) = unchecked_median.filter(|u| *u > 0.0) {
                    let cost = 100.0 * (1.0 - figure.median() / unchecked);
                    figure.extra("crc_cost_percent", sig(cost));
                    goals.push(Goal::at_most(cost, 5.0, "% for CRCs"));
                }
                figure.goal = Some(Goal::all(goals));
                bench.reporter.emit(&figure);
            }
        }
    }
    Ok(())
}

/// One consumer's reads of the filled partition.
struct Reads {
    check_crcs: bool,
    /// MiB/s of values and records/s of the measured runs.
    mib: Runs,
    records: Runs,
    /// Records in the partition.
    stored: i64,
    /// The client's CPU seconds over all the reads.
    client_cpu: f64,
    broker: Option<serde_json::Value>,
}

/// Fills the partition (not timed), then, for each CRC setting, reads it from the start once
/// per scheduled run with a consumer so configured.
async fn fill_and_read(
    cluster: &mut Cluster,
    topic: &str,
    record: usize,
    stored_batch: usize,
    crc_settings: &[bool],
    plan: &Plan,
) -> Result<Vec<Reads>, BenchError> {
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
    let mut all = Vec::new();
    for &check_crcs in crc_settings {
        let mut consumer = Consumer::new(
            client.clone(),
            ConsumerConfig {
                partition_max_bytes: FETCH_BYTES,
                check_crcs,
                ..ConsumerConfig::default()
            },
        );
        consumer.assign([tp.clone()]);
        // One untimed fetch of the last record: connection, version negotiation and metadata
        // are set up before the clock starts.
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
        all.push(Reads {
            check_crcs,
            mib,
            records,
            stored: end,
            client_cpu: own_cpu_s() - client_cpu,
            broker: cluster.usage_since_last(),
        });
    }
    Ok(all)
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
