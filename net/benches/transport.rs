//! Request/response round trips over loopback between two EventLoops in one process (the echo
//! server on its own thread), in plaintext and over TLS (TLS 1.3, the ring provider). Throughput
//! is in round trips per second; `window` is how many requests are kept in flight on the one
//! connection. After the criterion groups, `tls_vs_plaintext` runs the same round trips back to
//! back on both and prints the throughput ratio per case.

#[path = "../tests/transport_support/mod.rs"]
mod transport_support;
#[path = "../tests/transport_tls_support/mod.rs"]
mod transport_tls_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use net::security::tls::ClientAuth;
use net::transport::{Config, ConnId, Event, EventLoop};
use transport_support::{frame_chain, pattern, EchoServer};
use transport_tls_support::{server_name, Pki};

const CASES: [(usize, u64); 5] = [(64, 1), (64, 16), (4096, 1), (65_536, 4), (1 << 20, 2)];

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

/// A server (plaintext or TLS) and a connected client loop; the servers stop when dropped.
struct Setup {
    ring: EventLoop,
    conn: ConnId,
    _plain: Option<EchoServer>,
    _tls: Option<(EchoServer, Pki)>,
}

impl Setup {
    fn new(tls: bool) -> Self {
        let mut ring = EventLoop::new(Config::default()).unwrap();
        let (conn, plain, tls) = if tls {
            let pki = Pki::new();
            let server =
                EchoServer::start_tls(Config::default(), pki.server(ClientAuth::None, &[]));
            let client = pki.client(&pki.ca, None, &[]);
            let conn = ring
                .connect_tls(server.addr, client, server_name())
                .unwrap();
            (conn, None, Some((server, pki)))
        } else {
            let server = EchoServer::start(Config::default());
            (ring.connect(server.addr).unwrap(), Some(server), None)
        };
        let mut events = Vec::new();
        while events.is_empty() {
            ring.poll(Some(Duration::from_secs(10)), &mut events)
                .unwrap();
        }
        assert!(matches!(events[0], Event::Connected { .. }), "{events:?}");
        Self {
            ring,
            conn,
            _plain: plain,
            _tls: tls,
        }
    }
}

fn bench_round_trips(c: &mut Criterion) {
    for (name, tls) in [
        ("transport_loopback", false),
        ("transport_loopback_tls", true),
    ] {
        let mut setup = Setup::new(tls);
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements(1));
        group.measurement_time(Duration::from_secs(5));
        for (body_len, window) in CASES {
            let body = pattern(body_len, 1);
            group.bench_with_input(
                BenchmarkId::new(format!("body_{body_len}"), format!("window_{window}")),
                &window,
                |b, &window| {
                    b.iter_custom(|iters| {
                        let started = Instant::now();
                        round_trips(&mut setup.ring, setup.conn, &body, window, iters);
                        started.elapsed()
                    })
                },
            );
        }
        group.finish();
        setup.ring.close(setup.conn).unwrap();
    }
}

/// Round trips per second over about `budget` of wall time.
fn rate(setup: &mut Setup, body: &Bytes, window: u64, budget: Duration) -> f64 {
    round_trips(&mut setup.ring, setup.conn, body, window, 16); // warm up
    let started = Instant::now();
    let mut done = 0u64;
    let mut batch = 16u64;
    while started.elapsed() < budget {
        round_trips(&mut setup.ring, setup.conn, body, window, batch);
        done += batch;
        batch = (batch * 2).min(4096);
    }
    done as f64 / started.elapsed().as_secs_f64()
}

fn tls_vs_plaintext(_: &mut Criterion) {
    let mut plain = Setup::new(false);
    let mut tls = Setup::new(true);
    println!("tls_vs_plaintext: round trips/s (and MiB/s each way), TLS 1.3 / plaintext");
    for (body_len, window) in CASES {
        let body = pattern(body_len, 2);
        // Interleaved twice so drift in the machine's load hits both alike.
        let mut p = 0.0;
        let mut t = 0.0;
        for _ in 0..2 {
            p += rate(&mut plain, &body, window, Duration::from_secs(1));
            t += rate(&mut tls, &body, window, Duration::from_secs(1));
        }
        let (p, t) = (p / 2.0, t / 2.0);
        let mib = |r: f64| r * body_len as f64 / (1024.0 * 1024.0);
        println!(
            "  body {body_len:>8} window {window:>2}: plaintext {p:>9.0}/s ({:>7.1} MiB/s)  \
             tls {t:>9.0}/s ({:>7.1} MiB/s)  ratio {:.2}",
            mib(p),
            mib(t),
            t / p
        );
    }
}

criterion_group!(benches, bench_round_trips, tls_vs_plaintext);
criterion_main!(benches);
