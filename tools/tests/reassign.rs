//! Changing the voters of a running cluster with `ringraft quorum reassign` (docs/operations.md,
//! "Changing the voters"): real `ringraft serve` processes on 127.0.0.1 under acks=-1 load,
//! the tool run as an operator runs it. Each test ends with every acknowledged record in every
//! remaining voter's log, once and in order. Every wait is bounded and every process is killed
//! when its guard drops.

mod support;

use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::raft::DescribeQuorumResponse;
use net::client::BlockingClient;
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

/// `ringraft quorum --bootstrap-server <every node> --timeout-ms 60000 <args>`.
fn quorum(cluster: &Cluster, args: &[&str]) -> Output {
    let servers: Vec<String> = cluster.nodes.iter().map(|n| n.addr.to_string()).collect();
    let args = [&["--timeout-ms", "60000"], args].concat();
    run_quorum_tool(&servers.join(","), &args)
}

/// Runs the tool and requires it to succeed; its standard output.
fn quorum_ok(cluster: &Cluster, args: &[&str]) -> String {
    let output = quorum(cluster, args);
    assert!(
        output.status.success(),
        "ringraft quorum {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Adds node `id`, not a voter, with the voters' `quorum.voters` line (an observer until a
/// reassignment makes it a voter).
fn add_observer(cluster: &mut Cluster, id: i32) {
    let voters_line = format!("quorum.voters={}", cluster.voters_value());
    cluster
        .add_node(id, &format!("node-{id}"), CLUSTER_ID, &voters_line)
        .unwrap();
}

/// The leader's DescribeQuorum, asked of whichever running node answers as leader.
fn leader_view(cluster: &Cluster) -> DescribeQuorumResponse {
    let deadline = Instant::now() + WAIT;
    loop {
        for node in cluster.nodes.iter().filter(|n| n.process.is_some()) {
            let answer =
                BlockingClient::connect(node.addr, TIMEOUT).and_then(|mut c| c.describe_quorum());
            if let Some(d) = answer.ok().filter(|d| d.error.is_none()) {
                return d;
            }
        }
        assert!(Instant::now() < deadline, "no leader answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn voters_of(d: &DescribeQuorumResponse) -> Vec<i32> {
    let mut ids: Vec<i32> = d.current_voters.iter().map(|v| v.replica_id).collect();
    ids.sort_unstable();
    ids
}

/// Waits (bounded) until the leader lists every one of `ids` as an observer.
fn wait_for_observers(cluster: &Cluster, ids: &[i32]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let d = leader_view(cluster);
        if ids
            .iter()
            .all(|id| d.observers.iter().any(|o| o.replica_id == *id))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "observers {ids:?} not listed: {d:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// acks=-1 load against every node (it follows the leader) until [`Load::finish`].
struct Load {
    stop: Arc<AtomicBool>,
    acked: Acked,
    thread: std::thread::JoinHandle<()>,
}

impl Load {
    fn start(cluster: &Cluster) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let addrs = cluster.nodes.iter().map(|n| n.addr).collect();
        let (acked, thread) = start_load(addrs, Arc::clone(&stop));
        Load {
            stop,
            acked,
            thread,
        }
    }

    fn acked_count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Waits (bounded) until `more` records beyond those acknowledged so far are acknowledged:
    /// the cluster commits.
    fn wait_for_more(&self, more: usize) {
        let target = self.acked_count() + more;
        let deadline = Instant::now() + WAIT;
        while self.acked_count() < target {
            assert!(
                Instant::now() < deadline,
                "no commits: {} acknowledged, waiting for {target}",
                self.acked_count()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn finish(self) -> Vec<(i64, String)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        let acked = self.acked.lock().unwrap().clone();
        assert!(!acked.is_empty(), "the load acknowledged nothing");
        acked
    }
}

/// Voters 1-3 and observers `observers` started, a leader elected (returned), every observer
/// fetching from it, and acks=-1 load committing.
fn started_under_load(observers: &[i32]) -> (Cluster, i32, Load) {
    let mut cluster = Cluster::new(3);
    for &id in observers {
        add_observer(&mut cluster, id);
    }
    cluster.start_all();
    let leader = cluster.wait_for_leader(observers.first().copied());
    wait_for_observers(&cluster, observers);
    let load = Load::start(&cluster);
    load.wait_for_more(50);
    (cluster, leader, load)
}

/// Waits for each of `replicas` (voters, and observers that were voters) to reach the last
/// acknowledged record, stops every node, then checks that each of them holds every
/// acknowledged record once, in order.
fn stop_and_check_logs(cluster: &mut Cluster, replicas: &[i32], acked: &[(i64, String)]) {
    let end = acked.iter().map(|(o, _)| o + 1).max().unwrap();
    cluster.wait_for_replicas_at(replicas, end);
    for (id, status) in cluster.stop_all() {
        assert!(status.is_some(), "node {id} ignored SIGTERM");
    }
    for &id in replicas {
        let log = read_log(&cluster.node(id).dir);
        assert!(
            log_holds_once_in_order(&log, acked),
            "node {id}: {} acknowledged records, log of {} records does not hold them once in order",
            acked.len(),
            log.len()
        );
    }
    eprintln!(
        "{} acknowledged records in the logs of {replicas:?}",
        acked.len()
    );
}

#[test]
fn a_dead_voter_is_replaced_by_a_new_node_under_load() {
    let (mut cluster, _, load) = started_under_load(&[4]);

    // Voter 3's disk is gone: stopped and its directory deleted.
    if let Some(mut p) = cluster.node(3).process.take() {
        p.signal(libc::SIGKILL);
        p.wait_exit(STOP_WAIT);
    }
    std::fs::remove_dir_all(&cluster.node(3).dir).unwrap();
    load.wait_for_more(50);

    let started = Instant::now();
    let out = quorum_ok(&cluster, &["reassign", "--voters", "1,2,4", "--wait"]);
    eprintln!("replaced 3 by 4 in {:?}", started.elapsed());
    assert!(
        out.contains("Reassignment complete: CurrentVoters [1,2,4]"),
        "{out}"
    );
    assert_eq!(voters_of(&leader_view(&cluster)), vec![1, 2, 4]);
    assert!(quorum_ok(&cluster, &["reassign", "--verify"]).contains("No reassignment in progress"));
    load.wait_for_more(50);

    // Node 4 counts: with one of the old voters down too, 4 and the other still commit.
    let leader = leader_view(&cluster).leader_id;
    let other = [1, 2].into_iter().find(|id| *id != leader).unwrap();
    if let Some(mut p) = cluster.node(other).process.take() {
        p.signal(libc::SIGKILL);
        p.wait_exit(STOP_WAIT);
    }
    load.wait_for_more(50);
    cluster.start(other, &[]);
    let acked = load.finish();
    stop_and_check_logs(&mut cluster, &[1, 2, 4], &acked);
}

/// The directory each voter is bound to in node `id`'s file: (voter, voterDirectoryId).
fn bound_voters(cluster: &Cluster, id: i32) -> Vec<(i64, Option<String>)> {
    let file = quorum_state_file(cluster, id);
    file["currentVoters"]
        .as_array()
        .expect("currentVoters")
        .iter()
        .map(|v| {
            let dir = v["voterDirectoryId"].as_str().map(str::to_string);
            (v["voterId"].as_i64().expect("voterId"), dir)
        })
        .collect()
}

/// Waits (bounded) until node `id`'s file binds every voter of `ids` to the directory each
/// node's own file names.
fn wait_until_bound(cluster: &Cluster, id: i32, ids: &[i32]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let want: Vec<(i64, Option<String>)> = ids
            .iter()
            .map(|v| (i64::from(*v), Some(directory_of(cluster, *v))))
            .collect();
        let bound = bound_voters(cluster, id);
        if bound == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {id} binds {bound:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn kill(cluster: &mut Cluster, id: i32) {
    if let Some(mut p) = cluster.node(id).process.take() {
        p.signal(libc::SIGKILL);
        p.wait_exit(STOP_WAIT);
    }
}

/// A voter restarted on an empty directory is a new replica under an old id (docs/operations.md,
/// "Replacing a voter that lost its disk"): it gets a new directory id and never votes, since
/// every voter's set binds its id to the lost directory, so the one voter left with it elects
/// nobody. Taken out and added back, it is bound to its new directory and votes again.
#[test]
fn a_voter_restarted_with_an_empty_directory_does_not_vote_until_added_back() {
    let (mut cluster, leader, load) = started_under_load(&[]);
    for id in [1, 2, 3] {
        wait_until_bound(&cluster, id, &[1, 2, 3]);
    }
    let mut followers = [1, 2, 3].into_iter().filter(|id| *id != leader);
    let victim = followers.next().unwrap();
    let lost = directory_of(&cluster, victim);
    kill(&mut cluster, victim);
    std::fs::remove_dir_all(&cluster.node(victim).dir).unwrap();
    std::fs::create_dir_all(&cluster.node(victim).dir).unwrap();
    cluster.start(victim, &[]);
    let new = directory_of(&cluster, victim);
    assert_ne!(new, lost, "an empty directory gets a new id");
    load.wait_for_more(50);

    // Only `other` and the stranger are left: no majority without the stranger's vote.
    kill(&mut cluster, leader);
    let elected = testkit::Cluster::wait_for_leader(
        &mut cluster,
        &testkit::LeaderWait {
            exclude: Some(leader),
            ..testkit::LeaderWait::within(Duration::from_secs(8))
        },
    );
    assert!(
        elected.is_err(),
        "a leader without the lost voter's vote: {elected:?}"
    );
    cluster.start(leader, &[]);
    let leader = cluster.wait_for_leader(Some(victim));
    assert_ne!(leader, victim);

    // The leader reports the stranger as an observer with its new directory.
    let deadline = Instant::now() + WAIT;
    loop {
        let d = leader_view(&cluster);
        let listed = d
            .observers
            .iter()
            .any(|o| o.replica_id == victim && o.directory_id.to_string() == new);
        if listed {
            break;
        }
        assert!(Instant::now() < deadline, "{victim} not an observer: {d:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let kept: Vec<String> = [1, 2, 3]
        .iter()
        .filter(|id| **id != victim)
        .map(|id| id.to_string())
        .collect();
    let kept_list = kept.join(",");
    let out = quorum_ok(&cluster, &["reassign", "--voters", &kept_list, "--wait"]);
    let told = format!("Voter {victim} fetches from a new log directory");
    assert!(out.contains(&told), "{out}");
    let out = quorum_ok(&cluster, &["reassign", "--voters", "1,2,3", "--wait"]);
    assert!(
        out.contains("Reassignment complete: CurrentVoters [1,2,3]"),
        "{out}"
    );
    wait_until_bound(&cluster, leader, &[1, 2, 3]);
    load.wait_for_more(50);

    // Bound to its new directory, it votes: with the leader gone, it and `other` elect one.
    kill(&mut cluster, leader);
    let next = cluster.wait_for_leader(Some(leader));
    eprintln!("{next} leads with the re-added voter {victim}");
    cluster.start(leader, &[]);
    load.wait_for_more(50);
    let acked = load.finish();
    stop_and_check_logs(&mut cluster, &[1, 2, 3], &acked);
}

#[test]
fn three_voters_grow_to_five_and_shrink_back_under_load() {
    let (mut cluster, _, load) = started_under_load(&[4, 5]);

    let out = quorum_ok(&cluster, &["reassign", "--voters", "1,2,3,4,5", "--wait"]);
    assert!(
        out.contains("Reassignment complete: CurrentVoters [1,2,3,4,5]"),
        "{out}"
    );
    load.wait_for_more(50);
    let out = quorum_ok(&cluster, &["reassign", "--voters", "1,2,3", "--wait"]);
    assert!(
        out.contains("Reassignment complete: CurrentVoters [1,2,3]"),
        "{out}"
    );
    let d = leader_view(&cluster);
    assert_eq!(voters_of(&d), vec![1, 2, 3]);
    assert!(d.target_voters.is_none(), "{d:?}");
    load.wait_for_more(50);
    let acked = load.finish();
    // 4 and 5 are observers again and still replicate.
    stop_and_check_logs(&mut cluster, &[1, 2, 3, 4, 5], &acked);
}

#[test]
fn the_leader_removes_itself_by_handing_over() {
    let (mut cluster, leader, load) = started_under_load(&[]);

    let rest: Vec<i32> = cluster.others(leader);
    let target = format!("{},{}", rest[0], rest[1]);
    let out = quorum_ok(&cluster, &["reassign", "--voters", &target, "--wait"]);
    assert!(
        out.contains(&format!("Reassignment complete: CurrentVoters [{target}]")),
        "{out}"
    );
    let d = leader_view(&cluster);
    assert_eq!(voters_of(&d), rest);
    assert_ne!(d.leader_id, leader, "the removed leader still leads");
    load.wait_for_more(50);
    // The old leader follows as an observer and never campaigns: the epoch stays put.
    let epoch = d.leader_epoch;
    std::thread::sleep(Duration::from_secs(2));
    let later = leader_view(&cluster);
    assert_eq!(later.leader_epoch, epoch, "an election after the change");
    assert!(
        later.observers.iter().any(|o| o.replica_id == leader),
        "the old leader {leader} does not fetch as an observer: {later:?}"
    );
    let acked = load.finish();
    stop_and_check_logs(&mut cluster, &[1, 2, 3], &acked);
}

#[test]
fn a_new_leader_finishes_a_reassignment_its_predecessor_started() {
    let (mut cluster, leader, load) = started_under_load(&[4, 5]);

    // The command returns once the target is committed; the leader dies before it is reached.
    let out = quorum_ok(&cluster, &["reassign", "--voters", "1,2,3,4,5"]);
    assert!(
        out.contains("recorded and committed TargetVoters [1,2,3,4,5]"),
        "{out}"
    );
    cluster.node(leader).process.take(); // SIGKILL through the guard
    let next = cluster.wait_for_leader(Some(leader));
    eprintln!("leader {leader} killed, {next} leads");
    cluster.start(leader, &[]);
    let out = quorum_ok(&cluster, &["reassign", "--voters", "1,2,3,4,5", "--wait"]);
    assert!(
        out.contains("Reassignment complete: CurrentVoters [1,2,3,4,5]"),
        "{out}"
    );
    load.wait_for_more(50);
    let acked = load.finish();
    stop_and_check_logs(&mut cluster, &[1, 2, 3, 4, 5], &acked);
}

#[test]
fn a_reassignment_stuck_on_a_stopped_node_is_cancelled_half_way() {
    let mut cluster = Cluster::new(3);
    add_observer(&mut cluster, 4);
    add_observer(&mut cluster, 5);
    cluster.start_all();
    cluster.wait_for_leader(Some(4));
    wait_for_observers(&cluster, &[4, 5]);
    // Node 5 fetched once (the leader knows it), then stops: it can never catch up.
    if let Some(mut p) = cluster.node(5).process.take() {
        p.signal(libc::SIGKILL);
        p.wait_exit(STOP_WAIT);
    }
    let load = Load::start(&cluster);
    load.wait_for_more(50);

    let out = quorum_ok(&cluster, &["reassign", "--voters", "1,2,3,4,5"]);
    assert!(out.contains("recorded and committed"), "{out}");
    // 4 is added; 5 is not; the reassignment stays pending and commits go on.
    let deadline = Instant::now() + WAIT;
    let mut d = leader_view(&cluster);
    while voters_of(&d) != [1, 2, 3, 4] {
        assert!(Instant::now() < deadline, "4 never added: {d:?}");
        std::thread::sleep(Duration::from_millis(50));
        d = leader_view(&cluster);
    }
    load.wait_for_more(50);
    let verify = quorum(&cluster, &["reassign", "--verify"]);
    assert_eq!(verify.status.code(), Some(1), "--verify while in progress");
    assert!(String::from_utf8_lossy(&verify.stdout).contains("Reassignment in progress"));
    let d = leader_view(&cluster);
    let target: Vec<i32> = d
        .target_voters
        .as_ref()
        .expect("TargetVoters reported while in progress")
        .iter()
        .map(|r| r.replica_id)
        .collect();
    assert_eq!(target, vec![1, 2, 3, 4, 5]);

    let out = quorum_ok(&cluster, &["reassign", "--cancel", "--wait"]);
    assert!(
        out.contains("Reassignment complete: CurrentVoters [1,2,3,4]"),
        "{out}"
    );
    assert!(quorum_ok(&cluster, &["reassign", "--verify"]).contains("No reassignment in progress"));
    load.wait_for_more(50);
    let acked = load.finish();
    stop_and_check_logs(&mut cluster, &[1, 2, 3, 4], &acked);
}

#[test]
fn a_dry_run_changes_nothing_and_an_unknown_voter_is_named() {
    let mut cluster = Cluster::new(3);
    add_observer(&mut cluster, 4);
    cluster.start_all();
    cluster.wait_for_leader(Some(4));
    wait_for_observers(&cluster, &[4]);

    let out = quorum_ok(&cluster, &["reassign", "--voters", "1,2,4", "--dry-run"]);
    assert!(out.contains("Dry run"), "{out}");
    let d = leader_view(&cluster);
    assert_eq!(voters_of(&d), vec![1, 2, 3]);
    assert!(d.target_voters.is_none(), "{d:?}");

    let refused = quorum(&cluster, &["reassign", "--voters", "1,2,9"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("voter 9: UNKNOWN_VOTER_ID"), "{stderr}");
    assert!(leader_view(&cluster).target_voters.is_none());
    cluster.stop_all_cleanly();
}
