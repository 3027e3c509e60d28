//! Real network partitions: a 3-voter cluster whose nodes each run in a network namespace of
//! their own (testkit's netns lab, created as root, as CI runs), one follower cut off (its
//! interface down inside its namespace) while an acks=-1 producer keeps writing to the leader,
//! then healed. With pre-vote (the default) the cut-off voter's timeouts raise no epoch, so it
//! comes back as a follower and the leader stays; without it, the same partition unseats the
//! leader, which shows the partition is real and the first test can fail. Every wait is
//! bounded; the namespaces are deleted even when a test fails.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::raft::DescribeQuorumResponse;
use support::*;

/// Long enough for the cut-off follower's fetch timeout (2 s by default) to run out and for it
/// to stand several times (election timeout 1 s).
const PARTITION: Duration = Duration::from_secs(7);

fn describe(cluster: &Cluster, id: i32) -> Result<DescribeQuorumResponse, String> {
    cluster
        .client(cluster.addr(id), Duration::from_secs(2))?
        .describe_quorum()
        .map_err(|e| e.to_string())
}

/// Polls until `done` holds (bounded by [`WAIT`]); the last answer in the panic otherwise.
fn wait_until(what: &str, mut done: impl FnMut() -> Result<bool, String>) {
    let deadline = Instant::now() + WAIT;
    let mut last = Ok(false);
    while Instant::now() < deadline {
        last = done();
        if last == Ok(true) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not within {WAIT:?} (last: {last:?})");
}

fn acked_count(acked: &Acked) -> usize {
    acked.lock().unwrap().len()
}

/// What a partition of one follower under load did.
struct Outcome {
    leader: i32,
    epoch: i32,
    follower: i32,
    /// Leader and epoch that node 1..=3 report after the heal, and the load's end.
    after: Vec<(i32, i32)>,
}

/// Starts 3 voters in a lab (`overrides` on each), loads the leader with acks=-1 records, cuts
/// one follower off for [`PARTITION`], heals it, waits for every voter to hold the last
/// acknowledged record, stops the nodes and checks that every voter's log holds every
/// acknowledged record once and in order.
fn partition_one_follower(overrides: &[&str]) -> Outcome {
    let mut cluster = Cluster::new_in_lab(3, 3);
    for id in 1..=3 {
        cluster.start(id, overrides);
    }
    let leader = cluster.wait_for_leader(None);
    let epoch = describe(&cluster, leader).unwrap().leader_epoch;
    let follower = cluster.others(leader)[0];
    let stop = Arc::new(AtomicBool::new(false));
    let client_host = cluster.lab.as_ref().unwrap().client().clone();
    // The leader first; the others only if it stops answering (without pre-vote, it does).
    let mut targets: Vec<i32> = vec![leader];
    targets.extend((1..=3).filter(|id| *id != leader));
    let addrs = targets.iter().map(|id| cluster.addr(*id)).collect();
    let (acked, producer) = start_load_from(Some(client_host), addrs, stop.clone());
    wait_until("100 records acknowledged before the cut", || {
        Ok(acked_count(&acked) >= 100)
    });

    cluster.cut(follower).unwrap();
    let at_cut = acked_count(&acked);
    std::thread::sleep(PARTITION);
    // The partition is real: the leader went on committing with the other follower, and its
    // view of the cut-off one stopped short of what it acknowledged meanwhile.
    let during = acked.lock().unwrap().clone();
    let seen = describe(&cluster, leader).unwrap();
    let cut_end = voter_log_end(&seen, follower).unwrap();
    eprintln!(
        "partition of node {follower}: {} records acknowledged during it, the leader's view of \
         it ends at {cut_end}, its own leader {}/epoch {}",
        during.len() - at_cut,
        seen.leader_id,
        seen.leader_epoch
    );

    cluster.heal(follower).unwrap();
    // Keep the load on for a while after the heal: a disruption would show as a new epoch.
    let after_heal = acked_count(&acked);
    wait_until("the load goes on after the heal", || {
        Ok(acked_count(&acked) >= after_heal + 100)
    });
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(
        during.len() > at_cut && during.last().unwrap().0 >= cut_end,
        "nothing was acknowledged beyond node {follower}'s log end {cut_end} while it was cut \
         off: not a partition"
    );

    // Whoever leads now (without pre-vote the leader may still change for a while) reports
    // every voter at the last acknowledged record.
    let end = acked.last().unwrap().0 + 1;
    wait_until("a leader that has every voter at the load's end", || {
        Ok((1..=3).any(|id| {
            describe(&cluster, id).is_ok_and(|d| {
                d.error.is_none()
                    && d.current_voters.len() == 3
                    && d.current_voters.iter().all(|v| v.log_end_offset >= end)
            })
        }))
    });
    let after = (1..=3)
        .map(|id| {
            let d = describe(&cluster, id).unwrap();
            (d.leader_id, d.leader_epoch)
        })
        .collect();
    eprintln!("after the heal, (leader, epoch) per node: {after:?}");
    cluster.stop_all_cleanly();
    let failures: Vec<String> = cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let log = read_log(&node.dir);
            (!log_holds_once_in_order(&log, &acked)).then(|| {
                format!(
                    "node {}: {} records; {}",
                    node.id,
                    log.len(),
                    first_misplaced(&log, &acked)
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "logs that do not hold all {} acknowledged records once and in order:\n{}",
        acked.len(),
        failures.join("\n")
    );
    eprintln!("{} records acknowledged in all", acked.len());
    Outcome {
        leader,
        epoch,
        follower,
        after,
    }
}

/// The first acknowledged record that `log` does not hold at its offset, and what the log
/// holds there, as a message.
fn first_misplaced(log: &[(i64, String)], acked: &[(i64, String)]) -> String {
    acked
        .iter()
        .find_map(|(offset, value)| {
            let at = log.iter().find(|(o, _)| o == offset);
            (at.map(|(_, v)| v) != Some(value))
                .then(|| format!("{value:?} acknowledged at {offset}, the log holds {at:?} there"))
        })
        .unwrap_or_else(|| "each at its offset, but not once and in order".into())
}

#[test]
fn a_follower_partitioned_away_and_healed_causes_no_election() {
    let outcome = partition_one_follower(&[]);
    for (i, seen) in outcome.after.iter().enumerate() {
        assert_eq!(
            *seen,
            (outcome.leader, outcome.epoch),
            "node {} after node {} was cut off and healed: (leader, epoch)",
            i + 1,
            outcome.follower
        );
    }
}

/// The same partition without pre-vote: the cut-off voter raises its epoch while alone, and on
/// its return that epoch ends the leader's. What the test above guards against, observed.
#[test]
fn without_pre_vote_the_same_partition_unseats_the_leader() {
    let outcome =
        partition_one_follower(&["quorum.prevote.enable=false", "quorum.lease.enable=false"]);
    let (_, epoch_after) = outcome.after[0];
    assert!(
        outcome.after.iter().all(|seen| seen.1 == epoch_after),
        "the voters disagree on the epoch: {:?}",
        outcome.after
    );
    assert!(
        epoch_after > outcome.epoch,
        "epoch {} before the partition of node {}, {epoch_after} after",
        outcome.epoch,
        outcome.follower
    );
}
