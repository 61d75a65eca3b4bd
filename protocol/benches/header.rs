//! What the broker does to every request before any handler runs, without I/O: peek the header
//! prefix (routing), split frames off the read buffer, and, for a produce, decode the request
//! with an opaque batch and check the batch's header and CRC-32C. C.3's goals: header parse
//! <= 100 ns, Produce request decode with an opaque 16 KiB batch <= 1 us, CRC-32C >= 20 GiB/s.
//! Run with `cargo bench -p protocol --bench header`.

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use protocol::batch::{validate_single_batch, HEADER_LEN};
use protocol::frame::{split_frame, DEFAULT_MAX_FRAME_BYTES};
use protocol::kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use protocol::kafka_protocol::messages::{ProduceRequest, TopicName};
use protocol::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use protocol::versions::HeaderPrefix;

/// A v2 batch of `len` bytes that passes validation: header fields set, CRC-32C computed over
/// everything after it; the records area is opaque filler, as the broker treats it.
fn batch(len: usize) -> Vec<u8> {
    let mut b = vec![0x5au8; len.max(HEADER_LEN)];
    b[..8].copy_from_slice(&0i64.to_be_bytes());
    let batch_length = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&batch_length.to_be_bytes());
    b[16] = 2; // magic
    b[21..23].copy_from_slice(&0i16.to_be_bytes()); // attributes: uncompressed
    b[23..27].copy_from_slice(&9i32.to_be_bytes()); // last offset delta
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes()); // no producer id
    b[57..61].copy_from_slice(&10i32.to_be_bytes()); // record count
    let crc = protocol::batch::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn header_prefix(c: &mut Criterion) {
    // A Produce v9 request header: api key 0, version 9, correlation id 7.
    let frame: Vec<u8> = [0u8, 0, 0, 9, 0, 0, 0, 7, 0, 5, b'b', b'e', b'n', b'c', b'h'].to_vec();
    c.bench_function("header_prefix_peek", |b| {
        b.iter(|| HeaderPrefix::peek(black_box(&frame)))
    });
}

fn frame_split(c: &mut Criterion) {
    // 64 small requests back to back, as a pipelining client leaves them in the read buffer.
    let mut buf = BytesMut::new();
    for _ in 0..64 {
        buf.extend_from_slice(&100i32.to_be_bytes());
        buf.extend_from_slice(&[7u8; 100]);
    }
    let mut group = c.benchmark_group("frame_split");
    group.throughput(Throughput::Elements(64));
    group.bench_function("64_frames_of_100_bytes", |b| {
        b.iter_batched(
            || buf.clone(),
            |mut buf| {
                let mut n = 0;
                while let Ok(Some(frame)) = split_frame(&mut buf, DEFAULT_MAX_FRAME_BYTES) {
                    n += frame.len();
                }
                n
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn produce_decode(c: &mut Criterion) {
    let records = Bytes::from(batch(16 << 10));
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("bench-topic")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let mut encoded = BytesMut::new();
    request.encode(&mut encoded, 9).expect("encodes at v9");
    let encoded = encoded.freeze();
    c.bench_function("produce_request_decode_v9_16KiB_batch", |b| {
        b.iter(|| {
            let mut body = black_box(encoded.clone());
            ProduceRequest::decode(&mut body, 9).expect("decodes")
        })
    });
}

fn batch_validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch_validate_header_and_crc");
    for len in [16usize << 10, 1 << 20] {
        let b = batch(len);
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::from_parameter(len), &b, |bench, b| {
            bench.iter(|| validate_single_batch(black_box(b)).expect("valid"))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    header_prefix,
    frame_split,
    produce_decode,
    batch_validate
);
criterion_main!(benches);
