//! The QuorumState transition matrix (QuorumStateTest): every allowed transition persists the
//! new state before it is visible; every illegal one is refused without touching anything.

use super::harness::*;
use crate::raft::epoch_state::EpochState;
use crate::raft::*;

const VOTERS: &[NodeId] = &[1, 2, 3];

type Transition = fn(&mut QuorumState, &mut Vec<Output>) -> Result<EpochState, TransitionError>;

/// Leader from a candidacy that was granted `votes` votes (its own first).
fn lead_with(
    q: &mut QuorumState,
    votes: usize,
    out: &mut Vec<Output>,
) -> Result<EpochState, TransitionError> {
    if let Some(c) = q.campaign_mut() {
        c.granted.extend(VOTERS.iter().take(votes));
    }
    q.become_leader(0, 0, out)
}

fn restore(id: NodeId, s: ElectionState) -> QuorumState {
    QuorumState::restore(&config(id, VOTERS), Some(s), &log(0, &[]))
        .expect("valid")
        .0
}

fn state(role: Role) -> QuorumState {
    match role {
        Role::Unattached => restore(1, stored(2, -1, -1, VOTERS)),
        Role::Voted => restore(1, stored(2, -1, 2, VOTERS)),
        Role::Candidate => restore(1, stored(2, -1, 1, VOTERS)),
        Role::Follower => restore(1, stored(2, 2, -1, VOTERS)),
        Role::Resigned => restore(1, stored(2, 1, -1, VOTERS)),
        Role::Leader => {
            let mut q = restore(1, stored(2, -1, 1, VOTERS));
            lead_with(&mut q, 2, &mut Vec::new()).expect("majority");
            q
        }
        // Prospective after following 2 in epoch 2 (the other origins: `prospective_from`).
        Role::Prospective => prospective_from(Role::Follower),
    }
}

/// Prospective in epoch 2, having been `from` (which decides the leader or vote it keeps).
fn prospective_from(from: Role) -> QuorumState {
    let mut q = state(from);
    let mut out = Vec::new();
    q.become_prospective(&mut out)
        .expect("a voter may ask for pre-votes");
    assert!(out.is_empty(), "a pre-vote round persists nothing: {out:?}");
    q
}

fn observer() -> QuorumState {
    restore(4, stored(2, -1, -1, VOTERS))
}

fn allowed(mut q: QuorumState, t: Transition, role: Role, epoch: Epoch) {
    let mut out = Vec::new();
    t(&mut q, &mut out).unwrap_or_else(|e| panic!("refused: {e}"));
    assert_eq!(out.len(), 1, "exactly one persist");
    match &out[0] {
        Output::PersistElectionState(s) => assert_eq!(s, &q.election_state()),
        other => panic!("{other:?}"),
    }
    assert_eq!((q.role(), q.epoch()), (role, epoch));
}

fn refused(mut q: QuorumState, t: Transition) {
    let before = (q.election_state(), q.role());
    let mut out = Vec::new();
    assert!(t(&mut q, &mut out).is_err());
    assert!(out.is_empty(), "nothing persisted");
    assert_eq!((q.election_state(), q.role()), before, "state untouched");
}

#[test]
fn allowed_transitions_persist_before_applying() {
    use Role::*;
    let unattached3: Transition = |q, o| q.become_unattached(3, o);
    let voted2: Transition = |q, o| q.become_voted(2, o);
    let candidate: Transition = |q, o| q.become_candidate(o);
    let follow2_same: Transition = |q, o| q.become_follower(2, 2, o);
    let follow2_next: Transition = |q, o| q.become_follower(3, 2, o);
    let follow3_next: Transition = |q, o| q.become_follower(3, 3, o);
    let lead: Transition = |q, o| lead_with(q, 2, o);
    let resign: Transition = |q, o| q.become_resigned(o);

    for from in [Unattached, Voted, Candidate, Leader, Follower, Resigned] {
        allowed(state(from), unattached3, Unattached, 3);
        allowed(state(from), follow2_next, Follower, 3);
    }
    allowed(state(Unattached), voted2, Voted, 2);
    for from in [Unattached, Voted, Candidate, Follower, Resigned] {
        allowed(state(from), candidate, Candidate, 3);
    }
    for from in [Unattached, Voted, Candidate] {
        allowed(state(from), follow2_same, Follower, 2);
    }
    allowed(state(Follower), follow3_next, Follower, 3);
    allowed(state(Candidate), lead, Leader, 2);
    allowed(state(Leader), resign, Resigned, 2);
    allowed(observer(), follow2_same, Follower, 2);
    let follow9_next: Transition = |q, o| q.become_follower(3, 9, o);
    allowed(state(Unattached), follow9_next, Follower, 3);
    allowed(observer(), unattached3, Unattached, 3);
}

