//! Peers that hang up, wait forever or never read: none may hold a connection slot, a shutdown
//! or the broker's memory for longer than the limits say. Paused clock: the broker's timers run
//! in virtual time, so a wait of days shows as days without taking them.

use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, MetadataRequest};
use tests::*;
use tokio::io::AsyncReadExt;
use tokio::net::TcpSocket;
use tokio::time::Instant;

async fn served_within(broker: &Broker, limit: Duration) {
    let start = Instant::now();
    let mut client = RawClient::connect(broker.addr()).await;
    let metadata = client
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    assert_eq!(metadata.brokers.len(), 1);
    let waited = start.elapsed();
    assert!(waited < limit, "a new client waited {waited:?}");
}

/// A broker with topic `t` of one partition; the client that made it has hung up.
async fn broker_with_topic(config: BrokerConfig) -> Broker {
    let broker = start_broker(config).await;
    let mut client = RawClient::connect(broker.addr()).await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    broker
}

#[tokio::test(start_paused = true)]
async fn a_closed_connection_ends_its_parked_fetch_and_frees_its_slot() {
    let broker = broker_with_topic(BrokerConfig {
        max_connections: 4,
        ..Default::default()
    })
    .await;
    // Four fetches parked for as long as the protocol allows (24.8 days), then hung up on.
    for _ in 0..4 {
        let mut client = RawClient::connect(broker.addr()).await;
        client.send(&fetch_request("t", 0, 0, i32::MAX), 12).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    served_within(&broker, Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_parked_fetches() {
    let broker = broker_with_topic(BrokerConfig::default()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    client.send(&fetch_request("t", 0, 0, i32::MAX), 12).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let start = Instant::now();
    broker.shutdown().await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert!(client.closed_by_broker().await);
}

#[tokio::test(start_paused = true)]
async fn max_wait_is_capped_by_the_broker() {
    let broker = broker_with_topic(BrokerConfig::default()).await;
    let mut client = RawClient::connect(broker.addr()).await;
    let start = Instant::now();
    let response = client.call(&fetch_request("t", 0, 0, 120_000), 12).await;
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    let waited = start.elapsed();
    assert!(
        (Duration::from_secs(30)..Duration::from_secs(31)).contains(&waited),
        "{waited:?}"
    );
}

/// A connection whose receive window is a few KiB and that never reads.
async fn slow_reader(broker: &Broker) -> tokio::net::TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(broker.addr()).await.unwrap()
}

/// A fetch of up to 64 MiB from one partition.
fn big_fetch(max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(64 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name("t"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(64 << 20)])])
}

/// `t` holding `batches` batches of about 1 MiB each.
async fn fill(broker: &Broker, batches: usize) -> usize {
    let mut client = RawClient::connect(broker.addr()).await;
    let value = "x".repeat(1000 << 10);
    let mut total = 0;
    for _ in 0..batches {
        let records = batch(
            &[(None, &value, 1000)],
            kafka_protocol::records::Compression::None,
        );
        total += records.len();
        assert_eq!(produce(&mut client, "t", 0, records, 9).await.error_code, 0);
    }
    total
}

/// Sends `request` as Fetch v12 on a raw stream, without reading anything back.
async fn send_fetch(stream: &mut tokio::net::TcpStream, request: &FetchRequest) {
    use kafka_protocol::protocol::{Encodable, HeaderVersion, Request};
    use tokio::io::AsyncWriteExt;
    let header = kafka_protocol::messages::RequestHeader::default()
        .with_request_api_key(FetchRequest::KEY)
        .with_request_api_version(12)
        .with_correlation_id(1);
    let mut out = bytes::BytesMut::new();
    let at = protocol::frame::start_frame(&mut out);
    header
        .encode(&mut out, FetchRequest::header_version(12))
        .unwrap();
    request.encode(&mut out, 12).unwrap();
    protocol::frame::finish_frame(&mut out, at, 0).unwrap();
    stream.write_all(&out).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_never_reads_is_closed_after_the_write_timeout() {
    let broker = broker_with_topic(BrokerConfig::default()).await;
    let stored = fill(&broker, 12).await;
    let mut slow = slow_reader(&broker).await;
    send_fetch(&mut slow, &big_fetch(0)).await;
    tokio::time::sleep(Duration::from_secs(31)).await;
    // Closed by now: what reaches the reader is what the kernel had buffered, not the answer.
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), slow.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "the broker still holds the connection");
    assert!(
        received.len() < stored,
        "{} of {stored} bytes",
        received.len()
    );
}

