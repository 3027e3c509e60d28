//! Request/response dispatch, the common response rules (protocol.md 12), FindQuorum (11) and
//! DescribeQuorum (13).

use super::core::{RaftCore, RoleState};
use super::leader::ReplicaProgress;
use super::requests::{InFlight, RequestKind, Retry};
use super::types::{
    bootstrap_server_id, bootstrap_server_index, Correlation, Epoch, NodeId, Output, RequestId,
};
use super::{
    DescribeQuorumResponse, ErrorCode, FindQuorumRequest, FindQuorumResponse, ReplicaState,
    Request, Response, Role, VoterEndpoint,
};

/// What is left to do with a response after the common rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Common {
    /// Go on with the RPC-specific handling.
    Proceed,
    /// Handled (stale, or the state changed): nothing more.
    Done,
    /// An error worth retrying after a backoff.
    Retry,
}

impl RaftCore {
    pub(crate) fn on_request(
        &mut self,
        id: RequestId,
        _from: Option<NodeId>,
        request: Request,
        out: &mut Vec<Output>,
    ) {
        match request {
            Request::Vote(r) => self.handle_vote(id, r, out),
            Request::BeginQuorumEpoch(r) => self.handle_begin_quorum_epoch(id, r, out),
            Request::EndQuorumEpoch(r) => self.handle_end_quorum_epoch(id, r, out),
            Request::FetchQuorumRecords(r) => self.handle_fetch(id, r, out),
            Request::FindQuorum(r) => self.handle_find_quorum(id, r, out),
            Request::DescribeQuorum(_) => self.handle_describe_quorum(id, out),
        }
    }

    pub(crate) fn on_response(
        &mut self,
        from: NodeId,
        correlation: Correlation,
        response: Response,
        out: &mut Vec<Output>,
    ) {
        let Some(f) = self.outbound.take(correlation, from) else {
            return; // unknown, timed out, or from before a transition: ignore
        };
        match (f.kind, response) {
            (RequestKind::Vote, Response::Vote(r)) => self.handle_vote_response(f, r, out),
            (RequestKind::BeginQuorumEpoch, Response::BeginQuorumEpoch(r)) => {
                self.handle_begin_quorum_epoch_response(f, r, out)
            }
            (RequestKind::EndQuorumEpoch, Response::EndQuorumEpoch(r)) => {
                self.handle_end_quorum_epoch_response(f, r, out)
            }
            (RequestKind::Fetch { .. }, Response::FetchQuorumRecords(r)) => {
                self.handle_fetch_response(f, r, out)
            }
            (RequestKind::FindQuorum, Response::FindQuorum(r)) => {
                self.handle_find_quorum_response(f, r, out)
            }
            _ => {} // a response of the wrong kind: ignore
        }
    }

    fn fatal(&mut self, msg: String, out: &mut Vec<Output>) {
        out.push(Output::Fatal(format!("node {}: {msg}", self.qs.local_id())));
        self.stopped = true;
    }

    /// Section 12: stale responses are dropped, newer epochs and leaders are adopted, and
    /// inconsistent ones are fatal.
    pub(crate) fn common_response(
        &mut self,
        error: ErrorCode,
        leader_id: NodeId,
        epoch: Epoch,
        out: &mut Vec<Output>,
    ) -> Common {
        if error == ErrorCode::INCONSISTENT_CLUSTER_ID
            || error == ErrorCode::CLUSTER_AUTHORIZATION_FAILED
        {
            self.fatal(format!("peer answered {error}"), out);
            return Common::Done;
        }
        let me = self.qs.local_id();
        if epoch < self.qs.epoch() || error == ErrorCode::UNKNOWN_LEADER_EPOCH {
            return Common::Done;
        }
        if epoch > self.qs.epoch() {
            if leader_id >= 0 && leader_id != me && self.qs.is_voter(leader_id) {
                self.enter_follower(epoch, leader_id, out);
            } else {
                self.enter_unattached(epoch, out);
            }
            return Common::Done;
        }
        if leader_id >= 0 {
            if leader_id == me {
                if !matches!(self.qs.role(), Role::Leader | Role::Resigned) {
                    self.fatal(format!("a peer names us leader of epoch {epoch}"), out);
                    return Common::Done;
                }
            } else {
                match self.qs.leader_id() {
                    Some(known) if known != leader_id => {
                        self.fatal(
                            format!(
                                "epoch {epoch} has leader {known} and, per a peer, {leader_id}"
                            ),
                            out,
                        );
                        return Common::Done;
                    }
                    Some(_) => {}
                    None => {
                        if self.qs.is_voter(leader_id) {
                            self.enter_follower(epoch, leader_id, out);
                        }
                        return Common::Done;
                    }
                }
            }
        }
        match error {
            ErrorCode::NONE => Common::Proceed,
            ErrorCode::INVALID_REQUEST => {
                self.fatal("a peer found our request invalid".to_string(), out);
                Common::Done
            }
            ErrorCode::FENCED_LEADER_EPOCH | ErrorCode::NOT_LEADER_OR_FOLLOWER => Common::Retry,
            _ => Common::Retry,
        }
    }

