//! Pre-vote (docs/protocol.md, "Pre-vote"): the prospective's side (no epoch raised, nothing
//! persisted, a majority of pre-votes before a candidacy, back to its leader when it hears
//! from it) and the voter's (the grant rule, nothing changed by answering).

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

/// The Vote requests in `out` whose PreVote is `pre_vote`: (to, correlation, request).
fn votes(out: &[Output], pre_vote: bool) -> Vec<(NodeId, Correlation, VoteRequest)> {
    sends(out)
        .into_iter()
        .filter_map(|(to, c, r)| match r {
            Request::Vote(v) if v.pre_vote == pre_vote => Some((to, c, v)),
            _ => None,
        })
        .collect()
}

/// The pre-votes in `out`: (to, correlation, request).
fn pre_votes(out: &[Output]) -> Vec<(NodeId, Correlation, VoteRequest)> {
    votes(out, true)
}

/// The real votes in `out`.
fn real_votes(out: &[Output]) -> Vec<(NodeId, Correlation, VoteRequest)> {
    votes(out, false)
}

fn granted(epoch: Epoch) -> Response {
    Harness::vote_response(ErrorCode::NONE, -1, epoch, true)
}

fn refused(leader: NodeId, epoch: Epoch) -> Response {
    Harness::vote_response(ErrorCode::NONE, leader, epoch, false)
}

/// Node 1 following node 2 in epoch 3, its fetch timeout run out: prospective. Returns the
/// pre-votes it sent and everything it emitted meanwhile.
fn prospective_follower() -> (
    Harness,
    Vec<(NodeId, Correlation, VoteRequest)>,
    Vec<Output>,
) {
    let (mut h, _) = Harness::follower(1, VOTERS, 3, 2, log(5, &[(3, 0)]));
    let out = h.run_until(2_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 3));
    let asked = pre_votes(&out);
    (h, asked, out)
}

/// Node 1 of five voters following node 2 in epoch 3, its fetch timeout run out: prospective.
/// Returns the pre-votes it sent, one to each other voter.
fn prospective_among_five() -> (Harness, Vec<(NodeId, Correlation, VoteRequest)>) {
    const FIVE: &[NodeId] = &[1, 2, 3, 4, 5];
    let (mut h, _) = Harness::follower(1, FIVE, 3, 2, log(0, &[]));
    let out = h.run_until(2_000);
    let asked = pre_votes(&out);
    assert_eq!(asked.len(), 4);
    (h, asked)
}

/// A voter answering pre-votes: its view before and after must be the same.
fn view(h: &Harness) -> (Role, Epoch, Option<NodeId>, Option<NodeId>, ElectionState) {
    (
        h.core.role(),
        h.core.epoch(),
        h.core.leader_id(),
        h.core.voted_id(),
        h.core.election_state(),
    )
}

/// Asks `h` for a pre-vote and checks that answering changed nothing: no output but the
/// answer, the same role, epoch, leader, vote, stored state and timers. Returns the answer.
fn ask(h: &mut Harness, request: Request) -> VoteResponse {
    let (before, deadline) = (view(h), h.core.next_deadline());
    let Request::Vote(VoteRequest { candidate_id, .. }) = request else {
        panic!("a Vote: {request:?}");
    };
    let (id, out) = h.request(candidate_id, request);
    assert_eq!(out.len(), 1, "only the answer: {out:?}");
    let answers = responses(&out);
    assert_eq!(answers[0].0, id);
    assert_eq!(view(h), before, "a pre-vote changed the voter");
    assert_eq!(h.core.next_deadline(), deadline, "a pre-vote moved a timer");
    vote_of(&answers[0].1).clone()
}

// ----- the prospective -----

#[test]
fn fetch_timeout_starts_a_pre_vote_round_in_the_same_epoch() {
    let (h, asked, out) = prospective_follower();
    assert!(persisted(&out).is_empty(), "nothing persisted: {out:?}");
    assert_eq!(h.core.election_state(), stored(3, 2, -1, VOTERS));
    // It keeps its leader (and refuses votes and other leaders for the epoch).
    assert_eq!(h.core.leader_id(), Some(2));
    let to: Vec<NodeId> = asked.iter().map(|a| a.0).collect();
    assert_eq!(to, vec![2, 3]);
    for (_, _, v) in &asked {
        assert_eq!(
            (
                v.candidate_epoch,
                v.candidate_id,
                v.last_epoch,
                v.last_epoch_end_offset
            ),
            (4, 1, 3, 5),
            "the epoch a candidacy would take, and its log"
        );
    }
    assert!(real_votes(&out).is_empty());
    assert!(out.iter().any(|o| matches!(
        o,
        Output::RoleChanged {
            role: Role::Prospective,
            epoch: 3,
            ..
        }
    )));
}

