//! Micro-benchmarks of engine::record: building a batch of 100 x 1 KiB records, parsing and
//! validating it (CRC plus the framing of every record), iterating its records (as `Bytes` and as
//! borrowed slices), the same for 1000 x 100 B records, and raw CRC-32C over 1 MiB. Throughput is
//! in bytes of batch.
//!
//! `cargo bench -p ringraft-engine --bench record -- --quick` for a short run.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::record::{BatchView, RecordBatchBuilder};

const RECORDS: usize = 100;
const VALUE_LEN: usize = 1024;

fn build_batch(value: &[u8]) -> bytes::BytesMut {
    build_batch_of(RECORDS, value)
}

fn build_batch_of(records: usize, value: &[u8]) -> bytes::BytesMut {
    let mut builder =
        RecordBatchBuilder::with_capacity(0, 1, records * (value.len() + 16)).producer(-1, -1, -1);
    for index in 0..records {
        let key = (index as u64).to_be_bytes();
        builder.append(
            1_700_000_000_000 + index as i64,
            Some(&key),
            Some(value),
            &[],
        );
    }
    builder.build()
}

fn record_benches(c: &mut Criterion) {
    let value = vec![0xa5u8; VALUE_LEN];
    let batch: Bytes = build_batch(&value).freeze();

    let mut group = c.benchmark_group("record");
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(1));
    group.throughput(Throughput::Bytes(batch.len() as u64));

    group.bench_function("build_100x1KiB", |b| {
        b.iter(|| build_batch(black_box(&value)))
    });
    group.bench_function("parse_validate_100x1KiB", |b| {
        b.iter(|| BatchView::parse(black_box(batch.clone())).unwrap())
    });
    let view = BatchView::parse(batch.clone()).unwrap();
    group.bench_function("iterate_records_100x1KiB", |b| {
        b.iter(|| {
            black_box(&view)
                .records()
                .map(|r| r.value.map_or(0, |v| v.len()))
                .sum::<usize>()
        })
    });
    group.bench_function("iterate_record_refs_100x1KiB", |b| {
        b.iter(|| {
            black_box(&view)
                .record_refs()
                .map(|r| r.value.map_or(0, <[u8]>::len))
                .sum::<usize>()
        })
    });

    // Small records: the per-record framing dominates, not the CRC.
    let small = vec![0x3cu8; 100];
    let small_batch: Bytes = build_batch_of(1000, &small).freeze();
    group.throughput(Throughput::Bytes(small_batch.len() as u64));
    group.bench_function("build_1000x100B", |b| {
        b.iter(|| build_batch_of(1000, black_box(&small)))
    });
    group.bench_function("parse_validate_1000x100B", |b| {
        b.iter(|| BatchView::parse(black_box(small_batch.clone())).unwrap())
    });

    let mib = vec![0x5au8; 1 << 20];
    group.throughput(Throughput::Bytes(mib.len() as u64));
    group.bench_function("crc32c_1MiB", |b| {
        b.iter(|| crc32c::crc32c(black_box(&mib)))
    });
    group.finish();
}

criterion_group!(benches, record_benches);
criterion_main!(benches);
