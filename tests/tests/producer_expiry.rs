//! Producer state expires as in Kafka (issue 29, item 5): a partition forgets a producer id idle
//! for `producer.id.expiration.ms` unless its transaction is open there, and the coordinator a
//! transactional id idle for `transactional.id.expiration.ms` with no transaction under way.
//! Expiry is run at chosen times (as the background task runs it every
//! `producer.id.expiration.check.interval.ms`), so no test waits.

use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use tests::*;

const DAY_MS: i64 = 86_400_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn init(client: &mut RawClient, id: Option<&str>) -> (i16, i64, i16) {
    let answer = init_producer_id(client, id, 60_000).await;
    (
        answer.error_code,
        answer.producer_id.0,
        answer.producer_epoch,
    )
}

async fn add_partition(client: &mut RawClient, id: &str, producer: (i64, i16)) -> i16 {
    add_partitions_to_txn(client, id, producer, &[0], 3).await[0]
}

/// One record stamped at `timestamp` from `producer` at `sequence`.
fn stamped(
    producer: (i64, i16),
    sequence: i32,
    timestamp: i64,
    transactional: bool,
) -> bytes::Bytes {
    let stamp = ProducerStamp {
        id: producer.0,
        epoch: producer.1,
        base_sequence: sequence,
    };
    records_batch(
        &[(None, Some("v"), timestamp)],
        Compression::None,
        Some(stamp),
        transactional,
    )
}

#[tokio::test]
async fn an_idle_idempotent_producer_is_forgotten_after_producer_id_expiration_ms() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let (_, pid, epoch) = init(&mut client, None).await;
    let sent = now_ms();
    let first = produce(
        &mut client,
        "t",
        0,
        stamped((pid, epoch), 0, sent, false),
        9,
    )
    .await;
    assert_eq!(first.error_code, 0);
    // A gap in the sequence: out of order while the producer is known.
    let gap = produce(
        &mut client,
        "t",
        0,
        stamped((pid, epoch), 5, sent, false),
        9,
    )
    .await;
    assert_eq!(
        gap.error_code,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    let expired = broker.expire_producer_state(sent + DAY_MS - 1).await;
    assert_eq!(expired.producer_entries, 0, "idle for less than a day");
    let expired = broker.expire_producer_state(sent + DAY_MS).await;
    assert_eq!(expired.producer_entries, 1);
    // Forgotten: a new producer to the partition, which takes any sequence (Kafka's rule).
    let after = produce(
        &mut client,
        "t",
        0,
        stamped((pid, epoch), 5, sent, false),
        9,
    )
    .await;
    assert_eq!((after.error_code, after.base_offset), (0, 1));
}

#[tokio::test]
async fn an_idle_transactional_id_expires_and_an_open_transaction_holds_its_producer() {
    let broker = broker().await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let (_, done_pid, done_epoch) = init(&mut client, Some("done")).await;
    let done = (done_pid, done_epoch);
    let (_, open_pid, open_epoch) = init(&mut client, Some("open")).await;
    let open = (open_pid, open_epoch);
    assert_eq!(add_partition(&mut client, "open", open).await, 0);
    let start = now_ms();
    let sent = produce(&mut client, "t", 0, stamped(open, 0, start, true), 9).await;
    assert_eq!(sent.error_code, 0);

    let week_later = now_ms() + 7 * DAY_MS;
    let expired = broker.expire_producer_state(week_later).await;
    // "done" (Empty) expires; "open" has a transaction under way, and its producer an open
    // transaction in the partition, so neither goes.
    assert_eq!(expired.transactional_ids, 1);
    assert_eq!(expired.producer_entries, 0);
    assert_eq!(
        add_partition(&mut client, "done", done).await,
        ResponseError::InvalidProducerIdMapping.code()
    );
    let (code, fresh, epoch) = init(&mut client, Some("done")).await;
    assert_eq!((code, epoch), (0, 0));
    assert_ne!(
        fresh, done_pid,
        "an expired transactional id gets a new producer id"
    );
    // The open transaction goes on as if nothing happened.
    let more = produce(&mut client, "t", 0, stamped(open, 1, start, true), 9).await;
    assert_eq!((more.error_code, more.base_offset), (0, 1));
}
