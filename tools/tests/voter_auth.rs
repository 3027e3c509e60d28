//! Voters trust only voters (docs/security.md): a 3-voter cluster whose controller listeners
//! use mutual TLS, each node with a certificate for `CN=ringraft-<id>` from the cluster's CA,
//! under acks=-1 load on the PLAINTEXT client listeners. Processes that pose as voter 2, with
//! spoofed FetchQuorumRecords (fetch and durable offsets tracking the leader's log end), Votes
//! and BeginQuorumEpochs, while both followers are paused: no acks=-1 write is acknowledged,
//! the epoch does not move, and after the leader is killed and the followers resume, every
//! acknowledged record is in the new leader's log.
//!
//! The posers: a plain TCP connection (no TLS), TLS without a certificate, TLS with a
//! certificate from another CA, and TLS with certificates the cluster's own CA issued to other
//! principals (an observer `ringraft-9`, a user `alice`). Real `ringraft serve` processes on
//! 127.0.0.1; every wait is bounded and every process is killed when its guard drops.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::raft::{
    BeginQuorumEpochRequest, DescribeQuorumResponse, ErrorCode, FetchQuorumRecordsRequest, Request,
    Response, VoteRequest,
};
use net::client::BlockingClient;
use net::security::tls::{client_config, TlsSettings};
use net::wire::{quorum, ResponseHeader, WireReader};
use support::*;
use testkit::certs::{Authority, Validity};

const TIMEOUT: Duration = Duration::from_secs(5);
/// How long the posers keep at it while the followers are paused: longer than the fetch
/// timeout (2 s), shorter than the leader's progress timeout (3 s, docs/configuration.md),
/// after which an honest leader without fetches from a majority resigns (as it must: the
/// spoofed fetches no longer keep it in office).
const ATTACK: Duration = Duration::from_millis(2500);

fn describe(addr: SocketAddr) -> Option<DescribeQuorumResponse> {
    BlockingClient::connect(addr, TIMEOUT)
        .ok()?
        .describe_quorum()
        .ok()
        .filter(|d| d.error.is_none())
}

/// A poser's way in to a controller listener.
enum Poser {
    Plain,
    Tls(Arc<rustls::ClientConfig>),
}

fn tls_poser(truststore: &Path, keystore: Option<&Path>) -> Poser {
    Poser::Tls(
        client_config(&TlsSettings {
            keystore_location: keystore.map(Path::to_path_buf),
            truststore_location: Some(truststore.to_path_buf()),
            ..TlsSettings::default()
        })
        .unwrap(),
    )
}

/// Sends `request` as a peer would and reads the answer: Err when the connection or the
/// handshake fails, or it closes without an answer.
fn send_as(poser: &Poser, addr: SocketAddr, request: &Request) -> Result<Response, String> {
    let tcp = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    tcp.set_read_timeout(Some(TIMEOUT)).unwrap();
    tcp.set_write_timeout(Some(TIMEOUT)).unwrap();
    let mut stream: Box<dyn ReadWrite> = match poser {
        Poser::Plain => Box::new(tcp),
        Poser::Tls(config) => {
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
            Box::new(rustls::StreamOwned::new(conn, tcp))
        }
    };
    exchange(&mut stream, request)
}

/// Writes `request` on `stream` as a peer would and reads its answer.
fn exchange(stream: &mut dyn ReadWrite, request: &Request) -> Result<Response, String> {
    stream
        .write_all(&raw_request_frame(request))
        .and_then(|()| stream.flush())
        .map_err(|e| format!("send: {e}"))?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .map_err(|e| format!("no answer: {e}"))?;
    let mut body = vec![0u8; i32::from_be_bytes(size).clamp(0, 1 << 20) as usize];
    stream
        .read_exact(&mut body)
        .map_err(|e| format!("truncated answer: {e}"))?;
    let mut r = WireReader::new(Bytes::from(body));
    ResponseHeader::read(&mut r, true).map_err(|e| format!("header: {e}"))?;
    quorum::decode_response(request.api_key(), &mut r).map_err(|e| format!("decode: {e}"))
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn spoofed_fetch(epoch: i32, log_end: i64) -> Request {
    Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
        cluster_id: CLUSTER_ID.into(),
        replica_id: 2,
        leader_epoch: epoch,
        fetch_offset: log_end,
        last_fetched_epoch: epoch,
        is_follower: true,
        max_wait_ms: 0,
        durable_offset: log_end,
        replica_directory_id: Default::default(),
        lease_echo: None,
    })
}

fn spoofed_vote(epoch: i32) -> Request {
    Request::Vote(VoteRequest {
        cluster_id: CLUSTER_ID.into(),
        candidate_epoch: epoch + 1,
        candidate_id: 2,
        last_epoch: epoch,
        last_epoch_end_offset: i64::from(i32::MAX),
        pre_vote: false,
        ..Default::default()
    })
}

fn spoofed_begin(epoch: i32) -> Request {
    Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
        cluster_id: CLUSTER_ID.into(),
        leader_id: 2,
        leader_epoch: epoch + 1,
    })
}

