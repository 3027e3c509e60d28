//! BeginQuorumEpoch / EndQuorumEpoch and graceful shutdown (docs/testing.md, "Behaviours the
//! scenario tests cover").

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

/// Node 1 elected in `epoch` with node 2's vote; returns the outputs of the winning step.
pub(crate) fn elect(epoch: Epoch) -> (Harness, Vec<Output>) {
    elect_among(VOTERS, epoch, log(0, &[]))
}

/// Node 1, a candidate of `epoch` (it voted for itself) among `voters` with `log`, elected on
/// voter 2's vote.
pub(crate) fn elect_among(
    voters: &[NodeId],
    epoch: Epoch,
    log: LogSnapshot,
) -> (Harness, Vec<Output>) {
    let mut h = Harness::new(config(1, voters), Some(stored(epoch, -1, 1, voters)), log);
    let votes = sends(&h.tick());
    let out = h.respond(
        2,
        votes[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, epoch, true),
    );
    assert_eq!(h.core.role(), Role::Leader);
    (h, out)
}

/// Node 1 elected by [`elect_among`] `voters` in epoch 2 over a log of epoch 1 ending at 3,
/// everything durable on it (its LeaderChange record at 3 included).
pub(crate) fn durable_leader_of_epoch_2(voters: &[NodeId]) -> Harness {
    let (mut h, _) = elect_among(voters, 2, log(3, &[(1, 0)]));
    h.durable_all();
    h
}

fn begin_sends(out: &[Output]) -> Vec<(NodeId, Correlation)> {
    sends_of(out, |r| matches!(r, Request::BeginQuorumEpoch(_)))
}

/// The EndQuorumEpochs in `out`: (to, correlation).
fn end_correlations(out: &[Output]) -> Vec<(NodeId, Correlation)> {
    sends_of(out, |r| matches!(r, Request::EndQuorumEpoch(_)))
}

fn end_sends(out: &[Output]) -> Vec<(NodeId, EndQuorumEpochRequest)> {
    sends(out)
        .into_iter()
        .filter_map(|s| match s.2 {
            Request::EndQuorumEpoch(r) => Some((s.0, r)),
            _ => None,
        })
        .collect()
}

fn begin_error(out: &[Output]) -> ErrorCode {
    match &responses(out)[0].1 {
        Response::BeginQuorumEpoch(r) => r.error,
        other => panic!("{other:?}"),
    }
}

fn end_error(out: &[Output]) -> ErrorCode {
    match &responses(out)[0].1 {
        Response::EndQuorumEpoch(r) => r.error,
        other => panic!("{other:?}"),
    }
}

#[test]
fn handle_begin_quorum_request() {
    let mut h = Harness::unattached(1, log(0, &[]));
    let (_, out) = h.request(2, Harness::begin_request(2, 2));
    let p = position(&out, is_persist).unwrap();
    let r = position(&out, is_respond).unwrap();
    assert!(p < r);
    assert_eq!(
        (persisted(&out)[0].epoch, persisted(&out)[0].leader_id),
        (2, 2)
    );
    assert_eq!(begin_error(&out), ErrorCode::NONE);
    let fetches: Vec<_> = sends(&out).into_iter().filter(|s| s.0 == 2).collect();
    assert_eq!(fetches.len(), 1, "starts fetching from the new leader");
    assert_eq!(fetch_req(&fetches[0].2).leader_epoch, 2);
}

#[test]
fn handle_begin_quorum_response() {
    let (mut h, out) = elect(2);
    let begins = begin_sends(&out);
    assert_eq!(begins.iter().map(|b| b.0).collect::<Vec<_>>(), vec![2, 3]);
    h.respond(
        2,
        begins[0].1,
        Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
            error: ErrorCode::NONE,
            leader_id: 1,
            leader_epoch: 2,
        }),
    );
    // Voter 3 never answers: only it gets BeginQuorumEpoch again (voter 2 fetches within the
    // fetch timeout, so it is not silent: see the test of a silent voter below).
    let mut out = h.run_until(1_000);
    h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    out.extend(h.run_until(2_200));
    let again = begin_sends(&out);
    assert_eq!(again.iter().map(|b| b.0).collect::<Vec<_>>(), vec![3]);
}

