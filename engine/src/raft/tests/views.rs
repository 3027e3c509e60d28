//! The core's read-only views the node's metrics and records rest on, pinned by mutation
//! testing (docs/testing.md, "Mutation testing").

use super::harness::*;
use super::quorum_epoch::elect;
use crate::raft::*;

/// Caught: `node_id` returning 0.
#[test]
fn the_core_names_its_own_node() {
    let h = Harness::restarted(1, -1, -1);
    assert_eq!(h.core.node_id(), 1);
}

/// Caught: `tail_cache_bytes` returning 0 or 1: it counts the bytes of the batches the leader
/// keeps in memory for its followers.
#[test]
fn the_tail_cache_counts_the_bytes_it_holds() {
    let (h, out) = elect(2);
    let appended: usize = out
        .iter()
        .filter_map(|o| match o {
            Output::Log(op) => match &op.kind {
                LogOpKind::Append(batches) => {
                    Some(batches.iter().map(|b| b.bytes.len()).sum::<usize>())
                }
                _ => None,
            },
            _ => None,
        })
        .sum();
    assert!(appended > 1, "the LeaderChange record");
    assert_eq!(h.core.tail_cache_bytes(), appended);
}

/// Caught: `replica_lags` returning true or false whatever the role: a leader reports each
/// other voter's lag, anyone else nothing.
#[test]
fn only_a_leader_reports_its_voters_lag() {
    let (mut h, _) = elect(2);
    h.durable_all();
    let end = h.core.log_end_offset();
    h.request(2, Harness::fetch_request(2, 2, end, 2, end));
    let mut lags = Vec::new();
    assert!(h.core.replica_lags(&mut lags));
    let by_id: Vec<(NodeId, i64, bool)> = lags
        .iter()
        .map(|l| (l.replica_id, l.records, l.ms_since_caught_up.is_some()))
        .collect();
    assert_eq!(by_id, vec![(2, 0, true), (3, end, false)]);
    let (follower, _) = Harness::follower(1, &[1, 2, 3], 2, 2, log(0, &[]));
    let mut lags = Vec::new();
    assert!(!follower.core.replica_lags(&mut lags));
    assert!(lags.is_empty());
}

/// Caught: `wall_clock_ms` returning a constant. A LeaderChange record carries the wall-clock
/// time of the election, the boot time plus the core's time since it was made.
#[test]
fn a_leader_change_record_carries_the_wall_clock_time_of_the_election() {
    let boot = 1_700_000_000_000;
    let mut c = config(1, &[1]);
    c.boot_timestamp = boot;
    let mut h = Harness::new(c, None, log(0, &[]));
    h.now = 50;
    let out = h.tick();
    assert_eq!(h.core.role(), Role::Leader);
    let batch = out
        .iter()
        .find_map(|o| match o {
            Output::Log(op) => match &op.kind {
                LogOpKind::Append(batches) => Some(batches[0].clone()),
                _ => None,
            },
            _ => None,
        })
        .expect("the LeaderChange record");
    let view = crate::record::BatchView::parse(batch.bytes).unwrap();
    assert_eq!(view.max_timestamp(), boot + 50);
}

/// Caught: `MAX_PEER_EPOCH - epoch` turned into `+` or `/` in the high-epoch alert: it names
/// how many elections are left.
#[test]
fn the_high_epoch_alert_counts_the_elections_left() {
    use crate::raft::admission::{EPOCH_WARNING, MAX_PEER_EPOCH};
    let epoch = EPOCH_WARNING + 5;
    let mut h = Harness::restarted(epoch, -1, -1);
    let out = h.tick();
    let alerts = alerts(&out);
    let left = MAX_PEER_EPOCH - epoch;
    assert_eq!(alerts.len(), 1, "{out:?}");
    assert!(
        alerts[0].contains(&format!("only {left} elections are left")),
        "{}",
        alerts[0]
    );
}

/// Caught: the `!` deleted before `voter_set_known()` in `observer_without_leader`. A voter
/// that knows its set and no leader stands for election; it does not look for a leader with
/// FindQuorum as an observer does.
#[test]
fn a_voter_without_a_leader_does_not_look_for_one() {
    let mut h = Harness::restarted(1, -1, -1);
    let out = h.run_until(5_000);
    assert!(
        !sends(&out)
            .iter()
            .any(|(_, _, r)| matches!(r, Request::FindQuorum(_))),
        "{out:?}"
    );
}

/// A prospective keeps fetching from its leader through its pre-vote rounds, and an answer
/// ends the round. (The `f.kind == RequestKind::PreVote` of `start_pre_vote_round` turned into
/// `!=` passes it: the forgotten fetch is sent again in the same step, so the mutant only adds
/// a request; docs/testing.md lists it as equivalent.)
#[test]
fn a_new_pre_vote_round_keeps_the_fetch_to_the_leader() {
    let (mut h, first) = Harness::follower(1, &[1, 2, 3], 2, 2, log(0, &[]));
    let mut fetch = first;
    let mut rounds = 0;
    for _ in 0..200 {
        let Some(due) = h.core.next_deadline() else {
            break;
        };
        h.now = h.now.max(due);
        let out = h.tick();
        for (to, correlation, request) in sends(&out) {
            match request {
                Request::FetchQuorumRecords(_) if to == 2 => fetch = correlation,
                Request::Vote(v) if v.pre_vote && to == 2 => rounds += 1,
                _ => {}
            }
        }
        if rounds == 2 {
            break;
        }
    }
    assert_eq!((rounds, h.core.role()), (2, Role::Prospective));
    h.respond(
        2,
        fetch,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, Vec::new(), -1)),
    );
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Follower, Some(2))
    );
}
