//! `RaftCore`: the state, the dispatch of inputs, transitions with their side effects, timers.
//! The handlers of each RPC live in their own modules (`vote`, `quorum_epoch`, `fetch`,
//! `discovery`, `append`) as further `impl RaftCore` blocks.

use super::admission::{Receiver, EPOCH_WARNING, MAX_PEER_EPOCH};
use super::endpoints::EndpointTable;
use super::epoch_state::{CandidateState, EpochState};
use super::leader::{LeaderState, Lease};
use super::log_state::LogState;
use super::quorum_state::{InitError, QuorumState, TransitionError};
use super::requests::{Outbound, RequestKind, Retry};
use super::rng::SplitMix64;
use super::types::{
    AppendResult, ElectionState, Epoch, Input, LogSnapshot, NodeId, Offset, Output, PlantedBug,
    RaftConfig, TimeMs,
};
use super::{ErrorCode, Role};

/// How often a node that cannot campaign (its epoch is the last) repeats its alert.
const EXHAUSTED_REMINDER_MS: TimeMs = 60_000;

/// The sans-IO Raft core: its inputs and outputs and the rules it keeps are in docs/protocol.md,
/// how the node drives it in docs/architecture.md ("Node runtime").
pub struct RaftCore {
    pub(crate) config: RaftConfig,
    /// The election state and the role with its data (the one `EpochState`).
    pub(crate) qs: QuorumState,
    pub(crate) log: LogState,
    pub(crate) outbound: Outbound,
    pub(crate) rng: SplitMix64,
    pub(crate) now: TimeMs,
    /// The timer of the current role (election, fetch, backoff, progress check).
    pub(crate) role_deadline: Option<TimeMs>,
    /// The highest HW this node has known (never decreases; guards truncation).
    pub(crate) local_hw: Option<Offset>,
    initial_persist: bool,
    started: bool,
    pub(crate) shutdown_deadline: Option<TimeMs>,
    pub(crate) stopped: bool,
    pub(crate) next_read_id: u64,
    pub(crate) find_quorum_cursor: usize,
    pub(crate) endpoints: EndpointTable,
    /// Voters this node, a voter since a voter record added it, still has to tell its endpoint
    /// (a FindQuorum to each): they learned it as an observer's, which is not a voter endpoint
    /// (docs/protocol.md, "Endpoints of new voters").
    pub(crate) announce_to: std::collections::BTreeSet<NodeId>,
    /// `now` when the core was made: the wall clock is `config.boot_timestamp` plus the time
    /// since.
    start_now: TimeMs,
    /// The operator has been told that the epoch passed [`EPOCH_WARNING`] (once per start).
    epoch_alerted: bool,
    /// The role timer, when it fires, starts a candidacy at once, without a pre-vote round:
    /// an EndQuorumEpoch named this node a later successor (its leader gave the epoch up, so
    /// there is no live leader a pre-vote would protect). Cleared by every role change.
    pub(crate) stand_when_due: bool,
    /// A voter its log is removing sat out its last election timeout (it stands every other
    /// one: docs/protocol.md, "Driving the change", rule 5).
    pub(crate) leaving_sat_out: bool,
    /// The log cannot allocate its next segment ([`Input::StorageFull`]).
    pub(crate) storage_full: bool,
    /// The leader answered NOT_FOLLOWER: its log no longer counts this node as a voter, so the
    /// node fetches as an observer until its own log says the same (it becomes a non-voter only
    /// through a voter record in its own log). Cleared by every role change.
    pub(crate) fetch_as_observer: bool,
    /// A node that restarted from a stored election state refuses pre-votes, and does not
    /// stand, before this time (a fetch timeout after its start): before the restart it may
    /// have echoed a leader's lease stamp, and it no longer knows when (docs/consistency.md,
    /// "The leader lease"). None: first boot, or the lease is off.
    pub(crate) restart_quiet_until: Option<TimeMs>,
}

impl RaftCore {
    /// Applies the restart rules (docs/protocol.md section 2, "Restart"); emits nothing until
    /// the first `step`.
    pub fn new(
        config: RaftConfig,
        stored: Option<ElectionState>,
        log: LogSnapshot,
        now: TimeMs,
    ) -> Result<RaftCore, InitError> {
        if log.end_offset < 0 {
            return Err(InitError::InvalidConfig("negative log end offset"));
        }
        if !(0..=log.end_offset).contains(&log.start_offset) {
            return Err(InitError::InvalidConfig(
                "log start offset outside 0..=end offset",
            ));
        }
        if config.lease && !config.pre_vote {
            // The lease rests on voters refusing pre-votes while they hear from a live leader;
            // without pre-vote a candidate asks for votes at once (docs/consistency.md).
            return Err(InitError::InvalidConfig(
                "the leader lease needs pre-vote (turn both on, or the lease off)",
            ));
        }
        let restart_quiet_until =
            (config.lease && stored.is_some()).then(|| now.saturating_add(config.fetch_timeout_ms));
        let (mut qs, initial_persist) = QuorumState::restore(&config, stored, &log)?;
        if config.planted == Some(super::types::PlantedBug::ApplyOnCommit) {
            qs.plant_apply_on_commit(now);
        }
        let mut rng = SplitMix64::new(config.seed, config.node_id);
        let first_correlation = rng.next_u64() >> 16;
        let outbound = Outbound::new(
            first_correlation,
            config.retry_backoff_ms,
            config.retry_backoff_max_ms,
            config.request_timeout_ms,
        );
        let endpoints = EndpointTable::new(&config.voter_endpoints);
        Ok(RaftCore {
            log: LogState::new(&log, config.tail_cache_bytes).map_err(InitError::InvalidLog)?,
            config,
            qs,
            outbound,
            rng,
            now,
            role_deadline: None,
            local_hw: None,
            initial_persist,
            started: false,
            shutdown_deadline: None,
            stopped: false,
            next_read_id: 1,
            endpoints,
            find_quorum_cursor: 0,
            announce_to: std::collections::BTreeSet::new(),
            start_now: now,
            epoch_alerted: false,
            stand_when_due: false,
            leaving_sat_out: false,
            storage_full: false,
            fetch_as_observer: false,
            restart_quiet_until,
        })
    }

