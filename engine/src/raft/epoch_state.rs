//! The epoch state: the role a node holds in its current epoch, with that role's data
//! (docs/protocol.md section 2). `QuorumState` holds the one instance and is the only place it
//! changes; `Role` is derived from it, and so are the leader and the vote that go to the
//! quorum-state file.

use std::collections::BTreeSet;

use super::leader::LeaderState;
use super::types::{Epoch, NodeId, Offset, TimeMs};
use super::Role;

/// A candidacy in progress: the real one of a Candidate, or the pre-vote round of a Prospective.
#[derive(Debug, Default)]
pub(crate) struct CandidateState {
    pub(crate) granted: BTreeSet<NodeId>,
    pub(crate) rejected: BTreeSet<NodeId>,
    /// Lost (or timed out): waiting for the backoff before the next candidacy.
    pub(crate) backing_off: bool,
}

impl CandidateState {
    /// A new candidacy: its own vote is the first one granted.
    pub(crate) fn voted_for_self(local: NodeId) -> Self {
        let mut c = CandidateState::default();
        c.granted.insert(local);
        c
    }

    /// Still campaigning, and `voter` has not answered yet.
    pub(crate) fn awaits_vote(&self, voter: NodeId) -> bool {
        !self.backing_off && !self.granted.contains(&voter) && !self.rejected.contains(&voter)
    }
}

/// A resigned leader's EndQuorumEpoch bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct ResignedState {
    pub(crate) successors: Vec<NodeId>,
    pub(crate) acked: BTreeSet<NodeId>,
}

/// The role in the current epoch and what only that role keeps. The leader of the epoch and the
/// vote are implied: a candidate voted for itself, a leader and a resigned leader led it, and a
/// leader has no vote to give (the file keeps only the leader once it won).
#[derive(Debug)]
pub(crate) enum EpochState {
    /// No leader followed and no vote given in this epoch. `lost_leader`: the leader of this
    /// epoch an observer stopped following to look for it again (docs/protocol.md section 2).
    /// The epoch had a leader, so this node never votes in it (it may have voted for that
    /// leader before its log made it an observer), and the file keeps that leader.
    Unattached {
        epoch: Epoch,
        lost_leader: Option<NodeId>,
    },
    /// Voted for `voted_for` (another voter) in this epoch.
    Voted { epoch: Epoch, voted_for: NodeId },
    /// Standing for election in this epoch (and voted for itself).
    Candidate {
        epoch: Epoch,
        candidacy: CandidateState,
    },
    /// Leads this epoch.
    Leader {
        epoch: Epoch,
        leader: Box<LeaderState>,
    },
    /// Asks the other voters whether they would vote for it in the next epoch, without
    /// raising its own (docs/protocol.md, "Pre-vote"). Nothing of it is persisted: the leader
    /// or the vote it had in this epoch is kept (what the quorum-state file still holds), so it
    /// never gives a second vote or follows a second leader in the epoch. At most one of the
    /// two is set.
    Prospective {
        epoch: Epoch,
        /// The leader of this epoch it followed (and still fetches from), or itself if it led
        /// the epoch and resigned.
        leader: Option<NodeId>,
        /// Its vote in this epoch: another voter's, or its own if it stood as candidate.
        voted_for: Option<NodeId>,
        /// The pre-votes of the current round.
        round: CandidateState,
        /// Durable offset carried by the newest fetch sent (to `leader`, when it is another).
        sent_durable: Offset,
    },
    /// Follows `leader` in this epoch.
    Follower {
        epoch: Epoch,
        leader: NodeId,
        /// Durable offset carried by the newest fetch sent.
        sent_durable: Offset,
        /// When the leader was last heard directly — a successful fetch answer, or its
        /// BeginQuorumEpoch (None: not yet in this role, as after a restart or when a third
        /// party named it): while that is within the fetch timeout the leader is live, and
        /// pre-votes are refused.
        heard_at: Option<TimeMs>,
        /// The leader's lease stamp in the answer heard at `heard_at` (None: none yet), echoed
        /// in every fetch (docs/consistency.md, "The leader lease").
        lease_stamp: Option<i64>,
    },
    /// Led this epoch and gave it up (or restarted after leading it): never leads or votes in
    /// it again.
    Resigned {
        epoch: Epoch,
        resigned: ResignedState,
    },
}

impl EpochState {
    pub(crate) fn role(&self) -> Role {
        match self {
            EpochState::Unattached { .. } => Role::Unattached,
            EpochState::Voted { .. } => Role::Voted,
            EpochState::Prospective { .. } => Role::Prospective,
            EpochState::Candidate { .. } => Role::Candidate,
            EpochState::Leader { .. } => Role::Leader,
            EpochState::Follower { .. } => Role::Follower,
            EpochState::Resigned { .. } => Role::Resigned,
        }
    }

    pub(crate) fn epoch(&self) -> Epoch {
        match self {
            EpochState::Unattached { epoch, .. }
            | EpochState::Voted { epoch, .. }
            | EpochState::Prospective { epoch, .. }
            | EpochState::Candidate { epoch, .. }
            | EpochState::Leader { epoch, .. }
            | EpochState::Follower { epoch, .. }
            | EpochState::Resigned { epoch, .. } => *epoch,
        }
    }

    /// The epoch's leader as this node knows it (`local` is this node's id).
    pub(crate) fn leader_id(&self, local: NodeId) -> Option<NodeId> {
        match self {
            EpochState::Leader { .. } | EpochState::Resigned { .. } => Some(local),
            EpochState::Follower { leader, .. } => Some(*leader),
            EpochState::Prospective { leader, .. } => *leader,
            EpochState::Unattached { .. }
            | EpochState::Voted { .. }
            | EpochState::Candidate { .. } => None,
        }
    }

    /// The leader of the epoch an unattached observer stopped following (see `Unattached`).
    pub(crate) fn lost_leader(&self) -> Option<NodeId> {
        match self {
            EpochState::Unattached { lost_leader, .. } => *lost_leader,
            _ => None,
        }
    }

    /// The vote this node gave in the epoch (`local` is this node's id).
    pub(crate) fn voted_id(&self, local: NodeId) -> Option<NodeId> {
        match self {
            EpochState::Voted { voted_for, .. } => Some(*voted_for),
            EpochState::Candidate { .. } => Some(local),
            EpochState::Prospective { voted_for, .. } => *voted_for,
            EpochState::Unattached { .. }
            | EpochState::Leader { .. }
            | EpochState::Follower { .. }
            | EpochState::Resigned { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a voter that has not answered a running candidacy is asked (again): the retries of
    /// votes and pre-votes rest on it.
    #[test]
    fn a_candidacy_awaits_only_the_voters_that_have_not_answered_while_it_runs() {
        let mut c = CandidateState::voted_for_self(1);
        assert!(!c.awaits_vote(1), "its own vote is in");
        assert!(c.awaits_vote(2) && c.awaits_vote(3) && c.awaits_vote(4));
        c.granted.insert(2);
        c.rejected.insert(3);
        assert!(!c.awaits_vote(2), "granted");
        assert!(!c.awaits_vote(3), "rejected");
        assert!(c.awaits_vote(4), "not answered yet");
        c.backing_off = true;
        assert!(!c.awaits_vote(4), "a candidacy backing off asks nobody");
    }
}
