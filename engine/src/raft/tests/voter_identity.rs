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
    let mut h = Harness::new(
        config_in(1, dir(1)),
        Some(stored(2, -1, 1, VOTERS)),
        log(0, &[]),
    );
    let out = h.tick();
    for (to, correlation, _) in sends(&out) {
        h.respond(
            to,
            correlation,
            Harness::vote_response(ErrorCode::NONE, -1, 2, true),
        );
        if h.core.role() == Role::Leader {
            break;
        }
    }
    assert_eq!(h.core.role(), Role::Leader);
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
    h.step(Input::ClientAppend {
        id: 7,
        batch: client_batch(1),
        record_count: 1,
        acks: Acks::Quorum,
    });
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

#[test]
fn alter_quorum_refuses_another_directory_for_a_bound_voter() {
    let mut h = leader_in_dir_1();
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 2, dir(2), end, true);
    h.durable_all();
    let end = h.core.log_end_offset();
    fetch_from(&mut h, 2, dir(2), end, true);
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
    let mut h = Harness::new(
        config_in(1, dir(1)),
        Some(stored(5, -1, 1, VOTERS)),
        bound_log(2, &others),
    );
    let out = h.tick();
    for (to, correlation, _) in sends(&out) {
        h.respond(
            to,
            correlation,
            Harness::vote_response(ErrorCode::NONE, -1, 5, true),
        );
        if h.core.role() == Role::Leader {
            break;
        }
    }
    assert_eq!(h.core.role(), Role::Leader);
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
