//! Observers, FindQuorum and DescribeQuorum (docs/testing.md, "Behaviours the scenario tests
//! cover").

use super::harness::*;
use super::quorum_epoch::elect;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

fn find_response(leader: NodeId, epoch: Epoch) -> Response {
    Harness::find_quorum_response(CLUSTER, leader, epoch, Vec::new())
}

#[test]
fn observer_find_quorum_after_fetch_timeout() {
    let (mut h, _) = Harness::follower(4, VOTERS, 2, 2, log(0, &[]));
    let out = h.run_until(2_000);
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Unattached, None)
    );
    assert_eq!(find_sends(&out).len(), 1);
}

#[test]
fn observer_adopts_leader_from_find_quorum() {
    let mut h = Harness::fresh(4);
    let finds = find_sends(&h.tick());
    let out = h.respond(finds[0].0, finds[0].1, find_response(2, 3));
    assert_eq!(
        (h.core.role(), h.core.leader_id(), h.core.epoch()),
        (Role::Follower, Some(2), 3)
    );
    let fetch = sends(&out);
    assert_eq!(fetch.len(), 1);
    let r = fetch_req(&fetch[0].2);
    assert!(!r.is_follower, "observers fetch with is_follower = false");
}

/// An observer takes no epoch without a leader: a candidate's epoch it adopted could outlive
/// every voter that knew it (the candidate lost its disk) and leave it waiting for ever while
/// the cluster goes on in the older epoch (seed 60916122 of `--bootstrap-observers
/// --delete-state`). It asks again, and follows the epoch once an answer names its leader.
#[test]
fn an_observer_takes_no_epoch_without_a_leader() {
    let mut h = Harness::fresh(4);
    let finds = find_sends(&h.tick());
    h.respond(finds[0].0, finds[0].1, find_response(2, 3));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Follower, 3));
    let out = h.run_until(h.now + 2_000);
    assert_eq!(h.core.role(), Role::Unattached, "its leader went quiet");
    let finds = find_sends(&out);
    assert_eq!(finds.len(), 1);
    let out = h.respond(finds[0].0, finds[0].1, find_response(-1, 4));
    assert!(persisted(&out).is_empty(), "nothing stored: {out:?}");
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 3));
    let out = h.run_until(h.now + 1_000);
    let finds = find_sends(&out);
    assert!(!finds.is_empty(), "asks again after the backoff");
    h.respond(finds[0].0, finds[0].1, find_response(1, 4));
    assert_eq!(
        (h.core.role(), h.core.leader_id(), h.core.epoch()),
        (Role::Follower, Some(1), 4)
    );
}

/// A voter does adopt a newer epoch without a leader: it may vote in it.
#[test]
fn a_voter_adopts_an_epoch_without_a_leader() {
    let (mut h, c) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let r = Harness::fetch_error_response(-1, 3, -1, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    h.respond(2, c, Response::FetchQuorumRecords(r));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 3));
}

/// An observer that found its leader through FindQuorum leaves no FindQuorum retry behind: when
/// that leader stops answering, it asks again at once.
#[test]
fn an_observer_that_found_its_leader_asks_again_at_once_when_it_is_lost() {
    let mut h = Harness::fresh(4);
    let finds = find_sends(&h.tick());
    let out = h.respond(finds[0].0, finds[0].1, find_response(2, 3));
    assert!(!h.core.looking_for_quorum());
    let fetch = fetch_sends(&out);
    assert_eq!(fetch.len(), 1);
    let out = h.step(Input::RequestFailed {
        to: fetch[0].0,
        correlation: fetch[0].1,
    });
    assert_eq!(h.core.role(), Role::Unattached);
    assert_eq!(find_sends(&out).len(), 1, "asks at once");
}

#[test]
fn observer_find_quorum_failure() {
    let mut h = Harness::fresh(4);
    let first = find_sends(&h.tick());
    let out = h.step(Input::RequestFailed {
        to: first[0].0,
        correlation: first[0].1,
    });
    assert!(find_sends(&out).is_empty(), "retried only after a backoff");
    let out = h.run_until(100);
    let again = find_sends(&out);
    assert_eq!(again.len(), 1);
    assert_ne!(again[0].0, first[0].0, "another bootstrap server");
}

