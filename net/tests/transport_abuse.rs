//! Misbehaving peers: bad frame sizes and garbage close only their own connection, many
//! connections come and go, extra connections beyond the limit are refused, and a peer that
//! dribbles a huge frame cannot make the loop buffer without bound.

mod transport_support;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use net::transport::{CloseReason, Config};
use net::wire::FrameError;
use transport_support::{closed_by_peer, pattern, std_client, std_round_trip, EchoServer, Seen};

fn frame_errors(seen: &[Seen]) -> Vec<FrameError> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Closed(_, CloseReason::Frame(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// Garbage from a fixed xorshift seed; its first four bytes, read as a size, are invalid.
fn garbage() -> Vec<u8> {
    let bytes = pattern(4096, 0xbad).to_vec();
    let size = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    assert!(
        !(8..=100 << 20).contains(&size),
        "the seed must give an invalid size, got {size}"
    );
    bytes
}

#[test]
fn bad_sizes_and_garbage_close_only_their_connection() {
    let server = EchoServer::start(Config::default());
    let mut good = std_client(server.addr);
    let body = pattern(100, 9);
    assert_eq!(std_round_trip(&mut good, &body).unwrap(), &body[..]);

    let attacks: Vec<Vec<u8>> = vec![
        0x7fff_ffffu32.to_be_bytes().to_vec(), // 2 GiB
        0x8000_0000u32.to_be_bytes().to_vec(), // i32::MIN
        (-1i32).to_be_bytes().to_vec(),
        3i32.to_be_bytes().to_vec(), // below the request prefix
        garbage(),
    ];
    for attack in &attacks {
        let mut bad = std_client(server.addr);
        bad.write_all(attack).unwrap();
        assert!(
            closed_by_peer(&mut bad),
            "server kept a bad connection open"
        );
        // The good connection is still served.
        assert_eq!(std_round_trip(&mut good, &body).unwrap(), &body[..]);
    }
    let seen = server.wait_for(attacks.len(), |s| {
        matches!(s, Seen::Closed(_, CloseReason::Frame(_)))
    });
    let errors = frame_errors(&seen);
    assert!(matches!(
        errors[..],
        [
            FrameError::TooLarge {
                size: 0x7fff_ffff,
                ..
            },
            FrameError::Negative { size: i32::MIN },
            FrameError::Negative { size: -1 },
            FrameError::TooSmall { size: 3, .. },
            _,
        ]
    ));
    drop(good);
    server.wait_for(1, |s| matches!(s, Seen::Closed(_, CloseReason::PeerClosed)));
    let report = server.stop();
    assert_eq!(report.connections_at_stop, 0);
    assert_eq!(report.stats.accepted, 1 + attacks.len() as u64);
}

#[test]
fn two_hundred_concurrent_connections_open_and_close() {
    const CLIENTS: usize = 200;
    let server = EchoServer::start(Config::default());
    let mut clients: Vec<TcpStream> = (0..CLIENTS).map(|_| std_client(server.addr)).collect();
    // All open at once: each sends, then each reads its own echo.
    for (i, client) in clients.iter_mut().enumerate() {
        let body = pattern(8 + i, i as u64);
        client
            .write_all(&net::wire::frame::size_prefix(body.len()))
            .unwrap();
        client.write_all(&body).unwrap();
    }
    for (i, client) in clients.iter_mut().enumerate() {
        let echoed = transport_support::read_frame(client).unwrap();
        assert_eq!(echoed, &pattern(8 + i, i as u64)[..], "client {i}");
    }
    drop(clients);
    let seen = server.wait_for(CLIENTS, |s| {
        matches!(s, Seen::Closed(_, CloseReason::PeerClosed))
    });
    assert!(seen.iter().all(|s| !matches!(
        s,
        Seen::Closed(_, reason) if *reason != CloseReason::PeerClosed
    )));
    let report = server.stop();
    assert_eq!(report.stats.accepted, CLIENTS as u64);
    assert_eq!(report.stats.frames_received, CLIENTS as u64);
    assert_eq!(report.connections_at_stop, 0);
}

#[test]
fn connections_beyond_the_limit_are_refused() {
    let server = EchoServer::start(Config {
        max_connections: 4,
        ..Config::default()
    });
    let body = pattern(16, 3);
    let mut served = Vec::new();
    for _ in 0..4 {
        let mut client = std_client(server.addr);
        assert_eq!(std_round_trip(&mut client, &body).unwrap(), &body[..]);
        served.push(client);
    }
    for _ in 0..3 {
        let mut extra = std_client(server.addr);
        // Whatever it sends, it gets no answer but the close.
        let _ = extra.write_all(&net::wire::frame::size_prefix(body.len()));
        assert!(closed_by_peer(&mut extra));
    }
    // Closing one makes room for another.
    drop(served.pop());
    server.wait_for(1, |s| matches!(s, Seen::Closed(..)));
    let mut late = std_client(server.addr);
    assert_eq!(std_round_trip(&mut late, &body).unwrap(), &body[..]);
    drop((served, late));
    let report = server.stop();
    assert_eq!(report.stats.refused, 3);
    assert_eq!(report.stats.accepted, 5);
}

#[test]
fn a_huge_frame_sent_slowly_hits_the_buffer_budget() {
    const BUDGET: usize = 1 << 20;
    let server = EchoServer::start(Config {
        max_buffered_bytes: BUDGET,
        ..Config::default()
    });
    let mut good = std_client(server.addr);
    let body = pattern(32, 5);
    // Claims 64 MiB (below the 100 MiB frame limit), then trickles.
    let mut slow = std_client(server.addr);
    slow.write_all(&(64u32 << 20).to_be_bytes()).unwrap();
    let chunk = pattern(64 * 1024, 6);
    let mut written = 0usize;
    while written < 16 * BUDGET {
        if slow.write_all(&chunk).is_err() {
            break; // the server closed it
        }
        written += chunk.len();
        std::thread::sleep(Duration::from_millis(1));
        if written.is_multiple_of(256 * 1024) {
            // Others are served meanwhile.
            assert_eq!(std_round_trip(&mut good, &body).unwrap(), &body[..]);
        }
    }
    assert!(closed_by_peer(&mut slow));
    let seen = server.wait_for(1, |s| {
        matches!(s, Seen::Closed(_, CloseReason::BufferLimit { .. }))
    });
    assert!(!seen
        .iter()
        .any(|s| matches!(s, Seen::Frame(_, len) if *len > 1000)));
    assert_eq!(std_round_trip(&mut good, &body).unwrap(), &body[..]);
    drop(good);
    let report = server.stop();
    report.assert_within_budget(BUDGET);
    // The slow peer got well past the budget before the close, so the cap did the closing.
    assert!(written > BUDGET, "only {written} bytes written");
}

#[test]
fn a_flood_of_half_sent_frames_stays_within_the_budget() {
    const BUDGET: usize = 1 << 20;
    const FLOODERS: usize = 32;
    const EACH: usize = 96 * 1024; // 32 x 96 KiB = 3 MiB > BUDGET
    let server = EchoServer::start(Config {
        max_buffered_bytes: BUDGET,
        ..Config::default()
    });
    let mut flooders: Vec<TcpStream> = (0..FLOODERS).map(|_| std_client(server.addr)).collect();
    let chunk = pattern(EACH, 11);
    for flooder in &mut flooders {
        // Each claims a 50 MiB frame and sends part of it. Writes to a connection the server
        // has already closed may fail; that is the point.
        let _ = flooder.write_all(&(50u32 << 20).to_be_bytes());
        let _ = flooder.write_all(&chunk);
    }
    // Enough flooders are cut off to bring the total back under the budget.
    let min_closed = FLOODERS - BUDGET / EACH;
    let seen = server.wait_for(min_closed, |s| {
        matches!(s, Seen::Closed(_, CloseReason::BufferLimit { .. }))
    });
    assert!(!seen.iter().any(|s| matches!(s, Seen::Frame(..))));
    let mut good = std_client(server.addr);
    let body = pattern(64, 12);
    assert_eq!(std_round_trip(&mut good, &body).unwrap(), &body[..]);
    drop((flooders, good));
    let report = server.stop();
    report.assert_within_budget(BUDGET);
}

/// Each listener counts only the connections it accepted: a full listener refuses one more
/// while another listener, with a limit of its own, still accepts up to that limit, and
/// connections this loop makes outward count against neither (clients that fill a client
/// listener cannot shut the voters out of the controller listener).
#[test]
fn each_listener_counts_only_its_own_connections() {
    use net::transport::{Event, EventLoop};
    use transport_support::{loopback, poll_until};
    let mut ring = EventLoop::new(Config {
        max_connections: 2,
        ..Config::default()
    })
    .unwrap();
    let full = ring.listen(loopback()).unwrap();
    let other = ring.listen(loopback()).unwrap();
    ring.set_listener_max_connections(other, 1).unwrap();
    let full_addr = ring.local_addr(full).unwrap();
    let other_addr = ring.local_addr(other).unwrap();
    // Outward connections first: they must not use up either listener's room.
    let elsewhere = std::net::TcpListener::bind(loopback()).unwrap();
    for _ in 0..3 {
        ring.connect(elsewhere.local_addr().unwrap()).unwrap();
    }
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| {
        e.iter()
            .filter(|e| matches!(e, Event::Connected { .. }))
            .count()
            == 3
    });
    // The kernel queues connections in order: the first two to `full` and the first to
    // `other` are accepted, the third and the second are refused.
    let mut clients: Vec<TcpStream> = (0..3).map(|_| std_client(full_addr)).collect();
    clients.extend((0..2).map(|_| std_client(other_addr)));
    let mut accepted = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let accepts = |events: &[Event]| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Accepted { .. }))
            .count()
    };
    while accepts(&accepted) < 3 || ring.stats().refused < 2 {
        assert!(std::time::Instant::now() < deadline, "{accepted:?}");
        ring.poll(Some(Duration::from_millis(100)), &mut accepted)
            .unwrap();
    }
    let per_listener = |id| {
        accepted
            .iter()
            .filter(|e| matches!(e, Event::Accepted { listener, .. } if *listener == id))
            .count()
    };
    assert_eq!((per_listener(full), per_listener(other)), (2, 1));
    assert!(
        closed_by_peer(&mut clients[2]),
        "the third to `full` is refused"
    );
    assert!(
        closed_by_peer(&mut clients[4]),
        "the second to `other` is refused"
    );
    assert_eq!(ring.stats().refused, 2);
}

