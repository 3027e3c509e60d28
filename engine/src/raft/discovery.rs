//! Request/response dispatch, the common response rules (docs/protocol.md section 8), FindQuorum
//! and DescribeQuorum (section 9).

use super::admission::{admit_request, check_boot_timestamp, check_epoch_limit, Refusal};
use super::core::RaftCore;
use super::leader::{LeaderState, ReplicaProgress};
use super::quorum_epoch::Announcement;
use super::requests::{InFlight, RequestKind, Retry};
use super::types::{
    bootstrap_server_id, bootstrap_server_index, Correlation, DirectoryId, Epoch, NodeId, Output,
    ReplicaView, RequestId, Sender, TimeMs,
};
use super::{
    DescribeQuorumResponse, ErrorCode, FindQuorumRequest, FindQuorumResponse, ReplicaState,
    Request, Response, VoterEndpoint,
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

/// What a FindQuorum answer leaves to do once it is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AfterFindQuorum {
    /// A good answer that ends the search: the next failure backs off from the start.
    ResetBackoff,
    /// Still looking and no FindQuorum retry pending: ask again after the backoff.
    ScheduleRetry,
    /// Still looking with a retry already pending, or an answer that ends nothing.
    Nothing,
}

fn after_find_quorum(outcome: Common, still_looking: bool, retry_pending: bool) -> AfterFindQuorum {
    if outcome == Common::Done && !still_looking {
        AfterFindQuorum::ResetBackoff
    } else if still_looking && !retry_pending {
        AfterFindQuorum::ScheduleRetry
    } else {
        AfterFindQuorum::Nothing
    }
}

impl RaftCore {
    pub(crate) fn on_request(
        &mut self,
        id: RequestId,
        from: Sender,
        request: Request,
        out: &mut Vec<Output>,
    ) {
        // A node of another cluster is told so (INCONSISTENT_CLUSTER_ID), whatever else is wrong
        // with its request: that is the error its operator needs to see. Nothing is learned
        // from it or told to it: not our voters, their endpoints or our cluster id.
        if let Some(theirs) = cluster_id_of(&request).filter(|c| *c != self.config.cluster_id) {
            let why = format!("cluster id {theirs:?} is not this cluster's");
            return self.answer_refused(id, &request, ErrorCode::INCONSISTENT_CLUSTER_ID, why, out);
        }
        if let Err(refusal) = admit_request(&request, from, self.receiver()) {
            return self.refuse_request(id, from, &request, refusal, out);
        }
        if let Some((kind, error)) = self.announcement_refusal(&request) {
            return self.respond_announcement(kind, id, error, out);
        }
        match request {
            Request::Vote(r) => self.handle_vote(id, r, out),
            Request::BeginQuorumEpoch(r) => self.handle_begin_quorum_epoch(id, r, out),
            Request::EndQuorumEpoch(r) => self.handle_end_quorum_epoch(id, r, out),
            Request::FetchQuorumRecords(r) => self.handle_fetch(id, r, out),
            Request::FindQuorum(r) => self.handle_find_quorum(id, r, out),
            Request::DescribeQuorum(_) => self.handle_describe_quorum(id, out),
            Request::AlterQuorum(r) => self.handle_alter_quorum(id, r, out),
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
            (RequestKind::Probe, response) => {
                self.handle_probe_response(correlation, response, out)
            }
            (RequestKind::Vote | RequestKind::PreVote, Response::Vote(r)) => {
                self.handle_vote_response(f, r, out)
            }
            (RequestKind::BeginQuorumEpoch, Response::BeginQuorumEpoch(r)) => {
                let answer = (r.error, r.leader_id, r.leader_epoch);
                self.handle_announcement_response(Announcement::Begin, f, answer, out)
            }
            (RequestKind::EndQuorumEpoch, Response::EndQuorumEpoch(r)) => {
                let answer = (r.error, r.leader_id, r.leader_epoch);
                self.handle_announcement_response(Announcement::End, f, answer, out)
            }
            (RequestKind::Fetch { .. }, Response::FetchQuorumRecords(r)) => {
                self.handle_fetch_response(f, r, out)
            }
            (RequestKind::FindQuorum, Response::FindQuorum(r)) => {
                self.handle_find_quorum_response(f, r, out)
            }
            // An answer of another API than the request's: no honest peer sends one, so it is
            // reported (the node logs it once per peer and counts it with the refused
            // messages), and the request is taken as failed, so it is retried as after a lost
            // connection rather than waited for.
            (
                kind @ (RequestKind::Vote
                | RequestKind::PreVote
                | RequestKind::BeginQuorumEpoch
                | RequestKind::EndQuorumEpoch
                | RequestKind::Fetch { .. }
                | RequestKind::FindQuorum),
                response,
            ) => {
                let why = format!(
                    "of the wrong kind: a {} answer to a {} request",
                    response_name(&response),
                    kind_name(kind)
                );
                self.distrust(from, why, out);
                self.on_request_failure(correlation, f, out);
            }
        }
    }