#[test]
fn observer_leader_rediscovery_after_broker_not_available_error() {
    let (mut h, c) = Harness::follower(4, VOTERS, 2, 2, log(0, &[]));
    let r = Harness::fetch_error_response(2, 2, -1, ErrorCode::BROKER_NOT_AVAILABLE);
    let out = h.respond(2, c, Response::FetchQuorumRecords(r));
    assert_eq!(h.core.role(), Role::Unattached);
    assert_eq!(find_sends(&out).len(), 1);
}

#[test]
fn observer_leader_rediscovery_after_request_timeout() {
    let mut c = config(4, VOTERS);
    c.request_timeout_ms = 500;
    let mut h = Harness::new(c, Some(stored(2, 2, -1, VOTERS)), log(0, &[]));
    h.tick();
    let out = h.run_until(500);
    assert_eq!(h.core.role(), Role::Unattached);
    assert_eq!(find_sends(&out).len(), 1);
}

#[test]
fn leader_handles_find_quorum() {
    let (mut h, _) = elect(2);
    let (_, out) = h.request(
        4,
        Request::FindQuorum(FindQuorumRequest {
            cluster_id: CLUSTER.into(),
            replica_id: 4,
            boot_timestamp: 1,
            host: "h".into(),
            port: 1,
        }),
    );
    match &responses(&out)[0].1 {
        Response::FindQuorum(r) => {
            assert_eq!(
                (r.error, r.leader_id, r.leader_epoch),
                (ErrorCode::NONE, 1, 2)
            );
            assert_eq!(r.cluster_id, CLUSTER);
            assert_eq!(
                r.voters.iter().map(|v| v.voter_id).collect::<Vec<_>>(),
                vec![1, 2, 3]
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Leader 1 of epoch 2 at time 10: voter 2 reached its end (1), voter 3 never fetched,
/// observer 9 fetched from 0.
fn leader_fetched_by_2_and_observer_9() -> Harness {
    let (mut h, _) = elect(2);
    h.durable_all();
    h.run_until(10);
    h.request(2, Harness::fetch_request(2, 2, 1, 2, 1));
    let mut obs = Harness::fetch_request(9, 2, 0, 0, 0);
    if let Request::FetchQuorumRecords(r) = &mut obs {
        r.is_follower = false;
        r.replica_directory_id = OBSERVER_9_DIRECTORY;
    }
    h.request(9, obs);
    h
}

const OBSERVER_9_DIRECTORY: DirectoryId = DirectoryId([9; 16]);

#[test]
fn describe_quorum_on_leader() {
    let mut h = leader_fetched_by_2_and_observer_9();
    let (_, out) = h.request(0, Request::DescribeQuorum(DescribeQuorumRequest {}));
    match &responses(&out)[0].1 {
        Response::DescribeQuorum(r) => {
            assert_eq!(
                (r.error, r.leader_id, r.leader_epoch, r.high_watermark),
                (ErrorCode::NONE, 1, 2, 1)
            );
            let leos: Vec<(NodeId, Offset)> = r
                .current_voters
                .iter()
                .map(|v| (v.replica_id, v.log_end_offset))
                .collect();
            assert_eq!(leos, vec![(1, 1), (2, 1), (3, -1)]);
            assert_eq!(r.current_voters[1].last_fetch_timestamp, 10);
            // Directory ids as each replica's fetch named them (2's named none, 3 never
            // fetched).
            let directory =
                |l: &[ReplicaState]| l.iter().map(|v| v.directory_id).collect::<Vec<_>>();
            assert_eq!(
                directory(&r.current_voters[1..]),
                vec![DirectoryId::ZERO, DirectoryId::ZERO]
            );
            assert_eq!(directory(&r.observers), vec![OBSERVER_9_DIRECTORY]);
            assert_eq!(
                r.observers.iter().map(|o| o.replica_id).collect::<Vec<_>>(),
                vec![9]
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Kafka's LastFetchTimestamp and LastCaughtUpTimestamp are wall-clock ms since the Unix epoch:
/// the core's times shifted by the boot time the driver gave it; unknown stays -1.
#[test]
fn describe_quorum_times_are_on_the_wall_clock_and_unknown_stays_unknown() {
    const BOOT: i64 = 1_700_000_000_000;
    let mut h = leader_fetched_by_2_and_observer_9();
    h.core.config.boot_timestamp = BOOT;
    let (_, out) = h.request(0, Request::DescribeQuorum(DescribeQuorumRequest {}));
    let Response::DescribeQuorum(r) = &responses(&out)[0].1 else {
        panic!("{out:?}");
    };
    let times = |list: &[ReplicaState]| -> Vec<(i64, i64)> {
        list.iter()
            .map(|r| (r.last_fetch_timestamp, r.last_caught_up_timestamp))
            .collect()
    };
    // The leader (now: 10), voter 2 (caught up at 10), voter 3 (never fetched).
    assert_eq!(
        times(&r.current_voters),
        [(BOOT + 10, BOOT + 10), (BOOT + 10, BOOT + 10), (-1, -1)]
    );
    // Observer 9 fetched at 10 from behind the leader's end.
    assert_eq!(times(&r.observers), [(BOOT + 10, -1)]);
}

#[test]
fn replica_view_counts_voters_caught_up_within_the_fetch_timeout() {
    let mut h = leader_fetched_by_2_and_observer_9();
    let view = h.core.replica_view().expect("leads");
    assert_eq!(view.in_sync, vec![1, 2]);
    assert_eq!(view.observers, vec![9]);
    // Past the fetch timeout without another caught-up fetch, voter 2 leaves the in-sync set.
    let timeout = h.core.config.fetch_timeout_ms;
    h.run_until(10 + timeout + 1);
    // Voter 3 fetches from behind (offset 0 < the leader's end 1): counted alive, not in sync.
    h.request(3, Harness::fetch_request(3, 2, 0, 0, 0));
    let view = h.core.replica_view().expect("still leads");
    assert_eq!(view.in_sync, vec![1]);
}

#[test]
fn replica_view_is_none_off_the_leader() {
    let (h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    assert_eq!(h.core.replica_view(), None);
}

#[test]
fn describe_quorum_on_non_leader() {
    let (mut h, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let (_, out) = h.request(0, Request::DescribeQuorum(DescribeQuorumRequest {}));
    match &responses(&out)[0].1 {
        Response::DescribeQuorum(r) => {
            assert_eq!(
                (r.error, r.leader_id, r.leader_epoch),
                (ErrorCode::NOT_QUORUM_LEADER, 2, 2)
            );
        }
        other => panic!("{other:?}"),
    }
}

pub(super) fn endpoint(id: NodeId, boot: i64, port: i32) -> VoterEndpoint {
    VoterEndpoint {
        voter_id: id,
        boot_timestamp: boot,
        host: "127.0.0.1".into(),
        port,
    }
}

/// A voter that advertises itself and knows every voter's endpoint from its configuration.
pub(super) fn advertising_config(id: NodeId) -> RaftConfig {
    let mut c = config(id, VOTERS);
    c.host = "127.0.0.1".into();
    c.port = 9090 + id;
    c.boot_timestamp = 100;
    c.voter_endpoints = VOTERS
        .iter()
        .filter(|v| **v != id)
        .map(|v| endpoint(*v, 0, 9090 + v))
        .collect();
    c
}

/// Node 1 with [`advertising_config`], a fresh disk and an empty log, after its first tick.
fn advertising_node_1() -> Harness {
    let mut h = Harness::new(advertising_config(1), None, log(0, &[]));
    h.tick();
    h
}

#[test]
fn leader_handles_find_quorum_with_endpoints_and_boot_timestamps() {
    let mut h = advertising_node_1();
    // A voter restarted on another port with a newer boot timestamp: probed there, then
    // adopted and the driver told.
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 500, 7777));
    assert!(endpoint_changes(&out).is_empty(), "not before the probe");
    assert_eq!(
        probes(&out).iter().map(|p| &p.1).collect::<Vec<_>>(),
        vec![&endpoint(2, 500, 7777)]
    );
    let Response::FindQuorum(r) = &responses(&out)[0].1 else {
        panic!("not a FindQuorum response");
    };
    assert_eq!(r.voters[1], endpoint(2, 0, 9092), "still the old endpoint");
    let vouched = h.vouch_all(&out);
    assert_eq!(endpoint_changes(&vouched), vec![endpoint(2, 500, 7777)]);
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 500, 7777));
    assert!(probes(&out).is_empty(), "known now: nothing to probe");
    let Response::FindQuorum(r) = &responses(&out)[0].1 else {
        panic!("not a FindQuorum response");
    };
    assert_eq!(
        r.voters,
        vec![
            endpoint(1, 100, 9091),
            endpoint(2, 500, 7777),
            endpoint(3, 0, 9093)
        ]
    );
    // An older advertisement of the same voter never replaces the newer one.
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 400, 6666));
    assert!(endpoint_changes(&out).is_empty());
    // An observer's advertisement is not a voter endpoint.
    let (_, out) = h.request(4, Harness::find_quorum_request(4, 900, 5555));
    assert!(endpoint_changes(&out).is_empty());
}

#[test]
fn unknown_voter_endpoints_keep_find_quorum_going_until_known() {
    let mut c = advertising_config(1);
    c.voter_endpoints.retain(|e| e.voter_id != 3); // voter 3's address is unknown
    let mut h = Harness::new(c, None, log(0, &[]));
    let finds = find_sends(&h.tick());
    assert_eq!(finds.len(), 1);
    assert_eq!(finds[0].0, 2, "asks a voter it can reach");
    // The answer does not know voter 3 either: ask again after a backoff.
    let mut answer = find_response(-1, 1);
    if let Response::FindQuorum(r) = &mut answer {
        r.voters = vec![endpoint(2, 0, 9092)];
    }
    h.respond(finds[0].0, finds[0].1, answer);
    let out = h.run_until(h.now + 2_000);
    let mut again = find_sends(&out);
    assert!(!again.is_empty(), "keeps asking while voter 3 is unknown");
    // The newest one is in flight (a role change forgets the older ones).
    again.reverse();
    // Once an answer names voter 3, the driver learns it and the asking stops.
    let mut answer = find_response(-1, 1);
    if let Response::FindQuorum(r) = &mut answer {
        r.voters = vec![endpoint(3, 7, 9093)];
    }
    let out = h.respond(again[0].0, again[0].1, answer);
    let out = h.vouch_all(&out);
    assert_eq!(endpoint_changes(&out), vec![endpoint(3, 7, 9093)]);
    let later = h.run_until(h.now + 5_000);
    assert!(
        find_sends(&later).is_empty(),
        "no FindQuorum once every endpoint is known"
    );
}

// ----- how an answer is judged first (common_response) -----

/// Node 1, a candidate of epoch 5 without pre-vote, with its Vote to voter 2 in flight:
/// the harness and that request's correlation.
fn candidate_asking_2() -> (Harness, Correlation) {
    let mut h = Harness::restarted(5, -1, 1).without_pre_vote();
    let votes = sends(&h.tick());
    let (_, c, _) = votes.into_iter().find(|s| s.0 == 2).expect("a vote to 2");
    (h, c)
}

/// Caught: `||` turned into `&&` between the two errors that stop the node (each alone stops
/// it), and the `INVALID_REQUEST` arm deleted (it would be retried instead).
#[test]
fn another_clusters_answer_a_refused_authorization_or_an_invalid_request_stops_the_node() {
    for error in [
        ErrorCode::INCONSISTENT_CLUSTER_ID,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode::INVALID_REQUEST,
    ] {
        let (mut h, c) = candidate_asking_2();
        let out = h.respond(2, c, Harness::vote_response(error, -1, 5, false));
        assert!(has_fatal(&out), "{error}: {out:?}");
    }
    // A busy peer is asked again instead.
    let (mut h, c) = candidate_asking_2();
    let out = h.respond(
        2,
        c,
        Harness::vote_response(ErrorCode::BROKER_NOT_AVAILABLE, -1, 5, false),
    );
    assert!(!has_fatal(&out), "{out:?}");
}

/// Caught: `epoch < self.qs.epoch() || error == UNKNOWN_LEADER_EPOCH` turned into `&&`. A
/// vote granted in an older epoch elects nobody, and an answer of UNKNOWN_LEADER_EPOCH is
/// dropped, not retried.
#[test]
fn a_vote_granted_in_an_older_epoch_or_unknown_leader_epoch_counts_for_nothing() {
    let (mut h, c) = candidate_asking_2();
    h.respond(2, c, Harness::vote_response(ErrorCode::NONE, -1, 4, true));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 5));

    let (mut h, c) = candidate_asking_2();
    let out = h.respond(
        2,
        c,
        Harness::vote_response(ErrorCode::UNKNOWN_LEADER_EPOCH, -1, 5, false),
    );
    assert!(out.is_empty(), "{out:?}");
    let out = h.run_until(h.now + 200);
    assert!(
        !sends(&out).iter().any(|s| s.0 == 2),
        "not asked again: {out:?}"
    );
}

// ----- endpoints: what is probed, and what a probe's answer must say -----

/// Node 1 (advertising) with voter 2's advertisement of 127.0.0.1:7777 (boot 500) under
/// probe: the harness and the probe's correlation.
fn probing_2() -> (Harness, Correlation) {
    let mut h = advertising_node_1();
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 500, 7777));
    let probe = probes(&out);
    assert_eq!(probe.len(), 1, "{out:?}");
    (h, probe[0].0)
}

