//! A small driver for one core: builds it in a given state, feeds inputs, collects outputs.

use bytes::{Bytes, BytesMut};

use crate::raft::*;
use crate::record::RecordBatchBuilder;

pub(crate) const CLUSTER: &str = "test-cluster";

pub(crate) fn config(id: NodeId, voters: &[NodeId]) -> RaftConfig {
    let mut c = RaftConfig::new(id, CLUSTER, voters.to_vec());
    c.seed = 42;
    // The tests of other rules drive a leader without followers' echoes, and restart nodes
    // that then answer pre-votes at once: the lease has its own tests (`lease.rs`), which
    // turn it on (`with_lease`).
    c.lease = false;
    c
}

/// `config` with the leader lease on, as nodes run by default (docs/consistency.md).
pub(crate) fn with_lease(id: NodeId, voters: &[NodeId]) -> RaftConfig {
    RaftConfig {
        lease: true,
        ..config(id, voters)
    }
}

pub(crate) fn stored(
    epoch: Epoch,
    leader: NodeId,
    voted: NodeId,
    voters: &[NodeId],
) -> ElectionState {
    ElectionState {
        epoch,
        leader_id: leader,
        voted_id: voted,
        current_voters: voters.to_vec(),
        target_voters: None,
        target_force: false,
        applied_offset: 0,
        ..Default::default()
    }
}

/// A log with `end_offset` and epoch cache `epochs`.
pub(crate) fn log(end_offset: Offset, epochs: &[(Epoch, Offset)]) -> LogSnapshot {
    LogSnapshot {
        start_offset: 0,
        end_offset,
        epochs: epochs.to_vec(),
        voter_records: Vec::new(),
    }
}

/// A real RecordBatch v2 with `count` records (offsets and epoch not yet stamped).
pub(crate) fn client_batch(count: u32) -> BytesMut {
    let mut b = RecordBatchBuilder::new(0, 0);
    for i in 0..count {
        b.append(1_000, None, Some(format!("value-{i}").as_bytes()), &[]);
    }
    b.build()
}

pub(crate) fn batch(base_offset: Offset, epoch: Epoch, count: u32) -> Batch {
    let mut bytes = client_batch(count);
    crate::record::stamp(&mut bytes, base_offset, epoch);
    Batch {
        base_offset,
        epoch,
        record_count: count,
        is_control: false,
        bytes: Bytes::from(bytes),
    }
}

pub(crate) struct Harness {
    pub(crate) core: RaftCore,
    pub(crate) now: TimeMs,
    next_request: RequestId,
    /// Highest log op seq seen, for `durable_all`.
    pub(crate) last_seq: u64,
}

impl Harness {
    pub(crate) fn new(config: RaftConfig, stored: Option<ElectionState>, log: LogSnapshot) -> Self {
        let core = RaftCore::new(config, stored, log, 0).expect("core starts");
        Self {
            core,
            now: 0,
            next_request: 1,
            last_seq: 0,
        }
    }

    /// Node `id` with voters 1, 2 and 3 configured (an observer unless it is one of them), first
    /// start: no stored state, an empty log; not ticked yet.
    pub(crate) fn fresh(id: NodeId) -> Self {
        Self::new(config(id, &[1, 2, 3]), None, log(0, &[]))
    }

    /// Node 4, an observer of voters 1, 2 and 3 (`fresh`), ticked once and then sent `request`
    /// by node 2: the harness and its outputs.
    pub(crate) fn observer_asked(request: Request) -> (Self, Vec<Output>) {
        let mut h = Self::fresh(4);
        h.tick();
        let (_, out) = h.request(2, request);
        (h, out)
    }

    /// Node 1 of voters 1, 2 and 3 with an empty log, restarted from the stored `epoch`,
    /// `leader` and `voted` (-1: none); not ticked yet.
    pub(crate) fn restarted(epoch: Epoch, leader: NodeId, voted: NodeId) -> Self {
        Self::restarted_with(epoch, leader, voted, log(0, &[]))
    }

    /// As [`Harness::restarted`], after its first tick.
    pub(crate) fn restarted_and_ticked(epoch: Epoch, leader: NodeId, voted: NodeId) -> Self {
        let mut h = Self::restarted(epoch, leader, voted);
        h.tick();
        h
    }

