//! Step cost of the Raft core on its hot paths (ns per op, no IO):
//! - a 3-voter leader appending one client batch (ClientAppend -> one Log op);
//! - the leader answering a follower's FetchQuorumRecords from the tail cache;
//! - a follower handling a fetch response with one batch (append + next fetch).
//!
//! Inputs are built outside the timed region; only `step()` is measured.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::raft::*;
use engine::record::RecordBatchBuilder;

const VOTERS: &[NodeId] = &[1, 2, 3];
const CHUNK: u64 = 1024;

fn config(id: NodeId) -> RaftConfig {
    let mut c = RaftConfig::new(id, "bench", VOTERS.to_vec());
    c.tail_cache_bytes = 4 << 20;
    c
}

/// A client batch of 10 records of 100 bytes (about 1.2 KiB).
fn client_batch() -> BytesMut {
    let mut b = RecordBatchBuilder::new(0, 0);
    let value = [7u8; 100];
    for _ in 0..10 {
        b.append(0, None, Some(&value), &[]);
    }
    b.build()
}

fn last_seq(out: &[Output]) -> Option<u64> {
    out.iter().rev().find_map(|o| match o {
        Output::Log(op) => Some(op.seq),
        _ => None,
    })
}

fn sent_correlation(out: &[Output]) -> Option<Correlation> {
    out.iter().rev().find_map(|o| match o {
        Output::Send { correlation, .. } => Some(*correlation),
        _ => None,
    })
}

/// Node 1 restarted at epoch 1 of VOTERS with an empty log, `leader_id` and `voted_id` as
/// stored.
fn node_1_at_epoch_1(leader_id: NodeId, voted_id: NodeId) -> RaftCore {
    let stored = ElectionState {
        epoch: 1,
        leader_id,
        voted_id,
        current_voters: VOTERS.to_vec(),
        target_voters: None,
        target_force: false,
        applied_offset: 0,
        ..Default::default()
    };
    RaftCore::new(config(1), Some(stored), LogSnapshot::default(), 0).unwrap()
}

/// Node 1, leader of epoch 1, its LeaderChange record durable. Returns the last log op seq.
fn leader() -> (RaftCore, u64) {
    let mut core = node_1_at_epoch_1(-1, 1);
    let mut out = Vec::new();
    core.step(Input::Tick { now: 0 }, &mut out);
    let correlation = out
        .iter()
        .find_map(|o| match o {
            Output::Send {
                to: 2, correlation, ..
            } => Some(*correlation),
            _ => None,
        })
        .unwrap();
    out.clear();
    let granted = Response::Vote(VoteResponse {
        error: ErrorCode::NONE,
        leader_id: -1,
        leader_epoch: 1,
        vote_granted: true,
    });
    core.step(
        Input::Response {
            from: 2,
            correlation,
            response: granted,
        },
        &mut out,
    );
    assert_eq!(core.role(), Role::Leader);
    let seq = last_seq(&out).unwrap();
    out.clear();
    core.step(Input::LogDurable { up_to_seq: seq }, &mut out);
    (core, seq)
}

fn fetch(replica: NodeId, offset: Offset) -> Request {
    Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
        cluster_id: "bench".into(),
        replica_id: replica,
        leader_epoch: 1,
        fetch_offset: offset,
        last_fetched_epoch: 1,
        is_follower: true,
        max_wait_ms: 500,
        durable_offset: offset,
        replica_directory_id: Default::default(),
        lease_echo: None,
    })
}

/// Request `id`: voter 2 fetches from `offset`.
fn fetch_from_2(id: u64, offset: Offset) -> Input {
    Input::Request {
        id,
        from: Sender::Replica(2),
        request: fetch(2, offset),
    }
}

/// Steps `inputs` through `core`, each output dropped: the time it took.
fn time_steps(core: &mut RaftCore, inputs: Vec<Input>, out: &mut Vec<Output>) -> Duration {
    let start = Instant::now();
    for input in inputs {
        core.step(input, out);
        out.clear();
    }
    start.elapsed()
}

