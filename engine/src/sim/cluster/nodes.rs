//! Node lifecycle: starting, killing, restarting and shutting down nodes, and stepping their cores.

use std::collections::BTreeMap;

use crate::base::DirectoryId;
use crate::groups::{GroupLimits, Groups};
use crate::producer_snapshot::ProducerSnapshot;
use crate::raft::{
    Batch, Correlation, ElectionState, Epoch, Input, NodeId, Offset, RaftCore, RequestId, Role,
    TimeMs,
};
use crate::replica::rebuild::{check_snapshot, ProducerRebuild, Rebuilt};
use crate::replica::{Input as ReplicaInput, Replica};
use crate::sim::disk::{self, SimDisk};
use crate::sim::invariants::{breach, Checked, Invariant};
use crate::sim::trace::TraceEntry;
use crate::sim::Violation;

use super::{core_config, Simulation};

/// An inbound request waiting for the core's Respond.
pub(super) struct PendingRequest {
    pub(super) from: NodeId,
    pub(super) from_incarnation: u32,
    pub(super) addressed_as: NodeId,
    pub(super) correlation: Correlation,
    /// (candidate, epoch) for Vote requests, to check that a granted vote was persisted.
    pub(super) vote: Option<(NodeId, Epoch)>,
}

pub(super) struct SimNode {
    pub(super) id: NodeId,
    pub(super) observer: bool,
    /// The nodes this observer's bootstrap servers are, when it starts without a voter set
    /// (`SimConfig::bootstrap_observers`); empty otherwise.
    pub(super) bootstrap: Vec<NodeId>,
    /// The replica (the core and the node's decisions around it) while the node runs.
    pub(super) replica: Option<Replica>,
    pub(super) incarnation: u32,
    pub(super) disk: SimDisk,
    pub(super) persisted: Option<ElectionState>,
    /// Persistent state was deleted once: epoch monotonicity no longer applies to this node.
    pub(super) lost_state: bool,
    pub(super) tick_at: Option<TimeMs>,
    pub(super) pending: BTreeMap<RequestId, PendingRequest>,
    /// The role as told by the RoleChanged outputs carried out so far.
    pub(super) role: Role,
    pub(super) epoch: Epoch,
    /// Highest HW seen in this incarnation.
    pub(super) max_hw: Option<Offset>,
    /// Log prefix already compared with the committed data (this incarnation).
    pub(super) verified: Offset,
    pub(super) shutdown_since: Option<TimeMs>,
    /// The disk's last scheduled completion (durability is reported in seq order).
    pub(super) disk_busy_until: TimeMs,
    /// Until then every write is slow (an fsync stall).
    pub(super) disk_slow_until: TimeMs,
    /// Quorum-state writes carried out, all incarnations.
    pub(super) persists: u64,
    /// The time of the last Tick this incarnation's core was given.
    pub(super) ticked_at: TimeMs,
    /// With `SimConfig::reassign`: the core's voter set before the step being carried out (a
    /// high watermark of the step may be counted in it or in the set the step appended).
    pub(super) step_voters: Vec<NodeId>,
    /// The log directory's id: a new one each time the disk is lost (docs/protocol.md, "Voter
    /// identity"). Derived, not drawn, so that it leaves the seeds' random streams alone.
    pub(super) directory: DirectoryId,
    /// What the disk held durably when it was last lost: a leader that counted it toward its
    /// high watermark just before counted right (see `observe_hw`).
    pub(super) lost_durable: Vec<Batch>,
    /// The `quorum.voters` a node restarted on an empty disk is given: the committed set when
    /// it lost a voter's disk, as an operator keeps the configuration up to date after each
    /// reassignment (docs/operations.md, "Replace a dead voter", step 4). None: the set the
    /// cluster started with. (A node that lost its disk and were given the first set of a
    /// cluster that started with one voter would lead a cluster of its own.)
    pub(super) configured_voters: Option<Vec<NodeId>>,
}

/// The simulated log's "segment size": a producer-state snapshot is due after this many bytes
/// of batches (a few dozen of the simulator's small batches).
const SIM_SEGMENT_BYTES: u64 = 4_096;