/// Does a probe of voter 2 answered with `error`, `cluster` and `listed` make its endpoint
/// the one used?
fn probe_confirms(error: ErrorCode, cluster: &str, listed: Vec<VoterEndpoint>) -> bool {
    let (mut h, probe) = probing_2();
    let answer = Response::FindQuorum(FindQuorumResponse {
        error,
        cluster_id: cluster.into(),
        leader_id: -1,
        leader_epoch: 0,
        voters: listed,
        target_voters: None,
    });
    !endpoint_changes(&h.respond(2, probe, answer)).is_empty()
}

/// Caught: `||` turned into `&&` in the answer check of `handle_probe_response`, and each of
/// the first three `&&` of its vouching entry turned into `||`. Only an answer without error,
/// of this cluster, listing voter 2's own id at the probed host and port confirms it.
#[test]
fn a_probe_confirms_only_the_voters_own_entry_at_the_probed_address_in_a_good_answer() {
    let at = |id: NodeId, host: &str, port: i32| VoterEndpoint {
        voter_id: id,
        boot_timestamp: 500,
        host: host.into(),
        port,
    };
    let own = at(2, "127.0.0.1", 7777);
    assert!(probe_confirms(ErrorCode::NONE, CLUSTER, vec![own.clone()]));
    assert!(!probe_confirms(
        ErrorCode::BROKER_NOT_AVAILABLE,
        CLUSTER,
        vec![own.clone()]
    ));
    assert!(!probe_confirms(ErrorCode::NONE, "another", vec![own]));
    for wrong in [
        at(3, "127.0.0.1", 7777),
        at(2, "127.0.0.2", 7777),
        at(2, "127.0.0.1", 7778),
    ] {
        assert!(
            !probe_confirms(ErrorCode::NONE, CLUSTER, vec![wrong.clone()]),
            "{wrong:?}"
        );
    }
}

