//! AlterQuorum and reassignment (docs/protocol.md, "AlterQuorum and reassignment").

use super::discovery::advertising_config;
use super::harness::*;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

fn alter(ids: &[NodeId]) -> Request {
    let voters = ids.iter().map(|id| (*id, DirectoryId::ZERO));
    Request::AlterQuorum(AlterQuorumRequest::new(CLUSTER, voters, 1000))
}

fn alter_of(out: &[Output]) -> AlterQuorumResponse {
    let all = responses(out);
    assert_eq!(all.len(), 1, "{out:?}");
    match &all[0].1 {
        Response::AlterQuorum(r) => r.clone(),
        other => panic!("not an AlterQuorum answer: {other:?}"),
    }
}

#[test]
fn a_follower_sends_an_alter_quorum_to_the_leader_it_knows() {
    let (mut h, _) = Harness::follower(2, VOTERS, 4, 1, log(0, &[]));
    let (_, out) = h.request(-1, alter(&[1, 2]));
    let r = alter_of(&out);
    assert_eq!(
        (r.error, r.leader_id, r.leader_epoch),
        (ErrorCode::NOT_QUORUM_LEADER, 1, 4)
    );
    assert!(r.target_voters.is_empty());
}

#[test]
fn an_alter_quorum_for_another_cluster_or_with_a_bad_set_changes_nothing() {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    let mut other = alter(&[1, 2]);
    if let Request::AlterQuorum(r) = &mut other {
        r.cluster_id = "other".into();
    }
    let (_, out) = h.request(-1, other);
    assert_eq!(alter_of(&out).error, ErrorCode::INCONSISTENT_CLUSTER_ID);
    for bad in [alter(&[]), alter(&[1, 1]), alter(&[-3])] {
        let (_, out) = h.request(-1, bad);
        let r = alter_of(&out);
        assert_eq!(r.error, ErrorCode::INVALID_REQUEST);
        assert!(r.error_message.is_some());
        assert!(log_ops(&out).is_empty() && persisted(&out).is_empty());
    }
}

pub(crate) fn voter_batch(
    base: Offset,
    epoch: Epoch,
    current: &[NodeId],
    target: Option<&[NodeId]>,
) -> Batch {
    let record = crate::record::control::QuorumReassignment {
        cluster_id: CLUSTER.into(),
        current_voters: current.to_vec(),
        target_voters: target.map(<[NodeId]>::to_vec),
        force: false,
        ..Default::default()
    };
    crate::record::BatchView::parse(record.to_batch(base, epoch, 0).freeze())
        .unwrap()
        .to_raft_batch()
}

fn fetch_answer(
    h: &mut Harness,
    correlation: Correlation,
    batches: Vec<Batch>,
    hw: Offset,
) -> Vec<Output> {
    h.respond(
        1,
        correlation,
        Response::FetchQuorumRecords(Harness::fetch_response(1, 4, batches, hw)),
    )
}

fn next_fetch(out: &[Output]) -> Correlation {
    sends(out)
        .into_iter()
        .find(|(_, _, r)| matches!(r, Request::FetchQuorumRecords(_)))
        .expect("a fetch")
        .1
}

/// Applied on append, before it commits; reverted by the truncation that removes it; the file
/// caches only the committed set.
#[test]
fn a_follower_applies_a_voter_record_on_append_and_reverts_it_on_truncation() {
    let (mut h, c) = Harness::follower(2, VOTERS, 4, 1, log(1, &[(4, 0)]));
    let out = fetch_answer(
        &mut h,
        c,
        vec![voter_batch(1, 4, &[1, 2, 3, 4], Some(&[1, 2, 4]))],
        1,
    );
    assert_eq!(h.core.voters(), &[1, 2, 3, 4], "in force at once");
    assert!(
        persisted(&out)
            .iter()
            .all(|s| s.current_voters == vec![1, 2, 3]),
        "not committed: the file keeps the old set"
    );
    let c = next_fetch(&out);
    h.durable_all();
    // The leader of epoch 5 has no such record: truncate to offset 1.
    let out = h.respond(
        1,
        c,
        Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
            next_fetch_offset: 1,
            next_fetch_offset_epoch: 4,
            ..Harness::fetch_response(1, 4, Vec::new(), 1)
        }),
    );
    assert!(log_ops(&out)
        .iter()
        .any(|op| matches!(op, LogOpKind::TruncateTo(1))));
    assert_eq!(h.core.voters(), VOTERS, "reverted with the truncation");
}

#[test]
fn the_file_caches_the_committed_set_once_the_record_is_durable_here() {
    let (mut h, c) = Harness::follower(2, VOTERS, 4, 1, log(1, &[(4, 0)]));
    let out = fetch_answer(&mut h, c, vec![voter_batch(1, 4, &[1, 2], None)], 1);
    assert_eq!(h.core.voters(), &[1, 2]);
    // Committed (HW 2) but not durable here yet: not folded.
    let c = next_fetch(&out);
    let out = fetch_answer(&mut h, c, Vec::new(), 2);
    assert!(
        persisted(&out).iter().all(|s| s.applied_offset == 0),
        "{out:?}"
    );
    let out = h.durable_all();
    let stored = persisted(&out);
    assert_eq!(stored.len(), 1, "{out:?}");
    assert_eq!(
        (stored[0].current_voters.clone(), stored[0].applied_offset),
        (vec![1, 2], 2)
    );
}

#[test]
fn a_restart_rebuilds_the_set_from_the_records_above_the_applied_offset() {
    let mut snapshot = log(3, &[(4, 0)]);
    snapshot.voter_records = crate::record::voters::voter_records(&[
        voter_batch(1, 4, &[1, 2, 3, 4], Some(&[2, 3, 4])),
        voter_batch(2, 4, &[2, 3, 4], Some(&[2, 3, 4])),
    ])
    .unwrap();
    let mut state = stored(4, 1, -1, VOTERS);
    state.applied_offset = 2; // the first record is in the file's set already
    state.current_voters = vec![1, 2, 3, 4];
    state.target_voters = Some(vec![2, 3, 4]);
    let h = Harness::new(config(1, VOTERS), Some(state), snapshot);
    assert_eq!(h.core.voters(), &[2, 3, 4]);
    assert!(h.core.is_observer(), "its own log removed it");
}

