//! What the producer handles and the sender task share, and how a batch is settled: delivered,
//! retried, failed, or the whole producer stopped (Kafka's fatal producer errors).

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::OnceLock;

use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use parking_lot::Mutex;
use tokio::sync::{Notify, OnceCell, Semaphore};
use tokio::time::Instant;

use super::accumulator::Accumulator;
use super::ack_loss::{AckLossState, LostAck};
use super::batch::{Delivered, ProducerBatch};
use super::identity::{self, BatchErrorKind, ProducerIdAndEpoch};
use super::transaction::TxnProgress;
use super::ProducerConfig;
use crate::client::Client;
use crate::error::{Error, Result, ServerError};

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
    /// The producer id and epoch, once InitProducerId has answered (idempotence only).
    pub identity: OnceCell<ProducerIdAndEpoch>,
    /// What stopped the producer for good; the first cause wins.
    pub fatal: OnceLock<Error>,
    /// Fault injection: acknowledgements to throw away, and those thrown away.
    pub lost: Mutex<AckLossState>,
    /// The open transaction, with a transactional id.
    pub txn: Mutex<TxnProgress>,
    /// Errors a broker answered a batch with that mean our metadata was stale (Java's "Received
    /// invalid metadata error in produce request"), each with its partition; the first
    /// [`INVALID_METADATA_KEPT`] of them.
    pub invalid_metadata: Mutex<Vec<ServerError>>,
}

/// How many invalid-metadata answers a producer remembers: enough for any lab or test, bounded
/// for a producer that runs for months.
pub const INVALID_METADATA_KEPT: usize = 10_000;

impl Shared {
    /// The state of a producer with this (checked) configuration.
    pub fn new(client: Client, config: ProducerConfig) -> Self {
        let window = config.in_flight_per_partition();
        Self {
            acc: Mutex::new(Accumulator::new(config.batch_size, config.linger, window)),
            memory: Semaphore::new(config.buffer_memory.min(Semaphore::MAX_PERMITS)),
            lost: Mutex::new(AckLossState::new(config.lose_acks.clone())),
            client,
            config,
            wake: Notify::new(),
            progress: Notify::new(),
            flushing: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            identity: OnceCell::new(),
            fatal: OnceLock::new(),
            txn: Mutex::new(TxnProgress::default()),
            invalid_metadata: Mutex::new(Vec::new()),
        }
    }

    /// The producer id, asking for one if nobody has yet (concurrent callers share one request).
    pub async fn producer_id(&self) -> Result<ProducerIdAndEpoch> {
        if let Some(fatal) = self.fatal_error() {
            return Err(fatal);
        }
        let txn = self.config.transactional_id.as_deref();
        let init = || identity::init_producer_id(&self.client, txn, &self.config.retry);
        let id = *self.identity.get_or_try_init(init).await?;
        tracing::debug!(
            producer_id = id.producer_id,
            epoch = id.epoch,
            "producer id"
        );
        Ok(id)
    }

    /// True while a transaction is open: batches are sealed transactional.
    pub fn in_transaction(&self) -> bool {
        self.txn.lock().active
    }

    pub fn fatal_error(&self) -> Option<Error> {
        self.fatal
            .get()
            .map(|cause| Error::ProducerFatal(Box::new(cause.clone())))
    }

    pub(super) fn settle(&self, mut batch: ProducerBatch, result: Result<Delivered, Error>) {
        self.acc.lock().finished(&mut batch);
        self.memory.add_permits(batch.memory as usize);
        if let Err(e) = &result {
            tracing::warn!(topic = %batch.topic, partition = batch.partition,
                records = batch.record_count(), %e, "batch failed");
            let mut txn = self.txn.lock();
            if txn.active && txn.failed.is_none() {
                txn.failed = Some(e.clone());
            }
        }
        batch.complete(result);
        self.wake.notify_one();
        self.progress.notify_waiters();
    }

    /// Stops the producer for good: `batch` (the one that showed the problem, if any) and every
    /// batch not yet sent fail with the cause, later sends are refused, and answers still on
    /// their way settle their own batches (success included: those records are in the log).
    pub(super) fn stop(&self, batch: Option<ProducerBatch>, cause: Error) {
        if self.fatal.set(cause.clone()).is_ok() {
            tracing::error!(%cause, "the producer stops for good");
        }
        let fatal = self.fatal_error().unwrap_or(cause);
        if let Some(batch) = batch {
            self.settle(batch, Err(fatal.clone()));
        }
        let unsent = self.acc.lock().take_unsent();
        for batch in unsent {
            self.settle(batch, Err(fatal.clone()));
        }
    }

