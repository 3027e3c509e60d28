//! One one-record Produce request (v9, a 1 KiB record) read as the node reads it: the request
//! header, the head, then its partitions visited (docs/benchmarks.md, "Wire reads in place").
//! The per-request path's decoding without the network, for A/B comparisons of the reader.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use net::wire::kafka::{
    visit_produce_partitions, ProduceHead, ProduceRequest, PRODUCE, PRODUCE_SPEC,
};
use net::wire::{RequestHeader, WireReader, WireWriter};

const VERSION: i16 = 9;

/// The request as a client sends it, without the size prefix (what the frame decoder yields).
fn one_record_request() -> Bytes {
    let records = Bytes::from(vec![7u8; 1024 + 61]);
    let request = ProduceRequest::one_batch("__cluster_metadata", 0, -1, records);
    let mut w = WireWriter::with_capacity(2048);
    RequestHeader {
        api_key: PRODUCE,
        api_version: VERSION,
        correlation_id: 42,
        client_id: Some("ringraft-bench".into()),
    }
    .write(&mut w, PRODUCE_SPEC.is_flexible(VERSION));
    request.encode(&mut w, VERSION);
    Bytes::from(w.into_inner())
}

/// Reads `frame` as the node does; returns the bytes of records seen (so nothing is elided).
fn read(frame: &Bytes) -> usize {
    let mut r = WireReader::new(frame.clone());
    let header = RequestHeader::read(&mut r, PRODUCE_SPEC.is_flexible(VERSION)).unwrap();
    let head = ProduceHead::decode(&mut r, header.api_version).unwrap();
    assert_eq!(head.acks, -1);
    let mut seen = 0;
    visit_produce_partitions(&mut r, header.api_version, |_, p| {
        seen += p.records.as_ref().map_or(0, Bytes::len)
    })
    .unwrap();
    seen
}

fn bench(c: &mut Criterion) {
    let frame = one_record_request();
    assert_eq!(read(&frame), 1024 + 61);
    let mut group = c.benchmark_group("produce_decode");
    group.throughput(Throughput::Elements(1));
    group.bench_function("one_record_v9", |b| b.iter(|| read(&frame)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