#[test]
fn a_node_its_log_removed_after_it_led_comes_back_resigned_and_never_stands() {
    let mut snapshot = log(2, &[(4, 0)]);
    snapshot.voter_records =
        crate::record::voters::voter_records(&[voter_batch(1, 4, &[2, 3], None)]).unwrap();
    let mut h = Harness::new(config(1, VOTERS), Some(stored(4, 1, -1, VOTERS)), snapshot);
    let out = h.run_until(20_000);
    assert_eq!(h.core.role(), Role::Resigned);
    assert!(!has_fatal(&out), "{out:?}");
    assert!(
        sends(&out)
            .iter()
            .all(|(_, _, r)| !matches!(r, Request::Vote(_))),
        "{out:?}"
    );
    // It looks for the next leader instead, and follows it once found.
    assert!(!find_sends(&out).is_empty(), "{out:?}");
    let due = h.core.next_deadline().expect("it looks again");
    let out = h.run_until(due);
    let finds = find_sends(&out);
    let (to, correlation) = *finds.last().expect("a FindQuorum when due");
    h.follow_found_leader(to, correlation, 2, 5);
}

#[test]
fn only_the_core_writes_voter_records() {
    let mut h = Harness::leader(1, &[1], 2, log(0, &[]));
    h.durable_all();
    let record = crate::record::control::QuorumReassignment {
        cluster_id: CLUSTER.into(),
        current_voters: vec![7],
        target_voters: None,
        force: false,
        ..Default::default()
    };
    let out = h.step(Input::AppendControl {
        batch: record.to_batch(0, 0, 0),
    });
    assert!(log_ops(&out).is_empty());
    assert_eq!(h.core.voters(), &[1]);
}

/// An observer fetching from a lone leader: known to it, then caught up.
fn observer_fetch(h: &mut Harness, id: NodeId, offset: Offset) -> Vec<Output> {
    let mut fetch = Harness::fetch_request(id, 2, offset, if offset > 0 { 2 } else { 0 }, offset);
    if let Request::FetchQuorumRecords(r) = &mut fetch {
        r.is_follower = h.core.voters().contains(&id);
        r.max_wait_ms = 0;
    }
    h.request(id, fetch).1
}

#[test]
fn alter_quorum_grows_a_lone_voter_step_by_step_and_answers_once_the_target_commits() {
    let mut h = Harness::leader(1, &[1], 2, log(0, &[]));
    h.durable_all();
    assert_eq!(h.core.high_watermark(), Some(1));
    // Never heard of 2: UNKNOWN_VOTER_ID, per voter.
    let (_, out) = h.request(-1, alter(&[1, 2]));
    let r = alter_of(&out);
    assert_eq!(r.error, ErrorCode::UNKNOWN_VOTER_ID);
    assert_eq!(
        r.target_voters
            .iter()
            .map(|v| (v.voter_id, v.error))
            .collect::<Vec<_>>(),
        vec![(1, ErrorCode::NONE), (2, ErrorCode::UNKNOWN_VOTER_ID)]
    );
    observer_fetch(&mut h, 2, 0);
    let (_, out) = h.request(-1, alter(&[1, 2]));
    assert!(
        responses(&out).is_empty(),
        "answered once the target commits"
    );
    assert_eq!(log_ops(&out).len(), 1, "the target record");
    assert_eq!(h.core.voters(), &[1], "the target alone changes no voter");
    let out = h.durable_all();
    assert_eq!(alter_of(&out).error, ErrorCode::NONE);
    // DescribeQuorum reports the reassignment in progress: the target, with what the leader
    // knows of each of its voters.
    let d = describe(&mut h);
    let ids = |l: &[ReplicaState]| l.iter().map(|r| r.replica_id).collect::<Vec<_>>();
    assert_eq!(ids(&d.current_voters), vec![1]);
    let target = d.target_voters.expect("TargetVoters while in progress");
    assert_eq!(ids(&target), vec![1, 2]);
    assert_eq!(target[1].log_end_offset, 0, "2 fetched from offset 0");
    // 2 catches up (fetches to the end, durable at the HW): added, in force at once.
    let end = h.core.log_end_offset();
    let out = observer_fetch(&mut h, 2, end);
    assert_eq!(h.core.voters(), &[1, 2], "{out:?}");
    // Two voters: the add commits only with 2.
    h.durable_all();
    assert_eq!(h.core.high_watermark(), Some(end));
    let end = h.core.log_end_offset();
    observer_fetch(&mut h, 2, end);
    assert_eq!(h.core.high_watermark(), Some(end));
    // Done: TargetVoters = null, once that commits too.
    let last = h.core.log_end_offset();
    assert_eq!(last, end + 1, "the closing record");
    h.durable_all();
    observer_fetch(&mut h, 2, last);
    assert_eq!(h.core.election_state().target_voters, None);
    assert_eq!(h.core.election_state().current_voters, vec![1, 2]);
    assert_eq!(describe(&mut h).target_voters, None, "done");
}

pub(crate) fn describe(h: &mut Harness) -> DescribeQuorumResponse {
    let (_, out) = h.request(-1, Request::DescribeQuorum(DescribeQuorumRequest {}));
    match &responses(&out)[..] {
        [(_, Response::DescribeQuorum(d))] => d.clone(),
        other => panic!("not one DescribeQuorum answer: {other:?}"),
    }
}

#[test]
fn no_voter_change_before_an_entry_of_the_leaders_epoch_commits() {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    h.durable_all();
    observer_fetch(&mut h, 4, 0);
    assert_eq!(h.core.high_watermark(), None);
    let (_, out) = h.request(-1, alter(&[1, 2, 3, 4]));
    assert!(log_ops(&out).is_empty(), "own-epoch commit first");
    assert!(responses(&out).is_empty());
    // Time runs out: REQUEST_TIMED_OUT, safe to retry.
    let out = h.run_until(1_000);
    assert_eq!(alter_of(&out).error, ErrorCode::REQUEST_TIMED_OUT);
}