    /// Retries a batch after a backoff if the error allows it and time remains, else fails it.
    pub(super) fn failed(&self, batch: ProducerBatch, err: Error) {
        // A topic missing from metadata may be on its way (a restarted broker auto-creates it,
        // an admin re-creates it): Kafka's producer waits for it too, within the timeout.
        let retriable = err.is_retriable() || matches!(err, Error::UnknownTopic { .. });
        self.failed_with(batch, err, retriable);
    }

    fn failed_with(&self, mut batch: ProducerBatch, err: Error, retriable: bool) {
        if let Some(fatal) = self.fatal_error() {
            return self.settle(batch, Err(fatal));
        }
        let stale_routing = matches!(err, Error::Transport(_))
            || err.server().is_some_and(ServerError::invalidates_metadata);
        if stale_routing {
            self.client.invalidate(&batch.topic);
        }
        if let Some(answer) = err.server().filter(|e| e.invalidates_metadata()) {
            let mut kept = self.invalid_metadata.lock();
            if kept.len() < INVALID_METADATA_KEPT {
                kept.push(
                    ServerError::new(answer.code)
                        .topic(&*batch.topic)
                        .partition(batch.partition),
                );
            }
        }
        let in_time = batch.created.elapsed() < self.config.delivery_timeout;
        let delay = self.config.retry.delay(batch.attempts + 1);
        match delay.filter(|_| retriable && in_time) {
            Some(delay) => {
                batch.attempts += 1;
                tracing::debug!(topic = %batch.topic, partition = batch.partition,
                    attempt = batch.attempts, ?delay, %err, "retrying batch");
                self.acc.lock().requeue(batch, Instant::now() + delay);
                self.wake.notify_one();
            }
            None => self.give_up(batch, err),
        }
    }

    /// Fails a batch for good. A sequenced batch given up on leaves a hole whose contents
    /// nobody knows: appended with its acknowledgement lost, or never. Every later batch of the
    /// partition would either be refused as out of order or follow a gap. Kafka's producer
    /// bumps its epoch here (KIP-360); this one stops, so nothing is reordered or silently lost.
    pub(super) fn give_up(&self, batch: ProducerBatch, err: Error) {
        if batch.is_sequenced() {
            self.stop(Some(batch), err);
        } else {
            self.settle(batch, Err(err));
        }
    }

    /// Settles a batch from its partition's answer.
    pub(super) fn answered(
        &self,
        batch: ProducerBatch,
        answer: &PartitionProduceResponse,
        addr: &str,
    ) {
        let base_offset = match answer.error_code {
            0 => answer.base_offset,
            code => {
                let err = ServerError::new(code)
                    .topic(&*batch.topic)
                    .partition(batch.partition)
                    .message(answer.error_message.as_ref().map(|m| m.to_string()));
                let kind = if batch.is_sequenced() {
                    let oldest = self.acc.lock().is_oldest_unacked(&batch);
                    identity::classify(&err, oldest)
                } else {
                    BatchErrorKind::Ordinary
                };
                match kind {
                    BatchErrorKind::Duplicate => -1,
                    BatchErrorKind::Retry => return self.failed_with(batch, err.into(), true),
                    BatchErrorKind::Fatal => return self.stop(Some(batch), err.into()),
                    BatchErrorKind::Ordinary => return self.failed(batch, err.into()),
                }
            }
        };
        if self.lose(&batch, base_offset, addr) {
            let err = Error::AckLost {
                topic: batch.topic.to_string(),
                partition: batch.partition,
            };
            return self.failed(batch, err);
        }
        self.settle(
            batch,
            Ok(Delivered {
                base_offset,
                log_append_time: answer.log_append_time_ms,
            }),
        );
    }

