//! Elections and votes (docs/testing.md, "Behaviours the scenario tests cover").

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

#[test]
fn handle_valid_vote_request_as_follower() {
    let mut h = Harness::unattached(1, log(0, &[]));
    let (id, out) = h.request(2, Harness::vote_request(2, 1, 0, 0));
    let p = position(&out, is_persist).expect("vote persisted");
    let r = position(&out, is_respond).expect("answered");
    assert!(p < r, "the vote is durable before it is granted: {out:?}");
    assert_eq!(persisted(&out)[0].voted_id, 2);
    let resp = responses(&out);
    assert_eq!(resp[0].0, id);
    let v = vote_of(&resp[0].1);
    assert!(v.vote_granted);
    assert_eq!(
        (v.error, v.leader_epoch, v.leader_id),
        (ErrorCode::NONE, 1, -1)
    );
    assert_eq!((h.core.role(), h.core.voted_id()), (Role::Voted, Some(2)));
}

#[test]
fn handle_vote_request_as_follower_with_elected_leader() {
    let (mut h, _) = Harness::follower(1, VOTERS, 1, 2, log(0, &[]));
    let (v, out) = h.ask_vote(3, 1, 0, 0);
    assert!(!v.vote_granted);
    assert_eq!((v.error, v.leader_id), (ErrorCode::NONE, 2));
    assert!(persisted(&out).is_empty());
}

#[test]
fn handle_vote_request_as_follower_with_voted_candidate() {
    let mut h = Harness::restarted_and_ticked(1, -1, 2);
    let (vote, _) = h.ask_vote(3, 1, 0, 0);
    assert!(!vote.vote_granted);
    let (vote, out) = h.ask_vote(2, 1, 0, 0);
    assert!(vote.vote_granted, "idempotent re-grant");
    assert!(persisted(&out).is_empty());
    assert_eq!(h.core.voted_id(), Some(2));
}

/// A candidate's first request may count records it has not synced; if it crashes, loses them
/// and asks again in the same epoch, the vote its longer log won is not given to the shorter
/// one (found by seed 60844871 of `--voters 3 --observers 2 --producers 2 --retention
/// --reassign`: a restarted candidate led without a committed batch).
#[test]
fn a_re_grant_checks_the_candidates_log_again() {
    let mut h = Harness::unattached(5, log(10, &[(4, 0)]));
    let (first, _) = h.ask_vote(2, 5, 4, 10);
    assert!(first.vote_granted, "a log as long as ours wins the vote");
    let (shorter, out) = h.ask_vote(2, 5, 4, 8);
    assert!(!shorter.vote_granted, "the same candidate, now behind us");
    assert!(persisted(&out).is_empty(), "the vote itself stands");
    assert_eq!((h.core.role(), h.core.voted_id()), (Role::Voted, Some(2)));
    let (again, _) = h.ask_vote(2, 5, 4, 10);
    assert!(
        again.vote_granted,
        "caught up again, the vote is re-granted"
    );
    let (other, _) = h.ask_vote(3, 5, 4, 12);
    assert!(!other.vote_granted, "one vote per epoch, whatever the log");
}

#[test]
fn handle_invalid_vote_request_with_older_epoch() {
    let mut h = Harness::unattached(5, log(0, &[]));
    let (v, out) = h.ask_vote(2, 4, 0, 0);
    assert_eq!(
        (v.error, v.leader_epoch, v.vote_granted),
        (ErrorCode::FENCED_LEADER_EPOCH, 5, false)
    );
    assert!(persisted(&out).is_empty());
    assert_eq!(h.core.epoch(), 5);
}

#[test]
fn handle_invalid_vote_request_as_observer() {
    let (h, out) = Harness::observer_asked(Harness::vote_request(2, 1, 0, 0));
    assert_eq!(vote_answer(&out).error, ErrorCode::INCONSISTENT_VOTER_SET);
    assert_eq!(h.core.epoch(), 0, "an observer does not adopt the epoch");
}

