//! An observer started with bootstrap servers only (no `quorum.voters`): it learns the voter set,
//! the voters' endpoints and the leader through FindQuorum (docs/protocol.md section 9), persists
//! the voter set, and from then on is an ordinary observer.

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];
const OBSERVER: NodeId = 4;

/// An observer that knows nothing but `servers` bootstrap servers.
fn bootstrap_config(id: NodeId, servers: usize) -> RaftConfig {
    let mut c = config(id, &[]);
    c.bootstrap_servers = servers;
    c
}

fn endpoint(id: NodeId) -> VoterEndpoint {
    VoterEndpoint {
        voter_id: id,
        boot_timestamp: 10,
        host: "127.0.0.1".into(),
        port: 9090 + id,
    }
}

fn answer(cluster: &str, leader: NodeId, epoch: Epoch, voters: &[NodeId]) -> Response {
    let voters = voters.iter().map(|v| endpoint(*v)).collect();
    Harness::find_quorum_response(cluster, leader, epoch, voters)
}

/// Starts a bootstrap-only observer and answers its first FindQuorum with `response`.
fn first_answer(servers: usize, response: Response) -> (Harness, Vec<Output>) {
    let mut h = Harness::new(bootstrap_config(OBSERVER, servers), None, log(0, &[]));
    let out = h.tick();
    assert_eq!(persisted(&out)[0].current_voters, Vec::<NodeId>::new());
    let (to, correlation) = find_to_bootstrap_server(&out, 0, "asks a bootstrap server");
    let out = h.respond(to, correlation, response);
    (h, out)
}

/// The one FindQuorum in `out`, which goes to bootstrap server `index` (`which` names it in the
/// failure): (to, correlation).
fn find_to_bootstrap_server(out: &[Output], index: usize, which: &str) -> (NodeId, Correlation) {
    let finds = find_sends(out);
    assert_eq!(finds.len(), 1);
    assert_eq!(finds[0].0, bootstrap_server_id(index), "{which}");
    finds[0]
}

#[test]
fn starts_without_voters_and_asks_a_bootstrap_server() {
    let mut h = Harness::new(bootstrap_config(OBSERVER, 2), None, log(0, &[]));
    assert!(h.core.voters().is_empty());
    assert!(h.core.is_observer());
    let out = h.tick();
    assert_eq!(h.core.role(), Role::Unattached);
    assert_eq!(
        find_sends(&out),
        vec![(bootstrap_server_id(0), find_sends(&out)[0].1)]
    );
    assert_eq!(sends(&out).len(), 1, "nothing but FindQuorum");
    // Quiet afterwards: no election, no second FindQuorum while the first is in flight.
    let out = h.run_until(h.now + 100);
    assert!(sends(&out).is_empty());
}

#[test]
fn adopts_voters_and_leader_then_fetches_as_an_observer() {
    let (h, out) = first_answer(1, answer(CLUSTER, 2, 3, VOTERS));
    // The voter set is durable before the node acts on it (it follows and fetches).
    let first_persist = position(&out, is_persist).expect("the voter set is persisted");
    assert_eq!(persisted(&out)[0].current_voters, VOTERS.to_vec());
    let fetch_at = position(&out, |o| matches!(o, Output::Send { .. })).expect("a fetch");
    assert!(first_persist < fetch_at);
    assert_eq!(h.core.voters(), VOTERS);
    assert!(h.core.is_observer());
    assert_eq!(
        (h.core.role(), h.core.leader_id(), h.core.epoch()),
        (Role::Follower, Some(2), 3)
    );
    let fetch = sends(&out);
    assert_eq!(fetch.len(), 1);
    assert_eq!(fetch[0].0, 2, "fetches from the leader");
    assert!(!fetch_req(&fetch[0].2).is_follower, "as an observer");
    let last = persisted(&out).pop().unwrap();
    assert_eq!((last.epoch, last.leader_id, last.voted_id), (3, 2, -1));
    assert_eq!(last.current_voters, VOTERS.to_vec());
}

#[test]
fn restart_takes_the_voter_set_from_the_quorum_state_file() {
    let (_, out) = first_answer(1, answer(CLUSTER, 2, 3, VOTERS));
    let stored_state = persisted(&out).pop().unwrap();
    let mut h = Harness::new(
        bootstrap_config(OBSERVER, 1),
        Some(stored_state),
        log(0, &[]),
    );
    assert_eq!(h.core.voters(), VOTERS);
    let out = h.tick();
    assert!(
        persisted(&out).is_empty(),
        "nothing changed: nothing to write"
    );
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Follower, Some(2))
    );
    let fetch = sends(&out);
    assert_eq!((fetch.len(), fetch[0].0), (1, 2));
}

