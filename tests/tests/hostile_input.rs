//! Frames a broken or hostile client might send. After each, the broker has closed that
//! connection (or answered it, where Kafka answers) and a well-behaved client is still served.
//! None of these may panic the broker or allocate what a length prefix claims.

use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
use tests::*;

/// A request frame: size prefix, then `body` (which starts with the request header).
fn frame(body: &[u8]) -> Vec<u8> {
    let mut wire = (body.len() as i32).to_be_bytes().to_vec();
    wire.extend_from_slice(body);
    wire
}

/// A v1 request header: key, version, correlation id, null client id.
fn header(key: i16, version: i16) -> Vec<u8> {
    let mut h = key.to_be_bytes().to_vec();
    h.extend_from_slice(&version.to_be_bytes());
    h.extend_from_slice(&7i32.to_be_bytes());
    h.extend_from_slice(&(-1i16).to_be_bytes());
    h
}

async fn still_serves(broker: &Broker) {
    let mut good = RawClient::connect(broker.addr()).await;
    let response = good
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    assert_eq!(response.brokers.len(), 1);
}

async fn closes_after(broker: &Broker, wire: &[u8]) {
    let mut bad = RawClient::connect(broker.addr()).await;
    bad.send_bytes(wire).await;
    assert!(bad.closed_by_broker().await, "connection closed");
    still_serves(broker).await;
}

#[tokio::test]
async fn negative_and_oversized_frame_sizes_close_before_any_body_arrives() {
    let broker = start_broker(BrokerConfig {
        max_request_bytes: 1024 * 1024,
        ..Default::default()
    })
    .await;
    closes_after(&broker, &(-5i32).to_be_bytes()).await;
    closes_after(&broker, &i32::MIN.to_be_bytes()).await;
    // Claims 2 MiB over a 1 MiB cap and sends nothing more: refused on the prefix alone.
    closes_after(&broker, &(2 * 1024 * 1024i32).to_be_bytes()).await;
    closes_after(&broker, &i32::MAX.to_be_bytes()).await;
}

#[tokio::test]
async fn frames_too_short_for_a_header_close() {
    let broker = broker().await;
    closes_after(&broker, &frame(&[])).await;
    closes_after(&broker, &frame(&[0, 3, 0])).await;
    closes_after(&broker, &frame(&[0, 3, 0, 1, 0, 0, 0])).await;
}

#[tokio::test]
async fn unknown_keys_and_unsupported_versions_close_as_kafka_does() {
    let broker = broker().await;
    closes_after(&broker, &frame(&header(999, 0))).await;
    closes_after(&broker, &frame(&header(-1, 0))).await;
    closes_after(&broker, &frame(&header(0, 2))).await; // Produce v2: below KIP-896's floor
    closes_after(&broker, &frame(&header(1, 13))).await; // Fetch v13: topic ids only
    closes_after(&broker, &frame(&header(3, -1))).await;
    // A known API we do not serve (ShareFetch) closes too.
    closes_after(&broker, &frame(&header(57, 0))).await;
}

#[tokio::test]
async fn garbage_bodies_close() {
    let broker = broker().await;
    let mut body = header(3, 9);
    body.extend_from_slice(&[0xff; 40]);
    closes_after(&broker, &frame(&body)).await;
    // A header whose client id claims more bytes than the frame has.
    let mut lying = header(18, 3);
    lying.truncate(8);
    lying.extend_from_slice(&500i16.to_be_bytes());
    lying.extend_from_slice(b"abc");
    closes_after(&broker, &frame(&lying)).await;
}

#[tokio::test]
async fn absurd_array_lengths_are_refused_not_allocated() {
    let broker = broker().await;
    // Metadata v1: topics array of i32::MAX entries in a 14-byte body.
    let mut metadata = header(3, 1);
    metadata.extend_from_slice(&i32::MAX.to_be_bytes());
    closes_after(&broker, &frame(&metadata)).await;
    // CreateTopics v2: 2^31 - 1 topics of ~100 bytes each would be ~200 GiB up front.
    let mut create = header(19, 2);
    create.extend_from_slice(&(i32::MAX - 1).to_be_bytes());
    create.extend_from_slice(&[0; 16]);
    closes_after(&broker, &frame(&create)).await;
    // Metadata v9 (flexible): a compact array length of u32::MAX as an unsigned varint.
    let mut flexible = header(3, 9);
    flexible.truncate(8);
    flexible.extend_from_slice(&(-1i16).to_be_bytes());
    flexible.push(0); // header tagged fields
    flexible.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    closes_after(&broker, &frame(&flexible)).await;
    // Produce v3: one topic whose partition array claims i32::MAX entries.
    let mut produce = header(0, 3);
    produce.extend_from_slice(&(-1i16).to_be_bytes()); // transactional id
    produce.extend_from_slice(&1i16.to_be_bytes()); // acks
    produce.extend_from_slice(&1000i32.to_be_bytes()); // timeout
    produce.extend_from_slice(&1i32.to_be_bytes()); // one topic
    produce.extend_from_slice(&1i16.to_be_bytes());
    produce.push(b't');
    produce.extend_from_slice(&i32::MAX.to_be_bytes());
    closes_after(&broker, &frame(&produce)).await;
}

