//! TLS on the io_uring transport (docs/security.md, "TLS"): frames of every size echo both ways
//! through a TLS listener and a TLS outbound connection, TLS 1.2 and 1.3 each forced, mutual TLS
//! refuses missing, untrusted and expired client certificates and shows the accepted one's
//! subject, plaintext peers, garbage and silent peers are closed without disturbing others, a
//! config swap keeps open connections and changes new handshakes, and openssl's s_client talks
//! to the loop.

mod transport_support;
mod transport_tls_support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use net::security::tls::{not_after, subject_dn, ClientAuth, TlsVersion};
use net::transport::{CloseReason, Config, ConnId, ConnectError, Event, EventLoop};
use net::wire::frame::size_prefix;
use rustls::{CipherSuite, ClientConfig, ProtocolVersion};
use transport_support::{
    closed_by_peer, frame_chain, frames, pattern, poll_until, std_client, EchoServer, Seen,
    PATIENCE,
};
use transport_tls_support::{server_name, Pki, StdTlsClient};

const BOTH: &[TlsVersion] = &[];

/// Connect a TLS client loop, queue every body before the handshake is over, and check the
/// echoes: Connected first, then every frame whole and in order.
fn echo_through(ring: &mut EventLoop, conn: ConnId, bodies: &[Bytes]) {
    for body in bodies {
        ring.send(conn, frame_chain(body.clone())).unwrap();
    }
    let mut events = Vec::new();
    poll_until(ring, &mut events, |e| frames(e).len() == bodies.len());
    assert!(
        matches!(events[0], Event::Connected { conn: c } if c == conn),
        "{:?}",
        &events[..1]
    );
    let got = frames(&events);
    for (i, (sent, echoed)) in bodies.iter().zip(&got).enumerate() {
        assert_eq!(sent.len(), echoed.len(), "frame {i} length");
        assert!(sent[..] == echoed[..], "frame {i} content");
    }
    assert_eq!(ring.queued_send_bytes(conn), Some(0));
}

fn close_and_settle(ring: &mut EventLoop, conn: ConnId) {
    ring.close(conn).unwrap();
    let mut events = Vec::new();
    poll_until(ring, &mut events, |e| {
        e.iter()
            .any(|e| matches!(e, Event::Closed { conn: c, .. } if *c == conn))
    });
    assert_eq!(ring.connection_count(), 0);
    transport_support::settle(ring, &mut events);
}

/// Closes the test's one connection, waits for the server to see it closed, and stops the
/// server with nothing left over.
fn close_and_stop(
    ring: &mut EventLoop,
    conn: ConnId,
    server: EchoServer,
) -> transport_support::ServerReport {
    close_and_settle(ring, conn);
    server.wait_for(1, |s| matches!(s, Seen::Closed(..)));
    stop_clean(server)
}

/// A TLS echo server without client authentication, and a good client served by it (one
/// round trip of `body`): the connection the test's hostile peers must leave alone.
fn server_and_good_client(pki: &Pki, config: Config, body: &[u8]) -> (EchoServer, StdTlsClient) {
    let server = EchoServer::start_tls(config, pki.server(ClientAuth::None, BOTH));
    let mut good = StdTlsClient::connect(server.addr, pki.client(&pki.ca, None, BOTH));
    assert_eq!(good.round_trip(body).unwrap(), body);
    (server, good)
}

/// A TLS echo server without client authentication and a client loop, both on `config`, with
/// one TLS connection to it that trusts the test CA and presents no certificate: the set-up of
/// the tests that push frames through TLS.
fn echo_server_and_tls_client(pki: &Pki, config: Config) -> (EchoServer, EventLoop, ConnId) {
    let server = EchoServer::start_tls(config.clone(), pki.server(ClientAuth::None, BOTH));
    let mut ring = EventLoop::new(config).unwrap();
    let conn = ring
        .connect_tls(server.addr, pki.client(&pki.ca, None, BOTH), server_name())
        .unwrap();
    (server, ring, conn)
}

/// The server's report after every connection is gone: nothing left buffered.
fn stop_clean(server: EchoServer) -> transport_support::ServerReport {
    let report = server.stop();
    assert_eq!(report.connections_at_stop, 0);
    assert_eq!(
        report.buffered_at_stop, 0,
        "buffered-bytes accounting drifted"
    );
    report
}