/// A new leader takes the same AlterQuorum again although the voter it adds has not fetched
/// from it yet: the log it inherited names that voter in its target. An id the log does not
/// name still needs a fetch first.
#[test]
fn a_new_leader_takes_a_repeated_target_whose_voters_have_not_fetched_from_it_yet() {
    let mut snapshot = log(2, &[(1, 0)]);
    snapshot.voter_records =
        crate::record::voters::voter_records(&[voter_batch(1, 1, &[1, 2, 3], Some(&[1, 2, 3, 4]))])
            .unwrap();
    let mut h = Harness::leader(1, VOTERS, 2, snapshot);
    let (_, out) = h.request(-1, alter(&[1, 2, 3, 4]));
    assert!(responses(&out).is_empty(), "waits for the target: {out:?}");
    let (_, out) = h.request(-1, alter(&[1, 2, 3, 5]));
    assert_eq!(alter_of(&out).error, ErrorCode::UNKNOWN_VOTER_ID);
}

mod steps {
    use crate::raft::reassign::{next_step, Step};
    use crate::raft::voter_set::VoterConfig;
    use crate::raft::NodeId;

    fn cfg(current: &[NodeId], target: &[NodeId], force: bool) -> VoterConfig {
        VoterConfig {
            current: current.to_vec(),
            target: Some(target.to_vec()),
            force,
            ..Default::default()
        }
    }

    fn step(c: &VoterConfig, leader: NodeId, ready: &[NodeId]) -> Step {
        next_step(
            c,
            leader,
            |id| ready.contains(&id),
            |id| ready.contains(&id),
            |_| None,
        )
        .unwrap()
    }

    fn write(current: &[NodeId], target: &[NodeId]) -> Step {
        Step::Write(cfg(current, target, false))
    }

    #[test]
    fn add_before_remove_when_at_least_as_many_are_added() {
        let c = cfg(&[1, 2, 3], &[1, 2, 4], false);
        assert_eq!(step(&c, 1, &[1, 2, 3, 4]), write(&[1, 2, 3, 4], &[1, 2, 4]));
        assert_eq!(step(&c, 1, &[1, 2, 3]), Step::Wait, "4 not caught up");
        let c = cfg(&[1, 2, 3], &[1], false);
        assert_eq!(step(&c, 1, &[1, 2, 3]), write(&[1, 3], &[1]));
    }

    #[test]
    fn a_non_leader_leaves_before_the_leader_which_hands_over() {
        let c = cfg(&[1, 2, 3], &[3], false);
        assert_eq!(step(&c, 1, &[1, 2, 3]), write(&[1, 3], &[3]));
        let c = cfg(&[1, 3], &[3], false);
        assert_eq!(step(&c, 1, &[1, 3]), Step::HandOver);
        assert_eq!(step(&c, 3, &[1, 3]), write(&[3], &[3]));
    }

    #[test]
    fn a_step_into_unavailability_needs_force() {
        // 3 of {1,2,3,4} would be live and caught up after removing 3? No: 2 and 4 are down.
        let c = cfg(&[1, 2, 3, 4], &[1, 2, 4], false);
        assert_eq!(step(&c, 1, &[1, 3]), Step::Wait);
        let forced = cfg(&[1, 2, 3, 4], &[1, 2, 4], true);
        assert_eq!(
            step(&forced, 1, &[1, 3]),
            Step::Write(cfg(&[1, 2, 4], &[1, 2, 4], true))
        );
    }

    #[test]
    fn done_writes_a_null_target_and_nothing_in_progress_does_nothing() {
        let c = cfg(&[1, 2], &[1, 2], false);
        assert_eq!(
            step(&c, 1, &[]),
            Step::Write(VoterConfig {
                current: vec![1, 2],
                target: None,
                force: false,
                ..Default::default()
            })
        );
        let idle = VoterConfig {
            current: vec![1],
            target: None,
            force: false,
            ..Default::default()
        };
        assert_eq!(next_step(&idle, 1, |_| true, |_| true, |_| None), None);
    }

    /// Caught: `!adding.is_empty() && adding.len() >= removing.len()` turned into `||`. With
    /// more to remove than to add, a removal comes first (the set never outgrows both ends).
    #[test]
    fn remove_first_when_more_are_removed_than_added() {
        let c = cfg(&[1, 2, 3], &[1, 4], false);
        assert_eq!(step(&c, 1, &[1, 2, 3, 4]), write(&[1, 3], &[1, 4]));
    }

    /// Caught: `live(id) && caught_up(id)` turned into `||` when counting the ready voters of
    /// the new set (rule 4): a voter that is live but behind, or caught up but silent, is not
    /// ready.
    #[test]
    fn a_ready_voter_is_both_live_and_caught_up() {
        let c = cfg(&[1, 2, 3], &[1, 2], false);
        let removal = |live: &[NodeId], caught_up: &[NodeId]| {
            next_step(
                &c,
                1,
                |id| caught_up.contains(&id),
                |id| live.contains(&id),
                |_| None,
            )
            .unwrap()
        };
        assert_eq!(removal(&[1, 2], &[1]), Step::Wait, "2 is live but behind");
        assert_eq!(
            removal(&[1], &[1, 2]),
            Step::Wait,
            "2 is caught up but silent"
        );
        assert_eq!(removal(&[1, 2], &[1, 2]), write(&[1, 2], &[1, 2]));
    }

    /// Caught: the field `directories` deleted from the record that ends a reassignment: the
    /// voters' bindings outlive it.
    #[test]
    fn the_record_that_ends_a_reassignment_keeps_the_bindings() {
        use crate::raft::DirectoryId;
        let bound: std::collections::BTreeMap<NodeId, DirectoryId> =
            [(1, DirectoryId([1; 16])), (2, DirectoryId([2; 16]))].into();
        let c = VoterConfig {
            directories: bound.clone(),
            ..cfg(&[1, 2], &[1, 2], false)
        };
        let Step::Write(done) = step(&c, 1, &[1, 2]) else {
            panic!("not a write");
        };
        assert_eq!((done.target, done.directories), (None, bound));
    }
}

#[test]
fn a_voter_told_not_follower_fetches_as_an_observer_and_learns_its_removal_from_its_log() {
    let (mut h, c) = Harness::follower(3, VOTERS, 4, 1, log(1, &[(4, 0)]));
    let out = h.respond(
        1,
        c,
        Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
            error: ErrorCode::NOT_FOLLOWER,
            ..Harness::fetch_response(1, 4, Vec::new(), -1)
        }),
    );
    assert!(!has_fatal(&out));
    assert_eq!(h.core.voters(), VOTERS, "only its own log removes it");
    // The retry backoff (at most 1 s), well within the fetch timeout (2 s).
    let out = h.run_until(h.now + 1_000);
    let fetch = sends(&out)
        .into_iter()
        .find(|(_, _, r)| matches!(r, Request::FetchQuorumRecords(_)))
        .expect("it fetches again");
    assert!(!fetch_req(&fetch.2).is_follower, "as an observer");
    let out = fetch_answer(&mut h, fetch.1, vec![voter_batch(1, 4, &[1, 2], None)], 1);
    assert!(!has_fatal(&out));
    assert!(h.core.is_observer(), "{:?} {out:?}", h.core.role());
    assert_eq!(h.core.role(), Role::Follower);
}

