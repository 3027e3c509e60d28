//! BeginQuorumEpoch (docs/protocol.md section 4) and EndQuorumEpoch (section 5).

use super::core::RaftCore;
use super::discovery::Common;
use super::requests::{InFlight, RequestKind, Retry};
use super::types::{Epoch, NodeId, Output, RequestId};
use super::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest,
    EndQuorumEpochResponse, ErrorCode, Request, Response, Role,
};

impl RaftCore {
    pub(crate) fn send_begin_quorum_epoch(&mut self, to: NodeId, out: &mut Vec<Output>) {
        let request = Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
            cluster_id: self.config.cluster_id.clone(),
            leader_id: self.qs.local_id(),
            leader_epoch: self.qs.epoch(),
        });
        let epoch = self.qs.epoch();
        self.outbound.send(
            out,
            self.now,
            to,
            epoch,
            RequestKind::BeginQuorumEpoch,
            request,
        );
    }

    /// Only a resigned leader sends it.
    pub(crate) fn send_end_quorum_epoch(&mut self, to: NodeId, out: &mut Vec<Output>) {
        let successors = self
            .qs
            .resigned()
            .expect("only a resigned leader ends its epoch")
            .successors
            .clone();
        let request = Request::EndQuorumEpoch(EndQuorumEpochRequest {
            cluster_id: self.config.cluster_id.clone(),
            replica_id: self.qs.local_id(),
            leader_id: self.qs.local_id(),
            leader_epoch: self.qs.epoch(),
            preferred_successors: successors,
        });
        let epoch = self.qs.epoch();
        self.outbound.send(
            out,
            self.now,
            to,
            epoch,
            RequestKind::EndQuorumEpoch,
            request,
        );
    }

    pub(crate) fn respond_begin(&self, id: RequestId, error: ErrorCode, out: &mut Vec<Output>) {
        out.push(Output::Respond {
            id,
            response: Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
                error,
                leader_id: self.leader_hint(),
                leader_epoch: self.qs.epoch(),
            }),
        });
    }

    pub(crate) fn respond_end(&self, id: RequestId, error: ErrorCode, out: &mut Vec<Output>) {
        out.push(Output::Respond {
            id,
            response: Response::EndQuorumEpoch(EndQuorumEpochResponse {
                error,
                leader_id: self.leader_hint(),
                leader_epoch: self.qs.epoch(),
            }),
        });
    }

    /// Why a Begin- or EndQuorumEpoch from `sender` for `epoch` is refused before it is looked
    /// at, if it is: another cluster, an older epoch, or a sender (or this node) outside the
    /// voter set. The fields' ranges were checked on admission (admission.rs).
    fn announcement_refusal(
        &self,
        cluster_id: &str,
        epoch: Epoch,
        sender: NodeId,
    ) -> Option<ErrorCode> {
        if cluster_id != self.config.cluster_id {
            Some(ErrorCode::INCONSISTENT_CLUSTER_ID)
        } else if epoch < self.qs.epoch() {
            Some(ErrorCode::FENCED_LEADER_EPOCH)
        } else if self.qs.is_observer() || !self.qs.named_by_set(sender) {
            // A sender of the reassignment's target is heard too: this node's log may lag the
            // set that has it (docs/protocol.md, "Driving the change", rule 8; the simulator's
            // seed 300053 with --no-prevote).
            Some(ErrorCode::INCONSISTENT_VOTER_SET)
        } else {
            None
        }
    }

    pub(crate) fn handle_begin_quorum_epoch(
        &mut self,
        id: RequestId,
        req: BeginQuorumEpochRequest,
        out: &mut Vec<Output>,
    ) {
        if let Some(error) =
            self.announcement_refusal(&req.cluster_id, req.leader_epoch, req.leader_id)
        {
            return self.respond_begin(id, error, out);
        }
        let me = self.qs.local_id();
        let error = if req.leader_id == me {
            // Only we can announce ourselves, and we never send it to ourselves.
            ErrorCode::INVALID_QUORUM_STATE
        } else if req.leader_epoch > self.qs.epoch() {
            self.enter_follower(req.leader_epoch, req.leader_id, out);
            ErrorCode::NONE
        } else {
            match self.qs.leader_id() {
                None => {
                    self.enter_follower(req.leader_epoch, req.leader_id, out);
                    ErrorCode::NONE
                }
                Some(l) if l == req.leader_id => {
                    if self.qs.role() == Role::Prospective {
                        // The leader it kept is alive: the pre-vote round ends
                        // (docs/protocol.md, "Pre-vote").
                        self.enter_follower(req.leader_epoch, req.leader_id, out);
                    }
                    ErrorCode::NONE
                }
                // Two leaders in one epoch: refuse (docs/protocol.md section 4).
                Some(_) => ErrorCode::INVALID_QUORUM_STATE,
            }
        };
        if error.is_none() {
            // Straight from the leader: it is live (the pre-vote rule, docs/protocol.md,
            // "Pre-vote"; the fetch timer still waits for a fetch answer).
            self.qs.note_leader_heard(self.now);
        }
        if !self.stopped || error.is_none() {
            self.respond_begin(id, error, out);
        }
    }

    /// Retries `retry` to `to` after backoff, but only while this node still has `role`: the
    /// announcement (Begin from a leader, End from a resigned leader) means nothing afterwards.
    fn retry_while(&mut self, role: Role, to: NodeId, retry: Retry) {
        if self.qs.role() == role {
            self.outbound
                .schedule_retry(self.now, to, retry, &mut self.rng);
        }
    }

    pub(crate) fn handle_begin_quorum_epoch_response(
        &mut self,
        f: InFlight,
        r: BeginQuorumEpochResponse,
        out: &mut Vec<Output>,
    ) {
        match self.common_response(f.to, r.error, r.leader_id, r.leader_epoch, out) {
            Common::Done => {}
            Common::Retry => self.retry_while(Role::Leader, f.to, Retry::BeginQuorumEpoch(f.to)),
            Common::Proceed => {
                if let Some(l) = self.qs.leader_mut() {
                    l.endorsed.insert(f.to);
                    self.outbound.reset_backoff(f.to);
                }
            }
        }
    }

    /// Delay before a successor at position `p` of `n` becomes candidate (docs/protocol.md
    /// section 5): strictly increasing with `p` so the most caught-up voter usually wins.
    fn successor_delay(&self, p: usize, n: usize) -> u64 {
        let max = self.config.election_jitter_max_ms;
        let base = max >> (n.saturating_sub(1)).min(63);
        (base << (p - 1).min(63)).min(max)
    }

    pub(crate) fn handle_end_quorum_epoch(
        &mut self,
        id: RequestId,
        req: EndQuorumEpochRequest,
        out: &mut Vec<Output>,
    ) {
        if let Some(error) =
            self.announcement_refusal(&req.cluster_id, req.leader_epoch, req.replica_id)
        {
            return self.respond_end(id, error, out);
        }
        let me = self.qs.local_id();
        if req.leader_epoch > self.qs.epoch() {
            let ok = if req.leader_id >= 0 && req.leader_id != me && self.qs.is_voter(req.leader_id)
            {
                self.enter_follower(req.leader_epoch, req.leader_id, out)
            } else {
                self.enter_unattached(req.leader_epoch, out)
            };
            if !ok || self.stopped {
                return;
            }
        }
        let (leader, vote) = (self.qs.leader_id(), self.qs.voted_id());
        let eligible = !self.is_shutting_down()
            && !self.storage_blocks_leading()
            && match self.qs.role() {
                Role::Unattached => true,
                Role::Follower => leader == Some(req.replica_id),
                Role::Voted => vote == Some(req.replica_id),
                // As the role it came from: it kept that role's leader or vote.
                Role::Prospective => match (leader, vote) {
                    (None, None) => true,
                    (Some(l), _) => l == req.replica_id && l != me,
                    (_, Some(v)) => v == req.replica_id && v != me,
                },
                Role::Leader | Role::Candidate | Role::Resigned => false,
            };
        let mut error = ErrorCode::NONE;
        if eligible {
            // Only voters count, each once: a list padded with others must not delay us.
            let successors = self.voter_successors(&req.preferred_successors);
            let n = successors.len();
            match successors.iter().position(|s| *s == me) {
                None => error = ErrorCode::INCONSISTENT_VOTER_SET,
                Some(0) => {
                    self.enter_candidate(out);
                }
                Some(p) => {
                    let delay = self.successor_delay(p, n);
                    self.role_deadline = Some(self.now + delay);
                    // The leader asked: stand then, with no pre-vote round (a follower that
                    // heard from it recently would refuse a pre-vote).
                    self.stand_when_due = true;
                }
            }
        }
        if !self.stopped {
            self.respond_end(id, error, out);
        }
    }

    /// The preferred successors that are voters, first occurrence kept, in the given order.
    fn voter_successors(&self, named: &[NodeId]) -> Vec<NodeId> {
        let mut successors: Vec<NodeId> = Vec::with_capacity(self.qs.voters().len());
        for s in named {
            if self.qs.is_voter(*s) && !successors.contains(s) {
                successors.push(*s);
            }
        }
        successors
    }

    pub(crate) fn handle_end_quorum_epoch_response(
        &mut self,
        f: InFlight,
        r: EndQuorumEpochResponse,
        out: &mut Vec<Output>,
    ) {
        match self.common_response(f.to, r.error, r.leader_id, r.leader_epoch, out) {
            Common::Done => {}
            Common::Retry => self.retry_while(Role::Resigned, f.to, Retry::EndQuorumEpoch(f.to)),
            Common::Proceed => {
                if let Some(r) = self.qs.resigned_mut() {
                    debug_assert!(r.successors.contains(&f.to), "sent to a successor");
                    r.acked.insert(f.to);
                }
            }
        }
    }
}