#[test]
fn frames_of_many_sizes_echo_through_tls() {
    sizes_round(Config::default());
}

#[test]
fn every_fallback_forced_still_round_trips_over_tls() {
    sizes_round(Config {
        try_single_issuer: false,
        use_buf_ring: false,
        use_multishot_accept: false,
        ..Config::default()
    });
}

fn sizes_round(config: Config) {
    let pki = Pki::new();
    let (server, mut ring, conn) = echo_server_and_tls_client(&pki, config);
    let bodies: Vec<Bytes> = [8, 9, 100, 16_384, 16_385, 65_536, (1 << 20) + 3, 4 << 20]
        .iter()
        .enumerate()
        .map(|(i, &len)| pattern(len, i as u64))
        .collect();
    echo_through(&mut ring, conn, &bodies);
    let peer = ring.tls_peer(conn).expect("handshake over");
    assert_eq!(peer.protocol_version, ProtocolVersion::TLSv1_3);
    assert_eq!(peer.listener, None);
    assert_eq!(peer.peer_certificates.len(), 1);
    assert_eq!(
        subject_dn(&peer.peer_certificates[0]).unwrap(),
        "CN=server-1,OU=ringraft,O=Example"
    );
    assert!(not_after(&peer.peer_certificates[0]).unwrap() > std::time::SystemTime::now());
    // The server saw no client certificate (none asked for).
    let peers = server.peers();
    assert_eq!(peers.len(), 1);
    assert!(peers[0].1.peer_certificates.is_empty());
    assert_eq!(peers[0].1.server_name.as_deref(), Some("localhost"));
    let report = close_and_stop(&mut ring, conn, server);
    assert_eq!(report.stats.frames_received, bodies.len() as u64);
}

#[test]
fn many_pipelined_frames_and_partial_sends_through_a_tiny_send_buffer() {
    let pki = Pki::new();
    let config = Config {
        send_buffer_bytes: Some(4096),
        ..Config::default()
    };
    let (server, mut ring, conn) = echo_server_and_tls_client(&pki, config);
    let mut bodies: Vec<Bytes> = (0..2000).map(|i| pattern(8 + i % 200, i as u64)).collect();
    bodies.insert(1000, pattern(1 << 20, 7));
    echo_through(&mut ring, conn, &bodies);
    assert!(
        ring.stats().partial_sends > 0,
        "expected short sendmsg completions: {:?}",
        ring.stats()
    );
    close_and_stop(&mut ring, conn, server);
}

#[test]
fn tls_sendmsgs_reuse_their_encryption_buffers() {
    let pki = Pki::new();
    let (server, mut ring, conn) = echo_server_and_tls_client(&pki, Config::default());
    echo_through(&mut ring, conn, &[pattern(100, 0)]);
    // One frame per round trip: every frame is a sendmsg of its own, each after the last is
    // done, so one buffer (and one more in the handshake) serves them all.
    for i in 1..=30u64 {
        let body = pattern(1000 + i as usize * 1000, i);
        ring.send(conn, frame_chain(body.clone())).unwrap();
        let mut events = Vec::new();
        poll_until(&mut ring, &mut events, |e| frames(e).len() == 1);
        assert!(frames(&events)[0] == body);
    }
    let stats = ring.stats();
    assert!(stats.sends >= 31, "{stats:?}");
    assert!((1..=2).contains(&stats.tls_buffers_allocated), "{stats:?}");
    close_and_stop(&mut ring, conn, server);
}

