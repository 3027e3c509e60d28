//! Frames sent through one EventLoop, echoed by another on its own thread, come back whole, in
//! order and intact: many sizes, long zero-copy chains, partial sends under a tiny SO_SNDBUF, and
//! the same again with every fallback forced.

mod transport_support;

use bytes::Bytes;
use net::transport::{CloseReason, Config, Event, EventLoop, TransportError};
use transport_support::{frame_chain, frames, pattern, poll_until, EchoServer, Seen};

const SIZES: [usize; 12] = [
    8,
    9,
    13,
    100,
    4095,
    4096,
    16_384,
    16_385,
    65_536,
    (1 << 20) + 3,
    3 << 20,
    6 << 20,
];

/// Send every body on one connection, wait for all echoes, compare, close.
fn echo_round(config: Config, bodies: &[Vec<Bytes>]) -> (EventLoop, Vec<Bytes>) {
    let server = EchoServer::start(config.clone());
    let mut ring = EventLoop::new(config).unwrap();
    let conn = ring.connect(server.addr).unwrap();
    // Queued while connecting: sent once connected, in order.
    for chain in bodies {
        let mut framed = vec![Bytes::copy_from_slice(&net::wire::frame::size_prefix(
            chain.iter().map(Bytes::len).sum(),
        ))];
        framed.extend(chain.iter().cloned());
        ring.send(conn, framed).unwrap();
    }
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| frames(e).len() == bodies.len());
    assert!(matches!(events[0], Event::Connected { conn: c } if c == conn));
    let got = frames(&events);
    for (i, (chain, echoed)) in bodies.iter().zip(&got).enumerate() {
        let sent: Vec<u8> = chain.iter().flat_map(|p| p.iter().copied()).collect();
        assert_eq!(sent.len(), echoed.len(), "frame {i} length");
        assert!(sent[..] == echoed[..], "frame {i} content");
    }
    assert_eq!(ring.queued_send_bytes(conn), Some(0));
    ring.close(conn).unwrap();
    let mut closing = Vec::new();
    poll_until(&mut ring, &mut closing, |e| !e.is_empty());
    assert!(matches!(
        closing[..],
        [Event::Closed { conn: c, reason: CloseReason::Local }] if c == conn
    ));
    assert_eq!(ring.connection_count(), 0);
    assert_eq!(ring.operations_in_flight(), 0);
    assert!(matches!(
        ring.send(conn, frame_chain(pattern(8, 0))),
        Err(TransportError::UnknownConnection(_))
    ));
    server.wait_for(1, |s| matches!(s, Seen::Closed(_, CloseReason::PeerClosed)));
    let report = server.stop();
    assert_eq!(report.stats.frames_received, bodies.len() as u64);
    assert_eq!(report.connections_at_stop, 0);
    (ring, got)
}

fn sized_bodies() -> Vec<Vec<Bytes>> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, &len)| vec![pattern(len, i as u64)])
        .collect()
}

#[test]
fn frames_of_many_sizes_arrive_whole_and_in_order() {
    let (ring, _) = echo_round(Config::default(), &sized_bodies());
    let features = ring.features();
    // This machine's kernel (6.18) supports all of them; a refusal would show up here.
    assert!(features.single_issuer_defer_taskrun, "{features:?}");
    assert!(features.buf_ring, "{features:?}");
    assert!(features.multishot_accept, "{features:?}");
}

#[test]
fn every_fallback_forced_still_round_trips() {
    let config = Config {
        try_single_issuer: false,
        use_buf_ring: false,
        use_multishot_accept: false,
        ..Config::default()
    };
    let (ring, _) = echo_round(config, &sized_bodies());
    let features = ring.features();
    assert!(!features.single_issuer_defer_taskrun);
    assert!(!features.buf_ring);
    assert!(!features.multishot_accept);
}

#[test]
fn a_chain_longer_than_iov_max_is_sent_without_copy_and_released() {
    // One backing buffer, sliced into 3000 pieces of 1..=300 bytes (slices share the buffer).
    let lens: Vec<usize> = (0..3000).map(|i| (i * 7919) % 300 + 1).collect();
    let backing = pattern(lens.iter().sum(), 42);
    let mut pieces = Vec::new();
    let mut at = 0;
    for len in &lens {
        pieces.push(backing.slice(at..at + len));
        at += len;
    }
    // Plus separate small buffers interleaved, and a second frame behind it on the queue.
    pieces.insert(1000, Bytes::from_static(b"separate"));
    let second = vec![pattern(10, 7), pattern(20, 8)];
    let (_ring, got) = echo_round(Config::default(), &[pieces, second]);
    assert_eq!(got.len(), 2);
    // Every clone the loop took has been dropped once the kernel was done with it.
    assert!(backing.is_unique(), "the loop still holds the sent pieces");
}

#[test]
fn a_large_frame_through_a_tiny_send_buffer_completes_after_partial_sends() {
    let config = Config {
        send_buffer_bytes: Some(4096),
        ..Config::default()
    };
    let bodies = vec![
        vec![pattern(1 << 20, 1)],
        vec![pattern(8, 2)],
        vec![pattern(100_000, 3)],
    ];
    let (ring, _) = echo_round(config, &bodies);
    assert!(
        ring.stats().partial_sends > 0,
        "expected short sendmsg completions: {:?}",
        ring.stats()
    );
}

#[test]
fn frames_queued_in_one_round_go_out_in_one_sendmsg() {
    let server = EchoServer::start(Config::default());
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let conn = ring.connect(server.addr).unwrap();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| {
        e.iter().any(|e| matches!(e, Event::Connected { .. }))
    });
    // Two rounds: ten frames queued between two polls, then three more. A sendmsg starts at the
    // flush before the ring is entered, with every frame the round queued, so each round is one.
    for (round, count) in [(1u64, 10usize), (2, 3)] {
        for i in 0..count {
            ring.send(conn, frame_chain(pattern(100 + i, round * 100 + i as u64)))
                .unwrap();
        }
        let mut echoed = Vec::new();
        poll_until(&mut ring, &mut echoed, |e| frames(e).len() == count);
        assert_eq!(ring.stats().sends, round, "{:?}", ring.stats());
        for (i, frame) in frames(&echoed).iter().enumerate() {
            assert_eq!(frame[..], pattern(100 + i, round * 100 + i as u64)[..]);
        }
    }
    ring.close(conn).unwrap();
    let mut closing = Vec::new();
    poll_until(&mut ring, &mut closing, |e| !e.is_empty());
    server.stop();
}