#[test]
fn voter_only_request_validation() {
    let mut h = Harness::unattached(1, log(0, &[]));
    let (vote, _) = h.ask_vote(9, 2, 0, 0);
    assert_eq!(vote.error, ErrorCode::INCONSISTENT_VOTER_SET);
    let (_, out) = h.request(9, Harness::begin_request(9, 2));
    assert!(matches!(&responses(&out)[0].1,
        Response::BeginQuorumEpoch(r) if r.error == ErrorCode::INCONSISTENT_VOTER_SET));
    let (_, out) = h.request(9, Harness::end_request(9, 2, &[1]));
    assert!(matches!(&responses(&out)[0].1,
        Response::EndQuorumEpoch(r) if r.error == ErrorCode::INCONSISTENT_VOTER_SET));
    assert_eq!(h.core.epoch(), 1);
    assert!(persisted(&out).is_empty());
}

#[test]
fn invalid_vote_request() {
    let mut h = Harness::unattached(1, log(0, &[]));
    for req in [
        Harness::vote_request(2, 2, 0, -1),
        Harness::vote_request(2, 2, -1, 0),
        Harness::vote_request(2, 2, 2, 0),
        Harness::vote_request(2, 2, 3, 0),
        Harness::vote_request(-1, 2, 0, 0),
    ] {
        let (_, out) = h.request(2, req);
        let v = vote_answer(&out);
        assert_eq!(
            (v.error, v.vote_granted),
            (ErrorCode::INVALID_REQUEST, false)
        );
        assert!(persisted(&out).is_empty());
    }
}

#[test]
fn vote_with_cluster_id_mismatch_is_rejected() {
    let mut h = Harness::unattached(1, log(0, &[]));
    let req = Request::Vote(VoteRequest {
        cluster_id: "other".into(),
        candidate_epoch: 2,
        candidate_id: 2,
        last_epoch: 0,
        last_epoch_end_offset: 0,
        pre_vote: false,
        ..Default::default()
    });
    let (_, out) = h.request(2, req);
    assert_eq!(vote_answer(&out).error, ErrorCode::INCONSISTENT_CLUSTER_ID);
    assert_eq!(h.core.epoch(), 1);
}

#[test]
fn vote_with_higher_epoch_but_stale_log_adopts_epoch() {
    let mut c = config(1, VOTERS);
    c.fetch_timeout_ms = 10_000;
    let mut h = Harness::new(c, Some(stored(2, -1, -1, VOTERS)), log(5, &[(2, 0)]));
    h.tick();
    let (vote, out) = h.ask_vote(2, 3, 1, 10);
    assert!(!vote.vote_granted);
    let s = persisted(&out);
    assert_eq!((s[0].epoch, s[0].voted_id, s[0].leader_id), (3, -1, -1));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 3));
    // An election timer (<= 1000 + 1000 jitter), not the 10 s fetch timer
    // (docs/protocol.md section 15, item 13).
    assert!(h.core.next_deadline().unwrap() <= h.now + 2_000);
}

#[test]
fn leader_ignore_vote_request_on_same_epoch() {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    let (v, _) = h.ask_vote(2, 2, 0, 0);
    assert!(!v.vote_granted);
    assert_eq!(v.leader_id, 1);
    assert_eq!(h.core.role(), Role::Leader);
}

#[test]
fn candidate_ignore_vote_request_on_same_epoch() {
    let mut h = Harness::restarted_and_ticked(2, -1, 1);
    let (vote, _) = h.ask_vote(2, 2, 0, 0);
    assert!(!vote.vote_granted);
    assert_eq!(h.core.role(), Role::Candidate);
}

#[test]
fn leader_steps_down_on_higher_epoch_vote() {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    // Our log: the LeaderChange batch of epoch 2 at offset 0 (LEO 1).
    let (_, out) = h.request(2, Harness::vote_request(2, 3, 2, 1));
    let s = persisted(&out);
    assert_eq!((s[0].epoch, s[0].leader_id, s[0].voted_id), (3, -1, -1));
    assert_eq!((s[1].epoch, s[1].voted_id), (3, 2));
    assert!(vote_answer(&out).vote_granted);
    assert_eq!(h.core.role(), Role::Voted);
}

