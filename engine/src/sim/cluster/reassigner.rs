//! The reassigner (`SimConfig::reassign`, docs/simulation.md, "Reassignment"): an operator's
//! tool that sends AlterQuorum requests with random targets drawn from the pool of nodes, to
//! the node it believes leads, at random times, and follows the answers. It draws from the RNG
//! and writes the trace only when the flag is on: runs without it replay as before.

use crate::raft::{
    AlterQuorumRequest, AlterQuorumResponse, AlterQuorumVoter, DirectoryId, ErrorCode, Input,
    NodeId, Request, RequestId, Sender, TimeMs,
};
use crate::record::voters::voter_records;
use crate::sim::invariants::{breach, Checked, Invariant};

use super::faults::Phase;
use super::nodes::PendingRequest;
use super::scheduler::Event;
use super::{Simulation, CLUSTER_ID};

/// Who the reassigner's requests come from (no node of the cluster; answers are handed to it
/// directly).
pub(super) const REASSIGNER_ID: NodeId = 1001;

/// An AlterQuorum the reassigner sent and has no answer for yet.
#[derive(Clone, Debug)]
pub(super) struct AlterInFlight {
    pub(super) node: usize,
    pub(super) incarnation: u32,
    pub(super) request: Option<RequestId>,
    pub(super) target: Vec<NodeId>,
    pub(super) force: bool,
    pub(super) give_up_at: TimeMs,
}

#[derive(Debug, Default)]
pub(super) struct Reassigner {
    pub(super) believed_leader: usize,
    pub(super) in_flight: Option<AlterInFlight>,
    /// The last target sent, and whether a leader answered NONE for it (its target committed).
    pub(super) last_target: Option<(Vec<NodeId>, bool)>,
    pub(super) last_force: bool,
    pub(super) requests: u64,
    /// NONE answers: a target recorded and committed.
    pub(super) accepted: u64,
    /// Targets reached: a leader's committed set became the target with nothing in progress.
    pub(super) completed: u64,
    /// Whether the last target was counted in `completed`.
    pub(super) counted: bool,
    /// Every node some target named (they may have voted: they never lose their disk).
    pub(super) ever_targeted: std::collections::BTreeSet<NodeId>,
    /// The target (and force flag) set aside while a voter that lost its disk is taken out of
    /// the set, to be sent again once it is (docs/operations.md, "Replacing a voter that lost
    /// its disk").
    pub(super) resume: Option<(Vec<NodeId>, bool)>,
}

/// The request timeout the reassigner asks for: the leader answers REQUEST_TIMED_OUT after it.
const ALTER_TIMEOUT_MS: (u64, u64) = (500, 4_000);
/// How long past its timeout an unanswered request is given up (its node probably crashed).
const GIVE_UP_SLACK_MS: TimeMs = 1_000;

impl Simulation {
    /// The first reassigner tick (only when `cfg.reassign`).
    pub(super) fn start_reassigner(&mut self) {
        let first = self.rng.range(200, 2_000);
        self.schedule(first, Event::ReassignTick);
    }

    pub(super) fn reassign_tick(&mut self) -> Checked {
        let final_calm = matches!(self.phase, Phase::Final { .. });
        let delay = if final_calm {
            self.rng.range(50, 300)
        } else {
            self.rng.range(200, 2_500)
        };
        self.schedule(delay, Event::ReassignTick);
        if let Some(f) = &self.reassign.in_flight {
            if self.now < f.give_up_at {
                return Ok(());
            }
            self.reassign.in_flight = None;
            self.reassign_pick_other_node();
        }
        if final_calm {
            // The operator's tool finds the leader.
            if let Some((leader, _)) = self.current_leader() {
                self.reassign.believed_leader = leader as usize;
            }
        }
        // A voter that lost its disk is taken out first, at once, as the runbook says
        // (docs/operations.md, "Replacing a voter that lost its disk"); then the target set
        // aside is sent again.
        if let Some(without) = self.repair_target() {
            if self.reassign.resume.is_none() {
                let last = self.reassign.last_target.clone().map(|(t, _)| t);
                self.reassign.resume = last.map(|t| (t, self.reassign.last_force));
            }
            return self.send_alter(without, false);
        }
        if self.reassign_settled() {
            if let Some((target, force)) = self.reassign.resume.take() {
                return self.send_alter(target, force);
            }
        }
        if final_calm {
            // After the faults: see the last target through, as an operator would.
            return match self.reassign.last_target.clone() {
                Some((target, false)) => {
                    let force = self.reassign.last_force;
                    self.send_alter(target, force)
                }
                _ => Ok(()),
            };
        }
        let roll = self.rng.range(0, 99);
        let (target, force) = match (roll, self.reassign.last_target.clone()) {
            // Retry the last target (an idempotent overwrite).
            (0..=14, Some((t, false))) => (t, self.reassign.last_force),
            // Cancel: the set the believed leader has in force.
            (15..=29, _) => {
                let node = &self.nodes[self.reassign.believed_leader];
                match node.core().map(|c| c.voters().to_vec()) {
                    Some(v) if !v.is_empty() => (v, false),
                    _ => return Ok(()),
                }
            }
            _ => {
                let target = self.random_target();
                // Never forced while a voter is a stranger: a forced step could leave it half
                // the set, and nothing could then take it out (docs/operations.md, "Replacing
                // a voter that lost its disk").
                let force = self.rng.chance(0.15) && self.repair_target().is_none();
                (target, force)
            }
        };
        self.send_alter(target, force)
    }