#[test]
fn fetch_should_be_treated_as_leader_endorsement() {
    let (mut h, _) = elect(2);
    let (_, out) = h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    assert_eq!(fetch_of(&responses(&out)[0].1).error, ErrorCode::NONE);
    let mut out = h.run_until(1_000);
    h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    out.extend(h.run_until(2_200));
    let again = begin_sends(&out);
    assert_eq!(
        again.iter().map(|b| b.0).collect::<Vec<_>>(),
        vec![3],
        "no resend to 2"
    );
}

#[test]
fn begin_quorum_epoch_with_different_leader_for_known_epoch_is_rejected() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let (_, out) = h.request(3, Harness::begin_request(3, 2));
    assert_eq!(begin_error(&out), ErrorCode::INVALID_QUORUM_STATE);
    assert!(persisted(&out).is_empty());
    assert_eq!(h.core.leader_id(), Some(2));
    // The same leader again is a no-op success.
    let (_, out) = h.request(2, Harness::begin_request(2, 2));
    assert_eq!(begin_error(&out), ErrorCode::NONE);
    assert!(persisted(&out).is_empty());
}

#[test]
fn handle_end_quorum_request() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let (_, out) = h.request(2, Harness::end_request(2, 2, &[1, 3]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 3));
    assert_eq!(end_error(&out), ErrorCode::NONE);
    let p = position(&out, is_persist).unwrap();
    assert!(p < position(&out, is_respond).unwrap());
}

#[test]
fn handle_end_quorum_request_with_lower_priority_to_become_leader() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let (_, out) = h.request(2, Harness::end_request(2, 2, &[3, 1]));
    assert_eq!(end_error(&out), ErrorCode::NONE);
    assert_eq!(h.core.role(), Role::Follower);
    // Position 1 of 2 successors: min(1000, (1000 >> 1) << 0) = 500 ms.
    stands_at(&mut h, 500, "second of two");
}

#[test]
fn end_quorum_ignored_if_already_candidate() {
    let mut h = Harness::restarted_and_ticked(2, -1, 1);
    let (_, out) = h.request(2, Harness::end_request(2, 2, &[1, 3]));
    assert_eq!(end_error(&out), ErrorCode::NONE);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 2));
    assert!(persisted(&out).is_empty());
}

#[test]
fn end_quorum_ignored_if_already_leader() {
    let (mut h, _) = elect(2);
    let (_, out) = h.request(2, Harness::end_request(2, 2, &[1, 3]));
    assert_eq!(end_error(&out), ErrorCode::NONE);
    assert_eq!(h.core.role(), Role::Leader);
    let (_, out) = h.request(2, Harness::end_request(2, 1, &[1, 3]));
    assert_eq!(end_error(&out), ErrorCode::FENCED_LEADER_EPOCH);
}

#[test]
fn end_quorum_starts_new_election_immediately_if_follower_unattached() {
    let mut h = Harness::unattached(2, log(0, &[]));
    h.request(2, Harness::end_request(2, 2, &[1, 3]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 3));
}

#[test]
fn end_quorum_starts_new_election_immediately_if_received_from_voted_candidate() {
    let mut h = Harness::restarted_and_ticked(2, -1, 2);
    h.request(2, Harness::end_request(2, 2, &[1, 3]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 3));
}

#[test]
fn end_quorum_epoch_not_listing_receiver_is_inconsistent() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let (_, out) = h.request(2, Harness::end_request(2, 2, &[3]));
    assert_eq!(end_error(&out), ErrorCode::INCONSISTENT_VOTER_SET);
    assert_eq!(h.core.role(), Role::Follower);
}

