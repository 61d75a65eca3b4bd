//! One timed run on the broker: a fresh topic and consumer group, one member per partition
//! processing at a fixed rate, the seeded traffic produced tick by tick, a live per-partition lag
//! table while it runs, and at the end every figure read back from the broker.
//!
//! Time is traffic time: the producer sends a tick's records (a tenth of its rate), waits for
//! their acknowledgements, publishes the log end offsets, and waits for the next tick of wall
//! time; in each tick a member processes at most its rate's worth of that tick from what has
//! arrived (see `workers`). At each second of traffic the producer waits until every member has
//! committed that tick and reads the group's lag from the broker: the "second by second" table.
//! On a machine too slow for the rate the ticks stretch, and nothing else changes, so every
//! figure is a function of the seed and the flags: only the live view and the run's duration
//! (its `measured` seconds) depend on the machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::group::GroupConsumer;
use client::{Acks, Client, Producer, ProducerConfig, ProducerRecord};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::super::plan::{Timed, TICKS_PER_SECOND};
use super::super::sketch::SpaceSaving;
use super::super::traffic::{encode_seq, Mix, Traffic};
use super::workers::{self, Done, OrderChecker, Shared, Store, Ticks, FAILED};
use crate::kit::offsets::GroupOffsets;
use crate::lab::deadline::{Deadline, Work};
use crate::lab::report::{thousands, LagRow, Narrator};
use crate::lab::target::{self, broker_error, Cluster};
use crate::lab::LabError;

/// Counters of the hot-key detector: far more than the tenants that matter, far fewer than all.
pub const DETECTOR_COUNTERS: usize = 64;

/// One run's setup.
pub struct RunSpec<'a> {
    /// The name the lab gives the topic and group (suffixed on a shared cluster).
    pub base: &'a str,
    pub plan: Timed,
    pub mix: Mix,
    pub seed: u64,
    /// Run the hot-key detector alongside the group.
    pub detect: bool,
}

/// The group's lag on every partition, as the broker reports it, after a whole second of
/// traffic time has been sent and processed.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub seconds: f64,
    /// Per partition; `None` where the group had not committed yet ("-" in the lag table).
    pub lags: Vec<Option<u64>>,
}

/// What a run measured.
pub struct RunOutcome {
    pub topic: String,
    pub group: String,
    /// Records per partition: the log end offsets of the fresh topic.
    pub arrivals: Vec<u64>,
    /// Records per partition as Kafka's partitioner places the keys sent (must equal arrivals).
    pub predicted: Vec<u64>,
    /// The group's lag at the end, from the broker.
    pub lag_rows: Vec<LagRow>,
    pub sent_by_tenant: Vec<u64>,
    pub order: OrderChecker,
    pub detector: Option<SpaceSaving<u32>>,
    pub timeline: Vec<Sample>,
    /// Wall time of the run: it depends on the machine, so it is `measured`, not a figure.
    pub elapsed: Duration,
}