    /// Answers a request that failed admission with its error, having changed nothing.
    fn refuse_request(
        &mut self,
        id: RequestId,
        from: Sender,
        request: &Request,
        refusal: Refusal,
        out: &mut Vec<Output>,
    ) {
        out.push(Output::Refused {
            request: Some(id),
            peer: from.replica(),
            reason: format!("{}: {}", request_name(request), refusal.reason),
        });
        self.answer_refused(id, request, refusal.error, refusal.reason, out);
    }

    /// The answer to a request refused before its handler: `error` in the request's own
    /// response, with `reason` where the response has room for a message.
    fn answer_refused(
        &mut self,
        id: RequestId,
        request: &Request,
        error: ErrorCode,
        reason: String,
        out: &mut Vec<Output>,
    ) {
        match request {
            Request::Vote(_) => self.respond_vote(id, error, false, out),
            Request::BeginQuorumEpoch(_) => {
                self.respond_announcement(Announcement::Begin, id, error, out)
            }
            Request::EndQuorumEpoch(_) => {
                self.respond_announcement(Announcement::End, id, error, out)
            }
            Request::FetchQuorumRecords(_) => self.respond_fetch_error(id, error, out),
            Request::FindQuorum(_) => respond_find_quorum_error(id, error, out),
            Request::DescribeQuorum(_) => unreachable!("DescribeQuorum has no field to refuse"),
            Request::AlterQuorum(_) => {
                self.respond_alter_quorum_error(id, error, Some(reason), out)
            }
        }
    }

    /// A response this node does not believe: reported, and otherwise ignored.
    pub(crate) fn distrust(&self, from: NodeId, why: String, out: &mut Vec<Output>) {
        out.push(Output::Refused {
            request: None,
            peer: Some(from),
            reason: format!("a response {why}"),
        });
    }

    pub(crate) fn fatal(&mut self, msg: String, out: &mut Vec<Output>) {
        out.push(Output::Fatal(format!("node {}: {msg}", self.qs.local_id())));
        self.stopped = true;
    }

