//! The follower's back-off after an error answer while a retry of another kind is pending
//! (docs/testing.md, "Mutation testing"): a voter that advertises itself and misses a voter's
//! endpoint keeps a FindQuorum retry scheduled next to its fetching, and the fetch's back-off
//! must not mistake that retry for its own.

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

/// The fetches in `out`: (to, fetch offset).
fn fetches(out: &[Output]) -> Vec<(NodeId, Offset)> {
    sends(out)
        .into_iter()
        .filter(|s| matches!(s.2, Request::FetchQuorumRecords(_)))
        .map(|s| (s.0, fetch_req(&s.2).fetch_offset))
        .collect()
}

/// Voter 1, following leader 2 in epoch 2, advertising itself; it knows voter 2's endpoint
/// but not voter 3's, so it asks for the quorum alongside fetching.
fn follower_missing_an_endpoint() -> Harness {
    let mut c = config(1, VOTERS);
    c.host = "127.0.0.1".into();
    c.port = 9091;
    c.boot_timestamp = 100;
    c.voter_endpoints = vec![VoterEndpoint {
        voter_id: 2,
        boot_timestamp: 0,
        host: "127.0.0.1".into(),
        port: 9092,
    }];
    Harness::new(c, Some(stored(2, 2, -1, VOTERS)), log(0, &[]))
}

/// Caught: `r == Retry::Fetch` in `retry_fetch_later` turned into `!=` (engine/src/raft/fetch.rs):
/// with a FindQuorum retry pending, "a retry of another kind is pending" would pass for "a fetch
/// retry is pending", no back-off would be scheduled and the follower would fetch again at once
/// after every error answer.
#[test]
fn an_error_answer_backs_off_even_with_a_find_quorum_retry_pending() {
    let mut h = follower_missing_an_endpoint();
    let out = h.tick();
    let fetch = sends(&out)
        .into_iter()
        .find(|s| matches!(s.2, Request::FetchQuorumRecords(_)))
        .expect("a follower fetches at once");
    let finds = find_sends(&out);
    assert_eq!(finds.len(), 1, "voter 3's endpoint is unknown: {out:?}");
    // The FindQuorum fails: its retry is scheduled after a back-off.
    let out = h.step(Input::RequestFailed {
        to: finds[0].0,
        correlation: finds[0].1,
    });
    assert!(
        find_sends(&out).is_empty() && fetches(&out).is_empty(),
        "{out:?}"
    );
    // The leader answers the fetch with an error: back off, do not fetch again at once.
    let r = Harness::fetch_error_response(2, 2, -1, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    let out = h.respond(fetch.0, fetch.1, Response::FetchQuorumRecords(r));
    assert!(fetches(&out).is_empty(), "not at once: {out:?}");
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Follower, Some(2))
    );
    // After the back-off, exactly one fetch, from where the log ends.
    let backoff_max = h.core.config.retry_backoff_max_ms;
    let out = h.run_until(h.now + backoff_max);
    assert_eq!(fetches(&out), vec![(2, 0)], "{out:?}");
}
