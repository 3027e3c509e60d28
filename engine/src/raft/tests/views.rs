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