#[test]
fn initialize_as_candidate_and_become_leader() {
    let mut h = Harness::restarted_with(2, -1, 1, log(3, &[(1, 0)]));
    let out = h.tick();
    let votes = sends(&out);
    let out = h.respond(
        2,
        votes[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, true),
    );
    assert_eq!(h.core.role(), Role::Leader);
    assert_eq!(persisted(&out)[0].leader_id, 1);
    match &log_ops(&out)[..] {
        [LogOpKind::Append(b)] => {
            assert_eq!(b.len(), 1);
            assert_eq!(
                (b[0].base_offset, b[0].epoch, b[0].is_control),
                (3, 2, true)
            );
            let view = crate::record::BatchView::parse(b[0].bytes.clone()).expect("valid batch");
            let lc = crate::record::control::LeaderChange::from_batch(&view).expect("LeaderChange");
            assert_eq!((lc.leader_id, lc.granting_voters.clone()), (1, vec![1, 2]));
        }
        other => panic!("{other:?}"),
    }
    let begins = recipients(&out, |r| matches!(r, Request::BeginQuorumEpoch(_)));
    assert_eq!(begins, vec![2, 3]);
}

#[test]
fn retry_election() {
    let mut h = Harness::restarted(2, -1, 1).without_pre_vote();
    let out = h.tick();
    let votes = sends(&out);
    h.respond(
        2,
        votes[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, false),
    );
    let out = h.respond(
        3,
        votes[1].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, false),
    );
    assert!(sends(&out).is_empty() && persisted(&out).is_empty());
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.voted_id()),
        (Role::Candidate, 2, Some(1))
    );
    // Lost: backoff (<= jitter max) starts at once, not after the election timeout.
    assert!(h.core.next_deadline().unwrap() <= 1_000);
    let out = h.run_until(1_000);
    assert_own_candidacy(&h, &out, 3);
}

#[test]
fn a_vote_answered_with_a_retriable_error_is_asked_again() {
    let mut h = Harness::restarted(2, -1, 1);
    let votes = sends(&h.tick());
    let busy = Harness::vote_response(ErrorCode::BROKER_NOT_AVAILABLE, -1, 2, false);
    h.respond(2, votes[0].1, busy);
    let out = h.run_until(h.now + 100);
    let again = recipients(&out, |r| matches!(r, Request::Vote(_)));
    assert_eq!(again, vec![2], "after the retry backoff: {out:?}");
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 2));
}

#[test]
fn vote_request_timeout() {
    let mut c = config(1, VOTERS);
    c.request_timeout_ms = 300;
    c.election_timeout_ms = 5_000;
    let mut h = Harness::new(c, Some(stored(2, -1, 1, VOTERS)), log(0, &[]));
    let first = sends(&h.tick());
    let out = h.run_until(400);
    let again = sends(&out);
    assert_eq!(again.len(), 2, "both unanswered votes re-sent");
    assert!(
        again.iter().all(|s| first.iter().all(|f| f.1 != s.1)),
        "new correlations"
    );
    // A late grant for the timed-out request is ignored.
    h.respond(
        2,
        first[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, true),
    );
    assert_eq!(h.core.role(), Role::Candidate);
    h.respond(
        2,
        again[0].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, true),
    );
    assert_eq!(h.core.role(), Role::Leader);
}

#[test]
fn vote_response_ignored_after_becoming_follower() {
    let mut h = Harness::restarted(2, -1, 1);
    let votes = sends(&h.tick());
    h.request(2, Harness::begin_request(2, 2));
    assert_eq!(h.core.role(), Role::Follower);
    let out = h.respond(
        3,
        votes[1].1,
        Harness::vote_response(ErrorCode::NONE, -1, 2, true),
    );
    assert!(persisted(&out).is_empty());
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Follower, Some(2))
    );
}