    /// Feeds one input; outputs are appended to `out` in the order they must be carried out.
    pub fn step(&mut self, input: Input, out: &mut Vec<Output>) {
        if self.stopped {
            return;
        }
        if let Input::Tick { now } = input {
            self.now = self.now.max(now);
        }
        if !self.started {
            self.start(out);
        }
        match input {
            Input::Tick { .. } => self.on_tick(out),
            Input::Request { id, from, request } => self.on_request(id, from, request, out),
            Input::Response {
                from,
                correlation,
                response,
            } => self.on_response(from, correlation, response, out),
            Input::RequestFailed { to, correlation } => {
                if let Some(f) = self.outbound.take(correlation, to) {
                    self.on_request_failure(correlation, f, out);
                }
            }
            Input::LogDurable { up_to_seq } => self.on_log_durable(up_to_seq, out),
            Input::LogReadDone { read_id, batches } => self.on_read_done(read_id, batches, out),
            Input::ClientAppend {
                id,
                batch,
                record_count,
                acks,
            } => self.on_client_append(id, batch, record_count, acks, out),
            Input::AppendControl { batch } => self.on_append_control(batch, out),
            Input::ClientFetch { id, fetch } => self.on_client_fetch(id, fetch, out),
            Input::Shutdown => self.on_shutdown(out),
            Input::StorageFull { full } => self.storage_full = full,
            Input::LogStartMoved { start } => self.on_log_start_moved(start),
            Input::CarryVoterRecord { below } => self.carry_voter_record(below, out),
            Input::RefreshFetch => {
                // A full log sends no fetch (docs/storage.md, "A full disk").
                if self.qs.fetching_from().is_some() && !self.storage_full {
                    self.refresh_fetch(out);
                }
            }
        }
        if !self.stopped {
            self.drive(out);
        }
    }

    // ----- read-only views -----