/// Every answer a poser got: refused with CLUSTER_AUTHORIZATION_FAILED, or no answer at all.
fn assert_refused(who: &str, answers: &[Result<Response, String>]) {
    assert!(!answers.is_empty());
    for response in answers.iter().flatten() {
        assert_eq!(
            response.error(),
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            "{who} was answered {response:?}"
        );
    }
}

fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a child process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
}

#[test]
fn processes_posing_as_voter_2_while_the_followers_are_paused_get_nothing_acknowledged() {
    let mut cluster = Cluster::new_mutual_tls(3);
    let leader = cluster.start_all_and_elect();
    let stop = Arc::new(AtomicBool::new(false));
    let (acked, producer) = start_load(
        (1..=3).map(|id| cluster.addr(id)).collect(),
        Arc::clone(&stop),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while acked.lock().unwrap().len() < 50 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        acked.lock().unwrap().len() >= 50,
        "the mTLS cluster commits"
    );

    // Posers: certificates from the cluster's CA for other principals, one from another CA.
    let pki = cluster.pki.as_ref().unwrap();
    let truststore = pki.ca_path();
    let observer = pki
        .issue(
            "ringraft-9",
            "ringraft-9",
            &["127.0.0.1"],
            Validity::Current,
        )
        .unwrap();
    let alice = pki
        .issue("alice", "alice", &["127.0.0.1"], Validity::Current)
        .unwrap();
    let rogue_ca = Authority::create(&cluster.root.path().join("rogue"), "rogue-ca").unwrap();
    let rogue = rogue_ca
        .issue(
            "ringraft-2",
            "ringraft-2",
            &["127.0.0.1"],
            Validity::Current,
        )
        .unwrap();
    let posers = [
        ("plain TCP", Poser::Plain),
        ("TLS without a certificate", tls_poser(&truststore, None)),
        (
            "another CA's ringraft-2",
            tls_poser(&truststore, Some(&rogue)),
        ),
        (
            "the observer ringraft-9",
            tls_poser(&truststore, Some(&observer)),
        ),
        ("the user alice", tls_poser(&truststore, Some(&alice))),
    ];

    let followers: Vec<i32> = cluster.others(leader);
    for &id in &followers {
        signal(
            cluster.node(id).process.as_ref().unwrap().pid(),
            libc::SIGSTOP,
        );
    }
    std::thread::sleep(Duration::from_millis(300)); // appends in flight settle
    let before = describe(cluster.addr(leader)).expect("the leader answers");
    let acked_before = acked.lock().unwrap().len();
    let controller = cluster.nodes[cluster.index(leader).unwrap()].controller_addr;
    let mut answers: Vec<Vec<Result<Response, String>>> =
        posers.iter().map(|_| Vec::new()).collect();
    let end = Instant::now() + ATTACK;
    while Instant::now() < end {
        let log_end = describe(cluster.addr(leader))
            .and_then(|d| voter_log_end(&d, leader))
            .unwrap_or(before.high_watermark);
        for (i, (_, poser)) in posers.iter().enumerate() {
            let fetch = spoofed_fetch(before.leader_epoch, log_end);
            answers[i].push(send_as(poser, controller, &fetch));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Spoofed elections and epochs, to every voter (the paused ones answer later, or never).
    for (i, (_, poser)) in posers.iter().enumerate() {
        let vote = spoofed_vote(before.leader_epoch);
        let begin = spoofed_begin(before.leader_epoch);
        answers[i].push(send_as(poser, controller, &vote));
        answers[i].push(send_as(poser, controller, &begin));
    }
    let after = describe(cluster.addr(leader)).expect("the leader still answers");
    let acked_after = acked.lock().unwrap().len();
    for ((who, _), got) in posers.iter().zip(&answers) {
        assert_refused(who, got);
        eprintln!(
            "{who}: {} requests, {} answered (all CLUSTER_AUTHORIZATION_FAILED)",
            got.len(),
            got.iter().filter(|a| a.is_ok()).count()
        );
    }
    assert!(
        answers[3].iter().any(Result::is_ok),
        "a certificate of this CA is answered (refused), not just dropped"
    );
    assert_eq!(
        acked_after, acked_before,
        "acks=-1 writes were acknowledged with both followers paused"
    );
    assert_eq!(
        after.high_watermark, before.high_watermark,
        "the leader's high watermark moved with both followers paused"
    );
    assert_eq!(
        (after.leader_id, after.leader_epoch),
        (before.leader_id, before.leader_epoch),
        "a spoofed Vote or BeginQuorumEpoch moved the epoch"
    );

    // The leader dies; the followers resume and elect one of themselves.
    let leader_pid = cluster.node(leader).process.as_ref().unwrap().pid();
    signal(leader_pid, libc::SIGKILL);
    for &id in &followers {
        signal(
            cluster.node(id).process.as_ref().unwrap().pid(),
            libc::SIGCONT,
        );
    }
    let new_leader = cluster.wait_for_leader(Some(leader));
    let deadline = Instant::now() + Duration::from_secs(20);
    while acked.lock().unwrap().len() < acked_after + 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let mut acknowledged = acked.lock().unwrap().clone();
    acknowledged.sort();
    assert!(
        acknowledged.len() >= acked_after + 20,
        "the new leader {new_leader} commits"
    );
    let last = acknowledged.last().unwrap().0;
    let deadline = Instant::now() + Duration::from_secs(20);
    let caught_up = |d: &DescribeQuorumResponse| {
        followers.iter().all(|id| {
            d.current_voters
                .iter()
                .any(|v| v.replica_id == *id && v.log_end_offset > last)
        })
    };
    while !describe(cluster.addr(new_leader)).is_some_and(|d| caught_up(&d)) {
        assert!(
            Instant::now() < deadline,
            "the followers never reached {last}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.node(leader).process = None;
    cluster.stop_all();
    for id in followers {
        let log = read_log(&cluster.node(id).dir);
        assert!(
            log_holds_once_in_order(&log, &acknowledged),
            "node {id}'s log lost or repeated an acknowledged record"
        );
    }
}

/// A client connection that stays open (to see whether the node closes it).
fn open_tls(
    config: Arc<rustls::ClientConfig>,
    addr: SocketAddr,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let tcp = TcpStream::connect_timeout(&addr, TIMEOUT).unwrap();
    tcp.set_read_timeout(Some(TIMEOUT)).unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    rustls::StreamOwned::new(conn, tcp)
}

/// One anonymous FindQuorum on an open connection: Ok with the answer's error code.
fn find_quorum_on(
    stream: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
) -> Result<ErrorCode, String> {
    let request = Request::FindQuorum(engine::raft::FindQuorumRequest {
        cluster_id: CLUSTER_ID.into(),
        replica_id: -1,
        boot_timestamp: 0,
        host: String::new(),
        port: -1,
    });
    exchange(stream, &request).map(|response| response.error())
}

#[test]
fn a_reloaded_truststore_closes_the_connections_it_no_longer_trusts_and_keeps_the_others() {
    let mut cluster = Cluster::new_mutual_tls(1);
    cluster.start_all_and_elect();
    let controller = cluster.nodes[0].controller_addr;
    let pid = cluster.node(1).process.as_ref().unwrap().pid();
    let root = cluster.root.path().to_owned();
    let pki = cluster.pki.as_ref().unwrap();
    let old_ca = std::fs::read_to_string(pki.ca_path()).unwrap();
    let kept = pki
        .issue("kept", "ringraft-8", &["127.0.0.1"], Validity::Current)
        .unwrap();
    let new_ca = Authority::create(&root.join("new"), "new-ca").unwrap();
    let moved = new_ca
        .issue("moved", "ringraft-9", &["127.0.0.1"], Validity::Current)
        .unwrap();
    // The client side trusts the node's (old-CA) certificate throughout, from a copy: the node's
    // truststore file is rewritten below.
    let client_trust = root.join("client-ca.pem");
    std::fs::write(&client_trust, &old_ca).unwrap();
    let trusting = |keystore: &Path| match tls_poser(&client_trust, Some(keystore)) {
        Poser::Tls(config) => config,
        Poser::Plain => unreachable!(),
    };
    let mut old_client = open_tls(trusting(&kept), controller);
    assert_eq!(find_quorum_on(&mut old_client), Ok(ErrorCode::NONE));
    assert!(
        find_quorum_on(&mut open_tls(trusting(&moved), controller)).is_err(),
        "the new CA is not trusted yet"
    );

    // The truststore now holds only the new CA; SIGHUP.
    let new_ca_pem = std::fs::read_to_string(new_ca.ca_path()).unwrap();
    std::fs::write(pki.ca_path(), &new_ca_pem).unwrap();
    signal(pid, libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut closed = false;
    while Instant::now() < deadline && !closed {
        std::thread::sleep(Duration::from_millis(100));
        closed = find_quorum_on(&mut old_client).is_err();
    }
    assert!(closed, "the connection whose CA was removed stays open");
    let mut new_client = open_tls(trusting(&moved), controller);
    assert_eq!(
        find_quorum_on(&mut new_client),
        Ok(ErrorCode::NONE),
        "a certificate of the new CA is taken after the reload\n{}",
        cluster.stderr_tail(1)
    );

    // Both CAs: a connection of either is taken, and the open one survives another reload.
    std::fs::write(pki.ca_path(), format!("{old_ca}{new_ca_pem}")).unwrap();
    signal(pid, libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(find_quorum_on(&mut new_client), Ok(ErrorCode::NONE));
    let mut again = open_tls(trusting(&kept), controller);
    assert_eq!(find_quorum_on(&mut again), Ok(ErrorCode::NONE));
    drop(again);
    assert!(cluster.node(1).process.as_mut().unwrap().exited().is_none());
}