#[test]
fn a_majority_of_pre_votes_leads_to_a_real_candidacy() {
    let (mut h, asked, _) = prospective_follower();
    let out = h.respond(3, asked[1].1, granted(3));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 4));
    let p = position(&out, is_persist).expect("the candidacy is persisted");
    assert_eq!(
        (persisted(&out)[0].epoch, persisted(&out)[0].voted_id),
        (4, 1)
    );
    let votes = real_votes(&out);
    assert_eq!(votes.iter().map(|v| v.0).collect::<Vec<_>>(), vec![2, 3]);
    assert!(votes
        .iter()
        .all(|v| v.2.candidate_epoch == 4 && !v.2.pre_vote));
    let s = position(&out, |o| matches!(o, Output::Send { .. })).unwrap();
    assert!(p < s, "persisted before asking: {out:?}");
    // The late answer of the other voter to the pre-vote changes nothing.
    let out = h.respond(2, asked[0].1, granted(3));
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn rejected_by_a_majority_it_backs_off_and_asks_again_in_the_same_epoch() {
    let (mut h, asked, _) = prospective_follower();
    h.respond(2, asked[0].1, refused(2, 3));
    let out = h.respond(3, asked[1].1, refused(2, 3));
    assert!(sends(&out).iter().all(|s| !matches!(s.2, Request::Vote(_))));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 3));
    // Lost: the backoff (<= jitter max) starts at once.
    let lost_at = h.now;
    assert!(h.core.next_deadline().unwrap() <= lost_at + 1_000);
    let out = h.run_until(lost_at + 1_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 3));
    assert!(persisted(&out).is_empty(), "{out:?}");
    let again = pre_votes(&out);
    assert_eq!(again.len(), 2, "a new round: {out:?}");
    // The new round counts its own answers (caught: `prospective_mut` made to hand out a
    // fresh round of its own, which leaves the lost one, backing off, in force).
    h.respond(3, again[1].1, granted(3));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 4));
}

/// Caught: `QuorumState::prospective` made to return a fresh round whatever the state (a
/// retry that falls due while the lost round backs off would ask again). A pre-vote whose
/// retry is pending when the round is lost is not sent during the backoff: the first pre-votes
/// after it are the next round's, to every other voter.
#[test]
fn a_lost_round_sends_no_pending_retry_while_it_backs_off() {
    let (mut h, asked) = prospective_among_five();
    let busy = Harness::vote_response(ErrorCode::BROKER_NOT_AVAILABLE, 2, 3, false);
    h.respond(2, asked[0].1, busy);
    for (to, correlation, _) in &asked[1..] {
        h.respond(*to, *correlation, refused(2, 3));
    }
    assert_eq!(h.core.role(), Role::Prospective);
    let first = (0..300)
        .map(|_| pre_votes(&h.run_until(h.now + 10)))
        .find(|sent| !sent.is_empty())
        .expect("a new round within 3 s");
    let to: Vec<NodeId> = first.iter().map(|s| s.0).collect();
    assert_eq!(to, vec![2, 3, 4, 5]);
}

#[test]
fn a_retriable_error_is_asked_again_after_the_retry_backoff() {
    let (mut h, asked, _) = prospective_follower();
    let busy = Harness::vote_response(ErrorCode::BROKER_NOT_AVAILABLE, 2, 3, false);
    h.respond(2, asked[0].1, busy);
    // Not before its backoff, whatever else wakes the node (caught: `key > now` turned into
    // `<` in `take_due_retries`, which runs a retry that is not due yet).
    h.now += 1;
    assert!(pre_votes(&h.tick()).is_empty());
    let out = h.run_until(h.now + 100);
    let again = pre_votes(&out);
    assert_eq!(again.len(), 1, "{out:?}");
    assert_eq!(again[0].0, 2);
    assert_eq!(h.core.role(), Role::Prospective);
}

