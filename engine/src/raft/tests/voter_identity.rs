//! Voters are (id, log directory) (docs/protocol.md, "Voter identity"): a node that comes back
//! with an empty directory under a voter's id neither votes nor counts.

use std::collections::BTreeMap;

use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

fn dir(n: u8) -> DirectoryId {
    DirectoryId([n; 16])
}

/// Node `id` with log directory `d`.
fn config_in(id: NodeId, d: DirectoryId) -> RaftConfig {
    let mut c = config(id, VOTERS);
    c.directory_id = d;
    c
}

/// A voter record at `base` binding each of `bound` (id, directory) among voters 1-3.
fn binding_batch(base: Offset, epoch: Epoch, bound: &[(NodeId, DirectoryId)]) -> Batch {
    let record = crate::record::control::QuorumReassignment {
        cluster_id: CLUSTER.into(),
        current_voters: VOTERS.to_vec(),
        current_directories: bound.iter().copied().collect::<BTreeMap<_, _>>(),
        ..Default::default()
    };
    crate::record::BatchView::parse(record.to_batch(base, epoch, 0).freeze())
        .unwrap()
        .to_raft_batch()
}

/// A log of `end` records of epoch 4 whose record at offset 1 binds `bound`.
fn bound_log(end: Offset, bound: &[(NodeId, DirectoryId)]) -> LogSnapshot {
    let mut snapshot = log(end, &[(4, 0)]);
    snapshot.voter_records =
        crate::record::voters::voter_records(&[binding_batch(1, 4, bound)]).unwrap();
    snapshot
}

/// An unattached voter of epoch 4 with `snapshot`, in directory `d`.
fn voter(id: NodeId, d: DirectoryId, snapshot: LogSnapshot) -> Harness {
    Harness::new(config_in(id, d), Some(stored(4, -1, -1, VOTERS)), snapshot)
}

fn vote(candidate: (NodeId, DirectoryId), asked: DirectoryId, leo: Offset, pre: bool) -> Request {
    let epoch = 5;
    let last_epoch = if leo > 0 { 4 } else { 0 };
    let request = if pre {
        Harness::pre_vote_request(candidate.0, epoch, last_epoch, leo)
    } else {
        Harness::vote_request(candidate.0, epoch, last_epoch, leo)
    };
    match request {
        Request::Vote(v) => Request::Vote(VoteRequest {
            candidate_directory_id: candidate.1,
            voter_directory_id: asked,
            ..v
        }),
        _ => unreachable!(),
    }
}

fn answer(h: &mut Harness, request: Request) -> (VoteResponse, Vec<Output>) {
    let (_, out) = h.request(1, request);
    let r = responses(&out);
    assert_eq!(r.len(), 1, "{out:?}");
    (vote_of(&r[0].1).clone(), out)
}

#[test]
fn a_vote_asking_another_directory_of_this_id_is_refused_with_invalid_voter_key() {
    let mut h = voter(2, dir(2), bound_log(5, &[]));
    let (r, out) = answer(&mut h, vote((1, dir(1)), dir(9), 5, false));
    assert_eq!(
        (r.error, r.vote_granted),
        (ErrorCode::INVALID_VOTER_KEY, false)
    );
    assert!(persisted(&out).is_empty(), "nothing changes: {out:?}");
    let (r, _) = answer(&mut h, vote((1, dir(1)), dir(2), 5, false));
    assert_eq!((r.error, r.vote_granted), (ErrorCode::NONE, true));
}

#[test]
fn a_candidate_not_the_directory_its_id_is_bound_to_is_refused() {
    let mut h = voter(2, dir(2), bound_log(5, &[(1, dir(1)), (2, dir(2))]));
    for stated in [dir(7), DirectoryId::ZERO] {
        let (r, _) = answer(&mut h, vote((1, stated), dir(2), 5, false));
        assert_eq!(
            (r.error, r.vote_granted),
            (ErrorCode::INVALID_VOTER_KEY, false)
        );
    }
    let (r, _) = answer(&mut h, vote((1, dir(1)), dir(2), 5, false));
    assert_eq!((r.error, r.vote_granted), (ErrorCode::NONE, true));
}

