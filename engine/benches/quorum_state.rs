//! What one quorum-state write costs (docs/protocol.md, "The quorum-state file"): the node
//! answers a vote, or acts on a new epoch, only once the write is durable, so its time is on
//! the election's path. One write here is the whole durable write on the filesystem of the
//! target directory: since data_version 4, copy A then copy B, each written to a temporary
//! file, fsynced and renamed, then one fsync of the directory (three fsyncs, where one copy
//! took two). And the open of a directory whose two copies are intact (both read and checked).
//!
//! `cargo bench -p ringraft-engine --bench quorum_state` (the directory is made under
//! `target/`, so on the disk the build runs on).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use engine::quorum_state_store::{ElectionState, QuorumStateStore};

fn state(epoch: i32) -> ElectionState {
    ElectionState {
        epoch,
        leader_id: 2,
        voted_id: 2,
        current_voters: vec![1, 2, 3],
        applied_offset: 7,
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut store = QuorumStateStore::open(dir.path(), 1, "bench").unwrap();
    let mut group = c.benchmark_group("quorum_state");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(10));
    let mut epoch = 0;
    group.bench_function("write (durable)", |b| {
        b.iter(|| {
            epoch += 1;
            store.write(&state(epoch)).unwrap();
        })
    });
    group.bench_function("open and read", |b| {
        b.iter(|| {
            let store = QuorumStateStore::open(dir.path(), 1, "bench").unwrap();
            store.read().unwrap().unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