#[test]
fn with_five_voters_two_refusals_leave_the_round_open() {
    let (mut h, asked) = prospective_among_five();
    h.respond(2, asked[0].1, refused(2, 3));
    h.respond(3, asked[1].1, refused(2, 3));
    assert_eq!(h.core.role(), Role::Prospective);
    h.respond(4, asked[2].1, granted(3));
    assert_eq!(h.core.role(), Role::Prospective, "2 of 3 needed");
    h.respond(5, asked[3].1, granted(3));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 4));
}

#[test]
fn unanswered_until_the_election_timeout_it_backs_off_and_asks_again() {
    let (mut h, _, _) = prospective_follower();
    let start = h.now;
    // Election timeout (<= 2 s) then backoff (<= 1 s): a new round within 3 s, never a
    // candidacy, never a write.
    let out = h.run_until(start + 3_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 3));
    assert!(persisted(&out).is_empty(), "{out:?}");
    assert!(real_votes(&out).is_empty());
    assert!(pre_votes(&out).len() >= 2, "asked again: {out:?}");
}

#[test]
fn it_keeps_fetching_and_an_answer_from_its_leader_makes_it_a_follower_again() {
    let (mut h, _, out) = prospective_follower();
    let fetch = fetch_sends(&out);
    assert_eq!(fetch.len(), 1, "still fetching from its leader: {out:?}");
    assert_eq!(fetch[0].0, 2);
    let answer = Harness::fetch_response(2, 3, Vec::new(), 5);
    let out = h.respond(2, fetch[0].1, Response::FetchQuorumRecords(answer));
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.leader_id()),
        (Role::Follower, 3, Some(2))
    );
    assert!(
        persisted(&out).is_empty(),
        "same leader, same file: {out:?}"
    );
    assert_eq!(fetch_sends(&out).len(), 1, "fetches on");
    // The fetch timer runs from the answer.
    assert_eq!(h.core.next_deadline().unwrap(), h.now + 2_000);
}

#[test]
fn begin_quorum_epoch_from_its_leader_makes_it_a_follower_again() {
    let (mut h, _, _) = prospective_follower();
    let (_, out) = h.request(2, Harness::begin_request(2, 3));
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Follower, Some(2))
    );
    assert!(persisted(&out).is_empty(), "{out:?}");
    match &responses(&out)[0].1 {
        Response::BeginQuorumEpoch(r) => assert_eq!(r.error, ErrorCode::NONE),
        other => panic!("{other:?}"),
    }
    // Another leader for the same epoch is refused, as a follower refuses it.
    let (_, out) = h.request(3, Harness::begin_request(3, 3));
    match &responses(&out)[0].1 {
        Response::BeginQuorumEpoch(r) => assert_eq!(r.error, ErrorCode::INVALID_QUORUM_STATE),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unattached_prospective_follows_the_leader_a_refusal_names() {
    let mut h = Harness::restarted(3, -1, -1);
    let out = h.run_until(2_000);
    assert_eq!(h.core.role(), Role::Prospective);
    let asked = pre_votes(&out);
    // A voter follows leader 2 in our epoch: so do we (the common response rules).
    let out = h.respond(3, asked[1].1, refused(2, 3));
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.leader_id()),
        (Role::Follower, 3, Some(2))
    );
    assert_eq!(persisted(&out)[0].leader_id, 2);
}

#[test]
fn answers_with_a_higher_epoch_end_the_round() {
    // Naming a leader: follow it in that epoch.
    let (mut h, asked, _) = prospective_follower();
    h.respond(3, asked[1].1, refused(3, 5));
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.leader_id()),
        (Role::Follower, 5, Some(3))
    );
    // Naming none: unattached in it, with an election timer.
    let (mut h, asked, _) = prospective_follower();
    let out = h.respond(
        3,
        asked[1].1,
        Harness::vote_response(ErrorCode::NONE, -1, 5, false),
    );
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 5));
    assert_eq!(persisted(&out)[0].epoch, 5);
    // FENCED_LEADER_EPOCH from a voter ahead of us says the same.
    let (mut h, asked, _) = prospective_follower();
    h.respond(
        2,
        asked[0].1,
        Harness::vote_response(ErrorCode::FENCED_LEADER_EPOCH, -1, 7, false),
    );
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 7));
}

