//! `e2e`: produce 1 KiB records at a fixed rate (1 k, 10 k and 50 k per second; linger 0,
//! acks=1) while a consumer reads them, and time each record from its *scheduled* send time to
//! the moment the consumer has it (performance.md C.2). Timing from the schedule, not from the
//! actual send, keeps a stalled sender from hiding the stall (coordinated omission).
//!
//! The sender is a thread of its own that waits until each record's time and then hands the
//! record to the producer: tokio's timer wheel has 1 ms ticks, which would add up to a
//! millisecond of our own lateness to every record; a thread that sleeps, then yields for the
//! last 150 µs, is on time to a few µs.
//! That lateness is reported too (`pacer_late_*`), and each record also carries the moment it
//! was actually handed to the producer, so `*_from_send_us` shows the latency without it.
//! The ceiling is the raw 64-byte ping-pong of the same placement.

use std::time::{Duration, Instant};

use client::{Acks, Client, Consumer, ConsumerConfig, Producer, ProducerConfig, ProducerRecord};
use client::{SeekTo, TopicPartition};
use serde_json::json;

use super::cluster::{with_target, Cluster};
use super::host::Placement;
use super::raw::PingPong;
use super::report::{Better, Ceiling, Figure, Goal};
use super::stats::{sig, Latency, Runs};
use super::{Bench, BenchError, Plan};

const RECORD: usize = 1024;
const RATES: [u64; 3] = [1_000, 10_000, 50_000];
/// Time between starting the consumer and the first scheduled send.
const LEAD: Duration = Duration::from_millis(20);
/// How far ahead of a record's due time the sender stops sleeping and starts yielding.
const SPIN: Duration = Duration::from_micros(150);

pub async fn run(bench: &mut Bench) -> Result<(), BenchError> {
    let mut cluster = Cluster::start(&bench.plan).await?;
    let raw = bench
        .raw
        .ping_pong(&bench.plan, &mut bench.reporter)
        .await?;
    let duration = Duration::from_millis(if bench.plan.quick { 500 } else { 3_000 });
    for rate in RATES {
        let label = format!("1 KiB at {rate}/s, p50 from schedule");
        let topic = cluster.create_topic("e2e", 1, &[]).await?;
        cluster.reset_usage();
        let measured = measure(&cluster, &topic, rate, duration, &bench.plan)
            .await
            .map_err(|e| BenchError::new(format!("{label}: {e}")));
        cluster.delete_topic(&topic).await;
        let runs = measured?;
        let mut figure = Figure::new("e2e", label, "us");
        figure.better = Better::Lower;
        figure.params = with_target(
            json!({
                "record_bytes": RECORD,
                "rate_per_s": rate,
                "seconds_per_run": duration.as_secs_f64(),
                "acks": "1",
                "linger_ms": 0,
                "batch_bytes": 16 << 10,
            }),
            &bench.plan,
        );
        figure.runs = runs.p50.clone();
        figure.ceiling = Some(Ceiling {
            name: "raw ping-pong 64 B p50".into(),
            value: raw.p50_us,
            unit: "us",
        });
        figure.broker = cluster.usage_since_last();
        let p99 = runs.p99.median();
        figure
            .extra("p99_us", sig(p99))
            .extra("p99_9_us", sig(runs.p99_9.median()))
            .extra("max_us", sig(runs.max.max()))
            .extra("p99_ratio", sig(p99 / raw.p99_us))
            .extra("raw_p99_us", sig(raw.p99_us))
            .extra("lost", json!(runs.lost))
            .extra("p50_from_send_us", sig(runs.sent_p50.median()))
            .extra("p99_from_send_us", sig(runs.sent_p99.median()))
            .extra("pacer_late_p50_us", sig(runs.late_p50.median()))
            .extra("pacer_late_p99_us", sig(runs.late_p99.median()));
        figure.goal = goal(rate, bench.plan.placement, &figure, raw, p99, runs.lost);
        bench.reporter.emit(&figure);
    }
    Ok(())
}