#[test]
fn the_leader_answers_a_removed_voters_fetch_not_follower() {
    let mut h = Harness::leader(1, &[1], 2, log(0, &[]));
    h.durable_all();
    let (_, out) = h.request(3, Harness::fetch_request(3, 2, 0, 0, 0));
    assert_eq!(
        fetch_of(&responses(&out)[0].1).error,
        ErrorCode::NOT_FOLLOWER
    );
}

// ----- liveness traps the simulator found (docs/simulation.md, "Reassignment") -----

/// A node of the target that its log has not added yet votes (for a candidate of the target
/// too): a new set whose record it lacks could otherwise never elect anyone. Its vote binds
/// across a restart. A node no set names does not vote.
#[test]
fn a_node_of_the_target_votes_before_its_log_adds_it_and_keeps_its_vote() {
    let targeted = || {
        let mut snapshot = log(1, &[(4, 0)]);
        snapshot.voter_records = crate::record::voters::voter_records(&[voter_batch(
            0,
            4,
            &[1, 2, 3],
            Some(&[2, 3, 4, 5]),
        )])
        .unwrap();
        snapshot
    };
    let mut h = Harness::new(
        config(4, VOTERS),
        Some(stored(4, -1, -1, VOTERS)),
        targeted(),
    );
    h.tick();
    assert!(h.core.is_observer());
    let (r, out) = h.ask_vote(5, 5, 4, 1);
    assert_eq!(
        (r.error, r.vote_granted),
        (ErrorCode::NONE, true),
        "{out:?}"
    );
    let state = persisted(&out).pop().expect("the vote is persisted");
    assert_eq!((state.epoch, state.voted_id), (5, 5));
    let mut h = Harness::new(config(4, VOTERS), Some(state), targeted());
    h.tick();
    assert_eq!(h.core.role(), Role::Voted);
    let (vote, _) = h.ask_vote(3, 5, 4, 1);
    assert!(!vote.vote_granted, "one vote per epoch");
    // It knows no leader: it looks for one.
    let out = h.run_until(h.now + 5_000);
    assert!(!find_sends(&out).is_empty(), "{out:?}");
    // Node 6 is named by no set: it does not vote, nor take the epoch.
    let mut h = Harness::new(
        config(6, VOTERS),
        Some(stored(4, -1, -1, VOTERS)),
        targeted(),
    );
    h.tick();
    let (r, _) = h.ask_vote(2, 5, 4, 1);
    assert_eq!(
        (r.error, h.core.epoch()),
        (ErrorCode::INCONSISTENT_VOTER_SET, 4)
    );
}

/// A voter whose log holds an uncommitted record that removed a candidate still votes for it
/// when the committed set names it: the candidate's log may have overwritten that record (the
/// simulator found the deadlock: node 0 held {0,2} from a step its leader never committed, the
/// others {0,1} from the next leader, and neither could win a vote).
#[test]
fn a_voter_votes_for_a_candidate_its_uncommitted_record_removed() {
    let (mut h, c) = Harness::follower(2, VOTERS, 4, 1, log(1, &[(4, 0)]));
    // Uncommitted here: the step that removes voter 3.
    fetch_answer(&mut h, c, vec![voter_batch(1, 4, &[1, 2], None)], 1);
    assert_eq!(h.core.voters(), &[1, 2]);
    h.durable_all();
    // Candidate 3, in a later epoch, with a longer log than this one.
    let (r, out) = h.ask_vote(3, 6, 5, 10);
    assert_eq!(
        (r.error, r.vote_granted),
        (ErrorCode::NONE, true),
        "{out:?}"
    );
    // Node 7 is named by no set, committed or not: still refused.
    let (r, _) = h.ask_vote(7, 7, 5, 10);
    assert_eq!(
        (r.error, r.vote_granted),
        (ErrorCode::INCONSISTENT_VOTER_SET, false)
    );
}

/// A leader outside this node's set is followed: the log it serves holds the set that has it.
#[test]
fn a_node_follows_a_leader_its_own_log_has_not_added_yet() {
    let (mut h, c) = Harness::follower(2, VOTERS, 4, 1, log(0, &[]));
    let out = h.respond(
        1,
        c,
        Response::FetchQuorumRecords(Harness::fetch_response(7, 5, Vec::new(), -1)),
    );
    assert!(!has_fatal(&out));
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.leader_id()),
        (Role::Follower, 5, Some(7))
    );
    assert!(sends(&out)
        .iter()
        .any(|(to, _, r)| *to == 7 && matches!(r, Request::FetchQuorumRecords(_))));
}

/// A voter its log is removing gives the target's voters one election timeout, then stands:
/// it may hold the only log they would vote for.
#[test]
fn a_leaving_voter_stands_after_sitting_out_one_election_timeout() {
    let mut snapshot = log(2, &[(4, 0)]);
    snapshot.voter_records =
        crate::record::voters::voter_records(&[voter_batch(1, 4, &[1, 2], Some(&[2]))]).unwrap();
    let mut h = Harness::new(config(1, VOTERS), Some(stored(4, -1, -1, VOTERS)), snapshot);
    let out = h.run_until(20_000);
    let asked: Vec<NodeId> = sends(&out)
        .into_iter()
        .filter(|(_, _, r)| matches!(r, Request::Vote(_)))
        .map(|(to, _, _)| to)
        .collect();
    assert!(asked.contains(&2), "{out:?}");
}

