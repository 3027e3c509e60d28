//! Well-formed but hostile messages (docs/protocol.md, "Hostile input"): each is refused with a
//! Kafka error code before it changes or persists anything, and none reaches an assertion.

use super::harness::*;
use crate::raft::admission::{
    EPOCH_WARNING, MAX_BOOT_SKEW_MS, MAX_EPOCH_JUMP, MAX_OFFSET, MAX_PEER_EPOCH, MAX_SUCCESSORS,
};
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

/// Voter 1, unattached in epoch 2 and started.
fn voter() -> Harness {
    Harness::unattached(2, log(0, &[]))
}

fn refusals(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::Refused { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

/// Sends `request` from `from` and checks that it was refused with `error`, that the refusal
/// came first, and that nothing was persisted or changed.
fn assert_refused(h: &mut Harness, from: NodeId, request: Request, error: ErrorCode) {
    let before = (h.core.election_state(), h.core.role());
    let (_, out) = h.request(from, request.clone());
    assert_eq!(refusals(&out).len(), 1, "{request:?}: {out:?}");
    assert!(matches!(out[0], Output::Refused { .. }), "{out:?}");
    let answers = responses(&out);
    assert_eq!(answers.len(), 1, "{out:?}");
    assert_eq!(answers[0].1.error(), error, "{request:?}");
    assert!(
        persisted(&out).is_empty(),
        "{request:?} persisted something"
    );
    assert!(!has_fatal(&out));
    assert_eq!((h.core.election_state(), h.core.role()), before);
}

#[test]
fn begin_quorum_epoch_at_the_epoch_limit_is_refused() {
    let mut h = voter();
    let invalid = ErrorCode::INVALID_REQUEST;
    assert_refused(&mut h, 3, Harness::begin_request(3, Epoch::MAX), invalid);
    assert_refused(
        &mut h,
        3,
        Harness::begin_request(3, 3 + MAX_EPOCH_JUMP),
        invalid,
    );
    assert_refused(&mut h, 3, Harness::begin_request(3, -1), invalid);
    assert_refused(&mut h, 3, Harness::begin_request(-7, 3), invalid);
    // The largest jump allowed is taken as usual.
    let (_, out) = h.request(3, Harness::begin_request(3, 2 + MAX_EPOCH_JUMP));
    assert!(refusals(&out).is_empty());
    assert_eq!(h.core.epoch(), 2 + MAX_EPOCH_JUMP);
    assert_eq!(h.core.leader_id(), Some(3));
}

#[test]
fn vote_at_the_epoch_limit_is_refused() {
    let mut h = voter();
    let invalid = ErrorCode::INVALID_REQUEST;
    let vote = Harness::vote_request;
    assert_refused(
        &mut h,
        3,
        vote(3, Epoch::MAX, Epoch::MAX - 1, 1 << 40),
        invalid,
    );
    assert_refused(&mut h, 3, vote(3, MAX_PEER_EPOCH + 1, 1, 0), invalid);
    assert_refused(&mut h, 3, vote(3, 3 + MAX_EPOCH_JUMP, 1, 0), invalid);
    assert_refused(&mut h, 3, vote(3, 3, 1, MAX_OFFSET + 1), invalid);
    assert_refused(&mut h, 3, vote(3, 3, 1, i64::MAX), invalid);
    let (_, out) = h.request(3, vote(3, 3, 1, 0));
    assert!(vote_answer(&out).vote_granted, "a sane vote still works");
}

#[test]
fn a_sender_the_transport_knows_cannot_speak_for_another_voter() {
    let mut h = voter();
    let denied = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
    assert_refused(&mut h, 2, Harness::vote_request(3, 3, 1, 0), denied);
    assert_refused(&mut h, 2, Harness::begin_request(3, 3), denied);
    assert_refused(&mut h, 2, Harness::end_request(3, 2, &[1]), denied);
    assert_refused(&mut h, 2, Harness::fetch_request(3, 2, 0, 0, 0), denied);
}

#[test]
fn end_quorum_epoch_successors_are_bounded_and_only_voters_count() {
    let mut h = voter();
    let long: Vec<NodeId> = (0..=MAX_SUCCESSORS as NodeId).collect();
    let invalid = ErrorCode::INVALID_REQUEST;
    assert_refused(&mut h, 3, Harness::end_request(3, 2, &long), invalid);
    assert_refused(&mut h, 3, Harness::end_request(3, 2, &[2, -1]), invalid);
    assert_refused(
        &mut h,
        3,
        Harness::end_request(3, Epoch::MAX, &[1]),
        invalid,
    );
    // Padding the list with non-voters and duplicates does not push us back: we are second of
    // the voters named, so we wait the second position's delay (not the 100th's).
    let mut padded: Vec<NodeId> = vec![2, 2];
    padded.extend(100..200);
    padded.push(1);
    let (_, out) = h.request(3, Harness::end_request(3, 2, &padded));
    assert!(refusals(&out).is_empty());
    let at = h.now;
    let out = h.run_until(at + 600);
    assert_eq!(
        h.core.role(),
        Role::Candidate,
        "stood after a short delay: {out:?}"
    );
}

#[test]
fn fetches_with_impossible_fields_are_refused_and_a_fetch_past_the_end_diverges() {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    h.durable_all();
    let invalid = ErrorCode::INVALID_REQUEST;
    let fetch = Harness::fetch_request;
    assert_refused(&mut h, 2, fetch(2, 2, i64::MAX, 2, 0), invalid);
    assert_refused(&mut h, 2, fetch(2, 2, -1, 0, 0), invalid);
    assert_refused(&mut h, 2, fetch(2, 2, 1, 2, MAX_OFFSET + 1), invalid);
    assert_refused(&mut h, 2, fetch(2, 2, 1, 2, -2), invalid);
    assert_refused(&mut h, 2, fetch(-5, 2, 1, 2, 0), invalid);
    assert_refused(
        &mut h,
        2,
        fetch(2, 2 + MAX_EPOCH_JUMP + 1, 1, 2, 0),
        invalid,
    );
    assert_refused(&mut h, 2, fetch(2, 2, 1, 3, 0), invalid);
    // A fetch (and durable offset) far past the leader's end: told to truncate to the end,
    // never counted toward the high watermark.
    let end = h.core.log_end_offset();
    let (_, out) = h.request(2, fetch(2, 2, end + 1000, 2, end + 1000));
    let answers = responses(&out);
    let r = fetch_of(&answers[0].1);
    assert_eq!((r.next_fetch_offset, r.next_fetch_offset_epoch), (end, 2));
    let (_, out) = h.request(3, fetch(3, 2, end + 1000, 2, end + 1000));
    assert!(
        hw_outputs(&out).is_empty(),
        "no majority vouches for unwritten offsets"
    );
    assert_eq!(h.core.high_watermark(), None);
}

#[test]
fn a_parked_fetch_waits_no_longer_than_the_fetch_timeout() {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    h.durable_all();
    let end = h.core.log_end_offset();
    // An observer's fetch: it cannot move the high watermark, so nothing answers it early.
    let mut request = Harness::fetch_request(10, 2, end, 2, end);
    if let Request::FetchQuorumRecords(r) = &mut request {
        r.max_wait_ms = i32::MAX;
        r.is_follower = false;
    }
    let (id, out) = h.request(10, request);
    assert!(responses(&out).is_empty(), "parked");
    let timeout = config(1, VOTERS).fetch_timeout_ms;
    let out = h.run_until(h.now + timeout);
    assert!(
        responses(&out).iter().any(|(r, _)| *r == id),
        "answered by the fetch timeout"
    );
}

#[test]
fn the_leader_tracks_a_bounded_number_of_observers() {
    use crate::raft::leader::MAX_OBSERVERS;
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    h.durable_all();
    for id in 100..(100 + 3 * MAX_OBSERVERS as NodeId) {
        let mut request = Harness::fetch_request(id, 2, 0, 0, 0);
        if let Request::FetchQuorumRecords(r) = &mut request {
            r.is_follower = false;
        }
        h.request(id, request);
    }
    let (_, out) = h.request(-1, Request::DescribeQuorum(DescribeQuorumRequest {}));
    let Response::DescribeQuorum(d) = &responses(&out)[0].1 else {
        panic!("not DescribeQuorum");
    };
    assert_eq!(
        d.observers.len(),
        MAX_OBSERVERS,
        "the newest kept, the rest forgotten"
    );
    assert!(d
        .observers
        .iter()
        .any(|o| o.replica_id == 99 + 3 * MAX_OBSERVERS as NodeId));
}

/// The observers DescribeQuorum lists at `h.now`.
fn observers_at(h: &mut Harness) -> Vec<NodeId> {
    let (_, out) = h.request(-1, Request::DescribeQuorum(DescribeQuorumRequest {}));
    let Response::DescribeQuorum(d) = &responses(&out)[0].1 else {
        panic!("not DescribeQuorum: {out:?}");
    };
    d.observers.iter().map(|o| o.replica_id).collect()
}

/// An observer is listed for five minutes after its last fetch and not a millisecond longer
/// (the draft's expiry; caught: `5 * 60 * 1000` turned into `5 * 60 + 1000` or `5 + 60 * 1000`).
#[test]
fn an_observer_is_listed_for_five_minutes_after_its_last_fetch() {
    use crate::raft::leader::OBSERVER_EXPIRY_MS;
    assert_eq!(OBSERVER_EXPIRY_MS, 300_000);
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    h.durable_all();
    let mut request = Harness::fetch_request(9, 2, 0, 0, 0);
    if let Request::FetchQuorumRecords(r) = &mut request {
        r.is_follower = false;
    }
    h.request(9, request);
    let fetched_at = h.now;
    // The voters keep fetching every second so that the leader stays the leader.
    let keep_leading = |h: &mut Harness, until: TimeMs| {
        while h.now < until {
            h.now = (h.now + 1_000).min(until);
            h.tick();
            for voter in [2, 3] {
                h.request(voter, Harness::fetch_request(voter, 2, 0, 0, 0));
            }
        }
        assert_eq!(h.core.role(), Role::Leader);
    };
    keep_leading(&mut h, fetched_at + 299_999);
    assert_eq!(observers_at(&mut h), vec![9], "listed at 4:59.999");
    keep_leading(&mut h, fetched_at + 300_000);
    assert!(observers_at(&mut h).is_empty(), "forgotten at 5:00");
}

#[test]
fn responses_with_an_implausible_epoch_are_ignored() {
    let (mut h, correlation) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let to = 2;
    let answer = Harness::fetch_error_response(2, Epoch::MAX, 0, ErrorCode::FENCED_LEADER_EPOCH);
    let out = h.respond(to, correlation, Response::FetchQuorumRecords(answer));
    assert_eq!(refusals(&out).len(), 1, "{out:?}");
    assert!(persisted(&out).is_empty());
    assert_eq!((h.core.epoch(), h.core.role()), (2, Role::Follower));
}

#[test]
fn fetched_batches_with_impossible_offsets_are_not_appended() {
    let (mut h, correlation) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let to = 2;
    let mut bad = batch(0, 2, 1);
    bad.base_offset = i64::MAX;
    let answer = Harness::fetch_response(2, 2, vec![bad], 0);
    let out = h.respond(to, correlation, Response::FetchQuorumRecords(answer));
    assert!(log_ops(&out).is_empty(), "{out:?}");
    assert!(!has_fatal(&out));
    assert_eq!(h.core.log_end_offset(), 0);
}

/// Voter 1 with a wall clock (boot at 1,000,000 ms) and every voter's endpoint configured.
fn advertising_voter() -> Harness {
    let mut c = config(1, VOTERS);
    c.host = "127.0.0.1".into();
    c.port = 9091;
    c.boot_timestamp = 1_000_000;
    c.voter_endpoints = [2, 3]
        .iter()
        .map(|v| VoterEndpoint {
            voter_id: *v,
            boot_timestamp: 10,
            host: "127.0.0.1".into(),
            port: 9090 + v,
        })
        .collect();
    let mut h = Harness::new(c, Some(stored(2, -1, -1, VOTERS)), log(0, &[]));
    h.tick();
    h
}

#[test]
fn find_quorum_with_absurd_ports_or_boot_timestamps_is_refused() {
    let mut h = advertising_voter();
    let invalid = ErrorCode::INVALID_REQUEST;
    let future = 1_000_000 + MAX_BOOT_SKEW_MS + 1;
    assert_refused(
        &mut h,
        2,
        Harness::find_quorum_request(2, i64::MAX, 7000),
        invalid,
    );
    assert_refused(
        &mut h,
        2,
        Harness::find_quorum_request(2, future, 7000),
        invalid,
    );
    assert_refused(
        &mut h,
        2,
        Harness::find_quorum_request(2, -1, 7000),
        invalid,
    );
    assert_refused(
        &mut h,
        2,
        Harness::find_quorum_request(2, 20, 70_000),
        invalid,
    );
    assert_refused(&mut h, 2, Harness::find_quorum_request(2, 20, -5), invalid);
    assert_refused(
        &mut h,
        2,
        Harness::find_quorum_request(-9, 20, 7000),
        invalid,
    );
}

#[test]
fn find_quorum_from_another_cluster_teaches_and_tells_nothing() {
    let mut h = advertising_voter();
    let mut request = Harness::find_quorum_request(2, 20, 7000);
    if let Request::FindQuorum(r) = &mut request {
        r.cluster_id = "another".into();
    }
    let (_, out) = h.request(2, request);
    let Response::FindQuorum(r) = &responses(&out)[0].1 else {
        panic!("not FindQuorum");
    };
    assert_eq!(r.error, ErrorCode::INCONSISTENT_CLUSTER_ID);
    assert!(r.cluster_id.is_empty() && r.voters.is_empty() && r.leader_epoch == -1);
    assert!(probes(&out).is_empty());
}

#[test]
fn an_advertised_endpoint_is_used_only_when_it_vouches_for_itself() {
    let mut h = advertising_voter();
    // The one-packet hijack: "voter 2 restarted at port 7000". Probed there, not yet used.
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 20, 7000));
    let probe = probes(&out);
    assert_eq!(probe.len(), 1);
    assert!(!out.iter().any(|o| matches!(o, Output::EndpointChanged(_))));
    // Nobody answers there: the known endpoint stays.
    let out = h.step(Input::RequestFailed {
        to: 2,
        correlation: probe[0].0,
    });
    assert!(!out.iter().any(|o| matches!(o, Output::EndpointChanged(_))));
    // Again, and this time something else answers there (voter 3, which knows voter 2 at its
    // real address): still not used.
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 20, 7000));
    let probe = probes(&out);
    assert_eq!(probe.len(), 1, "a failed probe may be tried again");
    let impostor = Harness::find_quorum_response(
        CLUSTER,
        -1,
        2,
        vec![VoterEndpoint {
            voter_id: 2,
            boot_timestamp: 10,
            host: "127.0.0.1".into(),
            port: 9092,
        }],
    );
    let out = h.respond(2, probe[0].0, impostor);
    assert!(!out.iter().any(|o| matches!(o, Output::EndpointChanged(_))));
    // The probe's answer is believed for nothing else either: no epoch, no leader.
    assert_eq!((h.core.epoch(), h.core.leader_id()), (2, None));
    // Nothing in the answers this node gives names the unproven endpoint.
    let (_, out) = h.request(3, Harness::find_quorum_request(3, 10, 9093));
    let Response::FindQuorum(r) = &responses(&out)[0].1 else {
        panic!("not FindQuorum");
    };
    assert_eq!(r.voters[1].port, 9092);
}

