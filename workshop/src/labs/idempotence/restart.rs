//! Phase 4: where the guarantee ends (2). A relay sends events one at a time through an
//! idempotent producer. At seeded points an acknowledgement is lost and the instance dies before
//! it can retry (in the lab: it has no retries left, so its send fails and the instance is
//! replaced). The next instance gets a new producer id and sends the unconfirmed event again,
//! from sequence 0: the broker has no reason to think it has seen it.

use client::{AckLoss, Error, ProducerConfig, ProducerIdAndEpoch, ProducerRecord, RetryPolicy};
use rand::seq::index::sample;
use rand_chacha::ChaCha8Rng;

use super::copies::LogCount;
use super::{producer_config, start_idempotent, Plan};
use crate::lab::report::Progress;
use crate::lab::target::{broker_error, Cluster};
use crate::lab::LabError;

/// One instance of the relay, from start to death (or to the end of the events).
#[derive(Debug, Clone)]
pub struct Instance {
    pub producer: ProducerIdAndEpoch,
    /// Events it had acknowledged.
    pub acknowledged: u32,
    /// The event whose acknowledgement it lost before dying, and where the broker had put it.
    pub died_on: Option<(String, i32, i64)>,
}

#[derive(Debug, Clone)]
pub struct RestartRun {
    pub instances: Vec<Instance>,
    pub log: LogCount,
}

pub fn event_id(i: u32) -> String {
    format!("event-{i:04}")
}

pub async fn run(
    cluster: &Cluster,
    plan: &Plan,
    rng: &mut ChaCha8Rng,
    progress: &Progress,
) -> Result<RestartRun, LabError> {
    let topic = cluster.create_topic("events", plan.partitions).await?;
    // Deaths happen after the first event, at distinct events.
    let mut deaths: Vec<u32> = sample(rng, plan.records as usize - 1, plan.restarts as usize)
        .into_iter()
        .map(|i| i as u32 + 1)
        .collect();
    deaths.sort_unstable();
    let mut deaths = deaths.into_iter();
    let mut instances = Vec::new();
    let mut next = 0;
    while next < plan.records {
        let death = deaths.next();
        let config = ProducerConfig {
            // One lost acknowledgement, and no retry to recover it: the instance dies with it.
            lose_acks: death.map(|d| AckLoss::nth(u64::from(d - next))),
            retry: RetryPolicy::none(),
            ..producer_config(true, None)
        };
        let (producer, id) = start_idempotent(cluster, config, "starting the producer").await?;
        let mut instance = Instance {
            producer: id,
            acknowledged: 0,
            died_on: None,
        };
        while next < plan.records {
            let event = event_id(next);
            let record = ProducerRecord::new(&topic).key(&event).value(&event);
            match producer.send_and_wait(record).await {
                Ok(_) => {
                    instance.acknowledged += 1;
                    next += 1;
                    progress.inc();
                }
                Err(e) if Some(next) == death && is_lost_ack(&e) => {
                    let lost = producer.lost_acks().pop().ok_or_else(|| {
                        LabError::Internal("an acknowledgement lost without a record".into())
                    })?;
                    instance.died_on = Some((event, lost.partition, lost.base_offset));
                    // `next` stays: the next instance sends this event again.
                    break;
                }
                Err(e) => return Err(broker_error(&format!("sending {event}"), &e)),
            }
        }
        instances.push(instance);
    }
    let log = LogCount::of(&cluster.read_topic(&topic).await?);
    Ok(RestartRun { instances, log })
}

/// The send failed because its acknowledgement was lost (the producer then stops for good).
fn is_lost_ack(e: &Error) -> bool {
    let cause = e.fatal_cause().unwrap_or(e);
    matches!(cause, Error::AckLost { .. })
}