#[test]
fn answers_from_voters_behind_its_epoch_count() {
    // Node 1 is at epoch 6, the others still at 4: their answers carry epoch 4, and they
    // answered the question asked (would you vote for 1 in epoch 7?).
    let mut h = Harness::restarted_with(6, -1, -1, log(5, &[(3, 0)]));
    let out = h.run_until(2_000);
    let asked = pre_votes(&out);
    assert_eq!(asked[0].2.candidate_epoch, 7);
    h.respond(2, asked[0].1, refused(3, 4));
    assert_eq!(h.core.role(), Role::Prospective, "one refusal, one open");
    h.respond(3, asked[1].1, granted(4));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 7));
}

#[test]
fn answers_naming_another_leader_of_the_epoch_are_reported_and_count() {
    // Spoofed BeginQuorumEpochs told node 1 that 2 leads epoch 3, and node 3 that 1 does (the
    // process test hostile::a_different_leader_claimed_to_each_voter_...): node 3's answer
    // names a leader node 1 does not believe. Dropping it would leave every round unanswered.
    let (mut h, asked, _) = prospective_follower();
    let out = h.respond(
        3,
        asked[1].1,
        Harness::vote_response(ErrorCode::NONE, 1, 3, true),
    );
    assert_eq!(
        (h.core.role(), h.core.epoch()),
        (Role::Candidate, 4),
        "{out:?}"
    );
    assert!(out
        .iter()
        .any(|o| matches!(o, Output::Refused { peer: Some(3), .. })));
    // A refusal naming yet another leader counts too, and believes nothing.
    let (mut h, asked, _) = prospective_follower();
    h.respond(2, asked[0].1, refused(3, 3));
    let out = h.respond(3, asked[1].1, refused(1, 3));
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Prospective, Some(2))
    );
    assert!(real_votes(&out).is_empty());
    assert!(
        h.core.next_deadline().unwrap() <= h.now + 1_000,
        "lost: backing off"
    );
}

#[test]
fn unsupported_version_counts_as_a_grant_and_the_candidacy_asks_with_a_plain_vote() {
    let (mut h, asked, _) = prospective_follower();
    // Node 3 does not speak Vote v1 (the node answers so for a version above its own).
    let unsupported = Harness::vote_response(ErrorCode::UNSUPPORTED_VERSION, -1, -1, false);
    let out = h.respond(3, asked[1].1, unsupported);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 4));
    let votes = real_votes(&out);
    assert!(
        votes.iter().any(|v| v.0 == 3),
        "node 3 asked with a v0 Vote"
    );
    assert!(votes.iter().all(|v| !v.2.pre_vote));
    // For a real vote the same answer grants nothing (its epoch -1 is stale: dropped).
    let out = h.respond(
        3,
        votes.iter().find(|v| v.0 == 3).unwrap().1,
        Harness::vote_response(ErrorCode::UNSUPPORTED_VERSION, -1, -1, false),
    );
    assert_eq!(h.core.role(), Role::Candidate);
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn a_voted_prospective_keeps_its_vote() {
    let mut h = Harness::restarted(3, -1, 2);
    let out = h.run_until(2_000);
    assert_eq!(
        (h.core.role(), h.core.voted_id()),
        (Role::Prospective, Some(2))
    );
    assert!(persisted(&out).is_empty());
    // A real vote for another candidate of the epoch: refused; for the same one: granted again.
    let (vote, _) = h.ask_vote(3, 3, 0, 0);
    assert!(!vote.vote_granted);
    let (vote, out) = h.ask_vote(2, 3, 0, 0);
    assert!(vote.vote_granted);
    assert!(persisted(&out).is_empty());
    // Its vote's candidate won: it follows it.
    h.request(2, Harness::begin_request(2, 3));
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Follower, Some(2))
    );
}

