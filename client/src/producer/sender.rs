//! The producer's background task: takes ready batches from the accumulator, groups them by
//! leader into Produce requests, and settles each batch from the answer: success, a retry after
//! a backoff (with metadata marked stale when the error says routing changed), or failure.
//!
//! Ordering: one task writes every request, one after another, and only the answers are awaited
//! concurrently. A connection delivers requests in the order they were written and a broker
//! answers them in that order, so the batches of a partition reach its leader in sequence order
//! even with five in flight. The cost is that a slow leader lookup or connect holds up the other
//! leaders' batches for that long.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use tokio::time::Instant;

use super::batch::{Delivered, ProducerBatch};
use super::request::ProduceBody;
use super::shared::Shared;
use crate::connection::{BrokerConnection, PendingCall};
use crate::error::{Error, ProtocolError, Result};

/// Runs until the producer is closed and every batch is settled.
pub async fn run(shared: Arc<Shared>) {
    if shared.config.enable_idempotence {
        // Kafka's producer gets its id before sending anything; a producer that cannot get one
        // within its retries cannot send idempotently at all.
        if let Err(e) = shared.producer_id().await {
            shared.stop(None, e);
        }
    }
    let stamp = shared.identity.get().copied();
    loop {
        let closing = shared.closed.load(Ordering::SeqCst);
        let flush = closing || shared.flushing.load(Ordering::SeqCst) > 0;
        let mut next = None;
        if let Some(fatal) = shared.fatal_error() {
            // Records that slipped in while the producer was being stopped.
            let unsent = shared.acc.lock().take_unsent();
            for batch in unsent {
                shared.settle(batch, Err(fatal.clone()));
            }
        } else {
            let ready;
            (ready, next) = shared.acc.lock().drain(Instant::now(), flush, stamp);
            if !ready.is_empty() {
                dispatch(&shared, ready).await;
            }
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

/// Finds each partition's leader (once per partition, so all its batches go to the same place)
/// and sends each leader its batches.
async fn dispatch(shared: &Arc<Shared>, batches: Vec<ProducerBatch>) {
    let batches = join_transaction(shared, batches).await;
    let mut leaders: HashMap<(Arc<str>, i32), Result<i32>> = HashMap::new();
    let mut by_leader: Vec<(i32, Vec<ProducerBatch>)> = Vec::new();
    for batch in batches {
        let key = (Arc::clone(&batch.topic), batch.partition);
        let leader = match leaders.get(&key) {
            Some(leader) => leader.clone(),
            None => {
                let leader = shared
                    .client
                    .leader(
                        &batch.topic,
                        batch.partition,
                        shared.config.allow_auto_create_topics,
                    )
                    .await;
                leaders.insert(key, leader.clone());
                leader
            }
        };
        match leader {
            Ok(id) => match by_leader.iter_mut().find(|(l, _)| *l == id) {
                Some((_, group)) => group.push(batch),
                None => by_leader.push((id, vec![batch])),
            },
            Err(e) => shared.failed(batch, e),
        }
    }
    for (leader, group) in by_leader {
        send_to_leader(shared, leader, group).await;
    }
}

/// In a transaction, adds the partitions of `batches` it does not hold yet (one
/// AddPartitionsToTxn); the batches of partitions that could not be added fail.
async fn join_transaction(shared: &Arc<Shared>, batches: Vec<ProducerBatch>) -> Vec<ProducerBatch> {
    let new: Vec<(Arc<str>, i32)> = {
        let txn = shared.txn.lock();
        if !txn.active {
            return batches;
        }
        let mut new: Vec<(Arc<str>, i32)> = batches
            .iter()
            .map(|b| (Arc::clone(&b.topic), b.partition))
            .filter(|p| !txn.partitions.contains(p))
            .collect();
        new.sort();
        new.dedup();
        new
    };
    if new.is_empty() {
        return batches;
    }
    match super::transaction::add_partitions(shared, &new).await {
        Ok(()) => {
            shared.txn.lock().partitions.extend(new);
            batches
        }
        Err(e) => {
            let (refused, rest): (Vec<_>, Vec<_>) = batches
                .into_iter()
                .partition(|b| new.contains(&(Arc::clone(&b.topic), b.partition)));
            for batch in refused {
                shared.give_up(batch, e.clone());
            }
            rest
        }
    }
}

async fn send_to_leader(shared: &Arc<Shared>, leader: i32, batches: Vec<ProducerBatch>) {
    let mut sendable = Vec::with_capacity(batches.len());
    let transactional = shared.in_transaction();
    for mut batch in batches {
        match batch.payload(shared.config.compression, transactional) {
            Ok(bytes) => sendable.push((batch, bytes)),
            Err(reason) => {
                let err: Error = ProtocolError::Encode {
                    api: "record batch",
                    version: 2,
                    reason,
                }
                .into();
                shared.give_up(batch, err);
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
    if acks == 0 {
        return send_unanswered(shared, &conn, sendable, timeout_ms).await;
    }
    let transactional_id = shared
        .config
        .transactional_id
        .as_deref()
        .filter(|_| transactional)
        .map(Arc::from);
    let mut requests = split_by_round(sendable).into_iter();
    while let Some(round) = requests.next() {
        match conn
            .start(|_| {
                ProduceBody::transactional(&round, transactional_id.clone(), acks, timeout_ms)
            })
            .await
        {
            Ok(pending) => {
                let addr = conn.addr().to_string();
                tokio::spawn(settle_answer(Arc::clone(shared), pending, round, addr));
            }
            Err(e) => {
                // The connection is broken: this request and the ones after it go back to
                // their queues, in order.
                for (batch, _) in round.into_iter().chain(requests.flatten()) {
                    shared.failed(batch, e.clone());
                }
                return;
            }
        }
    }
}

/// acks=0: the broker answers nothing, so offsets stay unknown, as in Kafka.
async fn send_unanswered(
    shared: &Arc<Shared>,
    conn: &BrokerConnection,
    sendable: Vec<(ProducerBatch, Bytes)>,
    timeout_ms: i32,
) {
    for round in split_by_round(sendable) {
        let sent = conn
            .send_only(|_| ProduceBody::new(&round, 0, timeout_ms))
            .await;
        for (batch, _) in round {
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
    }
}

async fn settle_answer(
    shared: Arc<Shared>,
    pending: PendingCall<ProduceRequest>,
    round: Vec<(ProducerBatch, Bytes)>,
    addr: String,
) {
    match pending.answer().await {
        Ok(resp) => {
            for (batch, _) in round {
                match find(&resp, &batch.topic, batch.partition) {
                    Some(answer) => shared.answered(batch, answer, &addr),
                    None => {
                        let err = ProtocolError::BadAnswer {
                            api: "Produce",
                            reason: format!("no answer for {}-{}", batch.topic, batch.partition),
                        };
                        shared.give_up(batch, err.into());
                    }
                }
            }
        }
        Err(e) => {
            for (batch, _) in round {
                shared.failed(batch, e.clone());
            }
        }
    }
}

/// Kafka allows one batch per partition in a Produce request, so a partition's second batch
/// goes in a second request, and so on; batches keep their order within each partition.
fn split_by_round(batches: Vec<(ProducerBatch, Bytes)>) -> Vec<Vec<(ProducerBatch, Bytes)>> {
    let mut rounds: Vec<Vec<(ProducerBatch, Bytes)>> = Vec::new();
    let mut seen: HashMap<(Arc<str>, i32), usize> = HashMap::new();
    for entry in batches {
        let key = (Arc::clone(&entry.0.topic), entry.0.partition);
        let round = seen.entry(key).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(entry);
        *round += 1;
    }
    rounds
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
    use crate::producer::accumulator::Accumulator;
    use crate::producer::batch::sealed;
    use crate::producer::identity::ProducerIdAndEpoch;
    use crate::producer::partitioner::Target;
    use std::time::Duration;

    #[test]
    fn a_partitions_batches_go_in_successive_requests_in_sequence_order() {
        let now = Instant::now();
        let mut acc = Accumulator::new(100, Duration::ZERO, 5);
        for (p, n) in [(0, 3), (1, 1)] {
            for _ in 0..n {
                acc.append(
                    "t",
                    Target::Partition(p),
                    0,
                    None,
                    Some(&[0; 100]),
                    &[],
                    1,
                    now,
                );
            }
        }
        let stamp = ProducerIdAndEpoch {
            producer_id: 3,
            epoch: 0,
        };
        let (ready, _) = acc.drain(now, true, Some(stamp));
        let rounds = split_by_round(sealed(ready));
        let shape: Vec<Vec<(i32, i32)>> = rounds
            .iter()
            .map(|r| {
                r.iter()
                    .map(|(b, _)| (b.partition, b.identity().base_sequence))
                    .collect()
            })
            .collect();
        let mut first = shape[0].clone();
        first.sort();
        assert_eq!(first, [(0, 0), (1, 0)]);
        assert_eq!(shape[1..], [vec![(0, 1)], vec![(0, 2)]]);
    }
}