    /// docs/protocol.md section 8: stale responses are dropped, newer epochs and leaders are
    /// adopted, inconsistent ones are ignored (and reported), and another cluster's answer or a
    /// peer finding our request invalid is fatal.
    pub(crate) fn common_response(
        &mut self,
        from: NodeId,
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
            // Only the limit, not the jump bound: answers come from the peers this node chose
            // to ask, and they are how a node left far behind (cut off for long, or by hostile
            // requests that moved the others on) catches up.
            if let Err(refusal) = check_epoch_limit("leader epoch", epoch) {
                self.distrust(from, refusal.reason, out);
                return Common::Done;
            }
            // A leader outside this node's set is followed too: its log holds the set that
            // has it (docs/protocol.md, "The voter set lives in the log").
            if leader_id >= 0 && leader_id != me {
                self.enter_follower(epoch, leader_id, out);
            } else if !self.may_vote() {
                // A node that cannot vote has no use for an epoch without a leader, and one
                // it adopted could outlive every voter that knew it (a candidate whose disk
                // was lost): it would then wait for ever for a leader of that epoch while the
                // cluster goes on in an older one. It stays where it is and asks again; the
                // epoch's leader, once elected, is named by a later answer (docs/protocol.md
                // section 8).
                return Common::Retry;
            } else {
                self.enter_unattached(epoch, out);
            }
            return Common::Done;
        }
        if leader_id >= 0 {
            // Honest nodes never disagree on an epoch's leader (election safety; the simulator
            // checks it). Without authenticated voters, though, a spoofed BeginQuorumEpoch can
            // make this node believe in a leader that never was: ignore the answer rather than
            // stop, and the fetch or election timer moves on to a newer epoch.
            if leader_id == me {
                // True of a leader, a resigned one, and a prospective that resigned.
                if self.qs.leader_id() != Some(me) {
                    let why = format!("{NAMED_LEADER_UNKNOWINGLY} {epoch}, which it is not (or no longer remembers: its log directory was lost)");
                    self.distrust(from, why, out);
                    return Common::Done;
                }
            } else {
                match self.qs.leader_id() {
                    Some(known) if known != leader_id => {
                        let why = format!(
                            "names {leader_id} leader of epoch {epoch}, which this node knows \
                             as led by {known}"
                        );
                        self.distrust(from, why, out);
                        return Common::Done;
                    }
                    Some(_) => {}
                    None => {
                        self.enter_follower(epoch, leader_id, out);
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
            // FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER (the peer moved on or has not
            // caught up) and the transient errors: ask again after the backoff.
            _ => Common::Retry,
        }
    }

    // ----- FindQuorum -----

    pub(crate) fn looking_for_quorum(&self) -> bool {
        self.outbound
            .any_in_flight(|f| f.kind == RequestKind::FindQuorum)
            || self.find_quorum_retry_pending()
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

    /// True while some voter reachable from here has not yet answered with this node's
    /// endpoint since a voter record changed the set that has this node.
    pub(crate) fn announcing(&self) -> bool {
        self.announce_to.iter().any(|v| self.endpoints.is_known(*v))
    }

    /// The set in force changed: if this node is a voter of it, every other voter is told its
    /// endpoint (a FindQuorum advertises it) until that voter's answer lists it; voters that
    /// left need not be.
    pub(crate) fn announce_after_voter_change(&mut self) {
        let local = self.qs.local_id();
        let voters = self.qs.voters();
        if self.config.host.is_empty() || !voters.contains(&local) {
            self.announce_to.clear();
            return;
        }
        self.announce_to = voters.iter().copied().filter(|v| *v != local).collect();
    }

    /// Where the next FindQuorum goes: a voter still to be told this node's endpoint;
    /// otherwise round robin: the other voters this node can reach (their
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
        let announce: Vec<NodeId> = self
            .announce_to
            .iter()
            .copied()
            .filter(|v| self.endpoints.is_known(*v))
            .collect();
        let candidates = [announce, reachable, bootstrap, others]
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
        let request = self.find_quorum_request();
        let epoch = self.qs.epoch();
        self.outbound
            .send(out, self.now, to, epoch, RequestKind::FindQuorum, request);
    }

    fn find_quorum_request(&self) -> Request {
        Request::FindQuorum(FindQuorumRequest {
            cluster_id: self.config.cluster_id.clone(),
            replica_id: self.qs.local_id(),
            boot_timestamp: self.config.boot_timestamp,
            host: self.config.host.clone(),
            port: self.config.port,
        })
    }

    fn voter_endpoints(&self) -> Vec<VoterEndpoint> {
        let local = self.qs.local_id();
        self.qs
            .voters()
            .iter()
            .map(|v| {
                if *v == local && !self.config.host.is_empty() && !self.qs.id_belongs_to_another() {
                    self.local_endpoint()
                } else {
                    self.endpoints.get(*v)
                }
            })
            .collect()
    }

    fn is_own_endpoint(&self, endpoint: &VoterEndpoint) -> bool {
        endpoint.voter_id == self.qs.local_id()
            && endpoint.host == self.config.host
            && endpoint.port == self.config.port
    }

    fn local_endpoint(&self) -> VoterEndpoint {
        VoterEndpoint {
            voter_id: self.qs.local_id(),
            boot_timestamp: self.config.boot_timestamp,
            host: self.config.host.clone(),
            port: self.config.port,
        }
    }

    /// A voter's advertised endpoint, if newer than what is known, is probed before it is used:
    /// anybody can advertise anything.
    fn learn_endpoint(&mut self, endpoint: VoterEndpoint, out: &mut Vec<Output>) {
        // A node of the reassignment's target too: it is about to become a voter, and a log
        // that lags may not name it as one yet (docs/protocol.md, "Endpoints of new voters").
        let is_other_voter =
            endpoint.voter_id != self.qs.local_id() && self.qs.named_by_set(endpoint.voter_id);
        if !is_other_voter
            || check_boot_timestamp(endpoint.boot_timestamp, self.receiver()).is_err()
            || !self.endpoints.worth_probing(&endpoint)
        {
            return;
        }
        let request = self.find_quorum_request();
        let epoch = self.qs.epoch();
        let correlation = self
            .outbound
            .probe(out, self.now, epoch, endpoint.clone(), request);
        self.endpoints.probing(correlation, endpoint);
    }

    /// The endpoint is used only if it answered, for its own voter id, the advertised address
    /// with the advertised boot timestamp or a newer one. Nothing else in the answer is
    /// believed: it came from an unproven address.
    fn handle_probe_response(
        &mut self,
        correlation: Correlation,
        response: Response,
        out: &mut Vec<Output>,
    ) {
        let Some(candidate) = self.endpoints.probe_done(correlation) else {
            return;
        };
        let Response::FindQuorum(r) = response else {
            return;
        };
        if !r.error.is_none() || r.cluster_id != self.config.cluster_id {
            return;
        }
        // The voter's own entry, at the probed address, no older than the advertisement (an
        // advertisement relayed by another node may carry an older boot timestamp, never a
        // newer one than the voter itself gives).
        let me = self.receiver();
        let mut listed = r
            .voters
            .into_iter()
            .chain(r.target_voters.into_iter().flatten());
        let vouched = listed.find(|e| {
            e.voter_id == candidate.voter_id
                && e.host == candidate.host
                && e.port == candidate.port
                && e.boot_timestamp >= candidate.boot_timestamp
                && check_boot_timestamp(e.boot_timestamp, me).is_ok()
        });
        if let Some(endpoint) = vouched {
            if self.endpoints.confirm(&endpoint) {
                out.push(Output::EndpointChanged(endpoint));
            }
        }
    }

    /// Answered by every node of the cluster with what it knows; a voter's advertisement with a
    /// newer boot timestamp than what this node knew is probed, and used only once it vouches
    /// for itself (docs/protocol.md section 9).
    pub(crate) fn handle_find_quorum(
        &mut self,
        id: RequestId,
        req: FindQuorumRequest,
        out: &mut Vec<Output>,
    ) {
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
                target_voters: self.own_endpoint_outside_the_set(),
            }),
        });
    }

    /// This node's own endpoint when it advertises one and its log does not name it a current
    /// voter, in the answer's TargetVoters: a voter whose log already added it probes it before
    /// it sends it anything, and the probe needs the node to vouch for itself, which its voter
    /// list (its own log's set) cannot do yet (docs/protocol.md, "Endpoints of new voters").
    fn own_endpoint_outside_the_set(&self) -> Option<Vec<VoterEndpoint>> {
        let outside = !self.config.host.is_empty() && !self.qs.is_voter(self.qs.local_id());
        (outside && !self.qs.id_belongs_to_another()).then(|| vec![self.local_endpoint()])
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
                // A set of this node alone: nobody to follow (docs/protocol.md section 9; a set
                // that names this node among others is adopted without it).
                self.fatal(format!("FindQuorum to {}: {e}", describe_peer(f.to)), out);
                return;
            }
        }
        if r.error.is_none() {
            // Told once its answer lists this node's endpoint: it probed the advertisement and
            // uses it. Until then (it has not applied the record, or its probe is under way)
            // this node asks again after the backoff.
            if r.voters.iter().any(|v| self.is_own_endpoint(v)) {
                self.announce_to.remove(&f.to);
            }
            for endpoint in r.voters.iter().chain(r.target_voters.iter().flatten()) {
                self.learn_endpoint(endpoint.clone(), out);
            }
        }
        let outcome = if r.error.is_none() {
            self.common_response(f.to, r.error, r.leader_id, r.leader_epoch, out)
        } else {
            Common::Retry
        };
        let still_looking =
            self.observer_without_leader() || self.missing_endpoints() || self.announcing();
        match after_find_quorum(outcome, still_looking, self.find_quorum_retry_pending()) {
            AfterFindQuorum::ResetBackoff => self.outbound.reset_backoff(f.to),
            AfterFindQuorum::ScheduleRetry => {
                self.outbound
                    .schedule_retry(self.now, f.to, Retry::FindQuorum, &mut self.rng)
            }
            AfterFindQuorum::Nothing => {}
        }
    }

    fn find_quorum_retry_pending(&self) -> bool {
        self.outbound.any_retry(|r| r == Retry::FindQuorum)
    }

    // ----- the leader's view of its replicas (Metadata) -----

    /// The leader's view of its replicas, as Kafka's Metadata reports them (docs/clients.md):
    /// the voters caught up with its log end within the fetch timeout (the leader counts itself),
    /// and the observers DescribeQuorum lists. None unless this node leads. Read-only.
    pub fn replica_view(&self) -> Option<ReplicaView> {
        let l = self.qs.leader()?;
        let me = self.qs.local_id();
        let window = self.config.fetch_timeout_ms;
        let caught_up = |p: &ReplicaProgress| {
            p.last_caught_up_ms
                .is_some_and(|t| self.now.saturating_sub(t) <= window)
        };
        let in_sync = self
            .qs
            .voters()
            .iter()
            .copied()
            .filter(|v| *v == me || l.voters.get(v).is_some_and(caught_up))
            .collect();
        Some(ReplicaView {
            in_sync,
            observers: l.live_observers(self.now).map(|(id, _)| *id).collect(),
        })
    }

    // ----- DescribeQuorum -----

    /// Core time `t` as DescribeQuorum gives it: wall-clock ms since the Unix epoch, which is
    /// what Kafka's LastFetchTimestamp and LastCaughtUpTimestamp are; the core's own time where
    /// the driver gave it no boot time (the simulator, the scenario tests).
    fn describe_time(&self, t: TimeMs) -> i64 {
        self.wall_clock_at(t)
            .unwrap_or_else(|| i64::try_from(t).unwrap_or(i64::MAX))
    }

    /// A replica's state as DescribeQuorum gives it: times on the wall clock, -1 when unknown.
    fn replica_state(&self, id: NodeId, p: &ReplicaProgress) -> ReplicaState {
        ReplicaState {
            replica_id: id,
            directory_id: p.directory_id,
            log_end_offset: p.end_offset,
            last_fetch_timestamp: p.last_fetch_ms.map_or(-1, |t| self.describe_time(t)),
            last_caught_up_timestamp: p.last_caught_up_ms.map_or(-1, |t| self.describe_time(t)),
        }
    }

    /// What the leader knows of replica `id`: itself, a voter or an observer it has heard
    /// fetch, or nothing yet (-1s).
    fn replica_of(&self, l: &LeaderState, id: NodeId) -> ReplicaState {
        if id == self.qs.local_id() {
            return ReplicaState {
                replica_id: id,
                directory_id: self.config.directory_id,
                log_end_offset: self.log.end_offset(),
                last_fetch_timestamp: self.describe_time(self.now),
                last_caught_up_timestamp: self.describe_time(self.now),
            };
        }
        match l.voters.get(&id).or_else(|| l.observers.get(&id)) {
            Some(p) => self.replica_state(id, p),
            None => ReplicaState {
                replica_id: id,
                directory_id: DirectoryId::ZERO,
                log_end_offset: -1,
                last_fetch_timestamp: -1,
                last_caught_up_timestamp: -1,
            },
        }
    }

    pub(crate) fn handle_describe_quorum(&mut self, id: RequestId, out: &mut Vec<Output>) {
        let response = match self.qs.leader() {
            Some(l) => {
                let config = self.qs.voter_config();
                let replicas = |ids: &[NodeId]| -> Vec<ReplicaState> {
                    ids.iter().map(|v| self.replica_of(l, *v)).collect()
                };
                DescribeQuorumResponse {
                    error: ErrorCode::NONE,
                    leader_id: self.qs.local_id(),
                    leader_epoch: self.qs.epoch(),
                    high_watermark: l.high_watermark.unwrap_or(-1),
                    current_voters: replicas(&config.current),
                    // A reassignment in progress: where the leader is taking the voters.
                    target_voters: config.target.as_deref().map(replicas),
                    observers: l
                        .live_observers(self.now)
                        .map(|(id, p)| self.replica_state(*id, p))
                        .collect(),
                }
            }
            None => DescribeQuorumResponse {
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

/// A FindQuorum answer that tells nothing: not the cluster id, the voters or the leader.
/// How a refusal of an answer naming this node leader of an epoch it does not know begins:
/// a lie, or an honest peer talking to a node that lost its log directory.
pub const NAMED_LEADER_UNKNOWINGLY: &str = "names this node leader of epoch";

fn respond_find_quorum_error(id: RequestId, error: ErrorCode, out: &mut Vec<Output>) {
    out.push(Output::Respond {
        id,
        response: Response::FindQuorum(FindQuorumResponse::telling_nothing(error)),
    });
}

/// The cluster id a request carries (DescribeQuorum, an admin request, carries none).
fn cluster_id_of(request: &Request) -> Option<&str> {
    match request {
        Request::Vote(r) => Some(&r.cluster_id),
        Request::BeginQuorumEpoch(r) => Some(&r.cluster_id),
        Request::EndQuorumEpoch(r) => Some(&r.cluster_id),
        Request::FetchQuorumRecords(r) => Some(&r.cluster_id),
        Request::FindQuorum(r) => Some(&r.cluster_id),
        Request::DescribeQuorum(_) => None,
        Request::AlterQuorum(r) => Some(&r.cluster_id),
    }
}

fn request_name(request: &Request) -> &'static str {
    match request {
        Request::Vote(_) => "Vote",
        Request::BeginQuorumEpoch(_) => "BeginQuorumEpoch",
        Request::EndQuorumEpoch(_) => "EndQuorumEpoch",
        Request::FetchQuorumRecords(_) => "FetchQuorumRecords",
        Request::FindQuorum(_) => "FindQuorum",
        Request::DescribeQuorum(_) => "DescribeQuorum",
        Request::AlterQuorum(_) => "AlterQuorum",
    }
}

fn response_name(response: &Response) -> &'static str {
    match response {
        Response::Vote(_) => "Vote",
        Response::BeginQuorumEpoch(_) => "BeginQuorumEpoch",
        Response::EndQuorumEpoch(_) => "EndQuorumEpoch",
        Response::FetchQuorumRecords(_) => "FetchQuorumRecords",
        Response::FindQuorum(_) => "FindQuorum",
        Response::DescribeQuorum(_) => "DescribeQuorum",
        Response::AlterQuorum(_) => "AlterQuorum",
    }
}

/// The request an in-flight entry stands for, as a log line names it.
fn kind_name(kind: RequestKind) -> &'static str {
    match kind {
        RequestKind::Vote => "Vote",
        RequestKind::PreVote => "Vote (pre-vote)",
        RequestKind::BeginQuorumEpoch => "BeginQuorumEpoch",
        RequestKind::EndQuorumEpoch => "EndQuorumEpoch",
        RequestKind::Fetch { .. } => "FetchQuorumRecords",
        RequestKind::FindQuorum => "FindQuorum",
        RequestKind::Probe => "FindQuorum (endpoint probe)",
    }
}

/// A peer as a log line names it: a node id, or a bootstrap server's position in the list.
fn describe_peer(id: NodeId) -> String {
    match bootstrap_server_index(id) {
        Some(index) => format!("bootstrap server #{index}"),
        None => format!("node {id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_find_quorum_answer_resets_the_backoff_ends_or_schedules_the_search() {
        use AfterFindQuorum::*;
        for pending in [false, true] {
            assert_eq!(
                after_find_quorum(Common::Done, false, pending),
                ResetBackoff
            );
            assert_eq!(after_find_quorum(Common::Retry, false, pending), Nothing);
            assert_eq!(after_find_quorum(Common::Proceed, false, pending), Nothing);
        }
        for outcome in [Common::Done, Common::Retry, Common::Proceed] {
            assert_eq!(after_find_quorum(outcome, true, false), ScheduleRetry);
            assert_eq!(after_find_quorum(outcome, true, true), Nothing);
        }
    }
}