#[test]
fn a_node_whose_id_is_bound_to_another_directory_neither_votes_nor_campaigns() {
    // Node 3 came back with a new directory (33); its log, caught up, binds 3 to 3.
    let mut h = voter(3, dir(33), bound_log(5, &[(3, dir(3))]));
    assert!(h.core.is_observer());
    let (r, _) = answer(&mut h, vote((1, dir(1)), DirectoryId::ZERO, 5, false));
    assert_eq!(r.error, ErrorCode::INVALID_VOTER_KEY);
    let (r, _) = answer(&mut h, vote((1, dir(1)), dir(3), 5, true));
    assert_eq!(
        (r.error, r.vote_granted),
        (ErrorCode::INVALID_VOTER_KEY, false)
    );
    let out = h.run_until(20_000);
    assert!(
        sends(&out)
            .iter()
            .all(|(_, _, r)| !matches!(r, Request::Vote(_))),
        "{out:?}"
    );
    // The same log in the directory it binds: a voter, which stands.
    let mut h = voter(3, dir(3), bound_log(5, &[(3, dir(3))]));
    assert!(!h.core.is_observer());
    let out = h.run_until(20_000);
    assert!(sends(&out)
        .iter()
        .any(|(_, _, r)| matches!(r, Request::Vote(_))));
}

#[test]
fn a_candidate_names_each_voters_bound_directory_and_its_own() {
    let mut h = voter(1, dir(1), bound_log(5, &[(2, dir(2))]));
    let out = h.run_until(20_000);
    let asked: BTreeMap<NodeId, (DirectoryId, DirectoryId)> = sends(&out)
        .into_iter()
        .filter_map(|(to, _, r)| match r {
            Request::Vote(v) => Some((to, (v.candidate_directory_id, v.voter_directory_id))),
            _ => None,
        })
        .collect();
    assert_eq!(asked.get(&2), Some(&(dir(1), dir(2))), "{out:?}");
    assert_eq!(asked.get(&3), Some(&(dir(1), DirectoryId::ZERO)), "{out:?}");
}

/// A follower fetch from `id` in directory `d` at `offset` (durable there), no long poll.
fn fetch_from(
    h: &mut Harness,
    id: NodeId,
    d: DirectoryId,
    offset: Offset,
    follower: bool,
) -> Vec<Output> {
    let mut fetch = Harness::fetch_request(id, 2, offset, if offset > 0 { 2 } else { 0 }, offset);
    if let Request::FetchQuorumRecords(r) = &mut fetch {
        r.replica_directory_id = d;
        r.is_follower = follower;
        r.max_wait_ms = 0;
    }
    h.request(id, fetch).1
}

fn leader_in_dir_1() -> Harness {
    let mut h = new_leader_in_dir_1();
    h.durable_all();
    h
}

#[test]
fn the_leader_binds_each_voter_once_it_fetched_and_a_stranger_under_its_id_never_counts() {
    let mut h = leader_in_dir_1();
    // Its own epoch's entry commits with 2: then the binding record (1 itself, 2 fetched).
    let end = h.core.log_end_offset();
    let out = fetch_from(&mut h, 2, dir(2), end, true);
    assert_eq!(h.core.high_watermark(), Some(end));
    assert_eq!(log_ops(&out).len(), 1, "the binding record: {out:?}");
    let bound = &h.core.qs.voter_config().directories;
    assert_eq!(bound.get(&1), Some(&dir(1)));
    assert_eq!(bound.get(&2), Some(&dir(2)));
    assert_eq!(bound.get(&3), None, "3 never fetched");
    // It commits; 3 fetches; the next record binds 3.
    h.durable_all();
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 2, dir(2), end, true);
    assert_eq!(h.core.high_watermark(), Some(end));
    fetch_from(&mut h, 3, dir(3), end, true);
    assert_eq!(h.core.qs.voter_config().directory_of(3), Some(dir(3)));
    h.durable_all();
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 2, dir(2), end, true);
    assert_eq!(h.core.high_watermark(), Some(end));
    assert_eq!(
        h.core.election_state().voter_directories,
        [(1, dir(1)), (2, dir(2)), (3, dir(3))].into(),
        "the file caches the bound set"
    );

    // Node 3 comes back from an empty directory: as a follower it is told NOT_FOLLOWER; as an
    // observer it is served, and never counted.
    let out = fetch_from(&mut h, 3, dir(33), 0, true);
    let r = responses(&out);
    assert_eq!(fetch_of(&r[0].1).error, ErrorCode::NOT_FOLLOWER);
    h.append(7, 1, Acks::Quorum);
    h.durable_all();
    let end = h.core.log_end_offset();
    let hw = h.core.high_watermark();
    let out = fetch_from(&mut h, 3, dir(33), end, false);
    assert_eq!(fetch_of(&responses(&out)[0].1).error, ErrorCode::NONE);
    assert_eq!(
        h.core.high_watermark(),
        hw,
        "a stranger's fetch counts for nothing"
    );
    fetch_from(&mut h, 2, dir(2), end, true);
    assert_eq!(h.core.high_watermark(), Some(end), "2's does");
}