/// C.3: at 10 k/s the Goal column for pinned placements (the Must column when unpinned); at
/// 50 k/s no loss and p99 within 1 ms.
fn goal(
    rate: u64,
    placement: Placement,
    figure: &Figure,
    raw: PingPong,
    p99: f64,
    lost: u64,
) -> Option<Goal> {
    let p50 = figure.median();
    match rate {
        10_000 => Some(match placement {
            Placement::Same | Placement::Split => {
                let p99_max = if placement == Placement::Same {
                    250.0
                } else {
                    500.0
                };
                Goal::all(vec![
                    Goal::at_most(p50, (4.0 * raw.p50_us).round(), "us p50 (4x raw)"),
                    Goal::at_most(p99, p99_max, "us p99"),
                ])
            }
            Placement::None => Goal::all(vec![
                Goal::at_most(p50, 250.0, "us p50"),
                Goal::at_most(p99, 1000.0, "us p99"),
            ]),
        }),
        50_000 => Some(Goal::all(vec![
            Goal::at_most(lost as f64, 0.0, "lost"),
            Goal::at_most(p99, 1000.0, "us p99"),
        ])),
        _ => None,
    }
}

#[derive(Default)]
struct E2eRuns {
    p50: Runs,
    p99: Runs,
    p99_9: Runs,
    max: Runs,
    sent_p50: Runs,
    sent_p99: Runs,
    late_p50: Runs,
    late_p99: Runs,
    lost: u64,
}

async fn measure(
    cluster: &Cluster,
    topic: &str,
    rate: u64,
    duration: Duration,
    plan: &Plan,
) -> Result<E2eRuns, BenchError> {
    let client = cluster.client().await?;
    let producer = Producer::new(
        client.clone(),
        ProducerConfig {
            acks: Acks::Leader,
            linger: Duration::ZERO,
            ..ProducerConfig::default()
        },
    )
    .map_err(|e| BenchError::new(e.to_string()))?;
    // Metadata and the producer's connection are set up before any record is timed.
    producer
        .send_and_wait(ProducerRecord::new(topic).value(&[0u8; 8][..]))
        .await
        .map_err(|e| BenchError::new(e.to_string()))?;
    let mut out = E2eRuns::default();
    for counts in plan.schedule() {
        let from = cluster.records_in(topic).await?;
        let run = one_run(&client, &producer, topic, from, rate, duration, plan).await?;
        if counts {
            out.p50.push(run.latency.quantile_us(0.5));
            out.p99.push(run.latency.quantile_us(0.99));
            out.p99_9.push(run.latency.quantile_us(0.999));
            out.max.push(run.latency.max_us());
            out.sent_p50.push(run.from_send.quantile_us(0.5));
            out.sent_p99.push(run.from_send.quantile_us(0.99));
            out.late_p50.push(run.late.quantile_us(0.5));
            out.late_p99.push(run.late.quantile_us(0.99));
            out.lost += run.lost;
        }
    }
    producer.close().await;
    Ok(out)
}

struct OneRun {
    /// From the scheduled send time (C.2's definition).
    latency: Latency,
    /// From the moment the record was handed to the producer.
    from_send: Latency,
    /// How late the sender thread handed records over.
    late: Latency,
    lost: u64,
}

/// When record `seq` is due: `t0 + seq * period`. Both threads share it, so the consumer can
/// tell each record's due time from the sequence number the record carries.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    t0: Instant,
    period: Duration,
}

impl Schedule {
    fn due(self, seq: u64) -> Instant {
        self.t0 + self.period.mul_f64(seq as f64)
    }

    /// A record's value starts with its sequence number, then the nanoseconds from `t0` to the
    /// moment it was handed to the producer.
    fn stamp(self, value: &mut [u8], seq: u64, sent: Instant) {
        let ns = sent.saturating_duration_since(self.t0).as_nanos() as u64;
        value[..8].copy_from_slice(&seq.to_be_bytes());
        value[8..16].copy_from_slice(&ns.to_be_bytes());
    }

    /// `(due, sent)` of a stamped value; `None` for anything shorter.
    fn read(self, value: &[u8]) -> Option<(Instant, Instant)> {
        let seq = u64::from_be_bytes(value.get(..8)?.try_into().ok()?);
        let ns = u64::from_be_bytes(value.get(8..16)?.try_into().ok()?);
        Some((self.due(seq), self.t0 + Duration::from_nanos(ns)))
    }
}