#[test]
fn restart_without_endpoints_asks_the_bootstrap_servers_again() {
    // A real node advertises itself; after a restart it knows the voter ids (from the file)
    // but none of their endpoints, so the voters are unreachable: back to bootstrap servers.
    let mut c = bootstrap_config(OBSERVER, 2);
    c.host = "127.0.0.1".into();
    c.port = 9094;
    let mut h = Harness::new(c, Some(stored(3, -1, -1, VOTERS)), log(0, &[]));
    let (to, correlation) = find_to_bootstrap_server(&h.tick(), 0, "the first one");
    let out = h.respond(to, correlation, answer(CLUSTER, 1, 3, VOTERS));
    assert!(endpoint_changes(&out).is_empty(), "not before a probe");
    let probed: Vec<NodeId> = probes(&out).iter().map(|p| p.1.voter_id).collect();
    assert_eq!(probed, VOTERS.to_vec());
    let out = h.vouch_all(&out);
    let changed: Vec<NodeId> = endpoint_changes(&out).iter().map(|e| e.voter_id).collect();
    assert_eq!(
        changed,
        VOTERS.to_vec(),
        "the driver learns them once each answered for itself"
    );
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Follower, Some(1))
    );
    // Fetching times out: rediscovery now asks the voters themselves, not a bootstrap server.
    let out = h.run_until(h.now + 2_000);
    assert_eq!(h.core.role(), Role::Unattached);
    let finds = find_sends(&out);
    assert_eq!(finds.len(), 1);
    assert!(VOTERS.contains(&finds[0].0), "{finds:?}");
}

#[test]
fn bootstrap_server_that_knows_no_leader_is_asked_again_after_a_backoff() {
    // The bootstrap server is an observer that knows the voters but not the leader yet.
    let (mut h, out) = first_answer(1, answer(CLUSTER, -1, 0, VOTERS));
    assert_eq!(h.core.voters(), VOTERS, "the voter set is adopted anyway");
    assert_eq!(persisted(&out).len(), 1);
    assert_eq!(h.core.role(), Role::Unattached);
    assert!(sends(&out).is_empty(), "not at once: after a backoff");
    let out = h.run_until(h.now + 100);
    let finds = find_sends(&out);
    assert_eq!(finds.len(), 1, "asked again");
    assert!(VOTERS.contains(&finds[0].0), "now a voter: {finds:?}");
    let out = h.respond(finds[0].0, finds[0].1, answer(CLUSTER, 3, 5, VOTERS));
    assert_eq!(
        (h.core.role(), h.core.leader_id(), h.core.epoch()),
        (Role::Follower, Some(3), 5)
    );
    assert_eq!(sends(&out)[0].0, 3);
}

#[test]
fn bootstrap_server_that_knows_nothing_teaches_nothing() {
    // Another bootstrap-only observer that has not learned anything yet answers no voters.
    let (mut h, out) = first_answer(2, answer(CLUSTER, -1, 0, &[]));
    assert!(h.core.voters().is_empty());
    assert!(persisted(&out).is_empty());
    let out = h.run_until(h.now + 100);
    let (to, correlation) = find_to_bootstrap_server(&out, 1, "the next bootstrap server");
    h.respond(to, correlation, answer(CLUSTER, 2, 1, VOTERS));
    assert_eq!(h.core.voters(), VOTERS);
    assert_eq!(h.core.role(), Role::Follower);
}

#[test]
fn an_answer_with_impossible_voter_ids_is_not_adopted() {
    let (mut h, out) = first_answer(1, answer(CLUSTER, -1, 0, &[1, -7]));
    assert!(!has_fatal(&out));
    assert!(h.core.voters().is_empty());
    assert!(persisted(&out).is_empty());
    let finds = find_sends(&h.run_until(h.now + 100));
    assert_eq!(finds.len(), 1, "asked again");
}

