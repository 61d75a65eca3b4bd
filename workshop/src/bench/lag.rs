//! `lag`: the wall time of describing a group's lag, as kafka-consumer-groups.sh --describe
//! gathers it (DescribeGroups, OffsetFetch of every committed partition, ListOffsets latest),
//! for a group with offsets committed on 1,000 and 10,000 partitions (performance.md C.2). Each
//! partition holds one record and has offset 0 committed, so every row has a lag of 1, which is
//! checked. The ceiling is three raw ping-pong round trips: the requests themselves, without the
//! work that grows with the partition count.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use client::group::coordinator::Coordinator;
use client::group::offsets::{commit_once, CommitAs};
use client::{Acks, Producer, ProducerConfig, ProducerRecord, TopicPartition};
use serde_json::json;

use super::cluster::{with_target, Cluster};
use super::report::{Better, Ceiling, Figure, Goal};
use super::stats::{sig, Runs};
use super::{Bench, BenchError, Plan};

pub async fn run(bench: &mut Bench) -> Result<(), BenchError> {
    let mut cluster = Cluster::start(&bench.plan).await?;
    let raw = bench
        .raw
        .ping_pong(&bench.plan, &mut bench.reporter)
        .await?;
    let mut per_1k = None;
    for partitions in [1_000, 10_000] {
        let topic = cluster.create_topic("lag", partitions, &[]).await?;
        let measured = describe_runs(&mut cluster, &topic, partitions, &bench.plan).await;
        cluster.delete_topic(&topic).await;
        let runs = measured?;
        let mut figure = Figure::new(
            "lag",
            format!("describe group lag, {partitions} partitions"),
            "ms",
        );
        figure.better = Better::Lower;
        figure.params = with_target(json!({"partitions": partitions}), &bench.plan);
        figure.runs = runs;
        figure.ceiling = Some(Ceiling {
            name: "3 raw ping-pong round trips".into(),
            value: 3.0 * raw.p50_us / 1e3,
            unit: "ms",
        });
        figure.broker = cluster.usage_since_last();
        let median = figure.median();
        figure.extra(
            "us_per_partition",
            sig(median * 1e3 / f64::from(partitions)),
        );
        figure.goal = Some(match per_1k {
            None => Goal::at_most(median, 2.0, "ms"),
            Some(small) => {
                // C.3: linear scaling, 10 k / 1 k within 12x.
                let scaling = median / small;
                figure.extra("scaling_vs_1k", sig(scaling));
                Goal::all(vec![
                    Goal::at_most(median, 20.0, "ms"),
                    Goal::at_most(scaling, 12.0, "x the 1k time"),
                ])
            }
        });
        per_1k.get_or_insert(median);
        bench.reporter.emit(&figure);
    }
    Ok(())
}

/// Fills and commits (not timed), then times `group_lag` once per scheduled run.
async fn describe_runs(
    cluster: &mut Cluster,
    topic: &str,
    partitions: i32,
    plan: &Plan,
) -> Result<Runs, BenchError> {
    let group = format!("{topic}-group");
    let client = cluster.client().await?;
    one_record_each(&client, topic, partitions).await?;
    let offsets: BTreeMap<TopicPartition, i64> = (0..partitions)
        .map(|p| (TopicPartition::new(topic, p), 0))
        .collect();
    let coordinator = Coordinator::sharing(&client, &group);
    let refused = commit_once(&coordinator, &CommitAs::NOBODY, &offsets)
        .await
        .map_err(|e| BenchError::new(format!("cannot commit offsets for {group}: {e}")))?;
    if let Some((tp, code)) = refused.first() {
        return Err(BenchError::new(format!(
            "the commit for {group} was refused for {tp} (error code {code})"
        )));
    }
    cluster.reset_usage();
    let mut runs = Runs::default();
    for counts in plan.schedule() {
        let started = Instant::now();
        let lag = tokio::time::timeout(plan.deadline, cluster.admin.group_lag(&group))
            .await
            .map_err(|_| {
                BenchError::new(format!("describing {group} took over {:?}", plan.deadline))
            })?
            .map_err(|e| BenchError::new(format!("cannot describe {group}: {e}")))?;
        let took = started.elapsed();
        if lag.partitions.len() != partitions as usize || lag.total() != i64::from(partitions) {
            return Err(BenchError::new(format!(
                "{group}: {} rows with a total lag of {}, expected {partitions} and {partitions}",
                lag.partitions.len(),
                lag.total()
            )));
        }
        if counts {
            runs.push(took.as_secs_f64() * 1e3);
        }
    }
    Ok(runs)
}

/// One record in every partition, so each log end offset is 1.
async fn one_record_each(
    client: &client::Client,
    topic: &str,
    partitions: i32,
) -> Result<(), BenchError> {
    let failed = |e: client::Error| BenchError::new(format!("cannot fill {topic}: {e}"));
    let producer = Producer::new(
        client.clone(),
        ProducerConfig {
            acks: Acks::Leader,
            // One record per partition: small batches, so 10,000 open batches stay small.
            batch_size: 256,
            linger: Duration::from_millis(5),
            ..ProducerConfig::default()
        },
    )
    .map_err(failed)?;
    let mut deliveries = Vec::with_capacity(partitions as usize);
    for p in 0..partitions {
        let record = ProducerRecord::new(topic).partition(p).value("x");
        deliveries.push(producer.send(record).await.map_err(failed)?);
    }
    for delivery in deliveries {
        delivery.wait().await.map_err(failed)?;
    }
    producer.close().await;
    Ok(())
}