async fn one_run(
    client: &Client,
    producer: &Producer,
    topic: &str,
    from: i64,
    rate: u64,
    duration: Duration,
    plan: &Plan,
) -> Result<OneRun, BenchError> {
    let n = (rate as f64 * duration.as_secs_f64()).round().max(1.0) as u64;
    let period = Duration::from_secs_f64(1.0 / rate as f64);
    let tp = TopicPartition::new(topic, 0);
    let mut consumer = Consumer::new(client.clone(), ConsumerConfig::default());
    consumer.assign([tp.clone()]);
    consumer
        .seek(&tp, SeekTo::Offset(from))
        .map_err(|e| BenchError::new(e.to_string()))?;
    let schedule = Schedule {
        t0: Instant::now() + LEAD,
        period,
    };
    let give_up = duration + plan.deadline;
    let reader = tokio::spawn(async move {
        let (mut latency, mut from_send) = (Latency::new(), Latency::new());
        let started = Instant::now();
        let mut received = 0u64;
        while received < n && started.elapsed() < give_up {
            let polled = consumer.poll().await?;
            let now = Instant::now();
            for part in polled {
                for record in part.records() {
                    let value = record?.value.unwrap_or_default();
                    let Some((due, sent)) = schedule.read(&value) else {
                        continue;
                    };
                    latency.record(now.saturating_duration_since(due));
                    from_send.record(now.saturating_duration_since(sent));
                    received += 1;
                }
            }
        }
        Ok::<_, client::Error>((latency, from_send, received))
    });
    let pacer = {
        let producer = producer.clone();
        let topic = topic.to_string();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || pace(&runtime, &producer, &topic, n, schedule))
    };
    let late = pacer
        .await
        .map_err(|e| BenchError::new(format!("sender thread: {e}")))??;
    producer.flush().await;
    let (latency, from_send, received) = reader
        .await
        .map_err(|e| BenchError::new(format!("consumer task: {e}")))?
        .map_err(|e| BenchError::new(format!("consumer: {e}")))?;
    Ok(OneRun {
        latency,
        from_send,
        late,
        lost: n.saturating_sub(received),
    })
}

/// Sends record `seq` when it is due, stamped (see [`Schedule::stamp`]); returns how late each
/// send was. Runs on a blocking thread, entering the runtime only to hand records over.
fn pace(
    runtime: &tokio::runtime::Handle,
    producer: &Producer,
    topic: &str,
    n: u64,
    schedule: Schedule,
) -> Result<Latency, BenchError> {
    let mut value = vec![0x65u8; RECORD];
    let mut late = Latency::new();
    for seq in 0..n {
        let due = schedule.due(seq);
        // A thread sleep overshoots by the kernel's timer slack (~50 us) plus the wake-up, so
        // sleep to just short of the due time, then yield until it comes: the yield hands the
        // vCPU to the consumer and the producer's sender whenever they have work.
        if let Some(far) = due.checked_duration_since(Instant::now() + SPIN) {
            std::thread::sleep(far);
        }
        while Instant::now() < due {
            std::thread::yield_now();
        }
        let sent = Instant::now();
        late.record(sent.saturating_duration_since(due));
        schedule.stamp(&mut value, seq, sent);
        runtime
            .block_on(producer.send(ProducerRecord::new(topic).value(&value[..])))
            .map_err(|e| BenchError::new(format!("send: {e}")))?;
    }
    Ok(late)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(p50: f64) -> Figure {
        let mut f = Figure::new("e2e", "x", "us");
        f.runs = Runs(vec![p50]);
        f
    }

    #[test]
    fn stamps_round_trip_and_short_values_are_skipped() {
        let schedule = Schedule {
            t0: Instant::now(),
            period: Duration::from_micros(100),
        };
        let mut value = vec![0u8; RECORD];
        let sent = schedule.t0 + Duration::from_micros(1234);
        schedule.stamp(&mut value, 7, sent);
        let (due, back) = schedule.read(&value).unwrap();
        assert_eq!(due, schedule.t0 + Duration::from_micros(700));
        assert_eq!(back, sent);
        assert!(schedule.read(&value[..12]).is_none());
    }

    #[test]
    fn goals_depend_on_rate_and_placement() {
        let raw = PingPong {
            p50_us: 15.0,
            p99_us: 20.0,
            p99_9_us: 30.0,
            round_trips_per_s: 60_000.0,
        };
        assert!(goal(1_000, Placement::Same, &figure(1.0), raw, 1.0, 0).is_none());
        let same = goal(10_000, Placement::Same, &figure(59.0), raw, 240.0, 0).unwrap();
        assert!(same.met, "{}", same.text);
        let split = goal(10_000, Placement::Split, &figure(61.0), raw, 240.0, 0).unwrap();
        assert!(!split.met);
        let none = goal(10_000, Placement::None, &figure(200.0), raw, 900.0, 0).unwrap();
        assert!(none.met);
        let lossy = goal(50_000, Placement::Same, &figure(1.0), raw, 1.0, 3).unwrap();
        assert!(!lossy.met);
    }
}
