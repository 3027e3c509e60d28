//! The leader lease (docs/consistency.md, "The leader lease"): a leader answers clients as
//! leader only while voters making a majority with it echoed one of its answers within the
//! lease; followers echo the stamp of the last answer they took; a restarted voter refuses
//! pre-votes, and does not stand, for a fetch timeout.

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

/// Node 1 elected leader of epoch 2 among `VOTERS` with the lease on, its LeaderChange (offset
/// 0) durable.
fn leader() -> Harness {
    let mut h = Harness::new(
        with_lease(1, VOTERS),
        Some(stored(2, -1, 1, VOTERS)),
        log(0, &[]),
    )
    .elected(2);
    h.durable_all();
    h
}

/// Voter `from` fetches at offset 1 (it holds the LeaderChange, durably) echoing `echo`;
/// returns the leader's answer.
fn fetch_echoing(h: &mut Harness, from: NodeId, echo: Option<i64>) -> FetchQuorumRecordsResponse {
    let request = match Harness::fetch_request(from, 2, 1, 2, 1) {
        Request::FetchQuorumRecords(r) => FetchQuorumRecordsRequest {
            lease_echo: echo,
            max_wait_ms: 0,
            ..r
        },
        _ => unreachable!(),
    };
    let (_, out) = h.request(from, Request::FetchQuorumRecords(request));
    let answers = responses(&out);
    fetch_of(&answers.last().expect("answered at once").1).clone()
}

fn consumer_fetch(h: &mut Harness, id: u64, wait: u64) -> Vec<Output> {
    let fetch = ClientFetch {
        fetch_offset: 1,
        last_fetched_epoch: None,
        current_leader_epoch: None,
        max_wait_ms: wait,
        min_bytes: 1,
        max_bytes: 1 << 20,
    };
    h.step(Input::ClientFetch { id, fetch })
}

fn consumer_error(out: &[Output], id: u64) -> (ErrorCode, NodeId) {
    let found = out.iter().find_map(|o| match o {
        Output::ClientFetchDone { id: got, result } if *got == id => {
            Some((result.error, result.leader_id))
        }
        _ => None,
    });
    found.unwrap_or_else(|| panic!("no answer to consumer fetch {id} in {out:?}"))
}

fn serves(h: &Harness) -> bool {
    let queries = [
        h.core.consumer_offsets(None).is_ok(),
        h.core.list_offsets(None, OffsetSpec::Latest).is_ok(),
        h.core.offset_for_leader_epoch(None, 2).is_ok(),
        h.core.client_leader_id() == Some(1),
    ];
    assert!(
        queries.iter().all(|q| *q == queries[0]),
        "every client read agrees: {queries:?}"
    );
    assert_eq!(h.core.leads_for_clients(), queries[0]);
    queries[0]
}

#[test]
fn a_leader_serves_clients_only_while_a_majority_echoed_within_the_lease() {
    let mut h = leader();
    h.now = 100;
    h.tick();
    // Voter 2 fetches without an echo: the high watermark is known, the lease is not.
    let answer = fetch_echoing(&mut h, 2, None);
    assert_eq!(
        answer.lease_stamp,
        Some(100),
        "the answer carries the leader's clock"
    );
    assert_eq!(h.core.high_watermark(), Some(1));
    assert!(!serves(&h), "no echo yet: a newer leader could exist");
    assert_eq!(
        consumer_error(&consumer_fetch(&mut h, 1, 0), 1),
        (ErrorCode::NOT_LEADER_OR_FOLLOWER, -1),
        "refused, naming nobody"
    );
    // Its next fetch echoes the stamp: the lease runs 1,800 ms (2,000 x 90%) from it.
    h.now = 150;
    h.tick();
    fetch_echoing(&mut h, 2, Some(100));
    assert_eq!(h.core.lease(), Lease::Until(1_900));
    assert!(serves(&h));
    assert_eq!(
        consumer_error(&consumer_fetch(&mut h, 2, 0), 2).0,
        ErrorCode::NONE
    );
    h.now = 1_899;
    h.tick();
    assert!(serves(&h), "still within the lease");
    h.now = 1_900;
    h.tick();
    assert_eq!(
        h.core.role(),
        Role::Leader,
        "check-quorum has not resigned it yet"
    );
    assert!(!serves(&h), "the lease ran out");
    assert_eq!(
        consumer_error(&consumer_fetch(&mut h, 3, 0), 3).0,
        ErrorCode::NOT_LEADER_OR_FOLLOWER
    );
    let out = h.append(9, 1, Acks::Quorum);
    assert_eq!(
        append_refusal(&appends_done(&out)),
        Some((9, ErrorCode::NOT_LEADER_OR_FOLLOWER)),
        "no write accepted either"
    );
    // A fresh echo renews it.
    fetch_echoing(&mut h, 3, Some(1_850));
    assert_eq!(h.core.lease(), Lease::Until(3_650));
    assert!(serves(&h));
}

