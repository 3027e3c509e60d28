//! The election state and the voter set: the one `EpochState` (the epoch and the role with its
//! data; the leader and the vote follow from it) and the ONLY place where role transitions
//! happen. Each transition is checked against docs/protocol.md section 2; an illegal one is
//! refused without touching anything, a legal one pushes `PersistElectionState` to the outputs
//! before the new state becomes visible, and hands back the state it replaced.

use std::collections::BTreeSet;

use super::admission::MAX_PEER_EPOCH;
use super::epoch_state::{CandidateState, EpochState, ResignedState};
use super::leader::LeaderState;
use super::types::DirectoryId;
use super::types::{ElectionState, Epoch, LogSnapshot, NodeId, Offset, Output, RaftConfig, TimeMs};
use super::voter_set::{VoterConfig, VoterHistory};
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
    #[error("invalid configuration: {0}")]
    InvalidConfig(&'static str),
    #[error("invalid stored election state: {0}")]
    InvalidStoredState(&'static str),
    #[error("the log's leader-epoch cache: {0}")]
    InvalidLog(crate::base::EpochCacheError),
}

#[derive(Debug)]
pub struct QuorumState {
    local_id: NodeId,
    /// This node's log directory (docs/protocol.md, "Voter identity"): it is the voter of its
    /// id only if the set binds that id to this directory or to none.
    local_directory: DirectoryId,
    /// The voter set in force: `history.latest().current` (a copy, read on every hot path).
    voters: Vec<NodeId>,
    /// The voter records of the log above the committed set the quorum-state file caches
    /// (docs/protocol.md, "The voter set lives in the log").
    history: VoterHistory,
    state: EpochState,
    /// The planted bug `PlantedBug::ApplyOnCommit` (docs/simulation.md, "Planted bugs"):
    /// always false outside the simulator's proof.
    apply_on_commit: bool,
    /// The set this node adopted from a bootstrap server named its id while it had no state
    /// of its own: until its log makes it a voter it is not that voter, and must not speak
    /// for its endpoint (docs/protocol.md, "Endpoints of new voters").
    adopted_own_id: bool,
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
            // `quorum.voters` bootstraps an empty log; the log's own records then say the rest.
            let mut qs = QuorumState::unattached(config.node_id, configured, log_epoch);
            qs.local_directory = config.directory_id;
            qs.replay_log(log, 0)?;
            Self::check_voters_learnable(config, &qs.voters)?;
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
        if stored.applied_offset < 0 || stored.applied_offset > log.end_offset.max(0) {
            return Err(InitError::InvalidStoredState(
                "the applied offset is outside the log",
            ));
        }
        // Rule 2: after the first start the voter set comes from the file and the log; the
        // configuration only seeds an empty one (and may be empty for an observer using
        // bootstrap servers). A configuration that differs is no error: reassignments change
        // the set, and `quorum.voters` is read only to bootstrap (docs/operations.md).
        let voters = if stored_voters.is_empty() {
            configured
        } else {
            stored_voters.clone()
        };
        let mut qs = QuorumState::unattached(config.node_id, voters, stored.epoch);
        qs.local_directory = config.directory_id;
        let target = stored.target_voters.clone().map(sorted);
        let mut base = VoterConfig {
            current: qs.voters.clone(),
            target,
            force: stored.target_force,
            directories: stored.voter_directories.clone(),
            target_directories: stored.target_directories.clone(),
        };
        base.prune_directories();
        qs.history = VoterHistory::new(base, stored.applied_offset);
        qs.replay_log(log, stored.applied_offset)?;
        Self::check_voters_learnable(config, &qs.voters)?;
        if qs.voters.is_empty() && (stored.leader_id >= 0 || stored.voted_id >= 0) {
            return Err(InitError::InvalidStoredState(
                "a leader or a vote without a voter set",
            ));
        }
        if log_epoch > stored.epoch {
            // Rule 3: the log saw a newer epoch than the file (the file write was lost).
            qs.state = EpochState::Unattached {
                epoch: log_epoch,
                lost_leader: None,
            };
            return Ok((qs, true));
        }
        let observer = qs.is_observer();
        let me = config.node_id;
        let epoch = stored.epoch;
        if observer && (stored.leader_id == me || stored.voted_id == me) {
            // It led or stood in this epoch, and its log has since removed it (a change applied
            // on append, not yet durable as undone when it stopped): it gives the epoch up and
            // never votes in it again, and as a non-voter it never campaigns. It names no
            // successors: it is not the leader, so it has none to hand over to.
            qs.state = EpochState::Resigned {
                epoch,
                resigned: ResignedState {
                    successors: Vec::new(),
                    acked: BTreeSet::new(),
                },
            };
            return Ok((qs, true));
        }
        if stored.leader_id == me {
            // Rule 4 (KAFKA-10527): never leader again in the same epoch. The progress of the
            // others was lost with the crash: the successors go by id.
            let successors = qs.voters.iter().copied().filter(|v| *v != me).collect();
            qs.state = EpochState::Resigned {
                epoch,
                resigned: ResignedState {
                    successors,
                    acked: BTreeSet::new(),
                },
            };
        } else if stored.voted_id == me {
            qs.state = EpochState::Candidate {
                epoch,
                candidacy: CandidateState::voted_for_self(me),
            };
        } else if stored.voted_id >= 0 {
            qs.state = EpochState::Voted {
                epoch,
                voted_for: stored.voted_id,
            };
        } else if stored.leader_id >= 0 {
            qs.state = EpochState::Follower {
                epoch,
                leader: stored.leader_id,
                sent_durable: -1,
                heard_at: None,
                lease_stamp: None,
            };
        }
        let changed = qs.election_state() != stored;
        Ok((qs, changed))
    }

    /// Applies the log's voter records at or above `from` (the offset the stored set reflects),
    /// as a replica does when it appends them.
    fn replay_log(&mut self, log: &LogSnapshot, from: Offset) -> Result<(), InitError> {
        for r in log.voter_records.iter().filter(|r| r.offset >= from) {
            if r.offset >= log.end_offset
                || self.history.latest_offset().is_some_and(|o| o >= r.offset)
            {
                return Err(InitError::InvalidStoredState(
                    "the log's voter records are out of order or past its end",
                ));
            }
            self.history.append(r.offset, r.config.clone());
        }
        self.voters = self.history.latest().current.clone();
        Ok(())
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
        let history = VoterHistory::new(VoterConfig::of(voters.clone()), 0);
        QuorumState {
            local_id,
            local_directory: DirectoryId::ZERO,
            voters,
            history,
            state: EpochState::Unattached {
                epoch,
                lost_leader: None,
            },
            apply_on_commit: false,
            adopted_own_id: false,
        }
    }

    pub fn local_id(&self) -> NodeId {
        self.local_id
    }
    pub fn epoch(&self) -> Epoch {
        self.state.epoch()
    }
    pub fn role(&self) -> Role {
        self.state.role()
    }
    pub fn leader_id(&self) -> Option<NodeId> {
        self.state.leader_id(self.local_id)
    }
    pub fn voted_id(&self) -> Option<NodeId> {
        self.state.voted_id(self.local_id)
    }
    /// May this node still vote in its epoch: unattached or prospective, with no vote given
    /// and no leader known or lost in it?
    pub(crate) fn has_vote_to_give(&self) -> bool {
        match &self.state {
            EpochState::Unattached { lost_leader, .. } => lost_leader.is_none(),
            EpochState::Prospective {
                leader, voted_for, ..
            } => leader.is_none() && voted_for.is_none(),
            _ => false,
        }
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
    /// Named by the set this node's log implies: a current voter, or one of the target of a
    /// reassignment in progress (who may vote: docs/protocol.md, "Driving the change", rule 8).
    pub fn named_by_set(&self, id: NodeId) -> bool {
        let c = self.history.latest();
        self.is_voter(id)
            || c.target
                .as_ref()
                .is_some_and(|t| t.binary_search(&id).is_ok())
    }
    /// Is `id` named (a current voter, or one of the target) by the committed set or by any
    /// voter record above it? A candidate this names may hold a log with a newer set than this
    /// node's own (docs/protocol.md, "Driving the change", rule 8).
    pub(crate) fn named_by_any_set(&self, id: NodeId) -> bool {
        self.history.configs().any(|c| {
            c.contains(id)
                || c.target
                    .as_ref()
                    .is_some_and(|t| t.binary_search(&id).is_ok())
        })
    }
    /// The directory the set binds `id` to, as a current voter or else as one of the target
    /// (None: not bound, or not named).
    pub fn bound_directory(&self, id: NodeId) -> Option<DirectoryId> {
        let c = self.history.latest();
        c.directory_of(id)
            .or_else(|| c.target_directories.get(&id).copied())
    }
    /// Does the set bind this node's id to another log directory? Then this node is a replica
    /// that came back without its disk (or a stranger under its id): it is no voter.
    pub fn bound_elsewhere(&self) -> bool {
        self.bound_directory(self.local_id)
            .is_some_and(|d| d != self.local_directory)
    }
    /// Is this node's id the voter of another node, as far as it knows: the set binds the id
    /// to another directory, or binds it to none and this node adopted a set naming its id
    /// while it had no state? Then it never vouches for an endpoint under that id (the voter
    /// whose endpoint it took over would be cut off from the cluster). Once a set binds the id
    /// to this node's directory (a reassignment added it back), it is that voter.
    pub(crate) fn id_belongs_to_another(&self) -> bool {
        match self.bound_directory(self.local_id) {
            Some(directory) => directory != self.local_directory,
            None => self.adopted_own_id,
        }
    }
    pub fn local_directory(&self) -> DirectoryId {
        self.local_directory
    }
    /// True for every node outside the voter set, including one that does not know it yet,
    /// and for a node whose id the set binds to another directory.
    pub fn is_observer(&self) -> bool {
        !self.is_voter(self.local_id) || self.bound_elsewhere()
    }
    /// Votes needed to win, and offsets needed to commit: a majority of the voters.
    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    // ----- the role's data (the role itself changes only through the transitions below) -----

    pub(crate) fn state(&self) -> &EpochState {
        &self.state
    }
    pub(crate) fn leader(&self) -> Option<&LeaderState> {
        match &self.state {
            EpochState::Leader { leader, .. } => Some(leader),
            _ => None,
        }
    }
    pub(crate) fn leader_mut(&mut self) -> Option<&mut LeaderState> {
        match &mut self.state {
            EpochState::Leader { leader, .. } => Some(leader),
            _ => None,
        }
    }
    pub(crate) fn candidate(&self) -> Option<&CandidateState> {
        match &self.state {
            EpochState::Candidate { candidacy, .. } => Some(candidacy),
            _ => None,
        }
    }
    pub(crate) fn resigned(&self) -> Option<&ResignedState> {
        match &self.state {
            EpochState::Resigned { resigned, .. } => Some(resigned),
            _ => None,
        }
    }
    pub(crate) fn resigned_mut(&mut self) -> Option<&mut ResignedState> {
        match &mut self.state {
            EpochState::Resigned { resigned, .. } => Some(resigned),
            _ => None,
        }
    }
    pub(crate) fn prospective(&self) -> Option<&CandidateState> {
        match &self.state {
            EpochState::Prospective { round, .. } => Some(round),
            _ => None,
        }
    }
    pub(crate) fn prospective_mut(&mut self) -> Option<&mut CandidateState> {
        match &mut self.state {
            EpochState::Prospective { round, .. } => Some(round),
            _ => None,
        }
    }
    /// The candidacy or pre-vote round this node runs, if it runs one.
    pub(crate) fn campaign_mut(&mut self) -> Option<&mut CandidateState> {
        match &mut self.state {
            EpochState::Candidate { candidacy, .. } => Some(candidacy),
            EpochState::Prospective { round, .. } => Some(round),
            _ => None,
        }
    }
    /// The leader this node fetches from: a follower's, or the one a prospective kept (another
    /// node: a prospective that led the epoch itself fetches from nobody).
    pub fn fetching_from(&self) -> Option<NodeId> {
        match self.state {
            EpochState::Follower { leader, .. } => Some(leader),
            EpochState::Prospective {
                leader: Some(leader),
                ..
            } if leader != self.local_id => Some(leader),
            _ => None,
        }
    }
    /// The durable offset carried by the newest fetch of a node that fetches.
    pub(crate) fn sent_durable(&self) -> Option<Offset> {
        match self.state {
            EpochState::Follower { sent_durable, .. }
            | EpochState::Prospective { sent_durable, .. } => Some(sent_durable),
            _ => None,
        }
    }
    /// A fetching node's durable offset as carried by its newest fetch.
    pub(crate) fn sent_durable_mut(&mut self) -> Option<&mut Offset> {
        match &mut self.state {
            EpochState::Follower { sent_durable, .. }
            | EpochState::Prospective { sent_durable, .. } => Some(sent_durable),
            _ => None,
        }
    }
    /// A follower heard from its leader directly at `now` (a fetch answer, BeginQuorumEpoch).
    /// A fetch answer's lease stamp is kept for the fetches that follow (a BeginQuorumEpoch
    /// carries none and keeps the one there is: the stamp is older than `now` either way).
    pub(crate) fn note_leader_heard(&mut self, now: TimeMs, stamp: Option<i64>) {
        if let EpochState::Follower {
            heard_at,
            lease_stamp,
            ..
        } = &mut self.state
        {
            *heard_at = Some(now);
            if stamp.is_some() {
                *lease_stamp = stamp;
            }
        }
    }
    /// The lease stamp a follower echoes to its leader (docs/consistency.md, "The leader
    /// lease").
    pub(crate) fn lease_stamp(&self) -> Option<i64> {
        match self.state {
            EpochState::Follower { lease_stamp, .. } => lease_stamp,
            _ => None,
        }
    }
    /// When a follower last heard from its leader directly.
    pub(crate) fn leader_heard_at(&self) -> Option<TimeMs> {
        match self.state {
            EpochState::Follower { heard_at, .. } => heard_at,
            _ => None,
        }
    }

    /// What the quorum-state file must hold for the current state.
    pub fn election_state(&self) -> ElectionState {
        self.election_state_of(&self.state)
    }

    fn election_state_of(&self, state: &EpochState) -> ElectionState {
        let (leader, vote) = (
            state.leader_id(self.local_id).or(state.lost_leader()),
            state.voted_id(self.local_id),
        );
        debug_assert!(
            leader.is_none() || vote.is_none(),
            "{:?} has both a leader and a vote",
            state.role()
        );
        // The file caches the committed set only (docs/protocol.md, "The voter set lives in
        // the log"): a truncation never goes below it, and the records above it are in the log.
        let base = self.history.base();
        ElectionState {
            epoch: state.epoch(),
            leader_id: leader.unwrap_or(-1),
            voted_id: vote.unwrap_or(-1),
            current_voters: base.current.clone(),
            target_voters: base.target.clone(),
            target_force: base.force,
            applied_offset: self.history.base_offset(),
            voter_directories: base.directories.clone(),
            target_directories: base.target_directories.clone(),
        }
    }

    /// Persist first, then make the new state visible. Returns the state it replaced.
    ///
    /// A step into or out of Prospective that leaves what the file holds unchanged (entering
    /// it; going back to the leader it kept) writes nothing: a pre-vote round is never
    /// persisted (docs/protocol.md, "Pre-vote"). Every other transition writes, as before
    /// pre-vote existed, even when the content is the same (Leader -> Resigned).
    fn commit(&mut self, next: EpochState, out: &mut Vec<Output>) -> EpochState {
        self.assert_consistent(&next);
        assert!(
            next.epoch() >= self.epoch(),
            "epoch {} after {}",
            next.epoch(),
            self.epoch()
        );
        let persisted = self.election_state_of(&next);
        let prospective = matches!(next, EpochState::Prospective { .. })
            || matches!(self.state, EpochState::Prospective { .. });
        if !prospective || persisted != self.election_state() {
            out.push(Output::PersistElectionState(persisted));
        }
        std::mem::replace(&mut self.state, next)
    }

    /// What each role implies (docs/protocol.md section 2); the simulator's invariants check the
    /// same from outside (one leader per epoch, one vote per voter and epoch, the vote persisted
    /// before it is granted). The leader and the vote of the other roles follow from the variant.
    fn assert_consistent(&self, state: &EpochState) {
        let me = self.local_id;
        let ok = match state {
            EpochState::Voted { voted_for, .. } => *voted_for != me,
            EpochState::Follower { leader, .. } => *leader != me,
            EpochState::Prospective {
                leader, voted_for, ..
            } => leader.is_none() || voted_for.is_none(),
            EpochState::Unattached { .. }
            | EpochState::Candidate { .. }
            | EpochState::Leader { .. }
            | EpochState::Resigned { .. } => true,
        };
        assert!(
            ok,
            "role {:?} with leader {:?} and vote {:?}",
            state.role(),
            state.leader_id(me),
            state.voted_id(me)
        );
        // An observer may also have voted (a node votes outside its own log's set), and be
        // Resigned: a node whose log removed it after it led or stood in the epoch gives that
        // epoch up (`restore`).
        assert!(
            !self.is_observer()
                || matches!(
                    state,
                    EpochState::Unattached { .. }
                        | EpochState::Voted { .. }
                        | EpochState::Follower { .. }
                        | EpochState::Resigned { .. }
                ),
            "an observer as {:?}",
            state.role()
        );
        assert!(state.epoch() >= 0, "negative epoch {}", state.epoch());
        self.debug_assert_role_data(state);
    }

    /// The role's data agrees with the voter set: a candidacy counts its own vote and no voter
    /// both ways; a leader tracks every other voter; a resigned leader names only other voters
    /// as successors.
    fn debug_assert_role_data(&self, state: &EpochState) {
        let me = self.local_id;
        let others = || self.voters.iter().copied().filter(move |v| *v != me);
        match state {
            EpochState::Candidate { candidacy: c, .. }
            | EpochState::Prospective { round: c, .. } => {
                debug_assert!(c.granted.contains(&me), "a candidate votes for itself");
                debug_assert!(c.granted.is_disjoint(&c.rejected), "{c:?}");
            }
            EpochState::Leader { leader, .. } => {
                debug_assert!(leader.voters.keys().copied().eq(others()), "{leader:?}");
            }
            EpochState::Resigned { resigned: r, .. } => {
                debug_assert!(
                    r.successors.iter().all(|s| *s != me && self.is_voter(*s)),
                    "{r:?}"
                );
            }
            EpochState::Unattached { .. }
            | EpochState::Voted { .. }
            | EpochState::Follower { .. } => {}
        }
    }

    fn illegal(&self, to: Role, why: &'static str) -> TransitionError {
        TransitionError::Illegal {
            from: self.role(),
            to,
            why,
        }
    }

    fn check_epoch(&self, epoch: Epoch) -> Result<(), TransitionError> {
        if epoch < self.epoch() {
            return Err(TransitionError::LowerEpoch {
                from: self.epoch(),
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
    pub(crate) fn become_unattached(
        &mut self,
        epoch: Epoch,
        out: &mut Vec<Output>,
    ) -> Result<EpochState, TransitionError> {
        self.check_epoch(epoch)?;
        let observer_rediscovery =
            self.is_observer() && matches!(self.state, EpochState::Follower { .. });
        if epoch == self.epoch() && !observer_rediscovery {
            return Err(self.illegal(Role::Unattached, "same epoch"));
        }
        let lost_leader = if epoch == self.epoch() {
            self.fetching_from()
        } else {
            None
        };
        let next = EpochState::Unattached { epoch, lost_leader };
        Ok(self.commit(next, out))
    }

    /// Grant a vote in the current epoch (Unattached only).
    pub(crate) fn become_voted(
        &mut self,
        candidate: NodeId,
        out: &mut Vec<Output>,
    ) -> Result<EpochState, TransitionError> {
        // A node of the target votes too, and for a candidate of the target or of any set its
        // log states above the committed one (docs/protocol.md, "Driving the change", rule 8):
        // its log may lag the candidate's, or hold a record the candidate's overwrote.
        if !self.named_by_set(self.local_id) {
            return Err(self.illegal(Role::Voted, "no voter set names this node"));
        }
        if !self.named_by_any_set(candidate) {
            return Err(self.illegal(Role::Voted, "no voter set names the candidate"));
        }
        if candidate == self.local_id {
            return Err(self.illegal(Role::Voted, "cannot vote for self as a voter"));
        }
        let epoch = match self.state {
            EpochState::Unattached {
                epoch,
                lost_leader: None,
            }
            | EpochState::Prospective {
                epoch,
                leader: None,
                voted_for: None,
                ..
            } => epoch,
            _ => {
                return Err(self.illegal(
                    Role::Voted,
                    "only a voter with no vote and no leader in the epoch can vote",
                ))
            }
        };
        let next = EpochState::Voted {
            epoch,
            voted_for: candidate,
        };
        Ok(self.commit(next, out))
    }

    /// Start a pre-vote round (docs/protocol.md, "Pre-vote"): same epoch, the leader or vote of
    /// the epoch kept, nothing persisted. Not from Leader (it must resign or learn a higher
    /// epoch first) nor from Prospective (a new round starts within the state).
    pub(crate) fn become_prospective(
        &mut self,
        out: &mut Vec<Output>,
    ) -> Result<EpochState, TransitionError> {
        if self.is_observer() {
            return Err(self.illegal(Role::Prospective, "observers never campaign"));
        }
        let me = self.local_id;
        let (epoch, leader, voted_for) = match self.state {
            EpochState::Unattached { epoch, lost_leader } => (epoch, lost_leader, None),
            EpochState::Voted { epoch, voted_for } => (epoch, None, Some(voted_for)),
            EpochState::Candidate { epoch, .. } => (epoch, None, Some(me)),
            EpochState::Follower { epoch, leader, .. } => (epoch, Some(leader), None),
            EpochState::Resigned { epoch, .. } => (epoch, Some(me), None),
            EpochState::Leader { .. } => {
                return Err(self.illegal(
                    Role::Prospective,
                    "a leader must resign or learn a higher epoch first",
                ))
            }
            EpochState::Prospective { .. } => {
                return Err(self.illegal(Role::Prospective, "already prospective"))
            }
        };
        let next = EpochState::Prospective {
            epoch,
            leader,
            voted_for,
            round: CandidateState::voted_for_self(me),
            sent_durable: -1,
        };
        debug_assert_eq!(
            self.election_state_of(&next),
            self.election_state(),
            "a pre-vote round changes nothing the file holds"
        );
        Ok(self.commit(next, out))
    }

    /// Start an election: epoch + 1, vote for self.
    pub(crate) fn become_candidate(
        &mut self,
        out: &mut Vec<Output>,
    ) -> Result<EpochState, TransitionError> {
        if self.is_observer() {
            return Err(self.illegal(Role::Candidate, "observers never campaign"));
        }
        if let EpochState::Leader { .. } = self.state {
            return Err(self.illegal(
                Role::Candidate,
                "a leader must resign or learn a higher epoch first",
            ));
        }
        // Never into an epoch the other voters would refuse (docs/protocol.md, "Hostile input").
        let epoch = self.epoch();
        if epoch >= MAX_PEER_EPOCH {
            return Err(TransitionError::EpochExhausted { epoch });
        }
        let next = EpochState::Candidate {
            epoch: epoch + 1,
            candidacy: CandidateState::voted_for_self(self.local_id),
        };
        Ok(self.commit(next, out))
    }

    /// Win the election: the candidacy's granted votes (self included) must be a majority. The
    /// leader's log starts its epoch at `epoch_start_offset` (where its LeaderChange record
    /// goes). Returns the candidacy that won.
    pub(crate) fn become_leader(
        &mut self,
        epoch_start_offset: Offset,
        now: TimeMs,
        out: &mut Vec<Output>,
    ) -> Result<EpochState, TransitionError> {
        let EpochState::Candidate { epoch, candidacy } = &self.state else {
            return Err(self.illegal(Role::Leader, "only a candidate can become leader"));
        };
        if candidacy.granted.len() < self.majority() {
            return Err(self.illegal(Role::Leader, "no majority of granted votes"));
        }
        let epoch = *epoch;
        let leader = LeaderState::new(epoch, epoch_start_offset, self.local_id, &self.voters, now);
        let next = EpochState::Leader {
            epoch,
            leader: Box::new(leader),
        };
        Ok(self.commit(next, out))
    }

    /// Follow `leader` in `epoch`.
    pub(crate) fn become_follower(
        &mut self,
        epoch: Epoch,
        leader: NodeId,
        out: &mut Vec<Output>,
    ) -> Result<EpochState, TransitionError> {
        self.check_epoch(epoch)?;
        if leader == self.local_id {
            return Err(self.illegal(Role::Follower, "cannot follow self"));
        }
        // No check that the leader is in this node's set: a node the log is adding, or one
        // whose log is behind, learns the set from the leader's log (docs/protocol.md, "The
        // voter set lives in the log").
        if epoch == self.epoch() {
            match self.state {
                EpochState::Unattached { .. }
                | EpochState::Voted { .. }
                | EpochState::Candidate { .. }
                | EpochState::Prospective { leader: None, .. } => {}
                // Back to the leader it kept while asking for pre-votes.
                EpochState::Prospective {
                    leader: Some(kept), ..
                } if kept == leader => {}
                EpochState::Prospective {
                    leader: Some(kept), ..
                } if kept == self.local_id => {
                    return Err(self.illegal(Role::Follower, "this node led this epoch"))
                }
                EpochState::Prospective { .. } => {
                    return Err(
                        self.illegal(Role::Follower, "already following a leader in this epoch")
                    )
                }
                EpochState::Follower { .. } => {
                    return Err(
                        self.illegal(Role::Follower, "already following a leader in this epoch")
                    )
                }
                EpochState::Leader { .. } | EpochState::Resigned { .. } => {
                    return Err(self.illegal(Role::Follower, "this node led this epoch"))
                }
            }
        }
        let next = EpochState::Follower {
            epoch,
            leader,
            sent_durable: -1,
            heard_at: None,
            lease_stamp: None,
        };
        Ok(self.commit(next, out))
    }

    /// An observer that started without a voter set adopts the one a bootstrap server of its
    /// cluster reported (docs/protocol.md section 9). Only once: later voter-set changes are
    /// reassignments, which arrive through the log, never through FindQuorum. A node that finds
    /// its own id in the set has no vote history (it lost its disk, most likely): it adopts the
    /// others only, so it neither votes nor counts, and is a voter again only when its own log
    /// names it (docs/protocol.md, "Voter identity": the record that binds its id to the lost
    /// directory keeps it an observer; a reassignment adds it back).
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
        let others: Vec<NodeId> = voters
            .iter()
            .copied()
            .filter(|v| *v != self.local_id)
            .collect();
        if others.is_empty() {
            return refuse("this node is the only one, but was started without quorum.voters");
        }
        if others.len() < voters.len() {
            self.adopted_own_id = true;
            out.push(Output::Alert(format!(
                "the voter set {voters:?} names this node, which has no state of its own (an \
                 empty directory): it replicates as an observer until its log makes it a voter \
                 (docs/operations.md, \"Replacing a voter that lost its disk\")"
            )));
        }
        let voters = others;
        // Without voters no leader can be known (nor a vote given): still unattached.
        assert!(
            matches!(self.state, EpochState::Unattached { .. }),
            "{:?} without a voter set",
            self.role()
        );
        // Persist first (the same state, with the voters), then make the voters visible. The
        // set is the bootstrap set at offset 0: the log's records, as they arrive, say the rest.
        self.history = VoterHistory::new(VoterConfig::of(voters.clone()), 0);
        self.persist_current(out);
        self.voters = voters;
        Ok(())
    }

    // ----- the voter set in the log (docs/protocol.md, "The voter set lives in the log") -----

    /// The voter set in force with the reassignment in progress, as the newest voter record
    /// in the log says.
    pub(crate) fn voter_config(&self) -> &VoterConfig {
        self.history.latest()
    }

    /// The committed voter set (what the quorum-state file caches).
    pub(crate) fn committed_voter_config(&self) -> &VoterConfig {
        self.history.base()
    }

    /// The offset of the newest committed voter record (the committed set's), None when the
    /// committed set comes from no record (the configured voters, or a set learned from
    /// FindQuorum). Retention never deletes it (retention.rs).
    pub(crate) fn committed_voter_record(&self) -> Option<Offset> {
        self.history
            .base_offset()
            .checked_sub(1)
            .filter(|o| *o >= 0)
    }

    /// The offset below which the log implies the committed set: every voter record at or
    /// above it is uncommitted.
    pub(crate) fn committed_voter_offset(&self) -> Offset {
        self.history.base_offset()
    }

    /// The offset of the newest voter record not yet folded into the committed set.
    pub(crate) fn pending_voter_record(&self) -> Option<Offset> {
        self.history.latest_offset()
    }

    /// A voter record appended at `offset` is in force at once. A leader's progress map
    /// follows the new set (`now` starts the clock of a voter it has not heard from).
    pub(crate) fn apply_voter_record(&mut self, offset: Offset, config: VoterConfig, now: TimeMs) {
        self.history.append(offset, config);
        self.sync_voters(now);
    }

    /// A truncation to `offset` reverts the records it removes. Returns whether the set in
    /// force changed.
    /// `keep_set`: the planted bug (docs/simulation.md, "Planted bugs") that leaves the
    /// reverted set in force.
    pub(crate) fn revert_voter_records(
        &mut self,
        offset: Offset,
        keep_set: bool,
        now: TimeMs,
    ) -> bool {
        let before = self.voters.clone();
        if self.history.truncate(offset) && !keep_set {
            self.sync_voters(now);
        }
        before != self.voters
    }

    /// Folds the voter records below the high watermark into the committed set the
    /// quorum-state file caches, and persists it when it changed.
    pub(crate) fn commit_voter_records(&mut self, hw: Offset, now: TimeMs, out: &mut Vec<Output>) {
        if self.history.commit(hw) {
            if self.apply_on_commit {
                self.sync_voters(now);
            }
            self.persist_current(out);
        }
    }

    /// Plants the bug that applies voter records on commit (docs/simulation.md, "Planted
    /// bugs"): the set in force is the committed one.
    pub(crate) fn plant_apply_on_commit(&mut self, now: TimeMs) {
        self.apply_on_commit = true;
        self.sync_voters(now);
    }

    fn sync_voters(&mut self, now: TimeMs) {
        self.voters = if self.apply_on_commit {
            self.history.base().current.clone()
        } else {
            self.history.latest().current.clone()
        };
        let me = self.local_id;
        if let EpochState::Leader { leader, .. } = &mut self.state {
            leader.set_voters(me, &self.voters, now);
        }
    }

    /// Graceful resignation (shutdown, check-quorum): stays in the epoch, never votes in it.
    /// The successors are the other voters, most caught-up first. Returns the leadership given
    /// up.
    pub(crate) fn become_resigned(
        &mut self,
        out: &mut Vec<Output>,
    ) -> Result<EpochState, TransitionError> {
        let EpochState::Leader { epoch, leader } = &self.state else {
            return Err(self.illegal(Role::Resigned, "only a leader resigns"));
        };
        let next = EpochState::Resigned {
            epoch: *epoch,
            resigned: ResignedState {
                successors: leader.successors(),
                acked: BTreeSet::new(),
            },
        };
        Ok(self.commit(next, out))
    }
}