#[test]
fn an_unattached_prospective_votes_like_an_unattached_voter() {
    let mut h = Harness::restarted(3, -1, -1);
    h.run_until(2_000);
    assert_eq!(h.core.role(), Role::Prospective);
    let (vote, out) = h.ask_vote(2, 3, 0, 0);
    assert!(vote.vote_granted);
    assert_eq!(persisted(&out)[0].voted_id, 2, "a real vote is persisted");
    assert_eq!((h.core.role(), h.core.voted_id()), (Role::Voted, Some(2)));
}

#[test]
fn a_candidate_that_lost_asks_for_pre_votes_before_raising_its_epoch_again() {
    let mut h = Harness::restarted(2, -1, 1);
    let votes = sends(&h.tick());
    h.respond(
        2,
        votes[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, false),
    );
    h.respond(
        3,
        votes[1].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, false),
    );
    let out = h.run_until(1_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 2));
    assert_eq!(
        h.core.voted_id(),
        Some(1),
        "its own vote of epoch 2 is kept"
    );
    assert!(persisted(&out).is_empty());
    assert!(pre_votes(&out).iter().all(|p| p.2.candidate_epoch == 3));
}

#[test]
fn a_resigned_leader_asks_for_pre_votes_and_serves_no_fetch() {
    let mut h = Harness::restarted_and_ticked(4, 1, -1);
    assert_eq!(h.core.role(), Role::Resigned);
    let out = h.run_until(2_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 4));
    assert!(persisted(&out).is_empty());
    assert_eq!(
        h.core.election_state().leader_id,
        1,
        "it led epoch 4 (the file says so)"
    );
    assert_eq!(
        h.core.leader_id(),
        None,
        "and names no leader: it gave epoch 4 up"
    );
    assert!(fetch_sends(&out).is_empty(), "it fetches from nobody");
    let (_, out) = h.request(2, Harness::fetch_request(2, 4, 0, 0, 0));
    assert_eq!(
        fetch_of(&responses(&out)[0].1).error,
        ErrorCode::BROKER_NOT_AVAILABLE
    );
    // Never a vote in the epoch it led.
    let (vote, _) = h.ask_vote(2, 4, 0, 0);
    assert!(!vote.vote_granted);
}

#[test]
fn the_first_election_starts_with_a_pre_vote_round_for_epoch_1() {
    let mut h = Harness::fresh(1);
    let out = h.tick();
    let states = persisted(&out);
    assert_eq!(states.len(), 1, "only the bootstrap state: {states:?}");
    assert_eq!((states[0].epoch, states[0].voted_id), (0, -1));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Prospective, 0));
    let asked = pre_votes(&out);
    assert_eq!(asked.len(), 2);
    assert!(asked.iter().all(|a| a.2.candidate_epoch == 1));
    h.respond(2, asked[0].1, granted(0));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 1));
}

#[test]
fn a_single_voter_stands_at_once() {
    let mut h = Harness::new(config(1, &[1]), None, log(0, &[]));
    let out = h.tick();
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Leader, 1));
    assert!(sends(&out).is_empty());
}

#[test]
fn without_pre_vote_the_fetch_timeout_starts_a_candidacy_as_before() {
    let mut c = config(1, VOTERS);
    c.pre_vote = false;
    c.lease = false;
    let mut h = Harness::new(c, Some(stored(3, 2, -1, VOTERS)), log(0, &[]));
    h.tick();
    let out = h.run_until(2_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 4));
    assert!(pre_votes(&out).is_empty());
    assert_eq!(real_votes(&out).len(), 2);
}

#[test]
fn a_later_successor_named_by_end_quorum_epoch_stands_without_a_pre_vote() {
    let (mut h, _) = Harness::follower(3, VOTERS, 2, 1, log(0, &[]));
    // Position 1 of 2: a delay, then a candidacy at once (the leader gave the epoch up).
    let (_, out) = h.request(1, Harness::end_request(1, 2, &[2, 3]));
    assert!(persisted(&out).is_empty());
    let out = h.run_until(h.now + 1_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 3));
    assert!(pre_votes(&out).is_empty());
    assert_eq!(real_votes(&out).len(), 2);
}

#[test]
fn a_prospective_shuts_down_at_once() {
    let (mut h, _, _) = prospective_follower();
    let out = h.step(Input::Shutdown);
    assert!(out.iter().any(|o| matches!(o, Output::ShutdownComplete)));
    assert!(persisted(&out).is_empty());
}

