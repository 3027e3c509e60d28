//! The simulated cluster: nodes (core + disk + quorum-state), network, client, fault schedule,
//! and the event loop that drives them in one deterministic order.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::raft::{
    bootstrap_server_index, Acks, AppendResult, Batch, Correlation, ElectionState, Epoch, Input,
    LogOp, LogOpKind, NodeId, Offset, Output, RaftConfig, RaftCore, Request, RequestId, Response,
    Role, TimeMs,
};

use super::batch::client_batch;
use super::disk::{self, SimDisk};
use super::invariants::{breach, Acked, Breach, Checked, Checker, Invariant};
use super::liar::{self, Draw, Lie, TargetView, LIAR_ID};
use super::rng::SimRng;
use super::trace::{Trace, TraceEntry};
use super::{SimConfig, Summary, Violation};

/// A message in flight.
#[derive(Clone, Debug)]
enum Message {
    Request {
        from: NodeId,
        from_incarnation: u32,
        to: NodeId,
        /// The id the sender used: `to`, or the bootstrap server pseudo id that led to `to`.
        addressed_as: NodeId,
        correlation: Correlation,
        request: Request,
    },
    Response {
        from: NodeId,
        to: NodeId,
        to_incarnation: u32,
        /// The id the requester addressed; its core matches the response by it.
        addressed_as: NodeId,
        correlation: Correlation,
        response: Response,
    },
}

#[derive(Clone, Debug)]
enum Event {
    Tick {
        node: usize,
        incarnation: u32,
    },
    Deliver(Box<Message>),
    Durable {
        node: usize,
        incarnation: u32,
        seq: u64,
    },
    ReadDone {
        node: usize,
        incarnation: u32,
        read_id: u64,
        from: Offset,
        max_bytes: usize,
    },
    RequestFailed {
        node: usize,
        incarnation: u32,
        to: NodeId,
        correlation: Correlation,
    },
    ClientDeliver {
        append_id: u64,
    },
    ClientTick,
    Chaos,
    Restart {
        node: usize,
    },
    /// Kill `node` if it still leads `epoch`.
    KillIfLeader {
        node: usize,
        epoch: Epoch,
    },
    PhaseChange,
    /// The liar's next message, if fault period `period` is still the current one.
    Lie {
        period: u64,
    },
}

struct Scheduled {
    time: TimeMs,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    // Reversed: BinaryHeap is a max-heap and the earliest (time, seq) must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// An inbound request waiting for the core's Respond.
struct PendingRequest {
    from: NodeId,
    from_incarnation: u32,
    addressed_as: NodeId,
    correlation: Correlation,
    /// (candidate, epoch) for Vote requests, to check that a granted vote was persisted.
    vote: Option<(NodeId, Epoch)>,
}

struct SimNode {
    id: NodeId,
    observer: bool,
    /// The nodes this observer's bootstrap servers are, when it starts without a voter set
    /// (`SimConfig::bootstrap_observers`); empty otherwise.
    bootstrap: Vec<NodeId>,
    core: Option<RaftCore>,
    incarnation: u32,
    disk: SimDisk,
    persisted: Option<ElectionState>,
    /// Persistent state was deleted once: epoch monotonicity no longer applies to this node.
    lost_state: bool,
    tick_at: Option<TimeMs>,
    pending: BTreeMap<RequestId, PendingRequest>,
    /// The role as told by the RoleChanged outputs carried out so far.
    role: Role,
    epoch: Epoch,
    /// Highest HW seen in this incarnation.
    max_hw: Option<Offset>,
    /// Log prefix already compared with the committed data (this incarnation).
    verified: Offset,
    shutdown_since: Option<TimeMs>,
    /// The disk's last scheduled completion (durability is reported in seq order).
    disk_busy_until: TimeMs,
    /// Until then every write is slow (an fsync stall).
    disk_slow_until: TimeMs,
}

impl SimNode {
    fn running(&self) -> bool {
        self.core.is_some()
    }
}

struct ClientAppend {
    node: usize,
    incarnation: u32,
    value: u64,
    batch: bytes::BytesMut,
    record_count: u32,
    acks: Acks,
    sent_at: TimeMs,
}

#[derive(Default)]
struct Client {
    next_value: u64,
    believed_leader: usize,
    in_flight: BTreeMap<u64, ClientAppend>,
    /// Appends already answered (a second answer breaks the exactly-once contract).
    answered: BTreeSet<u64>,
    /// Quorum-acknowledged appends, as (ack time, sent time, last offset).
    acks: Vec<(TimeMs, TimeMs, Offset)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Faults,
    Calm,
    /// The final calm: no more faults, liveness is being checked.
    Final {
        since: TimeMs,
    },
}

/// Network fault state.
#[derive(Default)]
struct Network {
    /// Directed links that drop everything: (from, to).
    blocked: BTreeSet<(NodeId, NodeId)>,
    loss: f64,
    duplicate: f64,
}

pub struct Simulation {
    cfg: SimConfig,
    rng: SimRng,
    now: TimeMs,
    queue: BinaryHeap<Scheduled>,
    next_seq: u64,
    nodes: Vec<SimNode>,
    net: Network,
    client: Client,
    checker: Checker,
    phase: Phase,
    next_request_id: RequestId,
    events: u64,
    elections: u64,
    trace: Trace,
    out: Vec<Output>,
    /// Probability that a step is cut short by a crash between two of its outputs.
    mid_step_crash: f64,
    liar: LiarState,
}

/// The liar's bookkeeping (its messages come from `liar.rs`).
#[derive(Default)]
struct LiarState {
    /// Fault periods started so far: a `Lie` event of an earlier one is stale.
    period: u64,
    /// The correlation ids of its requests (their responses are dropped anyway).
    next_correlation: Correlation,
    /// Requests and stray responses sent.
    messages: u64,
    /// Of its requests, those the nodes' admission checks refused.
    refused: u64,
}

/// The client keeps at most this many appends outstanding.
const CLIENT_MAX_IN_FLIGHT: usize = 3;
/// An append unanswered for this long is given up (its outcome stays unknown).
const CLIENT_TIMEOUT_MS: TimeMs = 4_000;
/// Liveness: acknowledged appends sent after the final calm began, required to pass.
const LIVENESS_ACKS: usize = 3;

/// The cluster id every node is configured with (and the liar knows).
const CLUSTER_ID: &str = "sim-cluster";

/// The cores' timeouts, scaled down from Kafka's defaults (same ratios) so a run of a few
/// thousand events sees many elections.
fn core_config(id: NodeId, voters: &[NodeId], seed: u64) -> RaftConfig {
    let mut c = RaftConfig::new(id, CLUSTER_ID, voters.to_vec());
    c.fetch_timeout_ms = 500;
    c.election_timeout_ms = 250;
    c.election_jitter_max_ms = 250;
    c.progress_timeout_ms = 750;
    c.request_timeout_ms = 500;
    c.retry_backoff_ms = 10;
    c.retry_backoff_max_ms = 250;
    c.fetch_max_wait_ms = 100;
    c.fetch_max_bytes = 16 << 10;
    c.tail_cache_bytes = 8 << 10;
    c.shutdown_timeout_ms = 1_500;
    c.seed = seed;
    c
}

impl Simulation {
    /// A cluster of `cfg.voters` voters (ids 0..V) and `cfg.observers` observers (V..V+O), all
    /// started with empty disks at time 0.
    pub fn new(cfg: SimConfig) -> Result<Self, Box<Violation>> {
        assert!(cfg.voters >= 1, "at least one voter");
        let mut sim = Self {
            rng: SimRng::new(cfg.seed),
            now: 0,
            queue: BinaryHeap::new(),
            next_seq: 0,
            nodes: Vec::new(),
            net: Network::default(),
            client: Client {
                next_value: 1,
                ..Client::default()
            },
            checker: Checker::default(),
            phase: Phase::Calm,
            next_request_id: 1,
            events: 0,
            elections: 0,
            trace: Trace::new(cfg.trace_len),
            out: Vec::new(),
            mid_step_crash: 0.0,
            liar: LiarState::default(),
            cfg,
        };
        sim.checker.outcome_only = sim.cfg.outcome_only;
        for i in 0..sim.cfg.voters + sim.cfg.observers {
            sim.nodes.push(SimNode {
                id: i as NodeId,
                observer: i >= sim.cfg.voters,
                bootstrap: Vec::new(),
                core: None,
                incarnation: 0,
                disk: SimDisk::default(),
                persisted: None,
                lost_state: false,
                tick_at: None,
                pending: BTreeMap::new(),
                role: Role::Unattached,
                epoch: 0,
                max_hw: None,
                verified: 0,
                shutdown_since: None,
                disk_busy_until: 0,
                disk_slow_until: 0,
            });
        }
        if sim.cfg.bootstrap_observers {
            for i in sim.cfg.voters..sim.nodes.len() {
                sim.nodes[i].bootstrap = sim.pick_bootstrap_servers(i);
            }
        }
        for i in 0..sim.nodes.len() {
            sim.start_node(i).map_err(|b| sim.violation(b))?;
        }
        if sim.cfg.client {
            sim.schedule(1, Event::ClientTick);
        }
        if sim.cfg.faults {
            sim.phase = Phase::Faults;
            let first = sim.rng.range(300, 3_000);
            sim.schedule(first, Event::PhaseChange);
            let chaos = sim.rng.range(50, 500);
            sim.schedule(chaos, Event::Chaos);
            sim.mid_step_crash = 0.0005;
            sim.start_lying();
        }
        Ok(sim)
    }

