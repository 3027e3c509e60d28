//! Request/response round trips over loopback between two EventLoops in one process (the echo
//! server on its own thread). Throughput is in round trips per second; `window` is how many
//! requests are kept in flight on the one connection.

#[path = "../tests/transport_support/mod.rs"]
mod transport_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use net::transport::{Config, ConnId, Event, EventLoop};
use transport_support::{frame_chain, pattern, EchoServer};

fn round_trips(ring: &mut EventLoop, conn: ConnId, body: &Bytes, window: u64, total: u64) {
    let mut events = Vec::new();
    let mut sent = 0;
    let mut received = 0;
    while sent < window.min(total) {
        ring.send(conn, frame_chain(body.clone())).unwrap();
        sent += 1;
    }
    while received < total {
        ring.poll(Some(Duration::from_secs(10)), &mut events)
            .unwrap();
        for event in events.drain(..) {
            match event {
                Event::Frame { bytes, .. } => {
                    assert_eq!(bytes.len(), body.len());
                    received += 1;
                    if sent < total {
                        ring.send(conn, frame_chain(body.clone())).unwrap();
                        sent += 1;
                    }
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

fn bench_round_trips(c: &mut Criterion) {
    let server = EchoServer::start(Config::default());
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let conn = ring.connect(server.addr).unwrap();
    let mut events = Vec::new();
    while events.is_empty() {
        ring.poll(Some(Duration::from_secs(10)), &mut events)
            .unwrap();
    }
    assert!(matches!(events[0], Event::Connected { .. }));

    let mut group = c.benchmark_group("transport_loopback");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(5));
    for (body_len, window) in [(64usize, 1u64), (64, 16), (4096, 1), (65_536, 4)] {
        let body = pattern(body_len, 1);
        group.bench_with_input(
            BenchmarkId::new(format!("body_{body_len}"), format!("window_{window}")),
            &window,
            |b, &window| {
                b.iter_custom(|iters| {
                    let started = Instant::now();
                    round_trips(&mut ring, conn, &body, window, iters);
                    started.elapsed()
                })
            },
        );
    }
    group.finish();
    ring.close(conn).unwrap();
    drop(ring);
    server.stop();
}

criterion_group!(benches, bench_round_trips);
criterion_main!(benches);
