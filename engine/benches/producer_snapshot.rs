//! The producer-state snapshot at its largest (docs/storage.md, "The producer-state snapshot"):
//! 100,000 producers with five batches each, the most the state keeps below the committed
//! offset. What the raft thread spends per snapshot (encoded straight from the live state; and,
//! for comparison, through a sorted copy of it first, as the first version did) and what a
//! start spends before it reads the log (decode, restore).
//!
//! `cargo bench -p ringraft-engine --bench producer_snapshot`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use engine::producer_ids::CommittedBlocks;
use engine::producer_snapshot::{encode_parts, ProducerSnapshot};
use engine::producers::{
    ProducerLimits, ProducerStates, Sequenced, BATCHES_PER_PRODUCER, DEFAULT_MAX_PRODUCERS,
};

/// A state fed DEFAULT_MAX_PRODUCERS producers x five one-record batches, all committed.
fn full_state() -> ProducerStates {
    let mut states = ProducerStates::new(ProducerLimits::default());
    let mut offset = 0;
    for round in 0..BATCHES_PER_PRODUCER as i32 {
        for id in 0..DEFAULT_MAX_PRODUCERS as i64 {
            states.append(&Sequenced::new(id, 0, round, 1), offset);
            offset += 1;
        }
    }
    states.set_committed(offset);
    states
}

/// What the node does: the bytes straight from the live state.
fn snapshot_of(states: &ProducerStates) -> Vec<u8> {
    let blocks = CommittedBlocks {
        committed_to: states.committed(),
        committed_end: 100_000,
        newest_record: None,
        latest: Vec::new(),
    };
    encode_parts(
        states.committed(),
        1,
        &blocks,
        states.committed_batches(),
        std::iter::empty(),
    )
    .expect("no offsets")
}

fn bench(c: &mut Criterion) {
    let states = full_state();
    let bytes = snapshot_of(&states);
    println!("a full snapshot: {} bytes", bytes.len());
    let mut group = c.benchmark_group("producer_snapshot");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("take_and_encode_100k", |b| {
        b.iter(|| black_box(snapshot_of(black_box(&states))))
    });
    // The first version's way, for comparison: a sorted copy of the committed part first.
    group.bench_function("collect_sort_encode_100k", |b| {
        b.iter(|| {
            let snapshot = ProducerSnapshot {
                offset: states.committed(),
                epoch: 1,
                blocks: CommittedBlocks {
                    committed_to: states.committed(),
                    committed_end: 100_000,
                    newest_record: None,
                    latest: Vec::new(),
                },
                producers: black_box(&states).committed_part(),
                groups: Some(Vec::new()),
            };
            black_box(snapshot.encode())
        })
    });
    group.bench_function("decode_and_restore_100k", |b| {
        b.iter(|| {
            let snapshot = ProducerSnapshot::decode(black_box(&bytes)).unwrap();
            black_box(ProducerStates::restored(
                ProducerLimits::default(),
                snapshot.offset,
                snapshot.producers,
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