/// When node 1 of epoch 4, unattached with a log whose voter record holds `current` and
/// `target`, first asks for a vote (a pre-vote or a vote).
fn first_vote_at(current: &[NodeId], target: Option<&[NodeId]>) -> TimeMs {
    let mut snapshot = log(2, &[(4, 0)]);
    snapshot.voter_records =
        crate::record::voters::voter_records(&[voter_batch(1, 4, current, target)]).unwrap();
    let mut h = Harness::new(config(1, VOTERS), Some(stored(4, -1, -1, VOTERS)), snapshot);
    h.tick();
    for _ in 0..100 {
        let Some(due) = h.core.next_deadline() else {
            break;
        };
        h.now = h.now.max(due);
        let out = h.tick();
        if sends(&out)
            .iter()
            .any(|(_, _, r)| matches!(r, Request::Vote(_)))
        {
            return h.now;
        }
    }
    panic!("no vote asked by {}", h.now);
}

/// Caught: `leaving_voter` always false, and its `&&` turned into `||`. A voter its log is
/// removing sits out its first election timeout; a voter the target keeps does not.
#[test]
fn only_a_leaving_voter_sits_out_its_first_election_timeout() {
    let plain = first_vote_at(&[1, 2], None);
    assert_eq!(first_vote_at(&[1, 2], Some(&[1])), plain, "1 stays");
    assert!(
        first_vote_at(&[1, 2], Some(&[2])) > plain,
        "1 leaves: it sits out one timeout first"
    );
}

/// Leader 1 of epoch 2 of the set {1, 2}, whose log (LeaderChange at offset 2, durable) holds/// Leader 1 of epoch 2 of the set {1, 2}, whose log (LeaderChange at offset 2, durable) holds
/// a voter record with `target`: with the target {2}, only the handover is left (rule 6).
pub(crate) fn leader_of_1_and_2_moving_to(target: &[NodeId]) -> Harness {
    let mut snapshot = log(2, &[(1, 0)]);
    snapshot.voter_records =
        crate::record::voters::voter_records(&[voter_batch(1, 1, &[1, 2], Some(target))]).unwrap();
    let mut h = Harness::leader(1, &[1, 2], 2, snapshot);
    h.durable_all();
    h
}

/// Rule 6: the leader hands over only once a voter of the target holds its whole log.
#[test]
fn the_leader_hands_over_only_to_a_target_voter_holding_its_whole_log() {
    let mut h = leader_of_1_and_2_moving_to(&[2]);
    h.append(1, 1, Acks::Quorum);
    h.durable_all();
    assert_eq!(h.core.log_end_offset(), 4);
    // 2 holds the LeaderChange (the HW moves) but not the client batch.
    h.request(2, Harness::fetch_request(2, 2, 3, 2, 3));
    assert_eq!(h.core.high_watermark(), Some(3));
    assert_eq!(h.core.role(), Role::Leader, "2 lacks offset 3");
    h.request(2, Harness::fetch_request(2, 2, 4, 2, 4));
    assert_eq!(h.core.role(), Role::Resigned);
}

/// Rule 9: a voter record leaves the leader only once durable there (a replica holding one
/// its writer lost could refuse the only voter able to lead the set it left).
#[test]
fn a_voter_record_is_served_only_once_durable_on_the_leader() {
    let mut h = Harness::leader(1, &[1], 2, log(0, &[]));
    h.durable_all();
    observer_fetch(&mut h, 2, 0);
    let (_, out) = h.request(-1, alter(&[1, 2]));
    assert_eq!(log_ops(&out).len(), 1, "the target record");
    let end = h.core.log_end_offset();
    let out = observer_fetch(&mut h, 2, 1);
    let served: Vec<Offset> = responses(&out)
        .iter()
        .flat_map(|(_, r)| fetch_of(r).batches.iter().map(|b| b.base_offset))
        .collect();
    assert!(served.iter().all(|o| *o < end - 1), "{served:?}");
    // A fetch that waits, from the withheld record on: parked (not answered empty at once, which
    // would only bring it back), and answered once the record is durable (here by the high
    // watermark that durability moves; the next fetch takes the record).
    let mut fetch = Harness::fetch_request(2, 2, end - 1, 2, end - 1);
    if let Request::FetchQuorumRecords(r) = &mut fetch {
        r.is_follower = false;
    }
    let (_, out) = h.request(2, fetch);
    assert!(responses(&out).is_empty(), "parked: {out:?}");
    let out = h.durable_all();
    assert!(
        responses(&out)
            .iter()
            .any(|(_, r)| matches!(r, Response::FetchQuorumRecords(_))),
        "{out:?}"
    );
    let out = observer_fetch(&mut h, 2, 1);
    let served: Vec<Offset> = responses(&out)
        .iter()
        .flat_map(|(_, r)| fetch_of(r).batches.iter().map(|b| b.base_offset))
        .collect();
    assert!(served.contains(&(end - 1)), "{served:?} {out:?}");
}

/// A lone voter's leadership has no check-quorum timer; once its set grows it needs one, or a
/// leader cut off from its new voters leads for good (caught: the arming's `now + timeout`
/// turned into `now * timeout`, and `voters > 1` into `== 1`).
#[test]
fn a_lone_leader_whose_set_grows_checks_its_quorum() {
    let mut h = Harness::leader(1, &[1], 2, log(0, &[]));
    h.durable_all();
    // Alone, it leads through any quiet stretch.
    h.run_until(10_000);
    assert_eq!(h.core.role(), Role::Leader);
    observer_fetch(&mut h, 2, 0);
    h.request(-1, alter(&[1, 2]));
    h.durable_all();
    // 2 takes longer than a progress timeout to catch up: the set is {1} with a target for
    // that long (a timer armed then finds the lone voter's quorum and disarms).
    h.run_until(h.now + 5_000);
    assert_eq!(h.core.voters(), &[1]);
    let end = h.core.log_end_offset();
    observer_fetch(&mut h, 2, end);
    assert_eq!(h.core.voters(), &[1, 2]);
    // 2 is never heard from again: the leader resigns (and goes on to campaign) once a
    // progress timeout passes without it, not later.
    h.run_until(h.now + 2 * 3_000);
    assert_ne!(h.core.role(), Role::Leader);
}

/// A BeginQuorumEpoch from a voter of the target is heard by a node whose log lags the set
/// that has it.
#[test]
fn a_begin_quorum_epoch_from_a_voter_of_the_target_is_followed() {
    let mut snapshot = log(1, &[(4, 0)]);
    snapshot.voter_records =
        crate::record::voters::voter_records(&[voter_batch(0, 4, &[1, 2, 3], Some(&[3, 4]))])
            .unwrap();
    let mut h = Harness::new(config(3, VOTERS), Some(stored(4, -1, -1, VOTERS)), snapshot);
    h.tick();
    let (_, out) = h.request(4, Harness::begin_request(4, 5));
    assert!(!has_fatal(&out));
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.leader_id()),
        (Role::Follower, 5, Some(4)),
        "{out:?}"
    );
}

