//! Initialization (docs/testing.md, "Behaviours the scenario tests cover").

use super::harness::*;
use crate::raft::*;

#[test]
fn initialize_single_member_quorum() {
    let mut h = Harness::new(config(1, &[1]), None, log(0, &[]));
    let out = h.tick();
    let states = persisted(&out);
    assert_eq!(states.last().unwrap().epoch, 1);
    assert_eq!(states.last().unwrap().leader_id, 1);
    assert_eq!(h.core.role(), Role::Leader);
    assert_eq!(h.core.epoch(), 1);
    // The LeaderChange control batch is appended at the epoch start offset.
    match &log_ops(&out)[..] {
        [LogOpKind::Append(b)] => {
            assert_eq!(
                (b[0].base_offset, b[0].epoch, b[0].is_control),
                (0, 1, true)
            );
        }
        other => panic!("unexpected log ops {other:?}"),
    }
    assert_eq!(h.core.high_watermark(), None);
    let out = h.durable_all();
    assert_eq!(hw_outputs(&out), vec![1]);
    assert_eq!(h.core.high_watermark(), Some(1));
}

#[test]
fn initialize_as_leader_from_state_store() {
    // The draft's election; with pre-vote the campaign starts as a pre-vote round in epoch 5
    // (pre_vote.rs).
    let mut h = Harness::restarted(5, 1, -1).without_pre_vote();
    assert_eq!(h.core.role(), Role::Resigned);
    assert_eq!(h.core.epoch(), 5);
    let out = h.tick();
    assert!(persisted(&out).is_empty(), "restored state is unchanged");
    // It announces its resignation so the others need not wait for their fetch timeout.
    let ends = recipients(
        &out,
        |r| matches!(r, Request::EndQuorumEpoch(r) if r.leader_epoch == 5),
    );
    assert_eq!(ends, vec![2, 3]);
    // Never leader again in epoch 5: after the election timeout it campaigns in epoch 6.
    let out = h.run_until(2_001);
    assert_eq!(h.core.role(), Role::Candidate);
    assert_own_candidacy(&h, &out, 6);
}

#[test]
fn initialize_as_candidate_from_state_store() {
    let mut h = Harness::restarted(2, -1, 1);
    assert_eq!(h.core.role(), Role::Candidate);
    let out = h.tick();
    assert!(persisted(&out).is_empty(), "same epoch, same vote");
    let votes = sends(&out);
    assert_eq!(votes.iter().map(|v| v.0).collect::<Vec<_>>(), vec![2, 3]);
    for (_, _, r) in &votes {
        assert_eq!(r, &Harness::vote_request(1, 2, 0, 0));
    }
}

#[test]
fn initialize_as_follower_empty_log() {
    let (h, _) = Harness::follower(1, &[1, 2, 3], 3, 2, log(0, &[]));
    assert_eq!(h.core.role(), Role::Follower);
    assert_eq!(h.core.leader_id(), Some(2));
}

#[test]
fn initialize_as_follower_non_empty_log() {
    let mut h = Harness::restarted_with(3, 2, -1, log(1, &[(3, 0)]));
    let out = h.tick();
    let s = sends(&out);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0, 2);
    let f = fetch_req(&s[0].2);
    assert_eq!(
        (f.fetch_offset, f.last_fetched_epoch, f.leader_epoch),
        (1, 3, 3)
    );
    assert!(f.is_follower);
}

#[test]
fn initialize_primordial_epoch() {
    let mut h = Harness::fresh(1).without_pre_vote();
    assert_eq!((h.core.epoch(), h.core.role()), (0, Role::Unattached));
    let out = h.tick();
    let states = persisted(&out);
    assert_eq!(states[0].epoch, 0, "the bootstrap state is written first");
    assert_eq!(states[0].current_voters, vec![1, 2, 3]);
    assert_eq!((states[1].epoch, states[1].voted_id), (1, 1));
    assert_eq!(h.core.role(), Role::Candidate);
    assert_eq!(sends(&out).len(), 2);
}

#[test]
fn initialize_with_corrupted_store_fails() {
    let bad = stored(3, 2, 2, &[1, 2, 3]);
    let err = RaftCore::new(config(1, &[1, 2, 3]), Some(bad), log(0, &[]), 0).err();
    assert!(
        matches!(err, Some(InitError::InvalidStoredState(_))),
        "{err:?}"
    );
    let negative = stored(-1, -1, -1, &[1, 2, 3]);
    assert!(RaftCore::new(config(1, &[1, 2, 3]), Some(negative), log(0, &[]), 0).is_err());
}