/// The producer state, producer-id ledger and committed offsets a start of node `id` (run
/// `incarnation`) rebuilds from its disk, as the node does (`engine::replica::rebuild`): from
/// the producer-state snapshot when it decodes and fits the log, else from the log's start.
/// With the snapshot's offset, if one was used.
fn rebuilt_state(disk: &SimDisk, id: NodeId, incarnation: u64) -> Rebuilt {
    let log = &disk.written;
    let start = disk.written_start.0;
    let snapshot = disk
        .producer_snapshot
        .as_deref()
        .and_then(|bytes| ProducerSnapshot::decode(bytes).ok())
        .filter(|s| {
            check_snapshot(s, start, disk::end_offset(log), |offset| {
                log.iter()
                    .find(|b| b.base_offset <= offset && offset < b.end_offset())
                    .map(|b| b.epoch)
            })
            .is_ok()
        });
    let mut rebuild = ProducerRebuild::new(id, incarnation, snapshot, start);
    let from = rebuild.from();
    for batch in log.iter().filter(|b| b.end_offset() > from) {
        rebuild
            .feed(batch.base_offset, batch.end_offset(), &batch.bytes)
            .expect("the simulator writes well-formed batches");
    }
    rebuild.finish()
}

/// The directory id of node `id`'s `generation`-th disk in a run of `seed`: distinct for every
/// (id, generation), never nil.
pub(super) fn sim_directory(seed: u64, id: NodeId, generation: u64) -> DirectoryId {
    DirectoryId::from_halves(seed ^ (id as u64).rotate_left(32), generation + 1)
}

impl SimNode {
    pub(super) fn running(&self) -> bool {
        self.replica.is_some()
    }

    /// The running node's core, for read-only queries.
    pub(super) fn core(&self) -> Option<&RaftCore> {
        self.replica.as_ref().map(Replica::core)
    }
}

impl Simulation {
    pub(super) fn start_node(&mut self, i: usize) -> Checked {
        let voters = self.nodes[i]
            .configured_voters
            .clone()
            .unwrap_or_else(|| self.voter_ids());
        let seed = self.rng.next_u64();
        let retention = self.retention_interval();
        let node = &mut self.nodes[i];
        assert!(node.replica.is_none());
        let mut config = if node.bootstrap.is_empty() {
            core_config(node.id, &voters, seed)
        } else {
            let mut c = core_config(node.id, &[], seed);
            c.bootstrap_servers = node.bootstrap.len();
            c
        };
        config.pre_vote = self.cfg.pre_vote;
        // The lease rests on pre-vote (docs/consistency.md, "The leader lease").
        config.lease = self.cfg.pre_vote;
        config.planted = self.cfg.plant;
        config.directory_id = node.directory;
        let snapshot = node.disk.snapshot();
        let core = match RaftCore::new(config, node.persisted.clone(), snapshot, self.now) {
            Ok(core) => core,
            Err(e) => {
                return breach(Invariant::RestartFailed, format!("node {}: {e}", node.id));
            }
        };
        node.incarnation += 1;
        node.ticked_at = 0;
        node.role = core.role();
        node.epoch = core.epoch();
        // The producer state a node rebuilds at start, from its snapshot and its log (the node
        // reads its log from the log start at most; the batches below it here are only the
        // shadow of what retention deleted).
        // A new run of the node never uses a block reserved for an earlier one: its incarnation
        // is new (derived, not drawn, so that it leaves the seeds' random streams alone).
        let run = (u64::from(node.incarnation) << 32) | node.id as u64;
        let rebuilt = rebuilt_state(&node.disk, node.id, run);
        let loaded = rebuilt.snapshot.map(|offset| {
            let file = node
                .disk
                .producer_snapshot
                .as_deref()
                .expect("a loaded file");
            (offset, bytes::Bytes::copy_from_slice(file))
        });
        let groups =
            Groups::new(GroupLimits::default(), String::new()).with_offsets(rebuilt.offsets);
        let replica = Replica::new(core, rebuilt.producers, rebuilt.ledger)
            .with_snapshots(SIM_SEGMENT_BYTES, loaded)
            .with_groups(groups);
        node.replica = Some(match retention {
            Some(interval) => replica.with_retention(interval),
            None => replica,
        });
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
        let Some(replica) = node.replica.take() else {
            return;
        };
        self.duplicates_suppressed += replica.producing().counts().duplicates;
        if node.disk.unsynced_ops() > 0 {
            self.torn_tails += 1;
        }
        node.disk.crash(&mut self.rng, tear);
        node.pending.clear();
        // The client's connection to the node broke: its appends there have unknown outcomes.
        self.client.in_flight.retain(|_, a| a.node != i);
        self.producers_lost_node(i);
        let node = &mut self.nodes[i];
        node.tick_at = None;
        node.shutdown_since = None;
        node.role = Role::Unattached;
        let id = node.id;
        self.consumers_lost_node(i);
        self.trace.push(TraceEntry::new(self.now, "kill", id, 0, 0));
    }