/// Leader 1 in directory 1 whose committed binding record bound itself and voter 2 (in
/// directory 2); voter 3 never fetched.
fn leader_with_2_bound() -> Harness {
    let mut h = leader_in_dir_1();
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 2, dir(2), end, true);
    h.durable_all();
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 2, dir(2), end, true);
    assert_eq!(h.core.high_watermark(), Some(end));
    h
}

#[test]
fn alter_quorum_refuses_another_directory_for_a_bound_voter() {
    let mut h = leader_with_2_bound();
    let voters = [(1, DirectoryId::ZERO), (2, dir(22)), (3, DirectoryId::ZERO)];
    let request = Request::AlterQuorum(AlterQuorumRequest::new(CLUSTER, voters, 1000));
    let (_, out) = h.request(-1, request);
    let r = responses(&out);
    let Response::AlterQuorum(a) = &r[0].1 else {
        panic!("{out:?}");
    };
    assert_eq!(a.error, ErrorCode::INVALID_REQUEST);
    assert!(
        a.error_message.as_deref().unwrap().contains("remove it"),
        "{a:?}"
    );
    assert!(log_ops(&out).is_empty());
}

/// A leader whose set binds every voter but itself binds itself too, once its epoch's entry
/// commits (caught: in `binding_due`, `id == me` turned into `!=` and the `!` before
/// `local_directory().is_zero()` deleted: nothing else calls for the binding step then).
#[test]
fn a_leader_binds_itself_when_it_is_the_only_voter_left_unbound() {
    let others = [(2, dir(2)), (3, dir(3))];
    let stored = Some(stored(5, -1, 1, VOTERS));
    let mut h = Harness::new(config_in(1, dir(1)), stored, bound_log(2, &others)).elected(5);
    assert_eq!(h.core.qs.voter_config().directory_of(1), None);
    h.durable_all();
    let end = h.core.log_end_offset();
    let mut fetch = Harness::fetch_request(2, 5, end, 5, end);
    if let Request::FetchQuorumRecords(r) = &mut fetch {
        r.replica_directory_id = dir(2);
        r.max_wait_ms = 0;
    }
    let (_, out) = h.request(2, fetch);
    assert_eq!(h.core.high_watermark(), Some(end));
    assert_eq!(log_ops(&out).len(), 1, "the binding record: {out:?}");
    assert_eq!(h.core.qs.voter_config().directory_of(1), Some(dir(1)));
    assert_eq!(h.core.qs.voter_config().directory_of(2), Some(dir(2)));
}

/// Leader 1 of epoch 2 in directory 1, voters 1-3 unbound, its LeaderChange record not yet
/// durable (no high watermark).
fn new_leader_in_dir_1() -> Harness {
    let stored = Some(stored(2, -1, 1, VOTERS));
    Harness::new(config_in(1, dir(1)), stored, log(0, &[])).elected(2)
}

/// Caught: `now < t + fetch_timeout` turned into `<=` in the leader's `live`. A voter is bound
/// only if it fetched within the fetch timeout (2 s): the binding record that follows the
/// first commit binds voter 3, which fetched at 0, at 1.999 s and not at 2 s.
#[test]
fn a_voter_is_bound_only_while_its_last_fetch_is_within_the_fetch_timeout() {
    for (commit_at, bound_3) in [(1_999, true), (2_000, false)] {
        let mut h = new_leader_in_dir_1();
        let end = h.core.log_end_offset();
        fetch_from(&mut h, 3, dir(3), end, true);
        assert_eq!(
            h.core.high_watermark(),
            None,
            "the leader's own entry is not durable"
        );
        h.run_until(commit_at);
        h.durable_all();
        assert_eq!(h.core.high_watermark(), Some(end));
        let config = h.core.qs.voter_config();
        assert_eq!(config.directory_of(1), Some(dir(1)));
        assert_eq!(
            config.directory_of(3).is_some(),
            bound_3,
            "committed at {commit_at}"
        );
    }
}