    /// A random non-empty subset of the pool (every node of the cluster).
    fn random_target(&mut self) -> Vec<NodeId> {
        let pool = self.nodes.len();
        let size = self.rng.range(1, pool.min(5) as u64) as usize;
        let mut ids: Vec<NodeId> = (0..pool as NodeId).collect();
        for k in 0..size {
            let j = k + self.rng.index(pool - k);
            ids.swap(k, j);
        }
        ids.truncate(size);
        ids.sort_unstable();
        ids
    }

    fn send_alter(&mut self, target: Vec<NodeId>, force: bool) -> Checked {
        let node = self.reassign.believed_leader;
        let timeout = self.rng.range(ALTER_TIMEOUT_MS.0, ALTER_TIMEOUT_MS.1);
        if self.reassign.last_target.as_ref().map(|(t, _)| t) != Some(&target)
            || self.reassign.last_force != force
        {
            self.reassign.counted = false;
        }
        self.reassign.ever_targeted.extend(target.iter().copied());
        self.reassign.last_target = Some((target.clone(), false));
        self.reassign.last_force = force;
        self.reassign.requests += 1;
        self.reassign.in_flight = Some(AlterInFlight {
            node,
            incarnation: self.nodes[node].incarnation,
            request: None,
            target: target.clone(),
            force,
            give_up_at: self.now + timeout + GIVE_UP_SLACK_MS,
        });
        let latency = self.rng.range(1, 3);
        self.schedule(latency, Event::ReassignDeliver { timeout });
        Ok(())
    }

    pub(super) fn reassign_deliver(&mut self, timeout: TimeMs) -> Checked {
        let Some(f) = self.reassign.in_flight.clone() else {
            return Ok(());
        };
        let node = f.node;
        if !self.nodes[node].running() || self.nodes[node].incarnation != f.incarnation {
            self.reassign.in_flight = None;
            self.reassign_pick_other_node();
            return Ok(());
        }
        let id = self.next_request_id;
        self.next_request_id += 1;
        let addressed_as = self.nodes[node].id;
        self.nodes[node].pending.insert(
            id,
            PendingRequest {
                from: REASSIGNER_ID,
                from_incarnation: 0,
                addressed_as,
                correlation: 0,
                vote: None,
            },
        );
        if let Some(f) = self.reassign.in_flight.as_mut() {
            f.request = Some(id);
        }
        let target_code = f
            .target
            .iter()
            .fold(0i64, |acc, v| acc * 16 + i64::from(*v) + 1);
        self.count_event(
            "alter-quorum",
            node as NodeId,
            target_code,
            i64::from(f.force),
        );
        let request = Request::AlterQuorum(AlterQuorumRequest {
            cluster_id: CLUSTER_ID.to_string(),
            target_voters: f
                .target
                .iter()
                .map(|&voter_id| AlterQuorumVoter {
                    voter_id,
                    directory_id: DirectoryId::ZERO,
                })
                .collect(),
            timeout_ms: i32::try_from(timeout).unwrap_or(i32::MAX),
            validate_only: false,
            force: f.force,
        });
        self.step_node(
            node,
            Input::Request {
                id,
                from: Sender::Unverified,
                request,
            },
        )?;
        self.sweep(node)
    }