/// Node 4, advertising 127.0.0.1:9094, an observer following 1 in epoch 4, whose leader's
/// answer brings the record that makes it a voter (of {1, 2, 3, 4}, the target too): the
/// harness and what that answer made it do.
fn node_4_made_a_voter() -> (Harness, Vec<Output>) {
    let mut h = Harness::new(
        advertising_config(4),
        Some(stored(4, 1, -1, VOTERS)),
        log(1, &[(4, 0)]),
    );
    let c = next_fetch(&h.tick());
    let out = fetch_answer(
        &mut h,
        c,
        vec![voter_batch(1, 4, &[1, 2, 3, 4], Some(&[1, 2, 3, 4]))],
        1,
    );
    (h, out)
}

/// Leader 1's voters' answer to a FindQuorum in epoch 4, listing `voters`' endpoints.
fn find_answer_listing(voters: Vec<VoterEndpoint>) -> Response {
    Harness::find_quorum_response(CLUSTER, 1, 4, voters)
}
/// Voters knew node 4's endpoint only as an observer's, which is not a voter endpoint: once its
/// log makes it a voter, it tells each other voter (a FindQuorum advertises it), and stops once
/// each has answered. Without this a cluster that lost its leader could not reach its new voters.
#[test]
fn a_node_made_a_voter_tells_every_other_voter_its_endpoint() {
    let (mut h, out) = node_4_made_a_voter();
    assert_eq!(h.core.voters(), &[1, 2, 3, 4]);
    // A voter's first answer does not list 4's endpoint (it probes the advertisement, or has
    // not applied the record yet): 4 asks it again. Its next answer lists it: 4 stops.
    let mut asked: std::collections::BTreeMap<NodeId, usize> = Default::default();
    let mut out = [out, h.tick()].concat();
    for _ in 0..40 {
        let finds = find_sends(&out);
        if finds.is_empty() {
            out = h.run_until(h.now + 1_100);
            continue;
        }
        out = Vec::new();
        for (to, correlation) in finds {
            let times = asked.entry(to).or_default();
            *times += 1;
            let voters = if *times >= 2 {
                vec![VoterEndpoint {
                    voter_id: 4,
                    boot_timestamp: 100,
                    host: "127.0.0.1".into(),
                    port: 9094,
                }]
            } else {
                Vec::new()
            };
            out.extend(h.respond(to, correlation, find_answer_listing(voters)));
        }
    }
    assert_eq!(
        asked.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3],
        "each other voter told"
    );
    assert!(
        asked.values().all(|n| *n >= 2),
        "until it lists 4: {asked:?}"
    );
    assert!(find_sends(&h.run_until(h.now + 5_000)).is_empty());
}

/// A node its own log does not make a voter yet (it lags the record that adds it) vouches for
/// its endpoint in its FindQuorum answers' TargetVoters, and a voter whose log added it takes
/// the vouch: with the leader dead, that voter must reach it to be elected (the process test
/// of a leader killed mid-reassignment found a voter asking an address it never learned).
#[test]
fn a_node_not_yet_a_voter_in_its_own_log_vouches_for_its_endpoint() {
    // Node 4: an observer whose log names only 1, 2, 3.
    let mut four = Harness::new(
        advertising_config(4),
        Some(stored(4, 1, -1, VOTERS)),
        log(0, &[]),
    );
    four.tick();
    let (_, out) = four.request(2, Harness::find_quorum_request(2, 100, 9092));
    let own = VoterEndpoint {
        voter_id: 4,
        boot_timestamp: 100,
        host: "127.0.0.1".into(),
        port: 9094,
    };
    let answer = match &responses(&out)[..] {
        [(_, Response::FindQuorum(r))] => r.clone(),
        other => panic!("{other:?}"),
    };
    assert!(answer.voters.iter().all(|e| e.voter_id != 4), "{answer:?}");
    assert_eq!(answer.target_voters, Some(vec![own.clone()]));

    // Node 2, whose log added 4: 4's FindQuorum makes it probe 4's address, and 4's answer
    // (its own endpoint in TargetVoters only) makes the address 2's to use.
    let (mut two, c) = Harness::follower(2, VOTERS, 4, 1, log(1, &[(4, 0)]));
    fetch_answer(&mut two, c, vec![voter_batch(1, 4, &[1, 2, 3, 4], None)], 1);
    assert_eq!(two.core.voters(), &[1, 2, 3, 4]);
    let (_, out) = two.request(4, Harness::find_quorum_request(4, 100, 9094));
    let probe = probes(&out);
    assert_eq!(probe.len(), 1, "{out:?}");
    let out = two.respond(4, probe[0].0, Response::FindQuorum(answer));
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::EndpointChanged(e) if *e == own)),
        "{out:?}"
    );
}

/// A client append of one record, acknowledged once durable here; its answer, if one came.
fn append(h: &mut Harness, id: u64) -> Option<AppendResult> {
    let out = h.append(id, 1, Acks::Leader);
    let out = [out, h.durable_all()].concat();
    appends_done(&out)
        .into_iter()
        .find(|(i, _)| *i == id)
        .map(|(_, r)| r)
}

fn refused(r: &Option<AppendResult>) -> bool {
    matches!(r, Some(AppendResult::Failed { error, .. }) if *error == ErrorCode::NOT_LEADER_OR_FOLLOWER)
}

/// Rule 6 under load: with an append every tick, 2 fetches the log as it was before the tick's
/// append and never holds the whole of it, so the handover would wait for good. The leader
/// refuses appends (NOT_LEADER_OR_FOLLOWER, retriable) while it waits, 2 catches up, and the
/// leader hands over.
#[test]
fn a_handover_completes_while_appends_arrive_every_tick() {
    let mut h = leader_of_1_and_2_moving_to(&[2]);
    let mut refusals = 0;
    for id in 1..=20 {
        if h.core.role() != Role::Leader {
            break;
        }
        let seen = h.core.log_end_offset();
        if refused(&append(&mut h, id)) {
            refusals += 1;
        }
        h.request(2, Harness::fetch_request(2, 2, seen, 2, seen));
        h.now += 10;
        h.tick();
    }
    assert_eq!(h.core.role(), Role::Resigned, "the handover completed");
    assert!(refusals >= 1, "appends were paused for it");
}

