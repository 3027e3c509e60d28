//! The election state (epoch, leader, vote, role) and the voter set: the ONLY place where role
//! transitions happen. Each transition is checked against docs/protocol.md section 2; an illegal
//! one is refused without touching anything, a legal one pushes `PersistElectionState` to the
//! outputs before the new state becomes visible.

use super::admission::MAX_PEER_EPOCH;
use super::types::{ElectionState, Epoch, LogSnapshot, NodeId, Output, RaftConfig};
use super::Role;

/// A transition the rules of docs/protocol.md section 2 forbid. Nothing was changed or emitted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("epoch {to} is lower than the current epoch {from}")]
    LowerEpoch { from: Epoch, to: Epoch },
    #[error("illegal transition from {from:?} to {to:?}: {why}")]
    Illegal {
        from: Role,
        to: Role,
        why: &'static str,
    },
    #[error(
        "epoch {epoch} is the last one: no election is possible beyond it (docs/operations.md, \
         \"Recovering a node whose stored state is refused\")"
    )]
    EpochExhausted { epoch: Epoch },
    #[error("cannot adopt the voter set {voters:?}: {why}")]
    AdoptVoters {
        voters: Vec<NodeId>,
        why: &'static str,
    },
}

/// Why a core cannot start from the stored state and configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InitError {
    #[error("stored voters {stored:?} differ from configured voters {configured:?}")]
    VotersMismatch {
        stored: Vec<NodeId>,
        configured: Vec<NodeId>,
    },
    #[error("invalid configuration: {0}")]
    InvalidConfig(&'static str),
    #[error("invalid stored election state: {0}")]
    InvalidStoredState(&'static str),
    #[error("the log's leader-epoch cache: {0}")]
    InvalidLog(crate::base::EpochCacheError),
}

#[derive(Clone, Debug)]
pub struct QuorumState {
    local_id: NodeId,
    voters: Vec<NodeId>,
    target_voters: Option<Vec<NodeId>>,
    applied_offset: i64,
    epoch: Epoch,
    leader_id: Option<NodeId>,
    voted_id: Option<NodeId>,
    role: Role,
}

fn sorted(mut v: Vec<NodeId>) -> Vec<NodeId> {
    v.sort_unstable();
    v.dedup();
    v
}

impl QuorumState {
    /// Applies the restart rules (docs/protocol.md section 2, "Restart"). Returns the state and
    /// whether it differs from what is stored (and so must be persisted before it is acted on).
    pub fn restore(
        config: &RaftConfig,
        stored: Option<ElectionState>,
        log: &LogSnapshot,
    ) -> Result<(QuorumState, bool), InitError> {
        if config.node_id < 0 {
            return Err(InitError::InvalidConfig("node id must not be negative"));
        }
        let configured = sorted(config.voters.clone());
        if configured.first().is_some_and(|v| *v < 0) {
            return Err(InitError::InvalidConfig("voter ids must be >= 0"));
        }
        let log_epoch = log.epochs.last().map_or(0, |e| e.0);
        let Some(stored) = stored else {
            Self::check_voters_learnable(config, &configured)?;
            let mut qs = QuorumState::unattached(config.node_id, configured, log_epoch);
            qs.role = Role::Unattached;
            return Ok((qs, true));
        };
        if stored.epoch < 0 {
            return Err(InitError::InvalidStoredState("negative epoch"));
        }
        if stored.leader_id >= 0 && stored.voted_id >= 0 {
            return Err(InitError::InvalidStoredState("both a leader and a vote"));
        }
        let stored_voters = sorted(stored.current_voters.clone());
        if stored_voters.first().is_some_and(|v| *v < 0) {
            return Err(InitError::InvalidStoredState("negative voter id"));
        }
        if !stored_voters.is_empty() && !configured.is_empty() && stored_voters != configured {
            return Err(InitError::VotersMismatch {
                stored: stored_voters,
                configured,
            });
        }
        // Rule 2: after the first start the voter set comes from the file; the
        // configuration only seeds it (and may be empty for an observer using bootstrap servers).
        let voters = if stored_voters.is_empty() {
            configured
        } else {
            stored_voters.clone()
        };
        Self::check_voters_learnable(config, &voters)?;
        if voters.is_empty() && (stored.leader_id >= 0 || stored.voted_id >= 0) {
            return Err(InitError::InvalidStoredState(
                "a leader or a vote without a voter set",
            ));
        }
        let mut qs = QuorumState::unattached(config.node_id, voters, stored.epoch);
        qs.target_voters = stored.target_voters.clone();
        qs.applied_offset = stored.applied_offset;
        if log_epoch > stored.epoch {
            // Rule 3: the log saw a newer epoch than the file (the file write was lost).
            qs.epoch = log_epoch;
            return Ok((qs, true));
        }
        let observer = qs.is_observer();
        let me = config.node_id;
        if stored.leader_id == me {
            if observer {
                return Err(InitError::InvalidStoredState("an observer cannot have led"));
            }
            // Rule 4 (KAFKA-10527): never leader again in the same epoch.
            qs.leader_id = Some(me);
            qs.role = Role::Resigned;
        } else if stored.voted_id == me {
            if observer {
                return Err(InitError::InvalidStoredState(
                    "an observer cannot have voted",
                ));
            }
            qs.voted_id = Some(me);
            qs.role = Role::Candidate;
        } else if stored.voted_id >= 0 && !observer {
            qs.voted_id = Some(stored.voted_id);
            qs.role = Role::Voted;
        } else if stored.leader_id >= 0 {
            qs.leader_id = Some(stored.leader_id);
            qs.role = Role::Follower;
        }
        let changed = stored_voters != qs.voters;
        Ok((qs, changed))
    }

    /// An unknown voter set is fine only if bootstrap servers can tell it.
    fn check_voters_learnable(config: &RaftConfig, voters: &[NodeId]) -> Result<(), InitError> {
        if voters.is_empty() && config.bootstrap_servers == 0 {
            return Err(InitError::InvalidConfig(
                "no voters configured or stored, and no bootstrap servers to learn them from",
            ));
        }
        Ok(())
    }

    fn unattached(local_id: NodeId, voters: Vec<NodeId>, epoch: Epoch) -> Self {
        QuorumState {
            local_id,
            voters,
            target_voters: None,
            applied_offset: 0,
            epoch,
            leader_id: None,
            voted_id: None,
            role: Role::Unattached,
        }
    }

    pub fn local_id(&self) -> NodeId {
        self.local_id
    }
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }
    pub fn role(&self) -> Role {
        self.role
    }
    pub fn leader_id(&self) -> Option<NodeId> {
        self.leader_id
    }
    pub fn voted_id(&self) -> Option<NodeId> {
        self.voted_id
    }
    pub fn voters(&self) -> &[NodeId] {
        &self.voters
    }
    pub fn is_voter(&self, id: NodeId) -> bool {
        self.voters.binary_search(&id).is_ok()
    }
    /// False for an observer that has not learned the voter set from a bootstrap server yet.
    pub fn voters_known(&self) -> bool {
        !self.voters.is_empty()
    }
    /// True for every node outside the voter set, including one that does not know it yet.
    pub fn is_observer(&self) -> bool {
        !self.is_voter(self.local_id)
    }
    /// Votes needed to win, and offsets needed to commit: a majority of the voters.
    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    /// What the quorum-state file must hold for the current state.
    pub fn election_state(&self) -> ElectionState {
        ElectionState {
            epoch: self.epoch,
            leader_id: self.leader_id.unwrap_or(-1),
            voted_id: self.voted_id.unwrap_or(-1),
            current_voters: self.voters.clone(),
            target_voters: self.target_voters.clone(),
            applied_offset: self.applied_offset,
        }
    }

    /// Persist first, then make the new state visible.
    fn commit(&mut self, next: QuorumState, out: &mut Vec<Output>) {
        next.assert_consistent();
        assert!(
            next.epoch >= self.epoch,
            "epoch {} after {}",
            next.epoch,
            self.epoch
        );
        out.push(Output::PersistElectionState(next.election_state()));
        *self = next;
    }

    /// What each role implies about the leader and the vote (docs/protocol.md section 2); the
    /// simulator's invariants check the same from outside (one leader per epoch, one vote per
    /// voter and epoch, the vote persisted before it is granted).
    fn assert_consistent(&self) {
        let me = Some(self.local_id);
        let (leader, vote) = (self.leader_id, self.voted_id);
        let ok = match self.role {
            Role::Unattached => leader.is_none() && vote.is_none(),
            Role::Voted => leader.is_none() && vote.is_some() && vote != me,
            Role::Candidate => leader.is_none() && vote == me,
            // A leader has no vote to give: it voted for itself, and the file keeps only the
            // leader once it won.
            Role::Leader | Role::Resigned => leader == me && vote.is_none(),
            Role::Follower => leader.is_some() && leader != me && vote.is_none(),
        };
        assert!(
            ok,
            "role {:?} with leader {leader:?} and vote {vote:?}",
            self.role
        );
        assert!(
            !self.is_observer() || matches!(self.role, Role::Unattached | Role::Follower),
            "an observer as {:?}",
            self.role
        );
        assert!(self.epoch >= 0, "negative epoch {}", self.epoch);
    }

    fn illegal(&self, to: Role, why: &'static str) -> TransitionError {
        TransitionError::Illegal {
            from: self.role,
            to,
            why,
        }
    }

    fn check_epoch(&self, epoch: Epoch) -> Result<(), TransitionError> {
        if epoch < self.epoch {
            return Err(TransitionError::LowerEpoch {
                from: self.epoch,
                to: epoch,
            });
        }
        Ok(())
    }

    /// Persists the current state unchanged (used once after a restart that changed it).
    pub fn persist_current(&self, out: &mut Vec<Output>) {
        out.push(Output::PersistElectionState(self.election_state()));
    }

    /// Learn a higher epoch without a leader. Observers may also drop a leader they can no
    /// longer reach within the same epoch (to rediscover it).
    pub fn become_unattached(
        &mut self,
        epoch: Epoch,
        out: &mut Vec<Output>,
    ) -> Result<(), TransitionError> {
        self.check_epoch(epoch)?;
        let observer_rediscovery = self.is_observer() && self.role == Role::Follower;
        if epoch == self.epoch && !observer_rediscovery {
            return Err(self.illegal(Role::Unattached, "same epoch"));
        }
        let next = QuorumState::unattached_like(self, epoch);
        self.commit(next, out);
        Ok(())
    }

    fn unattached_like(from: &QuorumState, epoch: Epoch) -> QuorumState {
        QuorumState {
            epoch,
            leader_id: None,
            voted_id: None,
            role: Role::Unattached,
            ..from.clone()
        }
    }

    /// Grant a vote in the current epoch (Unattached only).
    pub fn become_voted(
        &mut self,
        candidate: NodeId,
        out: &mut Vec<Output>,
    ) -> Result<(), TransitionError> {
        if self.is_observer() {
            return Err(self.illegal(Role::Voted, "observers never vote"));
        }
        if candidate == self.local_id {
            return Err(self.illegal(Role::Voted, "cannot vote for self as a voter"));
        }
        if !self.is_voter(candidate) {
            return Err(self.illegal(Role::Voted, "candidate is not a voter"));
        }
        if self.role != Role::Unattached {
            return Err(self.illegal(Role::Voted, "only an unattached voter can vote"));
        }
        let next = QuorumState {
            voted_id: Some(candidate),
            role: Role::Voted,
            ..self.clone()
        };
        self.commit(next, out);
        Ok(())
    }

    /// Start an election: epoch + 1, vote for self.
    pub fn become_candidate(&mut self, out: &mut Vec<Output>) -> Result<(), TransitionError> {
        if self.is_observer() {
            return Err(self.illegal(Role::Candidate, "observers never campaign"));
        }
        if self.role == Role::Leader {
            return Err(self.illegal(
                Role::Candidate,
                "a leader must resign or learn a higher epoch first",
            ));
        }
        // Never into an epoch the other voters would refuse (docs/protocol.md, "Hostile input").
        if self.epoch >= MAX_PEER_EPOCH {
            return Err(TransitionError::EpochExhausted { epoch: self.epoch });
        }
        let epoch = self.epoch + 1;
        let next = QuorumState {
            epoch,
            leader_id: None,
            voted_id: Some(self.local_id),
            role: Role::Candidate,
            ..self.clone()
        };
        self.commit(next, out);
        Ok(())
    }

    /// Win the election: needs `granted` (self included) to be a majority.
    pub fn become_leader(
        &mut self,
        granted: usize,
        out: &mut Vec<Output>,
    ) -> Result<(), TransitionError> {
        if self.role != Role::Candidate {
            return Err(self.illegal(Role::Leader, "only a candidate can become leader"));
        }
        if granted < self.majority() {
            return Err(self.illegal(Role::Leader, "no majority of granted votes"));
        }
        let next = QuorumState {
            leader_id: Some(self.local_id),
            voted_id: None,
            role: Role::Leader,
            ..self.clone()
        };
        self.commit(next, out);
        Ok(())
    }

    /// Follow `leader` in `epoch`.
    pub fn become_follower(
        &mut self,
        epoch: Epoch,
        leader: NodeId,
        out: &mut Vec<Output>,
    ) -> Result<(), TransitionError> {
        self.check_epoch(epoch)?;
        if leader == self.local_id {
            return Err(self.illegal(Role::Follower, "cannot follow self"));
        }
        if !self.is_voter(leader) {
            return Err(self.illegal(Role::Follower, "leader is not a voter"));
        }
        if epoch == self.epoch {
            match self.role {
                Role::Unattached | Role::Voted | Role::Candidate => {}
                Role::Follower => {
                    return Err(
                        self.illegal(Role::Follower, "already following a leader in this epoch")
                    )
                }
                Role::Leader | Role::Resigned => {
                    return Err(self.illegal(Role::Follower, "this node led this epoch"))
                }
            }
        }
        let next = QuorumState {
            epoch,
            leader_id: Some(leader),
            voted_id: None,
            role: Role::Follower,
            ..self.clone()
        };
        self.commit(next, out);
        Ok(())
    }

    /// An observer that started without a voter set adopts the one a bootstrap server of its
    /// cluster reported (docs/protocol.md section 9). Only once: later voter-set changes are
    /// reassignments (AlterQuorum, not implemented: section 12), which arrive through the log,
    /// never through FindQuorum. The local node must not be in the set: a node that learns it is a
    /// voter this way has no vote history (it may have lost its disk), and must not vote or count
    /// toward the high watermark.
    pub fn adopt_voters(
        &mut self,
        voters: Vec<NodeId>,
        out: &mut Vec<Output>,
    ) -> Result<(), TransitionError> {
        let voters = sorted(voters);
        let refuse = |why| {
            Err(TransitionError::AdoptVoters {
                voters: voters.clone(),
                why,
            })
        };
        if self.voters_known() {
            return refuse("the voter set is already known");
        }
        if voters.is_empty() || voters[0] < 0 {
            return refuse("voter ids must be a non-empty set of ids >= 0");
        }
        if voters.binary_search(&self.local_id).is_ok() {
            return refuse("this node is one of them, but was started without quorum.voters");
        }
        assert!(self.leader_id.is_none() && self.voted_id.is_none());
        let next = QuorumState {
            voters: voters.clone(),
            ..self.clone()
        };
        self.commit(next, out);
        Ok(())
    }

    /// Graceful resignation (shutdown, check-quorum): stays in the epoch, never votes in it.
    pub fn become_resigned(&mut self, out: &mut Vec<Output>) -> Result<(), TransitionError> {
        if self.role != Role::Leader {
            return Err(self.illegal(Role::Resigned, "only a leader resigns"));
        }
        let next = QuorumState {
            role: Role::Resigned,
            ..self.clone()
        };
        self.commit(next, out);
        Ok(())
    }
}