#[tokio::test(start_paused = true)]
async fn unsent_fetch_answers_hold_at_most_the_fetch_memory_budget() {
    let broker = broker_with_topic(BrokerConfig {
        fetch_memory_bytes: 4 << 20,
        write_timeout: Duration::from_secs(10),
        ..Default::default()
    })
    .await;
    fill(&broker, 12).await;
    // Three readers that never read ask for 12 MiB each.
    let mut slow = Vec::new();
    for _ in 0..3 {
        let mut stream = slow_reader(&broker).await;
        send_fetch(&mut stream, &big_fetch(0)).await;
        slow.push(stream);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let held = broker.state().fetch_memory.held();
        assert!(held <= 4 << 20, "{held} bytes held");
    }
    assert!(broker.state().fetch_memory.held() > 3 << 20);
    // A good reader waits for the budget (not for ever: the first slow one times out 10 s after
    // it was answered, a few ms before this) and is served.
    let start = Instant::now();
    let mut good = RawClient::connect(broker.addr()).await;
    let response = good.call(&big_fetch(20_000), 12).await;
    let records = response.responses[0].partitions[0].records.clone().unwrap();
    assert!(!records.is_empty());
    assert!(records.len() <= 4 << 20, "{} bytes", records.len());
    let waited = start.elapsed();
    assert!(
        (Duration::from_secs(9)..Duration::from_secs(10)).contains(&waited),
        "{waited:?}"
    );
}

/// Runs `work` on a paused clock that does not move: a branch that only yields keeps the runtime
/// busy, and a paused clock jumps to the next timer only when the runtime is idle. What `work`
/// waits for is then real I/O, never a timer. A real minute without an end is a hang.
async fn with_the_clock_held<T>(work: impl std::future::Future<Output = T>) -> T {
    let hung = std::time::Instant::now() + Duration::from_secs(60);
    let spin = async {
        while std::time::Instant::now() < hung {
            tokio::task::yield_now().await;
        }
    };
    tokio::select! {
        done = work => done,
        () = spin => panic!("not done within a real minute"),
    }
}

#[tokio::test(start_paused = true)]
async fn metrics_scrapers_that_never_read_block_nobody() {
    let broker = start_broker(BrokerConfig {
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .await;
    let metrics = broker.metrics_addr().unwrap();
    // Some 9 MB of metrics: long topic names, 10,000 partitions.
    let mut client = RawClient::connect(broker.addr()).await;
    for prefix in ["a", "b"] {
        let name = format!("{prefix}{}", "x".repeat(248));
        assert_eq!(create_topic(&mut client, &name, 5000).await, 0);
    }
    let mut scrapers = Vec::new();
    for _ in 0..16 {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(metrics).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut stream, b"GET /metrics HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        scrapers.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Served with the clock held still: no timer can fire meanwhile, so the slow scrapers are
    // not dropped by their write timeout first. Measuring the paused clock across this real
    // I/O instead measured its jumps: idle while the kernel moved the answer, the runtime
    // advanced to the next timer (the 10 s write timeout), and the scrape seemed to take 10 s.
    let start = Instant::now();
    let response = with_the_clock_held(http_get(metrics, "GET /metrics")).await;
    assert!(response.starts_with("HTTP/1.1 200 OK"));
    assert_eq!(start.elapsed(), Duration::ZERO, "no timer had to fire");
    // The slow ones are disconnected after the write timeout, their answers unfinished.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let mut received = Vec::new();
    let read = tokio::time::timeout(
        Duration::from_secs(60),
        scrapers[0].read_to_end(&mut received),
    );
    assert!(read.await.is_ok(), "the slow scraper is still connected");
    assert!(received.len() < response.len(), "{} bytes", received.len());
}