#[test]
fn failed_bootstrap_server_is_retried_on_the_next_one_with_backoff() {
    let mut h = Harness::new(bootstrap_config(OBSERVER, 3), None, log(0, &[]));
    let mut asked = Vec::new();
    let finds = find_sends(&h.tick());
    let (mut to, mut correlation) = finds[0];
    for _ in 0..6 {
        asked.push(to);
        let out = h.step(Input::RequestFailed { to, correlation });
        assert!(find_sends(&out).is_empty(), "never at once");
        let out = h.run_until(h.now + 500);
        let finds = find_sends(&out);
        assert_eq!(finds.len(), 1, "exactly one FindQuorum at a time");
        (to, correlation) = finds[0];
    }
    let expected: Vec<NodeId> = (0..6).map(|i| bootstrap_server_id(i % 3)).collect();
    assert_eq!(asked, expected, "round robin over the bootstrap servers");
}

#[test]
fn wrong_cluster_id_is_fatal_and_nothing_is_adopted() {
    let (h, out) = first_answer(1, answer("another-cluster", 2, 3, VOTERS));
    assert!(has_fatal(&out));
    let Some(Output::Fatal(message)) = out.iter().find(|o| matches!(o, Output::Fatal(_))) else {
        unreachable!()
    };
    assert!(message.contains("another-cluster"), "{message}");
    assert!(message.contains(CLUSTER), "{message}");
    // The peer by its place in the list (mutant: `describe_peer` made to return "" or "xyzzy").
    assert!(
        message.contains(": FindQuorum to bootstrap server #0 answered"),
        "{message}"
    );
    assert!(persisted(&out).is_empty(), "nothing persisted");
    assert!(h.core.voters().is_empty(), "nothing adopted");
    assert_eq!(h.core.next_deadline(), None, "the core stopped");
}

#[test]
fn an_unknown_voter_set_needs_bootstrap_servers() {
    let err = RaftCore::new(config(OBSERVER, &[]), None, log(0, &[]), 0).err();
    assert!(matches!(err, Some(InitError::InvalidConfig(_))), "{err:?}");
    let err = RaftCore::new(
        config(OBSERVER, &[]),
        Some(stored(2, -1, -1, &[])),
        log(0, &[]),
        0,
    )
    .err();
    assert!(matches!(err, Some(InitError::InvalidConfig(_))), "{err:?}");
    // A file with a leader but no voter set was not written by this core.
    let err = RaftCore::new(
        bootstrap_config(OBSERVER, 1),
        Some(stored(2, 1, -1, &[])),
        log(0, &[]),
        0,
    )
    .err();
    assert!(
        matches!(err, Some(InitError::InvalidStoredState(_))),
        "{err:?}"
    );
}

#[test]
fn the_stored_voters_win_over_configured_ones() {
    // `quorum.voters` only bootstraps an empty log: after a reassignment it is out of date,
    // and the file and the log say the set (docs/protocol.md, "The voter set lives in the log").
    let mut c = config(OBSERVER, &[1, 2]);
    c.bootstrap_servers = 1;
    let core = RaftCore::new(c, Some(stored(2, -1, -1, VOTERS)), log(0, &[]), 0).unwrap();
    assert_eq!(core.voters(), VOTERS);
}

#[test]
fn a_node_without_a_voter_set_answers_find_quorum_with_none() {
    let mut h = Harness::new(bootstrap_config(OBSERVER, 1), None, log(0, &[]));
    h.tick();
    let (_, out) = h.request(
        5,
        Request::FindQuorum(FindQuorumRequest {
            cluster_id: CLUSTER.into(),
            replica_id: 5,
            boot_timestamp: 1,
            host: "127.0.0.1".into(),
            port: 9095,
        }),
    );
    let Response::FindQuorum(r) = &responses(&out)[0].1 else {
        panic!("not a FindQuorum response");
    };
    assert_eq!(
        (r.error, r.leader_id, r.leader_epoch),
        (ErrorCode::NONE, -1, 0)
    );
    assert_eq!(r.cluster_id, CLUSTER);
    assert!(r.voters.is_empty());
    assert!(endpoint_changes(&out).is_empty());
}

#[test]
fn voter_requests_to_a_node_without_a_voter_set_are_refused() {
    let mut h = Harness::new(bootstrap_config(OBSERVER, 1), None, log(0, &[]));
    h.tick();
    let (vote, _) = h.ask_vote(1, 1, 0, 0);
    assert!(!vote.vote_granted);
    let (_, out) = h.request(1, Harness::begin_request(1, 1));
    assert!(!has_fatal(&out));
    assert_eq!(h.core.role(), Role::Unattached);
    assert_eq!(h.core.leader_id(), None);
}