#[test]
fn voters_between_config_and_state_may_differ_and_the_state_wins() {
    let core = RaftCore::new(
        config(1, &[1, 2, 3]),
        Some(stored(1, -1, -1, &[1, 2, 4])),
        log(0, &[]),
        0,
    )
    .unwrap();
    assert_eq!(core.voters(), &[1, 2, 4]);
}

#[test]
fn epoch_in_log_larger_than_in_file_starts_unattached() {
    let mut h = Harness::restarted_with(2, 2, -1, log(5, &[(1, 0), (4, 3)]));
    assert_eq!((h.core.role(), h.core.epoch()), (Role::Unattached, 4));
    let out = h.tick();
    assert_eq!(
        persisted(&out)[0].epoch,
        4,
        "the adopted epoch is persisted first"
    );
}

#[test]
fn initialize_observer_no_previous_state() {
    let mut h = Harness::fresh(4);
    assert!(h.core.is_observer());
    let out = h.tick();
    assert_eq!(h.core.role(), Role::Unattached);
    let s = sends(&out);
    assert_eq!(s.len(), 1);
    assert!(matches!(s[0].2, Request::FindQuorum(_)));
    assert!([1, 2, 3].contains(&s[0].0));
}

/// Why the core refused to start from `stored` and `log` as node 1 configured with `voters`
/// (None: it started).
fn refusal(voters: &[NodeId], stored: ElectionState, log: LogSnapshot) -> Option<&'static str> {
    let mut config = config(1, voters);
    // With no voters configured it learns them from a bootstrap server.
    config.bootstrap_servers = usize::from(voters.is_empty());
    match RaftCore::new(config, Some(stored), log, 0) {
        Ok(_) => None,
        Err(InitError::InvalidStoredState(why)) => Some(why),
        Err(other) => panic!("{other:?}"),
    }
}

/// Each check of a stored state allows its edge and refuses the value past it, by name
/// (caught: `epoch < 0` turned into `<= 0`; a voter id `< 0` into `<= 0` or `== 0`; the applied
/// offset's `< 0 || > end` into `&&`; and `voted_id >= 0` into `< 0` in the check for a leader
/// or a vote without a voter set).
#[test]
fn a_stored_state_is_checked_to_its_edges() {
    let three = &[1, 2, 3];
    let empty = || log(0, &[]);
    assert_eq!(refusal(three, stored(0, -1, -1, three), empty()), None);
    assert_eq!(
        refusal(three, stored(-1, -1, -1, three), empty()),
        Some("negative epoch")
    );
    assert_eq!(refusal(three, stored(1, -1, -1, &[0, 1, 2]), empty()), None);
    assert_eq!(
        refusal(three, stored(1, -1, -1, &[-1, 1, 2]), empty()),
        Some("negative voter id")
    );
    let applied = |offset| ElectionState {
        applied_offset: offset,
        ..stored(1, -1, -1, three)
    };
    let outside = Some("the applied offset is outside the log");
    assert_eq!(refusal(three, applied(3), log(3, &[(1, 0)])), None);
    assert_eq!(refusal(three, applied(4), log(3, &[(1, 0)])), outside);
    assert_eq!(refusal(three, applied(-1), log(3, &[(1, 0)])), outside);
    // An observer that learns its set from bootstrap servers has none stored, and no vote.
    assert_eq!(refusal(&[], stored(1, -1, -1, &[]), empty()), None);
    assert_eq!(
        refusal(&[], stored(1, -1, 2, &[]), empty()),
        Some("a leader or a vote without a voter set")
    );
}

/// The log's voter records above the applied offset are replayed at start only if they are in
/// order and inside the log (caught: `||` turned into `&&`, and `o >= r.offset` into `<`, in
/// `replay_log`).
#[test]
fn the_logs_voter_records_must_be_in_order_and_inside_it() {
    use super::reassign::voter_batch;
    let three = &[1, 2, 3];
    let with = |end, batches: &[Batch]| {
        let mut snapshot = log(end, &[(1, 0)]);
        snapshot.voter_records = crate::record::voters::voter_records(batches).unwrap();
        snapshot
    };
    let bad = Some("the log's voter records are out of order or past its end");
    let grow = voter_batch(1, 1, &[1, 2, 3, 4], None);
    let shrink = voter_batch(2, 1, &[1, 2, 3], None);
    let s = || stored(1, -1, -1, three);
    let both = [grow.clone(), shrink.clone()];
    assert_eq!(refusal(three, s(), with(3, &both)), None);
    assert_eq!(refusal(three, s(), with(2, &both)), bad, "past the end");
    assert_eq!(
        refusal(three, s(), with(3, &[shrink, grow])),
        bad,
        "out of order"
    );
}