/// The pause is bounded: when no successor catches up within an election timeout, appends are
/// served again for as long, and only then paused once more.
#[test]
fn a_handover_pause_ends_after_an_election_timeout() {
    let mut h = leader_of_1_and_2_moving_to(&[2]);
    let pause = h.core.config.election_timeout_ms;
    assert!(
        !refused(&append(&mut h, 1)),
        "no pause before the HW exists"
    );
    // 2 fetches up to offset 3 only (the HW moves to 3), and never to the end at 4.
    h.request(2, Harness::fetch_request(2, 2, 3, 2, 3));
    assert_eq!(h.core.high_watermark(), Some(3));
    assert!(
        refused(&append(&mut h, 2)),
        "paused while the handover waits"
    );
    assert_eq!(h.core.role(), Role::Leader);
    let start = h.now;
    h.now = start + pause / 2;
    h.tick();
    h.request(2, Harness::fetch_request(2, 2, 3, 2, 3));
    assert!(refused(&append(&mut h, 3)));
    h.now = start + pause;
    h.tick();
    h.request(2, Harness::fetch_request(2, 2, 3, 2, 3));
    assert!(
        !refused(&append(&mut h, 4)),
        "served again after one election timeout"
    );
    h.now = start + 2 * pause - 1;
    h.tick();
    h.request(2, Harness::fetch_request(2, 2, 3, 2, 3));
    assert!(!refused(&append(&mut h, 5)), "for as long");
    h.now = start + 2 * pause;
    h.tick();
    h.request(2, Harness::fetch_request(2, 2, 3, 2, 3));
    assert!(refused(&append(&mut h, 6)), "then paused again");
    assert_eq!(h.core.role(), Role::Leader);
}

/// No pause when the leader stays in the set: appends are never refused for a handover.
#[test]
fn a_leader_that_stays_never_pauses_appends() {
    let mut h = leader_of_1_and_2_moving_to(&[1]);
    h.request(2, Harness::fetch_request(2, 2, 3, 2, 3));
    for id in 1..=5 {
        assert!(!refused(&append(&mut h, id)));
        h.now += 10;
    }
}

/// A pause ends at once when the handover is no longer due (the reassignment was cancelled).
#[test]
fn a_cancelled_handover_ends_the_pause() {
    let mut h = leader_of_1_and_2_moving_to(&[2]);
    append(&mut h, 1);
    h.request(2, Harness::fetch_request(2, 2, 3, 2, 3));
    assert!(refused(&append(&mut h, 2)));
    assert_eq!(h.core.role(), Role::Leader);
    h.request(-1, alter(&[1, 2]));
    assert_eq!(h.core.qs.voter_config().target, None, "cancelled");
    assert!(!refused(&append(&mut h, 3)));
}

/// A voter that voted in an epoch and then followed its leader as an observer (its log took it
/// out of the set) and lost that leader, never votes in that epoch again, even when a set names
/// it once more, and not after a restart either (the simulator found the double vote: seed 1909
/// of `--retention --reassign --observers 2`).
#[test]
fn an_observer_that_lost_its_leader_never_votes_again_in_that_epoch() {
    let (mut h, c) = Harness::follower(2, VOTERS, 4, 1, log(1, &[(4, 0)]));
    // The leader's step takes node 2 out of the current set (and names it in the target).
    let out = fetch_answer(
        &mut h,
        c,
        vec![voter_batch(1, 4, &[1, 3], Some(&[1, 2, 3]))],
        1,
    );
    assert_eq!(h.core.voters(), &[1, 3]);
    h.durable_all();
    // Its next fetch fails: as an observer it drops the leader to look for it again.
    let c = next_fetch(&out);
    let out = h.step(Input::RequestFailed {
        to: 1,
        correlation: c,
    });
    assert_eq!(
        (h.core.role(), h.core.epoch()),
        (Role::Unattached, 4),
        "{out:?}"
    );
    let state = persisted(&out).pop().expect("the drop is persisted");
    assert_eq!(
        (state.epoch, state.leader_id, state.voted_id),
        (4, 1, -1),
        "the file keeps the epoch's leader"
    );
    // Candidate 3 in the same epoch, named by the target as node 2 is: no vote.
    let (r, out) = h.ask_vote(3, 4, 4, 10);
    assert!(!r.vote_granted, "{out:?}");
    assert!(!has_fatal(&out) && persisted(&out).is_empty(), "{out:?}");
    // Nor after a restart from what the file holds.
    let mut h = Harness::new(config(2, VOTERS), Some(state), log(1, &[(4, 0)]));
    h.tick();
    let (vote, out) = h.ask_vote(3, 4, 4, 10);
    assert!(!vote.vote_granted, "{out:?}");
}

/// Caught: `role_deadline.is_none() && voters > 1` turned into `||` in
/// `after_voter_set_change`. A voter record does not push back a running leader's quorum
/// check: voters silent since 0 cost it the lead at 3 s (the progress timeout), though a
/// reassignment began at 1 s.
#[test]
fn a_voter_record_does_not_postpone_the_leaders_quorum_check() {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    h.durable_all();
    let end = h.core.log_end_offset();
    for id in [2, 3, 4] {
        observer_fetch(&mut h, id, end);
    }
    assert_eq!(h.core.high_watermark(), Some(end));
    h.run_until(1_000);
    let before = h.core.log_end_offset();
    h.request(-1, alter(&[1, 2, 3, 4]));
    assert!(
        h.core.log_end_offset() > before,
        "the reassignment's first record"
    );
    h.run_until(3_000);
    assert_ne!(
        h.core.role(),
        Role::Leader,
        "no fetch from a majority since 0"
    );
}

