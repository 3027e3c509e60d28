//! Vote (docs/protocol.md section 3): handling requests as a voter, responses as a candidate.

use super::core::RaftCore;
use super::requests::{InFlight, RequestKind, Retry};
use super::types::{NodeId, Output, RequestId};
use super::{ErrorCode, Request, Response, Role, VoteRequest, VoteResponse};

impl RaftCore {
    pub(crate) fn send_vote(&mut self, to: NodeId, out: &mut Vec<Output>) {
        let request = Request::Vote(VoteRequest {
            cluster_id: self.config.cluster_id.clone(),
            candidate_epoch: self.qs.epoch(),
            candidate_id: self.qs.local_id(),
            last_epoch: self.log.last_epoch(),
            last_epoch_end_offset: self.log.end_offset(),
        });
        let epoch = self.qs.epoch();
        self.outbound
            .send(out, self.now, to, epoch, RequestKind::Vote, request);
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

    pub(crate) fn handle_vote(&mut self, id: RequestId, req: VoteRequest, out: &mut Vec<Output>) {
        if req.cluster_id != self.config.cluster_id {
            return self.respond_vote(id, ErrorCode::INCONSISTENT_CLUSTER_ID, false, out);
        }
        // The fields' ranges were checked on admission (admission.rs).
        if req.candidate_epoch < self.qs.epoch() {
            return self.respond_vote(id, ErrorCode::FENCED_LEADER_EPOCH, false, out);
        }
        if self.qs.is_observer() || !self.qs.is_voter(req.candidate_id) {
            return self.respond_vote(id, ErrorCode::INCONSISTENT_VOTER_SET, false, out);
        }
        if req.candidate_id == self.qs.local_id() {
            return self.respond_vote(id, ErrorCode::INVALID_REQUEST, false, out);
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
        let granted = match self.qs.role() {
            Role::Unattached => {
                self.candidate_log_ok(&req) && self.enter_voted(req.candidate_id, out)
            }
            Role::Voted => self.qs.voted_id() == Some(req.candidate_id),
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
        match self.common_response(f.to, r.error, r.leader_id, r.leader_epoch, out) {
            super::discovery::Common::Done => return,
            super::discovery::Common::Retry => {
                if self.qs.candidate().is_some_and(|c| !c.backing_off) {
                    self.outbound
                        .schedule_retry(self.now, f.to, Retry::Vote(f.to), &mut self.rng);
                }
                return;
            }
            super::discovery::Common::Proceed => {}
        }
        let majority = self.qs.majority();
        let voters = self.qs.voters().len();
        // A late answer (the candidacy won or ended in this epoch) changes nothing.
        let Some(c) = self.qs.candidate_mut() else {
            return;
        };
        if c.backing_off {
            return;
        }
        self.outbound.reset_backoff(f.to);
        if r.vote_granted {
            c.granted.insert(f.to);
            if c.granted.len() >= majority {
                self.enter_leader(out);
            }
        } else {
            c.rejected.insert(f.to);
            if voters - c.rejected.len() < majority {
                // Lost: back off now rather than wait for the election timeout
                // (docs/protocol.md section 3).
                self.start_backoff();
            }
        }
    }
}