#[test]
fn illegal_transitions_are_refused_without_touching_state() {
    use Role::*;
    let lower: Transition = |q, o| q.become_unattached(1, o);
    let same: Transition = |q, o| q.become_unattached(2, o);
    let follow_lower: Transition = |q, o| q.become_follower(1, 2, o);
    for from in [Unattached, Voted, Candidate, Leader, Follower, Resigned] {
        refused(state(from), lower);
        refused(state(from), same);
        refused(state(from), follow_lower);
    }
    // Leader -> Candidate directly.
    refused(state(Leader), |q, o| q.become_candidate(o));
    // Candidate -> Leader without a majority; Leader from anything but Candidate.
    refused(state(Candidate), |q, o| lead_with(q, 1, o));
    for from in [Unattached, Voted, Follower, Resigned, Leader] {
        refused(state(from), |q, o| lead_with(q, 3, o));
    }
    // Following self; voting for self or a non-voter. (Following a leader outside this node's
    // set is allowed: docs/protocol.md, "Driving the change", rule 8.)
    refused(state(Unattached), |q, o| q.become_follower(3, 1, o));
    refused(state(Unattached), |q, o| q.become_voted(1, o));
    refused(state(Unattached), |q, o| q.become_voted(9, o));
    // Voting twice in an epoch (also for the same candidate: that is not a transition).
    refused(state(Voted), |q, o| q.become_voted(3, o));
    refused(state(Voted), |q, o| q.become_voted(2, o));
    refused(state(Candidate), |q, o| q.become_voted(2, o));
    // Changing leader within an epoch; a resigned or leader node following in its own epoch.
    refused(state(Follower), |q, o| q.become_follower(2, 3, o));
    refused(state(Follower), |q, o| q.become_follower(2, 2, o));
    refused(state(Resigned), |q, o| q.become_follower(2, 2, o));
    refused(state(Leader), |q, o| q.become_follower(2, 2, o));
    // Resigned never votes in its own epoch; resign only from Leader.
    refused(state(Resigned), |q, o| q.become_voted(2, o));
    for from in [Unattached, Voted, Candidate, Follower, Resigned] {
        refused(state(from), |q, o| q.become_resigned(o));
    }
    // Observers: never candidate, voted, leader.
    refused(observer(), |q, o| q.become_candidate(o));
    refused(observer(), |q, o| q.become_voted(2, o));
    refused(observer(), |q, o| lead_with(q, 3, o));
}

#[test]
fn prospective_keeps_what_the_file_holds_and_writes_nothing() {
    use Role::*;
    // (origin, the leader and the vote it keeps in epoch 2)
    for (from, leader, vote) in [
        (Unattached, None, None),
        (Voted, None, Some(2)),
        (Candidate, None, Some(1)),
        (Follower, Some(2), None),
        (Resigned, Some(1), None),
    ] {
        let before = state(from).election_state();
        let q = prospective_from(from);
        assert_eq!((q.role(), q.epoch()), (Prospective, 2), "from {from:?}");
        assert_eq!(
            (q.leader_id(), q.voted_id()),
            (leader, vote),
            "from {from:?}"
        );
        assert_eq!(q.election_state(), before, "from {from:?}");
    }
    // Not from Leader, not twice, never as an observer.
    refused(state(Leader), |q, o| q.become_prospective(o));
    refused(prospective_from(Unattached), |q, o| q.become_prospective(o));
    refused(observer(), |q, o| q.become_prospective(o));
}

#[test]
fn prospective_transitions_persist_only_what_changes() {
    use Role::*;
    // Standing (epoch + 1) and learning a higher epoch are ordinary transitions.
    let candidate: Transition = |q, o| q.become_candidate(o);
    let unattached3: Transition = |q, o| q.become_unattached(3, o);
    let follow3_next: Transition = |q, o| q.become_follower(3, 3, o);
    for from in [Unattached, Voted, Candidate, Follower, Resigned] {
        allowed(prospective_from(from), candidate, Candidate, 3);
        allowed(prospective_from(from), unattached3, Unattached, 3);
        allowed(prospective_from(from), follow3_next, Follower, 3);
    }
    // A vote, when it had none and knew no leader: persisted like any vote.
    allowed(
        prospective_from(Unattached),
        |q, o| q.become_voted(2, o),
        Voted,
        2,
    );
    // Learning the epoch's leader when it knew none, or its vote's candidate won.
    allowed(
        prospective_from(Unattached),
        |q, o| q.become_follower(2, 2, o),
        Follower,
        2,
    );
    allowed(
        prospective_from(Voted),
        |q, o| q.become_follower(2, 2, o),
        Follower,
        2,
    );
    // Back to the leader it kept: the file already says so, nothing is written.
    let mut q = prospective_from(Follower);
    let mut out = Vec::new();
    q.become_follower(2, 2, &mut out).expect("its own leader");
    assert!(out.is_empty(), "{out:?}");
    assert_eq!((q.role(), q.leader_id()), (Follower, Some(2)));
}

#[test]
fn prospective_never_votes_twice_nor_follows_a_second_leader() {
    use Role::*;
    // Voting: not after a vote (its own or another's), not in an epoch it followed or led.
    for from in [Voted, Candidate, Follower, Resigned] {
        refused(prospective_from(from), |q, o| q.become_voted(3, o));
    }
    refused(prospective_from(Voted), |q, o| q.become_voted(2, o));
    // Following: not another leader than the one it kept, not at all in an epoch it led.
    refused(prospective_from(Follower), |q, o| {
        q.become_follower(2, 3, o)
    });
    refused(prospective_from(Resigned), |q, o| {
        q.become_follower(2, 2, o)
    });
    refused(prospective_from(Resigned), |q, o| {
        q.become_follower(2, 3, o)
    });
    // And never leads without a candidacy.
    refused(prospective_from(Unattached), |q, o| lead_with(q, 3, o));
    refused(prospective_from(Unattached), |q, o| q.become_resigned(o));
}