#[tokio::test]
async fn a_truncated_frame_then_hang_up_harms_nobody() {
    let broker = broker().await;
    {
        let mut bad = RawClient::connect(broker.addr()).await;
        let mut body = header(18, 3);
        body.extend_from_slice(&[0; 10]);
        let wire = frame(&body);
        bad.send_bytes(&wire[..wire.len() / 2]).await;
    } // dropped mid-frame
    still_serves(&broker).await;
}

#[tokio::test]
async fn a_slow_writer_does_not_hold_up_other_clients() {
    let broker = broker().await;
    let mut slow = RawClient::connect(broker.addr()).await;
    // A valid ApiVersions v0 request, sent in pieces with other traffic in between.
    let wire = frame(&header(18, 0));
    for byte in &wire[..wire.len() - 1] {
        slow.send_bytes(&[*byte]).await;
        tokio::task::yield_now().await;
    }
    still_serves(&broker).await;
    slow.send_bytes(&wire[wire.len() - 1..]).await;
    let (correlation_id, response) = slow.receive::<ApiVersionsRequest>(0).await;
    assert_eq!((correlation_id, response.error_code), (7, 0));
}

#[tokio::test]
async fn hundreds_of_idle_connections_do_not_starve_a_working_one() {
    let broker = broker().await;
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(RawClient::connect(broker.addr()).await);
    }
    still_serves(&broker).await;
    // The idle ones are still open and served when they speak.
    for client in idle.iter_mut().step_by(50) {
        let response = client.call(&ApiVersionsRequest::default(), 3).await;
        assert_eq!(response.error_code, 0);
    }
}

/// xorshift64*: a seeded generator, so a failure reproduces.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[tokio::test]
async fn mutated_valid_requests_never_take_the_broker_down() {
    let broker = start_broker(BrokerConfig {
        auto_create_topics: true,
        ..Default::default()
    })
    .await;
    // Valid frames to start from: a metadata request naming a topic, and a produce.
    let mut seeds = Vec::new();
    let mut metadata = header(3, 1);
    metadata.extend_from_slice(&1i32.to_be_bytes());
    metadata.extend_from_slice(&1i16.to_be_bytes());
    metadata.push(b't');
    seeds.push(metadata);
    let mut produce = header(0, 3);
    produce.extend_from_slice(&(-1i16).to_be_bytes());
    produce.extend_from_slice(&1i16.to_be_bytes());
    produce.extend_from_slice(&1000i32.to_be_bytes());
    produce.extend_from_slice(&1i32.to_be_bytes());
    produce.extend_from_slice(&1i16.to_be_bytes());
    produce.push(b't');
    produce.extend_from_slice(&1i32.to_be_bytes());
    produce.extend_from_slice(&0i32.to_be_bytes());
    let records = values(3);
    produce.extend_from_slice(&(records.len() as i32).to_be_bytes());
    produce.extend_from_slice(&records);
    seeds.push(produce);

    let mut rng = 0x5eed_u64;
    for round in 0..400 {
        let mut body = seeds[round % seeds.len()].clone();
        for _ in 0..1 + next(&mut rng) % 4 {
            let at = (next(&mut rng) as usize) % body.len();
            body[at] = next(&mut rng) as u8;
        }
        if next(&mut rng).is_multiple_of(5) {
            body.truncate((next(&mut rng) as usize) % body.len());
        }
        let mut client = RawClient::connect(broker.addr()).await;
        client.send_bytes(&frame(&body)).await;
        // Either an answer or a close; both are fine, a dead broker is not.
        let _ = client.next_frame().await;
    }
    still_serves(&broker).await;
}