    pub fn node_id(&self) -> NodeId {
        self.qs.local_id()
    }
    pub fn role(&self) -> Role {
        self.qs.role()
    }
    pub fn epoch(&self) -> Epoch {
        self.qs.epoch()
    }
    /// The leader this node names (to peers, clients and Metadata): the one its answers carry.
    pub fn leader_id(&self) -> Option<NodeId> {
        let hint = self.leader_hint();
        (hint >= 0).then_some(hint)
    }
    pub fn voted_id(&self) -> Option<NodeId> {
        self.qs.voted_id()
    }
    pub fn is_observer(&self) -> bool {
        self.qs.is_observer()
    }
    pub fn voters(&self) -> &[NodeId] {
        self.qs.voters()
    }
    /// Leader: the exposed HW (None until the own-epoch rule allows one). Others: learned HW.
    pub fn high_watermark(&self) -> Option<Offset> {
        match self.qs.leader() {
            Some(l) => l.high_watermark,
            None => self.local_hw,
        }
    }
    /// The log's first offset (retention and resets move it: retention.rs).
    pub fn log_start_offset(&self) -> Offset {
        self.log.start_offset()
    }
    pub fn log_end_offset(&self) -> Offset {
        self.log.end_offset()
    }
    pub fn durable_end_offset(&self) -> Offset {
        self.log.durable_end_offset()
    }
    pub fn last_epoch(&self) -> Epoch {
        self.log.last_epoch()
    }
    /// The epoch of the batch holding `offset` (the log's epoch cache), None below its first
    /// entry.
    pub fn log_epoch_at(&self, offset: Offset) -> Option<Epoch> {
        self.log.epoch_at(offset)
    }
    /// Bytes of batches the in-memory tail cache holds (what its memory costs, beside the
    /// `Bytes` it may share with frames still in flight).
    pub fn tail_cache_bytes(&self) -> usize {
        self.log.tail.bytes()
    }
    /// On a leader, each other voter's lag (docs/operations.md, "Metrics"), appended to `out`;
    /// false (and nothing appended) elsewhere.
    pub fn replica_lags(&self, out: &mut Vec<super::types::ReplicaLag>) -> bool {
        let Some(l) = self.qs.leader() else {
            return false;
        };
        let leo = self.log.end_offset();
        for (&replica_id, p) in &l.voters {
            out.push(super::types::ReplicaLag {
                replica_id,
                // A replica that has not fetched yet (-1) is behind by the whole log.
                records: leo.saturating_sub(p.end_offset.max(0)),
                ms_since_caught_up: p.last_caught_up_ms.map(|t| self.now.saturating_sub(t)),
            });
        }
        true
    }
    /// The quorum-state content the core last asked to persist (or restored).
    pub fn election_state(&self) -> ElectionState {
        self.qs.election_state()
    }
    /// The earliest time the core wants a Tick.
    pub fn next_deadline(&self) -> Option<TimeMs> {
        if self.stopped {
            return None;
        }
        if !self.started {
            return Some(self.now);
        }
        let mut best = self.role_deadline;
        let mut consider = |t: Option<TimeMs>| {
            if let Some(t) = t {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        };
        consider(self.outbound.next_deadline());
        consider(self.shutdown_deadline);
        if let Some(l) = self.qs.leader() {
            consider(l.parked.iter().map(|p| p.due()).min());
            consider(l.alter_waits.iter().map(|w| w.deadline).min());
            consider(l.next_silence(self.config.fetch_timeout_ms));
        }
        best
    }

    /// The leader's bookkeeping, where the caller knows this node leads (it checked on entry,
    /// and nothing since changed the role).
    pub(crate) fn leading(&mut self) -> &mut LeaderState {
        self.qs.leader_mut().expect("this node leads")
    }

    /// The leader this node's answers name (-1: none).
    pub(crate) fn leader_hint(&self) -> NodeId {
        match self.qs.state() {
            // It gave its epoch up and asks for pre-votes, perhaps for long (cut off): naming
            // itself would send clients back to it for as long.
            EpochState::Prospective {
                leader: Some(me), ..
            } if *me == self.qs.local_id() => -1,
            _ => self.qs.leader_id().unwrap_or(-1),
        }
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown_deadline.is_some()
    }

    /// This node's view for the admission checks of peers' messages.
    pub(crate) fn receiver(&self) -> Receiver {
        Receiver {
            epoch: self.qs.epoch(),
            wall_clock_ms: self.wall_clock_ms(),
        }
    }

    /// Wall-clock ms since the Unix epoch, if the driver gave the core its boot time.
    pub(crate) fn wall_clock_ms(&self) -> Option<i64> {
        self.wall_clock_at(self.now)
    }

    /// Core time `t` (not before the core was made) as wall-clock ms since the Unix epoch, if
    /// the driver gave the core its boot time.
    pub(crate) fn wall_clock_at(&self, t: TimeMs) -> Option<i64> {
        if self.config.boot_timestamp <= 0 {
            return None;
        }
        let since_start = i64::try_from(t.saturating_sub(self.start_now)).unwrap_or(i64::MAX);
        Some(self.config.boot_timestamp.saturating_add(since_start))
    }

    // ----- start and timers -----

    fn start(&mut self, out: &mut Vec<Output>) {
        self.started = true;
        if self.initial_persist {
            self.qs.persist_current(out);
        }
        self.emit_role(out);
        match self.qs.state() {
            EpochState::Candidate { .. } => self.enter_candidacy(out),
            EpochState::Follower { .. } => {
                self.role_deadline = Some(self.now + self.config.fetch_timeout_ms);
            }
            EpochState::Resigned { resigned, .. } => {
                // A leader that restarted: tell the others at once so that they need not wait
                // for their fetch timeout (successors by id: progress was lost with the crash).
                let others = resigned.successors.clone();
                let deadline = self.election_deadline();
                self.role_deadline = Some(self.after_restart_quiet(deadline));
                for v in others {
                    self.send_end_quorum_epoch(v, out);
                }
            }
            EpochState::Unattached { .. } | EpochState::Voted { .. } => {
                if self.qs.is_observer() {
                    self.role_deadline = None;
                } else if self.qs.epoch() == 0 || self.qs.voters().len() == 1 {
                    // First boot (restart rule 7) or a lone voter: campaign on the first tick.
                    self.role_deadline = Some(self.now);
                } else {
                    let deadline = self.election_deadline();
                    self.role_deadline = Some(self.after_restart_quiet(deadline));
                }
            }
            EpochState::Leader { .. } | EpochState::Prospective { .. } => {
                unreachable!("restore never yields {:?}", self.qs.role())
            }
        }
    }

    /// `deadline`, or the end of the quiet time after a restart if later: a restarted voter
    /// does not stand before it (docs/consistency.md, "The leader lease").
    fn after_restart_quiet(&self, deadline: TimeMs) -> TimeMs {
        self.restart_quiet_until
            .map_or(deadline, |quiet| deadline.max(quiet))
    }

    /// Whether this node answers clients as leader now (docs/consistency.md): it leads, and
    /// with the lease on, its lease runs and its high watermark is known in its epoch (until
    /// then it could only answer with the one it learned before, perhaps behind a write its
    /// predecessor acknowledged). Consumers' fetches, ListOffsets, OffsetForLeaderEpoch,
    /// Metadata, Produce and the group coordinator all ask this.
    pub fn leads_for_clients(&self) -> bool {
        let Some(leader) = self.qs.leader() else {
            return false;
        };
        self.lease_holds() && (!self.config.lease || leader.high_watermark.is_some())
    }

    /// The lease is off, or this leader's runs now (docs/consistency.md, "The leader lease").
    /// True for a node that does not lead: the role is checked on its own.
    pub(crate) fn lease_holds(&self) -> bool {
        if !self.config.lease
            || self.config.planted == Some(PlantedBug::LeaseIgnored)
            || self.qs.leader().is_none()
        {
            return true;
        }
        self.lease().valid_at(self.now)
    }

    /// The lease of this node's leadership (`Lease::None` when it does not lead).
    pub fn lease(&self) -> Lease {
        self.qs.leader().map_or(Lease::None, |l| {
            l.lease(self.qs.majority(), self.config.lease_ms())
        })
    }

    /// The leader to name to clients (Metadata, FindCoordinator, NOT_LEADER_OR_FOLLOWER
    /// hints): the one this node names, except itself while it leads without answering
    /// clients (a newer leader may exist).
    pub fn client_leader_id(&self) -> Option<NodeId> {
        if self.qs.leader().is_some() && !self.leads_for_clients() {
            return None;
        }
        self.leader_id()
    }

    /// Randomized election timeout: election timeout plus up to the jitter maximum.
    pub(crate) fn election_deadline(&mut self) -> TimeMs {
        self.now
            + self.config.election_timeout_ms
            + self.rng.up_to(self.config.election_jitter_max_ms)
    }

    fn on_tick(&mut self, out: &mut Vec<Output>) {
        for (correlation, failed) in self.outbound.take_expired(self.now) {
            self.on_request_failure(correlation, failed, out);
        }
        for retry in self.outbound.take_due_retries(self.now) {
            self.run_retry(retry, out);
        }
        self.expire_parked_fetches(out);
        self.announce_to_silent_voters(out);
        if self.role_deadline.is_some_and(|d| d <= self.now) {
            self.role_deadline = None;
            self.on_role_timer(out);
        }
        if self.shutdown_deadline.is_some_and(|d| d <= self.now) {
            self.complete_shutdown(out);
        }
    }

    /// A leader announces itself again (BeginQuorumEpoch, re-sent until endorsed) to a voter
    /// that endorsed it and has not fetched for a fetch timeout: a voter that stood in a later
    /// epoch and lost answers with that epoch, and this leader steps down to it, so the next
    /// election takes the voter along (docs/protocol.md section 4; Kafka's KAFKA-16536). A voter
    /// that is only cut off gets it when it is back.
    fn announce_to_silent_voters(&mut self, out: &mut Vec<Output>) {
        let timeout = self.config.fetch_timeout_ms;
        let Some(silent) = self
            .qs
            .leader()
            .map(|l| l.silent_endorsers(self.now, timeout))
        else {
            return;
        };
        for to in silent {
            self.leading().endorsed.remove(&to);
            let pending = self
                .outbound
                .any_in_flight(|f| f.to == to && f.kind == RequestKind::BeginQuorumEpoch)
                || self
                    .outbound
                    .any_retry(|r| r == Retry::BeginQuorumEpoch(to));
            if !pending {
                self.send_begin_quorum_epoch(to, out);
            }
        }
    }

    /// A node whose log cannot grow does not lead among several voters: another can.
    pub(crate) fn storage_blocks_leading(&self) -> bool {
        self.storage_full && self.qs.voters().len() > 1
    }

    fn on_role_timer(&mut self, out: &mut Vec<Output>) {
        if self.storage_blocks_leading() && self.qs.leader().is_none() {
            // Stand for no election while the disk is full; look again a timeout later.
            self.stand_when_due = false;
            self.role_deadline = Some(self.election_deadline());
            return;
        }
        if std::mem::take(&mut self.stand_when_due)
            && !self.qs.is_observer()
            && !self.is_shutting_down()
            && !self.leaving_voter()
        {
            self.enter_candidate(out);
            return;
        }
        match self.qs.state() {
            EpochState::Unattached { .. } | EpochState::Voted { .. } => {
                if !self.qs.is_observer() && !self.is_shutting_down() {
                    self.campaign(out);
                }
            }
            EpochState::Follower { .. } if !self.qs.is_observer() && !self.voter_set_known() => {
                // It may not stand until it knows its set (retention.rs), nor leave the
                // epoch's leader without a new epoch (it could vote in this one again): it asks
                // the voters it knows who leads, and a later epoch's leader takes it over.
                if !self.looking_for_quorum() {
                    self.send_find_quorum(out);
                }
                self.role_deadline = Some(self.now + self.config.fetch_timeout_ms);
            }
            EpochState::Follower { .. } => {
                if self.qs.is_observer() {
                    // Rediscover the leader (docs/protocol.md section 9).
                    let epoch = self.qs.epoch();
                    self.enter_unattached(epoch, out);
                } else if !self.is_shutting_down() {
                    self.campaign(out);
                }
            }
            EpochState::Prospective { round, .. } => {
                if round.backing_off {
                    self.start_pre_vote_round(out);
                } else {
                    self.start_backoff();
                }
            }
            EpochState::Candidate { candidacy, .. } => {
                if candidacy.backing_off {
                    self.campaign(out);
                } else {
                    self.start_backoff();
                }
            }
            EpochState::Leader { leader, .. } => {
                let until =
                    leader.quorum_alive_until(self.qs.majority(), self.config.progress_timeout_ms);
                self.check_quorum(until, out);
            }
            EpochState::Resigned { .. } if self.qs.is_observer() => {
                // It gave its epoch up and its log no longer counts it: it looks for the next
                // leader (of a later epoch; a FindQuorum answer makes it a follower of it).
                if !self.looking_for_quorum() {
                    self.send_find_quorum(out);
                }
                self.role_deadline = Some(self.election_deadline());
            }
            EpochState::Resigned { .. } => {
                if !self.is_shutting_down() {
                    self.campaign(out);
                }
            }
        }
    }

    /// A lost or timed-out election or pre-vote round: wait a random backoff, then campaign
    /// again (a candidate at epoch + 1 or through a pre-vote round first; a prospective with a
    /// new pre-vote round in the same epoch).
    pub(crate) fn start_backoff(&mut self) {
        self.qs
            .campaign_mut()
            .expect("only a candidate or a prospective backs off")
            .backing_off = true;
        self.outbound
            .forget(|f| matches!(f.kind, RequestKind::Vote | RequestKind::PreVote));
        self.role_deadline = Some(self.now + self.rng.up_to(self.config.election_jitter_max_ms));
    }

    /// Check-quorum (docs/protocol.md section 1, "Zombie leaders"): resign when a majority stopped
    /// fetching. `until` is when the leader's contact with a majority runs out (None: never, a
    /// lone voter).
    fn check_quorum(&mut self, until: Option<TimeMs>, out: &mut Vec<Output>) {
        match until {
            None => self.role_deadline = None,
            Some(until) if until > self.now => self.role_deadline = Some(until),
            Some(_) => {
                self.resign(out);
                self.role_deadline = Some(self.election_deadline());
            }
        }
    }

    /// Keeps the role's background sends going: followers always have a fetch outstanding;
    /// observers without a leader look for one.
    fn drive(&mut self, out: &mut Vec<Output>) {
        if self.storage_blocks_leading() && self.qs.leader().is_some() {
            self.resign(out);
            self.role_deadline = Some(self.election_deadline());
        }
        if self.qs.fetching_from().is_some() && !self.storage_full {
            // Followers, and a prospective that kept its leader: an answer from it ends the
            // pre-vote round (docs/protocol.md, "Pre-vote").
            let (offset, epoch) = (self.log.end_offset(), self.log.last_epoch());
            let fetching = self.outbound.any_in_flight(|f| {
                f.kind
                    == RequestKind::Fetch {
                        fetch_offset: offset,
                        last_fetched_epoch: epoch,
                    }
            });
            let waiting = self.outbound.any_retry(|r| r == Retry::Fetch);
            if !fetching && !waiting {
                self.send_fetch(out);
            }
        } else if self.observer_without_leader() && !self.looking_for_quorum() {
            self.send_find_quorum(out);
        }
        // A reassignment moves on as voters catch up and steps commit (docs/protocol.md,
        // "Driving the change"); an AlterQuorum is answered when its target commits or its time
        // runs out.
        if let Some(l) = self.qs.leader() {
            if l.requested_target.is_some()
                || self.qs.voter_config().target.is_some()
                || self.binding_due()
            {
                self.drive_reassignment(out);
            }
            self.answer_alter_waits(out);
        }
        // A node missing some voter's endpoint keeps asking, and a new voter tells the others
        // its endpoint (docs/protocol.md section 9).
        if (self.missing_endpoints() || self.announcing()) && !self.looking_for_quorum() {
            self.send_find_quorum(out);
        }
    }

    /// An observer that knows no leader looks for one: Unattached, or Voted (a node votes
    /// outside its own log's set, docs/protocol.md, "Driving the change", rule 8). So does a
    /// voter whose log was reset and that does not know its set yet: it may not stand, so
    /// only FindQuorum leads it back to a leader (retention.rs).
    pub(crate) fn observer_without_leader(&self) -> bool {
        matches!(self.qs.role(), Role::Unattached | Role::Voted)
            && (self.qs.is_observer() || !self.voter_set_known())
    }

    // ----- transitions (QuorumState decides; this adds the side effects) -----

    fn refused(&mut self, err: TransitionError, out: &mut Vec<Output>) -> bool {
        out.push(Output::Fatal(format!(
            "node {}: refused transition: {err}",
            self.qs.local_id()
        )));
        self.stopped = true;
        false
    }

    pub(crate) fn emit_role(&mut self, out: &mut Vec<Output>) {
        out.push(Output::RoleChanged {
            role: self.qs.role(),
            epoch: self.qs.epoch(),
            leader_id: self.leader_hint(),
        });
        self.alert_on_high_epoch(out);
    }

    /// Tells the operator, once per start, that the epoch is where no real cluster gets to.
    fn alert_on_high_epoch(&mut self, out: &mut Vec<Output>) {
        let epoch = self.qs.epoch();
        if self.epoch_alerted || epoch < EPOCH_WARNING {
            return;
        }
        self.epoch_alerted = true;
        let left = i64::from(MAX_PEER_EPOCH) - i64::from(epoch);
        out.push(Output::Alert(format!(
            "epoch {epoch} is past {EPOCH_WARNING}: only {} elections are left before the \
             epoch limit {MAX_PEER_EPOCH}. No real cluster gets here; peers (or an old bug) pushed \
             it. See docs/operations.md, \"Recovering a node whose stored state is refused\".",
            left.max(0)
        )));
    }

    /// No candidacy is possible beyond the last epoch: say so and stay alive in the current
    /// role, reminding the operator once a minute, rather than stop (a restart would not help).
    fn epoch_exhausted(&mut self, err: TransitionError, out: &mut Vec<Output>) -> bool {
        out.push(Output::Alert(format!(
            "node {} cannot stand for election: {err}",
            self.qs.local_id()
        )));
        self.role_deadline = Some(self.now + EXHAUSTED_REMINDER_MS);
        false
    }

    /// Takes up the role a transition of the quorum state gave: the previous role ends
    /// (`resigned`: a leader stepped down) and the driver is told of the new one. False, the
    /// node stopped, when the quorum state refused the transition.
    fn take_up(
        &mut self,
        transition: Result<EpochState, TransitionError>,
        resigned: bool,
        out: &mut Vec<Output>,
    ) -> bool {
        match transition {
            Ok(old) => {
                self.leave_role(old, resigned, out);
                self.emit_role(out);
                true
            }
            Err(e) => self.refused(e, out),
        }
    }

    /// Ends the previous role (`old`, handed back by the transition): every parked fetch,
    /// pending read and client append of a leader is completed with an error (no purgatory
    /// leak), and no earlier request's answer matters.
    fn leave_role(&mut self, old: EpochState, resigned: bool, out: &mut Vec<Output>) {
        debug_assert!(
            old.epoch() <= self.qs.epoch(),
            "{old:?} after the transition"
        );
        debug_assert_eq!(
            resigned,
            matches!(old, EpochState::Leader { .. }) && self.qs.role() == Role::Resigned,
            "only a leader resigns, and only into Resigned"
        );
        self.outbound.clear();
        self.stand_when_due = false;
        self.fetch_as_observer = false;
        if let EpochState::Leader { leader: l, .. } = old {
            if let Some(hw) = l.high_watermark {
                self.local_hw = Some(self.local_hw.map_or(hw, |h| h.max(hw)));
            }
            let error = if resigned {
                ErrorCode::BROKER_NOT_AVAILABLE
            } else {
                ErrorCode::NOT_LEADER_OR_FOLLOWER
            };
            for p in &l.parked {
                self.answer_fetch_error(p.fetcher, error, out);
            }
            for fetcher in l.reads.values() {
                self.answer_fetch_error(*fetcher, error, out);
            }
            for a in &l.appends {
                self.fail_append(a.id, a.acks, ErrorCode::NOT_LEADER_OR_FOLLOWER, out);
            }
            for w in &l.alter_waits {
                self.respond_alter_quorum_error(w.id, ErrorCode::NOT_QUORUM_LEADER, None, out);
            }
        }
    }

    pub(crate) fn fail_append(
        &self,
        id: u64,
        acks: super::types::Acks,
        error: ErrorCode,
        out: &mut Vec<Output>,
    ) {
        if acks == super::types::Acks::None {
            return;
        }
        out.push(Output::AppendDone {
            id,
            result: AppendResult::Failed {
                error,
                leader_id: self.leader_hint(),
                leader_epoch: self.qs.epoch(),
            },
        });
    }

    /// Can this node's vote count: named by the set its log implies (a voter or one of the
    /// reassignment's target), under its own directory?
    pub(crate) fn may_vote(&self) -> bool {
        self.qs.named_by_set(self.qs.local_id()) && !self.qs.bound_elsewhere()
    }

    pub(crate) fn enter_unattached(&mut self, epoch: Epoch, out: &mut Vec<Output>) -> bool {
        let transition = self.qs.become_unattached(epoch, out);
        if !self.take_up(transition, false, out) {
            return false;
        }
        self.role_deadline = if self.qs.is_observer() || self.is_shutting_down() {
            None
        } else {
            Some(self.election_deadline())
        };
        true
    }

    pub(crate) fn enter_voted(&mut self, candidate: NodeId, out: &mut Vec<Output>) -> bool {
        let transition = self.qs.become_voted(candidate, out);
        if !self.take_up(transition, false, out) {
            return false;
        }
        self.role_deadline = if self.is_shutting_down() {
            None
        } else {
            Some(self.election_deadline())
        };
        true
    }

    /// Stands for election the way the configuration says: through a pre-vote round first
    /// (docs/protocol.md, "Pre-vote"), or at once as before pre-vote when it is off or this node
    /// is the only voter.
    pub(crate) fn campaign(&mut self, out: &mut Vec<Output>) -> bool {
        // A node its log no longer counts as a voter (removed, or its id bound to another
        // directory) never stands: it finds the leader through FindQuorum, as observers do.
        if self.qs.is_observer() {
            self.role_deadline = None;
            return false;
        }
        if !self.voter_set_known() {
            return self.sit_out_unknown_voter_set();
        }
        // A leaving voter gives the target's voters one election timeout first, but stands
        // after it: it may hold the only log they would all vote for.
        if self.leaving_voter() && !std::mem::take(&mut self.leaving_sat_out) {
            self.leaving_sat_out = true;
            self.role_deadline = Some(self.election_deadline());
            return false;
        }
        if !self.config.pre_vote || self.qs.majority() <= 1 {
            return self.enter_candidate(out);
        }
        let epoch = self.qs.epoch();
        if epoch >= MAX_PEER_EPOCH {
            // The round would ask for an epoch the others refuse (docs/protocol.md, "Hostile
            // input"), and win nothing.
            return self.epoch_exhausted(TransitionError::EpochExhausted { epoch }, out);
        }
        let transition = self.qs.become_prospective(out);
        if !self.take_up(transition, false, out) {
            return false;
        }
        self.start_pre_vote_round(out);
        true
    }

    /// A fresh pre-vote round in the current epoch: only its own pre-vote granted, pre-votes
    /// asked of every other voter, the election timeout as its limit.
    pub(crate) fn start_pre_vote_round(&mut self, out: &mut Vec<Output>) {
        let me = self.qs.local_id();
        *self
            .qs
            .prospective_mut()
            .expect("only a prospective asks for pre-votes") = CandidateState::voted_for_self(me);
        self.outbound.forget(|f| f.kind == RequestKind::PreVote);
        self.role_deadline = Some(self.election_deadline());
        for v in self.other_voters() {
            self.send_pre_vote(v, out);
        }
    }

    pub(crate) fn enter_candidate(&mut self, out: &mut Vec<Output>) -> bool {
        if !self.voter_set_known() {
            return self.sit_out_unknown_voter_set();
        }
        let old = match self.qs.become_candidate(out) {
            Ok(old) => old,
            Err(e @ TransitionError::EpochExhausted { .. }) => return self.epoch_exhausted(e, out),
            Err(e) => return self.refused(e, out),
        };
        self.leave_role(old, false, out);
        self.emit_role(out);
        self.enter_candidacy(out);
        true
    }

    /// Asks every other voter for its vote (or wins at once as a lone voter). The candidacy
    /// itself (its own vote granted) came with the transition.
    fn enter_candidacy(&mut self, out: &mut Vec<Output>) {
        debug_assert!(
            self.qs
                .candidate()
                .is_some_and(|c| c.granted.len() == 1 && !c.backing_off),
            "a fresh candidacy"
        );
        self.role_deadline = Some(self.election_deadline());
        if self.qs.majority() <= 1 {
            self.enter_leader(out);
            return;
        }
        for v in self.other_voters() {
            self.send_vote(v, out);
        }
    }

    /// The voters other than this node (a copy: the caller sends to them while mutating self).
    fn other_voters(&self) -> Vec<NodeId> {
        let local = self.qs.local_id();
        self.qs
            .voters()
            .iter()
            .copied()
            .filter(|v| *v != local)
            .collect()
    }

    pub(crate) fn enter_leader(&mut self, out: &mut Vec<Output>) -> bool {
        let start = self.log.end_offset();
        let old = match self.qs.become_leader(start, self.now, out) {
            Ok(old) => old,
            Err(e) => return self.refused(e, out),
        };
        let EpochState::Candidate { candidacy, .. } = &old else {
            unreachable!("only a candidate becomes leader, not {old:?}");
        };
        let granted: Vec<NodeId> = candidacy.granted.iter().copied().collect();
        self.leave_role(old, false, out);
        self.emit_role(out);
        let epoch = self.qs.epoch();
        // The record's timestamp is a wall-clock time, as Kafka's control records carry: a
        // ListOffsets by timestamp compares it with the producers' times (docs/clients.md). The
        // core's monotonic time when the driver gave no boot time (the simulator).
        let timestamp = self.wall_clock_ms().unwrap_or(self.now as i64);
        let bytes = super::record_glue::leader_change_batch(
            start,
            epoch,
            self.qs.local_id(),
            self.qs.voters(),
            &granted,
            timestamp,
        );
        let batch = super::types::Batch {
            base_offset: start,
            epoch,
            record_count: 1,
            is_control: true,
            bytes: bytes.freeze(),
        };
        self.log.append(vec![batch], out);
        debug_assert_eq!(
            self.log.last_epoch(),
            epoch,
            "the LeaderChange opens the epoch"
        );
        for v in self.other_voters() {
            self.send_begin_quorum_epoch(v, out);
        }
        self.role_deadline = if self.qs.voters().len() > 1 {
            Some(self.now + self.config.progress_timeout_ms)
        } else {
            None
        };
        true
    }

    pub(crate) fn enter_follower(
        &mut self,
        epoch: Epoch,
        leader: NodeId,
        out: &mut Vec<Output>,
    ) -> bool {
        let transition = self.qs.become_follower(epoch, leader, out);
        if !self.take_up(transition, false, out) {
            return false;
        }
        self.role_deadline = Some(self.now + self.config.fetch_timeout_ms);
        if self.is_shutting_down() {
            // Another leader is known: a graceful shutdown is complete.
            self.complete_shutdown(out);
        }
        true
    }

    /// Leader -> Resigned: parked replica fetches fail with BROKER_NOT_AVAILABLE (consumers'
    /// with NOT_LEADER_OR_FOLLOWER), appends fail, and
    /// EndQuorumEpoch goes to the other voters, most caught-up first.
    pub(crate) fn resign(&mut self, out: &mut Vec<Output>) -> bool {
        let transition = self.qs.become_resigned(out);
        if !self.take_up(transition, true, out) {
            return false;
        }
        let successors = self
            .qs
            .resigned()
            .expect("just resigned")
            .successors
            .clone();
        self.role_deadline = None;
        for v in successors {
            self.send_end_quorum_epoch(v, out);
        }
        true
    }

    /// Stops in the current role (kept as it is: nothing reads it once stopped). Never as
    /// leader: a leader resigns first (`on_shutdown`), and no node campaigns while it shuts down.
    pub(crate) fn complete_shutdown(&mut self, out: &mut Vec<Output>) {
        debug_assert!(
            self.qs.leader().is_none(),
            "a leader stops without resigning"
        );
        self.outbound.clear();
        out.push(Output::ShutdownComplete);
        self.stopped = true;
        self.shutdown_deadline = None;
        self.role_deadline = None;
    }

    fn on_shutdown(&mut self, out: &mut Vec<Output>) {
        if self.is_shutting_down() {
            return;
        }
        self.shutdown_deadline = Some(self.now + self.config.shutdown_timeout_ms);
        match self.qs.role() {
            Role::Leader if self.qs.voters().len() > 1 => {
                self.resign(out);
            }
            Role::Leader => {
                self.resign(out);
                self.complete_shutdown(out);
            }
            // Resigned already: keep waiting for the next leader.
            Role::Resigned => {}
            _ => self.complete_shutdown(out),
        }
    }

    // ----- failures and retries -----

    pub(crate) fn on_request_failure(
        &mut self,
        correlation: super::types::Correlation,
        f: super::requests::InFlight,
        out: &mut Vec<Output>,
    ) {
        if f.kind == RequestKind::Probe {
            // Nobody answered at the advertised endpoint: it is not used.
            self.endpoints.probe_done(correlation);
            return;
        }
        if f.epoch != self.qs.epoch() {
            return;
        }
        let retry = match f.kind {
            RequestKind::Vote => self
                .qs
                .candidate()
                .is_some_and(|c| c.awaits_vote(f.to))
                .then_some(Retry::Vote(f.to)),
            RequestKind::PreVote => self
                .qs
                .prospective()
                .is_some_and(|c| c.awaits_vote(f.to))
                .then_some(Retry::PreVote(f.to)),
            RequestKind::BeginQuorumEpoch => self
                .qs
                .leader()
                .is_some_and(|l| !l.endorsed.contains(&f.to))
                .then_some(Retry::BeginQuorumEpoch(f.to)),
            RequestKind::EndQuorumEpoch => self
                .qs
                .resigned()
                .is_some_and(|r| !r.acked.contains(&f.to))
                .then_some(Retry::EndQuorumEpoch(f.to)),
            RequestKind::Fetch {
                fetch_offset,
                last_fetched_epoch,
            } => {
                let current = fetch_offset == self.log.end_offset()
                    && last_fetched_epoch == self.log.last_epoch();
                if self.qs.fetching_from().is_none() || !current {
                    // Not following, or an answer to an older position that no longer matters.
                    None
                } else if self.qs.is_observer() {
                    // Observers rediscover the leader when it stops answering
                    // (docs/protocol.md section 9).
                    let epoch = self.qs.epoch();
                    self.enter_unattached(epoch, out);
                    None
                } else {
                    self.outbound
                        .forget(|g| matches!(g.kind, RequestKind::Fetch { .. }));
                    Some(Retry::Fetch)
                }
            }
            RequestKind::FindQuorum => Some(Retry::FindQuorum),
            RequestKind::Probe => unreachable!("handled above"),
        };
        if let Some(retry) = retry {
            self.outbound
                .schedule_retry(self.now, f.to, retry, &mut self.rng);
        }
    }

    fn run_retry(&mut self, retry: Retry, out: &mut Vec<Output>) {
        match retry {
            Retry::Vote(to) => {
                if self.qs.candidate().is_some_and(|c| c.awaits_vote(to)) {
                    self.send_vote(to, out);
                }
            }
            Retry::PreVote(to) => {
                if self.qs.prospective().is_some_and(|c| c.awaits_vote(to)) {
                    self.send_pre_vote(to, out);
                }
            }
            Retry::BeginQuorumEpoch(to) => {
                if self.qs.leader().is_some_and(|l| !l.endorsed.contains(&to)) {
                    self.send_begin_quorum_epoch(to, out);
                }
            }
            Retry::EndQuorumEpoch(to) => {
                if self.qs.resigned().is_some_and(|r| !r.acked.contains(&to)) {
                    self.send_end_quorum_epoch(to, out);
                }
            }
            // drive() sends the fetch / FindQuorum now that no retry is pending.
            Retry::Fetch | Retry::FindQuorum => {}
        }
    }
}