#[test]
fn a_parked_consumer_answered_after_the_lease_ran_out_is_refused() {
    let mut h = leader();
    fetch_echoing(&mut h, 2, None);
    fetch_echoing(&mut h, 2, Some(0));
    assert!(serves(&h));
    let out = consumer_fetch(&mut h, 5, 5_000);
    assert!(
        !out.iter()
            .any(|o| matches!(o, Output::ClientFetchDone { .. })),
        "parked"
    );
    // The first tick after its wait (500 ms at most) comes after the lease's end (1,800).
    h.now = 1_800;
    let out = h.tick();
    assert_eq!(
        consumer_error(&out, 5).0,
        ErrorCode::NOT_LEADER_OR_FOLLOWER,
        "answered when its wait ended, after the lease"
    );
}

#[test]
fn echoes_this_leadership_did_not_make_are_ignored() {
    let mut h = leader();
    h.now = 500;
    h.tick();
    fetch_echoing(&mut h, 2, Some(501));
    assert_eq!(h.core.lease(), Lease::None, "a stamp from the future");
    fetch_echoing(&mut h, 2, Some(-5));
    assert_eq!(h.core.lease(), Lease::None, "a negative stamp");
    fetch_echoing(&mut h, 2, Some(400));
    assert_eq!(h.core.lease(), Lease::Until(2_200));
    fetch_echoing(&mut h, 2, Some(300));
    assert_eq!(
        h.core.lease(),
        Lease::Until(2_200),
        "a stamp never moves back"
    );
}

#[test]
fn a_follower_echoes_the_stamp_of_the_last_answer_it_took() {
    let mut h = Harness::new(
        with_lease(1, VOTERS),
        Some(stored(3, 2, -1, VOTERS)),
        log(0, &[]),
    );
    let out = h.tick();
    let first = fetch_sends(&out);
    assert_eq!(
        first[0].2.lease_echo, None,
        "nothing taken yet in this role"
    );
    let mut answer = Harness::fetch_response(2, 3, Vec::new(), -1);
    answer.lease_stamp = Some(77);
    let out = h.respond(2, first[0].1, Response::FetchQuorumRecords(answer));
    let next = fetch_sends(&out);
    assert_eq!(next[0].2.lease_echo, Some(77));
}

#[test]
fn a_restarted_voter_refuses_pre_votes_and_does_not_stand_for_a_fetch_timeout() {
    for (stored_state, what) in [
        (stored(3, 2, -1, VOTERS), "a follower"),
        (stored(3, -1, 2, VOTERS), "a voter that voted"),
        (stored(3, -1, -1, VOTERS), "an unattached voter"),
    ] {
        let mut h = Harness::new(
            with_lease(1, VOTERS),
            Some(stored_state.clone()),
            log(0, &[]),
        );
        let out = h.tick();
        assert!(recipients(&out, |r| matches!(r, Request::Vote(_))).is_empty());
        let mut stood_at = None;
        for at in (0..=2_000).step_by(100) {
            h.now = at;
            let out = h.tick();
            if stood_at.is_none() && !recipients(&out, |r| matches!(r, Request::Vote(_))).is_empty()
            {
                stood_at = Some(at);
            }
            let (_, out) = h.request(3, Harness::pre_vote_request(3, 4, 0, 0));
            let granted = vote_answer(&out).vote_granted;
            assert_eq!(granted, at >= 2_000, "{what} at {at} ms");
        }
        assert!(
            stood_at.is_none_or(|t| t >= 2_000),
            "{what} stood at {stood_at:?}"
        );
        // Without the lease it answers as before: at once.
        let mut c = config(1, VOTERS);
        c.lease = false;
        let mut h = Harness::new(c, Some(stored_state), log(0, &[]));
        h.tick();
        let (_, out) = h.request(3, Harness::pre_vote_request(3, 4, 0, 0));
        assert!(vote_answer(&out).vote_granted, "{what} without the lease");
    }
}

#[test]
fn the_lease_needs_pre_vote() {
    let mut c = with_lease(1, VOTERS);
    c.pre_vote = false;
    assert!(matches!(
        RaftCore::new(c, None, log(0, &[]), 0),
        Err(InitError::InvalidConfig(_))
    ));
}

#[test]
fn a_lone_voter_always_holds_its_lease() {
    let mut h = Harness::new(with_lease(1, &[1]), None, log(0, &[]));
    h.tick();
    h.durable_all();
    assert_eq!(h.core.role(), Role::Leader);
    assert_eq!(h.core.lease(), Lease::Unbounded);
    h.now = 1_000_000;
    h.tick();
    assert!(h.core.leads_for_clients());
}
