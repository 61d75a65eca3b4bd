//! The client reads committed offsets with OffsetFetch v8+ (a batch of groups, the form
//! librdkafka sends) whenever the coordinator offers it. Some Kafka-protocol brokers are only
//! ever asked that form by librdkafka and answer the single-group form (v1-7) badly; this test
//! puts such a broker between the client and ours: a proxy that answers every OffsetFetch below
//! v8 with "nothing committed", whatever was committed, and passes the rest through.

mod client_common;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bytes::{BufMut, BytesMut};
use client::{Admin, TopicPartition};
use client_common::*;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, OffsetFetchRequest, OffsetFetchResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use protocol::frame::{read_frame, DEFAULT_MAX_FRAME_BYTES};
use protocol::versions::HeaderPrefix;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// Serves one client connection: OffsetFetch v1-7 answered with -1 for every partition asked,
/// everything else forwarded to `broker` one request at a time.
async fn serve(mut from: TcpStream, broker: SocketAddr) {
    let mut to = TcpStream::connect(broker).await.unwrap();
    let (mut in_buf, mut out_buf) = (BytesMut::new(), BytesMut::new());
    while let Ok(Some(frame)) = read_frame(&mut from, &mut in_buf, DEFAULT_MAX_FRAME_BYTES).await {
        let prefix = HeaderPrefix::peek(&frame).unwrap();
        let answer = if prefix.api_key == ApiKey::OffsetFetch as i16 && prefix.api_version < 8 {
            forgetful_answer(frame, prefix.api_version)
        } else {
            let mut request = BytesMut::new();
            request.put_i32(frame.len() as i32);
            request.extend_from_slice(&frame);
            to.write_all(&request).await.unwrap();
            read_frame(&mut to, &mut out_buf, DEFAULT_MAX_FRAME_BYTES)
                .await
                .unwrap()
                .expect("the broker answers")
        };
        let mut out = BytesMut::new();
        out.put_i32(answer.len() as i32);
        out.extend_from_slice(&answer);
        if from.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// An OffsetFetch answer (header and body, no size prefix) saying nothing was ever committed.
fn forgetful_answer(frame: BytesMut, version: i16) -> BytesMut {
    let key = ApiKey::OffsetFetch;
    let mut body = frame.freeze();
    let header = RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
    let request = OffsetFetchRequest::decode(&mut body, version).unwrap();
    let topics = request
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .into_iter()
                .map(|p| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(-1)
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    let mut out = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(header.correlation_id)
        .encode(&mut out, key.response_header_version(version))
        .unwrap();
    OffsetFetchResponse::default()
        .with_topics(topics)
        .encode(&mut out, version)
        .unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_are_read_through_a_broker_that_answers_v7_badly() {
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_addr = proxy.local_addr().unwrap();
    // Our broker tells clients to come back through the proxy, so every request passes it.
    let broker = broker::Broker::start(broker::BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertised_listener: Some(("127.0.0.1".into(), proxy_addr.port())),
        ..broker::BrokerConfig::default()
    })
    .await
    .unwrap();
    let upstream = broker.addr();
    tokio::spawn(async move {
        while let Ok((conn, _)) = proxy.accept().await {
            tokio::spawn(serve(conn, upstream));
        }
    });

    let client = connect(proxy_addr).await;
    create_topic(&client, "orders", 2).await;
    let admin = Admin::new(client);
    let tp = |p| TopicPartition::new("orders", p);
    let offsets = BTreeMap::from([(tp(0), 4), (tp(1), 9)]);
    let results = admin.commit_offsets("billing", &offsets).await.unwrap();
    assert!(results.iter().all(|(_, r)| r.is_ok()), "{results:?}");
    let committed = admin.list_group_offsets("billing", None).await.unwrap();
    assert_eq!(
        committed,
        BTreeMap::from([(tp(0), Some(4)), (tp(1), Some(9))])
    );
    let asked = [tp(1), tp(0)];
    let committed = admin
        .list_group_offsets("billing", Some(&asked))
        .await
        .unwrap();
    assert_eq!(
        committed,
        BTreeMap::from([(tp(0), Some(4)), (tp(1), Some(9))])
    );
    broker.shutdown().await;
}