#[test]
fn tls_1_2_and_1_3_can_each_be_forced() {
    let pki = Pki::new();
    for (version, expected, suite) in [
        (
            TlsVersion::Tls12,
            ProtocolVersion::TLSv1_2,
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            TlsVersion::Tls13,
            ProtocolVersion::TLSv1_3,
            CipherSuite::TLS13_AES_128_GCM_SHA256,
        ),
    ] {
        // The server offers both; the client allows one.
        let server =
            EchoServer::start_tls(Config::default(), pki.server(ClientAuth::Required, BOTH));
        let client = pki.client(&pki.ca, Some(&pki.client), &[version]);
        let (mut ring, conn) = tls_client(server.addr, client);
        echo_through(&mut ring, conn, &[pattern(100, 1), pattern(70_000, 2)]);
        assert_eq!(ring.tls_peer(conn).unwrap().protocol_version, expected);
        // Both sides at their default suites agree on AES-128-GCM (security::tls's order).
        assert_eq!(ring.tls_peer(conn).unwrap().cipher_suite, suite);
        let peers = server.peers();
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].1.protocol_version, expected);
        assert_eq!(
            subject_dn(&peers[0].1.peer_certificates[0]).unwrap(),
            "CN=voter-2,OU=ringraft,O=Example"
        );
        close_and_stop(&mut ring, conn, server);
    }
    // A server that allows only TLS 1.3 refuses a TLS 1.2-only client.
    let server = EchoServer::start_tls(
        Config::default(),
        pki.server(ClientAuth::None, &[TlsVersion::Tls13]),
    );
    let client = pki.client(&pki.ca, None, &[TlsVersion::Tls12]);
    let (mut ring, conn) = tls_client(server.addr, client);
    assert_tls_connect_fails(&mut ring, conn);
    server.wait_for(1, |s| matches!(s, Seen::Closed(_, CloseReason::Tls(_))));
    stop_clean(server);
}

/// A client loop with one TLS connection under `client` to `addr`, started.
fn tls_client(addr: SocketAddr, client: Arc<ClientConfig>) -> (EventLoop, ConnId) {
    let mut ring = EventLoop::new(Config::default()).unwrap();
    let conn = ring.connect_tls(addr, client, server_name()).unwrap();
    (ring, conn)
}

/// The first event of `ring` is the failure of `conn`'s TLS handshake.
fn assert_tls_connect_fails(ring: &mut EventLoop, conn: ConnId) {
    let mut events = Vec::new();
    poll_until(ring, &mut events, |e| !e.is_empty());
    assert!(
        matches!(&events[0], Event::ConnectFailed { conn: c, error: ConnectError::Tls(_) } if *c == conn),
        "{events:?}"
    );
}

/// What happened to a client refused by mutual TLS: it never gets an echo, and the server
/// closes with a TLS reason naming the certificate problem.
fn refused(pki: &Pki, server: &EchoServer, keystore: Option<&std::path::Path>) -> String {
    let (mut ring, conn) = tls_client(server.addr, pki.client(&pki.ca, keystore, BOTH));
    ring.send(conn, frame_chain(pattern(16, 1))).unwrap();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| {
        e.iter().any(|e| {
            matches!(
                e,
                Event::ConnectFailed { .. } | Event::Closed { .. } | Event::Frame { .. }
            )
        })
    });
    assert!(frames(&events).is_empty(), "a refused client got an echo");
    let seen = server.wait_for(1, |s| matches!(s, Seen::Closed(..)));
    match seen.last() {
        Some(Seen::Closed(_, CloseReason::Tls(why))) => why.clone(),
        other => panic!("expected a TLS close, got {other:?}"),
    }
}

#[test]
fn mutual_tls_refuses_bad_client_certificates_and_names_the_good_one() {
    let pki = Pki::new();
    let server = EchoServer::start_tls(Config::default(), pki.server(ClientAuth::Required, BOTH));
    let why = refused(&pki, &server, None);
    assert!(why.contains("certificate"), "{why}");
    let why = refused(&pki, &server, Some(&pki.foreign_client));
    assert!(why.contains("UnknownIssuer"), "{why}");
    let why = refused(&pki, &server, Some(&pki.expired_client));
    assert!(why.contains("expired"), "{why}");
    // The good one is served, and its subject is what principal mapping will see.
    let client = pki.client(&pki.ca, Some(&pki.client), BOTH);
    let (mut ring, conn) = tls_client(server.addr, client);
    echo_through(&mut ring, conn, &[pattern(64, 3)]);
    let peers = server.peers();
    assert_eq!(peers.len(), 1);
    let chain = &peers[0].1.peer_certificates;
    assert_eq!(chain.len(), 1);
    assert_eq!(
        subject_dn(&chain[0]).unwrap(),
        "CN=voter-2,OU=ringraft,O=Example"
    );
    assert!(peers[0].1.listener.is_some());
    close_and_stop(&mut ring, conn, server);
}

