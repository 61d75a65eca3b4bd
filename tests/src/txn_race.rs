//! A transactional Produce racing its producer's EndTxn on another connection (issue 29, item
//! 1): the batch is either in the transaction, before its marker, or refused with
//! INVALID_TXN_STATE; data never follows the marker that ended its transaction. Each iteration
//! sends the Produce and the EndTxn, alternately a commit and an abort, some microseconds apart
//! (the EndTxn first when negative); the gap follows the boundary between the two outcomes
//! (larger after a refusal, smaller after an acceptance), where the EndTxn lands while the
//! Produce is being handled.
//! Then a read_committed reader, which keeps Kafka's consumer state across fetches, checks what
//! became visible.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::*;
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use kafka_protocol::ResponseError;

/// Large enough that copying and checking a batch takes tens of microseconds, the window the
/// race needs (the reproduction used 512 KiB batches too).
const VALUE_BYTES: usize = 512 << 10;
/// How much the EndTxn's delay after the Produce moves after each outcome, in microseconds.
const DELAY_STEP_US: i64 = 2;

fn txn_id() -> TransactionalId {
    TransactionalId(StrBytes::from_static_str("racer"))
}

/// What the read_committed reader saw and the violations it found.
#[derive(Debug, Default)]
pub struct Findings {
    /// A data batch at an offset above the marker of its own iteration.
    pub data_after_marker: usize,
    /// No transaction open, yet the last stable offset below the high watermark.
    pub stuck_stable_offset: usize,
    /// Records of aborted transactions that read_committed showed.
    pub aborted_visible: usize,
    /// Records acknowledged in a committed transaction that read_committed never showed.
    pub committed_lost: usize,
}

/// A read_committed consumer: reads on from `position` and filters aborted transactions as
/// Kafka's `Fetcher` does, with its state kept between fetches.
struct Reader {
    position: i64,
    /// Aborted transactions a fetch told of and not yet reached: (producer id, first offset).
    pending_aborts: BTreeSet<(i64, i64)>,
    /// Producers whose batches are being skipped until their abort marker.
    aborting: BTreeSet<i64>,
    /// Iterations whose records read_committed showed.
    shown: BTreeSet<usize>,
}

impl Reader {
    /// Reads up to the last stable offset; returns the high watermark and the last stable
    /// offset of the last fetch.
    async fn read_to_stable(&mut self, client: &mut RawClient) -> (i64, i64) {
        loop {
            let request = fetch_request("t", 0, self.position, 0).with_isolation_level(1);
            let answer = client.call(&request, 12).await;
            let p = &answer.responses[0].partitions[0];
            assert_eq!(p.error_code, 0);
            for aborted in p.aborted_transactions.iter().flatten() {
                self.pending_aborts
                    .insert((aborted.producer_id.0, aborted.first_offset));
            }
            let mut data = p.records.clone().unwrap_or_default();
            for batch in RecordBatchDecoder::decode_all(&mut data).unwrap() {
                for record in batch.records {
                    self.position = record.offset + 1;
                    let producer = record.producer_id;
                    if record.control {
                        // The control key: version (2 bytes), then type 0 abort, 1 commit.
                        let key = record.key.unwrap_or_default();
                        if key.get(3) == Some(&0) {
                            self.aborting.remove(&producer);
                        }
                        continue;
                    }
                    let started = self
                        .pending_aborts
                        .iter()
                        .find(|(p, first)| *p == producer && *first <= record.offset)
                        .copied();
                    if let Some(started) = started {
                        self.pending_aborts.remove(&started);
                        self.aborting.insert(producer);
                    }
                    if !self.aborting.contains(&producer) {
                        self.shown
                            .insert(iteration_of(&record.value.unwrap_or_default()));
                    }
                }
            }
            if self.position >= p.last_stable_offset {
                return (p.high_watermark, p.last_stable_offset);
            }
        }
    }
}

/// The iteration a record's value names: "<c|a><iteration>:" then filler.
fn iteration_of(value: &Bytes) -> usize {
    let text = String::from_utf8_lossy(&value[..value.len().min(32)]).into_owned();
    text[1..text.find(':').expect("a tagged value")]
        .parse()
        .expect("an iteration number")
}

fn batch(producer: (i64, i16), sequence: i32, iteration: usize, commit: bool) -> Bytes {
    let tag = format!("{}{iteration}:", if commit { 'c' } else { 'a' });
    let value = format!("{tag}{}", "x".repeat(VALUE_BYTES - tag.len()));
    let stamp = ProducerStamp {
        id: producer.0,
        epoch: producer.1,
        base_sequence: sequence,
    };
    records_batch(
        &[(None, Some(value.as_str()), 1_000)],
        Compression::None,
        Some(stamp),
        true,
    )
}

