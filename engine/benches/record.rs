//! Micro-benchmarks of engine::record: building a batch of 100 x 1 KiB records, parsing and
//! validating it (CRC plus the framing of every record), iterating its records (as `Bytes` and as
//! borrowed slices), the same for 1000 x 100 B records, raw CRC-32C over 1 MiB, and a zstd batch
//! of 100 x 1 KiB text-like records parsed in full (decompressed) against checked as a stored
//! batch (framing and CRC only, what followers and log reads do). Throughput is in bytes of
//! batch.
//!
//! `cargo bench -p ringraft-engine --bench record -- --quick` for a short run.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::record::{Batch, BatchView, RecordBatchBuilder, CRC_OFFSET, CRC_START, RECORDS_OFFSET};

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

    let zstd_batch = zstd_batch_of(&build_batch(&text_value()));
    group.throughput(Throughput::Bytes(zstd_batch.len() as u64));
    group.bench_function("parse_validate_zstd_100x1KiB", |b| {
        b.iter(|| BatchView::parse(black_box(zstd_batch.clone())).unwrap())
    });
    group.bench_function("from_stored_zstd_100x1KiB", |b| {
        b.iter(|| Batch::from_stored(black_box(zstd_batch.clone())).unwrap())
    });

    let mib = vec![0x5au8; 1 << 20];
    group.throughput(Throughput::Bytes(mib.len() as u64));
    group.bench_function("crc32c_1MiB", |b| {
        b.iter(|| crc32c::crc32c(black_box(&mib)))
    });
    group.finish();
}

/// 1 KiB of words, so zstd has something to do.
fn text_value() -> Vec<u8> {
    let words = [
        "quorum", "epoch", "leader", "voter", "offset", "fetch", "commit", "log",
    ];
    let mut value = Vec::with_capacity(VALUE_LEN);
    let mut i = 0usize;
    while value.len() < VALUE_LEN {
        value.extend_from_slice(words[(i * 7 + i / 3) % words.len()].as_bytes());
        value.push(b' ');
        i += 1;
    }
    value.truncate(VALUE_LEN);
    value
}

/// `plain` with its records section zstd-compressed: attributes, BatchLength and CRC rewritten.
fn zstd_batch_of(plain: &[u8]) -> Bytes {
    let records = zstd::bulk::compress(&plain[RECORDS_OFFSET..], 3).unwrap();
    let mut batch = plain[..RECORDS_OFFSET].to_vec();
    batch.extend_from_slice(&records);
    let batch_length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&batch_length.to_be_bytes());
    batch[CRC_START + 1] |= 4; // attributes: zstd
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

criterion_group!(benches, record_benches);
criterion_main!(benches);
