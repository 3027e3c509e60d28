//! Process test of idempotent produce (docs/protocol.md, "Idempotent producers"): a producer
//! keeps five batches in flight, the leader is SIGKILLed under it, every unanswered batch is
//! retried on the new leader with the same sequence numbers, and every record is in every log
//! exactly once, in order. Then the checks a client relies on: a gap, an old epoch, a
//! transactional batch, duplicates still recognised after the whole cluster restarts (the
//! state rebuilt from the log), and on a voter whose log was reset behind the leader's log
//! start. Real `ringraft serve` processes on 127.0.0.1; every wait is bounded.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::raft::ErrorCode;
use engine::record::RecordBatchBuilder;
use net::client::BlockingClient;
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);
/// The producer id the test picks (InitProducerId is not served yet); the checks are the same.
const PID: i64 = 0x5EED;
const IN_FLIGHT: usize = 5;
const VERSION: i16 = 9;

fn value(sequence: i32) -> String {
    format!("idem-{sequence}")
}

/// One batch of one record `idem-SEQ` from producer [`PID`].
fn idempotent_batch(epoch: i16, sequence: i32, transactional: bool) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0, 0)
        .producer(PID, epoch, sequence)
        .transactional(transactional);
    builder.append(0, None, Some(value(sequence).as_bytes()), &[]);
    builder.build().freeze()
}

/// Sends the batches of `sequences` pipelined (up to [`IN_FLIGHT`] unanswered) and returns the
/// answer each got (error, base offset); a batch without an answer (the connection failed) is
/// missing from the map.
fn send_window(client: &mut BlockingClient, sequences: &[i32]) -> BTreeMap<i32, (ErrorCode, i64)> {
    let mut answers = BTreeMap::new();
    let mut in_flight: Vec<(i32, i32)> = Vec::new(); // (correlation id, sequence)
    let mut next = 0;
    while next < sequences.len() || !in_flight.is_empty() {
        while next < sequences.len() && in_flight.len() < IN_FLIGHT {
            let sequence = sequences[next];
            match client.send_produce(VERSION, -1, idempotent_batch(0, sequence, false)) {
                Ok(correlation) => in_flight.push((correlation, sequence)),
                Err(_) => return answers,
            }
            next += 1;
        }
        let Ok((correlation, response)) = client.recv_produce(VERSION) else {
            return answers;
        };
        let Some(position) = in_flight.iter().position(|&(c, _)| c == correlation) else {
            panic!("answer to correlation id {correlation}, which is not in flight");
        };
        let (_, sequence) = in_flight.remove(position);
        let partition = &response.topics[0].partitions[0];
        answers.insert(sequence, (partition.error, partition.base_offset));
    }
    answers
}

/// One Produce of `batch`, acks=-1: (error, base offset).
fn produce(client: &mut BlockingClient, batch: Bytes) -> (ErrorCode, i64) {
    let response = client
        .produce(VERSION, -1, batch)
        .expect("an answer")
        .expect("acks=-1 is answered");
    let partition = &response.topics[0].partitions[0];
    (partition.error, partition.base_offset)
}

