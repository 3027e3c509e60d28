//! The fault schedule: phases, chaos, and the calm that ends them.

use crate::raft::{NodeId, TimeMs};
use crate::record::voters::voter_records;
use crate::sim::invariants::Checked;
use crate::sim::trace::TraceEntry;

use super::scheduler::Event;
use super::Simulation;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Faults,
    Calm,
    /// The final calm: no more faults, liveness is being checked.
    Final {
        since: TimeMs,
    },
}

impl Simulation {
    pub(super) fn phase_change(&mut self) -> Checked {
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
    pub(super) fn calm_down(&mut self) {
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

    pub(super) fn chaos(&mut self) -> Checked {
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

    /// Random disk loss hits an observer no target ever named (one that a target named may be
    /// a voter by the time its disk goes), or a voter whom every replica's log binds to its
    /// directory (docs/protocol.md, "Voter identity"): the replica that comes back is a
    /// stranger under its id and must neither vote nor count until a reassignment makes it a
    /// voter again. Before that binding, a voter that loses its disk can vote a second time in
    /// an epoch and drop the only durable copy the leader counted (KAFKA-12181): this
    /// simulator found both (SingleLeader and LeaderCompleteness breaks). One such stranger at
    /// a time: a second would leave no majority to elect anyone.
    pub(super) fn may_lose_state(&self, i: usize) -> bool {
        let node = &self.nodes[i];
        if node.observer && !self.reassign.ever_targeted.contains(&node.id) {
            return true;
        }
        // The logs that matter: those of every node its own log names (only those vote),
        // durably (a crash may take what is only written, binding and all).
        let configs: Vec<_> = (0..self.nodes.len())
            .map(|j| self.durable_voter_config(j))
            .enumerate()
            .filter(|(j, c)| {
                let id = self.nodes[*j].id;
                c.contains(id) || c.target.as_ref().is_some_and(|t| t.contains(&id))
            })
            .map(|(_, c)| c)
            .collect();
        // At least three voters: the others remain a majority, which can take it out.
        let bound_here = |c: &crate::raft::voter_set::VoterConfig| {
            c.target.is_none()
                && c.current.len() >= 3
                && c.directory_of(node.id) == Some(node.directory)
        };
        let no_stranger = |c: &crate::raft::voter_set::VoterConfig| {
            c.directories
                .iter()
                .all(|(id, d)| self.nodes[*id as usize].directory == *d)
        };
        // Nor while an AlterQuorum is on its way: a step taken before the leader notices the
        // loss (its fetch timeout) could leave the stranger half the set.
        let quiet = self.reassign.in_flight.is_none()
            && self.nodes.iter().all(|n| {
                n.core()
                    .and_then(|c| c.qs.leader())
                    .is_none_or(|l| l.requested_target.is_none())
            });
        quiet
            && configs.iter().all(|c| bound_here(c) && no_stranger(c))
            && self.binding_committed_everywhere(i)
    }

    /// The newest committed voter record binds node `i` to its directory, and every node that
    /// may vote (the record's voters, and each node its own durable log names) holds that very
    /// record durably: no leader can be elected without it, and no truncation can take it.
    /// (A binding only some logs hold is not enough: one in a suffix that a later leader
    /// overwrites left a lagging candidate, unbound, that the lost voter voted for.)
    fn binding_committed_everywhere(&self, i: usize) -> bool {
        let Some((leader, _)) = self.current_leader() else {
            return false;
        };
        let committed = self.checker.committed_end();
        let log = &self.nodes[leader as usize].disk.durable;
        let found = log
            .iter()
            .rev()
            .filter(|b| b.is_control && b.end_offset() <= committed)
            .find_map(|b| {
                let records = voter_records(std::slice::from_ref(b)).ok()?;
                Some((b, records.into_iter().last()?.config))
            });
        let Some((record, config)) = found else {
            return false;
        };
        let node = &self.nodes[i];
        if config.directory_of(node.id) != Some(node.directory) {
            return false;
        }
        self.nodes.iter().enumerate().all(|(j, n)| {
            let may_vote = config.contains(n.id) || self.durable_voter_config(j).contains(n.id);
            !may_vote
                || n.disk
                    .durable
                    .iter()
                    .any(|b| b.base_offset == record.base_offset && b.epoch == record.epoch)
        })
    }
}