    fn voter_ids(&self) -> Vec<NodeId> {
        (0..self.cfg.voters as NodeId).collect()
    }

    /// An observer's bootstrap servers: one random voter, and (when there is one) a random
    /// other observer, in random order. The observer may be asked first and may know nothing
    /// yet; a chain of observers always ends at a voter, so every observer can learn.
    fn pick_bootstrap_servers(&mut self, i: usize) -> Vec<NodeId> {
        let voter = self.rng.index(self.cfg.voters) as NodeId;
        let others: Vec<NodeId> = (self.cfg.voters..self.nodes.len())
            .filter(|&o| o != i)
            .map(|o| o as NodeId)
            .collect();
        if others.is_empty() {
            return vec![voter];
        }
        let observer = others[self.rng.index(others.len())];
        if self.rng.chance(0.5) {
            vec![observer, voter]
        } else {
            vec![voter, observer]
        }
    }

    fn schedule(&mut self, delay: TimeMs, event: Event) {
        self.next_seq += 1;
        self.queue.push(Scheduled {
            time: self.now + delay,
            seq: self.next_seq,
            event,
        });
    }

    pub fn now(&self) -> TimeMs {
        self.now
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    pub fn violation(&self, b: Breach) -> Box<Violation> {
        Box::new(Violation {
            seed: self.cfg.seed,
            event_index: self.events,
            time_ms: self.now,
            invariant: b.invariant,
            detail: b.detail,
            trace: self.trace.render(),
            replay: self.cfg.replay_command(),
        })
    }

    // ---------------------------------------------------------------- node lifecycle

    fn start_node(&mut self, i: usize) -> Checked {
        let voters = self.voter_ids();
        let seed = self.rng.next_u64();
        let node = &mut self.nodes[i];
        assert!(node.core.is_none());
        let config = if node.bootstrap.is_empty() {
            core_config(node.id, &voters, seed)
        } else {
            let mut c = core_config(node.id, &[], seed);
            c.bootstrap_servers = node.bootstrap.len();
            c
        };
        let snapshot = node.disk.snapshot();
        let core = match RaftCore::new(config, node.persisted.clone(), snapshot, self.now) {
            Ok(core) => core,
            Err(e) => {
                return breach(Invariant::RestartFailed, format!("node {}: {e}", node.id));
            }
        };
        node.incarnation += 1;
        node.role = core.role();
        node.epoch = core.epoch();
        node.core = Some(core);
        node.tick_at = None;
        node.pending.clear();
        node.max_hw = None;
        node.verified = 0;
        node.shutdown_since = None;
        node.disk_busy_until = self.now;
        self.trace.push(TraceEntry::new(
            self.now,
            "start",
            node.id,
            i64::from(node.incarnation),
            0,
        ));
        self.step_node(i, Input::Tick { now: self.now })
    }

    /// Power loss: the node loses its memory and whatever its disk had not made durable.
    pub fn kill(&mut self, i: usize) {
        let tear = true;
        let node = &mut self.nodes[i];
        if node.core.take().is_none() {
            return;
        }
        node.disk.crash(&mut self.rng, tear);
        node.pending.clear();
        // The client's connection to the node broke: its appends there have unknown outcomes.
        self.client.in_flight.retain(|_, a| a.node != i);
        node.tick_at = None;
        node.shutdown_since = None;
        node.role = Role::Unattached;
        self.trace
            .push(TraceEntry::new(self.now, "kill", node.id, 0, 0));
    }

    /// Kill, then lose the quorum-state file and the log (Kafka's killAndDeletePersistentState;
    /// docs/simulation.md, "Invariants"). Turns off the rules that data loss can break.
    pub fn kill_and_delete_state(&mut self, i: usize) {
        self.kill(i);
        let node = &mut self.nodes[i];
        node.persisted = None;
        node.disk = SimDisk::default();
        node.lost_state = true;
        let id = node.id;
        if !node.observer {
            self.checker.forget_votes_of(id);
        }
        self.trace
            .push(TraceEntry::new(self.now, "delete-state", id, 0, 0));
    }

    pub fn restart(&mut self, i: usize) -> Result<(), Box<Violation>> {
        if self.nodes[i].running() {
            return Ok(());
        }
        self.start_node(i).map_err(|b| self.violation(b))
    }

    /// Graceful shutdown: the core resigns and answers ShutdownComplete.
    pub fn shutdown(&mut self, i: usize) -> Result<(), Box<Violation>> {
        if !self.nodes[i].running() {
            return Ok(());
        }
        self.shutdown_inner(i).map_err(|b| self.violation(b))
    }

    /// The node stopped after ShutdownComplete: a clean close writes everything back.
    fn stop_cleanly(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        node.core = None;
        node.disk.close();
        node.pending.clear();
        self.client.in_flight.retain(|_, a| a.node != i);
        node.tick_at = None;
        node.shutdown_since = None;
        node.role = Role::Unattached;
    }

    // ---------------------------------------------------------------- network control

    /// Symmetric partition: nodes in different groups cannot talk. Nodes in no group are
    /// isolated from everyone.
    pub fn partition(&mut self, groups: &[&[NodeId]]) {
        self.net.blocked.clear();
        let group_of = |n: NodeId| groups.iter().position(|g| g.contains(&n));
        let ids: Vec<NodeId> = self.nodes.iter().map(|n| n.id).collect();
        for &a in &ids {
            for &b in &ids {
                if a != b && (group_of(a).is_none() || group_of(a) != group_of(b)) {
                    self.net.blocked.insert((a, b));
                }
            }
        }
        self.trace.push(TraceEntry::new(
            self.now,
            "partition",
            -1,
            groups.len() as i64,
            0,
        ));
    }

    /// Everything `from` sends to `to` is dropped.
    pub fn block_one_way(&mut self, from: NodeId, to: NodeId) {
        self.net.blocked.insert((from, to));
        self.trace
            .push(TraceEntry::new(self.now, "one-way", from, i64::from(to), 0));
    }

    pub fn heal(&mut self) {
        self.net.blocked.clear();
        self.net.loss = 0.0;
        self.net.duplicate = 0.0;
        self.trace.push(TraceEntry::new(self.now, "heal", -1, 0, 0));
    }

    fn link_up(&self, from: NodeId, to: NodeId) -> bool {
        !self.net.blocked.contains(&(from, to))
    }

    fn send(&mut self, msg: Message) {
        let (from, to) = match &msg {
            Message::Request { from, to, .. } | Message::Response { from, to, .. } => (*from, *to),
        };
        if !self.link_up(from, to) || self.rng.chance(self.net.loss) {
            return;
        }
        let copies = if self.rng.chance(self.net.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let latency = self.network_latency();
            self.schedule(latency, Event::Deliver(Box::new(msg.clone())));
        }
    }

    /// Mostly 1-5 ms, sometimes much more: enough spread to reorder messages.
    fn network_latency(&mut self) -> TimeMs {
        let mut latency = self.rng.range(1, 5);
        if self.rng.chance(0.1) {
            latency += self.rng.range(5, 50);
        }
        if self.rng.chance(0.01) {
            latency += self.rng.range(100, 500);
        }
        latency
    }

    // ---------------------------------------------------------------- the event loop

    /// Handles the next event and checks the invariants. Ok(false) when nothing is left to do.
    pub fn step_event(&mut self) -> Result<bool, Box<Violation>> {
        let Some(next) = self.queue.pop() else {
            return Ok(false);
        };
        assert!(next.time >= self.now, "time never goes back");
        self.now = next.time;
        match self.handle(next.event) {
            Ok(()) => Ok(true),
            Err(b) => Err(self.violation(b)),
        }
    }

    fn handle(&mut self, event: Event) -> Checked {
        match event {
            Event::Tick { node, incarnation } => {
                let n = &self.nodes[node];
                if n.incarnation != incarnation || n.tick_at != Some(self.now) || !n.running() {
                    return Ok(()); // superseded
                }
                self.nodes[node].tick_at = None;
                self.count_event("tick", node as NodeId, 0, 0);
                self.step_node(node, Input::Tick { now: self.now })?;
                self.sweep(node)
            }
            Event::Deliver(msg) => self.deliver(*msg),
            Event::Durable {
                node,
                incarnation,
                seq,
            } => {
                let n = &mut self.nodes[node];
                if n.incarnation != incarnation || !n.running() {
                    return Ok(());
                }
                n.disk.make_durable(seq);
                self.count_event("durable", node as NodeId, seq as i64, 0);
                self.step_node(node, Input::LogDurable { up_to_seq: seq })?;
                self.sweep(node)
            }
            Event::ReadDone {
                node,
                incarnation,
                read_id,
                from,
                max_bytes,
            } => {
                let n = &self.nodes[node];
                if n.incarnation != incarnation || !n.running() {
                    return Ok(());
                }
                let batches = n.disk.read(from, max_bytes);
                self.count_event("read-done", node as NodeId, from, batches.len() as i64);
                self.step_node(node, Input::LogReadDone { read_id, batches })?;
                self.sweep(node)
            }
            Event::RequestFailed {
                node,
                incarnation,
                to,
                correlation,
            } => {
                let n = &self.nodes[node];
                if n.incarnation != incarnation || !n.running() {
                    return Ok(());
                }
                self.count_event("request-failed", node as NodeId, i64::from(to), 0);
                self.step_node(node, Input::RequestFailed { to, correlation })?;
                self.sweep(node)
            }
            Event::ClientDeliver { append_id } => self.client_deliver(append_id),
            Event::ClientTick => self.client_tick(),
            Event::Chaos => self.chaos(),
            Event::Restart { node } => {
                if self.nodes[node].running() {
                    return Ok(());
                }
                self.count_event("restart", node as NodeId, 0, 0);
                self.start_node(node)?;
                self.sweep(node)
            }
            Event::PhaseChange => self.phase_change(),
            Event::Lie { period } => self.lie_tick(period),
            Event::KillIfLeader { node, epoch } => {
                let leads = self.nodes[node]
                    .core
                    .as_ref()
                    .is_some_and(|c| c.role() == Role::Leader && c.epoch() == epoch);
                if leads && self.phase == Phase::Faults {
                    self.count_event("kill-new-leader", node as NodeId, i64::from(epoch), 0);
                    self.kill(node);
                    self.schedule_restart(node);
                }
                Ok(())
            }
        }
    }

    fn count_event(&mut self, kind: &'static str, node: NodeId, a: i64, b: i64) {
        self.events += 1;
        self.trace.push(TraceEntry::new(self.now, kind, node, a, b));
    }

    fn deliver(&mut self, msg: Message) -> Checked {
        match msg {
            Message::Request {
                from,
                from_incarnation,
                to,
                addressed_as,
                correlation,
                request,
            } => {
                let dest = to as usize;
                if !self.link_up(from, to) {
                    return Ok(());
                }
                if !self.nodes[dest].running() {
                    // Connection refused, sometimes noticed at once (the liar is not a node
                    // the simulation runs: nobody to tell).
                    if from != LIAR_ID && self.rng.chance(0.5) {
                        let delay = self.rng.range(1, 5);
                        self.schedule(
                            delay,
                            Event::RequestFailed {
                                node: from as usize,
                                incarnation: from_incarnation,
                                to: addressed_as,
                                correlation,
                            },
                        );
                    }
                    return Ok(());
                }
                let id = self.next_request_id;
                self.next_request_id += 1;
                let vote = match &request {
                    Request::Vote(v) => Some((v.candidate_id, v.candidate_epoch)),
                    _ => None,
                };
                self.nodes[dest].pending.insert(
                    id,
                    PendingRequest {
                        from,
                        from_incarnation,
                        addressed_as,
                        correlation,
                        vote,
                    },
                );
                self.count_event("request", to, i64::from(from), i64::from(request.api_key()));
                self.step_node(
                    dest,
                    Input::Request {
                        id,
                        from: Some(from),
                        request,
                    },
                )?;
                self.sweep(dest)
            }
            Message::Response {
                from,
                to,
                to_incarnation,
                addressed_as,
                correlation,
                response,
            } => {
                let dest = to as usize;
                let n = &self.nodes[dest];
                // A reply to an earlier incarnation must not reach the new one: its
                // correlation ids started over.
                if !self.link_up(from, to) || !n.running() || n.incarnation != to_incarnation {
                    return Ok(());
                }
                self.count_event(
                    "response",
                    to,
                    i64::from(from),
                    i64::from(response.api_key()),
                );
                self.step_node(
                    dest,
                    Input::Response {
                        from: addressed_as,
                        correlation,
                        response,
                    },
                )?;
                self.sweep(dest)
            }
        }
    }

    /// Steps node `i` and carries out its outputs in order, perhaps crashing between two of them.
    fn step_node(&mut self, i: usize, input: Input) -> Checked {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.nodes[i]
            .core
            .as_mut()
            .expect("only running nodes are stepped")
            .step(input, &mut out);
        let crash_at = if !out.is_empty() && self.rng.chance(self.mid_step_crash) {
            Some(self.rng.index(out.len()))
        } else {
            None
        };
        let mut result = Ok(());
        for (k, o) in out.drain(..).enumerate() {
            if crash_at == Some(k) {
                self.trace.push(TraceEntry::new(
                    self.now,
                    "mid-step-crash",
                    i as NodeId,
                    k as i64,
                    0,
                ));
                self.kill(i);
                self.schedule_restart(i);
                break;
            }
            result = self.carry_out(i, o);
            if result.is_err() || !self.nodes[i].running() {
                break;
            }
        }
        self.out = out;
        result?;
        self.schedule_tick(i);
        Ok(())
    }

    fn schedule_tick(&mut self, i: usize) {
        let node = &self.nodes[i];
        let Some(core) = node.core.as_ref() else {
            return;
        };
        let Some(deadline) = core.next_deadline() else {
            return;
        };
        let at = deadline.max(self.now + 1);
        if node.tick_at.is_some_and(|t| t <= at && t > self.now) {
            return; // an earlier tick is already due
        }
        let incarnation = node.incarnation;
        self.nodes[i].tick_at = Some(at);
        self.schedule(
            at - self.now,
            Event::Tick {
                node: i,
                incarnation,
            },
        );
    }

    fn schedule_restart(&mut self, i: usize) {
        if self.cfg.faults {
            let downtime = self.rng.range(50, 2_000);
            self.schedule(downtime, Event::Restart { node: i });
        }
    }

    fn carry_out(&mut self, i: usize, output: Output) -> Checked {
        let id = self.nodes[i].id;
        match output {
            Output::PersistElectionState(state) => {
                let node = &self.nodes[i];
                let epoch_rule = !node.lost_state;
                self.checker
                    .on_persist(id, node.persisted.as_ref(), &state, epoch_rule)?;
                self.trace.push(TraceEntry::new(
                    self.now,
                    "persist",
                    id,
                    i64::from(state.epoch),
                    (i64::from(state.leader_id) + 1) * 100_000 + i64::from(state.voted_id) + 1,
                ));
                self.nodes[i].persisted = Some(state);
                Ok(())
            }
            Output::Send {
                to: addressed_as,
                correlation,
                request,
            } => {
                let to = match bootstrap_server_index(addressed_as) {
                    Some(k) if matches!(request, Request::FindQuorum(_)) => {
                        self.nodes[i].bootstrap.get(k).copied().unwrap_or(-1)
                    }
                    Some(_) => -1,
                    None => addressed_as,
                };
                if to < 0 || to as usize >= self.nodes.len() || to == id {
                    return breach(
                        Invariant::ExactlyOnceContract,
                        format!("node {id} sends {request:?} to unknown node {addressed_as}"),
                    );
                }
                let from_incarnation = self.nodes[i].incarnation;
                self.send(Message::Request {
                    from: id,
                    from_incarnation,
                    to,
                    addressed_as,
                    correlation,
                    request,
                });
                Ok(())
            }
            Output::Respond { id: rid, response } => {
                let Some(p) = self.nodes[i].pending.remove(&rid) else {
                    return breach(
                        Invariant::ExactlyOnceContract,
                        format!("node {id} responds to unknown or answered request id {rid}"),
                    );
                };
                if let (Some((candidate, epoch)), Response::Vote(v)) = (p.vote, &response) {
                    if v.vote_granted {
                        self.checker.on_vote_granted(id, epoch, candidate)?;
                        self.trace.push(TraceEntry::new(
                            self.now,
                            "grant",
                            id,
                            i64::from(candidate),
                            i64::from(epoch),
                        ));
                    }
                }
                if p.from == LIAR_ID {
                    return Ok(()); // the liar's answers are dropped: it learns nothing
                }
                self.send(Message::Response {
                    from: id,
                    to: p.from,
                    to_incarnation: p.from_incarnation,
                    addressed_as: p.addressed_as,
                    correlation: p.correlation,
                    response,
                });
                Ok(())
            }
            Output::Log(op) => self.log_op(i, op),
            Output::ReadLog {
                read_id,
                from_offset,
                max_bytes,
            } => {
                let delay = self.rng.range(1, 5);
                let incarnation = self.nodes[i].incarnation;
                self.schedule(
                    delay,
                    Event::ReadDone {
                        node: i,
                        incarnation,
                        read_id,
                        from: from_offset,
                        max_bytes,
                    },
                );
                Ok(())
            }
            Output::HighWatermark(hw) => self.observe_hw(i, hw),
            Output::AppendDone { id: aid, result } => self.client_done(i, aid, result),
            Output::RoleChanged {
                role,
                epoch,
                leader_id,
            } => {
                let node = &mut self.nodes[i];
                node.role = role;
                node.epoch = epoch;
                if node.observer && !matches!(role, Role::Unattached | Role::Follower) {
                    return breach(
                        Invariant::ObserverRole,
                        format!("observer {id} became {role:?} in epoch {epoch}"),
                    );
                }
                if role == Role::Leader {
                    if leader_id != id {
                        return breach(
                            Invariant::SingleLeader,
                            format!("node {id} leader of epoch {epoch} names leader {leader_id}"),
                        );
                    }
                    self.persisted_leadership(i, epoch)?;
                    self.elections += 1;
                    self.trace.push(TraceEntry::new(
                        self.now,
                        "elected",
                        id,
                        i64::from(epoch),
                        0,
                    ));
                    let log = &self.nodes[i].disk.written;
                    self.checker.on_became_leader(id, epoch, log)?;
                    // A leader dying right after its election, before its LeaderChange record
                    // is everywhere: the window of the HW and completeness bugs (Figure 8).
                    if self.phase == Phase::Faults && self.rng.chance(0.25) {
                        let delay = self.rng.range(0, 30);
                        self.schedule(delay, Event::KillIfLeader { node: i, epoch });
                    }
                }
                Ok(())
            }
            Output::ShutdownComplete => {
                if self.nodes[i].shutdown_since.is_none() {
                    return breach(
                        Invariant::ExactlyOnceContract,
                        format!("node {id} completed a shutdown nobody asked for"),
                    );
                }
                self.trace
                    .push(TraceEntry::new(self.now, "stopped", id, 0, 0));
                self.stop_cleanly(i);
                self.schedule_restart(i);
                if matches!(self.phase, Phase::Final { .. }) {
                    self.schedule(1, Event::Restart { node: i });
                }
                Ok(())
            }
            // The simulated network routes by node id: an endpoint has nothing to change, and
            // no simulated node advertises one, so there is nothing to probe.
            Output::EndpointChanged(_) => Ok(()),
            Output::ProbeEndpoint {
                correlation,
                endpoint,
                ..
            } => {
                self.schedule(
                    1,
                    Event::RequestFailed {
                        node: i,
                        incarnation: self.nodes[i].incarnation,
                        to: endpoint.voter_id,
                        correlation,
                    },
                );
                Ok(())
            }
            // The liar's messages are refused as they should be; an honest node never sends
            // (or answers) what admission refuses, so refusing one of theirs is a breach.
            Output::Refused { peer, .. } if peer == Some(LIAR_ID) => {
                self.liar.refused += 1;
                Ok(())
            }
            Output::Refused { peer, reason, .. } => breach(
                Invariant::FatalOutput,
                format!("node {id} refused a message of {peer:?}: {reason}"),
            ),
            Output::Alert(_) => Ok(()),
            Output::Fatal(msg) => breach(Invariant::FatalOutput, format!("node {id}: {msg}")),
        }
    }

    fn persisted_leadership(&self, i: usize, epoch: Epoch) -> Checked {
        let node = &self.nodes[i];
        match &node.persisted {
            Some(s) if s.epoch == epoch && s.leader_id == node.id => Ok(()),
            other => breach(
                Invariant::LeadershipPersisted,
                format!(
                    "node {} acts as leader of epoch {epoch}; persisted state: {other:?}",
                    node.id
                ),
            ),
        }
    }

    fn log_op(&mut self, i: usize, op: LogOp) -> Checked {
        let id = self.nodes[i].id;
        match &op.kind {
            LogOpKind::Append(batches) => {
                let prev = self.nodes[i].disk.written.last();
                self.checker.on_append(id, prev, batches)?;
            }
            LogOpKind::TruncateTo(offset) => {
                self.checker
                    .on_truncate(id, *offset, self.nodes[i].max_hw)?;
                self.trace
                    .push(TraceEntry::new(self.now, "truncate", id, *offset, 0));
            }
        }
        let seq = op.seq;
        if let Err(e) = self.nodes[i].disk.apply(op) {
            return breach(Invariant::LogContract, format!("node {id}: {e}"));
        }
        // Durability in seq order: each op completes no earlier than the one before it.
        let mut latency = self.rng.range(1, 4);
        if self.rng.chance(0.05) {
            latency += self.rng.range(10, 40);
        }
        if self.now < self.nodes[i].disk_slow_until {
            latency += self.rng.range(50, 300);
        }
        let done = (self.now + latency).max(self.nodes[i].disk_busy_until);
        self.nodes[i].disk_busy_until = done;
        let incarnation = self.nodes[i].incarnation;
        self.schedule(
            done - self.now,
            Event::Durable {
                node: i,
                incarnation,
                seq,
            },
        );
        Ok(())
    }

    fn observe_hw(&mut self, i: usize, hw: Offset) -> Checked {
        let node = &self.nodes[i];
        if node.max_hw.is_some_and(|m| hw < m) {
            return breach(
                Invariant::MonotonicNodeHighWatermark,
                format!("node {} HW went from {:?} to {hw}", node.id, node.max_hw),
            );
        }
        if node.max_hw == Some(hw) {
            return Ok(());
        }
        let (id, epoch) = (node.id, node.epoch);
        if node.role == Role::Leader {
            self.trace.push(TraceEntry::new(
                self.now,
                "leader-hw",
                id,
                hw,
                i64::from(epoch),
            ));
            let node = &self.nodes[i];
            let voter_logs: Vec<&[Batch]> = self.nodes[..self.cfg.voters]
                .iter()
                .map(|n| n.disk.durable.as_slice())
                .collect();
            self.checker
                .on_leader_hw(id, epoch, hw, &node.disk.written, &voter_logs)?;
        }
        let node = &mut self.nodes[i];
        let mut verified = node.verified;
        let result = self
            .checker
            .on_node_hw(id, hw, &node.disk.written, &mut verified);
        node.verified = verified;
        node.max_hw = Some(hw);
        result
    }

    /// Checks after an event touched node `i`: the core's view against the driver's, epochs,
    /// the HW.
    fn sweep(&mut self, i: usize) -> Checked {
        let node = &self.nodes[i];
        let Some(core) = node.core.as_ref() else {
            return Ok(());
        };
        let id = node.id;
        let persisted_epoch = node.persisted.as_ref().map_or(0, |s| s.epoch);
        if core.epoch() != persisted_epoch {
            return breach(
                Invariant::MonotonicEpoch,
                format!(
                    "node {id} runs in epoch {} but persisted epoch {persisted_epoch}",
                    core.epoch()
                ),
            );
        }
        if core.role() == Role::Leader {
            self.persisted_leadership(i, core.epoch())?;
        }
        if node.observer && !matches!(core.role(), Role::Unattached | Role::Follower) {
            return breach(
                Invariant::ObserverRole,
                format!("observer {id} is {:?}", core.role()),
            );
        }
        let (leo, last_epoch) = (
            disk::end_offset(&node.disk.written),
            disk::last_epoch(&node.disk.written),
        );
        let durable_end = disk::end_offset(&node.disk.durable);
        if core.log_end_offset() != leo || core.last_epoch() != last_epoch {
            return breach(
                Invariant::CoreLogView,
                format!(
                    "node {id}: core says LEO {} last epoch {}, log has {leo} / {last_epoch}",
                    core.log_end_offset(),
                    core.last_epoch()
                ),
            );
        }
        if core.durable_end_offset() > durable_end.max(leo) {
            return breach(
                Invariant::CoreLogView,
                format!(
                    "node {id}: core says durable end {}, disk has {durable_end}",
                    core.durable_end_offset()
                ),
            );
        }
        if let Some(since) = node.shutdown_since {
            let limit = core_config(id, &[], 0).shutdown_timeout_ms + 1_000;
            if self.now > since + limit {
                return breach(
                    Invariant::ShutdownCompletes,
                    format!(
                        "node {id} still shutting down {} ms after asked",
                        self.now - since
                    ),
                );
            }
        }
        if let Some(hw) = core.high_watermark() {
            self.observe_hw(i, hw)?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- client

    fn client_tick(&mut self) -> Checked {
        let delay = self.rng.range(5, 40);
        self.schedule(delay, Event::ClientTick);
        // Give up on appends that went unanswered too long (their node probably crashed).
        let now = self.now;
        self.client
            .in_flight
            .retain(|_, a| now < a.sent_at + CLIENT_TIMEOUT_MS);
        if self.client.in_flight.len() >= CLIENT_MAX_IN_FLIGHT {
            return Ok(());
        }
        let value = self.client.next_value;
        self.client.next_value += 1;
        let record_count = self.rng.range(1, 3) as u32;
        let batch = client_batch(value, record_count, self.now as i64);
        self.checker.register_client_batch(&batch, value);
        let acks = if self.rng.chance(0.05) {
            Acks::Leader
        } else {
            Acks::Quorum
        };
        let node = self.client.believed_leader;
        let incarnation = self.nodes[node].incarnation;
        self.client.in_flight.insert(
            value,
            ClientAppend {
                node,
                incarnation,
                value,
                batch,
                record_count,
                acks,
                sent_at: self.now,
            },
        );
        let latency = self.rng.range(1, 3);
        self.schedule(latency, Event::ClientDeliver { append_id: value });
        Ok(())
    }

    fn client_deliver(&mut self, append_id: u64) -> Checked {
        let Some(a) = self.client.in_flight.get(&append_id) else {
            return Ok(());
        };
        let node = a.node;
        if !self.nodes[node].running() || self.nodes[node].incarnation != a.incarnation {
            self.client.in_flight.remove(&append_id);
            self.client_pick_other_node();
            return Ok(());
        }
        let input = Input::ClientAppend {
            id: append_id,
            batch: a.batch.clone(),
            record_count: a.record_count,
            acks: a.acks,
        };
        self.count_event("client-append", node as NodeId, append_id as i64, 0);
        self.step_node(node, input)?;
        self.sweep(node)
    }

    fn client_pick_other_node(&mut self) {
        self.client.believed_leader = self.rng.index(self.nodes.len());
    }

    fn client_done(&mut self, i: usize, append_id: u64, result: AppendResult) -> Checked {
        let id = self.nodes[i].id;
        if !self.client.answered.insert(append_id) {
            return breach(
                Invariant::ExactlyOnceContract,
                format!("node {id} answered append {append_id} twice"),
            );
        }
        let Some(a) = self.client.in_flight.remove(&append_id) else {
            return Ok(()); // the client gave up waiting
        };
        if a.node != i {
            return breach(
                Invariant::ExactlyOnceContract,
                format!(
                    "node {id} answered append {append_id} that was sent to node {}",
                    a.node
                ),
            );
        }
        match result {
            AppendResult::Appended {
                base_offset,
                last_offset,
            } => {
                if last_offset - base_offset + 1 != i64::from(a.record_count) {
                    return breach(
                        Invariant::AcknowledgedAppendKept,
                        format!("append {append_id} of {} records acknowledged at {base_offset}..={last_offset}", a.record_count),
                    );
                }
                let ack = Acked {
                    value: a.value,
                    base_offset,
                    last_offset,
                };
                let quorum = a.acks == Acks::Quorum;
                self.checker
                    .on_ack(id, ack, &self.nodes[i].disk.written, quorum)?;
                if quorum {
                    self.client.acks.push((self.now, a.sent_at, last_offset));
                }
            }
            AppendResult::Failed { leader_id, .. } => {
                if leader_id >= 0 && (leader_id as usize) < self.nodes.len() {
                    self.client.believed_leader = leader_id as usize;
                } else {
                    self.client_pick_other_node();
                }
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- faults

    fn phase_change(&mut self) -> Checked {
        match self.phase {
            Phase::Faults => {
                self.phase = Phase::Calm;
                self.calm_down();
                let calm = self.rng.range(200, 1_500);
                self.schedule(calm, Event::PhaseChange);
            }
            Phase::Calm => {
                self.phase = Phase::Faults;
                self.mid_step_crash = 0.0005;
                let faults = self.rng.range(300, 3_000);
                self.schedule(faults, Event::PhaseChange);
                let chaos = self.rng.range(10, 200);
                self.schedule(chaos, Event::Chaos);
                self.start_lying();
            }
            Phase::Final { .. } => {}
        }
        Ok(())
    }

    /// Stop injecting faults: heal the network and bring dead nodes back soon.
    fn calm_down(&mut self) {
        self.heal();
        for n in &mut self.nodes {
            n.disk_slow_until = 0;
        }
        self.mid_step_crash = 0.0;
        for i in 0..self.nodes.len() {
            if !self.nodes[i].running() {
                let delay = self.rng.range(1, 100);
                self.schedule(delay, Event::Restart { node: i });
            }
        }
    }

    fn chaos(&mut self) -> Checked {
        if self.phase != Phase::Faults {
            return Ok(());
        }
        let next = self.rng.range(50, 500);
        self.schedule(next, Event::Chaos);
        let n = self.nodes.len();
        let target = self.rng.index(n);
        let roll = self.rng.range(0, 99);
        self.count_event("chaos", target as NodeId, roll as i64, 0);
        match roll {
            0..=24 => {
                // Kill the leader more often than chance would: that is where bugs live.
                let victim = if self.rng.chance(0.5) {
                    self.current_leader().map_or(target, |(l, _)| l as usize)
                } else {
                    target
                };
                if self.nodes[victim].running() {
                    self.kill(victim);
                    self.schedule_restart(victim);
                }
            }
            25..=34 => {
                if self.nodes[target].running() {
                    self.shutdown_inner(target)?;
                }
            }
            35..=41 => {
                // Isolate the leader: it keeps taking appends it can never commit.
                let leader = self.current_leader().map_or(target as NodeId, |(l, _)| l);
                let rest: Vec<NodeId> = (0..n as NodeId).filter(|&x| x != leader).collect();
                self.partition(&[&[leader], &rest]);
            }
            42..=49 => {
                let ids: Vec<NodeId> = (0..n as NodeId).collect();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for id in ids {
                    if self.rng.chance(0.5) {
                        a.push(id);
                    } else {
                        b.push(id);
                    }
                }
                self.partition(&[&a, &b]);
            }
            50..=59 => {
                let to = self.rng.index(n) as NodeId;
                if to != target as NodeId {
                    self.block_one_way(target as NodeId, to);
                }
            }
            60..=71 => self.heal(),
            72..=79 => {
                // An fsync stall: the node's disk takes 50-300 ms per write for a while.
                let stall = self.rng.range(200, 2_000);
                self.nodes[target].disk_slow_until = self.now + stall;
                self.trace.push(TraceEntry::new(
                    self.now,
                    "slow-disk",
                    target as NodeId,
                    stall as i64,
                    0,
                ));
            }
            80..=89 => {
                self.net.loss = self.rng.float(0.0, 0.2);
                self.net.duplicate = self.rng.float(0.0, 0.05);
            }
            _ => {
                if self.cfg.delete_state && self.may_lose_state(target) {
                    self.kill_and_delete_state(target);
                    self.schedule_restart(target);
                }
            }
        }
        Ok(())
    }

    /// Random disk loss only hits observers. A voter that loses its disk can vote a second time in
    /// an epoch (docs/protocol.md section 15, item 4) and drop the only durable copy the leader
    /// counted (KAFKA-12181): this simulator found both (SingleLeader and LeaderCompleteness
    /// breaks) even when every other voter held the victim's whole log. Voter disk loss stays in
    /// the scripted scenario, under a stable leader.
    fn may_lose_state(&self, i: usize) -> bool {
        self.nodes[i].observer
    }

    fn shutdown_inner(&mut self, i: usize) -> Checked {
        if self.nodes[i].shutdown_since.is_some() {
            return Ok(());
        }
        self.nodes[i].shutdown_since = Some(self.now);
        self.trace
            .push(TraceEntry::new(self.now, "shutdown", i as NodeId, 0, 0));
        self.step_node(i, Input::Shutdown)?;
        self.sweep(i)
    }

    // ---------------------------------------------------------------- the liar

    /// A fault period began: the liar starts a new chain of messages (when enabled).
    fn start_lying(&mut self) {
        if !self.cfg.liar {
            return;
        }
        self.liar.period += 1;
        let first = self.rng.range(5, 100);
        let period = self.liar.period;
        self.schedule(first, Event::Lie { period });
    }

    /// One hostile message to a random live node, then the next one, while the fault period
    /// lasts (the chain ends in calm periods, the final calm included).
    fn lie_tick(&mut self, period: u64) -> Checked {
        if self.phase != Phase::Faults || period != self.liar.period {
            return Ok(());
        }
        let next = self.rng.range(5, 100);
        self.schedule(next, Event::Lie { period });
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].running())
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let target = live[self.rng.index(live.len())];
        let view = self.target_view(target).expect("a live node");
        let lie = liar::lie(&mut self.rng, &view);
        let msg = self.lie_message(target, lie);
        self.send(msg);
        Ok(())
    }

    /// What the liar knows of node `i` (None when it is down).
    pub fn target_view(&self, i: usize) -> Option<TargetView> {
        let node = &self.nodes[i];
        let core = node.core.as_ref()?;
        Some(TargetView {
            node: node.id,
            cluster_id: CLUSTER_ID.to_owned(),
            epoch: core.epoch(),
            last_epoch: core.last_epoch(),
            log_end: core.log_end_offset(),
            voters: core.voters().to_vec(),
            nodes: self.nodes.len(),
        })
    }

    /// The message that carries `lie` from the liar to node `i`.
    fn lie_message(&mut self, i: usize, lie: Lie) -> Message {
        self.liar.messages += 1;
        let node = &self.nodes[i];
        let (to, incarnation) = (node.id, node.incarnation);
        let kind = match &lie {
            Lie::Request(r) => i64::from(r.api_key()),
            Lie::Response { response, .. } => -i64::from(response.api_key()),
        };
        self.trace
            .push(TraceEntry::new(self.now, "lie", to, kind, 0));
        match lie {
            Lie::Request(request) => {
                self.liar.next_correlation += 1;
                Message::Request {
                    from: LIAR_ID,
                    from_incarnation: 0,
                    to,
                    addressed_as: to,
                    correlation: self.liar.next_correlation,
                    request,
                }
            }
            Lie::Response {
                from,
                correlation,
                response,
            } => Message::Response {
                from: LIAR_ID,
                to,
                to_incarnation: incarnation,
                addressed_as: from,
                correlation,
                response,
            },
        }
    }

    /// Delivers `lie` to node `i` now (no network delay or loss) and checks the invariants.
    /// Ok(false) when the node is down. For scripted hostile runs (fuzzing, property tests).
    pub fn inject(&mut self, i: usize, lie: Lie) -> Result<bool, Box<Violation>> {
        if !self.nodes[i].running() {
            return Ok(false);
        }
        let msg = self.lie_message(i, lie);
        self.deliver(msg).map_err(|b| self.violation(b))?;
        Ok(true)
    }

    /// Draws a lie for node `i` from `d` (a fuzzer's bytes, say) and injects it.
    pub fn inject_drawn(&mut self, i: usize, d: &mut impl Draw) -> Result<bool, Box<Violation>> {
        let Some(view) = self.target_view(i) else {
            return Ok(false);
        };
        let lie = liar::lie(d, &view);
        self.inject(i, lie)
    }

    /// Messages the liar sent so far (random and injected).
    pub fn liar_messages(&self) -> u64 {
        self.liar.messages
    }

    // ---------------------------------------------------------------- queries

    /// The running leader of the highest epoch, if any: (node, epoch).
    pub fn current_leader(&self) -> Option<(NodeId, Epoch)> {
        self.nodes
            .iter()
            .filter_map(|n| n.core.as_ref())
            .filter(|c| c.role() == Role::Leader)
            .map(|c| (c.node_id(), c.epoch()))
            .max_by_key(|&(_, e)| e)
    }

    pub fn is_running(&self, id: NodeId) -> bool {
        self.nodes[id as usize].running()
    }

    pub fn role(&self, id: NodeId) -> Option<Role> {
        self.nodes[id as usize].core.as_ref().map(RaftCore::role)
    }

    pub fn high_watermark(&self, id: NodeId) -> Option<Offset> {
        self.nodes[id as usize]
            .core
            .as_ref()
            .and_then(RaftCore::high_watermark)
    }

    /// The voter set a running node knows (empty while a bootstrap observer has not learned it).
    pub fn voters(&self, id: NodeId) -> Option<Vec<NodeId>> {
        self.nodes[id as usize]
            .core
            .as_ref()
            .map(|c| c.voters().to_vec())
    }

    pub fn epoch(&self, id: NodeId) -> Option<Epoch> {
        self.nodes[id as usize].core.as_ref().map(RaftCore::epoch)
    }

    pub fn acked(&self) -> usize {
        self.checker.acked.len()
    }

    pub fn committed_end(&self) -> Offset {
        self.checker.committed_end()
    }

    pub fn trace_hash(&self) -> u64 {
        self.trace.hash()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Handles events until `until` returns true (Ok(true)) or `ms` of simulated time pass
    /// (Ok(false)).
    pub fn run_until(
        &mut self,
        ms: TimeMs,
        mut until: impl FnMut(&Simulation) -> bool,
    ) -> Result<bool, Box<Violation>> {
        let deadline = self.now + ms;
        loop {
            if until(self) {
                return Ok(true);
            }
            if self.queue.peek().is_none_or(|s| s.time > deadline) {
                self.now = self.now.max(deadline);
                return Ok(until(self));
            }
            self.step_event()?;
        }
    }

    pub fn run_for(&mut self, ms: TimeMs) -> Result<(), Box<Violation>> {
        self.run_until(ms, |_| false).map(|_| ())
    }

    /// Liveness: a leader commits `LIVENESS_ACKS` appends sent after `since`, and every node
    /// reaches the HW that covers them.
    fn live_since(&self, since: TimeMs) -> bool {
        let fresh: Vec<Offset> = self
            .client
            .acks
            .iter()
            .filter(|&&(_, sent, _)| sent >= since)
            .map(|&(_, _, last)| last)
            .collect();
        if fresh.len() < LIVENESS_ACKS {
            return false;
        }
        let target = fresh[LIVENESS_ACKS - 1] + 1;
        self.nodes.iter().all(|n| {
            n.core
                .as_ref()
                .and_then(RaftCore::high_watermark)
                .is_some_and(|hw| hw >= target)
        })
    }

    /// Heals everything and checks that the cluster recovers: the final calm period.
    pub fn check_liveness(&mut self) -> Result<(), Box<Violation>> {
        let since = self.now;
        self.phase = Phase::Final { since };
        self.calm_down();
        // Nodes in a graceful shutdown finish it and are restarted (see ShutdownComplete).
        let ok = self.run_until(self.cfg.liveness_ms, |s| s.live_since(since))?;
        if ok {
            return Ok(());
        }
        let hws: Vec<Option<Offset>> = (0..self.nodes.len())
            .map(|i| self.high_watermark(i as NodeId))
            .collect();
        Err(self.violation(Breach {
            invariant: Invariant::Liveness,
            detail: format!(
                "{} ms after faults stopped: leader {:?}, {} fresh acks, HWs {hws:?}",
                self.cfg.liveness_ms,
                self.current_leader(),
                self.client.acks.iter().filter(|a| a.1 >= since).count()
            ),
        }))
    }

    /// Final validation: every acknowledged append is in the current leader's log.
    pub fn check_acknowledged(&self) -> Result<(), Box<Violation>> {
        if let Some((leader, _)) = self.current_leader() {
            let log = &self.nodes[leader as usize].disk.written;
            self.checker
                .check_acked_in(leader, log)
                .map_err(|b| self.violation(b))?;
        }
        Ok(())
    }

    /// The whole seeded run: `cfg.events` events with faults, then the final calm.
    pub fn run(mut self) -> Result<Summary, Box<Violation>> {
        while self.events < self.cfg.events {
            if !self.step_event()? {
                break;
            }
        }
        let fault_events = self.events;
        self.check_liveness()?;
        self.check_acknowledged()?;
        Ok(self.summary(fault_events))
    }

    /// What the run did so far; `fault_events` = events before the final calm.
    pub fn summary(&self, fault_events: u64) -> Summary {
        Summary {
            seed: self.cfg.seed,
            events: self.events,
            fault_events,
            elections: self.elections,
            commits: self.checker.acked.len() as u64,
            committed_offsets: self.checker.committed_end(),
            sim_time_ms: self.now,
            liar_messages: self.liar.messages,
            refused_lies: self.liar.refused,
            trace_hash: self.trace.hash(),
        }
    }
}
