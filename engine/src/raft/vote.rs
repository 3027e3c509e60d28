//! Vote (docs/protocol.md section 3) and pre-vote ("Pre-vote"): handling requests as a voter,
//! responses as a candidate or a prospective.

use super::core::RaftCore;
use super::discovery::Common;
use super::epoch_state::EpochState;
use super::requests::{InFlight, RequestKind, Retry};
use super::types::{NodeId, Output, PlantedBug, RequestId};
use super::{ErrorCode, Request, Response, Role, VoteRequest, VoteResponse};

impl RaftCore {
    fn vote_request(&self, to: NodeId, pre_vote: bool) -> Request {
        let epoch = self.qs.epoch();
        Request::Vote(VoteRequest {
            cluster_id: self.config.cluster_id.clone(),
            // A pre-vote asks about the epoch a candidacy would take, and raises nothing.
            candidate_epoch: if pre_vote { epoch + 1 } else { epoch },
            candidate_id: self.qs.local_id(),
            last_epoch: self.log.last_epoch(),
            last_epoch_end_offset: self.log.end_offset(),
            pre_vote,
            candidate_directory_id: self.qs.local_directory(),
            voter_directory_id: self.qs.bound_directory(to).unwrap_or_default(),
        })
    }

    pub(crate) fn send_vote(&mut self, to: NodeId, out: &mut Vec<Output>) {
        let request = self.vote_request(to, false);
        let epoch = self.qs.epoch();
        self.outbound
            .send(out, self.now, to, epoch, RequestKind::Vote, request);
    }

    pub(crate) fn send_pre_vote(&mut self, to: NodeId, out: &mut Vec<Output>) {
        debug_assert_eq!(self.qs.role(), Role::Prospective);
        let request = self.vote_request(to, true);
        let epoch = self.qs.epoch();
        self.outbound
            .send(out, self.now, to, epoch, RequestKind::PreVote, request);
    }

    pub(crate) fn respond_vote(
        &self,
        id: RequestId,
        error: ErrorCode,
        granted: bool,
        out: &mut Vec<Output>,
    ) {
        out.push(Output::Respond {
            id,
            response: Response::Vote(VoteResponse {
                error,
                leader_id: self.leader_hint(),
                leader_epoch: self.qs.epoch(),
                vote_granted: granted,
            }),
        });
    }

    /// Is the candidate's log at least as up to date as ours, by (last epoch, LEO)
    /// (docs/protocol.md section 3)?
    fn candidate_log_ok(&self, req: &VoteRequest) -> bool {
        (req.last_epoch, req.last_epoch_end_offset)
            >= (self.log.last_epoch(), self.log.end_offset())
    }

    /// Has this node heard from a live leader within the fetch timeout (docs/protocol.md,
    /// "Pre-vote")? A follower: a successful fetch answer or a BeginQuorumEpoch from its leader.
    /// The leader: fetches from a majority of the voters (itself included), as check-quorum
    /// counts them.
    /// A voter that restarted counts as hearing one for a fetch timeout after its start (with
    /// the lease on: it may have echoed a lease stamp just before; docs/consistency.md, "The
    /// leader lease").
    pub(crate) fn heard_from_live_leader(&self) -> bool {
        let window = self.config.fetch_timeout_ms;
        if self.restart_quiet_until.is_some_and(|t| self.now < t) {
            return true;
        }
        match self.qs.state() {
            EpochState::Follower { .. } => self
                .qs
                .leader_heard_at()
                .is_some_and(|at| self.now < at.saturating_add(window)),
            EpochState::Leader { leader, .. } => leader
                .quorum_alive_until(self.qs.majority(), window)
                .is_none_or(|until| self.now < until),
            _ => false,
        }
    }

    /// A Vote between replicas that are not the voters the sets name (docs/protocol.md, "Voter
    /// identity"), refused with INVALID_VOTER_KEY: this node's id bound to another directory
    /// (it came back without its disk), a request for a directory that is not this node's, or
    /// a candidate whose id is bound to another directory than the one it states.
    fn wrong_voter_key(&self, req: &VoteRequest) -> bool {
        let asked = req.voter_directory_id;
        // The candidate was named by some set on admission (handle_vote); only a binding of
        // its id to another directory makes it a stranger.
        self.qs.bound_elsewhere()
            || (!asked.is_zero() && asked != self.qs.local_directory())
            || self
                .qs
                .bound_directory(req.candidate_id)
                .is_some_and(|d| d != req.candidate_directory_id)
    }