/// Caught: `&&` turned into `||` in `learn_endpoint`'s "another voter", and the first `||`
/// of its guard into `&&`. An advertisement under this node's own id, or of a node no set
/// names, is never probed.
#[test]
fn only_another_voters_advertisement_is_probed() {
    let mut h = advertising_node_1();
    let (_, out) = h.request(2, Harness::find_quorum_request(1, 500, 7777));
    assert!(probes(&out).is_empty(), "own id: {out:?}");
    let (_, out) = h.request(9, Harness::find_quorum_request(9, 500, 7779));
    assert!(probes(&out).is_empty(), "no set names 9: {out:?}");
    // Voter 2's is.
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 500, 7777));
    assert_eq!(probes(&out).len(), 1, "{out:?}");
}

/// Caught: `&&` turned into `||` in `own_endpoint_outside_the_set`. A voter vouches for its
/// endpoint in its voter list only: its answers carry no TargetVoters of its own.
#[test]
fn a_voter_lists_its_endpoint_among_the_voters_only() {
    let mut h = advertising_node_1();
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 0, 9092));
    let Response::FindQuorum(r) = &responses(&out)[0].1 else {
        panic!("{out:?}");
    };
    assert_eq!(r.voters[0], endpoint(1, 100, 9091));
    assert_eq!(r.target_voters, None);
}