#[test]
fn voter_become_candidate_after_fetch_timeout() {
    let (h, _) = Harness::follower(1, VOTERS, 3, 2, log(0, &[]));
    let mut h = h.without_pre_vote();
    let out = h.run_until(1_999);
    assert_eq!(h.core.role(), Role::Follower, "{out:?}");
    let out = h.run_until(2_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 4));
    assert_eq!(persisted(&out)[0].epoch, 4);
}

#[test]
fn follower_as_observer_does_not_become_candidate_after_fetch_timeout() {
    let (mut h, _) = Harness::follower(4, VOTERS, 3, 2, log(0, &[]));
    let out = h.run_until(2_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 3));
    assert!(sends(&out)
        .iter()
        .any(|s| matches!(s.2, Request::FindQuorum(_))));
    assert!(!sends(&out).iter().any(|s| matches!(s.2, Request::Vote(_))));
}

#[test]
fn unattached_as_observer_does_not_become_candidate() {
    let mut h = Harness::new(
        config(4, VOTERS),
        Some(stored(3, -1, -1, VOTERS)),
        log(0, &[]),
    );
    let out = h.run_until(20_000);
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 3));
    assert!(!sends(&out).iter().any(|s| matches!(s.2, Request::Vote(_))));
}

#[test]
fn log_comparison_edge_cases() {
    // (the voter's log, the candidate's last epoch and log end, granted)
    let cases = [
        // Higher last epoch with a shorter log wins over a lower epoch with a longer log.
        (log(10, &[(1, 0)]), (2, 5), true),
        (log(5, &[(2, 0)]), (1, 10), false),
        // Equal epochs: end offset must be >=.
        (log(5, &[(2, 0)]), (2, 5), true),
        (log(5, &[(2, 0)]), (2, 4), false),
    ];
    for (voter_log, (last_epoch, leo), granted) in cases {
        let mut h = Harness::unattached(2, voter_log);
        let (vote, _) = h.ask_vote(2, 3, last_epoch, leo);
        assert_eq!(
            vote.vote_granted, granted,
            "last epoch {last_epoch}, end {leo}"
        );
    }
}

#[test]
fn candidate_persists_its_vote_before_asking_for_votes() {
    let (h, _) = Harness::follower(1, VOTERS, 3, 2, log(0, &[]));
    let mut h = h.without_pre_vote();
    let out = h.run_until(2_000);
    let p = position(&out, is_persist).expect("candidacy persisted");
    let s = position(&out, |o| {
        matches!(
            o,
            Output::Send {
                request: Request::Vote(_),
                ..
            }
        )
    })
    .expect("votes sent");
    assert!(p < s, "{out:?}");
}

#[test]
fn granting_a_vote_resets_the_election_timer() {
    let mut h = Harness::unattached(1, log(0, &[]));
    h.run_until(1_500);
    let before = h.core.next_deadline().unwrap();
    h.request(2, Harness::vote_request(2, 1, 0, 0));
    let after = h.core.next_deadline().unwrap();
    assert!(
        after >= h.now + 1_000,
        "a fresh randomized election timeout: {before} -> {after}"
    );
}

#[test]
fn refusing_a_stale_candidate_does_not_postpone_the_own_election() {
    let mut h = Harness::unattached(2, log(5, &[(2, 0)]));
    h.run_until(h.now + 900);
    let before = h.core.next_deadline().unwrap();
    // A candidate with a shorter log bumps the epoch again and again.
    for epoch in 3..6 {
        let (vote, _) = h.ask_vote(2, epoch, 1, 1);
        assert!(!vote.vote_granted);
        assert!(
            h.core.next_deadline().unwrap() <= before,
            "a refused vote re-armed the election timer"
        );
    }
    h.run_until(before);
    // Its own election began on time (with a pre-vote round: docs/protocol.md, "Pre-vote").
    assert_eq!(h.core.role(), Role::Prospective);
}