#[test]
fn end_quorum_epoch_sent_based_on_fetch_offset() {
    let (mut h, _) = elect(2);
    h.durable_all();
    // Voter 3 has the LeaderChange record durable, voter 2 nothing yet.
    h.request(3, Harness::fetch_request(3, 2, 1, 2, 1));
    h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    let out = h.step(Input::Shutdown);
    assert_eq!(h.core.role(), Role::Resigned);
    let ends = end_sends(&out);
    assert_eq!(ends.iter().map(|e| e.0).collect::<Vec<_>>(), vec![3, 2]);
    for (_, r) in &ends {
        assert_eq!(r.preferred_successors, vec![3, 2]);
        assert_eq!((r.leader_id, r.leader_epoch), (1, 2));
    }
}

#[test]
fn leader_graceful_shutdown() {
    let (mut h, _) = elect(2);
    let out = h.step(Input::Shutdown);
    assert!(!out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
    assert_eq!(end_sends(&out).len(), 2);
    let (_, out) = h.request(2, Harness::begin_request(2, 3));
    assert!(out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
}

#[test]
fn leader_graceful_shutdown_timeout() {
    let (mut h, _) = elect(2);
    h.step(Input::Shutdown);
    let out = h.run_until(4_999);
    assert!(!out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
    let out = h.run_until(5_000);
    assert!(out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
    assert_eq!(h.core.next_deadline(), None);
}

#[test]
fn follower_graceful_shutdown() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let out = h.step(Input::Shutdown);
    assert!(out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
}

#[test]
fn graceful_shutdown_single_member_quorum() {
    let mut h = Harness::new(config(1, &[1]), None, log(0, &[]));
    h.tick();
    assert_eq!(h.core.role(), Role::Leader);
    let out = h.step(Input::Shutdown);
    assert!(out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
}

#[test]
fn reject_votes_from_same_epoch_after_resigning_and_grant_higher() {
    let mut h = Harness::restarted_and_ticked(5, 1, -1);
    assert_eq!(h.core.role(), Role::Resigned);
    let (vote, out) = h.ask_vote(2, 5, 0, 0);
    assert!(!vote.vote_granted);
    assert!(persisted(&out).is_empty());
    let (vote, _) = h.ask_vote(2, 6, 0, 0);
    assert!(vote.vote_granted);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Voted, 6));
}

// ----- behaviours mutation testing found unpinned (docs/testing.md, "Mutation testing") -----

const FIVE: &[NodeId] = &[1, 2, 3, 4, 5];

/// An EndQuorumEpoch from `replica` naming `leader` of `epoch`.
fn end_from(replica: NodeId, leader: NodeId, epoch: Epoch, successors: &[NodeId]) -> Request {
    Request::EndQuorumEpoch(EndQuorumEpochRequest {
        cluster_id: CLUSTER.into(),
        replica_id: replica,
        leader_id: leader,
        leader_epoch: epoch,
        preferred_successors: successors.to_vec(),
    })
}

/// Caught: `retry_while` emptied or its `==` turned into `!=`, and
/// `handle_announcement_response` emptied. A voter that answers BeginQuorumEpoch with a
/// retriable error is asked again after the backoff, while the leader still leads.
#[test]
fn a_begin_quorum_epoch_answered_with_a_retriable_error_is_sent_again() {
    let (mut h, out) = elect(2);
    let is_begin = |r: &Request| matches!(r, Request::BeginQuorumEpoch(_));
    let again = announced_again_after_a_retriable_error(&mut h, &out, is_begin);
    assert_eq!(again, vec![2]);
}

/// Leader 1 of epoch 2 announced itself or its resignation to voters 2 and 3 in `out` (the
/// requests `is_kind` picks): 2 answers with a retriable error, 3 with none. Whom it announces
/// to again within the next second.
fn announced_again_after_a_retriable_error(
    h: &mut Harness,
    out: &[Output],
    is_kind: fn(&Request) -> bool,
) -> Vec<NodeId> {
    let sent: Vec<_> = sends(out).into_iter().filter(|s| is_kind(&s.2)).collect();
    assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), vec![2, 3]);
    let errors = [ErrorCode::BROKER_NOT_AVAILABLE, ErrorCode::NONE];
    for ((to, correlation, announcement), error) in sent.into_iter().zip(errors) {
        h.respond(to, correlation, announcement_answer(&announcement, error));
    }
    let out = h.run_until(h.now + 1_000);
    recipients(&out, is_kind)
}

/// A voter's answer to leader 1's `announcement` of epoch 2, with `error`.
fn announcement_answer(announcement: &Request, error: ErrorCode) -> Response {
    let (leader_id, leader_epoch) = (1, 2);
    match announcement {
        Request::BeginQuorumEpoch(_) => Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
            error,
            leader_id,
            leader_epoch,
        }),
        Request::EndQuorumEpoch(_) => Response::EndQuorumEpoch(EndQuorumEpochResponse {
            error,
            leader_id,
            leader_epoch,
        }),
        other => panic!("not an announcement: {other:?}"),
    }
}