/// Caught: `cluster_id_of` made to return None (every request would be admitted as of this
/// cluster). A Vote of another cluster whose epoch is also past the limit is told
/// INCONSISTENT_CLUSTER_ID, the error its operator needs to see.
#[test]
fn another_clusters_request_is_told_so_before_anything_else_is_checked() {
    let mut h = Harness::fresh(1);
    h.tick();
    let Request::Vote(v) = Harness::vote_request(2, i32::MAX, 0, 0) else {
        unreachable!()
    };
    let (_, out) = h.request(
        2,
        Request::Vote(VoteRequest {
            cluster_id: "another".into(),
            ..v
        }),
    );
    assert_eq!(vote_answer(&out).error, ErrorCode::INCONSISTENT_CLUSTER_ID);
}

/// Caught: `request_name` made to return "" or "xyzzy". A refused request is reported with
/// its name, for the operator.
#[test]
fn a_refused_request_is_reported_by_name() {
    let mut h = Harness::fresh(1);
    h.tick();
    let (_, out) = h.request(2, Harness::vote_request(2, i32::MAX, 0, 0));
    let reason = out
        .iter()
        .find_map(|o| match o {
            Output::Refused { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("reported");
    assert!(reason.starts_with("Vote: "), "{reason}");
}

/// Caught: the `-1`s of DescribeQuorum turned into 1: a follower's answer has no high
/// watermark, nor does a new leader's before one is known; a target voter the leader has not
/// heard from has no log end offset and no timestamps.
#[test]
fn describe_quorum_says_minus_one_for_what_it_does_not_know() {
    use super::reassign::describe;
    let (mut follower, _) = Harness::follower(1, VOTERS, 2, 2, log(0, &[]));
    let r = describe(&mut follower);
    assert_eq!(
        (r.error, r.high_watermark),
        (ErrorCode::NOT_QUORUM_LEADER, -1)
    );

    let (mut h, _) = elect(2);
    let r = describe(&mut h);
    assert_eq!((r.error, r.high_watermark), (ErrorCode::NONE, -1));
    // Leader of {1, 2} moving to {1, 2, 3}: voter 3 has not fetched from it.
    let mut h = super::reassign::leader_of_1_and_2_moving_to(&[1, 2, 3]);
    let r = describe(&mut h);
    let target = r.target_voters.expect("a reassignment in progress");
    let three = target.iter().find(|s| s.replica_id == 3).expect("3 listed");
    assert_eq!(
        (
            three.log_end_offset,
            three.last_fetch_timestamp,
            three.last_caught_up_timestamp
        ),
        (-1, -1, -1)
    );
}

/// The `Output::Refused` reports of `out`: (request, peer, reason).
fn refused(out: &[Output]) -> Vec<(Option<RequestId>, Option<NodeId>, String)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Refused {
                request,
                peer,
                reason,
            } => Some((*request, *peer, reason.clone())),
            _ => None,
        })
        .collect()
}

