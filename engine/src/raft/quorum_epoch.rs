//! BeginQuorumEpoch (docs/protocol.md section 4) and EndQuorumEpoch (section 5).

use super::core::RaftCore;
use super::discovery::Common;
use super::requests::{InFlight, RequestKind, Retry};
use super::types::{Epoch, NodeId, Output, RequestId};
use super::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest,
    EndQuorumEpochResponse, ErrorCode, Request, Response, Role,
};

/// The two announcements (docs/protocol.md sections 4 and 5): a leader's BeginQuorumEpoch and a
/// resigned leader's EndQuorumEpoch, refused, answered and acknowledged alike.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Announcement {
    Begin,
    End,
}

impl RaftCore {
    pub(crate) fn send_begin_quorum_epoch(&mut self, to: NodeId, out: &mut Vec<Output>) {
        let request = Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
            cluster_id: self.config.cluster_id.clone(),
            leader_id: self.qs.local_id(),
            leader_epoch: self.qs.epoch(),
        });
        self.send_announcement(to, RequestKind::BeginQuorumEpoch, request, out);
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
        self.send_announcement(to, RequestKind::EndQuorumEpoch, request, out);
    }

    /// Sends a Begin- or EndQuorumEpoch (`kind`) of this node's epoch.
    fn send_announcement(
        &mut self,
        to: NodeId,
        kind: RequestKind,
        request: Request,
        out: &mut Vec<Output>,
    ) {
        let epoch = self.qs.epoch();
        self.outbound.send(out, self.now, to, epoch, kind, request);
    }

    /// Answers a Begin- or EndQuorumEpoch (`kind`): both carry the error and this node's leader
    /// hint.
    pub(crate) fn respond_announcement(
        &self,
        kind: Announcement,
        id: RequestId,
        error: ErrorCode,
        out: &mut Vec<Output>,
    ) {
        let (leader_id, leader_epoch) = (self.leader_hint(), self.qs.epoch());
        let response = match kind {
            Announcement::Begin => Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
                error,
                leader_id,
                leader_epoch,
            }),
            Announcement::End => Response::EndQuorumEpoch(EndQuorumEpochResponse {
                error,
                leader_id,
                leader_epoch,
            }),
        };
        out.push(Output::Respond { id, response });
    }

    /// Why a Begin- or EndQuorumEpoch of this cluster is refused before it is looked at, if it is
    /// one and it is: an older epoch, or a sender (or this node) outside the voter set. The
    /// fields' ranges were checked on admission (admission.rs).
    pub(crate) fn announcement_refusal(
        &self,
        request: &Request,
    ) -> Option<(Announcement, ErrorCode)> {
        let (kind, epoch, sender) = match request {
            Request::BeginQuorumEpoch(r) => (Announcement::Begin, r.leader_epoch, r.leader_id),
            Request::EndQuorumEpoch(r) => (Announcement::End, r.leader_epoch, r.replica_id),
            _ => return None,
        };
        let error = if epoch < self.qs.epoch() {
            Some(ErrorCode::FENCED_LEADER_EPOCH)
        } else if self.qs.is_observer() || !self.qs.named_by_set(sender) {
            // A sender of the reassignment's target is heard too: this node's log may lag the
            // set that has it (docs/protocol.md, "Driving the change", rule 8; the simulator's
            // seed 300053 with --no-prevote).
            Some(ErrorCode::INCONSISTENT_VOTER_SET)
        } else {
            None
        };
        error.map(|error| (kind, error))
    }

    pub(crate) fn handle_begin_quorum_epoch(
        &mut self,
        id: RequestId,
        req: BeginQuorumEpochRequest,
        out: &mut Vec<Output>,
    ) {
        let error = if req.leader_id == self.qs.local_id() {
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
            self.qs.note_leader_heard(self.now, None);
        }
        if !self.stopped || error.is_none() {
            self.respond_announcement(Announcement::Begin, id, error, out);
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

    /// The answer to our Begin- or EndQuorumEpoch (`kind`, by its error and leader hint):
    /// an endorsement of this leader, or an acknowledgement of its resignation.
    pub(crate) fn handle_announcement_response(
        &mut self,
        kind: Announcement,
        f: InFlight,
        (error, leader_id, leader_epoch): (ErrorCode, NodeId, Epoch),
        out: &mut Vec<Output>,
    ) {
        let (role, retry) = match kind {
            Announcement::Begin => (Role::Leader, Retry::BeginQuorumEpoch(f.to)),
            Announcement::End => (Role::Resigned, Retry::EndQuorumEpoch(f.to)),
        };
        match self.common_response(f.to, error, leader_id, leader_epoch, out) {
            Common::Done => {}
            Common::Retry => self.retry_while(role, f.to, retry),
            Common::Proceed => match kind {
                Announcement::Begin => {
                    if let Some(l) = self.qs.leader_mut() {
                        l.endorsed.insert(f.to);
                        self.outbound.reset_backoff(f.to);
                    }
                }
                Announcement::End => {
                    if let Some(r) = self.qs.resigned_mut() {
                        debug_assert!(r.successors.contains(&f.to), "sent to a successor");
                        r.acked.insert(f.to);
                    }
                }
            },
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
        let me = self.qs.local_id();
        if req.leader_epoch > self.qs.epoch() {
            let ok = if req.leader_id >= 0 && req.leader_id != me && self.qs.is_voter(req.leader_id)
            {
                self.enter_follower(req.leader_epoch, req.leader_id, out)
            } else if !self.may_vote() {
                // No leaderless epoch for a node that cannot vote (docs/protocol.md section 8).
                true
            } else {
                self.enter_unattached(req.leader_epoch, out)
            };
            // A refused transition stops the node, and so does a shutdown that learning of a
            // leader completed: either way there is nothing more to do or to answer.
            debug_assert!(ok || self.stopped, "a refused transition stops the node");
            if self.stopped {
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
            self.respond_announcement(Announcement::End, id, error, out);
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
}