    /// Node 1 of voters 1, 2 and 3 with `log`, restarted unattached in `epoch` (no leader, no
    /// vote) and ticked.
    pub(crate) fn unattached(epoch: Epoch, log: LogSnapshot) -> Self {
        let mut h = Self::restarted_with(epoch, -1, -1, log);
        h.tick();
        h
    }

    /// As [`Harness::restarted`], with `log` on its disk.
    pub(crate) fn restarted_with(
        epoch: Epoch,
        leader: NodeId,
        voted: NodeId,
        log: LogSnapshot,
    ) -> Self {
        let voters = [1, 2, 3];
        Self::new(
            config(1, &voters),
            Some(stored(epoch, leader, voted, &voters)),
            log,
        )
    }

    /// The draft's election, without pre-vote (`quorum.prevote.enable = false`): for the tests
    /// that time a candidacy as Kafka's suites do (pre-vote has its own, `pre_vote.rs`).
    pub(crate) fn without_pre_vote(mut self) -> Self {
        self.core.config.pre_vote = false;
        // The lease rests on pre-vote (docs/consistency.md): off with it.
        self.core.config.lease = false;
        self.core.restart_quiet_until = None;
        self
    }

    pub(crate) fn step(&mut self, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        self.core.step(input, &mut out);
        for o in &out {
            if let Output::Log(op) = o {
                assert!(op.seq > self.last_seq, "log op seqs must increase");
                self.last_seq = op.seq;
            }
        }
        out
    }

    pub(crate) fn tick(&mut self) -> Vec<Output> {
        let now = self.now;
        self.step(Input::Tick { now })
    }