/// Offsets of data batches and of markers from `from` on (read_uncommitted).
async fn layout(client: &mut RawClient, from: i64) -> (Vec<i64>, Vec<i64>) {
    let answer = client.call(&fetch_request("t", 0, from, 0), 12).await;
    let p = &answer.responses[0].partitions[0];
    let mut data = p.records.clone().unwrap_or_default();
    let (mut records, mut markers) = (Vec::new(), Vec::new());
    for batch in RecordBatchDecoder::decode_all(&mut data).unwrap() {
        for r in batch.records {
            if r.control {
                markers.push(r.offset);
            } else {
                records.push(r.offset);
            }
        }
    }
    (records, markers)
}

async fn delete_records_before(client: &mut RawClient, offset: i64) {
    let request = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])])
        .with_timeout_ms(5_000);
    let answer = client.call(&request, 2).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 0);
}

/// Runs `iterations` racing transactions against `broker` (on a topic "t" it creates).
pub async fn race(broker: &Broker, iterations: usize) -> Findings {
    let mut control = RawClient::connect(broker.addr()).await;
    let mut producer_link = RawClient::connect(broker.addr()).await;
    let mut ender = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut control, "t", 1).await, 0);
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let answer = control.call(&init, 4).await;
    assert_eq!(answer.error_code, 0);
    let producer = (answer.producer_id.0, answer.producer_epoch);
    let mut sequence = 0;
    let mut findings = Findings::default();
    let mut reader = Reader {
        position: 0,
        pending_aborts: BTreeSet::new(),
        aborting: BTreeSet::new(),
        shown: BTreeSet::new(),
    };
    let mut committed = BTreeSet::new();
    let mut aborted = BTreeSet::new();
    let mut delay_us: i64 = 100;
    for iteration in 0..iterations {
        let commit = iteration % 2 == 0;
        let add = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id())
            .with_v3_and_below_producer_id(ProducerId(producer.0))
            .with_v3_and_below_producer_epoch(producer.1)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![0])]);
        let added = control.call(&add, 3).await;
        assert_eq!(
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
            0
        );
        let start = list_offset(&mut control, "t", 0, -1).await.2;

        let produce = produce_request("t", 0, batch(producer, sequence, iteration, commit), -1);
        let end = EndTxnRequest::default()
            .with_transactional_id(txn_id())
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_committed(commit);
        let (_, produce_frame) = producer_link.frame(&produce, 9);
        let (_, end_frame) = ender.frame(&end, 3);
        let gap = Duration::from_micros(delay_us.unsigned_abs());
        let (first, second) = if delay_us >= 0 {
            (
                (&mut producer_link, &produce_frame),
                (&mut ender, &end_frame),
            )
        } else {
            (
                (&mut ender, &end_frame),
                (&mut producer_link, &produce_frame),
            )
        };
        first.0.send_bytes(first.1).await;
        let sent = Instant::now();
        while sent.elapsed() < gap {
            std::hint::spin_loop();
        }
        second.0.send_bytes(second.1).await;
        let (_, produced) = producer_link.receive::<ProduceRequest>(9).await;
        let (_, ended) = ender.receive::<EndTxnRequest>(3).await;
        assert_eq!(ended.error_code, 0, "iteration {iteration}");
        let produced = &produced.responses[0].partition_responses[0];
        match produced.error_code {
            0 => {
                delay_us -= DELAY_STEP_US;
                sequence += 1;
                if commit {
                    committed.insert(iteration);
                } else {
                    aborted.insert(iteration);
                }
            }
            code => {
                assert_eq!(code, ResponseError::InvalidTxnState.code());
                delay_us += DELAY_STEP_US;
            }
        }

        let (records, markers) = layout(&mut control, start).await;
        if records
            .iter()
            .any(|r| markers.first().is_some_and(|m| r > m))
        {
            findings.data_after_marker += 1;
        }
        let (high_watermark, stable) = reader.read_to_stable(&mut control).await;
        if stable != high_watermark {
            findings.stuck_stable_offset += 1;
        }
        // Keeps the broker's memory to what the reader has not read yet.
        delete_records_before(&mut control, reader.position).await;
    }
    findings.aborted_visible = reader.shown.intersection(&aborted).count();
    findings.committed_lost = committed.difference(&reader.shown).count();
    println!(
        "{iterations} iterations: {} committed, {} aborted, {} refused; EndTxn {delay_us} us \
         after the Produce at the end",
        committed.len(),
        aborted.len(),
        iterations - committed.len() - aborted.len()
    );
    findings
}

impl Findings {
    /// The four counts, in the order [`Findings::summary`] names them.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.data_after_marker,
            self.stuck_stable_offset,
            self.aborted_visible,
            self.committed_lost,
        )
    }

    /// One line: each kind of violation and its count.
    pub fn summary(&self, iterations: usize) -> String {
        format!(
            "violations in {iterations} iterations: data after its marker {}, stable offset \
             below the high watermark with no transaction open {}, aborted records shown {}, \
             committed records never shown {}",
            self.data_after_marker,
            self.stuck_stable_offset,
            self.aborted_visible,
            self.committed_lost
        )
    }
}