/// [`produce`], again while the node (just restarted) answers NOT_LEADER_OR_FOLLOWER, bounded.
fn produce_once_it_leads(client: &mut BlockingClient, batch: Bytes) -> (ErrorCode, i64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = produce(client, batch.clone());
        if answer.0 != ErrorCode::NOT_LEADER_OR_FOLLOWER || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Retries every sequence not yet acknowledged on `addr`, in order and pipelined, until all are
/// acknowledged (bounded in rounds and time); returns (sequence -> base offset).
fn retry_until_acknowledged(
    addr: std::net::SocketAddr,
    pending: &[i32],
    acked: &mut BTreeMap<i32, i64>,
) {
    let deadline = Instant::now() + WAIT;
    for _round in 0..200 {
        let left: Vec<i32> = pending
            .iter()
            .copied()
            .filter(|s| !acked.contains_key(s))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            break;
        }
        let Ok(mut client) = BlockingClient::connect(addr, TIMEOUT) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        for (sequence, (error, base_offset)) in send_window(&mut client, &left) {
            if error == ErrorCode::NONE {
                acked.insert(sequence, base_offset);
            } else {
                // Retriable (the leader is settling, an earlier batch of the window failed so
                // this one is out of order): the next round sends it again, same sequence.
                assert!(
                    [
                        ErrorCode::NOT_LEADER_OR_FOLLOWER,
                        ErrorCode::REQUEST_TIMED_OUT,
                        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
                        ErrorCode::BROKER_NOT_AVAILABLE,
                    ]
                    .contains(&error),
                    "sequence {sequence}: {error}"
                );
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let missing: Vec<&i32> = pending.iter().filter(|s| !acked.contains_key(s)).collect();
    assert!(missing.is_empty(), "never acknowledged: {missing:?}");
}

/// The records of `log` in order must be `idem-0 .. idem-(count-1)`, once each.
fn assert_exactly_once_in_order(node: i32, log: &[(i64, String)], count: i32) {
    let values: Vec<&str> = log
        .iter()
        .map(|(_, v)| v.as_str())
        .filter(|v| v.starts_with("idem-"))
        .collect();
    let expected: Vec<String> = (0..count).map(value).collect();
    assert_eq!(values, expected, "node {node}'s log");
}

#[test]
fn retries_after_a_leader_sigkill_write_each_record_once_and_the_checks_hold() {
    let (mut cluster, first) = Cluster::started(3);
    let mut acked: BTreeMap<i32, i64> = BTreeMap::new();

    // 40 batches acknowledged, then five more sent and the leader killed under them.
    let mut client = cluster.connect(first, TIMEOUT);
    let early: Vec<i32> = (0..40).collect();
    for (sequence, (error, base_offset)) in send_window(&mut client, &early) {
        assert_eq!(error, ErrorCode::NONE, "sequence {sequence}");
        acked.insert(sequence, base_offset);
    }
    for sequence in 40..45 {
        client
            .send_produce(VERSION, -1, idempotent_batch(0, sequence, false))
            .unwrap();
    }
    cluster
        .node(first)
        .process
        .as_ref()
        .unwrap()
        .signal(libc::SIGKILL);
    cluster.node(first).process.take();
    drop(client);

    // The new leader gets every unanswered batch again, same sequences; then 15 more.
    let second = cluster.wait_for_leader(Some(first));
    let all: Vec<i32> = (0..60).collect();
    retry_until_acknowledged(cluster.addr(second), &all, &mut acked);
    let offsets: Vec<i64> = all.iter().map(|s| acked[s]).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "acknowledged offsets not in sequence order: {offsets:?}"
    );

    let mut client = cluster.connect(second, TIMEOUT);
    // A committed batch sent again: answered with its original offset, not appended.
    assert_eq!(
        produce(&mut client, idempotent_batch(0, 59, false)),
        (ErrorCode::NONE, acked[&59])
    );
    // A gap.
    assert_eq!(
        produce(&mut client, idempotent_batch(0, 61, false)).0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // A transactional batch.
    assert_eq!(
        produce(&mut client, idempotent_batch(0, 60, true)).0,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    // A new epoch that does not start at 0, then an old epoch after a bump: refused.
    assert_eq!(
        produce(&mut client, idempotent_batch(1, 5, false)).0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    drop(client);

    // The whole cluster restarts: the state comes back from the log.
    cluster.start(first, &[]);
    let end = acked[&59] + 1;
    cluster.wait_for_voters_at(second, end);
    cluster.stop_all();
    let third = cluster.start_all_and_elect();
    let mut client = cluster.connect(third, TIMEOUT);
    let replay = produce_once_it_leads(&mut client, idempotent_batch(0, 58, false));
    assert_eq!(replay, (ErrorCode::NONE, acked[&58]), "after the restart");
    assert_eq!(
        produce(&mut client, idempotent_batch(0, 62, false)).0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        "after the restart"
    );
    let (error, last) = produce(&mut client, idempotent_batch(0, 60, false));
    assert_eq!(error, ErrorCode::NONE);
    acked.insert(60, last);
    // An epoch bump, then the old epoch is fenced.
    let (error, _) = produce(&mut client, idempotent_batch(1, 0, false));
    assert_eq!(error, ErrorCode::NONE);
    assert_eq!(
        produce(&mut client, idempotent_batch(0, 61, false)).0,
        ErrorCode::INVALID_PRODUCER_EPOCH
    );
    drop(client);
    cluster.wait_for_voters_at(third, last + 2);
    cluster.stop_all();

    for node in &cluster.nodes {
        let log = read_log(&node.dir);
        // idem-0 of epoch 1 is the one record written twice on purpose (a new epoch): count
        // only the epoch-0 records, which come first.
        let epoch0: Vec<(i64, String)> = log
            .iter()
            .filter(|(offset, _)| *offset <= last)
            .cloned()
            .collect();
        assert_exactly_once_in_order(node.id, &epoch0, 61);
        for (sequence, offset) in &acked {
            assert!(
                epoch0.contains(&(*offset, value(*sequence))),
                "node {}: idem-{sequence} not at its acknowledged offset {offset}",
                node.id
            );
        }
    }
}

/// Asks node `id` for producer ids until `count` are handed out (a node without a committed
/// block yet answers COORDINATOR_LOAD_IN_PROGRESS, retried here as clients do), bounded. A node
/// that has exited fails the test at once, with its stderr.
fn producer_ids_from(cluster: &mut Cluster, id: i32, count: usize) -> Vec<i64> {
    use net::wire::kafka::InitProducerIdRequest;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut ids = Vec::new();
    while ids.len() < count {
        assert!(
            Instant::now() < deadline,
            "node {id} handed out only {ids:?}; the nodes' stderr:\n{}",
            cluster.stderr_tails()
        );
        if let Err(exited) = cluster.check_running() {
            panic!("asking node {id} for producer ids: {exited}");
        }
        let Ok(mut client) = BlockingClient::connect(cluster.addr(id), TIMEOUT) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let request = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            producer_id: -1,
            producer_epoch: -1,
        };
        match client.call(&request) {
            Ok(answer) if answer.error == ErrorCode::NONE => {
                assert_eq!(answer.producer_epoch, 0);
                ids.push(answer.producer_id);
            }
            Ok(answer) => {
                assert_eq!(
                    answer.error,
                    ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
                    "node {id}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    ids
}

/// The producer-id blocks in a stopped node's log, in log order.
fn producer_id_blocks(dir: &std::path::Path) -> Vec<engine::record::control::ProducerIdBlock> {
    use engine::record::control::ProducerIdBlock;
    read_batches(dir)
        .iter()
        .filter_map(|view| ProducerIdBlock::from_batch(view).ok())
        .collect()
}

/// Every node hands out producer ids, the followers from blocks the leader reserved for them
/// through the log; no id is handed out twice, also not by a follower SIGKILLed and restarted
/// (its new run gets a block of its own), and the voters' logs hold the same blocks, none
/// overlapping another.
#[test]
fn every_node_hands_out_producer_ids_and_none_twice_across_a_restart() {
    // The producer-id path at debug, so a failure's stderr says where a block stopped. (A CI
    // run that saw a restarted follower hand out no id showed the cause this way: the restart
    // failed to bind its address, which the killed run's io_uring held for a few ms more;
    // docs/operations.md, "Start-up errors".)
    let mut cluster = Cluster::new_with(3, |s| {
        s.rust_log = "warn,net::node::runtime::producer_ids=debug".into();
    });
    let leader = cluster.start_all_and_elect();
    let follower = cluster.others(leader)[0];
    let mut handed: Vec<(i32, i64)> = Vec::new();
    for id in 1..=3 {
        handed.extend(
            producer_ids_from(&mut cluster, id, 3)
                .into_iter()
                .map(|p| (id, p)),
        );
    }
    cluster.node(follower).process.take(); // SIGKILL
    cluster.start(follower, &[]);
    for id in [follower, leader] {
        handed.extend(
            producer_ids_from(&mut cluster, id, 2)
                .into_iter()
                .map(|p| (id, p)),
        );
    }
    let distinct: std::collections::BTreeSet<i64> = handed.iter().map(|&(_, p)| p).collect();
    assert_eq!(
        distinct.len(),
        handed.len(),
        "an id handed out twice: {handed:?}"
    );

    cluster.stop_all_cleanly();
    let logs: Vec<_> = cluster
        .nodes
        .iter()
        .map(|n| producer_id_blocks(&n.dir))
        .collect();
    let blocks = &logs[(leader - 1) as usize];
    // One block per node, and one more for the restarted follower's new run.
    assert_eq!(blocks.len(), 4, "{blocks:?}");
    for (i, a) in blocks.iter().enumerate() {
        for b in &blocks[i + 1..] {
            assert!(
                a.end_id() <= b.first_id || b.end_id() <= a.first_id,
                "{a:?} {b:?}"
            );
        }
    }
    for (id, producer_id) in &handed {
        let owner = blocks
            .iter()
            .filter(|b| (b.first_id..b.end_id()).contains(producer_id))
            .map(|b| b.node_id)
            .collect::<Vec<_>>();
        assert_eq!(owner, vec![*id], "id {producer_id} from node {id}");
    }
    for log in &logs {
        // A follower stopped before it fetched the last block holds a prefix of them.
        assert_eq!(
            log[..],
            blocks[..log.len()],
            "every voter's log holds the same blocks"
        );
        assert!(log.len() >= 3, "{log:?}");
    }
}

/// A retry of a batch that retention has deleted from every log is still recognised after the
/// whole cluster is SIGKILLed and restarted: each node took producer-state snapshots as the log
/// grew (one per segment's worth, here 1 MiB) and starts from its newest (docs/storage.md, "The
/// producer-state snapshot"). Rebuilt from the log alone, the producer would be unknown and the
/// retry written a second time. A graceful stop then writes one at the high watermark, and a
/// damaged one is not used.
#[test]
fn a_retry_of_a_batch_retention_deleted_is_a_duplicate_after_a_restart() {
    let mut cluster = Cluster::new_with(3, |s| {
        s.segment_bytes = Some(1 << 20);
        s.overrides = vec![
            format!("retention.bytes={}", 2 << 20),
            "log.retention.check.interval.ms=200".into(),
        ];
        s.rust_log = "warn,net::node::runtime::idempotence=info".into();
    });
    let leader = cluster.start_all_and_elect();
    let mut client = cluster.connect(leader, TIMEOUT);
    let mut acked: BTreeMap<i32, i64> = BTreeMap::new();
    for (sequence, (error, base_offset)) in send_window(&mut client, &[0, 1, 2, 3, 4]) {
        assert_eq!(error, ErrorCode::NONE, "sequence {sequence}");
        acked.insert(sequence, base_offset);
    }
    assert_eq!(acked.len(), 5);
    // About 4.5 MB more, so that retention (2 MiB) deletes the segments that held them.
    // Every voter keeps up (at most ten records, 300 KB, behind): none falls behind the
    // leader's log start and resets its log, so that each restarts from a snapshot of its own
    // (a reset is the subject of the next test).
    let filler = "f".repeat(30_000);
    let mut end = 0;
    for i in 0..150 {
        end = produce_one(&mut client, &filler).expect("filler acknowledged") + 1;
        if i % 10 == 9 {
            cluster.wait_for_voters_at(leader, end);
        }
    }
    drop(client);
    cluster.wait_for_voters_at(leader, end);
    let deadline = Instant::now() + WAIT;
    for node in &cluster.nodes {
        while segment_bases(&node.dir)[0] <= acked[&4] {
            assert!(
                Instant::now() < deadline,
                "node {}: retention never passed offset {}",
                node.id,
                acked[&4]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for node in &mut cluster.nodes {
        node.process.take(); // SIGKILL
        assert!(
            node.dir
                .join(engine::producer_snapshot_store::FILE_NAME)
                .exists(),
            "node {} wrote no producer-state snapshot",
            node.id
        );
    }

    let leader = cluster.start_all_and_elect();
    // A majority may elect before the third node has logged its start-up rebuild.
    let deadline = Instant::now() + WAIT;
    for node in &cluster.nodes {
        let rebuilt = loop {
            let stderr = cluster.stderr_tail(node.id);
            let second_run = stderr.split("rebuilt the producer state").nth(2);
            match second_run {
                Some(line) => break line.lines().next().unwrap_or_default().to_owned(),
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                None => panic!("node {} never logged its second rebuild: {stderr}", node.id),
            }
        };
        assert!(
            rebuilt.contains("from_snapshot=Some("),
            "node {} did not start from its snapshot: {rebuilt}",
            node.id
        );
    }
    let mut client = cluster.connect(leader, TIMEOUT);
    let retry = produce_once_it_leads(&mut client, idempotent_batch(0, 4, false));
    assert_eq!(
        retry,
        (ErrorCode::NONE, acked[&4]),
        "the retry after the restart"
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(0, 6, false)).0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        "a gap after the restart"
    );
    let (error, fifth) = produce(&mut client, idempotent_batch(0, 5, false));
    assert_eq!(error, ErrorCode::NONE);
    drop(client);
    cluster.wait_for_voters_at(leader, fifth + 1);
    cluster.stop_all_cleanly();
    for node in &cluster.nodes {
        let path = node.dir.join(engine::producer_snapshot_store::FILE_NAME);
        let snapshot =
            engine::producer_snapshot::ProducerSnapshot::decode(&std::fs::read(path).unwrap())
                .unwrap();
        assert!(
            snapshot.offset > fifth,
            "node {}: the snapshot of the graceful stop is at {}, idem-5 at {fifth}: {}",
            node.id,
            snapshot.offset,
            cluster.stderr_tail(node.id)
        );
        let written: Vec<i64> = read_log(&node.dir)
            .into_iter()
            .filter(|(_, v)| v.starts_with("idem-"))
            .map(|(offset, _)| offset)
            .collect();
        assert_eq!(
            written,
            vec![fifth],
            "node {}: only idem-5 is left",
            node.id
        );
    }

    // A damaged snapshot is not used: the node says why and reads its whole log instead.
    let snapshot = log_dir(&cluster, 1).join(engine::producer_snapshot_store::FILE_NAME);
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&snapshot, &bytes).unwrap();
    let path = cluster.stderr_path(1);
    let before = std::fs::read_to_string(&path).unwrap().len();
    cluster.start(1, &[]);
    let deadline = Instant::now() + WAIT;
    let this_run = loop {
        let text = std::fs::read_to_string(&path).unwrap();
        if text[before..].contains("rebuilt the producer state") {
            break text[before..].to_owned();
        }
        assert!(Instant::now() < deadline, "no rebuild line: {text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        this_run.contains("the producer-state snapshot is not used (checksum")
            && this_run.contains("from_snapshot=None"),
        "{this_run}"
    );
    cluster.stop_all_cleanly();
}

/// A voter that slept through retention comes back behind the leader's log start and resets
/// its log: the leader's producer-state snapshot comes with the reset (docs/protocol.md,
/// "Retention and the log start", rule 6), the voter writes it as its own file, and once it
/// leads, the producer's retry of a batch it never fetched is answered as the duplicate it
/// is, not written again.
#[test]
fn a_voter_reset_behind_retention_keeps_the_producers_and_answers_their_retries() {
    let mut cluster = Cluster::new_with(3, |s| {
        s.segment_bytes = Some(1 << 20);
        s.overrides = vec![
            format!("retention.bytes={}", 2 << 20),
            "log.retention.check.interval.ms=200".into(),
        ];
    });
    let leader = cluster.start_all_and_elect();
    let others: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    // The lower id sleeps: back and caught up, it ties with the other follower and heads the
    // preferred successors (docs/protocol.md, section 5) when the leader stops.
    let (sleeper, awake) = (others[0], others[1]);
    cluster.node(sleeper).process = None; // SIGKILL
    let mut client = cluster.connect(leader, TIMEOUT);
    let mut acked: BTreeMap<i32, i64> = BTreeMap::new();
    for (sequence, (error, base_offset)) in send_window(&mut client, &[0, 1, 2, 3, 4]) {
        assert_eq!(error, ErrorCode::NONE, "sequence {sequence}");
        acked.insert(sequence, base_offset);
    }
    // About 4.5 MB more, so that retention (2 MiB) deletes the segments that held them.
    let filler = "f".repeat(30_000);
    let mut end = 0;
    for i in 0..150 {
        end = produce_one(&mut client, &filler).expect("filler acknowledged") + 1;
        if i % 10 == 9 {
            cluster.wait_for_replicas_at(&[leader, awake], end);
        }
    }
    drop(client);
    cluster.wait_for_replicas_at(&[leader, awake], end);
    let deadline = Instant::now() + WAIT;
    while log_start(&log_dir(&cluster, leader)) <= acked[&4] {
        assert!(
            Instant::now() < deadline,
            "retention never passed offset {}",
            acked[&4]
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    cluster.start(sleeper, &[]);
    cluster.wait_for_voters_at(leader, end);
    let sleeper_dir = log_dir(&cluster, sleeper);
    // A reset removes the whole log before it starts the new one: no segment for a moment.
    let deadline = Instant::now() + WAIT;
    while segment_bases(&sleeper_dir)
        .first()
        .is_none_or(|start| *start <= acked[&4])
    {
        assert!(
            Instant::now() < deadline,
            "node {sleeper} did not reset behind the leader's start: {}",
            cluster.stderr_tail(sleeper)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let path = sleeper_dir.join(engine::producer_snapshot_store::FILE_NAME);
    let deadline = Instant::now() + WAIT;
    let snapshot = loop {
        let found = std::fs::read(&path)
            .ok()
            .and_then(|bytes| engine::producer_snapshot::ProducerSnapshot::decode(&bytes).ok())
            .filter(|s| s.offset > acked[&4]);
        match found {
            Some(snapshot) => break snapshot,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => panic!("node {sleeper} wrote no snapshot past its reset"),
        }
    };
    assert!(
        snapshot.producers.iter().any(|(id, _)| *id == PID),
        "node {sleeper}'s snapshot at {} lacks the producer",
        snapshot.offset
    );

    // Both followers at the same end, the leader stops gracefully: the sleeper stands first.
    std::thread::sleep(Duration::from_millis(500));
    let mut stopped = cluster.node(leader).process.take().expect("running");
    stopped.signal(libc::SIGTERM);
    assert!(
        stopped.wait_exit(Duration::from_secs(10)).is_some(),
        "the leader ignored SIGTERM"
    );
    let new_leader = cluster.wait_for_leader(Some(leader));
    assert_eq!(
        new_leader,
        sleeper,
        "the first preferred successor leads: {}",
        cluster.quorum_report()
    );
    let mut client = cluster.connect(sleeper, TIMEOUT);
    let retry = produce_once_it_leads(&mut client, idempotent_batch(0, 4, false));
    assert_eq!(
        retry,
        (ErrorCode::NONE, acked[&4]),
        "the retry on the reset voter"
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(0, 6, false)).0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        "a gap on the reset voter"
    );
    drop(client);
    cluster.stop_all_cleanly();
}