/// A listener keeps at most its per-address limit open from one peer address, an override's
/// own for the addresses it names (0: none), while other addresses are still served; a
/// connection closed makes room for one more from its address.
#[test]
fn connections_beyond_an_address_limit_are_refused_and_other_addresses_served() {
    use net::transport::{Event, EventLoop, PerIpLimit};
    use std::net::Ipv4Addr;
    use transport_support::{loopback, poll_until, std_client_from};
    let (one, two, blocked) = (
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(127, 0, 0, 2),
        Ipv4Addr::new(127, 0, 0, 3),
    );
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let listener = ring.listen(loopback()).unwrap();
    ring.set_listener_per_ip_limit(
        listener,
        PerIpLimit {
            default: 2,
            overrides: vec![(two.into(), 3), (blocked.into(), 0)],
        },
    )
    .unwrap();
    let addr = ring.local_addr(listener).unwrap();
    let mut events = Vec::new();
    let accepted = |events: &[Event]| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Accepted { .. }))
            .count()
    };
    let mut from_one: Vec<TcpStream> = (0..3).map(|_| std_client_from(one, addr)).collect();
    let mut from_two: Vec<TcpStream> = (0..4).map(|_| std_client_from(two, addr)).collect();
    let mut from_blocked = std_client_from(blocked, addr);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let poll_for = |ring: &mut EventLoop, events: &mut Vec<Event>, accepts, refusals| {
        while accepted(events) < accepts || ring.stats().refused_per_ip < refusals {
            assert!(std::time::Instant::now() < deadline, "{events:?}");
            ring.poll(Some(Duration::from_millis(100)), events).unwrap();
        }
    };
    poll_for(&mut ring, &mut events, 5, 3);
    assert!(closed_by_peer(&mut from_one[2]), "the third from {one}");
    assert!(closed_by_peer(&mut from_two[3]), "the fourth from {two}");
    assert!(closed_by_peer(&mut from_blocked), "any from {blocked}");
    assert_eq!(ring.stats().refused_per_ip, 3);
    assert_eq!(ring.stats().refused, 0, "not the listener's own limit");
    let peers = |events: &[Event], ip: Ipv4Addr| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Accepted { peer, .. } if peer.ip() == ip))
            .count()
    };
    assert_eq!((peers(&events, one), peers(&events, two)), (2, 3));
    // One from `one` closes: room for one more from it, and only one.
    drop(from_one.swap_remove(0));
    poll_until(&mut ring, &mut events, |e| {
        e.iter().any(|e| matches!(e, Event::Closed { .. }))
    });
    let mut late = [std_client_from(one, addr), std_client_from(one, addr)];
    poll_for(&mut ring, &mut events, 6, 4);
    assert!(closed_by_peer(&mut late[1]), "the third again");
    assert_eq!(ring.stats().refused_per_ip, 4);
    assert_eq!(peers(&events, one), 3);
}

