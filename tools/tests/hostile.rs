//! Process tests of hostile but well-formed quorum requests against a healthy 3-voter cluster
//! under acks=-1 load: epochs at or near i32::MAX (BeginQuorumEpoch, Vote), epochs raised by
//! 10^6 again and again, FindQuorum claiming the leader's id with another address, and one
//! Vote that lifts a follower alone to a later epoch. After
//! each attack every node process must still run, a leader must exist, the load must be
//! acknowledged again, every acknowledged record must be in every voter's log once and in order,
//! and after a restart of all three the cluster must elect and commit (docs/operations.md).
//!
//! Real `ringraft serve` processes on 127.0.0.1 (see support/mod.rs), default timeouts; every
//! wait is bounded and every process is killed when its guard drops.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use engine::raft::{
    BeginQuorumEpochRequest, DescribeQuorumResponse, ErrorCode, FindQuorumRequest, Request,
    Response, VoteRequest,
};
use net::client::BlockingClient;
use support::*;

const TIMEOUT: Duration = Duration::from_secs(5);
/// How long every node must stay up after an attack: several fetch timeouts (2 s) and election
/// timeouts (1 s plus up to 1 s of jitter) at the defaults (docs/configuration.md).
const WINDOW: Duration = Duration::from_secs(6);
/// Bound on a leader's (re-)election after an attack: a few election timeouts.
const ELECTION_BOUND: Duration = Duration::from_secs(10);
/// Acknowledgements the load must get after an attack, and within how long.
const ACKS_AFTER: usize = 20;
const ACKS_BOUND: Duration = Duration::from_secs(10);
/// INVALID_REQUEST: the answer to an epoch the receiver refuses (docs/protocol.md).
const REFUSED: ErrorCode = ErrorCode::INVALID_REQUEST;

/// A 3-voter cluster, a leader, and acks=-1 load on it.
struct UnderLoad {
    cluster: Cluster,
    stop: Arc<AtomicBool>,
    acked: Acked,
    producer: Option<JoinHandle<()>>,
    leader: i32,
    epoch: i32,
}

impl UnderLoad {
    fn start() -> UnderLoad {
        let (cluster, leader) = Cluster::started(3);
        let stop = Arc::new(AtomicBool::new(false));
        let addrs = (1..=3).map(|id| cluster.addr(id)).collect();
        let (acked, producer) = start_load(addrs, Arc::clone(&stop));
        let mut under = UnderLoad {
            cluster,
            stop,
            acked,
            producer: Some(producer),
            leader,
            epoch: -1,
        };
        under.wait_for_acks(30, Duration::from_secs(15), "before the attack");
        let (leader, epoch) = under.leader_within(ELECTION_BOUND);
        // Every voter must follow the leader before the attack, so that what the attack checks
        // afterwards (each node names it) is the attack's doing: a voter that was not listening
        // yet when the others elected learns of the leader from a BeginQuorumEpoch retried with
        // backoff, which can come after the commits above (two voters make them).
        let acked_end = under.acked.lock().unwrap().iter().map(|(o, _)| o + 1).max();
        under
            .cluster
            .wait_for_voters_at(leader, acked_end.expect("acknowledged above"));
        under.leader = leader;
        under.epoch = epoch;
        eprintln!(
            "leader {leader} in epoch {epoch}, {} records acknowledged before the attack",
            under.acked_count()
        );
        under
    }

    fn acked_count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    fn followers(&self) -> Vec<i32> {
        self.cluster.others(self.leader)
    }

    /// Panics, naming the node and its last stderr lines, if a node process has exited.
    fn assert_all_running(&mut self, when: &str) {
        for id in 1..=3 {
            let node = self.cluster.node(id);
            let process = node.process.as_mut().expect("every node was started");
            if let Ok(Some(status)) = process.child.try_wait() {
                let tail = self.cluster.stderr_tail(id);
                panic!("node {id} exited {when} with {status}; its last stderr lines:\n{tail}");
            }
        }
    }

