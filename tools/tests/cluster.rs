//! Process tests: real `ringraft serve` processes on 127.0.0.1 (see support/mod.rs). Every wait
//! is bounded and every process is killed when its guard drops.

mod support;

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::raft::ErrorCode;
use net::client::BlockingClient;
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Every acknowledged (offset, value) is in `log` at that offset, and the log's data records
/// are in strictly increasing offset order.
fn assert_log_holds(log: &[(i64, String)], acked: &[(i64, String)], name: &str) {
    assert!(
        log.windows(2).all(|w| w[0].0 < w[1].0),
        "{name}: offsets not increasing"
    );
    for (offset, value) in acked {
        let found = log.iter().find(|(o, _)| o == offset);
        assert_eq!(
            found.map(|(_, v)| v.as_str()),
            Some(value.as_str()),
            "{name}: acknowledged record {value} at offset {offset} missing or different"
        );
    }
}

/// Waits until `leader` reports every voter at the highest acknowledged offset, stops every
/// node, and asserts [`assert_log_holds`] of each node's log; returns the logs in node order.
fn stop_and_check_logs(
    cluster: &mut Cluster,
    leader: i32,
    acked: &[(i64, String)],
) -> Vec<Vec<(i64, String)>> {
    let last = acked.iter().map(|(o, _)| *o).max().unwrap();
    cluster.wait_for_voters_at(leader, last + 1);
    cluster.stop_all();
    let logs: Vec<_> = cluster.nodes.iter().map(|n| read_log(&n.dir)).collect();
    for (node, log) in cluster.nodes.iter().zip(&logs) {
        assert_log_holds(log, acked, &format!("node {}", node.id));
    }
    logs
}

#[test]
fn three_voters_elect_a_leader_and_replicate_acknowledged_produces() {
    let (mut cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, TIMEOUT);
    let mut acked = produce_numbered(&mut client, "record-", 50);
    assert!(
        acked.windows(2).all(|w| w[1].0 > w[0].0),
        "offsets must increase"
    );
    // A follower refuses produces with NOT_LEADER_OR_FOLLOWER.
    let follower = cluster.others(leader)[0];
    let mut to_follower = cluster.connect(follower, TIMEOUT);
    let refused = to_follower
        .produce(9, -1, batch("to-a-follower"))
        .unwrap()
        .unwrap();
    assert_eq!(
        refused.topics[0].partitions[0].error,
        ErrorCode::NOT_LEADER_OR_FOLLOWER
    );
    // Acknowledged means durable on a majority: let the third voter catch up before stopping.
    cluster.wait_for_voters_at(leader, acked.last().unwrap().0 + 1);
    cluster.stop_all_cleanly();
    let logs: Vec<_> = cluster.nodes.iter().map(|n| read_log(&n.dir)).collect();
    for (node, log) in cluster.nodes.iter().zip(&logs) {
        assert_log_holds(log, &acked, &format!("node {}", node.id));
    }
    assert_eq!(logs[0], logs[1]);
    assert_eq!(logs[1], logs[2]);

    // A restart recovers the logs and the election state and keeps appending after them.
    let leader = cluster.start_all_and_elect();
    let mut client = cluster.connect(leader, TIMEOUT);
    let after_restart = produce_one(&mut client, "after restart").unwrap();
    assert!(after_restart > acked.last().unwrap().0);
    acked.push((after_restart, "after restart".into()));
    stop_and_check_logs(&mut cluster, leader, &acked);
}

