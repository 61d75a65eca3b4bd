//! The producer's background task: takes ready batches from the accumulator, groups them by
//! leader into Produce requests, and settles each batch from the answer: success, a retry after
//! a backoff (with metadata marked stale when the error says routing changed), or failure.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::accumulator::{Accumulator, Delivered, ProducerBatch};
use super::ProducerConfig;
use crate::client::{topic_name, Client};
use crate::error::{Error, ProtocolError, ServerError};

/// State shared by the producer handles and the sender task.
pub struct Shared {
    pub client: Client,
    pub config: ProducerConfig,
    pub acc: Mutex<Accumulator>,
    /// New work or a new deadline for the sender.
    pub wake: Notify,
    /// A batch was settled; flushes re-check whether everything is done.
    pub progress: Notify,
    pub flushing: AtomicUsize,
    pub closed: AtomicBool,
    /// Bytes of records accepted but not yet settled (Kafka's buffer.memory).
    pub memory: Semaphore,
}

impl Shared {
    fn settle(&self, batch: ProducerBatch, result: Result<Delivered, Error>) {
        self.acc.lock().done(&batch.topic, batch.partition);
        self.memory.add_permits(batch.memory as usize);
        if let Err(e) = &result {
            tracing::warn!(topic = %batch.topic, partition = batch.partition,
                records = batch.record_count(), %e, "batch failed");
        }
        batch.complete(result);
        self.wake.notify_one();
        self.progress.notify_waiters();
    }

    /// Retries a batch after a backoff if the error allows it and time remains, else fails it.
    fn failed(&self, mut batch: ProducerBatch, err: Error) {
        let stale_routing = matches!(err, Error::Transport(_))
            || err.server().is_some_and(ServerError::invalidates_metadata);
        if stale_routing {
            self.client.invalidate(&batch.topic);
        }
        let in_time = batch.created.elapsed() < self.config.delivery_timeout;
        // A topic missing from metadata may be on its way (a restarted broker auto-creates it,
        // an admin re-creates it): Kafka's producer waits for it too, within the timeout.
        let retriable = err.is_retriable() || matches!(err, Error::UnknownTopic { .. });
        let delay = self.config.retry.delay(batch.attempts + 1);
        match delay.filter(|_| retriable && in_time) {
            Some(delay) => {
                batch.attempts += 1;
                tracing::debug!(topic = %batch.topic, partition = batch.partition,
                    attempt = batch.attempts, ?delay, %err, "retrying batch");
                self.acc.lock().requeue(batch, Instant::now() + delay);
                self.wake.notify_one();
            }
            None => self.settle(batch, Err(err)),
        }
    }
}

/// Runs until the producer is closed and every batch is settled.
pub async fn run(shared: Arc<Shared>) {
    loop {
        let closing = shared.closed.load(Ordering::SeqCst);
        let flush = closing || shared.flushing.load(Ordering::SeqCst) > 0;
        let (ready, next) = shared.acc.lock().drain(Instant::now(), flush);
        if !ready.is_empty() {
            tokio::spawn(send_round(Arc::clone(&shared), ready));
        }
        if closing && shared.acc.lock().is_idle() {
            tracing::debug!("producer closed, sender done");
            return;
        }
        match next {
            Some(at) => tokio::select! {
                _ = shared.wake.notified() => {}
                _ = tokio::time::sleep_until(at) => {}
            },
            None => shared.wake.notified().await,
        }
    }
}

/// Finds each batch's leader and sends one request per leader.
async fn send_round(shared: Arc<Shared>, batches: Vec<ProducerBatch>) {
    let mut by_leader: HashMap<i32, Vec<ProducerBatch>> = HashMap::new();
    for batch in batches {
        match shared
            .client
            .leader(&batch.topic, batch.partition, true)
            .await
        {
            Ok(leader) => by_leader.entry(leader).or_default().push(batch),
            Err(e) => shared.failed(batch, e),
        }
    }
    for (leader, group) in by_leader {
        tokio::spawn(send_to_leader(Arc::clone(&shared), leader, group));
    }
}

