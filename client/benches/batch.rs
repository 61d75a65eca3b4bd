//! Record batch encode and decode without I/O (performance.md C.2/C.3): records of 100 B and
//! 1 KiB in batches of 16 KiB and 1 MiB. Encode is the producer's per-record work (append into
//! the batch buffer, then header and CRC-32C once); decode is the consumer's (split the fetched
//! bytes into batches, check each CRC, decode every record). C.3's goals: encode >= 1 GiB/s for
//! 1 KiB records and <= 50 ns/record at 100 B; decode >= 2 GiB/s and <= 30 ns/record.
//!
//! Run with `cargo bench -p client --bench batch`. Throughput is in bytes for 1 KiB records and
//! in records ("elements") for 100 B records, the unit each goal is written in.

use std::hint::black_box;

use bytes::Bytes;
use client::record::{BatchBuilder, Compression, FetchedBatch, ProducerIdentity};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const SHAPES: [(usize, usize); 4] = [
    (100, 16 << 10),
    (100, 1 << 20),
    (1024, 16 << 10),
    (1024, 1 << 20),
];
const TIMESTAMP: i64 = 1_700_000_000_000;

/// Fills one batch to its size limit; returns it and its record count.
fn build(record: usize, batch: usize) -> (Bytes, usize) {
    let value = vec![0x61u8; record];
    let mut builder = BatchBuilder::new(batch);
    let mut records = 0;
    while builder.try_append(TIMESTAMP + records as i64, None, Some(&value), &[]) {
        records += 1;
    }
    let bytes = builder
        .finish(Compression::None, ProducerIdentity::NONE)
        .expect("an uncompressed batch always finishes");
    (bytes, records)
}

fn name(record: usize, batch: usize) -> String {
    let size = |b: usize| match b {
        b if b >= 1 << 20 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    };
    format!("{}_records_in_{}", size(record), size(batch))
}

fn throughput(record: usize, bytes: usize, records: usize) -> Throughput {
    if record >= 1024 {
        Throughput::Bytes(bytes as u64)
    } else {
        Throughput::Elements(records as u64)
    }
}

fn encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch_encode");
    for (record, batch) in SHAPES {
        let (bytes, records) = build(record, batch);
        group.throughput(throughput(record, bytes.len(), records));
        let value = vec![0x61u8; record];
        group.bench_with_input(
            BenchmarkId::from_parameter(name(record, batch)),
            &records,
            |b, &records| {
                b.iter(|| {
                    let mut builder = BatchBuilder::new(batch);
                    for i in 0..records {
                        builder.try_append(
                            TIMESTAMP + i as i64,
                            None,
                            Some(black_box(&value[..])),
                            &[],
                        );
                    }
                    builder
                        .finish(Compression::None, ProducerIdentity::NONE)
                        .expect("finishes")
                })
            },
        );
    }
    group.finish();
}

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch_decode");
    for (record, batch) in SHAPES {
        let (bytes, records) = build(record, batch);
        group.throughput(throughput(record, bytes.len(), records));
        group.bench_with_input(
            BenchmarkId::from_parameter(name(record, batch)),
            &bytes,
            |b, bytes| {
                b.iter(|| {
                    let batches =
                        FetchedBatch::split(black_box(bytes.clone()), "bench", 0).expect("valid");
                    let mut value_bytes = 0usize;
                    for batch in &batches {
                        for record in batch.records().expect("uncompressed") {
                            value_bytes +=
                                record.expect("valid record").value.map_or(0, |v| v.len());
                        }
                    }
                    value_bytes
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, encode, decode);
criterion_main!(benches);