    /// Node `i` answered the reassigner's request `id`.
    pub(super) fn reassign_answered(
        &mut self,
        i: usize,
        id: RequestId,
        r: AlterQuorumResponse,
    ) -> Checked {
        let Some(f) = self.reassign.in_flight.clone() else {
            return Ok(()); // given up already
        };
        if f.request != Some(id) || f.node != i {
            return Ok(());
        }
        self.reassign.in_flight = None;
        self.trace.push(crate::sim::trace::TraceEntry::new(
            self.now,
            "alter-answer",
            i as NodeId,
            i64::from(r.error.0),
            i64::from(r.leader_id),
        ));
        match r.error {
            ErrorCode::NONE => {
                self.reassign.accepted += 1;
                if let Some((t, done)) = self.reassign.last_target.as_mut() {
                    if *t == f.target {
                        *done = true;
                    }
                }
                Ok(())
            }
            ErrorCode::NOT_QUORUM_LEADER => {
                if r.leader_id >= 0 && (r.leader_id as usize) < self.nodes.len() {
                    self.reassign.believed_leader = r.leader_id as usize;
                } else {
                    self.reassign_pick_other_node();
                }
                Ok(())
            }
            // REQUEST_TIMED_OUT: retried later; UNKNOWN_VOTER_ID: a target node not heard yet.
            ErrorCode::REQUEST_TIMED_OUT | ErrorCode::UNKNOWN_VOTER_ID => Ok(()),
            other => breach(
                Invariant::ExactlyOnceContract,
                format!(
                    "node {i} answered AlterQuorum {:?} with {other:?}",
                    f.target
                ),
            ),
        }
    }

    /// The believed leader's voters without those its set binds to a directory their node no
    /// longer has (it lost its disk: a stranger under the voter's id), when there are any and
    /// some voter is left.
    fn repair_target(&self) -> Option<Vec<NodeId>> {
        let core = self.nodes[self.reassign.believed_leader].core()?;
        core.qs.leader()?;
        let config = core.qs.voter_config();
        let stranger = |id: &NodeId| {
            config
                .directory_of(*id)
                .is_some_and(|d| self.nodes[*id as usize].directory != d)
        };
        if !config.current.iter().any(stranger) {
            return None;
        }
        let kept: Vec<NodeId> = config
            .current
            .iter()
            .copied()
            .filter(|id| !stranger(id))
            .collect();
        (!kept.is_empty()).then_some(kept)
    }

    fn reassign_pick_other_node(&mut self) {
        self.reassign.believed_leader = self.rng.index(self.nodes.len());
    }

    /// The leader of the highest epoch has the last target as its committed set with no
    /// reassignment in progress (true when nothing was ever requested).
    pub(super) fn reassign_settled(&self) -> bool {
        let Some((target, _)) = &self.reassign.last_target else {
            return true;
        };
        let Some((leader, _)) = self.current_leader() else {
            return false;
        };
        let core = self.nodes[leader as usize].core().expect("running");
        let c = core.qs.committed_voter_config();
        c.target.is_none() && c.current == *target
    }

    /// Counts the last target as reached once (see `Reassigner::completed`).
    pub(super) fn note_reassign_progress(&mut self) {
        if self.reassign.counted || self.reassign.last_target.is_none() {
            return;
        }
        if self.reassign_settled() {
            self.reassign.counted = true;
            self.reassign.completed += 1;
        }
    }

    /// Voter-set changes committed in `leader`'s log: the voter records below its high
    /// watermark whose current set differs from the one before.
    pub(super) fn committed_voter_changes(&self) -> u64 {
        let Some((leader, _)) = self.current_leader() else {
            return 0;
        };
        let n = &self.nodes[leader as usize];
        let hw = n.core().and_then(|c| c.high_watermark()).unwrap_or(0);
        let records = voter_records(n.disk.written.iter().filter(|b| b.base_offset < hw))
            .expect("the simulated log holds only batches the cores wrote");
        let mut current: Vec<NodeId> = self.voter_ids();
        let mut changes = 0;
        for r in records {
            if r.config.current != current {
                changes += 1;
                current = r.config.current;
            }
        }
        changes
    }
}