    /// Every node process stays up for `window`.
    fn assert_all_up_for(&mut self, window: Duration) {
        let end = Instant::now() + window;
        while Instant::now() < end {
            self.assert_all_running("after the attack");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// (id, epoch) of a node that answers DescribeQuorum as leader, within `bound`.
    fn leader_within(&self, bound: Duration) -> (i32, i32) {
        let deadline = Instant::now() + bound;
        while Instant::now() < deadline {
            for id in 1..=3 {
                if let Some((leader, epoch)) = describe_leader(&self.cluster, id) {
                    return (leader, epoch);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no leader within {bound:?} after the attack");
    }

    fn wait_for_acks(&self, more: usize, bound: Duration, when: &str) {
        let target = self.acked_count() + more;
        let deadline = Instant::now() + bound;
        while self.acked_count() < target && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            self.acked_count() >= target,
            "{when}: {} acknowledgements, not the {target} expected within {bound:?}",
            self.acked_count()
        );
    }

    /// What every attack is followed by: all nodes up for a while, a leader, the load
    /// acknowledged again.
    fn assert_the_cluster_lives_on(&mut self) -> (i32, i32) {
        self.assert_all_up_for(WINDOW);
        let (leader, epoch) = self.leader_within(ELECTION_BOUND);
        self.wait_for_acks(ACKS_AFTER, ACKS_BOUND, "after the attack");
        self.assert_all_running("after the attack");
        (leader, epoch)
    }

    /// Stops the load; every voter reaches the last acknowledged offset; the nodes stop on
    /// SIGTERM; every voter's log holds every acknowledged record once, at its offset, in order;
    /// all three restart, elect a leader and commit a new record above the old ones.
    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.producer.take().unwrap().join().unwrap();
        self.assert_all_running("at the end of the load");
        let mut acked = self.acked.lock().unwrap().clone();
        acked.sort();
        let end = acked.last().expect("the load was acknowledged").0 + 1;
        let (leader, _) = self.leader_within(ELECTION_BOUND);
        self.cluster.wait_for_voters_at(leader, end);
        for (id, status) in self.cluster.stop_all() {
            let status = status.unwrap_or_else(|| panic!("node {id} ignored SIGTERM"));
            assert!(
                status.success(),
                "node {id} exited with {status}: {}",
                self.cluster.stderr_tail(id)
            );
        }
        for node in &self.cluster.nodes {
            let log = read_log(&node.dir);
            assert!(
                log_holds_once_in_order(&log, &acked),
                "node {}'s log does not hold all {} acknowledged records once and in order",
                node.id,
                acked.len()
            );
        }
        eprintln!("{} acknowledged records in all three logs", acked.len());

        self.cluster.start_all();
        let deadline = Instant::now() + Duration::from_secs(15);
        let committed = loop {
            self.assert_all_running("after the restart");
            let attempt = (1..=3)
                .find_map(|id| describe_leader(&self.cluster, id))
                .and_then(|(leader, _)| {
                    let mut client =
                        BlockingClient::connect(self.cluster.addr(leader), TIMEOUT).ok()?;
                    produce_one(&mut client, "after the restart").ok()
                });
            if let Some(offset) = attempt {
                break offset;
            }
            assert!(
                Instant::now() < deadline,
                "no leader committed a record within 15 s of the restart; stderr of node 1:\n{}",
                self.cluster.stderr_tail(1)
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(committed >= end, "new record at {committed}, below {end}");
    }
}

impl Drop for UnderLoad {
    fn drop(&mut self) {
        // A failed test must not leave the load thread spinning.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Node `id`'s DescribeQuorum answer, if it answers within a second.
fn describe(cluster: &Cluster, id: i32) -> Option<DescribeQuorumResponse> {
    let node = &cluster.nodes[(id - 1) as usize];
    node.process.as_ref()?;
    let mut client = BlockingClient::connect(node.addr, Duration::from_secs(1)).ok()?;
    client.describe_quorum().ok()
}

/// Some((leader, epoch)) if node `id` answers DescribeQuorum as the leader.
fn describe_leader(cluster: &Cluster, id: i32) -> Option<(i32, i32)> {
    let d = describe(cluster, id)?;
    (d.error == ErrorCode::NONE && d.leader_id == id).then_some((id, d.leader_epoch))
}

fn begin_quorum_epoch(leader_id: i32, leader_epoch: i32) -> Request {
    Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
        cluster_id: CLUSTER_ID.into(),
        leader_id,
        leader_epoch,
    })
}

/// A Vote from voter `candidate_id`, with its directory id (DescribeQuorum tells anyone who
/// asks), so that the checks the epoch meets are reached rather than INVALID_VOTER_KEY.
fn vote(
    cluster: &Cluster,
    candidate_id: i32,
    candidate_epoch: i32,
    last_epoch: i32,
    last_offset: i64,
) -> Request {
    Request::Vote(VoteRequest {
        cluster_id: CLUSTER_ID.into(),
        candidate_epoch,
        candidate_id,
        candidate_directory_id: directory_id_of(cluster, candidate_id),
        last_epoch,
        last_epoch_end_offset: last_offset,
        pre_vote: false,
        ..Default::default()
    })
}

fn find_quorum(replica_id: i32, boot_timestamp: i64, port: u16) -> Request {
    Request::FindQuorum(FindQuorumRequest {
        cluster_id: CLUSTER_ID.into(),
        replica_id,
        boot_timestamp,
        host: "127.0.0.1".into(),
        port: port.into(),
    })
}

/// A voter other than `target`, for a request that names another voter as leader or candidate.
fn other_voter(target: i32) -> i32 {
    target % 3 + 1
}

/// Sends `request` to node `target`; the answer (or why there was none), labelled.
fn attack(cluster: &Cluster, target: i32, request: Request) -> (String, Result<Response, String>) {
    let label = format!("{request:?} to node {target}");
    let response = send_raw_request(cluster.addr(target), &request, TIMEOUT);
    eprintln!("{label}: {response:?}");
    (label, response)
}

/// The attack left the epoch far from its limit: elections remain.
fn assert_epoch_far_from_the_limit(epoch: i32) {
    assert!(
        epoch < i32::MAX - (1 << 20),
        "epoch {epoch} after the attack"
    );
}

/// Every answer came and carries INVALID_REQUEST (an epoch the receiver refuses).
fn assert_all_refused(answers: &[(String, Result<Response, String>)]) {
    for (label, response) in answers {
        match response {
            Ok(response) => assert_eq!(response.error(), REFUSED, "{label}: answered {response:?}"),
            Err(error) => panic!("{label}: no answer: {error}"),
        }
        if let Ok(Response::Vote(vote)) = response {
            assert!(!vote.vote_granted, "{label}: vote granted");
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A port on 127.0.0.1 where nothing listens (bound, then released).
fn dead_port() -> u16 {
    free_port()
}

#[test]
fn begin_quorum_epoch_at_i32_max_is_refused_and_the_cluster_lives_on() {
    let mut under = UnderLoad::start();
    let mut targets = vec![1, 2];
    if !targets.contains(&under.leader) {
        targets.push(under.leader);
    }
    // Twice each: the refusal is logged once per sender address, not once per request.
    let answers: Vec<_> = targets
        .iter()
        .chain(targets.iter())
        .map(|&target| {
            let named = if target == 3 { 1 } else { 3 };
            attack(&under.cluster, target, begin_quorum_epoch(named, i32::MAX))
        })
        .collect();
    assert_epoch_far_from_the_limit(under.assert_the_cluster_lives_on().1);
    assert_all_refused(&answers);
    for &target in &targets {
        let stderr = std::fs::read_to_string(under.cluster.stderr_path(target)).unwrap();
        let logged: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("refused a message"))
            .collect();
        assert_eq!(logged.len(), 1, "node {target}: {logged:?}");
        assert!(
            logged[0].contains("127.0.0.1") && logged[0].contains("no room for another election"),
            "node {target}: {logged:?}"
        );
    }
    under.finish();
}

#[test]
fn vote_at_i32_max_is_refused_and_the_cluster_lives_on() {
    let mut under = UnderLoad::start();
    let answers: Vec<_> = [1, 2]
        .into_iter()
        .map(|target| {
            attack(
                &under.cluster,
                target,
                vote(&under.cluster, 3, i32::MAX, i32::MAX - 1, 1 << 40),
            )
        })
        .collect();
    assert_epoch_far_from_the_limit(under.assert_the_cluster_lives_on().1);
    assert_all_refused(&answers);
    under.finish();
}

/// Sends `request(target)` to every voter; panics (with the node's stderr) on a missing answer.
fn to_every_voter(under: &UnderLoad, request: impl Fn(i32) -> Request, log: bool) {
    for target in 1..=3 {
        let request = request(target);
        match send_raw_request(under.cluster.addr(target), &request, TIMEOUT) {
            Ok(response) if log => eprintln!("{request:?} to node {target}: {response:?}"),
            Ok(_) => {}
            Err(error) => panic!(
                "{request:?} to node {target}: no answer: {error}; its stderr:\n{}",
                under.cluster.stderr_tail(target)
            ),
        }
    }
}

const MILLION: i32 = 1_000_000;

#[test]
fn epochs_raised_by_a_million_twenty_times_leave_the_cluster_committing() {
    let mut under = UnderLoad::start();
    let base = under.epoch;
    // One voter is named leader (BeginQuorumEpoch) or candidate (Vote) throughout, as one
    // hostile peer would: 20 rounds of each, to every voter, each round a million epochs above
    // the one before.
    let named = under.followers()[0];
    for round in 1..=20 {
        let epoch = base + round * MILLION;
        to_every_voter(&under, |_| begin_quorum_epoch(named, epoch), round == 20);
    }
    for round in 21..=40 {
        let epoch = base + round * MILLION;
        to_every_voter(
            &under,
            |_| vote(&under.cluster, named, epoch, epoch - 1, 1 << 40),
            round == 40,
        );
    }
    let (leader, epoch) = under.assert_the_cluster_lives_on();
    eprintln!("after the attack: leader {leader} in epoch {epoch}");
    assert_epoch_far_from_the_limit(epoch);
    under.finish();
}

#[test]
fn a_different_leader_claimed_to_each_voter_for_one_new_epoch_stops_no_node() {
    let mut under = UnderLoad::start();
    // Each voter is told that another one leads the same new epoch (1 by 2, 2 by 3, 3 by 1):
    // well-formed requests, one each, with an epoch within any bound.
    let epoch = under.epoch + MILLION;
    to_every_voter(
        &under,
        |target| begin_quorum_epoch(other_voter(target), epoch),
        true,
    );
    under.assert_the_cluster_lives_on();
    under.finish();
}

/// Bound on a voter stranded in a later epoch being brought back: the leader notices its silence
/// after a fetch timeout (2 s), announces itself again, steps down on the answer, and an
/// election follows (a few election timeouts).
const REJOIN_BOUND: Duration = Duration::from_secs(20);
/// Long enough for every voter to have announced its endpoint to the others.
const ANNOUNCEMENTS_SETTLE: Duration = Duration::from_secs(2);

/// One forged Vote (a real one, not a pre-vote) from a candidate with an empty log lifts one
/// follower alone to the next epoch: it refuses the vote but adopts the epoch. Nobody stands in
/// that epoch, the follower can no longer follow the leader of the epoch below, and its
/// pre-votes are refused because the other two hear from their leader. Before the leader
/// announced itself again to a voter silent for a fetch timeout (docs/protocol.md, "A silent
/// voter"), it stayed out until the leader changed. Now the leader's announcement draws the
/// later epoch from it, the leader steps down to it, and the next election takes all three
/// along: within a bound every voter names one leader in one epoch past the forged one, the
/// load is acknowledged again, and every voter's log holds every acknowledged record.
#[test]
fn a_follower_lifted_alone_to_a_later_epoch_is_brought_back_by_the_leader() {
    let mut under = UnderLoad::start();
    let followers = under.followers();
    let (stranded, named) = (followers[0], followers[1]);
    let forged = under.epoch + 1;
    // Voters tell each other their endpoints with FindQuorum for a while after they start, and
    // an answer carries its sender's epoch: one sent to the lifted follower would carry the
    // forged epoch to a second voter, and those two could elect without the leader's help.
    std::thread::sleep(ANNOUNCEMENTS_SETTLE);
    let (label, answer) = attack(
        &under.cluster,
        stranded,
        vote(&under.cluster, named, forged, 0, 0),
    );
    match answer {
        Ok(Response::Vote(vote)) => {
            assert_eq!(vote.error, ErrorCode::NONE, "{label}: {vote:?}");
            assert_eq!(
                vote.leader_epoch, forged,
                "{label}: the epoch is adopted: {vote:?}"
            );
            assert!(
                !vote.vote_granted,
                "{label}: an empty log gets no vote: {vote:?}"
            );
        }
        other => panic!("{label}: answered {other:?}"),
    }
    let deadline = Instant::now() + REJOIN_BOUND;
    let (leader, epoch) = loop {
        let views: Vec<Option<(i32, i32)>> = (1..=3)
            .map(|id| describe(&under.cluster, id).map(|d| (d.leader_id, d.leader_epoch)))
            .collect();
        if let Some(Some((leader, epoch))) = views.first() {
            if *leader > 0 && *epoch > forged && views.iter().all(|v| *v == views[0]) {
                break (*leader, *epoch);
            }
        }
        assert!(
            Instant::now() < deadline,
            "the voters do not agree on a leader past epoch {forged} within {REJOIN_BOUND:?}: \
             (leader, epoch) of nodes 1-3: {views:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("node {stranded} lifted to epoch {forged}; then leader {leader} in epoch {epoch}");
    under.wait_for_acks(ACKS_AFTER, ACKS_BOUND, "after the stranded voter came back");
    under.assert_all_running("after the stranded voter came back");
    under.finish();
}

/// FindQuorum claiming to be the leader (its id) at an address where nothing listens, sent to
/// both followers: the same node stays leader in the same epoch for the whole window, and the
/// load goes on being acknowledged.
fn find_quorum_for_the_leader_is_not_adopted(boot_timestamp: impl Fn() -> i64) {
    let mut under = UnderLoad::start();
    let (leader, epoch) = (under.leader, under.epoch);
    let port = dead_port();
    let answers: Vec<_> = under
        .followers()
        .into_iter()
        .map(|target| {
            attack(
                &under.cluster,
                target,
                find_quorum(leader, boot_timestamp(), port),
            )
        })
        .collect();
    for (label, response) in &answers {
        assert!(response.is_ok(), "{label}: no answer: {response:?}");
    }
    let acked_at_attack = under.acked_count();
    let end = Instant::now() + WINDOW;
    let mut leader_answers = 0;
    while Instant::now() < end {
        under.assert_all_running("after the FindQuorum");
        // Every node that answers (a slow answer on this shared machine is no evidence) names
        // the same leader and epoch: the leader as itself, the followers as their leader.
        for id in 1..=3 {
            let Some(d) = describe(&under.cluster, id) else {
                continue;
            };
            assert_eq!(
                (d.leader_id, d.leader_epoch),
                (leader, epoch),
                "node {id} names leader {} in epoch {} after the FindQuorum (was {leader} in \
                 {epoch}); its last stderr lines:\n{}",
                d.leader_id,
                d.leader_epoch,
                under.cluster.stderr_tail(id)
            );
            leader_answers += usize::from(id == leader);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        leader_answers >= 5,
        "node {leader} answered DescribeQuorum {leader_answers} times in {WINDOW:?}"
    );
    assert!(
        under.acked_count() >= acked_at_attack + ACKS_AFTER,
        "{} acknowledgements in the {WINDOW:?} after the FindQuorum",
        under.acked_count() - acked_at_attack
    );
    assert_eq!(under.leader_within(ELECTION_BOUND), (leader, epoch));
    under.finish();
}

#[test]
fn find_quorum_for_the_leader_with_boot_timestamp_i64_max_is_not_adopted() {
    find_quorum_for_the_leader_is_not_adopted(|| i64::MAX);
}

#[test]
fn find_quorum_for_the_leader_one_second_ahead_to_a_dead_port_is_not_adopted() {
    find_quorum_for_the_leader_is_not_adopted(|| now_ms() + 1000);
}

#[test]
fn fetches_from_ten_thousand_made_up_replica_ids_leave_the_leader_flat() {
    use std::io::{Read, Write};
    const IDS: i32 = 10_000;
    let (mut cluster, leader) = Cluster::started(3);
    let d = describe(&cluster, leader).expect("the leader answers DescribeQuorum");
    let end = voter_log_end(&d, leader).unwrap();
    let pid = cluster.node(leader).process.as_ref().unwrap().child.id();
    let before = rss_kib(pid);
    // Pipelined on one connection, 500 at a time: each an observer's fetch at the log end, so
    // each is answered at once and empty.
    let mut stream = std::net::TcpStream::connect(cluster.addr(leader)).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut answered = 0;
    for chunk in (100_000..100_000 + IDS).collect::<Vec<_>>().chunks(500) {
        let mut frames = Vec::new();
        for &replica_id in chunk {
            frames.extend(raw_request_frame(&Request::FetchQuorumRecords(
                engine::raft::FetchQuorumRecordsRequest {
                    cluster_id: CLUSTER_ID.into(),
                    replica_id,
                    leader_epoch: d.leader_epoch,
                    fetch_offset: end,
                    last_fetched_epoch: d.leader_epoch,
                    is_follower: false,
                    max_wait_ms: 0,
                    durable_offset: -1,
                    replica_directory_id: Default::default(),
                    lease_echo: None,
                },
            )));
        }
        stream.write_all(&frames).unwrap();
        for _ in chunk {
            let mut size = [0u8; 4];
            stream.read_exact(&mut size).unwrap();
            let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
            stream.read_exact(&mut body).unwrap();
            answered += 1;
        }
    }
    assert_eq!(answered, IDS);
    let after = rss_kib(pid);
    let d = describe(&cluster, leader).expect("the leader still answers");
    eprintln!(
        "leader RSS {before} KiB before, {after} KiB after {IDS} made-up replica ids; it lists {} observers",
        d.observers.len()
    );
    assert!(
        d.observers.len() <= 1024,
        "{} observers tracked",
        d.observers.len()
    );
    assert!(
        after < before + 32 * 1024,
        "the leader grew from {before} KiB to {after} KiB"
    );
    let mut client = cluster.connect(leader, TIMEOUT);
    produce_one(&mut client, "after the flood").expect("the leader still commits");
}