/// An answer of another API than its request's is never dropped unseen: it is reported (as a
/// refused response of that peer, which the node logs and counts), and the request is taken as
/// failed, so the search goes on after the usual backoff instead of waiting for nothing.
#[test]
fn an_answer_of_the_wrong_kind_is_reported_and_its_request_taken_as_failed() {
    let mut h = Harness::fresh(4);
    let first = find_sends(&h.tick());
    let (to, correlation) = first[0];
    let wrong = Harness::vote_response(ErrorCode::NONE, 2, 3, true);
    let out = h.respond(to, correlation, wrong);
    assert_eq!(
        refused(&out),
        vec![(
            None,
            Some(to),
            "a response of the wrong kind: a Vote answer to a FindQuorum request".to_owned()
        )]
    );
    assert!(!has_fatal(&out));
    assert_eq!(
        (h.core.role(), h.core.leader_id(), h.core.epoch()),
        (Role::Unattached, None, 0),
        "nothing learned from it"
    );
    assert!(find_sends(&out).is_empty(), "retried only after a backoff");
    let again = find_sends(&h.run_until(100));
    assert_eq!(again.len(), 1, "the search goes on");
    assert_ne!(again[0].0, to, "another bootstrap server");
    // The same answer again is unmatched now (its request is gone): nothing happens.
    let wrong = Harness::vote_response(ErrorCode::NONE, 2, 3, true);
    assert!(h.respond(to, correlation, wrong).is_empty());
}

/// An observer's fetch answered with a FindQuorum: reported, nothing taken from it, and the
/// fetch failed as if the connection had dropped (the observer looks for the quorum again).
#[test]
fn a_fetch_answered_with_another_api_is_reported_and_taken_as_failed() {
    let (mut h, c) = Harness::follower(4, VOTERS, 2, 2, log(0, &[]));
    let out = h.respond(2, c, find_response(3, 9));
    let reports = refused(&out);
    assert_eq!(reports.len(), 1, "{out:?}");
    assert_eq!((reports[0].0, reports[0].1), (None, Some(2)));
    assert!(
        reports[0]
            .2
            .contains("a FindQuorum answer to a FetchQuorumRecords request"),
        "{}",
        reports[0].2
    );
    assert!(!has_fatal(&out));
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.leader_id()),
        (Role::Unattached, 2, None),
        "neither the answer's epoch nor its leader is taken"
    );
    assert_eq!(find_sends(&out).len(), 1, "as after a failed fetch");
}