#[test]
fn requested_client_auth_accepts_clients_with_and_without_certificates() {
    let pki = Pki::new();
    let server = EchoServer::start_tls(Config::default(), pki.server(ClientAuth::Requested, BOTH));
    let mut anonymous = StdTlsClient::connect(server.addr, pki.client(&pki.ca, None, BOTH));
    let mut named =
        StdTlsClient::connect(server.addr, pki.client(&pki.ca, Some(&pki.client), BOTH));
    let body = pattern(50, 4);
    assert_eq!(anonymous.round_trip(&body).unwrap(), &body[..]);
    assert_eq!(named.round_trip(&body).unwrap(), &body[..]);
    let mut chains: Vec<usize> = server
        .peers()
        .iter()
        .map(|(_, p)| p.peer_certificates.len())
        .collect();
    chains.sort();
    assert_eq!(chains, vec![0, 1]);
    // Requested still verifies a certificate that is presented.
    let why = refused(&pki, &server, Some(&pki.foreign_client));
    assert!(why.contains("UnknownIssuer"), "{why}");
    drop((anonymous, named));
    server.wait_for(2, |s| matches!(s, Seen::Closed(_, CloseReason::PeerClosed)));
    stop_clean(server);
}

/// A ClientHello as rustls's client sends it.
fn client_hello(pki: &Pki) -> Vec<u8> {
    let mut client =
        rustls::ClientConnection::new(pki.client(&pki.ca, None, BOTH), server_name()).unwrap();
    let mut hello = Vec::new();
    while client.wants_write() {
        client.write_tls(&mut hello).unwrap();
    }
    hello
}

#[test]
fn plaintext_garbage_and_broken_handshakes_close_only_their_connection() {
    let pki = Pki::new();
    let body = pattern(100, 9);
    let (server, mut good) = server_and_good_client(&pki, Config::default(), &body);

    let hello = client_hello(&pki);
    let mut kafka_request = size_prefix(12).to_vec();
    kafka_request.extend_from_slice(&[0, 18, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0]); // ApiVersions v3
    let mut hello_then_garbage = hello.clone();
    hello_then_garbage.extend_from_slice(&pattern(3000, 5));
    // The ClientHello record whole, its message garbled inside.
    let mut garbled_hello = hello.clone();
    garbled_hello[12..60].fill(0xff);
    let attacks: Vec<Vec<u8>> = vec![
        kafka_request,                 // a plaintext Kafka client
        pattern(4096, 0xbad).to_vec(), // garbage before the handshake
        hello_then_garbage,            // garbage after a good ClientHello
        vec![22, 3, 1, 0xff, 0xff],    // a record header claiming 64 KiB
        garbled_hello,                 // garbage inside the ClientHello
    ];
    for (i, attack) in attacks.iter().enumerate() {
        let mut bad = std_client(server.addr);
        let _ = bad.write_all(attack);
        if i == 3 {
            // Too large for a record: refused once rustls has read the header.
            let _ = bad.write_all(&pattern(20_000, 6));
        }
        assert!(closed_by_peer(&mut bad), "attack {i} kept its connection");
        assert_eq!(
            good.round_trip(&body).unwrap(),
            &body[..],
            "after attack {i}"
        );
    }
    let seen = server.wait_for(attacks.len(), |s| {
        matches!(s, Seen::Closed(_, CloseReason::Tls(_)))
    });
    assert!(!seen.iter().any(|s| matches!(
        s,
        Seen::Closed(_, reason) if !matches!(reason, CloseReason::Tls(_))
    )));
    // And a new good client is served after all that.
    let mut late = StdTlsClient::connect(server.addr, pki.client(&pki.ca, None, BOTH));
    assert_eq!(late.round_trip(&body).unwrap(), &body[..]);
    drop((good, late));
    server.wait_for(2, |s| matches!(s, Seen::Closed(_, CloseReason::PeerClosed)));
    stop_clean(server);
}