    /// Fault injection: whether to throw this acknowledgement away.
    fn lose(&self, batch: &ProducerBatch, base_offset: i64, addr: &str) -> bool {
        let lost = LostAck {
            topic: batch.topic.to_string(),
            partition: batch.partition,
            base_offset,
            base_sequence: batch.identity().base_sequence,
            records: batch.record_count(),
        };
        let lost = self.lost.lock().lose(lost);
        if lost {
            tracing::info!(topic = %batch.topic, partition = batch.partition, base_offset,
                sequence = batch.identity().base_sequence, broker = addr,
                "acknowledgement dropped by fault injection (lose_acks)");
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ProtocolError;
    use crate::producer::partitioner::Target;
    use crate::record::Compression;
    use kafka_protocol::ResponseError;
    use std::time::Duration;

    const STAMP: ProducerIdAndEpoch = ProducerIdAndEpoch {
        producer_id: 9,
        epoch: 0,
    };

    /// An idempotent producer's state with its id already known, and no network: answers are
    /// handed to it directly.
    fn idempotent(lose_acks: Option<crate::producer::AckLoss>) -> Shared {
        let config = ProducerConfig {
            enable_idempotence: true,
            lose_acks,
            ..ProducerConfig::default()
        };
        let client = Client::unconnected(crate::ClientConfig::new("unused:9092"));
        let shared = Shared::new(client, config.checked().unwrap());
        shared.identity.set(STAMP).unwrap();
        shared
    }

    type Watch = std::sync::Arc<crate::producer::batch::Settlement>;

    /// `n` one-record batches for partition 0 (each record is bigger than a batch), drained
    /// within the window of five.
    fn send(shared: &Shared, n: usize) -> (Vec<ProducerBatch>, Vec<Watch>) {
        let now = Instant::now();
        let value = [0u8; 20_000];
        let outcomes = (0..n)
            .map(|_| {
                let mut acc = shared.acc.lock();
                acc.append(
                    "t",
                    Target::Partition(0),
                    0,
                    None,
                    Some(&value),
                    &[],
                    1,
                    now,
                )
                .outcome
            })
            .collect();
        let (ready, _) = shared.acc.lock().drain(now, true, Some(STAMP));
        (ready, outcomes)
    }

    fn answer(code: i16, base_offset: i64) -> PartitionProduceResponse {
        PartitionProduceResponse::default()
            .with_error_code(code)
            .with_base_offset(base_offset)
            .with_log_append_time_ms(-1)
    }

    fn outcome(w: &Watch) -> Option<Result<Delivered, Error>> {
        w.get().cloned()
    }

    fn fatal_code(result: Option<Result<Delivered, Error>>) -> Option<i16> {
        match result {
            Some(Err(Error::ProducerFatal(cause))) => cause.server().map(|e| e.code),
            _ => None,
        }
    }

    #[test]
    fn an_old_epoch_stops_the_producer_and_fails_everything_unacknowledged() {
        let shared = idempotent(None);
        let (ready, outcomes) = send(&shared, 7);
        assert_eq!(ready.len(), 5, "five in flight, two waiting");
        let mut ready = ready.into_iter();
        let epoch = ResponseError::InvalidProducerEpoch.code();
        shared.answered(ready.next().unwrap(), &answer(epoch, -1), "b:1");
        assert_eq!(fatal_code(outcome(&outcomes[0])), Some(epoch));
        assert_eq!(fatal_code(outcome(&outcomes[5])), Some(epoch), "unsent");
        assert_eq!(fatal_code(outcome(&outcomes[6])), Some(epoch), "unsent");
        assert!(shared.fatal_error().is_some());
        // Answers still on their way settle their batches: a success is a success...
        shared.answered(ready.next().unwrap(), &answer(0, 1), "b:1");
        assert!(matches!(outcome(&outcomes[1]), Some(Ok(d)) if d.base_offset == 1));
        // ...and a retriable error is not retried any more.
        let moved = ResponseError::NotLeaderOrFollower.code();
        shared.answered(ready.next().unwrap(), &answer(moved, -1), "b:1");
        assert_eq!(fatal_code(outcome(&outcomes[2])), Some(epoch));
        for batch in ready {
            shared.answered(batch, &answer(0, 3), "b:1");
        }
        assert!(shared.acc.lock().is_idle());
    }

    #[test]
    fn a_stale_leader_is_remembered_with_its_partition_and_other_errors_are_not() {
        let shared = idempotent(None);
        let (ready, _) = send(&shared, 2);
        let mut ready = ready.into_iter();
        let moved = ResponseError::NotLeaderOrFollower.code();
        let slow = ResponseError::RequestTimedOut.code();
        shared.answered(ready.next().unwrap(), &answer(moved, -1), "b:1");
        shared.answered(ready.next().unwrap(), &answer(slow, -1), "b:1");
        let kept = shared.invalid_metadata.lock().clone();
        assert_eq!(
            kept,
            [ServerError::new(moved).topic("t").partition(0)],
            "only the answer that means stale metadata"
        );
    }

    #[test]
    fn out_of_order_behind_an_unacknowledged_batch_is_retried_and_on_the_oldest_is_fatal() {
        let shared = idempotent(None);
        let (ready, outcomes) = send(&shared, 2);
        let mut ready = ready.into_iter();
        let (first, second) = (ready.next().unwrap(), ready.next().unwrap());
        let moved = ResponseError::NotLeaderOrFollower.code();
        let gap = ResponseError::OutOfOrderSequenceNumber.code();
        shared.answered(first, &answer(moved, -1), "b:1");
        shared.answered(second, &answer(gap, -1), "b:1");
        assert!(
            shared.fatal_error().is_none(),
            "the first batch explains the gap"
        );
        assert!(outcome(&outcomes[1]).is_none(), "retried, not failed");
        let later = Instant::now() + Duration::from_secs(5);
        let (retried, _) = shared.acc.lock().drain(later, true, Some(STAMP));
        let seqs: Vec<i32> = retried.iter().map(|b| b.identity().base_sequence).collect();
        assert_eq!(seqs, [0, 1], "retried in sequence order, same sequences");
        let mut retried = retried.into_iter();
        shared.answered(retried.next().unwrap(), &answer(0, 0), "b:1");
        shared.answered(retried.next().unwrap(), &answer(gap, -1), "b:1");
        assert_eq!(fatal_code(outcome(&outcomes[1])), Some(gap));
        assert!(matches!(outcome(&outcomes[0]), Some(Ok(d)) if d.base_offset == 0));
    }

    #[test]
    fn a_lost_acknowledgement_is_retried_with_the_same_bytes() {
        let shared = idempotent(Some(crate::producer::AckLoss::first(1)));
        let (mut ready, outcomes) = send(&shared, 1);
        let mut batch = ready.pop().unwrap();
        let bytes = batch.payload(Compression::None, false).unwrap();
        shared.answered(batch, &answer(0, 42), "b:1");
        assert!(outcome(&outcomes[0]).is_none(), "lost, so retried");
        let lost = shared.lost.lock().log().to_vec();
        assert_eq!(lost.len(), 1);
        assert_eq!((lost[0].base_offset, lost[0].base_sequence), (42, 0));
        let later = Instant::now() + Duration::from_secs(5);
        let (mut retried, _) = shared.acc.lock().drain(later, true, Some(STAMP));
        let mut batch = retried.pop().unwrap();
        assert_eq!(batch.payload(Compression::None, false).unwrap(), bytes);
        assert_eq!(batch.attempts, 1);
        // The broker recognises the retry and answers with the original offset.
        shared.answered(batch, &answer(0, 42), "b:1");
        assert!(matches!(outcome(&outcomes[0]), Some(Ok(d)) if d.base_offset == 42));
        assert_eq!(shared.lost.lock().lost(), 1);
    }

    #[test]
    fn a_sequenced_batch_given_up_on_stops_the_producer_but_a_plain_one_only_fails() {
        let shared = idempotent(None);
        let (mut ready, outcomes) = send(&shared, 1);
        let fatal = Error::Protocol(ProtocolError::BadAnswer {
            api: "Produce",
            reason: "test".into(),
        });
        shared.failed(ready.pop().unwrap(), fatal);
        assert!(matches!(
            outcome(&outcomes[0]),
            Some(Err(Error::ProducerFatal(_)))
        ));
        assert!(shared.fatal_error().is_some());

        let plain = Shared::new(
            Client::unconnected(crate::ClientConfig::new("unused:9092")),
            ProducerConfig::default().checked().unwrap(),
        );
        let now = Instant::now();
        let outcome_rx = plain
            .acc
            .lock()
            .append("t", Target::Partition(0), 0, None, Some(b"v"), &[], 1, now)
            .outcome;
        let (mut ready, _) = plain.acc.lock().drain(now, true, None);
        let err = Error::Protocol(ProtocolError::BadAnswer {
            api: "Produce",
            reason: "test".into(),
        });
        plain.failed(ready.pop().unwrap(), err);
        assert!(matches!(
            outcome(&outcome_rx),
            Some(Err(Error::Protocol(_)))
        ));
        assert!(plain.fatal_error().is_none());
    }
}