    pub(crate) fn handle_vote(&mut self, id: RequestId, req: VoteRequest, out: &mut Vec<Output>) {
        // The cluster id and the fields' ranges were checked before (on_request, admission.rs).
        if req.candidate_epoch < self.qs.epoch() {
            return self.respond_vote(id, ErrorCode::FENCED_LEADER_EPOCH, false, out);
        }
        // Both this node and the candidate must be named by the set this node's log implies,
        // as current voters or as the reassignment's target: either log may lag the set that
        // has them, and a new set whose record a voter lacks could otherwise never elect anyone
        // (docs/protocol.md, "Driving the change", rule 8). A node no set names does not vote:
        // its vote counts for nobody, and a hostile Vote could only lift it to an epoch no
        // leader it can follow will reach.
        if !self.qs.named_by_set(self.qs.local_id()) || !self.qs.named_by_any_set(req.candidate_id)
        {
            return self.respond_vote(id, ErrorCode::INCONSISTENT_VOTER_SET, false, out);
        }
        if self.wrong_voter_key(&req) {
            return self.respond_vote(id, ErrorCode::INVALID_VOTER_KEY, false, out);
        }
        if req.candidate_id == self.qs.local_id() {
            return self.respond_vote(id, ErrorCode::INVALID_REQUEST, false, out);
        }
        if req.pre_vote {
            // Answered from what this node knows, changing nothing: no epoch, vote, leader,
            // file write or timer (docs/protocol.md, "Pre-vote").
            let granted = self.candidate_log_ok(&req)
                && (!self.heard_from_live_leader()
                    || self.config.planted == Some(PlantedBug::PreVoteDespiteLiveLeader));
            return self.respond_vote(id, ErrorCode::NONE, granted, out);
        }
        if req.candidate_epoch > self.qs.epoch() {
            // Adopt the epoch even if the vote is refused below (docs/protocol.md section 3,
            // rule 5; section 15, item 13: to_unattached arms an election timer, not the fetch
            // timer).
            let earlier_deadline = self.role_deadline;
            if !self.enter_unattached(req.candidate_epoch, out) {
                return;
            }
            // Only a granted vote may postpone this node's own election (Raft 5.2). A voter
            // whose log is behind retries after at most the jitter, sooner than the others'
            // election timeout: if each refusal re-armed a fresh timer, it would keep bumping
            // the epoch and no up-to-date voter would ever stand (a livelock the process tests
            // hit after a full restart with one lagging voter).
            if !self.candidate_log_ok(&req) {
                if let (Some(earlier), Some(fresh)) = (earlier_deadline, self.role_deadline) {
                    self.role_deadline = Some(earlier.min(fresh));
                }
            }
        }
        let vote = self.qs.voted_id();
        let granted = match self.qs.role() {
            // A prospective that neither voted nor knew a leader in the epoch votes like an
            // unattached voter; one that voted re-grants that vote only. An unattached observer
            // that lost the epoch's leader (it may have voted for it) votes for nobody.
            Role::Unattached | Role::Prospective if self.qs.has_vote_to_give() => {
                self.candidate_log_ok(&req) && self.enter_voted(req.candidate_id, out)
            }
            // A re-grant meets the first grant's log condition again (Raft 5.4.1 asks both):
            // the candidate's first request may have counted records it had not yet synced,
            // and a candidate that crashed and came back in the same epoch without them must
            // not be elected on the vote its longer log won (docs/protocol.md section 3,
            // rule 6).
            Role::Voted | Role::Prospective => {
                vote == Some(req.candidate_id) && self.candidate_log_ok(&req)
            }
            // Leader, Candidate, Resigned (never in its own epoch) and Follower refuse.
            _ => false,
        };
        if self.stopped {
            return;
        }
        self.respond_vote(id, ErrorCode::NONE, granted, out);
    }

