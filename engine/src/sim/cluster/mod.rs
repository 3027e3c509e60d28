//! The simulated cluster: nodes (core + disk + quorum-state), network, client, fault schedule,
//! and the event loop that drives them in one deterministic order.

mod clients;
mod committer;
mod consumers;
mod faults;
mod lies;
mod liveness;
mod network;
mod nodes;
mod outputs;
mod producers;
mod reassigner;
mod retention;
mod scheduler;
mod snapshots;
mod voter_checks;

use std::collections::{BTreeMap, BinaryHeap};

use crate::raft::{Epoch, Input, NodeId, Offset, RaftConfig, RaftCore, RequestId, Role, TimeMs};

use super::disk::SimDisk;
use super::invariants::{Breach, Checked, Checker, Invariant};
use super::rng::SimRng;
use super::trace::{Trace, TraceEntry};
use super::{SimConfig, Summary, Violation};
use clients::Client;
use consumers::Consumers;
use faults::Phase;
use lies::LiarState;
use network::Network;
use nodes::SimNode;
use producers::Producers;
use reassigner::Reassigner;
use scheduler::{Event, Scheduled};

pub struct Simulation {
    cfg: SimConfig,
    rng: SimRng,
    now: TimeMs,
    queue: BinaryHeap<Scheduled>,
    next_seq: u64,
    nodes: Vec<SimNode>,
    net: Network,
    client: Client,
    producers: Producers,
    committer: committer::Committer,
    /// Retries the replicas recognised as duplicates, over the replicas that stopped so far
    /// (the running ones count theirs in [`Simulation::summary`]).
    duplicates_suppressed: u64,
    /// Crashes that found log operations not yet durable: the disk tore or lost them.
    torn_tails: u64,
    consumers: Consumers,
    checker: Checker,
    phase: Phase,
    next_request_id: RequestId,
    events: u64,
    elections: u64,
    /// Voters whose disk was lost (docs/protocol.md, "Voter identity").
    voter_disks_lost: u64,
    /// Log starts moved by retention, and logs reset to a leader's log start.
    retentions: u64,
    producer_snapshots: u64,
    resets: u64,
    /// `refresh_fetches`: events handled, and RefreshFetch steps to a node that was following.
    handled: u64,
    refreshes: u64,
    trace: Trace,
    out: Vec<crate::replica::Output>,
    /// Probability that a step is cut short by a crash between two of its outputs.
    mid_step_crash: f64,
    liar: LiarState,
    /// Log reads in flight per (node, incarnation), and the most one node had at once.
    reads_in_flight: BTreeMap<(usize, u32), usize>,
    max_concurrent_reads: usize,
    /// Elections won and epochs raised from the start of the final calm until the cluster was
    /// live again (set when it was).
    final_elections: (u64, Epoch),
    reassign: Reassigner,
}

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
    // Two nodes in three pace their observers when they lead (docs/protocol.md, "Observer
    // fetch pacing"); the third answers them at once, as it does voters.
    c.observer_fetch_interval_ms = [0, 5, 20][(seed % 3) as usize];
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
            producers: Producers::default(),
            committer: committer::Committer::default(),
            duplicates_suppressed: 0,
            torn_tails: 0,
            consumers: Consumers::default(),
            checker: Checker::default(),
            phase: Phase::Calm,
            next_request_id: 1,
            events: 0,
            elections: 0,
            voter_disks_lost: 0,
            retentions: 0,
            producer_snapshots: 0,
            resets: 0,
            handled: 0,
            refreshes: 0,
            trace: Trace::new(cfg.trace_len),
            out: Vec::new(),
            mid_step_crash: 0.0,
            liar: LiarState::default(),
            reads_in_flight: BTreeMap::new(),
            max_concurrent_reads: 0,
            final_elections: (0, 0),
            reassign: Reassigner::default(),
            cfg,
        };
        sim.checker.outcome_only = sim.cfg.outcome_only;
        for i in 0..sim.cfg.voters + sim.cfg.observers {
            sim.nodes.push(SimNode {
                id: i as NodeId,
                observer: i >= sim.cfg.voters,
                bootstrap: Vec::new(),
                replica: None,
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
                persists: 0,
                ticked_at: 0,
                step_voters: Vec::new(),
                directory: nodes::sim_directory(sim.cfg.seed, i as NodeId, 0),
                lost_durable: Vec::new(),
                configured_voters: None,
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
        sim.start_consumers();
        sim.start_producers();
        sim.start_committer();
        if sim.cfg.faults {
            sim.phase = Phase::Faults;
            let first = sim.rng.range(300, 3_000);
            sim.schedule(first, Event::PhaseChange);
            let chaos = sim.rng.range(50, 500);
            sim.schedule(chaos, Event::Chaos);
            sim.mid_step_crash = 0.0005;
            sim.start_lying();
        }
        if sim.cfg.reassign {
            sim.start_reassigner();
        }
        Ok(sim)
    }

    pub(super) fn voter_ids(&self) -> Vec<NodeId> {
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

    /// Handles the next event and checks the invariants. Ok(false) when nothing is left to do.
    pub fn step_event(&mut self) -> Result<bool, Box<Violation>> {
        let Some(next) = self.queue.pop() else {
            return Ok(false);
        };
        assert!(next.time >= self.now, "time never goes back");
        self.now = next.time;
        match self
            .handle(next.event)
            .and_then(|()| self.refresh_some_fetch())
        {
            Ok(()) => Ok(true),
            Err(b) => Err(self.violation(b)),
        }
    }

    /// With `refresh_fetches`: after every fourth event, one node in turn steps
    /// `Input::RefreshFetch`, as a node that wants producer ids does (no draw: the faults'
    /// random stream is the same as without).
    fn refresh_some_fetch(&mut self) -> Checked {
        if !self.cfg.refresh_fetches {
            return Ok(());
        }
        self.handled += 1;
        if !self.handled.is_multiple_of(4) {
            return Ok(());
        }
        let node = (self.handled / 4) as usize % self.nodes.len();
        let Some(core) = self.nodes[node].core() else {
            return Ok(()); // not running
        };
        if core.role() == Role::Follower {
            self.refreshes += 1;
        }
        self.step_node(node, Input::RefreshFetch)?;
        self.sweep(node)
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
                self.read_finished(node, incarnation);
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
            Event::ProducerTick { producer } => self.producer_tick(producer),
            Event::ProducerDeliver { attempt } => self.producer_deliver(attempt),
            Event::CommitterTick => self.committer_tick(),
            Event::CommitDeliver { request } => self.commit_deliver(request),
            Event::InitDeliver { producer } => self.init_deliver(producer),
            Event::ConsumerTick { consumer } => self.consumer_tick(consumer),
            Event::ConsumerWatch { consumer, fetch_id } => self.consumer_watch(consumer, fetch_id),
            Event::FetchWatch {
                node,
                incarnation,
                request,
            } => self.fetch_watch(node, incarnation, request),
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
            Event::ReassignTick => self.reassign_tick(),
            Event::ProducerSnapshotWritten {
                node,
                incarnation,
                offset,
                bytes,
            } => self.snapshot_written(node, incarnation, offset, bytes),
            Event::RetentionDone {
                node,
                incarnation,
                bounds,
            } => self.retention_done(node, incarnation, bounds),
            Event::ReassignDeliver { timeout } => self.reassign_deliver(timeout),
            Event::Lie { period } => self.lie_tick(period),
            Event::KillIfLeader { node, epoch } => {
                let leads = self.nodes[node]
                    .core()
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

    /// The running leader of the highest epoch, if any: (node, epoch).
    pub fn current_leader(&self) -> Option<(NodeId, Epoch)> {
        self.nodes
            .iter()
            .filter_map(|n| n.core())
            .filter(|c| c.role() == Role::Leader)
            .map(|c| (c.node_id(), c.epoch()))
            .max_by_key(|&(_, e)| e)
    }

    /// Node `id`'s core, None while it is down.
    fn core_of(&self, id: NodeId) -> Option<&RaftCore> {
        self.nodes[id as usize].core()
    }

    pub fn is_running(&self, id: NodeId) -> bool {
        self.nodes[id as usize].running()
    }

    pub fn role(&self, id: NodeId) -> Option<Role> {
        self.core_of(id).map(RaftCore::role)
    }

    pub fn high_watermark(&self, id: NodeId) -> Option<Offset> {
        self.core_of(id).and_then(RaftCore::high_watermark)
    }

    /// The voter set a running node knows (empty while a bootstrap observer has not learned it).
    pub fn voters(&self, id: NodeId) -> Option<Vec<NodeId>> {
        self.core_of(id).map(|c| c.voters().to_vec())
    }

    pub fn epoch(&self, id: NodeId) -> Option<Epoch> {
        self.core_of(id).map(RaftCore::epoch)
    }

    /// A running node's log end offset.
    pub fn log_end(&self, id: NodeId) -> Option<Offset> {
        self.core_of(id).map(RaftCore::log_end_offset)
    }

    /// The leader a running node knows in its epoch.
    pub fn leader_of(&self, id: NodeId) -> Option<NodeId> {
        self.core_of(id).and_then(RaftCore::leader_id)
    }

    /// Elections won so far (leaders that took office).
    pub fn elections(&self) -> u64 {
        self.elections
    }

    /// The highest epoch any node has persisted or runs in.
    pub fn max_epoch(&self) -> Epoch {
        self.nodes
            .iter()
            .flat_map(|n| {
                let persisted = n.persisted.as_ref().map(|s| s.epoch);
                persisted.into_iter().chain(n.core().map(RaftCore::epoch))
            })
            .max()
            .unwrap_or(0)
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
            n.core()
                .and_then(RaftCore::high_watermark)
                .is_some_and(|hw| hw >= target)
        })
    }

    /// Heals everything and checks that the cluster recovers: the final calm period.
    pub fn check_liveness(&mut self) -> Result<(), Box<Violation>> {
        let since = self.now;
        let start = liveness::CalmStart {
            elections: self.elections,
            max_epoch: self.max_epoch(),
        };
        self.phase = Phase::Final { since };
        self.calm_down();
        // Nodes in a graceful shutdown finish it and are restarted (see ShutdownComplete).
        let ok = self.run_until(self.cfg.liveness_ms, |s| {
            s.live_since(since) && s.reassign_settled()
        })?;
        if !ok && self.live_since(since) {
            return Err(self.violation(Breach {
                invariant: Invariant::ReassignmentCompletes,
                detail: format!(
                    "{} ms after faults stopped: leader {:?}, voters {:?}, last target {:?}",
                    self.cfg.liveness_ms,
                    self.current_leader(),
                    self.voter_configs(),
                    self.reassign.last_target
                ),
            }));
        }
        if ok {
            self.final_elections = self.since_calm(start);
            return self
                .check_final_elections(start)
                .map_err(|b| self.violation(b));
        }
        let hws: Vec<Option<Offset>> = (0..self.nodes.len())
            .map(|i| self.high_watermark(i as NodeId))
            .collect();
        Err(self.violation(Breach {
            invariant: Invariant::Liveness,
            detail: format!(
                "{} ms after faults stopped: leader {:?}, {} fresh acks, HWs {hws:?}, voters \
                 {:?}, last reassignment target {:?}",
                self.cfg.liveness_ms,
                self.current_leader(),
                self.client.acks.iter().filter(|a| a.1 >= since).count(),
                self.voter_configs(),
                self.reassign.last_target
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
            consumer_fetches: self.consumers.fetches,
            consumed_batches: self.consumers.batches,
            liar_messages: self.liar.messages,
            refused_lies: self.liar.refused,
            final_elections: self.final_elections.0,
            final_epochs: self.final_elections.1,
            alter_requests: self.reassign.requests,
            alter_accepted: self.reassign.accepted,
            reassignments_completed: self.reassign.completed,
            voter_changes: self.committed_voter_changes(),
            voter_disks_lost: self.voter_disks_lost,
            retentions: self.retentions,
            producer_snapshots: self.producer_snapshots,
            resets: self.resets,
            refreshes: self.refreshes,
            torn_tails: self.torn_tails,
            idempotent_acks: self.producers.acks,
            idempotent_retries: self.producers.retries,
            idempotent_lost_acks: self.producers.lost_acks,
            group_commits_acked: self.committer.acks,
            producer_ids_granted: self.producers.ids_granted,
            duplicates_suppressed: self.duplicates_suppressed
                + self
                    .nodes
                    .iter()
                    .filter_map(|n| n.replica.as_ref())
                    .map(|r| r.producing().counts().duplicates)
                    .sum::<u64>(),
            trace_hash: self.trace.hash(),
        }
    }
}