/// A follower of epoch 2 that an EndQuorumEpoch named a successor (`place` in its line, for
/// the failure message): it still follows until `delay` ms, and stands for epoch 3 then.
fn stands_at(h: &mut Harness, delay: TimeMs, place: &str) {
    h.run_until(delay - 1);
    assert_eq!(h.core.role(), Role::Follower, "{place} before {delay} ms");
    h.run_until(delay);
    assert_eq!(
        (h.core.role(), h.core.epoch()),
        (Role::Candidate, 3),
        "{place} at {delay} ms"
    );
}

/// Caught: `base << (p - 1)` turned into `>>` in `successor_delay`. Of four successors the
/// second waits base = jitter max >> 3 = 125 ms, the third base << 1 = 250 ms.
#[test]
fn a_later_successor_waits_twice_as_long_as_the_one_before_it() {
    for (successors, delay) in [(&[3, 1, 4, 5][..], 125), (&[3, 4, 1, 5][..], 250)] {
        let (mut h, _) = Harness::follower(1, FIVE, 2, 2, log(0, &[]));
        let (_, out) = h.request(2, Harness::end_request(2, 2, successors));
        assert_eq!(end_error(&out), ErrorCode::NONE);
        stands_at(&mut h, delay, &format!("{successors:?}"));
    }
}

/// Caught: `req.leader_epoch > epoch` turned into `<`, and each part of the leader test of a
/// newer epoch's EndQuorumEpoch (`>= 0`, `!= me`, the `&&`s). A resigning voter of a newer
/// epoch is followed in that epoch; a leader id that is -1, this node, or no voter is not.
#[test]
fn an_end_quorum_epoch_of_a_newer_epoch_moves_to_it_following_only_a_plausible_leader() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let (_, out) = h.request(3, end_from(3, 3, 4, &[2, 1]));
    assert_eq!(end_error(&out), ErrorCode::NONE);
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.leader_id()),
        (Role::Follower, 4, Some(3)),
        "follows the resigning leader of epoch 4 and waits its turn"
    );
    for leader in [-1, 1, 9] {
        let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
        let (_, out) = h.request(3, end_from(3, leader, 4, &[2, 1]));
        assert_eq!(end_error(&out), ErrorCode::NONE, "leader {leader}");
        assert_eq!(
            (h.core.role(), h.core.epoch(), h.core.leader_id()),
            (Role::Unattached, 4, None),
            "leader {leader} is not followed"
        );
    }
}

/// Caught: both `&&`s, `==` and `!=` of the Prospective arm with a kept leader. A follower
/// whose fetch timer ran out (now in a pre-vote round, still knowing its leader) stands at
/// once when that leader resigns, and ignores another voter's EndQuorumEpoch.
#[test]
fn a_prospective_that_kept_its_leader_answers_only_that_leaders_end_quorum_epoch() {
    let prospective = || {
        let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
        h.run_until(2_000);
        assert_eq!(
            (h.core.role(), h.core.leader_id()),
            (Role::Prospective, Some(2))
        );
        h
    };
    let mut h = prospective();
    h.request(3, end_from(3, 3, 2, &[1, 2]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 2));
    let mut h = prospective();
    h.request(2, Harness::end_request(2, 2, &[1, 3]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 3));
}