/// Whether leader 1 of {1, 2, 3} adds observer 4 (target {1, 2, 3, 4}) when the target record
/// commits at `commit_at`, 4 having fetched to the end at 0 with `durable_4` durable.
fn addition_of_4(durable_4: impl Fn(Offset) -> Offset, commit_at: TimeMs) -> bool {
    let mut h = Harness::leader(1, VOTERS, 2, log(0, &[]));
    h.durable_all();
    let end = h.core.log_end_offset();
    observer_fetch(&mut h, 2, end);
    observer_fetch(&mut h, 4, end);
    h.request(-1, alter(&[1, 2, 3, 4]));
    let end = h.core.log_end_offset();
    let mut fetch = Harness::fetch_request(4, 2, end, 2, durable_4(end));
    if let Request::FetchQuorumRecords(r) = &mut fetch {
        r.is_follower = false;
        r.max_wait_ms = 0;
    }
    h.request(4, fetch);
    observer_fetch(&mut h, 2, end);
    h.run_until(commit_at);
    h.durable_all();
    assert_eq!(h.core.high_watermark(), Some(end), "the target record");
    h.core.voters() == [1, 2, 3, 4]
}

/// Caught: `durable_offset >= hw && last_caught_up_ms within an election timeout` turned into
/// `||`, and `now < t + election_timeout` into `<=`. A node joins only with the high watermark
/// durable and caught up within the last election timeout (1 s).
#[test]
fn a_node_joins_only_durable_at_the_high_watermark_and_caught_up_within_a_timeout() {
    let same = |end: Offset| end;
    assert!(addition_of_4(same, 999));
    assert!(!addition_of_4(same, 1_000), "caught up a whole timeout ago");
    assert!(!addition_of_4(|end| end - 1, 0), "not durable at the HW");
}

/// A follower whose fetch timer ran out keeps fetching from its leader during its pre-vote
/// round; when that fetch brings a record removing it, it follows that leader again, as an
/// observer (the answer ends the round before the record applies).
#[test]
fn a_prospective_its_log_removes_follows_the_leader_it_kept() {
    let (mut h, first) = Harness::follower(2, VOTERS, 4, 1, log(1, &[(4, 0)]));
    let out = h.run_until(2_000);
    assert_eq!(
        (h.core.role(), h.core.leader_id()),
        (Role::Prospective, Some(1))
    );
    let fetch = sends(&out)
        .into_iter()
        .filter(|(to, _, r)| *to == 1 && matches!(r, Request::FetchQuorumRecords(_)))
        .map(|(_, c, _)| c)
        .next_back()
        .unwrap_or(first);
    fetch_answer(&mut h, fetch, vec![voter_batch(1, 4, &[1, 3], None)], 1);
    assert_eq!(h.core.voters(), &[1, 3]);
    assert_eq!(
        (h.core.role(), h.core.epoch(), h.core.leader_id()),
        (Role::Follower, 4, Some(1))
    );
}

/// Caught: `before != self.voters` turned into `==` in `revert_voter_records` (a truncation
/// that reverts the set would then not say so). A node whose log added it starts telling the
/// voters its endpoint; the leader's next answer truncates that record away: no longer a voter,
/// it asks nobody again.
#[test]
fn a_node_whose_addition_is_truncated_away_stops_telling_the_voters_its_endpoint() {
    let (mut h, out) = node_4_made_a_voter();
    assert_eq!(h.core.voters(), &[1, 2, 3, 4]);
    let out = [out, h.tick()].concat();
    let finds = find_sends(&out);
    assert!(!finds.is_empty(), "{out:?}");
    h.durable_all();
    let diverged = FetchQuorumRecordsResponse {
        next_fetch_offset: 1,
        next_fetch_offset_epoch: 4,
        ..Harness::fetch_response(1, 4, Vec::new(), 1)
    };
    let out = h.respond(1, next_fetch(&out), Response::FetchQuorumRecords(diverged));
    assert_eq!(h.core.voters(), VOTERS, "reverted");
    let c = next_fetch(&out);
    for (to, correlation) in finds {
        h.respond(to, correlation, find_answer_listing(Vec::new()));
    }
    let mut out = fetch_answer(&mut h, c, Vec::new(), 1);
    out.extend(h.run_until(h.now + 1_100));
    assert!(find_sends(&out).is_empty(), "{out:?}");
}

/// Node 4, advertising 127.0.0.1:9094, whose log just made it a voter, telling the voters its
/// endpoint (a FindQuorum to one voter after the other) with each voter's first answer listing
/// `listed`, its leader answering its fetches: is it still telling some voter once each has
/// answered?
fn still_announcing_after_answers_listing(listed: &[VoterEndpoint]) -> bool {
    let (mut h, out) = node_4_made_a_voter();
    let mut out = [out, h.tick()].concat();
    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let mut next = Vec::new();
        for (to, correlation, request) in sends(&out) {
            match request {
                Request::FindQuorum(_) if answered.insert(to) => {
                    let answer = find_answer_listing(listed.to_vec());
                    next.extend(h.respond(to, correlation, answer));
                }
                Request::FetchQuorumRecords(_) => {
                    next.extend(fetch_answer(&mut h, correlation, Vec::new(), 2));
                }
                _ => {}
            }
        }
        if answered.len() == 3 {
            assert_eq!(h.core.role(), Role::Follower);
            return h.core.announcing();
        }
        next.extend(h.run_until(h.now + 200));
        out = next;
    }
    panic!("not every voter was asked: {answered:?}");
}

/// Caught: `is_own_endpoint` made to return true, and either `&&` of it turned into `||`. An
/// answer tells this node that a voter took its endpoint only when it lists this node's id
/// with this node's host and port: other voters' endpoints, its id at another port, or
/// another id at its address leave it asking.
#[test]
fn only_an_answer_listing_this_nodes_id_host_and_port_ends_its_announcement() {
    let at = |id: NodeId, host: &str, port: i32| VoterEndpoint {
        voter_id: id,
        boot_timestamp: 100,
        host: host.into(),
        port,
    };
    let others: Vec<VoterEndpoint> = [1, 2, 3].map(|v| at(v, "127.0.0.1", 9090 + v)).into();
    assert!(still_announcing_after_answers_listing(&others));
    assert!(still_announcing_after_answers_listing(&[at(
        4,
        "127.0.0.1",
        9095
    )]));
    assert!(still_announcing_after_answers_listing(&[at(
        4,
        "127.0.0.2",
        9094
    )]));
    assert!(still_announcing_after_answers_listing(&[at(
        1,
        "127.0.0.1",
        9094
    )]));
    assert!(!still_announcing_after_answers_listing(&[at(
        4,
        "127.0.0.1",
        9094
    )]));
}
