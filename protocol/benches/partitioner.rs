//! Kafka's default partitioner for keyed records: murmur2 of the key, then `% partitions`.
//! performance.md B.3 measured 2.86 ns per 16-byte key for the hash and 3.59 ns with the
//! modulo; C.3's goal is <= 5 ns/key. Run with `cargo bench -p protocol --bench partitioner`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use protocol::partitioner::{murmur2_i32, partition_for_key};

/// 1,024 distinct 16-byte keys, so the loop is not one cached key.
fn keys() -> Vec<[u8; 16]> {
    let mut x: u64 = 0x243f_6a88_85a3_08d3;
    (0..1024)
        .map(|_| {
            let mut key = [0u8; 16];
            for half in key.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                half.copy_from_slice(&x.to_le_bytes());
            }
            key
        })
        .collect()
}

fn partitioner(c: &mut Criterion) {
    let keys = keys();
    let mut group = c.benchmark_group("partitioner_16_byte_keys");
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.bench_function("murmur2", |b| {
        b.iter(|| {
            keys.iter()
                .fold(0i32, |acc, k| acc ^ murmur2_i32(black_box(k)))
        })
    });
    group.bench_function("partition_of_12", |b| {
        b.iter(|| {
            keys.iter()
                .fold(0i32, |acc, k| acc ^ partition_for_key(black_box(k), 12))
        })
    });
    group.finish();
}

criterion_group!(benches, partitioner);
criterion_main!(benches);