pub async fn run(
    cluster: &Cluster,
    n: &Narrator,
    spec: RunSpec<'_>,
) -> Result<RunOutcome, LabError> {
    let plan = spec.plan;
    // The whole run under one deadline, derived from its work: on a cluster too slow for it
    // (members waiting on the traffic clock, then evicted for not polling, rejoining forever)
    // the lab ends with a line that says which run and where it was.
    let deadline = Deadline::start(
        format!("the run on `{}`", spec.base),
        Work {
            // Produced, then consumed.
            records: plan.records * 2,
            // The group forms, and its members leave.
            rebalances: 2,
            // Creating the topic, reading its end offsets, the group's lag.
            round_trips: 3,
            waits: Duration::from_secs_f64(plan.seconds()),
        },
    );
    let group_name = cluster.group(spec.base);
    let offsets = GroupOffsets::new(cluster.client(), &group_name);
    let (topic, members) = deadline
        .wait("creating its topic and forming its group", async {
            let topic = cluster.create_topic(spec.base, plan.partitions).await?;
            let members = join(cluster.client(), &group_name, &topic, plan.partitions).await?;
            Ok((topic, members))
        })
        .await?;

    let (clock_tx, clock_rx) = watch::channel(Ticks::new());
    let (done_tx, _) = watch::channel(vec![0; plan.partitions as usize]);
    let shared = Arc::new(Shared {
        plan,
        topic: topic.clone(),
        store: Mutex::new(Store::new(spec.mix.tenants, plan.partitions)),
        done: done_tx,
    });
    let mut workers = JoinSet::new();
    for (member, partition) in members {
        workers.spawn(workers::run_worker(
            Arc::clone(&shared),
            member,
            partition,
            clock_rx.clone(),
        ));
    }
    let detector = spec.detect.then(|| {
        tokio::spawn(workers::run_detector(
            cluster.client().clone(),
            topic.clone(),
            plan,
            DETECTOR_COUNTERS,
            clock_rx.clone(),
        ))
    });
    drop(clock_rx);

    let started = Instant::now();
    let channels = Channels {
        offsets: &offsets,
        clock: &clock_tx,
        done: shared.done.subscribe(),
    };
    let produced = deadline
        .wait(
            "sending its traffic",
            produce(cluster.client(), n, &topic, &spec, channels),
        )
        .await;
    let (traffic, timeline) = match produced {
        Ok(done) => done,
        Err(e) => {
            let mut first = e;
            if shared.done.borrow().contains(&FAILED) {
                // The member that failed has finished: its own error says more.
                while let Some(joined) = workers.try_join_next() {
                    if let Ok(Err(member_error)) = joined {
                        first = member_error;
                        break;
                    }
                }
            }
            workers.abort_all();
            if let Some(d) = &detector {
                d.abort();
            }
            return Err(first);
        }
    };
    let arrivals: Vec<u64> = timeline
        .last()
        .map(|s| s.ends.iter().map(|&e| e.max(0) as u64).collect())
        .unwrap_or_default();

    // Every member has processed the last tick; each leaves once all are done.
    let settling = n.progress(plan.partitions as u64, "members finishing");
    // Past the deadline the workers are dropped with their set, which aborts them.
    let finished = deadline
        .run(&settling, async {
            let mut finished: Vec<GroupConsumer> = Vec::new();
            while let Some(joined) = workers.join_next().await {
                let (_, member) = joined
                    .map_err(|e| LabError::Internal(format!("a consumer task failed: {e}")))??;
                finished.push(member);
                settling.inc();
            }
            Ok(finished)
        })
        .await?;
    settling.finish();
    let lag_rows = offsets.lag_rows(&topic, plan.partitions).await?;
    for member in finished {
        // Leaving is cleanup: the figures are already read.
        if let Err(e) = member.close().await {
            tracing::warn!(%e, "a member could not leave the group cleanly");
        }
    }
    drop(clock_tx);
    let detector = match detector {
        Some(task) => Some(
            task.await
                .map_err(|e| LabError::Internal(format!("the detector failed: {e}")))??,
        ),
        None => None,
    };
    let order = shared.store.lock().order().clone();
    Ok(RunOutcome {
        topic,
        group: group_name,
        predicted: traffic.predicted_loads(plan.partitions),
        arrivals,
        lag_rows,
        sent_by_tenant: traffic.sent_by_tenant().to_vec(),
        order,
        detector,
        timeline: timeline.into_iter().map(|s| s.sample).collect(),
        elapsed: started.elapsed(),
    })
}