/// Caught: the same for the Prospective arm with a kept vote. A voter whose election timer ran
/// out after it voted stands at once when the one it voted for gives up, and ignores another.
#[test]
fn a_prospective_that_kept_its_vote_answers_only_its_candidates_end_quorum_epoch() {
    let prospective = || {
        let mut h = Harness::restarted_and_ticked(2, -1, 3);
        assert_eq!(h.core.role(), Role::Voted);
        h.run_until(2_000);
        assert_eq!(h.core.role(), Role::Prospective);
        h
    };
    let mut h = prospective();
    h.request(2, end_from(2, 2, 2, &[1, 3]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 2));
    let mut h = prospective();
    h.request(3, end_from(3, 3, 2, &[1, 2]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 3));
}

/// Caught: `is_voter && !contains` turned into `||` in `voter_successors`. Names that are not
/// voters, and repeats, take no place in the line: node 1, named after two strangers, is first
/// among the voters and stands at once; named after a voter three times, it is second.
#[test]
fn successors_that_are_not_voters_or_repeat_take_no_place_in_line() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    h.request(2, Harness::end_request(2, 2, &[9, 7, 1, 3]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 3));
    let (mut h, _) = Harness::follower(1, FIVE, 2, 2, log(0, &[]));
    h.request(2, Harness::end_request(2, 2, &[3, 3, 3, 1, 4]));
    // Second of three voters (3, 1, 4): 1000 >> 2 = 250 ms (fourth of five would be 248 ms).
    stands_at(&mut h, 250, "second of three voters");
}

/// Caught: `now + progress_timeout` turned into `now * progress_timeout` in `enter_leader`. A
/// leader elected at 1 s that hears from no voter resigns one progress timeout (3 s) later.
#[test]
fn a_leader_elected_late_checks_its_quorum_a_progress_timeout_later() {
    let mut h = Harness::restarted(2, -1, 1);
    h.now = 1_000;
    let mut h = h.elected(2);
    h.run_until(3_999);
    assert_eq!(h.core.role(), Role::Leader);
    h.run_until(4_000);
    assert_eq!(h.core.role(), Role::Resigned);
}