// ----- the voter -----

#[test]
fn an_unattached_voter_grants_a_pre_vote_to_an_up_to_date_log_and_changes_nothing() {
    let mut h = Harness::unattached(3, log(5, &[(3, 0)]));
    let v = ask(&mut h, Harness::pre_vote_request(2, 4, 3, 5));
    assert!(v.vote_granted);
    assert_eq!(
        (v.error, v.leader_epoch, v.leader_id),
        (ErrorCode::NONE, 3, -1)
    );
    // The epoch it answers in is its own, even for a pre-vote many epochs ahead.
    let v = ask(&mut h, Harness::pre_vote_request(2, 9, 3, 5));
    assert!(v.vote_granted);
    assert_eq!(v.leader_epoch, 3);
}

#[test]
fn a_pre_vote_for_a_stale_log_is_refused() {
    let mut h = Harness::unattached(3, log(5, &[(3, 0)]));
    assert!(!ask(&mut h, Harness::pre_vote_request(2, 4, 3, 4)).vote_granted);
    assert!(!ask(&mut h, Harness::pre_vote_request(2, 4, 2, 50)).vote_granted);
    assert!(ask(&mut h, Harness::pre_vote_request(2, 4, 3, 6)).vote_granted);
}

#[test]
fn a_pre_vote_below_the_voters_epoch_is_fenced() {
    let mut h = Harness::unattached(5, log(0, &[]));
    let v = ask(&mut h, Harness::pre_vote_request(2, 4, 0, 0));
    assert_eq!(
        (v.error, v.leader_epoch, v.vote_granted),
        (ErrorCode::FENCED_LEADER_EPOCH, 5, false)
    );
}

#[test]
fn a_voted_voter_grants_pre_votes_for_the_next_epoch() {
    let mut h = Harness::restarted_and_ticked(3, -1, 3);
    assert!(ask(&mut h, Harness::pre_vote_request(2, 4, 0, 0)).vote_granted);
    assert_eq!(h.core.voted_id(), Some(3));
}

#[test]
fn a_follower_that_heard_from_its_leader_refuses_pre_votes() {
    let (mut h, fetch) = Harness::follower(1, VOTERS, 3, 2, log(0, &[]));
    // Not answered yet: no live leader heard from in this role.
    assert!(ask(&mut h, Harness::pre_vote_request(3, 4, 0, 0)).vote_granted);
    h.now += 10;
    h.tick();
    let answer = Harness::fetch_response(2, 3, Vec::new(), -1);
    h.respond(2, fetch, Response::FetchQuorumRecords(answer));
    for at in [10, 500, 1_999] {
        h.now = 10 + at;
        h.tick();
        let v = ask(&mut h, Harness::pre_vote_request(3, 4, 0, 0));
        assert!(!v.vote_granted, "{at} ms after the answer");
        assert_eq!((v.leader_id, v.leader_epoch), (2, 3), "it names its leader");
    }
}

#[test]
fn a_follower_that_just_heard_begin_quorum_epoch_refuses_pre_votes() {
    // Node 3 lost the election of epoch 4 that node 2 won; node 1 hears of it from node 2
    // itself: a live leader, even before its first fetch answer.
    let mut h = Harness::unattached(3, log(0, &[]));
    h.request(2, Harness::begin_request(2, 4));
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Follower, Some(2))
    );
    let v = ask(&mut h, Harness::pre_vote_request(3, 5, 0, 0));
    assert!(!v.vote_granted);
    assert_eq!((v.leader_id, v.leader_epoch), (2, 4));
    // Up to a fetch timeout after it, still live; then its own fetch timer has run out too,
    // and it grants as a prospective.
    let heard = h.now;
    h.now = heard + 1_999;
    h.tick();
    assert_eq!(h.core.role(), Role::Follower);
    assert!(!ask(&mut h, Harness::pre_vote_request(3, 5, 0, 0)).vote_granted);
    h.now = heard + 2_000;
    h.tick();
    assert_eq!(h.core.role(), Role::Prospective);
    assert!(ask(&mut h, Harness::pre_vote_request(3, 5, 0, 0)).vote_granted);
}

