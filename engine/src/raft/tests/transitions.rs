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
    if let Some(c) = q.candidate_mut() {
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
    }
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
    // Following self or a non-voter; voting for self or a non-voter.
    refused(state(Unattached), |q, o| q.become_follower(3, 1, o));
    refused(state(Unattached), |q, o| q.become_follower(3, 9, o));
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