async fn send_to_leader(shared: Arc<Shared>, leader: i32, batches: Vec<ProducerBatch>) {
    let mut sendable = Vec::with_capacity(batches.len());
    for mut batch in batches {
        match batch.payload(shared.config.compression) {
            Ok(bytes) => sendable.push((batch, bytes)),
            Err(reason) => {
                let err = ProtocolError::Encode {
                    api: "record batch",
                    version: 2,
                    reason,
                };
                shared.settle(batch, Err(err.into()));
            }
        }
    }
    if sendable.is_empty() {
        return;
    }
    let conn = match shared.client.broker(leader).await {
        Ok(conn) => conn,
        Err(e) => {
            for (batch, _) in sendable {
                shared.failed(batch, e.clone());
            }
            return;
        }
    };
    let acks = shared.config.acks.code();
    let timeout_ms =
        i32::try_from(shared.client.config().request_timeout.as_millis()).unwrap_or(i32::MAX);
    let build = |_version| request(&sendable, acks, timeout_ms);
    if acks == 0 {
        // The broker answers nothing at acks=0: offsets stay unknown, as in Kafka.
        let sent = conn.send_only(build).await;
        for (batch, _) in sendable {
            match &sent {
                Ok(()) => shared.settle(
                    batch,
                    Ok(Delivered {
                        base_offset: -1,
                        log_append_time: -1,
                    }),
                ),
                Err(e) => shared.failed(batch, e.clone()),
            }
        }
        return;
    }
    match conn.call(build).await {
        Ok(resp) => {
            for (batch, _) in sendable {
                match find(&resp, &batch.topic, batch.partition) {
                    Some(p) if p.error_code == 0 => shared.settle(
                        batch,
                        Ok(Delivered {
                            base_offset: p.base_offset,
                            log_append_time: p.log_append_time_ms,
                        }),
                    ),
                    Some(p) => {
                        let err = ServerError::new(p.error_code)
                            .topic(&*batch.topic)
                            .partition(batch.partition)
                            .message(p.error_message.as_ref().map(|m| m.to_string()));
                        shared.failed(batch, err.into());
                    }
                    None => {
                        let err = ProtocolError::BadAnswer {
                            api: "Produce",
                            reason: format!("no answer for {}-{}", batch.topic, batch.partition),
                        };
                        shared.settle(batch, Err(err.into()));
                    }
                }
            }
        }
        Err(e) => {
            for (batch, _) in sendable {
                shared.failed(batch, e.clone());
            }
        }
    }
}

/// One Produce request carrying one batch per partition (Kafka allows no more).
fn request(batches: &[(ProducerBatch, Bytes)], acks: i16, timeout_ms: i32) -> ProduceRequest {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for (batch, bytes) in batches {
        let data = PartitionProduceData::default()
            .with_index(batch.partition)
            .with_records(Some(bytes.clone()));
        match topics
            .iter_mut()
            .find(|t| t.name.0.as_str() == &*batch.topic)
        {
            Some(t) => t.partition_data.push(data),
            None => topics.push(
                TopicProduceData::default()
                    .with_name(topic_name(&batch.topic))
                    .with_partition_data(vec![data]),
            ),
        }
    }
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(topics)
}

fn find<'a>(
    resp: &'a ProduceResponse,
    topic: &str,
    partition: i32,
) -> Option<&'a PartitionProduceResponse> {
    resp.responses
        .iter()
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| &t.partition_responses)
        .find(|p| p.index == partition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer::partitioner::Target;
    use crate::record::Compression;
    use kafka_protocol::protocol::Encodable;
    use std::time::Duration;

    #[test]
    fn one_entry_per_topic_one_batch_per_partition_at_every_version() {
        let now = Instant::now();
        let mut acc = Accumulator::new(16384, Duration::ZERO);
        for (topic, p) in [("a", 0), ("b", 1), ("a", 2), ("a", 0)] {
            acc.append(
                topic,
                Target::Partition(p),
                0,
                None,
                Some(b"v"),
                &[],
                1,
                now,
            );
        }
        let (ready, _) = acc.drain(now, true);
        let sendable: Vec<(ProducerBatch, Bytes)> = ready
            .into_iter()
            .map(|mut b| {
                let bytes = b.payload(Compression::None).unwrap();
                (b, bytes)
            })
            .collect();
        let req = request(&sendable, -1, 30_000);
        assert_eq!(req.topic_data.len(), 2);
        let parts: usize = req.topic_data.iter().map(|t| t.partition_data.len()).sum();
        assert_eq!(parts, 3);
        for v in 3..=9 {
            req.encode(&mut bytes::BytesMut::new(), v).unwrap();
        }
    }
}