#[test]
fn the_leader_refuses_pre_votes_while_a_majority_fetches() {
    let mut h = Harness::leader(1, VOTERS, 3, log(0, &[]));
    h.durable_all();
    // Just elected: a majority granted, so it counts as heard from.
    let v = ask(&mut h, Harness::pre_vote_request(2, 4, 3, 1));
    assert!(!v.vote_granted);
    assert_eq!(v.leader_id, 1);
    h.now = 1_500;
    h.tick();
    h.request(3, Harness::fetch_request(3, 3, 1, 3, 1));
    h.now = 3_000;
    h.tick();
    assert_eq!(h.core.role(), Role::Leader);
    assert!(
        !ask(&mut h, Harness::pre_vote_request(2, 4, 3, 1)).vote_granted,
        "node 3 fetched 1.5 s ago"
    );
    // Nobody fetched for a fetch timeout (2 s), before check-quorum (3 s) resigns: it grants,
    // from the very millisecond the fetch timeout has passed.
    h.now = 3_499;
    h.tick();
    assert!(!ask(&mut h, Harness::pre_vote_request(2, 4, 3, 1)).vote_granted);
    h.now = 3_500;
    h.tick();
    assert_eq!(h.core.role(), Role::Leader);
    assert!(ask(&mut h, Harness::pre_vote_request(2, 4, 3, 1)).vote_granted);
}

#[test]
fn a_follower_grants_from_the_millisecond_its_leader_is_a_fetch_timeout_old() {
    // Its own fetch timer would fire then too; EndQuorumEpoch (successor at position 1) moved
    // it later, so the follower itself answers at that millisecond.
    let (mut h, fetch) = Harness::follower(1, VOTERS, 3, 2, log(0, &[]));
    h.now = 10;
    h.tick();
    let answer = Harness::fetch_response(2, 3, Vec::new(), -1);
    h.respond(2, fetch, Response::FetchQuorumRecords(answer));
    h.now = 1_900;
    h.tick();
    h.request(2, Harness::end_request(2, 3, &[3, 1]));
    h.now = 2_009;
    h.tick();
    assert!(!ask(&mut h, Harness::pre_vote_request(3, 4, 0, 0)).vote_granted);
    h.now = 2_010;
    h.tick();
    assert_eq!(
        h.core.role(),
        Role::Follower,
        "its timer now fires at 2,400"
    );
    assert!(ask(&mut h, Harness::pre_vote_request(3, 4, 0, 0)).vote_granted);
}

#[test]
fn prospectives_candidates_and_resigned_nodes_grant_pre_votes() {
    let (mut h, _, _) = prospective_follower();
    assert!(ask(&mut h, Harness::pre_vote_request(3, 4, 3, 5)).vote_granted);
    let mut h = Harness::restarted_and_ticked(3, -1, 1);
    assert_eq!(h.core.role(), Role::Candidate);
    assert!(ask(&mut h, Harness::pre_vote_request(2, 4, 0, 0)).vote_granted);
    let mut h = Harness::restarted_and_ticked(3, 1, -1);
    assert_eq!(h.core.role(), Role::Resigned);
    assert!(ask(&mut h, Harness::pre_vote_request(2, 4, 0, 0)).vote_granted);
}

#[test]
fn a_granted_pre_vote_does_not_postpone_the_voters_own_election() {
    let mut h = Harness::unattached(3, log(0, &[]));
    h.run_until(500);
    let before = h.core.next_deadline().unwrap();
    assert!(ask(&mut h, Harness::pre_vote_request(2, 4, 0, 0)).vote_granted);
    assert_eq!(h.core.next_deadline(), Some(before));
    h.run_until(before);
    assert_eq!(
        h.core.role(),
        Role::Prospective,
        "its own round began on time"
    );
}

#[test]
fn observers_and_non_voters_get_no_pre_vote() {
    let (_, out) = Harness::observer_asked(Harness::pre_vote_request(2, 1, 0, 0));
    assert_eq!(vote_answer(&out).error, ErrorCode::INCONSISTENT_VOTER_SET);
    let mut h = Harness::unattached(3, log(0, &[]));
    let (_, out) = h.request(9, Harness::pre_vote_request(9, 4, 0, 0));
    assert_eq!(vote_answer(&out).error, ErrorCode::INCONSISTENT_VOTER_SET);
}