/// The receive budget counts apart too: a client listener whose connections hold nearly all of
/// `max_buffered_bytes` in half-sent frames closes its own connection that crosses it, while an
/// outbound connection of the same loop (a voter's fetch answer, on a follower) still receives
/// a frame larger than what is left of the listener's budget.
#[test]
fn a_full_listener_budget_spares_the_outbound_connections() {
    use net::transport::{Event, EventLoop};
    use std::io::Write;
    use std::time::Instant;
    use transport_support::loopback;
    const BUDGET: usize = 1 << 20;
    let mut ring = EventLoop::new(Config {
        max_buffered_bytes: BUDGET,
        ..Config::default()
    })
    .unwrap();
    let listener = ring.listen(loopback()).unwrap();
    let listener_addr = ring.local_addr(listener).unwrap();
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let poll = |ring: &mut EventLoop, events: &mut Vec<Event>| {
        assert!(Instant::now() < deadline, "gave up; got {events:?}");
        ring.poll(Some(Duration::from_millis(50)), events).unwrap();
    };
    // A client declares 64 MiB and sends 900 KiB of it: held, under the budget.
    let mut hog = std_client(listener_addr);
    hog.write_all(&(64u32 << 20).to_be_bytes()).unwrap();
    hog.write_all(&vec![1u8; 900 << 10]).unwrap();
    while ring.buffered_bytes() < 900 << 10 {
        poll(&mut ring, &mut events);
    }
    // An outbound connection receives a 600 KiB frame: more than the listener has left.
    let server = std::net::TcpListener::bind(loopback()).unwrap();
    let server_addr = server.local_addr().unwrap();
    let answer = std::thread::spawn(move || {
        let (mut peer, _) = server.accept().unwrap();
        peer.write_all(&net::wire::frame::size_prefix(600 << 10))
            .unwrap();
        peer.write_all(&vec![2u8; 600 << 10]).unwrap();
        peer
    });
    let outbound = ring.connect(server_addr).unwrap();
    let received = |events: &[Event]| {
        events.iter().any(
            |e| matches!(e, Event::Frame { conn, bytes } if *conn == outbound && bytes.len() == 600 << 10),
        )
    };
    while !received(&events) {
        poll(&mut ring, &mut events);
    }
    let _peer = answer.join().unwrap();
    // Another client of the listener crosses the listener's budget: it is the one closed.
    let mut crosser = std_client(listener_addr);
    crosser.write_all(&(1u32 << 20).to_be_bytes()).unwrap();
    crosser.write_all(&vec![3u8; 200 << 10]).unwrap();
    let over_budget = |events: &[Event]| {
        events.iter().any(|e| {
            matches!(
                e,
                Event::Closed {
                    reason: CloseReason::BufferLimit { .. },
                    ..
                }
            )
        })
    };
    while !over_budget(&events) {
        poll(&mut ring, &mut events);
    }
    assert!(!events.iter().any(
        |e| matches!(e, Event::Closed { conn, .. } | Event::ConnectFailed { conn, .. } if *conn == outbound)
    ));
    assert!(closed_by_peer(&mut crosser));
}

