//! Process tests of an observer configured with `bootstrap.servers` alone (no `quorum.voters`):
//! it learns the voters, their endpoints and the leader through FindQuorum, replicates, keeps
//! the voter set across a restart, and refuses a wrong cluster or a voter's id with a clear
//! error. Real `ringraft serve` processes on 127.0.0.1 (see support/mod.rs); every wait is
//! bounded and every process is killed when its guard drops.

mod support;

use std::io::Read;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use net::client::BlockingClient;
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Adds node `id` with a listener, a log directory and `bootstrap.servers` only.
fn add_bootstrap_observer(cluster: &mut Cluster, id: i32, bootstrap: SocketAddr, cluster_id: &str) {
    let membership = format!("bootstrap.servers={bootstrap}");
    let name = format!("observer-{id}");
    cluster
        .add_node(id, &name, cluster_id, &membership)
        .unwrap();
}

fn node_index(cluster: &Cluster, id: i32) -> usize {
    cluster.nodes.iter().position(|n| n.id == id).unwrap()
}

/// Waits (bounded) until the leader lists `observer` as an observer at `end` or beyond; never
/// as a voter.
fn wait_for_observer_at(client: &mut BlockingClient, observer: i32, end: i64) {
    let deadline = Instant::now() + WAIT;
    let mut seen = None;
    while Instant::now() < deadline {
        let d = client.describe_quorum().unwrap();
        assert!(
            d.current_voters.iter().all(|v| v.replica_id != observer),
            "node {observer} counted as a voter: {d:?}"
        );
        seen = d
            .observers
            .iter()
            .find(|o| o.replica_id == observer)
            .cloned();
        if seen.as_ref().is_some_and(|o| o.log_end_offset >= end) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("observer {observer} did not reach {end} within {WAIT:?}: {seen:?}");
}

#[test]
fn an_observer_with_only_bootstrap_servers_replicates_and_survives_a_restart() {
    let mut cluster = Cluster::new(3);
    let bootstrap = cluster.addr(1);
    add_bootstrap_observer(&mut cluster, 4, bootstrap, CLUSTER_ID);
    for id in 1..=3 {
        cluster.start(id, &[]);
    }
    let leader = cluster.wait_for_leader(None);
    let observer = node_index(&cluster, 4);
    let mut client = cluster.connect(leader, TIMEOUT);
    let mut acked = produce_numbered(&mut client, "before-", 20);

    cluster.nodes[observer].process = Some(ProcessGuard {
        child: spawn(&cluster.nodes[observer].config, &[], Stdio::null()),
    });
    wait_for_observer_at(&mut client, 4, acked.last().unwrap().0 + 1);
    // It learned the voter set and persisted it, without ever voting.
    let state_path = cluster.nodes[observer].dir.join("quorum-state");
    let state = std::fs::read_to_string(&state_path).unwrap();
    let voters: Vec<i64> = serde_json::from_str::<serde_json::Value>(&state).unwrap()
        ["currentVoters"]
        .as_array()
        .expect("currentVoters")
        .iter()
        .map(|v| v["voterId"].as_i64().expect("voterId"))
        .collect();
    assert_eq!(voters, vec![1, 2, 3], "{state}");
    assert!(state.contains(r#""votedId":-1"#), "{state}");

    // SIGKILL (the guard), more records, restart: the voter set comes from the file, the
    // endpoints and the leader from the bootstrap server again.
    cluster.nodes[observer].process = None;
    acked.extend(produce_numbered(&mut client, "while-down-", 10));
    cluster.nodes[observer].process = Some(ProcessGuard {
        child: spawn(&cluster.nodes[observer].config, &[], Stdio::null()),
    });
    acked.extend(produce_numbered(&mut client, "after-", 10));
    wait_for_observer_at(&mut client, 4, acked.last().unwrap().0 + 1);
    drop(client);
    cluster.stop_all_cleanly();
    let observer_log = read_log(&cluster.nodes[observer].dir);
    assert_each_once_at_its_offset(&observer_log, &acked);
    let voter_log = read_log(&cluster.node(leader).dir);
    assert_eq!(observer_log, voter_log[..observer_log.len()].to_vec());
    let state = std::fs::read_to_string(&state_path).unwrap();
    assert!(state.contains(r#""votedId":-1"#), "{state}");
}

#[test]
fn an_observer_can_bootstrap_from_another_observer() {
    let mut cluster = Cluster::new(3);
    let voter = cluster.addr(3);
    add_bootstrap_observer(&mut cluster, 4, voter, CLUSTER_ID);
    let first = node_index(&cluster, 4);
    let via_observer = cluster.nodes[first].addr;
    // Node 5 knows only node 4, which may not know anything yet when 5 first asks.
    add_bootstrap_observer(&mut cluster, 5, via_observer, CLUSTER_ID);
    let second = node_index(&cluster, 5);
    for id in 1..=3 {
        cluster.start(id, &[]);
    }
    for index in [second, first] {
        cluster.nodes[index].process = Some(ProcessGuard {
            child: spawn(&cluster.nodes[index].config, &[], Stdio::null()),
        });
    }
    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, TIMEOUT);
    let acked = produce_numbered(&mut client, "chained-", 20);
    let end = acked.last().unwrap().0 + 1;
    wait_for_observer_at(&mut client, 4, end);
    wait_for_observer_at(&mut client, 5, end);
    drop(client);
    cluster.stop_all_cleanly();
    assert_each_once_at_its_offset(&read_log(&cluster.nodes[second].dir), &acked);
}

/// Starts the node and waits (bounded) for it to exit; returns (success, stderr).
fn run_to_failure(cluster: &Cluster, index: usize) -> String {
    let mut guard = ProcessGuard {
        child: spawn(&cluster.nodes[index].config, &[], Stdio::piped()),
    };
    let status = guard
        .wait_exit(WAIT)
        .expect("a misconfigured observer exits");
    assert!(!status.success(), "{status}");
    let mut stderr = String::new();
    guard
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

#[test]
fn a_wrong_cluster_or_a_voter_id_is_refused_with_a_clear_error() {
    let mut cluster = Cluster::new(3);
    let bootstrap = cluster.addr(2);
    for id in 1..=3 {
        cluster.start(id, &[]);
    }
    cluster.wait_for_leader(None);

    add_bootstrap_observer(&mut cluster, 5, bootstrap, "another-cluster");
    let stderr = run_to_failure(&cluster, node_index(&cluster, 5));
    // The server no longer tells its cluster id to a node that does not know it.
    assert!(
        stderr.contains("another-cluster") && stderr.contains("belongs to another cluster"),
        "{stderr}"
    );
    assert!(!stderr.contains(CLUSTER_ID), "{stderr}");
    let state = std::fs::read_to_string(cluster.nodes[3].dir.join("quorum-state")).unwrap();
    assert!(
        state.contains(r#""currentVoters":[]"#),
        "nothing adopted: {state}"
    );

    // Node 3's id on an empty disk with bootstrap servers only (a voter that lost its disk, or
    // a stranger under its id): it must not join as a voter. Once the leader has bound every
    // voter to its directory (docs/protocol.md, "Voter identity"), it replicates as an observer
    // and says why.
    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, TIMEOUT);
    wait_until_every_voter_is_bound(&cluster);
    add_bootstrap_observer(&mut cluster, 3, bootstrap, CLUSTER_ID);
    let stranger = cluster.nodes.len() - 1;
    let stderr_path = cluster.nodes[stranger].dir.with_extension("stderr");
    let stderr_file = std::fs::File::create(&stderr_path).unwrap();
    cluster.nodes[stranger].process = Some(ProcessGuard {
        child: spawn(
            &cluster.nodes[stranger].config,
            &[],
            Stdio::from(stderr_file),
        ),
    });
    // It says why it stays an observer, and keeps running (it used to exit).
    let deadline = Instant::now() + WAIT;
    let mut stderr = String::new();
    while !stderr.contains("has no state of its own") {
        assert!(
            Instant::now() < deadline,
            "no word from the stranger: {stderr}"
        );
        std::thread::sleep(Duration::from_millis(50));
        stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    }
    produce_numbered(&mut client, "with a stranger-", 20);
    let guard = cluster.nodes[stranger].process.as_mut().unwrap();
    assert!(
        guard.child.try_wait().unwrap().is_none(),
        "the stranger exited"
    );
    // The real node 3 is untouched: the leader still counts three voters.
    let d = client.describe_quorum().unwrap();
    let mut voters: Vec<i32> = d.current_voters.iter().map(|v| v.replica_id).collect();
    voters.sort_unstable();
    assert_eq!(voters, vec![1, 2, 3], "{d:?}");
    produce_one(&mut client, "still committing").unwrap();
}

/// Waits (bounded) until the quorum-state file of each of voters 1-3 binds all three to a
/// directory (the leader's binding record is committed and folded everywhere).
fn wait_until_every_voter_is_bound(cluster: &Cluster) {
    let deadline = Instant::now() + WAIT;
    let bound = |dir: &std::path::Path| {
        let text = std::fs::read_to_string(dir.join("quorum-state")).unwrap_or_default();
        let Ok(state) = serde_json::from_str::<serde_json::Value>(&text) else {
            return false;
        };
        let voters = state["currentVoters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        voters.len() == 3 && voters.iter().all(|v| v["voterDirectoryId"].is_string())
    };
    while !cluster.nodes[..3].iter().all(|n| bound(&n.dir)) {
        assert!(
            Instant::now() < deadline,
            "voters 1-3 not bound in their files"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
