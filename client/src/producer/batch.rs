//! A batch on its way: filled, given its place in its partition's order (and, with idempotence,
//! its sequence) when first sent, sealed into wire bytes once, then sent, perhaps again.

use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Error;
use crate::record::{BatchBuilder, Compression, ProducerIdentity};

/// What the broker said about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// -1 when unknown (acks=0, or an old broker's DUPLICATE_SEQUENCE_NUMBER).
    pub base_offset: i64,
    /// The broker's time when the topic uses LogAppendTime, else -1.
    pub log_append_time: i64,
}

/// How a batch went, shared by the batch and the delivery futures of its records. Handing it to
/// a record costs one reference count: the producer does this for every record it takes.
#[derive(Default)]
pub struct Settlement {
    result: OnceLock<Result<Delivered, Error>>,
    settled: Notify,
}

impl Settlement {
    /// The batch's fate, once known.
    pub fn get(&self) -> Option<&Result<Delivered, Error>> {
        self.result.get()
    }

    pub async fn wait(&self) -> &Result<Delivered, Error> {
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            // Registered before the check, so a settlement in between still wakes us.
            settled.as_mut().enable();
            if let Some(result) = self.get() {
                return result;
            }
            settled.await;
        }
    }

    /// The first result sticks: a batch settles once.
    fn settle(&self, result: Result<Delivered, Error>) {
        if self.result.set(result).is_ok() {
            self.settled.notify_waiters();
        }
    }
}

pub struct ProducerBatch {
    pub topic: Arc<str>,
    pub partition: i32,
    pub(super) builder: Option<BatchBuilder>,
    sealed: Option<Bytes>,
    sealed_records: i32,
    pub created: Instant,
    /// Retries so far.
    pub attempts: u32,
    /// Buffer memory to give back when the batch is done.
    pub memory: u32,
    /// Its place in its partition's send order, from its first send on; retries are put back in
    /// this order.
    pub(super) ordinal: Option<u64>,
    /// Producer id, epoch and base sequence, from its first send on (`NONE` without idempotence).
    pub(super) identity: ProducerIdentity,
    /// Counted in its partition's in-flight window.
    pub(super) in_flight: bool,
    outcome: Arc<Settlement>,
}

impl ProducerBatch {
    /// A batch writing into `buffer` (a settled batch's, see [`take_buffer`](Self::take_buffer)).
    pub(super) fn new(
        topic: Arc<str>,
        partition: i32,
        buffer: BytesMut,
        batch_size: usize,
        now: Instant,
    ) -> Self {
        Self {
            topic,
            partition,
            builder: Some(BatchBuilder::reusing(buffer, batch_size)),
            sealed: None,
            sealed_records: 0,
            created: now,
            attempts: 0,
            memory: 0,
            ordinal: None,
            identity: ProducerIdentity::NONE,
            in_flight: false,
            outcome: Arc::default(),
        }
    }

    pub(super) fn builder(&self) -> Option<&BatchBuilder> {
        self.builder.as_ref()
    }

    pub fn record_count(&self) -> i32 {
        self.builder()
            .map_or(self.sealed_records, BatchBuilder::record_count)
    }

    /// Producer id, epoch and base sequence written in the batch.
    pub fn identity(&self) -> ProducerIdentity {
        self.identity
    }

    /// True when the batch carries an idempotent sequence.
    pub fn is_sequenced(&self) -> bool {
        self.identity.producer_id >= 0
    }

    /// The wire bytes. The first call closes the batch (compressing it); retries resend exactly
    /// the same bytes, with the same sequence, which is what lets the broker recognise them.
    /// `transactional` marks the batch as part of the open transaction.
    pub fn payload(
        &mut self,
        compression: Compression,
        transactional: bool,
    ) -> Result<Bytes, String> {
        if let Some(bytes) = &self.sealed {
            return Ok(bytes.clone());
        }
        let builder = self.builder.take().ok_or("batch has no records")?;
        self.sealed_records = builder.record_count();
        let bytes = builder.finish_with(compression, self.identity, transactional)?;
        self.sealed = Some(bytes.clone());
        Ok(bytes)
    }

    /// The buffer of a settled batch, to build another batch in; `None` unless this batch holds
    /// the only reference to its bytes.
    pub(super) fn take_buffer(&mut self) -> Option<BytesMut> {
        self.sealed.take()?.try_into_mut().ok()
    }

    pub fn settlement(&self) -> Arc<Settlement> {
        Arc::clone(&self.outcome)
    }

    /// Tells every record of the batch how it went.
    pub fn complete(self, result: Result<Delivered, Error>) {
        self.outcome.settle(result);
    }
}

/// Seals each batch as the sender does, without compression (tests of request building).
#[cfg(test)]
pub(super) fn sealed(ready: Vec<ProducerBatch>) -> Vec<(ProducerBatch, Bytes)> {
    ready
        .into_iter()
        .map(|mut b| {
            let bytes = b.payload(crate::record::Compression::None, false).unwrap();
            (b, bytes)
        })
        .collect()
}

impl Drop for ProducerBatch {
    /// A batch dropped unsettled (its producer's task went away with the runtime) must not
    /// leave its records' futures waiting for ever.
    fn drop(&mut self) {
        self.outcome.settle(Err(Error::ProducerClosed));
    }
}