/// Leader 1 with voters 1-3 bound to directories 1-3, everything committed, at time 0.
fn bound_leader() -> Harness {
    let mut h = leader_in_dir_1();
    for id in [2, 3] {
        let end = h.core.log_end_offset();
        fetch_from(&mut h, id, dir(id as u8), end, true);
        h.durable_all();
    }
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 2, dir(2), end, true);
    assert_eq!(h.core.high_watermark(), Some(end));
    let bound = &h.core.qs.voter_config().directories;
    assert_eq!(bound.len(), 3, "{bound:?}");
    h
}

/// Whether leader 1 removes voter 3 (target {1, 2}) when voter 2 fetched at 150 ms and a
/// stranger under id 2 (another directory) at `stranger_at`: rule 4 needs 2 ready, and a
/// voter whose id fetched from another directory since is not.
fn removal_with_a_stranger_at(stranger_at: TimeMs) -> bool {
    let mut h = bound_leader();
    h.run_until(100);
    let voters = [(1, DirectoryId::ZERO), (2, DirectoryId::ZERO)];
    h.request(
        -1,
        Request::AlterQuorum(AlterQuorumRequest::new(CLUSTER, voters, 5_000)),
    );
    let end = h.core.log_end_offset();
    let mut fetches = [(150, dir(2), true), (stranger_at, dir(22), false)];
    fetches.sort_by_key(|f| f.0);
    for (at, d, follower) in fetches {
        h.run_until(at);
        fetch_from(&mut h, 2, d, end, follower);
    }
    h.run_until(300);
    h.durable_all();
    assert_eq!(h.core.high_watermark(), Some(end), "the target record");
    h.core.voters() == [1, 2]
}

/// Caught: `s < p.last_fetch_ms` (the stranger's last fetch before the voter's) turned into
/// `==`, `>` or `<=`.
#[test]
fn a_voter_whose_id_fetched_from_another_directory_since_is_not_ready() {
    assert!(removal_with_a_stranger_at(100), "the stranger came first");
    assert!(!removal_with_a_stranger_at(150), "at the same time");
    assert!(!removal_with_a_stranger_at(200), "the stranger came after");
}

/// Caught: `p.directory_id == *d` turned into `!=` in the progress of a node to add, and the
/// `!` deleted in AlterQuorum's `!v.directory_id.is_zero()`. A node the target names with a
/// directory is added only once it fetched from that directory, and is bound to it.
#[test]
fn a_node_the_target_names_with_a_directory_joins_only_from_that_directory() {
    let mut h = leader_with_2_bound();
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 4, dir(44), end, false);
    let voters = [
        (1, DirectoryId::ZERO),
        (2, DirectoryId::ZERO),
        (3, DirectoryId::ZERO),
        (4, dir(4)),
    ];
    h.request(
        -1,
        Request::AlterQuorum(AlterQuorumRequest::new(CLUSTER, voters, 5_000)),
    );
    assert_eq!(
        h.core.qs.voter_config().target_directories,
        [(4, dir(4))].into()
    );
    h.durable_all();
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 2, dir(2), end, true);
    fetch_from(&mut h, 4, dir(44), end, false);
    assert_eq!(h.core.high_watermark(), Some(end), "the target record");
    assert_eq!(
        h.core.voters(),
        &[1, 2, 3],
        "4 fetched from another directory"
    );
    fetch_from(&mut h, 4, dir(4), end, false);
    assert_eq!(h.core.voters(), &[1, 2, 3, 4]);
    assert_eq!(h.core.qs.voter_config().directory_of(4), Some(dir(4)));
}

/// Caught: `directory != self.local_directory` turned into `==` in `id_belongs_to_another`.
/// A voter whose id the log binds to its own directory lists its own endpoint when asked who
/// the voters are; under the same id from another directory it vouches for no endpoint of
/// that id (the voter's address is not its to give).
#[test]
fn a_node_vouches_for_its_own_endpoint_only_from_the_directory_its_id_is_bound_to() {
    let own_endpoint = |d: DirectoryId| {
        let mut c = super::discovery::advertising_config(3);
        c.directory_id = d;
        let mut h = Harness::new(
            c,
            Some(stored(4, -1, -1, VOTERS)),
            bound_log(5, &[(3, dir(3))]),
        );
        let (_, out) = h.request(2, Harness::find_quorum_request(2, 100, 9092));
        match &responses(&out)[..] {
            [(_, Response::FindQuorum(r))] => {
                r.voters.iter().any(|e| e.voter_id == 3 && e.port == 9093)
            }
            other => panic!("{other:?}"),
        }
    };
    assert!(own_endpoint(dir(3)));
    assert!(!own_endpoint(dir(33)));
}