    /// Ticks at every deadline until `until` (inclusive), collecting everything.
    pub(crate) fn run_until(&mut self, until: TimeMs) -> Vec<Output> {
        let mut all = Vec::new();
        // Bounded: a deadline that its own tick does not clear (a parked fetch never expired)
        // fails the test that meets it instead of hanging the suite.
        let mut ticks_at_present = 0;
        loop {
            match self.core.next_deadline() {
                Some(d) if d <= until => {
                    ticks_at_present = if d <= self.now {
                        ticks_at_present + 1
                    } else {
                        0
                    };
                    assert!(
                        ticks_at_present <= 100,
                        "the core asks again and again for a tick at {d} (now {}): a deadline \
                         its tick does not clear",
                        self.now
                    );
                    self.now = self.now.max(d);
                    all.extend(self.tick());
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
        all.extend(self.tick());
        all
    }

    pub(crate) fn request(&mut self, from: NodeId, request: Request) -> (RequestId, Vec<Output>) {
        let id = self.next_request;
        self.next_request += 1;
        let out = self.step(Input::Request {
            id,
            from: Sender::Replica(from),
            request,
        });
        (id, out)
    }

    /// `candidate` asks for this node's vote in `epoch`, its log ending at `leo` in
    /// `last_epoch`: the answer, and the outputs.
    pub(crate) fn ask_vote(
        &mut self,
        candidate: NodeId,
        epoch: Epoch,
        last_epoch: Epoch,
        leo: Offset,
    ) -> (VoteResponse, Vec<Output>) {
        let request = Self::vote_request(candidate, epoch, last_epoch, leo);
        let (_, out) = self.request(candidate, request);
        (vote_answer(&out), out)
    }

    pub(crate) fn durable_all(&mut self) -> Vec<Output> {
        let up_to_seq = self.last_seq;
        self.step(Input::LogDurable { up_to_seq })
    }

    pub(crate) fn respond(
        &mut self,
        from: NodeId,
        correlation: Correlation,
        response: Response,
    ) -> Vec<Output> {
        self.step(Input::Response {
            from,
            correlation,
            response,
        })
    }

    /// Answers the FindQuorum `correlation` sent to `to` with `leader` leading `epoch` (and no
    /// endpoints), and checks that this node follows it then.
    pub(crate) fn follow_found_leader(
        &mut self,
        to: NodeId,
        correlation: Correlation,
        leader: NodeId,
        epoch: Epoch,
    ) -> Vec<Output> {
        let response = Self::find_quorum_response(CLUSTER, leader, epoch, Vec::new());
        let out = self.respond(to, correlation, response);
        assert_eq!(
            (self.core.role(), self.core.leader_id()),
            (Role::Follower, Some(leader))
        );
        out
    }

    /// A client append of `count` records (a `client_batch`) with `acks`.
    pub(crate) fn append(&mut self, id: u64, count: u32, acks: Acks) -> Vec<Output> {
        self.step(Input::ClientAppend {
            id,
            batch: client_batch(count),
            record_count: count,
            acks,
        })
    }

    /// Answers every endpoint probe in `out` as the probed voter itself would: vouching for
    /// exactly the advertised endpoint.
    pub(crate) fn vouch_all(&mut self, out: &[Output]) -> Vec<Output> {
        let mut all = Vec::new();
        for (correlation, endpoint) in probes(out) {
            let answer = Harness::find_quorum_response(CLUSTER, -1, 0, vec![endpoint.clone()]);
            all.extend(self.respond(endpoint.voter_id, correlation, answer));
        }
        all
    }

    // ----- request builders -----

    pub(crate) fn vote_request(
        candidate: NodeId,
        epoch: Epoch,
        last_epoch: Epoch,
        leo: Offset,
    ) -> Request {
        Request::Vote(VoteRequest {
            cluster_id: CLUSTER.into(),
            candidate_epoch: epoch,
            candidate_id: candidate,
            last_epoch,
            last_epoch_end_offset: leo,
            pre_vote: false,
            ..Default::default()
        })
    }

    /// A pre-vote (Vote v1, PreVote set) from `candidate`, at its epoch + 1 = `epoch`.
    pub(crate) fn pre_vote_request(
        candidate: NodeId,
        epoch: Epoch,
        last_epoch: Epoch,
        leo: Offset,
    ) -> Request {
        match Self::vote_request(candidate, epoch, last_epoch, leo) {
            Request::Vote(v) => Request::Vote(VoteRequest {
                pre_vote: true,
                ..v
            }),
            _ => unreachable!(),
        }
    }

    /// A FindQuorum of this cluster advertising 127.0.0.1:`port`.
    pub(crate) fn find_quorum_request(replica: NodeId, boot_timestamp: i64, port: i32) -> Request {
        Request::FindQuorum(FindQuorumRequest {
            cluster_id: CLUSTER.into(),
            replica_id: replica,
            boot_timestamp,
            host: "127.0.0.1".into(),
            port,
        })
    }

    pub(crate) fn begin_request(leader: NodeId, epoch: Epoch) -> Request {
        Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
            cluster_id: CLUSTER.into(),
            leader_id: leader,
            leader_epoch: epoch,
        })
    }

    pub(crate) fn end_request(leader: NodeId, epoch: Epoch, successors: &[NodeId]) -> Request {
        Request::EndQuorumEpoch(EndQuorumEpochRequest {
            cluster_id: CLUSTER.into(),
            replica_id: leader,
            leader_id: leader,
            leader_epoch: epoch,
            preferred_successors: successors.to_vec(),
        })
    }

    pub(crate) fn fetch_request(
        replica: NodeId,
        epoch: Epoch,
        offset: Offset,
        last_epoch: Epoch,
        durable: Offset,
    ) -> Request {
        Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
            cluster_id: CLUSTER.into(),
            replica_id: replica,
            leader_epoch: epoch,
            fetch_offset: offset,
            last_fetched_epoch: last_epoch,
            is_follower: true,
            max_wait_ms: 500,
            durable_offset: durable,
            replica_directory_id: Default::default(),
            lease_echo: None,
        })
    }

    pub(crate) fn vote_response(
        error: ErrorCode,
        leader: NodeId,
        epoch: Epoch,
        granted: bool,
    ) -> Response {
        Response::Vote(VoteResponse {
            error,
            leader_id: leader,
            leader_epoch: epoch,
            vote_granted: granted,
        })
    }

    /// A FindQuorum answer of `cluster` naming `leader` of `epoch` and listing `voters`, with no
    /// reassignment in progress.
    pub(crate) fn find_quorum_response(
        cluster: &str,
        leader: NodeId,
        epoch: Epoch,
        voters: Vec<VoterEndpoint>,
    ) -> Response {
        Response::FindQuorum(FindQuorumResponse {
            error: ErrorCode::NONE,
            cluster_id: cluster.into(),
            leader_id: leader,
            leader_epoch: epoch,
            voters,
            target_voters: None,
        })
    }

    /// A FetchQuorumRecords answer from `leader` of `epoch` refusing with `error`: no batches,
    /// high watermark `hw`.
    pub(crate) fn fetch_error_response(
        leader: NodeId,
        epoch: Epoch,
        hw: Offset,
        error: ErrorCode,
    ) -> FetchQuorumRecordsResponse {
        FetchQuorumRecordsResponse {
            error,
            ..Self::fetch_response(leader, epoch, Vec::new(), hw)
        }
    }

    pub(crate) fn fetch_response(
        leader: NodeId,
        epoch: Epoch,
        batches: Vec<Batch>,
        hw: Offset,
    ) -> FetchQuorumRecordsResponse {
        FetchQuorumRecordsResponse {
            error: ErrorCode::NONE,
            leader_id: leader,
            leader_epoch: epoch,
            next_fetch_offset: -1,
            next_fetch_offset_epoch: -1,
            batches,
            high_watermark: hw,
            first_dirty_offset: -1,
            last_caught_up_time_ms: -1,
            log_start: None,
            producer_state: None,
            lease_stamp: None,
        }
    }

    // ----- state builders -----

    /// A leader of `epoch` among `voters` (elected from a stored self-vote; its LeaderChange
    /// record appended but not yet durable).
    pub(crate) fn leader(id: NodeId, voters: &[NodeId], epoch: Epoch, log: LogSnapshot) -> Self {
        Harness::new(config(id, voters), Some(stored(epoch, -1, id, voters)), log).elected(epoch)
    }

    /// This harness's node, a candidate of `epoch` once ticked, elected by the votes of the
    /// others (as many as it takes).
    pub(crate) fn elected(mut self, epoch: Epoch) -> Self {
        let out = self.tick();
        for (to, correlation, _) in sends(&out) {
            self.respond(
                to,
                correlation,
                Self::vote_response(ErrorCode::NONE, -1, epoch, true),
            );
            if self.core.role() == Role::Leader {
                break;
            }
        }
        assert_eq!(self.core.role(), Role::Leader);
        self
    }

    /// A follower of `leader` in `epoch` that has sent its first fetch.
    pub(crate) fn follower(
        id: NodeId,
        voters: &[NodeId],
        epoch: Epoch,
        leader: NodeId,
        log: LogSnapshot,
    ) -> (Self, Correlation) {
        let mut h = Harness::new(
            config(id, voters),
            Some(stored(epoch, leader, -1, voters)),
            log,
        );
        let out = h.tick();
        let fetch = sends(&out);
        assert_eq!(fetch.len(), 1);
        (h, fetch[0].1)
    }
}