fn leader_client_append(iters: u64) -> Duration {
    let (mut core, mut seq) = leader();
    let template = client_batch();
    let mut out = Vec::with_capacity(16);
    let mut timed = Duration::ZERO;
    let mut done = 0u64;
    while done < iters {
        let n = (iters - done).min(CHUNK);
        let inputs: Vec<Input> = (0..n)
            .map(|i| Input::ClientAppend {
                id: done + i,
                batch: template.clone(),
                record_count: 10,
                acks: Acks::Quorum,
            })
            .collect();
        timed += time_steps(&mut core, inputs, &mut out);
        done += n;
        // Untimed: everything durable and committed, so nothing piles up.
        seq += n;
        core.step(Input::LogDurable { up_to_seq: seq }, &mut out);
        core.step(fetch_from_2(done, core.log_end_offset()), &mut out);
        assert!(core.high_watermark() == Some(core.log_end_offset()));
        out.clear();
    }
    timed
}

fn leader_fetch_from_tail(iters: u64) -> Duration {
    let (mut core, mut seq) = leader();
    let mut out = Vec::with_capacity(16);
    for id in 0..64 {
        core.step(
            Input::ClientAppend {
                id,
                batch: client_batch(),
                record_count: 10,
                acks: Acks::Quorum,
            },
            &mut out,
        );
    }
    seq += 64;
    core.step(Input::LogDurable { up_to_seq: seq }, &mut out);
    out.clear();
    // The follower has everything but the last batch and asks for it.
    let from = core.log_end_offset() - 10;
    let mut timed = Duration::ZERO;
    let mut done = 0u64;
    while done < iters {
        let n = (iters - done).min(CHUNK);
        let inputs: Vec<Input> = (0..n).map(|i| fetch_from_2(done + i, from)).collect();
        timed += time_steps(&mut core, inputs, &mut out);
        done += n;
    }
    // The answers came from the cache: no log read was ever asked for.
    core.step(fetch_from_2(u64::MAX, from), &mut out);
    assert!(matches!(&out[..], [Output::Respond { .. }]), "{out:?}");
    timed
}

fn follower_fetch_response(iters: u64) -> Duration {
    let mut core = node_1_at_epoch_1(2, -1);
    let mut out = Vec::with_capacity(16);
    core.step(Input::Tick { now: 0 }, &mut out);
    let mut correlation = sent_correlation(&out).unwrap();
    out.clear();
    let bytes: Bytes = client_batch().freeze();
    let mut timed = Duration::ZERO;
    let mut done = 0u64;
    let mut next_offset = 0i64;
    let mut seq = 0u64;
    while done < iters {
        let n = (iters - done).min(CHUNK);
        let mut responses = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let batch = Batch {
                base_offset: next_offset,
                epoch: 1,
                record_count: 10,
                is_control: false,
                bytes: bytes.clone(),
            };
            next_offset += 10;
            responses.push(FetchQuorumRecordsResponse {
                error: ErrorCode::NONE,
                leader_id: 2,
                leader_epoch: 1,
                next_fetch_offset: -1,
                next_fetch_offset_epoch: -1,
                batches: vec![batch],
                high_watermark: next_offset - 10,
                first_dirty_offset: -1,
                last_caught_up_time_ms: -1,
                log_start: None,
                producer_state: None,
                lease_stamp: None,
            });
        }
        let start = Instant::now();
        for r in responses {
            core.step(
                Input::Response {
                    from: 2,
                    correlation,
                    response: Response::FetchQuorumRecords(r),
                },
                &mut out,
            );
            correlation = sent_correlation(&out).expect("the next fetch goes out at once");
            out.clear();
        }
        timed += start.elapsed();
        done += n;
        // Untimed: the appends become durable (the follower refreshes its fetch).
        seq += n;
        core.step(Input::LogDurable { up_to_seq: seq }, &mut out);
        if let Some(c) = sent_correlation(&out) {
            correlation = c;
        }
        out.clear();
    }
    assert_eq!(core.log_end_offset(), next_offset);
    timed
}

fn bench_leader(c: &mut Criterion) {
    let mut g = c.benchmark_group("leader");
    g.throughput(Throughput::Elements(1));
    g.bench_function("client_append_per_batch", |b| {
        b.iter_custom(leader_client_append)
    });
    g.bench_function("fetch_from_tail_cache", |b| {
        b.iter_custom(leader_fetch_from_tail)
    });
    g.finish();
}

fn bench_follower(c: &mut Criterion) {
    let mut g = c.benchmark_group("follower");
    g.throughput(Throughput::Elements(1));
    g.bench_function("fetch_response_per_batch", |b| {
        b.iter_custom(follower_fetch_response)
    });
    g.finish();
}

criterion_group! {
    name = benches;
    // Short warm-up and measurement: `--quick` stays well under a minute on a shared machine.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_leader, bench_follower
}
criterion_main!(benches);
