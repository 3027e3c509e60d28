//! Process tests of Produce's `timeout_ms` and of Produce requests left waiting when the leader
//! loses its quorum: real `ringraft serve` processes on 127.0.0.1 (see support/mod.rs), the
//! followers paused with SIGSTOP; every wait is bounded, and every process is resumed and killed
//! when its guard drops, also when an assertion fails.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::raft::ErrorCode;
use net::client::BlockingClient;
use net::wire::kafka::{
    ProducePartition, ProduceRequest, ProduceResponse, ProduceTopic, PRODUCE, PRODUCE_SPEC,
};
use net::wire::quorum::{METADATA_PARTITION, METADATA_TOPIC};
use net::wire::{RequestHeader, ResponseHeader, WireReader, WireWriter};
use support::*;

/// Longest wait for any one response; the leader resigns after quorum.progress.timeout.ms
/// (3000 ms by default), far below this.
const READ_TIMEOUT: Duration = Duration::from_secs(15);
const PRODUCE_VERSION: i16 = 9;

/// Sends SIGCONT to the paused processes when dropped, so that a failed assertion never leaves
/// a stopped process behind (the cluster's guards then kill them).
struct Resume(Vec<i32>);

impl Drop for Resume {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: plain syscall on our own child's pid.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
    }
}

/// Stops (SIGSTOP) the two followers of `leader` in a 3-node cluster; they go on when the
/// returned guard drops.
fn pause_followers(cluster: &mut Cluster, leader: i32) -> Resume {
    let followers: Vec<i32> = cluster.others(leader);
    let resume = Resume(
        followers
            .iter()
            .map(|&id| cluster.node(id).process.as_ref().unwrap().child.id() as i32)
            .collect(),
    );
    for &id in &followers {
        let follower = cluster.node(id).process.as_ref().unwrap();
        follower.signal(libc::SIGSTOP);
    }
    resume
}

/// A raw Kafka connection that pipelines Produce requests (several in flight, answered in
/// order), which the blocking client does not do.
struct PipelinedProducer {
    stream: TcpStream,
    next_correlation: i32,
}

impl PipelinedProducer {
    fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            next_correlation: 1,
        }
    }

    /// Sends a Produce (acks=-1) of one batch holding `value`; returns its correlation id.
    fn send(&mut self, value: &str, timeout_ms: i32) -> i32 {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let request = ProduceRequest {
            transactional_id: None,
            acks: -1,
            timeout_ms,
            topics: vec![ProduceTopic {
                name: METADATA_TOPIC.into(),
                partitions: vec![ProducePartition {
                    index: METADATA_PARTITION,
                    records: Some(batch(value)),
                }],
            }],
        };
        let mut w = WireWriter::with_capacity(256);
        w.i32(0);
        RequestHeader {
            api_key: PRODUCE,
            api_version: PRODUCE_VERSION,
            correlation_id,
            client_id: Some("produce-timeout-test".into()),
        }
        .write(&mut w, PRODUCE_SPEC.is_flexible(PRODUCE_VERSION));
        request.encode(&mut w, PRODUCE_VERSION);
        let mut frame = w.into_inner();
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&frame).unwrap();
        correlation_id
    }

    /// Reads the next response: (correlation id, the partition's error, base offset). Fails
    /// the test if nothing arrives within [`READ_TIMEOUT`].
    fn receive(&mut self) -> (i32, ErrorCode, i64) {
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .unwrap_or_else(|e| panic!("no Produce response within {READ_TIMEOUT:?}: {e}"));
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).unwrap();
        let mut r = WireReader::new(Bytes::from(body));
        let flexible = PRODUCE_SPEC.response_header_flexible(PRODUCE_VERSION);
        let header = ResponseHeader::read(&mut r, flexible).unwrap();
        let response = ProduceResponse::decode(&mut r, PRODUCE_VERSION).unwrap();
        let partition = &response.topics[0].partitions[0];
        (
            header.correlation_id,
            partition.error,
            partition.base_offset,
        )
    }

    /// [`Self::receive`] for the answer to request `correlation_id`, which responses in
    /// request order make the next one: (the partition's error, base offset).
    fn receive_answer_to(&mut self, correlation_id: i32) -> (ErrorCode, i64) {
        let (corr, error, offset) = self.receive();
        assert_eq!(corr, correlation_id, "responses in request order");
        (error, offset)
    }
}