// ----- output inspection -----

/// The outputs in `out` that `pattern` matches, each as `value` of the pattern's bindings.
macro_rules! outputs_matching {
    ($out:expr, $pattern:pat => $value:expr) => {
        $out.iter()
            .filter_map(|o| match o {
                $pattern => Some($value),
                _ => None,
            })
            .collect()
    };
}

pub(crate) fn sends(out: &[Output]) -> Vec<(NodeId, Correlation, Request)> {
    outputs_matching!(
        out,
        Output::Send { to, correlation, request } => (*to, *correlation, request.clone())
    )
}

/// The FetchQuorumRecords requests among the sends of `out`.
pub(crate) fn fetch_sends(out: &[Output]) -> Vec<(NodeId, Correlation, FetchQuorumRecordsRequest)> {
    sends(out)
        .into_iter()
        .filter_map(|s| match s.2 {
            Request::FetchQuorumRecords(r) => Some((s.0, s.1, r)),
            _ => None,
        })
        .collect()
}

/// The sends in `out` whose request `is_kind` picks: (to, correlation).
pub(crate) fn sends_of(
    out: &[Output],
    is_kind: impl Fn(&Request) -> bool,
) -> Vec<(NodeId, Correlation)> {
    sends(out)
        .into_iter()
        .filter(|s| is_kind(&s.2))
        .map(|s| (s.0, s.1))
        .collect()
}

/// Whom the sends in `out` whose request `is_kind` picks go to.
pub(crate) fn recipients(out: &[Output], is_kind: impl Fn(&Request) -> bool) -> Vec<NodeId> {
    sends_of(out, is_kind).into_iter().map(|s| s.0).collect()
}

/// The FindQuorum requests in `out`: (to, correlation).
pub(crate) fn find_sends(out: &[Output]) -> Vec<(NodeId, Correlation)> {
    sends_of(out, |r| matches!(r, Request::FindQuorum(_)))
}

