//! What the broker does to every request before any handler runs, without I/O: peek the header
//! prefix (routing), split frames off the read buffer, and, for a produce, decode the request
//! with an opaque batch and check the batch's header and CRC-32C. C.3's goals: header parse
//! <= 100 ns, Produce request decode with an opaque 16 KiB batch <= 1 us, CRC-32C >= 20 GiB/s.
//! Then the check that a produced batch holds the records its header counts: one varint per
//! uncompressed record, a decompression walk per compressed batch.
//! Run with `cargo bench -p protocol --bench header`.

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use protocol::batch::{validate_single_batch, BatchHeader, HEADER_LEN};
use protocol::compression::Compression;
use protocol::frame::{split_frame, DEFAULT_MAX_FRAME_BYTES};
use protocol::kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use protocol::kafka_protocol::messages::{ProduceRequest, TopicName};
use protocol::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use protocol::records::check_records;
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

/// A valid 16 KiB batch of records with `value_len`-byte values, its records compressed with
/// `codec`.
fn batch_of_records(value_len: usize, codec: Compression) -> (Vec<u8>, BatchHeader) {
    let count = (16 << 10) / (value_len + 8);
    let mut records = Vec::new();
    for i in 0..count {
        // attributes, timestamp delta 0, offset delta i, null key, the value, no headers.
        let mut body = vec![0u8, 0];
        body.extend(zigzag(i as i64));
        body.push(1);
        body.extend(zigzag(value_len as i64));
        body.extend(std::iter::repeat_n(b'v', value_len));
        body.push(0);
        records.extend(zigzag(body.len() as i64));
        records.extend(body);
    }
    let mut compressed = BytesMut::new();
    codec
        .compress(&records, &mut compressed)
        .expect("compresses");
    let mut b = batch(HEADER_LEN);
    b.extend_from_slice(&compressed);
    let batch_length = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&batch_length.to_be_bytes());
    b[21..23].copy_from_slice(&codec.attribute_bits().to_be_bytes());
    b[23..27].copy_from_slice(&(count as i32 - 1).to_be_bytes());
    b[57..61].copy_from_slice(&(count as i32).to_be_bytes());
    let crc = protocol::batch::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    let header = validate_single_batch(&b).expect("valid");
    (b, header)
}

fn zigzag(v: i64) -> Vec<u8> {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut out = Vec::new();
    while z >= 0x80 {
        out.push(z as u8 | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
    out
}

fn records_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("check_records_16KiB");
    for (label, value_len, codec) in [
        ("none_1KiB_values", 1024, Compression::None),
        ("none_100B_values", 100, Compression::None),
        ("lz4_100B_values", 100, Compression::Lz4),
        ("gzip_100B_values", 100, Compression::Gzip),
    ] {
        let (b, header) = batch_of_records(value_len, codec);
        group.throughput(Throughput::Bytes(16 << 10));
        group.bench_function(label, |bench| {
            bench.iter(|| check_records(black_box(&b), &header, 64 << 20).expect("valid"))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    records_check,
    header_prefix,
    frame_split,
    produce_decode,
    batch_validate
);
criterion_main!(benches);