    /// Kill, then lose the quorum-state file and the log (Kafka's killAndDeletePersistentState;
    /// docs/simulation.md, "Invariants"). Turns off the rules that data loss can break.
    pub fn kill_and_delete_state(&mut self, i: usize) {
        if self.log_voter_config(i).contains(self.nodes[i].id) {
            self.voter_disks_lost += 1;
            let committed = self.current_leader().and_then(|(l, _)| {
                let core = self.nodes[l as usize].core()?;
                Some(core.qs.committed_voter_config().current.clone())
            });
            self.nodes[i].configured_voters = committed;
        }
        self.kill(i);
        let node = &mut self.nodes[i];
        node.persisted = None;
        node.lost_durable = std::mem::take(&mut node.disk.durable);
        node.disk = SimDisk::default();
        node.lost_state = true;
        let generation = node.directory.0[15] as u64;
        node.directory = sim_directory(self.cfg.seed, node.id, generation);
        let id = node.id;
        // Its votes went with the disk (a node that started as an observer may have become a
        // voter); that no epoch gets two leaders is still checked (SingleLeader).
        self.checker.forget_votes_of(id);
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
    pub(super) fn stop_cleanly(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        if let Some(replica) = node.replica.take() {
            self.duplicates_suppressed += replica.producing().counts().duplicates;
        }
        node.disk.close();
        node.pending.clear();
        self.client.in_flight.retain(|_, a| a.node != i);
        self.producers_lost_node(i);
        self.consumers_lost_node(i);
        let node = &mut self.nodes[i];
        node.tick_at = None;
        node.shutdown_since = None;
        node.role = Role::Unattached;
    }

    /// With `tick_before_input`, ticks node `i` at the present unless it was already (the node
    /// runtime's tick on wake-up). Ok(false) if the node is no longer running afterwards.
    pub(super) fn tick_first(&mut self, i: usize) -> Result<bool, crate::sim::invariants::Breach> {
        if self.cfg.tick_before_input
            && self.nodes[i].running()
            && self.nodes[i].ticked_at < self.now
        {
            self.step_node(i, Input::Tick { now: self.now })?;
        }
        Ok(self.nodes[i].running())
    }

    /// Steps node `i` and carries out its outputs in order, perhaps crashing between two of them.
    pub(super) fn step_node(&mut self, i: usize, input: impl Into<ReplicaInput>) -> Checked {
        let input = input.into();
        if let ReplicaInput::Core(Input::Tick { now }) = input {
            self.nodes[i].ticked_at = now;
        } else if !self.tick_first(i)? {
            return Ok(());
        }
        if self.cfg.reassign {
            let voters = self.nodes[i].core().map(|c| c.voters().to_vec());
            self.nodes[i].step_voters = voters.unwrap_or_default();
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.nodes[i]
            .replica
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

    pub(super) fn shutdown_inner(&mut self, i: usize) -> Checked {
        if self.nodes[i].shutdown_since.is_some() {
            return Ok(());
        }
        self.nodes[i].shutdown_since = Some(self.now);
        self.trace
            .push(TraceEntry::new(self.now, "shutdown", i as NodeId, 0, 0));
        self.step_node(i, Input::Shutdown)?;
        self.sweep(i)
    }
}