/// The endpoint probes in `out`: (correlation, the advertised endpoint).
pub(crate) fn probes(out: &[Output]) -> Vec<(Correlation, VoterEndpoint)> {
    outputs_matching!(
        out,
        Output::ProbeEndpoint {
            correlation,
            endpoint,
            request: Request::FindQuorum(_),
        } => (*correlation, endpoint.clone())
    )
}

pub(crate) fn responses(out: &[Output]) -> Vec<(RequestId, Response)> {
    outputs_matching!(out, Output::Respond { id, response } => (*id, response.clone()))
}

pub(crate) fn persisted(out: &[Output]) -> Vec<ElectionState> {
    outputs_matching!(out, Output::PersistElectionState(s) => s.clone())
}

pub(crate) fn log_ops(out: &[Output]) -> Vec<LogOpKind> {
    outputs_matching!(out, Output::Log(op) => op.kind.clone())
}

pub(crate) fn appends_done(out: &[Output]) -> Vec<(u64, AppendResult)> {
    outputs_matching!(out, Output::AppendDone { id, result } => (*id, result.clone()))
}

/// The append `done` answers and its error, when `done` is exactly one refusal (None for
/// anything else): the refusal tests check which append failed and why, whatever leader hint it
/// carries.
pub(crate) fn append_refusal(done: &[(u64, AppendResult)]) -> Option<(u64, ErrorCode)> {
    match done {
        [(id, AppendResult::Failed { error, .. })] => Some((*id, *error)),
        _ => None,
    }
}

pub(crate) fn hw_outputs(out: &[Output]) -> Vec<Offset> {
    outputs_matching!(out, Output::HighWatermark(h) => *h)
}

/// The endpoints the driver is told changed, in order.
pub(crate) fn endpoint_changes(out: &[Output]) -> Vec<VoterEndpoint> {
    outputs_matching!(out, Output::EndpointChanged(e) => e.clone())
}

pub(crate) fn alerts(out: &[Output]) -> Vec<String> {
    outputs_matching!(out, Output::Alert(a) => a.clone())
}

pub(crate) fn has_fatal(out: &[Output]) -> bool {
    out.iter().any(|o| matches!(o, Output::Fatal(_)))
}

/// Index of the first output matching `pred`.
pub(crate) fn position(out: &[Output], pred: impl Fn(&Output) -> bool) -> Option<usize> {
    out.iter().position(pred)
}

pub(crate) fn is_persist(o: &Output) -> bool {
    matches!(o, Output::PersistElectionState(_))
}

pub(crate) fn is_respond(o: &Output) -> bool {
    matches!(o, Output::Respond { .. })
}

pub(crate) fn vote_of(r: &Response) -> &VoteResponse {
    match r {
        Response::Vote(v) => v,
        other => panic!("expected a Vote response, got {other:?}"),
    }
}

/// Node 1 campaigns in `out`: it is in `epoch`, its vote for itself persisted, and it asks the
/// two other voters.
#[track_caller]
pub(crate) fn assert_own_candidacy(h: &Harness, out: &[Output], epoch: Epoch) {
    assert_eq!(h.core.epoch(), epoch);
    assert_eq!(persisted(out)[0].voted_id, 1);
    assert_eq!(sends(out).len(), 2);
}

/// The first answer in `out`, a Vote answer.
pub(crate) fn vote_answer(out: &[Output]) -> VoteResponse {
    vote_of(&responses(out)[0].1).clone()
}

pub(crate) fn fetch_of(r: &Response) -> &FetchQuorumRecordsResponse {
    match r {
        Response::FetchQuorumRecords(v) => v,
        other => panic!("expected a fetch response, got {other:?}"),
    }
}

/// A fetch answer's (next fetch offset and epoch, high watermark, first dirty offset, last
/// caught-up time): all -1 where the answer carries no position.
pub(crate) fn fetch_positions(
    r: &FetchQuorumRecordsResponse,
) -> (Offset, Epoch, Offset, Offset, i64) {
    (
        r.next_fetch_offset,
        r.next_fetch_offset_epoch,
        r.high_watermark,
        r.first_dirty_offset,
        r.last_caught_up_time_ms,
    )
}

pub(crate) fn fetch_req(r: &Request) -> &FetchQuorumRecordsRequest {
    match r {
        Request::FetchQuorumRecords(v) => v,
        other => panic!("expected a fetch request, got {other:?}"),
    }
}