#[test]
fn a_node_whose_epoch_is_at_the_limit_starts_alerts_and_carries_on() {
    for epoch in [MAX_PEER_EPOCH, Epoch::MAX] {
        let mut h = Harness::restarted(epoch, -1, -1);
        let out = h.tick();
        assert!(!has_fatal(&out));
        assert_eq!(alerts(&out).len(), 1, "told at start: {out:?}");
        // The election timer fires: no candidacy is possible, so an alert instead, and again
        // a minute later; never a fatal, never a persisted epoch beyond the limit.
        let out = h.run_until(h.now + 65_000);
        assert!(!has_fatal(&out), "{out:?}");
        assert!(persisted(&out).is_empty(), "{out:?}");
        let cannot: Vec<String> = alerts(&out)
            .into_iter()
            .filter(|a| a.contains("cannot stand for election"))
            .collect();
        assert!(cannot.len() >= 2, "{cannot:?}");
        assert_eq!((h.core.epoch(), h.core.role()), (epoch, Role::Unattached));
        // It still answers: a vote in a lower epoch is fenced, not a crash.
        let (vote, _) = h.ask_vote(2, 5, 1, 0);
        assert_eq!(vote.error, ErrorCode::FENCED_LEADER_EPOCH);
    }
}

#[test]
fn an_ordinary_start_alerts_nobody() {
    let mut h = Harness::restarted(7, -1, -1);
    let mut out = h.tick();
    out.extend(h.run_until(h.now + 5_000));
    assert!(alerts(&out).is_empty(), "{:?}", alerts(&out));
}