/// The members, joined, each owning exactly one partition of `topic`. They poll side by side
/// (a JoinGroup waits for every member to rejoin), until the group is stable: one generation,
/// one partition each, every partition owned. As long as that takes: the run's deadline bounds
/// it, and dropping this aborts the members.
async fn join(
    client: &Client,
    group: &str,
    topic: &str,
    partitions: i32,
) -> Result<Vec<(GroupConsumer, i32)>, LabError> {
    type Seen = Vec<Option<(i32, Vec<i32>)>>;
    let seen: Arc<Mutex<Seen>> = Arc::new(Mutex::new(vec![None; partitions as usize]));
    let ready = Arc::new(AtomicBool::new(false));
    let mut tasks = JoinSet::new();
    for index in 0..partitions as usize {
        let mut member = workers::member(client, group, topic)?;
        let (seen, ready) = (Arc::clone(&seen), Arc::clone(&ready));
        tasks.spawn(async move {
            while !ready.load(Ordering::SeqCst) {
                member
                    .poll()
                    .await
                    .map_err(|e| broker_error("joining the consumer group", &e))?;
                let owned = member.assignment().iter().map(|tp| tp.partition).collect();
                seen.lock()[index] = Some((member.generation().id, owned));
            }
            Ok::<_, LabError>(member)
        });
    }
    while !stable(&seen.lock(), partitions) {
        if tasks.is_empty() {
            return Err(LabError::Internal(format!(
                "the {partitions} members of group {group} ended before settling into one \
                 partition each"
            )));
        }
        match tasks.try_join_next() {
            Some(Ok(Err(e))) => {
                tasks.abort_all();
                return Err(e);
            }
            Some(Err(e)) => {
                tasks.abort_all();
                return Err(LabError::Internal(format!("a joining member failed: {e}")));
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ready.store(true, Ordering::SeqCst);
    let mut members = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let member =
            joined.map_err(|e| LabError::Internal(format!("a joining member failed: {e}")))??;
        let partition = member
            .assignment()
            .first()
            .map(|tp| tp.partition)
            .ok_or_else(|| {
                LabError::Broker(format!(
                    "a member of group {group} lost its partition while joining"
                ))
            })?;
        members.push((member, partition));
    }
    Ok(members)
}

/// One generation, one partition per member, all partitions owned.
fn stable(seen: &[Option<(i32, Vec<i32>)>], partitions: i32) -> bool {
    let Some(Some((generation, _))) = seen.first() else {
        return false;
    };
    let mut owned: Vec<i32> = Vec::new();
    for entry in seen {
        match entry {
            Some((g, parts)) if g == generation && *g >= 0 && parts.len() == 1 => {
                owned.push(parts[0]);
            }
            _ => return false,
        }
    }
    owned.sort_unstable();
    owned == (0..partitions).collect::<Vec<_>>()
}

/// What the producer publishes to, and hears from.
struct Channels<'a> {
    offsets: &'a GroupOffsets,
    clock: &'a watch::Sender<Ticks>,
    done: watch::Receiver<Done>,
}

/// A sample of the timeline, with the log end offsets it was taken at.
struct Sampled {
    sample: Sample,
    ends: Vec<i64>,
}

/// Sends the run's traffic tick by tick, publishing each tick's log end offsets once its records
/// are acknowledged; after each second of traffic waits for every member to finish that tick
/// and samples the group's lag from the broker. Redraws the live lag table on a terminal.
async fn produce(
    client: &Client,
    n: &Narrator,
    topic: &str,
    spec: &RunSpec<'_>,
    mut ch: Channels<'_>,
) -> Result<(Traffic, Vec<Sampled>), LabError> {
    let plan = spec.plan;
    // Big batches and a little linger: millions of small records in seconds.
    let config = ProducerConfig {
        acks: Acks::All,
        linger: Duration::from_millis(10),
        batch_size: 512 * 1024,
        buffer_memory: 64 * 1024 * 1024,
        ..target::producer_config()
    };
    let producer = Producer::new(client.clone(), config)
        .map_err(|e| broker_error("starting the producer", &e))?;
    let mut traffic = Traffic::new(spec.mix, spec.seed);
    let live = n.live();
    let mut timeline = Vec::new();
    let tick_time = Duration::from_secs(1) / TICKS_PER_SECOND as u32;
    let start = tokio::time::Instant::now();
    let mut failed = FailedSends::default();
    for tick in 1..=plan.ticks() {
        tokio::time::sleep_until(start + tick_time * (tick - 1)).await;
        let (from, to) = (plan.sent_after(tick - 1), plan.sent_after(tick));
        let mut deliveries = Vec::with_capacity((to - from) as usize);
        for _ in from..to {
            let draw = traffic.next_record();
            let value = encode_seq(draw.seq);
            let delivery = producer
                .send(ProducerRecord::new(topic).key(draw.key).value(&value))
                .await
                .map_err(|e| broker_error(&format!("producing to {topic}"), &e))?;
            deliveries.push(delivery);
        }
        producer.flush().await;
        for delivery in deliveries {
            if let Err(e) = delivery.wait().await {
                failed.record(&e);
            }
        }
        let ends = ch.offsets.log_ends(topic, plan.partitions).await?;
        let stored: i64 = ends.iter().sum();
        if let Some(e) = failed.unstored(topic, stored, to) {
            return Err(e);
        }
        ch.clock
            .send_modify(|ticks| ticks.push(Arc::new(ends.clone())));
        let sample_now = plan.samples_after(tick);
        if sample_now {
            let done = ch
                .done
                .wait_for(|done| done.iter().all(|&d| d >= tick))
                .await
                .map_err(|_| LabError::Internal("the members' progress is gone".into()))?;
            if done.contains(&FAILED) {
                return Err(LabError::Internal(
                    "a member of the group failed during the run".into(),
                ));
            }
        }
        if n.is_live() || sample_now {
            let rows = ch.offsets.lag_rows(topic, plan.partitions).await?;
            let seconds = to as f64 / plan.rate as f64;
            if n.is_live() {
                live.show(
                    format!(
                        "traffic {seconds:.1} s of {:.1} s, {} records sent",
                        plan.seconds(),
                        thousands(to)
                    ),
                    &rows,
                );
            }
            if sample_now {
                timeline.push(Sampled {
                    sample: Sample {
                        seconds,
                        lags: rows.iter().map(|r| r.lag().map(|l| l as u64)).collect(),
                    },
                    ends,
                });
            }
        }
    }
    live.finish();
    producer.close().await;
    Ok((traffic, timeline))
}

/// Sends whose delivery failed, counted, with the first error: what the run says when the
/// broker's log ends fall short of what was sent.
#[derive(Debug, Default)]
struct FailedSends {
    count: u64,
    first: Option<String>,
}

impl FailedSends {
    fn record(&mut self, e: &client::Error) {
        self.count += 1;
        self.first.get_or_insert_with(|| e.to_string());
    }

    /// The run's end when the broker stored a different number of records than the `sent`
    /// ones: why, as far as the sends' own outcomes say.
    fn unstored(&self, topic: &str, stored: i64, sent: u64) -> Option<LabError> {
        if stored == sent as i64 {
            return None;
        }
        let why = match &self.first {
            Some(first) => format!(
                "{} failed (the first: {first})",
                crate::lab::report::count(self.count, "send", "sends")
            ),
            None => "every send was acknowledged, so records went missing on the broker".into(),
        };
        Some(LabError::Broker(format!(
            "the broker stored {} of the {} sent to {topic}: {why}",
            thousands(stored.max(0) as u64),
            crate::lab::report::count(sent, "record", "records")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::ApiKey;

    #[test]
    fn a_shortfall_is_blamed_on_failed_sends_only_when_some_failed() {
        let mut failed = FailedSends::default();
        assert!(failed.unstored("orders", 10, 10).is_none());
        assert_eq!(
            failed.unstored("orders", 9, 10).unwrap().to_string(),
            LabError::Broker(
                "the broker stored 9 of the 10 records sent to orders: every send was \
                 acknowledged, so records went missing on the broker"
                    .into()
            )
            .to_string()
        );
        failed.record(&client::Error::ProducerClosed);
        failed.record(&client::Error::ProducerClosed);
        assert_eq!(
            failed.unstored("orders", 1_998, 2_000).unwrap().to_string(),
            LabError::Broker(
                "the broker stored 1,998 of the 2,000 records sent to orders: 2 sends failed \
                 (the first: the producer is closed)"
                    .into()
            )
            .to_string()
        );
    }

    /// A broker that answers every JoinGroup an hour late: the run ends at its deadline (its
    /// million records, the group forming), not at a flat timeout of its own, with the run's
    /// one line (paused clock).
    #[tokio::test(start_paused = true)]
    async fn a_group_that_never_forms_ends_the_run_at_its_deadline() {
        let cluster = Cluster::slowed(ApiKey::JoinGroup, Duration::from_secs(3600)).await;
        let plan = Timed {
            partitions: 2,
            tenants: 4,
            hot_tenant: 1,
            records: 1_000_000,
            rate: 1_000_000,
            consumer_rate: 10,
            salt: 2,
            top: 3,
        };
        let spec = RunSpec {
            base: "orders-by-tenant",
            plan,
            mix: Mix {
                tenants: 4,
                hot_tenant: 1,
                salt: None,
            },
            seed: 5,
            detect: false,
        };
        let started = tokio::time::Instant::now();
        let ran = run(&cluster, &Narrator::new(), spec).await;
        crate::lab::deadline::assert_too_slow(
            ran.map(|_| ()),
            started.elapsed(),
            Duration::from_secs(94),
            "the run on `orders-by-tenant` was too slow: not done within 94 s (3 round trips x 1 \
             s + 2000000 records x 25 µs + 2 rebalances x 15 s + 1 s of the scenario's own waits \
             + 10 s); it was creating its topic and forming its group. Is the broker overloaded \
             or slowed down? A smaller run (fewer records) needs less time",
        );
        cluster.close().await;
    }

    #[test]
    fn stable_means_one_generation_and_one_partition_each() {
        let one = |g: i32, p: i32| Some((g, vec![p]));
        assert!(stable(&[one(3, 1), one(3, 0)], 2));
        assert!(!stable(&[one(3, 1), one(2, 0)], 2), "two generations");
        assert!(!stable(&[one(3, 1), one(3, 1)], 2), "a partition twice");
        assert!(!stable(&[one(3, 1), None], 2), "a member not seen yet");
        assert!(!stable(&[Some((3, vec![0, 1])), Some((3, vec![]))], 2));
        assert!(!stable(&[one(-1, 0)], 1), "not in a generation");
        assert!(!stable(&[], 0));
    }
}