/// A closed listener's socket is closed: once its accept is cancelled, connecting to its
/// address is refused, and the connections it accepted before stay served.
#[test]
fn a_closed_listener_refuses_new_connections_and_keeps_its_own() {
    use net::transport::{Event, EventLoop};
    use std::time::Instant;
    use transport_support::{frame_chain, loopback};
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let listener = ring.listen(loopback()).unwrap();
    let addr = ring.local_addr(listener).unwrap();
    let mut kept = std_client(addr);
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !events.iter().any(|e| matches!(e, Event::Accepted { .. })) {
        assert!(Instant::now() < deadline, "{events:?}");
        ring.poll(Some(Duration::from_millis(50)), &mut events)
            .unwrap();
    }
    ring.close_listener(listener).unwrap();
    loop {
        assert!(
            Instant::now() < deadline,
            "the closed listener still takes connections"
        );
        ring.poll(Some(Duration::from_millis(50)), &mut events)
            .unwrap();
        if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
            break;
        }
    }
    let body = pattern(32, 9);
    kept.write_all(&net::wire::frame::size_prefix(body.len()))
        .unwrap();
    kept.write_all(&body).unwrap();
    events.clear();
    let frame = loop {
        assert!(Instant::now() < deadline, "{events:?}");
        ring.poll(Some(Duration::from_millis(50)), &mut events)
            .unwrap();
        if let Some((conn, bytes)) = events.iter().find_map(|e| match e {
            Event::Frame { conn, bytes } => Some((*conn, bytes.clone())),
            _ => None,
        }) {
            break (conn, bytes);
        }
    };
    assert_eq!(frame.1, body);
    ring.send(frame.0, frame_chain(frame.1)).unwrap();
    ring.poll(Some(Duration::from_millis(50)), &mut events)
        .unwrap();
    assert_eq!(transport_support::read_frame(&mut kept).unwrap(), &body[..]);
}
