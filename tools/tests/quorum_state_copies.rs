//! Process test of the quorum-state copies (docs/protocol.md, "The quorum-state file";
//! docs/operations.md, "A quorum-state with no usable copy"), the user's case of issue 46: a
//! 3-voter cluster, a stopped follower whose copy A has one bit flipped in `votedId` (1 became
//! 3 in the same epoch, still valid JSON). The node starts on copy B, says so once naming copy
//! A, rewrites both copies, and the cluster keeps committing with it. With both copies damaged
//! the node exits non-zero naming both files and the runbook, and `ringraft quorum-state`
//! refuses the same way; with one copy damaged the tool repairs it like a start would.
//! Real `ringraft serve` processes on 127.0.0.1; every wait is bounded and every process is
//! killed when its guard drops.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use engine::quorum_state_store::{self, QuorumStateStore, Verdict, COPY_B_FILE_NAME, FILE_NAME};
use engine::raft::ElectionState;
use support::*;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Flips bit 1 of the first digit of `votedId` in `path` (1 <-> 3, 2 <-> 0): the user's change
/// (on a `-1`, the 1 becomes 3).
fn flip_voted_id(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let field = text.find("\"votedId\":").expect("a votedId") + "\"votedId\":".len();
    let digit = field + usize::from(bytes[field] == b'-');
    assert!(bytes[digit].is_ascii_digit(), "{text}");
    bytes[digit] ^= 0b10;
    // Still JSON of the same shape: only the checksum can tell.
    serde_json::from_slice::<serde_json::Value>(&bytes).expect("still JSON");
    std::fs::write(path, bytes).unwrap();
}

/// Both copies of `dir` valid and equal.
fn assert_intact(dir: &Path) {
    match quorum_state_store::inspect(dir) {
        Verdict::Intact(record) => assert!(record.is_sealed()),
        other => panic!("{}: {other:?}", dir.display()),
    }
}

/// Stops node `id` with SIGTERM (bounded) and checks it exited cleanly.
fn stop(cluster: &mut Cluster, id: i32) {
    let mut process = cluster.node(id).process.take().expect("running");
    process.signal(libc::SIGTERM);
    let status = process.wait_exit(TIMEOUT).expect("stops on SIGTERM");
    assert!(status.success(), "node {id}: {status}");
}

/// What node `id` wrote to its stderr file from byte `from` on.
fn stderr_since(cluster: &Cluster, id: i32, from: usize) -> String {
    let text = std::fs::read_to_string(cluster.stderr_path(id)).unwrap_or_default();
    text.get(from..).unwrap_or_default().to_string()
}

fn stderr_len(cluster: &Cluster, id: i32) -> usize {
    std::fs::metadata(cluster.stderr_path(id)).map_or(0, |m| m.len() as usize)
}

fn tool(dir: &Path) -> std::process::Output {
    Command::new(binary())
        .args(["quorum-state", "--dir"])
        .arg(dir)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

#[test]
fn one_damaged_copy_is_repaired_at_start_and_two_stop_the_node_naming_both() {
    let (mut cluster, leader) = Cluster::started(3);
    let mut client = cluster.connect(leader, TIMEOUT);
    let mut acked = produce_numbered(&mut client, "before-", 10);
    drop(client);
    cluster.wait_for_voters_at(leader, acked.last().unwrap().0 + 1);
    let follower = cluster.others(leader)[0];
    let dir = cluster.node(follower).dir.clone();
    stop(&mut cluster, follower);
    assert_intact(&dir);
    // A follower's file names the leader and no vote. The user's file held a vote (votedId 1):
    // what a voter writes when it votes and stops before it learns of the election's outcome.
    // Written here through the store, as that voter would have (its vote for the leader).
    let mut store = QuorumStateStore::open(&dir, follower, CLUSTER_ID).unwrap();
    let state = store.read().unwrap().expect("a stored state");
    store
        .write(&ElectionState {
            leader_id: -1,
            voted_id: leader,
            ..state
        })
        .unwrap();
    drop(store);
    let good = String::from_utf8(std::fs::read(dir.join(FILE_NAME)).unwrap()).unwrap();
    assert!(good.contains(&format!("\"votedId\":{leader},")), "{good}");

    // The user's case: one bit of votedId in copy A.
    flip_voted_id(&dir.join(FILE_NAME));
    let from = stderr_len(&cluster, follower);
    cluster.start(follower, &[]);
    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, TIMEOUT);
    let after = produce_numbered(&mut client, "after-", 10);
    drop(client);
    cluster.wait_for_voters_at(leader, after.last().unwrap().0 + 1);
    acked.extend(after);
    let stderr = stderr_since(&cluster, follower, from);
    let copy_a = dir.join(FILE_NAME).display().to_string();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("quorum-state copy") && l.contains("WARN"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning: {stderr}");
    assert!(
        warnings[0].contains(&copy_a)
            && warnings[0].contains("checksum mismatch")
            && warnings[0].contains("rewriting both copies"),
        "{}",
        warnings[0]
    );
    cluster.stop_all_cleanly();
    assert_intact(&dir);
    for node in &cluster.nodes {
        assert!(
            log_holds_once_in_order(&read_log(&node.dir), &acked),
            "node {}'s log lost acknowledged records",
            node.id
        );
    }

    // The tool, one damaged copy (B this time): it repairs as a start would, and says so.
    flip_voted_id(&dir.join(COPY_B_FILE_NAME));
    let output = tool(&dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&dir.join(COPY_B_FILE_NAME).display().to_string()),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("generation "));
    assert_intact(&dir);

    // Both copies damaged: the node refuses to start, naming both files and the runbook.
    flip_voted_id(&dir.join(FILE_NAME));
    flip_voted_id(&dir.join(COPY_B_FILE_NAME));
    let damaged = (
        std::fs::read(dir.join(FILE_NAME)).unwrap(),
        std::fs::read(dir.join(COPY_B_FILE_NAME)).unwrap(),
    );
    let from = stderr_len(&cluster, follower);
    cluster.start(follower, &[]);
    let status = cluster
        .node(follower)
        .process
        .as_mut()
        .unwrap()
        .wait_exit(TIMEOUT)
        .expect("a node with no usable quorum-state copy exits");
    assert!(!status.success(), "{status}");
    let stderr = stderr_since(&cluster, follower, from);
    for part in [
        "no usable copy of the quorum-state",
        &copy_a,
        &dir.join(COPY_B_FILE_NAME).display().to_string(),
        "docs/operations.md, \"A quorum-state with no usable copy\"",
    ] {
        assert!(stderr.contains(part), "{stderr} lacks {part}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    let output = tool(&dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("no usable copy") && stderr.contains(COPY_B_FILE_NAME),
        "{stderr}"
    );
    // Refused, never cleared or rewritten.
    assert_eq!(
        (
            std::fs::read(dir.join(FILE_NAME)).unwrap(),
            std::fs::read(dir.join(COPY_B_FILE_NAME)).unwrap(),
        ),
        damaged
    );
}