#[test]
fn a_voter_restarts_from_its_own_file_without_quorum_voters() {
    // The file, not the configuration, holds the voter set after the first start (protocol
    // notes 11), and with it the node's vote history: a voter stays a voter.
    let mut h = Harness::new(
        bootstrap_config(2, 1),
        Some(stored(4, -1, 2, VOTERS)),
        log(0, &[]),
    );
    assert!(!h.core.is_observer());
    let out = h.tick();
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Candidate, 4));
    let votes = recipients(&out, |r| matches!(r, Request::Vote(_)));
    assert_eq!(votes, vec![1, 3]);
}

/// A voter that lost its disk and restarted with bootstrap servers only: the set it is told
/// names it, but it has no vote history. It adopts the others, says so, and replicates as an
/// observer (docs/protocol.md, "Voter identity").
#[test]
fn a_node_the_set_names_without_state_of_its_own_adopts_the_others_as_an_observer() {
    let mut h = Harness::new(bootstrap_config(3, 1), None, log(0, &[]));
    let out = h.tick();
    let finds = find_sends(&out);
    let out = h.respond(finds[0].0, finds[0].1, answer(CLUSTER, 2, 3, VOTERS));
    assert!(!has_fatal(&out), "{out:?}");
    assert!(out
        .iter()
        .any(|o| matches!(o, Output::Alert(a) if a.contains("no state"))));
    assert_eq!(h.core.voters(), &[1, 2]);
    assert!(h.core.is_observer());
    let fetch = sends(&out);
    assert_eq!(fetch.len(), 1);
    assert!(!fetch_req(&fetch[0].2).is_follower, "as an observer");
    // Its own id alone is still refused: there would be nobody to follow.
    let mut h = Harness::new(bootstrap_config(3, 1), None, log(0, &[]));
    let out = h.tick();
    let finds = find_sends(&out);
    let out = h.respond(finds[0].0, finds[0].1, answer(CLUSTER, 3, 3, &[3]));
    assert!(has_fatal(&out));
}

/// A node on an empty directory whose id the set it adopts names (a voter that lost its disk,
/// or a stranger under its id) never vouches for an endpoint under that id, in Voters or in
/// TargetVoters: the real voter's peers would take its address over and lose the voter (the
/// process test `bootstrap_observer` lost its leader that way about one run in four).
#[test]
fn a_node_whose_id_the_adopted_set_names_never_vouches_for_its_endpoint() {
    let mut c = bootstrap_config(3, 1);
    c.host = "127.0.0.1".into();
    c.port = 9999;
    c.boot_timestamp = 100;
    let mut h = Harness::new(c, None, log(0, &[]));
    let out = h.tick();
    let finds = find_sends(&out);
    let out = h.respond(finds[0].0, finds[0].1, answer(CLUSTER, 1, 1, VOTERS));
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Alert(a) if a.contains("no state of its own"))),
        "{out:?}"
    );
    assert!(h.core.is_observer());
    // A voter asks it (as it would when probing the address it advertised).
    let (_, out) = h.request(2, Harness::find_quorum_request(2, 100, 9092));
    let r = match &responses(&out)[..] {
        [(_, Response::FindQuorum(r))] => r.clone(),
        other => panic!("{other:?}"),
    };
    let own = |e: &VoterEndpoint| e.voter_id == 3 && e.port == 9999;
    assert!(!r.voters.iter().any(own), "{r:?}");
    assert!(!r.target_voters.iter().flatten().any(own), "{r:?}");
}

/// Caught: the checks of `QuorumState::adopt_voters`: `voters[0] < 0` turned into `== 0` or
/// `<= 0`, its `||` into `&&`, and `others.len() < voters.len()` into `<=`. A set with voter 0
/// is adopted like any other, with no alert when it does not name this node; a set with a
/// negative id, or with none, is refused and leaves the set unknown.
#[test]
fn a_set_with_voter_0_is_adopted_and_one_with_a_negative_id_or_none_refused() {
    let (h, out) = first_answer(1, answer(CLUSTER, 1, 5, &[0, 1, 2]));
    assert_eq!(h.core.voters(), &[0, 1, 2]);
    assert!(
        !out.iter().any(|o| matches!(o, Output::Alert(_))),
        "{out:?}"
    );
    for bad in [vec![-1, 1], vec![]] {
        let mut h = Harness::new(bootstrap_config(OBSERVER, 1), None, log(0, &[]));
        h.tick();
        let mut out = Vec::new();
        assert!(
            h.core.qs.adopt_voters(bad.clone(), &mut out).is_err(),
            "{bad:?}"
        );
        assert!(h.core.voters().is_empty());
    }
}