/// Caught: the `Role::Resigned => {}` arm of `on_shutdown` deleted. A node that had already
/// resigned when asked to shut down waits for the next leader (or the shutdown timeout) like
/// a leader that resigns then.
#[test]
fn a_resigned_node_asked_to_shut_down_waits_for_the_next_leader() {
    let mut h = Harness::restarted_and_ticked(5, 1, -1);
    assert_eq!(h.core.role(), Role::Resigned);
    let out = h.step(Input::Shutdown);
    assert!(!out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
    let (_, out) = h.request(2, Harness::begin_request(2, 6));
    assert!(out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
}

/// Caught: the `!` deleted before `acked.contains` in `on_request_failure` and in `run_retry`.
/// A resigned leader's EndQuorumEpoch that failed is sent again after the backoff to a voter
/// that has not acknowledged it.
#[test]
fn a_failed_end_quorum_epoch_is_sent_again_to_a_voter_that_has_not_acknowledged() {
    let (mut h, _) = elect(2);
    let ends = end_correlations(&h.step(Input::Shutdown));
    assert_eq!(ends.len(), 2);
    let (to, correlation) = ends[0];
    h.step(Input::RequestFailed { to, correlation });
    let out = h.run_until(h.now + 1_000);
    let again: Vec<NodeId> = end_sends(&out).into_iter().map(|e| e.0).collect();
    assert_eq!(again, vec![to]);
}

/// Caught: the EndQuorumEpoch arm of `on_response` deleted (its answers would be dropped). A
/// resigned leader's EndQuorumEpoch answered with a retriable error is sent again after the
/// backoff; one answered with no error is not.
#[test]
fn an_end_quorum_epoch_answered_with_a_retriable_error_is_sent_again() {
    let (mut h, _) = elect(2);
    let out = h.step(Input::Shutdown);
    let is_end = |r: &Request| matches!(r, Request::EndQuorumEpoch(_));
    let again = announced_again_after_a_retriable_error(&mut h, &out, is_end);
    assert_eq!(again, vec![2]);
}

/// A voter that endorsed this leader and then stood in a later epoch that nobody else learned
/// (its Votes lost) is told of this leader again once it has been silent for a fetch timeout;
/// its answer names the later epoch, and the leader steps down to it, so the next election
/// takes the voter along (docs/protocol.md section 4, "A silent voter").
#[test]
fn a_voter_silent_for_a_fetch_timeout_is_announced_to_again_and_a_later_epoch_ends_this_one() {
    let (mut h, _) = elect(2);
    // Both endorse it by fetching; voter 2 goes on fetching, voter 3 falls silent.
    h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    h.request(3, Harness::fetch_request(3, 2, 0, 0, 0));
    let timeout = config(1, VOTERS).fetch_timeout_ms;
    let mut again = Vec::new();
    for t in (100..=timeout + 100).step_by(100) {
        again.extend(begin_sends(&h.run_until(t)));
        h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    }
    assert_eq!(
        again.iter().map(|b| b.0).collect::<Vec<_>>(),
        vec![3],
        "only the silent voter, once"
    );
    assert_eq!(h.core.role(), Role::Leader);
    // Voter 3 answers from epoch 3: this leadership is over.
    h.respond(
        3,
        again[0].1,
        Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
            error: ErrorCode::FENCED_LEADER_EPOCH,
            leader_id: -1,
            leader_epoch: 3,
        }),
    );
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 3));
}

/// The leader wakes when an endorsing voter falls silent, not only at its other deadlines
/// (check-quorum's is a progress timeout away): caught, the mutant of `next_silence` that
/// returns None.
#[test]
fn the_leader_asks_for_a_tick_when_a_voter_falls_silent() {
    let (mut h, out) = elect(2);
    for (to, correlation) in begin_sends(&out) {
        h.respond(
            to,
            correlation,
            Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
                error: ErrorCode::NONE,
                leader_id: 1,
                leader_epoch: 2,
            }),
        );
    }
    h.run_until(1_500);
    h.request(2, Harness::fetch_request(2, 2, 0, 0, 0));
    h.request(3, Harness::fetch_request(3, 2, 0, 0, 0));
    let c = config(1, VOTERS);
    // Past the first check-quorum deadline (a progress timeout after the election), which
    // re-arms a progress timeout after the fetches: the silence comes first.
    h.run_until(c.progress_timeout_ms + 100);
    assert!(
        c.fetch_timeout_ms < c.progress_timeout_ms,
        "the deadlines differ"
    );
    assert_eq!(h.core.next_deadline(), Some(1_500 + c.fetch_timeout_ms));
}

/// An EndQuorumEpoch of a newer epoch without a leader moves no observer (it cannot vote in
/// that epoch, and one that never gets a leader would leave it waiting for ever: docs/protocol.md
/// section 8); a voter takes the epoch up.
#[test]
fn an_end_quorum_epoch_without_a_leader_moves_no_observer() {
    let (mut h, _) = Harness::follower(4, VOTERS, 2, 2, log(0, &[]));
    let (_, out) = h.request(3, end_from(3, -1, 9, &[1, 2, 3]));
    assert!(persisted(&out).is_empty(), "nothing stored: {out:?}");
    assert_eq!(
        (h.core.role(), h.core.leader_id(), h.core.epoch()),
        (Role::Follower, Some(2), 2)
    );
    let (mut v, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    v.request(3, end_from(3, -1, 9, &[2, 3]));
    assert_eq!(v.core.epoch(), 9, "a voter may vote in it");
}
