//! Retention in the simulator (docs/simulation.md, "Retention"): now and then a running node
//! deletes the front of its log up to what its core allows, as the node's writer does, and
//! tells the core; a node whose retention the newest committed voter record holds back asks
//! its core to carry that record forward. Followers that fall behind a leader's log start reset
//! their logs (`LogOpKind::ResetTo`), which the disk model keeps as a committed shadow prefix.

use crate::raft::{Input, NodeId};
use crate::replica::Input as ReplicaInput;
use crate::sim::disk;
use crate::sim::invariants::Checked;

use super::faults::Phase;
use super::scheduler::Event;
use super::Simulation;

impl Simulation {
    pub(super) fn start_retention(&mut self) {
        let first = self.rng.range(100, 1_000);
        self.schedule(first, Event::RetentionTick);
    }

    pub(super) fn retention_tick(&mut self) -> Checked {
        let delay = self.rng.range(30, 400);
        self.schedule(delay, Event::RetentionTick);
        let i = self.rng.index(self.nodes.len());
        let node = &self.nodes[i];
        let Some(replica) = node.replica.as_ref() else {
            return Ok(());
        };
        let core = replica.core();
        if node.disk.reset_pending() {
            return Ok(()); // the writer would apply it after the reset
        }
        // The writer's bound: the core's limit, and its own durable end (docs/storage.md,
        // "Retention").
        let limit = replica
            .retention_limit()
            .min(disk::end_offset(&node.disk.durable));
        let hw = core.high_watermark();
        let start = node.disk.written_start.0;
        // A batch boundary in (start, limit]: the base of a random batch, as whole segments
        // would leave.
        let candidates: Vec<_> = node
            .disk
            .durable
            .iter()
            .map(|b| b.end_offset())
            .filter(|&end| end > start && end <= limit)
            .collect();
        let id = node.id;
        if !candidates.is_empty() && self.rng.chance(0.7) {
            let new_start = candidates[self.rng.index(candidates.len())];
            self.nodes[i].disk.retain(new_start);
            self.retentions += 1;
            self.count_event("retain", id as NodeId, new_start, 0);
            self.step_node(i, Input::LogStartMoved { start: new_start })?;
            self.sweep(i)?;
        }
        // Held back by the voter record or the producer-id block record: carry them forward
        // (only a leader acts on it), as the node does.
        if let Some(hw) = hw.filter(|&hw| limit < hw) {
            if self.phase != Phase::Calm || self.rng.chance(0.5) {
                self.count_event("carry-voters", id as NodeId, hw, 0);
                self.step_node(i, Input::CarryVoterRecord { below: hw })?;
                self.sweep(i)?;
                let pinned = self.nodes[i]
                    .replica
                    .as_ref()
                    .and_then(|r| r.producer_ids().newest_committed_record())
                    .is_some_and(|record| record < hw);
                if pinned {
                    self.step_node(i, ReplicaInput::CarryProducerIdBlock { below: hw })?;
                    self.sweep(i)?;
                }
            }
        }
        Ok(())
    }
}