#[test]
fn a_produce_without_quorum_times_out_and_the_lost_leadership_answers_the_rest_in_order() {
    let (mut cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, Duration::from_secs(5));
    let first = produce_one(&mut client, "before-the-pause").expect("a healthy cluster commits");
    cluster.wait_for_voters_at(leader, first + 1);

    let resume = pause_followers(&mut cluster, leader);

    // Three requests in flight on one connection. The first and the third give up after
    // 500 ms; the second would wait a minute, but the leader resigns first (check-quorum after
    // quorum.progress.timeout.ms) and must answer it then. Responses keep the request order, so
    // the third, although timed out long before, comes after the second.
    let mut producer = PipelinedProducer::connect(cluster.addr(leader));
    let started = Instant::now();
    let short = producer.send("times-out", 500);
    let long = producer.send("outlives-the-leadership", 60_000);
    let short_again = producer.send("times-out-behind-the-long-one", 500);

    let (error, offset) = producer.receive_answer_to(short);
    let first_answer = started.elapsed();
    assert_eq!(
        error,
        ErrorCode::REQUEST_TIMED_OUT,
        "no quorum: the 500 ms produce times out, got {}",
        error
    );
    assert_eq!(offset, -1);

    let (error, _) = producer.receive_answer_to(long);
    let second_answer = started.elapsed();
    assert_eq!(
        error,
        ErrorCode::NOT_LEADER_OR_FOLLOWER,
        "the leader resigned: its waiting produce is answered, got {}",
        error
    );

    let (error, _) = producer.receive_answer_to(short_again);
    assert!(
        error == ErrorCode::REQUEST_TIMED_OUT || error == ErrorCode::NOT_LEADER_OR_FOLLOWER,
        "the third produce is answered with a timeout (or the resignation if the leader \
         resigned before its 500 ms passed), got {}",
        error
    );
    eprintln!(
        "timed out after {first_answer:?}; the waiting produce answered after \
         {second_answer:?} (resignation)"
    );

    // Resumed, the cluster elects a leader and commits again.
    drop(resume);
    let leader = cluster.wait_for_leader(None);
    let deadline = Instant::now() + WAIT;
    let committed = loop {
        let attempt = BlockingClient::connect(cluster.addr(leader), Duration::from_secs(5))
            .map_err(|e| e.to_string())
            .and_then(|mut c| produce_one(&mut c, "after-the-pause"));
        match attempt {
            Ok(offset) => break offset,
            Err(error) if Instant::now() > deadline => {
                panic!("no commit within {WAIT:?} after SIGCONT: {error}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert!(committed > first, "{committed} after {first}");
}

#[test]
fn a_produce_with_acks_all_and_time_to_spare_is_acknowledged() {
    // The deadline machinery must not answer early: a healthy cluster commits within 10 s.
    let (cluster, leader) = Cluster::started(3);
    let mut producer = PipelinedProducer::connect(cluster.addr(leader));
    let sent: Vec<i32> = (0..20)
        .map(|i| producer.send(&format!("pipelined-{i}"), 10_000))
        .collect();
    let mut offsets = Vec::new();
    for corr in sent {
        let (error, offset) = producer.receive_answer_to(corr);
        assert_eq!(error, ErrorCode::NONE, "got {}", error);
        offsets.push(offset);
    }
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "offsets follow the request order: {offsets:?}"
    );
}

/// SIGTERM makes the leader resign (EndQuorumEpoch); the produces waiting for a quorum that
/// will not come are answered NOT_LEADER_OR_FOLLOWER at once, in order, before it exits.
#[test]
fn a_leader_stopped_by_sigterm_answers_its_waiting_produce() {
    let (mut cluster, leader) = Cluster::started(3);
    let _resume = pause_followers(&mut cluster, leader);
    let mut producer = PipelinedProducer::connect(cluster.addr(leader));
    let waiting = producer.send("waits-for-a-quorum", 60_000);
    let behind = producer.send("behind-it", 60_000);
    // A produce sent later on another connection times out: by then the leader has read the
    // two above and they wait for a quorum (not refused on arrival during the shutdown).
    let mut probe = PipelinedProducer::connect(cluster.addr(leader));
    let probed = probe.send("probe", 300);
    let (corr, error, _) = probe.receive();
    assert_eq!((corr, error), (probed, ErrorCode::REQUEST_TIMED_OUT));
    let node = cluster.node(leader).process.as_ref().unwrap();
    node.signal(libc::SIGTERM);
    for expected in [waiting, behind] {
        let (error, _) = producer.receive_answer_to(expected);
        assert_eq!(
            error,
            ErrorCode::NOT_LEADER_OR_FOLLOWER,
            "a resigning leader answers its waiting produces, got {error}"
        );
    }
}
