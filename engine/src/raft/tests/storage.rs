//! A log that cannot allocate its next segment (`Input::StorageFull`, docs/storage.md, "A full
//! disk"): appends refused with KAFKA_STORAGE_ERROR, a leader among several voters resigns, a
//! follower stops fetching, nobody full stands for election, votes are still answered, and all
//! of it undone when space returns.

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

fn full(h: &mut Harness, full: bool) -> Vec<Output> {
    h.step(Input::StorageFull { full })
}

fn append(h: &mut Harness, id: u64) -> Vec<Output> {
    h.append(id, 1, Acks::Quorum)
}

fn append_error(out: &[Output], id: u64) -> Option<ErrorCode> {
    appends_done(out).into_iter().find_map(|(done, result)| {
        (done == id).then_some(match result {
            AppendResult::Failed { error, .. } => error,
            AppendResult::Appended { .. } => ErrorCode::NONE,
        })
    })
}

fn campaigns(out: &[Output]) -> bool {
    sends(out)
        .iter()
        .any(|(_, _, r)| matches!(r, Request::Vote(_)))
}

fn fetches(out: &[Output]) -> usize {
    sends(out)
        .iter()
        .filter(|(_, _, r)| matches!(r, Request::FetchQuorumRecords(_)))
        .count()
}

#[test]
fn a_full_leader_among_voters_resigns_refuses_appends_and_stands_again_once_space_returns() {
    let mut h = Harness::leader(1, VOTERS, 3, log(0, &[]));
    let out = full(&mut h, true);
    assert_eq!(h.core.role(), Role::Resigned);
    assert!(
        sends(&out)
            .iter()
            .any(|(_, _, r)| matches!(r, Request::EndQuorumEpoch(_))),
        "the resignation is announced: {out:?}"
    );
    let out = append(&mut h, 7);
    assert_eq!(append_error(&out, 7), Some(ErrorCode::KAFKA_STORAGE_ERROR));
    // Many election timeouts: no candidacy, no pre-vote round.
    let out = h.run_until(h.now + 20 * config(1, VOTERS).election_timeout_ms);
    assert!(!campaigns(&out), "a full node stood for election: {out:?}");
    assert_eq!(h.core.role(), Role::Resigned);
    // A vote is still answered (granted: its log is as long as ours).
    let (_, out) = h.request(2, Harness::vote_request(2, 4, 3, 1));
    assert!(matches!(&responses(&out)[0].1, Response::Vote(v) if v.vote_granted));
    full(&mut h, false);
    let out = h.run_until(h.now + 20 * config(1, VOTERS).election_timeout_ms);
    assert!(
        campaigns(&out),
        "no election once space returned: {:?}",
        h.core.role()
    );
}

#[test]
fn a_full_lone_voter_keeps_leading_refuses_appends_then_accepts_them_again() {
    let mut h = Harness::leader(1, &[1], 1, log(0, &[]));
    h.durable_all();
    full(&mut h, true);
    assert_eq!(h.core.role(), Role::Leader, "nobody else could lead");
    let out = append(&mut h, 1);
    assert_eq!(append_error(&out, 1), Some(ErrorCode::KAFKA_STORAGE_ERROR));
    assert!(log_ops(&out).is_empty(), "nothing reaches the log");
    h.run_until(h.now + 10_000);
    assert_eq!(h.core.role(), Role::Leader);
    full(&mut h, false);
    append(&mut h, 2);
    let out = h.durable_all();
    assert_eq!(append_error(&out, 2), Some(ErrorCode::NONE));
}

#[test]
fn a_full_follower_stops_fetching_never_campaigns_and_fetches_again_once_space_returns() {
    let (mut h, first) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    full(&mut h, true);
    // The fetch in flight is answered; no other goes out.
    let out = h.respond(
        2,
        first,
        Response::FetchQuorumRecords(Harness::fetch_response(2, 2, vec![], 0)),
    );
    assert_eq!(fetches(&out), 0, "a full follower fetched: {out:?}");
    let out = h.run_until(h.now + 20 * config(1, VOTERS).fetch_timeout_ms);
    assert_eq!(fetches(&out), 0, "a full follower fetched: {out:?}");
    assert!(!campaigns(&out), "a full follower stood for election");
    assert_eq!(h.core.role(), Role::Follower);
    // The leader's EndQuorumEpoch names it first: it still does not stand.
    let (_, out) = h.request(2, Harness::end_request(2, 2, &[1, 3]));
    assert!(!campaigns(&out));
    assert_eq!(h.core.role(), Role::Follower);
    let out = full(&mut h, false);
    assert_eq!(fetches(&out), 1, "fetching resumes at once: {out:?}");
}