#[test]
fn a_silent_or_stalled_handshake_times_out_and_established_connections_stay() {
    let pki = Pki::new();
    let timeout = Duration::from_millis(300);
    let body = pattern(40, 2);
    let config = Config {
        tls_handshake_timeout: timeout,
        ..Config::default()
    };
    let (server, mut good) = server_and_good_client(&pki, config, &body);
    let started = Instant::now();
    let mut silent = std_client(server.addr);
    let mut stalled = std_client(server.addr);
    let hello = client_hello(&pki);
    stalled.write_all(&hello[..hello.len() - 10]).unwrap();
    assert!(closed_by_peer(&mut silent));
    assert!(closed_by_peer(&mut stalled));
    let took = started.elapsed();
    assert!(took >= timeout && took < PATIENCE, "closed after {took:?}");
    server.wait_for(2, |s| {
        matches!(s, Seen::Closed(_, CloseReason::TlsHandshakeTimeout))
    });
    // The established connection has lived past the deadline and is still served.
    assert_eq!(good.round_trip(&body).unwrap(), &body[..]);
    drop(good);
    server.wait_for(1, |s| matches!(s, Seen::Closed(_, CloseReason::PeerClosed)));
    stop_clean(server);

    // The client side: a server that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut ring = EventLoop::new(Config {
        tls_handshake_timeout: timeout,
        ..Config::default()
    })
    .unwrap();
    let conn = ring
        .connect_tls(
            listener.local_addr().unwrap(),
            pki.client(&pki.ca, None, BOTH),
            server_name(),
        )
        .unwrap();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| !e.is_empty());
    assert!(
        matches!(
            events[..],
            [Event::ConnectFailed { conn: c, error: ConnectError::TlsHandshakeTimeout }] if c == conn
        ),
        "{events:?}"
    );
    assert_eq!(ring.connection_count(), 0);
}

#[test]
fn a_config_swap_keeps_open_connections_and_changes_new_handshakes() {
    let pki = Pki::new();
    let server = EchoServer::start_tls(Config::default(), pki.server(ClientAuth::None, BOTH));
    let mut before = StdTlsClient::connect(server.addr, pki.client(&pki.ca, None, BOTH));
    let body = pattern(30, 1);
    assert_eq!(before.round_trip(&body).unwrap(), &body[..]);

    // The new server certificate comes from the other CA.
    let new_cert = pki.other_ca.leaf("server-2", false);
    let new_config = net::security::tls::server_config(&net::security::tls::TlsSettings {
        keystore_location: Some(new_cert),
        ..Default::default()
    })
    .unwrap();
    server.reload(new_config);
    // The open connection goes on with its session.
    assert_eq!(before.round_trip(&body).unwrap(), &body[..]);
    // A client trusting only the old CA now fails; one trusting the new CA gets server-2.
    let mut old_trust = StdTlsClient::connect(server.addr, pki.client(&pki.ca, None, BOTH));
    let err = old_trust.round_trip(&body).unwrap_err();
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    let (mut ring, conn) = tls_client(server.addr, pki.client(&pki.other_ca, None, BOTH));
    echo_through(&mut ring, conn, std::slice::from_ref(&body));
    let chain = ring.tls_peer(conn).unwrap().peer_certificates;
    assert_eq!(
        subject_dn(&chain[0]).unwrap(),
        "CN=server-2,OU=ringraft,O=Example"
    );
    // tls_connections lists both live sessions, not the failed one.
    assert_eq!(server.peers().len(), 2);
    close_and_settle(&mut ring, conn);
    drop((before, old_trust));
    server.wait_for(3, |s| matches!(s, Seen::Closed(..)));
    stop_clean(server);
}

/// Run `openssl s_client` against the loop with `version_flag`, send one Kafka-framed request
/// through it and read the echo back from its stdout. Bounded: the process is killed at the end.
fn s_client_echo(version_flag: &str, expected: ProtocolVersion) {
    let pki = Pki::new();
    let server = EchoServer::start_tls(Config::default(), pki.server(ClientAuth::None, BOTH));
    let mut child = match Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &server.addr.to_string(),
            version_flag,
            "-quiet",
            "-verify_return_error",
            "-CAfile",
        ])
        .arg(&pki.ca.truststore)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        // .ci/run installs openssl: a missing one is a broken set-up, never a skip.
        Err(e) => panic!("cannot run `openssl s_client` (Debian package openssl): {e}"),
    };
    let body = pattern(1000, 3);
    let mut request = size_prefix(body.len()).to_vec();
    request.extend_from_slice(&body);
    child.stdin.as_mut().unwrap().write_all(&request).unwrap();
    child.stdin.as_mut().unwrap().flush().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut echoed = vec![0u8; request.len()];
        let result = stdout.read_exact(&mut echoed).map(|()| echoed);
        let _ = tx.send(result);
    });
    let echoed = rx.recv_timeout(PATIENCE);
    let peers = server.peers();
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    let echoed = echoed
        .expect("s_client echoed in time")
        .expect("s_client output");
    assert_eq!(&echoed[4..], &body[..]);
    assert_eq!(&echoed[..4], &size_prefix(body.len()));
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].1.protocol_version, expected);
    server.wait_for(1, |s| matches!(s, Seen::Closed(..)));
    stop_clean(server);
}