    pub(crate) fn handle_vote_response(
        &mut self,
        f: InFlight,
        r: VoteResponse,
        out: &mut Vec<Output>,
    ) {
        if f.kind == RequestKind::PreVote {
            return self.handle_pre_vote_response(f, r, out);
        }
        match self.common_response(f.to, r.error, r.leader_id, r.leader_epoch, out) {
            Common::Done => return,
            Common::Retry => {
                if self.qs.candidate().is_some_and(|c| !c.backing_off) {
                    self.outbound
                        .schedule_retry(self.now, f.to, Retry::Vote(f.to), &mut self.rng);
                }
                return;
            }
            Common::Proceed => {}
        }
        // A late answer (the candidacy won or ended in this epoch) changes nothing.
        if self.qs.candidate().is_none() {
            return;
        }
        if let Some(won) = self.count_vote(f.to, r.vote_granted) {
            if won {
                self.enter_leader(out);
            }
        }
    }

    /// An answer to a pre-vote (docs/protocol.md, "Pre-vote"). A peer that does not speak
    /// Vote v1 answers UNSUPPORTED_VERSION: it cannot judge a pre-vote, so it counts as
    /// granted, and the candidacy that may follow asks it with a plain Vote v0. A peer behind
    /// this node's epoch (it answers with its own, lower one) still judged the question
    /// asked: its answer counts rather than being dropped as stale. So does one that names
    /// another leader of this epoch than the one this node knows (reported, never believed):
    /// honest nodes never disagree on it, but spoofed BeginQuorumEpochs can make every voter
    /// believe in a different one, and dropping those answers would leave every round
    /// unanswered for good.
    fn handle_pre_vote_response(&mut self, f: InFlight, r: VoteResponse, out: &mut Vec<Output>) {
        let epoch = self.qs.epoch();
        let granted = if r.error == ErrorCode::UNSUPPORTED_VERSION {
            true
        } else if r.error.is_none() && r.leader_epoch < epoch && r.leader_epoch >= 0 {
            r.vote_granted
        } else if r.error.is_none()
            && r.leader_epoch == epoch
            && self.contradicts_leader(r.leader_id)
        {
            let why = format!(
                "names {} leader of epoch {epoch}, which this node knows as led by {:?}",
                r.leader_id,
                self.qs.leader_id()
            );
            self.distrust(f.to, why, out);
            r.vote_granted
        } else {
            match self.common_response(f.to, r.error, r.leader_id, r.leader_epoch, out) {
                Common::Done => return,
                Common::Retry => {
                    if self.qs.prospective().is_some_and(|c| !c.backing_off) {
                        self.outbound.schedule_retry(
                            self.now,
                            f.to,
                            Retry::PreVote(f.to),
                            &mut self.rng,
                        );
                    }
                    return;
                }
                Common::Proceed => r.vote_granted,
            }
        };
        // A late answer (the round ended, or this node moved on) changes nothing.
        if self.qs.prospective().is_none() {
            return;
        }
        if let Some(won) = self.count_vote(f.to, granted) {
            if won {
                self.enter_candidate(out);
            }
        }
    }

    /// Would believing `leader` as the leader of this node's epoch contradict what it knows:
    /// another leader, or itself when it did not lead the epoch?
    fn contradicts_leader(&self, leader: NodeId) -> bool {
        let known = self.qs.leader_id();
        leader >= 0
            && match known {
                Some(k) => k != leader,
                None => leader == self.qs.local_id(),
            }
    }

    /// Records `voter`'s answer in the running candidacy or pre-vote round. Some(true): a
    /// majority granted; Some(false): still open; None: the round is over (lost now, or
    /// backing off already).
    fn count_vote(&mut self, voter: NodeId, granted: bool) -> Option<bool> {
        let majority = self.qs.majority();
        let voters = self.qs.voters().len();
        let c = self.qs.campaign_mut()?;
        if c.backing_off {
            return None;
        }
        self.outbound.reset_backoff(voter);
        // Each voter answers once: a voter that answered is no longer asked (awaits_vote).
        if granted {
            c.granted.insert(voter);
            return Some(c.granted.len() >= majority);
        }
        c.rejected.insert(voter);
        if voters - c.rejected.len() < majority {
            // Lost: back off now rather than wait for the election timeout
            // (docs/protocol.md section 3).
            self.start_backoff();
            return None;
        }
        Some(false)
    }
}