#[test]
fn an_epoch_past_the_warning_level_is_reported_once() {
    // Without pre-vote, so that a node nobody answers still raises its epoch.
    let mut h = Harness::restarted(EPOCH_WARNING, -1, -1).without_pre_vote();
    let out = h.tick();
    assert_eq!(alerts(&out).len(), 1, "{out:?}");
    let out = h.run_until(h.now + 5_000);
    assert!(alerts(&out).is_empty(), "once per start: {out:?}");
    assert!(h.core.epoch() > EPOCH_WARNING, "elections go on");
}

#[test]
fn a_node_left_far_behind_catches_up_through_the_answers_to_its_own_requests() {
    let (mut h, correlation) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let far = 2 + 3 * MAX_EPOCH_JUMP;
    // Unasked, such an epoch is refused...
    let (_, out) = h.request(3, Harness::begin_request(3, far));
    assert_eq!(refusals(&out).len(), 1);
    // ...but in the answer to its own fetch it is how the node learns where the others are.
    let answer = Harness::fetch_error_response(3, far, 0, ErrorCode::FENCED_LEADER_EPOCH);
    let out = h.respond(2, correlation, Response::FetchQuorumRecords(answer));
    assert!(refusals(&out).is_empty(), "{out:?}");
    assert_eq!((h.core.epoch(), h.core.leader_id()), (far, Some(3)));
}