    // ----- FindQuorum -----

    pub(crate) fn looking_for_quorum(&self) -> bool {
        self.outbound
            .any_in_flight(|f| f.kind == RequestKind::FindQuorum)
            || self.outbound.any_retry(|r| r == Retry::FindQuorum)
    }

    /// True when this node advertises an endpoint (takes part in discovery) and does not know
    /// every other voter's.
    pub(crate) fn missing_endpoints(&self) -> bool {
        let local = self.qs.local_id();
        !self.config.host.is_empty()
            && self
                .qs
                .voters()
                .iter()
                .any(|v| *v != local && !self.endpoints.is_known(*v))
    }

    /// Where the next FindQuorum goes, round robin: the other voters this node can reach (their
    /// endpoint is known, or the driver routes by id); failing that the bootstrap servers (an
    /// observer that has not learned the voter set or its endpoints yet); failing that any
    /// other voter. None when there is nobody to ask.
    fn find_quorum_target(&mut self) -> Option<NodeId> {
        let local = self.qs.local_id();
        let others: Vec<NodeId> = self
            .qs
            .voters()
            .iter()
            .copied()
            .filter(|v| *v != local)
            .collect();
        let reachable: Vec<NodeId> = others
            .iter()
            .copied()
            .filter(|v| self.config.host.is_empty() || self.endpoints.is_known(*v))
            .collect();
        let bootstrap: Vec<NodeId> = (0..self.config.bootstrap_servers)
            .map(bootstrap_server_id)
            .collect();
        let candidates = [reachable, bootstrap, others]
            .into_iter()
            .find(|c| !c.is_empty())?;
        let to = candidates[self.find_quorum_cursor % candidates.len()];
        self.find_quorum_cursor = self.find_quorum_cursor.wrapping_add(1);
        Some(to)
    }

    pub(crate) fn send_find_quorum(&mut self, out: &mut Vec<Output>) {
        let Some(to) = self.find_quorum_target() else {
            return;
        };
        let request = Request::FindQuorum(FindQuorumRequest {
            cluster_id: self.config.cluster_id.clone(),
            replica_id: self.qs.local_id(),
            boot_timestamp: self.config.boot_timestamp,
            host: self.config.host.clone(),
            port: self.config.port,
        });
        let epoch = self.qs.epoch();
        self.outbound
            .send(out, self.now, to, epoch, RequestKind::FindQuorum, request);
    }

    fn voter_endpoints(&self) -> Vec<VoterEndpoint> {
        let local = self.qs.local_id();
        self.qs
            .voters()
            .iter()
            .map(|v| {
                if *v == local && !self.config.host.is_empty() {
                    self.local_endpoint()
                } else {
                    self.endpoints.get(*v)
                }
            })
            .collect()
    }

    fn local_endpoint(&self) -> VoterEndpoint {
        VoterEndpoint {
            voter_id: self.qs.local_id(),
            boot_timestamp: self.config.boot_timestamp,
            host: self.config.host.clone(),
            port: self.config.port,
        }
    }

    /// Records a voter's advertised endpoint if it is newer; tells the driver when it changed.
    fn learn_endpoint(&mut self, endpoint: VoterEndpoint, out: &mut Vec<Output>) {
        let is_other_voter = endpoint.voter_id != self.qs.local_id()
            && self.qs.voters().contains(&endpoint.voter_id);
        if is_other_voter && self.endpoints.learn(endpoint.clone()) {
            out.push(Output::EndpointChanged(endpoint));
        }
    }

    /// Answered by every node with what it knows; a voter's advertisement is remembered when its
    /// boot timestamp is newer than what this node knew (protocol.md 11).
    pub(crate) fn handle_find_quorum(
        &mut self,
        id: RequestId,
        req: FindQuorumRequest,
        out: &mut Vec<Output>,
    ) {
        if req.cluster_id != self.config.cluster_id {
            // Nothing is learned from, or told to, a node of another cluster: not our voters,
            // their endpoints or our cluster id.
            out.push(Output::Respond {
                id,
                response: Response::FindQuorum(FindQuorumResponse {
                    error: ErrorCode::INCONSISTENT_CLUSTER_ID,
                    cluster_id: String::new(),
                    leader_id: -1,
                    leader_epoch: -1,
                    voters: Vec::new(),
                    target_voters: None,
                }),
            });
            return;
        }
        self.learn_endpoint(
            VoterEndpoint {
                voter_id: req.replica_id,
                boot_timestamp: req.boot_timestamp,
                host: req.host,
                port: req.port,
            },
            out,
        );
        out.push(Output::Respond {
            id,
            response: Response::FindQuorum(FindQuorumResponse {
                error: ErrorCode::NONE,
                cluster_id: self.config.cluster_id.clone(),
                leader_id: self.leader_hint(),
                leader_epoch: self.qs.epoch(),
                voters: self.voter_endpoints(),
                target_voters: None,
            }),
        });
    }