#[test]
fn openssl_s_client_tls13_round_trips_a_frame() {
    s_client_echo("-tls1_3", ProtocolVersion::TLSv1_3);
}

#[test]
fn openssl_s_client_tls12_round_trips_a_frame() {
    s_client_echo("-tls1_2", ProtocolVersion::TLSv1_2);
}

#[test]
fn a_plain_loop_client_against_a_tls_port_and_back() {
    // A TLS loop client against a plaintext echo server fails its handshake (ConnectFailed),
    // and the same loop then serves a TLS connection.
    let pki = Pki::new();
    let plain = transport_support::EchoServer::start(Config::default());
    let (mut ring, conn) = tls_client(plain.addr, pki.client(&pki.ca, None, BOTH));
    assert_tls_connect_fails(&mut ring, conn);
    let tls = EchoServer::start_tls(Config::default(), pki.server(ClientAuth::None, BOTH));
    let conn = ring
        .connect_tls(tls.addr, pki.client(&pki.ca, None, BOTH), server_name())
        .unwrap();
    echo_through(&mut ring, conn, &[pattern(10, 1)]);
    // A plain connection on the same loop alongside.
    let plain_conn = ring.connect(plain.addr).unwrap();
    ring.send(plain_conn, frame_chain(pattern(10, 2))).unwrap();
    let mut events = Vec::new();
    poll_until(&mut ring, &mut events, |e| frames(e).len() == 1);
    assert!(ring.tls_peer(plain_conn).is_none());
    assert_eq!(ring.tls_connections().len(), 1);
}

#[test]
fn a_huge_frame_sent_slowly_over_tls_hits_the_buffer_budget() {
    const BUDGET: usize = 1 << 20;
    let pki = Pki::new();
    let body = pattern(32, 5);
    let config = Config {
        max_buffered_bytes: BUDGET,
        ..Config::default()
    };
    let (server, mut good) = server_and_good_client(&pki, config, &body);
    let mut slow = StdTlsClient::connect(server.addr, pki.client(&pki.ca, None, BOTH));
    // Claims 64 MiB (below the frame limit), then sends it in 64 KiB writes.
    let mut written = 0usize;
    let chunk = pattern(64 * 1024, 6);
    let mut result = slow
        .stream
        .write_all(&(64u32 << 20).to_be_bytes())
        .and_then(|()| slow.stream.flush());
    while result.is_ok() && written < 16 * BUDGET {
        result = slow
            .stream
            .write_all(&chunk)
            .and_then(|()| slow.stream.flush());
        written += chunk.len();
    }
    let seen = server.wait_for(1, |s| {
        matches!(s, Seen::Closed(_, CloseReason::BufferLimit { .. }))
    });
    assert!(!seen
        .iter()
        .any(|s| matches!(s, Seen::Frame(_, len) if *len > 1000)));
    assert!(written > BUDGET, "only {written} bytes written");
    assert_eq!(good.round_trip(&body).unwrap(), &body[..]);
    drop((good, slow));
    server.wait_for(1, |s| matches!(s, Seen::Closed(_, CloseReason::PeerClosed)));
    let report = stop_clean(server);
    report.assert_within_budget(BUDGET);
}

#[test]
fn subject_names_print_as_kafka_prints_them() {
    use rcgen::{CertificateParams, DistinguishedName, DnType, DnValue, KeyPair};
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CountryName, "SE");
    dn.push(DnType::OrganizationName, "Example, Inc.");
    dn.push(
        DnType::CustomDnType(vec![0, 9, 2342, 19200300, 100, 1, 25]),
        DnValue::Ia5String("corp".try_into().unwrap()),
    );
    dn.push(
        DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]),
        DnValue::Ia5String("a@b.c".try_into().unwrap()),
    );
    dn.push(DnType::CommonName, " #voter+1 ");
    params.distinguished_name = dn;
    let cert = params.self_signed(&key).unwrap();
    assert_eq!(
        subject_dn(cert.der()).unwrap(),
        "CN=\\ \\#voter\\+1\\ ,1.2.840.113549.1.9.1=#16056140622e63,DC=corp,O=Example\\, Inc.,C=SE"
    );
}