#[test]
fn answers_that_contradict_the_known_leader_are_ignored_not_fatal() {
    // A spoofed BeginQuorumEpoch made node 1 follow 2 in epoch 5; node 2 (told, say, that 3
    // leads epoch 5) answers its fetch naming 3. Honest nodes never do this; the node must not
    // stop over it.
    let (mut h, correlation) = Harness::follower(1, VOTERS, 5, 2, log(0, &[]));
    let answer = Harness::fetch_error_response(3, 5, 0, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    let out = h.respond(2, correlation, Response::FetchQuorumRecords(answer));
    assert!(!has_fatal(&out), "{out:?}");
    assert_eq!(refusals(&out).len(), 1);
    assert_eq!((h.core.epoch(), h.core.leader_id()), (5, Some(2)));
    // One naming this node itself as the leader: ignored the same way.
    let out = h.run_until(h.now + 1_000);
    let Some((to, correlation, _)) = sends(&out).into_iter().next() else {
        panic!("the follower fetches again: {out:?}");
    };
    let answer = Harness::fetch_error_response(1, 5, 0, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    let out = h.respond(to, correlation, Response::FetchQuorumRecords(answer));
    assert!(!has_fatal(&out), "{out:?}");
    assert_eq!(refusals(&out).len(), 1);
    // The fetch timeout moves it on to a pre-vote round (nobody answers here, so the epoch
    // stays; with the others' grants it would stand in epoch 6).
    let out = h.run_until(h.now + 5_000);
    assert_eq!(h.core.role(), Role::Prospective);
    assert!(sends(&out)
        .iter()
        .any(|s| matches!(&s.2, Request::Vote(v) if v.pre_vote && v.candidate_epoch == 6)));
}

#[test]
fn appends_beyond_the_unflushed_limit_are_refused_until_the_disk_catches_up() {
    // A single voter: an append commits as soon as it is durable.
    let mut c = config(1, &[1]);
    c.max_unflushed_bytes = client_batch(4).len() * 2;
    let mut h = Harness::new(c, None, log(0, &[]));
    h.tick();
    h.durable_all();
    assert_eq!(h.core.role(), Role::Leader);
    let append = |h: &mut Harness, id| {
        let out = h.append(id, 4, Acks::Quorum);
        appends_done(&out)
    };
    assert!(append(&mut h, 1).is_empty(), "pending");
    assert!(append(&mut h, 2).is_empty(), "still within the limit");
    let refused = append(&mut h, 3);
    assert_eq!(
        append_refusal(&refused),
        Some((3, ErrorCode::REQUEST_TIMED_OUT)),
        "{refused:?}"
    );
    let out = h.durable_all();
    assert_eq!(appends_done(&out).len(), 2, "the first two commit");
    assert!(
        append(&mut h, 4).is_empty(),
        "taken again once the disk caught up"
    );
}

/// Caught: `unflushed > 0` turned into `>= 0` in `check_append`. One batch larger than the
/// unflushed limit still goes through when nothing is pending (else it never could), and the
/// next waits for the disk.
#[test]
fn a_batch_larger_than_the_unflushed_limit_goes_through_alone() {
    let mut c = config(1, &[1]);
    c.max_unflushed_bytes = client_batch(4).len() / 2;
    let mut h = Harness::new(c, None, log(0, &[]));
    h.tick();
    h.durable_all();
    let mut append = |id| appends_done(&h.append(id, 4, Acks::Quorum));
    assert!(append(1).is_empty(), "taken: nothing was pending");
    assert_eq!(
        append_refusal(&append(2)),
        Some((2, ErrorCode::REQUEST_TIMED_OUT)),
        "the next one waits for the disk"
    );
}

#[test]
fn appends_beyond_the_unflushed_op_limit_are_refused_too() {
    let mut c = config(1, &[1]);
    c.max_unflushed_ops = 3;
    let mut h = Harness::new(c, None, log(0, &[]));
    h.tick();
    h.durable_all();
    let mut refused = Vec::new();
    for id in 1..=5 {
        let out = h.append(id, 1, Acks::Quorum);
        refused.extend(appends_done(&out));
    }
    let ids: Vec<u64> = refused.iter().map(|r| r.0).collect();
    assert_eq!(ids, vec![4, 5], "three ops pending at most: {refused:?}");
    h.durable_all();
    let out = h.append(6, 1, Acks::Quorum);
    assert!(
        appends_done(&out).is_empty(),
        "taken once the disk caught up"
    );
}

/// Caught: each `-1` of `Request::refusal` and `FindQuorumResponse::telling_nothing` turned
/// into 1. The answer that refuses a sender tells it nothing, for every kind of request: no
/// leader, no epoch, no offsets, no records, no voters.
#[test]
fn a_refusal_tells_nothing_whatever_the_request() {
    let error = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
    let requests = [
        Harness::vote_request(2, 5, 4, 10),
        Harness::begin_request(2, 5),
        Harness::end_request(2, 5, &[1]),
        Harness::fetch_request(2, 5, 10, 4, 10),
        Harness::find_quorum_request(2, 100, 9092),
        Request::DescribeQuorum(DescribeQuorumRequest {}),
        Request::AlterQuorum(AlterQuorumRequest::new(
            CLUSTER,
            [(1, DirectoryId::ZERO)],
            1000,
        )),
    ];
    for request in requests {
        let refusal = request.refusal(error);
        let told = match &refusal {
            Response::Vote(r) => {
                assert!(!r.vote_granted);
                (r.error, r.leader_id, r.leader_epoch)
            }
            Response::BeginQuorumEpoch(r) => (r.error, r.leader_id, r.leader_epoch),
            Response::EndQuorumEpoch(r) => (r.error, r.leader_id, r.leader_epoch),
            Response::FetchQuorumRecords(r) => {
                assert_eq!(fetch_positions(r), (-1, -1, -1, -1, -1));
                assert!(r.batches.is_empty() && r.log_start.is_none());
                (r.error, r.leader_id, r.leader_epoch)
            }
            Response::FindQuorum(r) => {
                assert!(r.cluster_id.is_empty() && r.voters.is_empty());
                assert!(r.target_voters.is_none());
                (r.error, r.leader_id, r.leader_epoch)
            }
            Response::DescribeQuorum(r) => {
                assert_eq!(r.high_watermark, -1);
                assert!(r.current_voters.is_empty() && r.observers.is_empty());
                assert!(r.target_voters.is_none());
                (r.error, r.leader_id, r.leader_epoch)
            }
            Response::AlterQuorum(r) => {
                assert!(r.error_message.is_none() && r.target_voters.is_empty());
                (r.error, r.leader_id, r.leader_epoch)
            }
        };
        assert_eq!(told, (error, -1, -1), "{refusal:?}");
    }
}

/// Caught: the guard `len == bytes.len()` of `whole_batch_header` made true. A client append
/// whose bytes are a batch with more after it, or a batch cut short, is refused as corrupt.
#[test]
fn an_append_that_is_not_exactly_one_batch_is_corrupt() {
    let mut h = Harness::new(config(1, &[1]), None, log(0, &[]));
    h.tick();
    h.durable_all();
    assert_eq!(h.core.role(), Role::Leader);
    let whole = client_batch(2);
    let mut longer = whole.clone();
    longer.extend_from_slice(&[0, 0, 0]);
    let shorter = bytes::BytesMut::from(&whole[..whole.len() - 1]);
    for (id, batch) in [(1, longer), (2, shorter)] {
        let out = h.step(Input::ClientAppend {
            id,
            batch,
            record_count: 2,
            acks: Acks::Quorum,
        });
        assert_eq!(
            append_refusal(&appends_done(&out)).map(|(_, error)| error),
            Some(ErrorCode::CORRUPT_MESSAGE),
            "{out:?}"
        );
        assert!(log_ops(&out).is_empty());
    }
}