    fn handle_find_quorum_response(
        &mut self,
        f: InFlight,
        r: FindQuorumResponse,
        out: &mut Vec<Output>,
    ) {
        if r.error == ErrorCode::INCONSISTENT_CLUSTER_ID {
            self.fatal(
                format!(
                    "FindQuorum to {} answered that it belongs to another cluster than {:?}: \
                     check cluster.id and bootstrap.servers",
                    describe_peer(f.to),
                    self.config.cluster_id
                ),
                out,
            );
            return;
        }
        if r.error.is_none() && r.cluster_id != self.config.cluster_id {
            self.fatal(
                format!(
                    "FindQuorum to {} answered cluster id {:?}, but this node belongs to \
                     cluster {:?}: check cluster.id and bootstrap.servers",
                    describe_peer(f.to),
                    r.cluster_id,
                    self.config.cluster_id
                ),
                out,
            );
            return;
        }
        // An answer without voters (the server knows none yet) or with impossible ids teaches
        // nothing: ask again after the backoff.
        let usable_voters = !r.voters.is_empty() && r.voters.iter().all(|v| v.voter_id >= 0);
        if r.error.is_none() && !self.qs.voters_known() && usable_voters {
            let voters: Vec<NodeId> = r.voters.iter().map(|v| v.voter_id).collect();
            if let Err(e) = self.qs.adopt_voters(voters, out) {
                // Never adopt a set that makes this node a voter: it would vote without a
                // vote history and count toward the high watermark (protocol.md 11, ringraft).
                self.fatal(format!("FindQuorum to {}: {e}", describe_peer(f.to)), out);
                return;
            }
        }
        if r.error.is_none() {
            for endpoint in r.voters.iter().chain(r.target_voters.iter().flatten()) {
                self.learn_endpoint(endpoint.clone(), out);
            }
        }
        let outcome = if r.error.is_none() {
            self.common_response(r.error, r.leader_id, r.leader_epoch, out)
        } else {
            Common::Retry
        };
        let still_looking = (self.qs.role() == Role::Unattached && self.qs.is_observer())
            || self.missing_endpoints();
        if outcome != Common::Done || still_looking {
            if still_looking && !self.outbound.any_retry(|x| x == Retry::FindQuorum) {
                self.outbound
                    .schedule_retry(self.now, f.to, Retry::FindQuorum, &mut self.rng);
            }
        } else {
            self.outbound.reset_backoff(f.to);
        }
    }

    // ----- DescribeQuorum -----

    fn replica_state(id: NodeId, p: &ReplicaProgress) -> ReplicaState {
        ReplicaState {
            replica_id: id,
            log_end_offset: p.end_offset,
            last_fetch_timestamp: p.last_fetch_ms.map_or(-1, |t| t as i64),
            last_caught_up_timestamp: p.last_caught_up_ms.map_or(-1, |t| t as i64),
        }
    }

    pub(crate) fn handle_describe_quorum(&mut self, id: RequestId, out: &mut Vec<Output>) {
        let response = match &self.role {
            RoleState::Leader(l) => {
                let me = self.qs.local_id();
                let mut voters: Vec<ReplicaState> = Vec::with_capacity(l.voters.len() + 1);
                for v in self.qs.voters() {
                    if *v == me {
                        voters.push(ReplicaState {
                            replica_id: me,
                            log_end_offset: self.log.end_offset(),
                            last_fetch_timestamp: self.now as i64,
                            last_caught_up_timestamp: self.now as i64,
                        });
                    } else if let Some(p) = l.voters.get(v) {
                        voters.push(Self::replica_state(*v, p));
                    }
                }
                DescribeQuorumResponse {
                    error: ErrorCode::NONE,
                    leader_id: me,
                    leader_epoch: self.qs.epoch(),
                    high_watermark: l.high_watermark.unwrap_or(-1),
                    current_voters: voters,
                    target_voters: None,
                    observers: l
                        .observers
                        .iter()
                        .map(|(id, p)| Self::replica_state(*id, p))
                        .collect(),
                }
            }
            _ => DescribeQuorumResponse {
                error: ErrorCode::NOT_QUORUM_LEADER,
                leader_id: self.leader_hint(),
                leader_epoch: self.qs.epoch(),
                high_watermark: -1,
                current_voters: Vec::new(),
                target_voters: None,
                observers: Vec::new(),
            },
        };
        out.push(Output::Respond {
            id,
            response: Response::DescribeQuorum(response),
        });
    }
}

/// A peer as a log line names it: a node id, or a bootstrap server's position in the list.
fn describe_peer(id: NodeId) -> String {
    match bootstrap_server_index(id) {
        Some(index) => format!("bootstrap server #{index}"),
        None => format!("node {id}"),
    }
}