#[test]
fn api_versions_and_bad_produce_batches_get_kafka_errors() {
    let (cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, TIMEOUT);
    let versions = client.api_versions(3).unwrap();
    assert_eq!(versions.error, ErrorCode::NONE);
    assert!(versions
        .api_keys
        .iter()
        .any(|k| k.api_key == 0 && k.min_version == 0 && k.max_version == 10));
    let unsupported = client.api_versions(99).unwrap();
    assert_eq!(unsupported.error, ErrorCode::UNSUPPORTED_VERSION);

    let mut corrupt = batch("will be corrupted").to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff; // breaks the CRC
    let response = client.produce(9, -1, corrupt.into()).unwrap().unwrap();
    assert_eq!(
        response.topics[0].partitions[0].error,
        ErrorCode::CORRUPT_MESSAGE
    );
    // Produce v0-2 is advertised (librdkafka compresses only then) but refused, per partition,
    // in the request's own layout; the connection stays usable.
    for version in 0..=2 {
        let response = client.produce(version, -1, batch("v0-2")).unwrap().unwrap();
        assert_eq!(
            response.topics[0].partitions[0].error,
            ErrorCode::UNSUPPORTED_VERSION,
            "v{version}"
        );
    }
    // The connection is still usable and an older Produce version works.
    let response = client.produce(3, 1, batch("v3 acks=1")).unwrap().unwrap();
    assert_eq!(response.topics[0].partitions[0].error, ErrorCode::NONE);
    assert!(client.produce(9, 0, batch("acks=0")).unwrap().is_none());
    produce_one(&mut client, "after acks=0").unwrap();

    // Produce v10 to a follower: NOT_LEADER_OR_FOLLOWER with the leader, its epoch and where it
    // listens (the follower learns the endpoint from its fetches: bounded wait).
    let follower = cluster.others(leader)[0];
    let mut to_follower = cluster.connect(follower, TIMEOUT);
    let leader_addr = cluster.addr(leader);
    let deadline = Instant::now() + WAIT;
    let response = loop {
        let response = to_follower.produce(10, -1, batch("v10")).unwrap().unwrap();
        if !response.node_endpoints.is_empty() || Instant::now() > deadline {
            break response;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    let hint = partition.current_leader.expect("v10 names the leader");
    assert_eq!(hint.leader_id, leader);
    assert!(hint.leader_epoch > 0);
    assert_eq!(response.node_endpoints.len(), 1, "{response:?}");
    let endpoint = &response.node_endpoints[0];
    assert_eq!(endpoint.node_id, leader);
    assert_eq!(
        (endpoint.host.as_str(), endpoint.port),
        (
            leader_addr.ip().to_string().as_str(),
            i32::from(leader_addr.port())
        )
    );
    // v9 has no such fields.
    let response = to_follower.produce(9, -1, batch("v9")).unwrap().unwrap();
    assert_eq!(response.topics[0].partitions[0].current_leader, None);
}

/// A batch of `values` compressed with `compression`, written by kafka-protocol as a Kafka
/// client would write it.
fn compressed_batch(
    values: &[String],
    compression: kafka_protocol::records::Compression,
) -> bytes::Bytes {
    let records: Vec<(i64, String)> = (1_700_000_000_000..).zip(values.iter().cloned()).collect();
    support::kafka_client_batch(&records, compression)
}

/// Every batch in a log directory as (compression codec, batch length), control batches left
/// out.
fn stored_codecs(dir: &std::path::Path) -> Vec<(i16, usize)> {
    let log = engine::log::Log::open(dir, engine::log::LogConfig::for_reading()).unwrap();
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    while offset < log.end_offset() {
        for piece in log.read(offset, 1 << 20).unwrap() {
            let view = engine::record::BatchView::parse(piece).unwrap();
            if !view.is_control() {
                out.push((view.attributes() & 7, view.len()));
            }
            offset = view.next_offset();
        }
    }
    out
}

#[test]
fn compressed_batches_are_validated_stored_as_they_came_and_replicated() {
    use kafka_protocol::records::Compression;
    let (mut cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, TIMEOUT);
    let codecs = [
        (Compression::Gzip, 1),
        (Compression::Snappy, 2),
        (Compression::Lz4, 3),
        (Compression::Zstd, 4),
    ];
    let mut acked = Vec::new();
    let mut sent = Vec::new();
    for (compression, codec) in codecs {
        let values: Vec<String> = (0..50)
            .map(|i| format!("{compression:?} record {i} ").repeat(4))
            .collect();
        let batch = compressed_batch(&values, compression);
        let response = client.produce(9, -1, batch.clone()).unwrap().unwrap();
        let partition = &response.topics[0].partitions[0];
        assert_eq!(partition.error, ErrorCode::NONE, "{compression:?}");
        for (i, value) in values.into_iter().enumerate() {
            acked.push((partition.base_offset + i as i64, value));
        }
        sent.push((codec, batch.len()));

        // The same batch with its compressed stream damaged (and its CRC made right again):
        // refused, nothing appended.
        let mut damaged = batch.to_vec();
        let middle = 61 + (damaged.len() - 61) / 2;
        damaged[middle..].iter_mut().for_each(|b| *b = !*b);
        let crc = crc32c::crc32c(&damaged[21..]);
        damaged[17..21].copy_from_slice(&crc.to_be_bytes());
        let response = client.produce(9, -1, damaged.into()).unwrap().unwrap();
        let error = response.topics[0].partitions[0].error;
        assert!(
            error == ErrorCode::CORRUPT_MESSAGE || error == ErrorCode::INVALID_RECORD,
            "{compression:?}: {error}"
        );
    }
    cluster.wait_for_voters_at(leader, acked.last().unwrap().0 + 1);
    cluster.stop_all_cleanly();
    for node in &cluster.nodes {
        assert_log_holds(&read_log(&node.dir), &acked, &format!("node {}", node.id));
        // Kept compressed, byte for byte as long as sent: nothing was recompressed.
        assert_eq!(stored_codecs(&node.dir), sent, "node {}", node.id);
    }
}

#[test]
fn sigkill_of_the_leader_under_load_loses_nothing_acknowledged() {
    let (mut cluster, first_leader) = Cluster::started(3);
    let addrs: Vec<_> = (1..=3).map(|id| cluster.addr(id)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (acked, producer) = start_load(addrs, Arc::clone(&stop));
    // Let some load commit, then kill the leader mid-stream.
    let deadline = Instant::now() + WAIT;
    while acked.lock().unwrap().len() < 30 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(acked.lock().unwrap().len() >= 30, "no load committed");
    cluster.node(first_leader).process.take(); // SIGKILL via the guard
    let new_leader = cluster.wait_for_leader(Some(first_leader));
    assert_ne!(new_leader, first_leader);
    let before = acked.lock().unwrap().len();
    let deadline = Instant::now() + WAIT;
    while acked.lock().unwrap().len() < before + 30 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= before + 30,
        "the new leader committed nothing"
    );
    // The killed leader restarts, recovers its log and catches up from the new leader.
    cluster.start(first_leader, &[]);
    stop_and_check_logs(&mut cluster, new_leader, &acked);
}

#[test]
fn restart_with_a_wrong_cluster_id_or_a_locked_directory_fails_clearly() {
    let (mut cluster, _) = Cluster::started(3);
    // A second process on node 1's directory while node 1 runs.
    let config = cluster.node(1).config.clone();
    let mut second = ProcessGuard {
        child: spawn(&config, &[], Stdio::piped()),
    };
    let status = second.wait_exit(TIMEOUT).expect("second process exits");
    assert!(!status.success());
    let stderr = read_stderr(&mut second);
    assert!(stderr.contains("in use by another process"), "{stderr}");

    cluster.stop_all();
    let mut wrong = ProcessGuard {
        child: spawn(&config, &["cluster.id=another-cluster"], Stdio::piped()),
    };
    let status = wrong.wait_exit(TIMEOUT).expect("wrong cluster id exits");
    assert!(!status.success());
    let stderr = read_stderr(&mut wrong);
    assert!(stderr.contains("another-cluster"), "{stderr}");
    assert!(stderr.contains(CLUSTER_ID), "{stderr}");
}

#[test]
fn garbage_and_a_huge_frame_close_the_connection_and_the_node_keeps_committing() {
    let (cluster, leader) = Cluster::started(3);
    let addr = cluster.addr(leader);

    let mut garbage = BlockingClient::connect(addr, TIMEOUT).unwrap();
    garbage
        .write_raw(&[0, 0, 0, 12, 0x7f, 0x7f, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
        .unwrap();
    assert!(
        garbage.is_closed_by_peer(),
        "unknown api key: connection stays open"
    );

    let mut huge = BlockingClient::connect(addr, TIMEOUT).unwrap();
    huge.write_raw(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0])
        .unwrap();
    assert!(
        huge.is_closed_by_peer(),
        "2 GiB frame: connection stays open"
    );

    let mut negative = BlockingClient::connect(addr, TIMEOUT).unwrap();
    negative.write_raw(&[0xff, 0xff, 0xff, 0xf0]).unwrap();
    assert!(
        negative.is_closed_by_peer(),
        "negative size: connection stays open"
    );

    let mut client = BlockingClient::connect(addr, TIMEOUT).unwrap();
    let first = produce_one(&mut client, "after garbage").unwrap();
    let second = produce_one(&mut client, "still committing").unwrap();
    assert!(second > first);
}

#[test]
fn a_lagging_follower_catches_up_from_the_leaders_log_after_a_full_restart() {
    let (mut cluster, leader) = Cluster::started(3);
    let follower = cluster.others(leader)[0];
    let stopped = cluster.node(follower).process.take().unwrap();
    stopped.signal(libc::SIGTERM);
    drop(stopped);
    let mut client = cluster.connect(leader, TIMEOUT);
    let acked = produce_numbered(&mut client, &format!("while-{follower}-was-down-"), 200);
    drop(client);
    cluster.stop_all();
    // After a restart no leader has these batches in memory: the lagging follower's fetches are
    // served by reads of the leader's log (Output::ReadLog through the log thread).
    let leader = cluster.start_all_and_elect();
    let logs = stop_and_check_logs(&mut cluster, leader, &acked);
    assert_eq!(logs[0], logs[1]);
    assert_eq!(logs[1], logs[2]);
}

#[test]
fn a_paused_leader_is_replaced_and_follows_after_it_resumes() {
    let (mut cluster, first) = Cluster::started(3);
    let mut client = cluster.connect(first, TIMEOUT);
    let mut acked = vec![(
        produce_one(&mut client, "before pause").unwrap(),
        "before pause".to_string(),
    )];
    drop(client);
    // SIGSTOP: its sockets stay open but nothing answers; the others must time it out.
    cluster
        .node(first)
        .process
        .as_ref()
        .unwrap()
        .signal(libc::SIGSTOP);
    let second = cluster.wait_for_leader(Some(first));
    let mut client = cluster.connect(second, TIMEOUT);
    let offset = produce_one(&mut client, "during pause").unwrap();
    acked.push((offset, "during pause".into()));
    cluster
        .node(first)
        .process
        .as_ref()
        .unwrap()
        .signal(libc::SIGCONT);
    let offset = produce_one(&mut client, "after resume").unwrap();
    acked.push((offset, "after resume".into()));
    let leader = cluster.wait_for_leader(None);
    stop_and_check_logs(&mut cluster, leader, &acked);
}

/// Pre-vote on the wire (docs/protocol.md, "Pre-vote"): a Vote v1 with PreVote set, to a
/// follower and to the leader of a cluster that commits, is refused (both hear from a live
/// leader) and moves no epoch; a Vote of a version above 1 is answered UNSUPPORTED_VERSION, and
/// the connection stays open; ApiVersions advertises Vote 0-1.
#[test]
fn pre_votes_move_no_epoch_and_a_newer_vote_gets_unsupported_version() {
    use engine::raft::{Request, Response, VoteRequest};
    use net::wire::{api, quorum, RequestHeader, ResponseHeader, WireReader};

    let (mut cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, TIMEOUT);
    let offset = produce_one(&mut client, "committed before the pre-votes").unwrap();
    // Both followers must have heard from the leader itself. A voter that started listening
    // after the others had begun their election gets the leader's BeginQuorumEpoch only from a
    // retry with backoff (the first connect was refused), and until then grants pre-votes, as
    // it should (docs/protocol.md, "Pre-vote"); the commit needs only the other follower. Every
    // voter fetching past the record means each had a fetch answered.
    cluster.wait_for_voters_at(leader, offset + 1);
    let epoch = client.describe_quorum().unwrap().leader_epoch;
    let follower = cluster.others(leader)[0];
    let candidate = (1..=3).find(|id| *id != leader && *id != follower).unwrap();
    let pre_vote = Request::Vote(VoteRequest {
        cluster_id: CLUSTER_ID.into(),
        candidate_epoch: epoch + 1,
        candidate_id: candidate,
        // The candidate's own directory: a voter the set binds to a directory is that voter
        // only with it (docs/protocol.md, "Voter identity"); without, INVALID_VOTER_KEY.
        candidate_directory_id: directory_id_of(&cluster, candidate),
        last_epoch: epoch,
        last_epoch_end_offset: i64::from(i32::MAX),
        pre_vote: true,
        ..Default::default()
    });
    for target in [follower, leader] {
        match send_raw_request(cluster.addr(target), &pre_vote, TIMEOUT) {
            Ok(Response::Vote(v)) => {
                assert_eq!(v.error, ErrorCode::NONE, "node {target}");
                assert!(
                    !v.vote_granted,
                    "node {target} hears from leader {leader}; its last stderr lines:\n{}",
                    cluster.stderr_tail(target)
                );
                assert_eq!(
                    (v.leader_id, v.leader_epoch),
                    (leader, epoch),
                    "node {target}"
                );
            }
            other => panic!("node {target}: {other:?}"),
        }
    }
    // Nobody moved: the same leader commits in the same epoch.
    produce_one(&mut client, "committed after the pre-votes").unwrap();
    let quorum = client.describe_quorum().unwrap();
    assert_eq!((quorum.leader_id, quorum.leader_epoch), (leader, epoch));

    // A candidate speaking Vote v2 (a version this node does not know).
    let header = RequestHeader {
        api_key: api::VOTE,
        api_version: 2,
        correlation_id: 91,
        client_id: Some("newer-candidate".into()),
    };
    let frame = request_frame(&header, &pre_vote);
    let mut newer = cluster.connect(follower, TIMEOUT);
    newer.write_raw(&frame).unwrap();
    let mut r = WireReader::new(newer.read_raw_frame().unwrap());
    assert_eq!(
        ResponseHeader::read(&mut r, true).unwrap().correlation_id,
        91
    );
    match quorum::decode_response(api::VOTE, &mut r).unwrap() {
        Response::Vote(v) => {
            assert_eq!(v.error, ErrorCode::UNSUPPORTED_VERSION);
            assert!(!v.vote_granted);
        }
        other => panic!("{other:?}"),
    }
    let versions = newer.api_versions(3).expect("the connection stays open");
    assert!(versions
        .api_keys
        .iter()
        .any(|k| k.api_key == api::VOTE && (k.min_version, k.max_version) == (0, 1)));
    cluster.stop_all();
}
