//! Process test of `ringraft quorum-state` (docs/operations.md, "Recovering a node whose stored
//! state is refused"): a stopped 3-voter cluster whose quorum-state files all hold epoch i32::MAX with
//! no leader and no vote (what the old epoch-overflow bug left behind) elects no leader; the
//! tool refuses the unsafe resets (negative, below the log's last batch epoch, above
//! i32::MAX - 2, directory locked by a node); once every voter is reset to the highest last
//! batch epoch of all the logs, the cluster elects and commits again with every acknowledged
//! record kept. Every wait is bounded and every process is killed when its guard drops.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use engine::quorum_state_store::QuorumStateStore;
use engine::raft::ElectionState;
use net::client::BlockingClient;
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn tool(dir: &Path, reset: Option<&str>) -> Output {
    let mut command = Command::new(binary());
    command.arg("quorum-state").arg("--dir").arg(dir);
    if let Some(epoch) = reset {
        command.arg("--reset-epoch").arg(epoch);
    }
    command.env("RUST_LOG", "warn").output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The number after `key ` in the tool's output (first occurrence).
fn number_after(output: &str, key: &str) -> i64 {
    let start = output
        .find(&format!("{key} "))
        .unwrap_or_else(|| panic!("no {key:?} in {output}"))
        + key.len()
        + 1;
    output[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{key} in {output}: {e}"))
}

fn stored(dir: &Path, id: i32) -> ElectionState {
    QuorumStateStore::open(dir, id, CLUSTER_ID)
        .unwrap()
        .read()
        .unwrap()
        .expect("a quorum-state file")
}

/// Runs the tool with `reset`, expects a refusal whose message contains `reason`, and checks
/// the file did not change.
fn assert_refused(dir: &Path, id: i32, reset: &str, reason: &str) {
    let before = stored(dir, id);
    let output = tool(dir, Some(reset));
    let stderr = text(&output.stderr);
    assert!(
        !output.status.success(),
        "--reset-epoch {reset} on node {id} was accepted: {}",
        text(&output.stdout)
    );
    assert!(
        stderr.contains(reason),
        "--reset-epoch {reset}: {stderr:?} lacks {reason:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        stored(dir, id),
        before,
        "--reset-epoch {reset} changed the file"
    );
}

#[test]
fn quorum_state_reset_brings_back_a_cluster_stuck_at_epoch_i32_max() {
    let (mut cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, TIMEOUT);
    let mut acked = produce_numbered(&mut client, "before-", 10);
    drop(client);
    cluster.wait_for_voters_at(leader, acked.last().unwrap().0 + 1);
    cluster.stop_all_cleanly();

    // What the tool prints of a healthy stopped node, and the highest last batch epoch.
    let mut highest_last_epoch = 0;
    for node in &cluster.nodes {
        let output = tool(&node.dir, None);
        let stdout = text(&output.stdout);
        assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
        let state = stored(&node.dir, node.id);
        assert_eq!(
            number_after(&stdout, "epoch"),
            state.epoch as i64,
            "{stdout}"
        );
        assert_eq!(number_after(&stdout, "leader"), state.leader_id as i64);
        assert!(stdout.contains("voters 1,2,3"), "{stdout}");
        let last_epoch = number_after(&stdout, "last batch epoch");
        assert!(
            (1..=state.epoch as i64).contains(&last_epoch),
            "node {}: last batch epoch {last_epoch}, stored epoch {}",
            node.id,
            state.epoch
        );
        highest_last_epoch = highest_last_epoch.max(last_epoch);
    }

    // What the old overflow bug left: epoch i32::MAX, and neither a leader nor a vote, so the
    // next election needs epoch i32::MAX + 1.
    for node in &cluster.nodes {
        let mut file = QuorumStateStore::open(&node.dir, node.id, CLUSTER_ID).unwrap();
        let state = file.read().unwrap().unwrap();
        file.write(&ElectionState {
            epoch: i32::MAX,
            leader_id: -1,
            voted_id: -1,
            ..state
        })
        .unwrap();
    }
    // Stuck: no leader comes out of it (the nodes crash, or refuse to campaign).
    cluster.start_all();
    let stuck_until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < stuck_until {
        for node in &cluster.nodes {
            if let Ok(mut c) = BlockingClient::connect(node.addr, Duration::from_millis(200)) {
                if let Ok(d) = c.describe_quorum() {
                    assert!(
                        d.leader_id != node.id,
                        "node {} leads epoch {} from a stored i32::MAX",
                        node.id,
                        d.leader_epoch
                    );
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // A directory whose lock is held is refused: the lock is held here the way a running node
    // holds it (net::node::lock), so the check does not depend on a node that may crash-loop.
    cluster.stop_all();
    let node1 = cluster.node(1).dir.clone();
    {
        let _lock = net::node::lock::DirLock::acquire(&node1).unwrap();
        assert_refused(
            &node1,
            1,
            &highest_last_epoch.to_string(),
            "locked by a running ringraft process",
        );
        let output = tool(&node1, None);
        assert!(!output.status.success(), "printed next to a running node");
    }
    assert_refused(&node1, 1, "-1", "negative");
    assert_refused(
        &node1,
        1,
        &(highest_last_epoch - 1).to_string(),
        "below this log's last batch epoch",
    );
    assert_refused(&node1, 1, &i32::MAX.to_string(), "no election is left");
    assert_refused(
        &node1,
        1,
        &(i32::MAX - 1).to_string(),
        "no election is left",
    );
    assert_refused(&node1, 1, "many", "invalid value");

    // The documented recovery: every voter stopped, each reset to the highest last epoch.
    let reset = highest_last_epoch.to_string();
    for node in &cluster.nodes {
        let output = tool(&node.dir, Some(&reset));
        let stdout = text(&output.stdout);
        assert!(
            output.status.success(),
            "node {}: {stdout}{}",
            node.id,
            text(&output.stderr)
        );
        assert!(stdout.contains("epoch 2147483647"), "{stdout}");
        assert!(stdout.contains("reset to:"), "{stdout}");
        let state = stored(&node.dir, node.id);
        assert_eq!(state.epoch as i64, highest_last_epoch);
        assert_eq!((state.leader_id, state.voted_id), (-1, -1));
        assert_eq!(state.current_voters, vec![1, 2, 3]);
    }

    let leader = cluster.start_all_and_elect();
    let mut client = cluster.connect(leader, TIMEOUT);
    let after = produce_one(&mut client, "after the reset").unwrap();
    assert!(after > acked.last().unwrap().0, "new record at {after}");
    let epoch = client.describe_quorum().unwrap().leader_epoch;
    assert!(
        epoch as i64 > highest_last_epoch,
        "leader epoch {epoch} not above the reset epoch {highest_last_epoch}"
    );
    acked.push((after, "after the reset".into()));
    drop(client);
    cluster.wait_for_voters_at(leader, after + 1);
    cluster.stop_all_cleanly();
    for node in &cluster.nodes {
        assert!(
            log_holds_once_in_order(&read_log(&node.dir), &acked),
            "node {}'s log lost acknowledged records",
            node.id
        );
    }
}
