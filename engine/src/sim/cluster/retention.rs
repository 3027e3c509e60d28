//! Retention in the simulator (docs/simulation.md, "Retention"): each replica runs retention on
//! its own schedule (`replica::retention`, the node's), and the simulator carries out its
//! `Output::Retain` as the node's writer does: it deletes the front of the log up to what the
//! replica allows (whole batches, as whole segments would go, and never past the durable end),
//! then answers `Input::Retained` with the start reached and the start the policy wanted, so
//! that a replica held back by the newest committed voter or producer-id block record carries
//! it forward. Followers that fall behind a leader's log start reset their logs
//! (`LogOpKind::ResetTo`), which the disk model keeps as a committed shadow prefix.

use crate::base::{Offset, TimeMs};
use crate::raft::NodeId;
use crate::replica::{Input as ReplicaInput, RetentionBounds};
use crate::sim::disk;
use crate::sim::invariants::Checked;

use super::faults::Phase;
use super::scheduler::Event;
use super::Simulation;

impl Simulation {
    /// The check interval of a replica's retention (only with `SimConfig::retention`).
    pub(super) fn retention_interval(&mut self) -> Option<TimeMs> {
        self.cfg.retention.then(|| self.rng.range(100, 1_000))
    }

    /// Node `i`'s replica asked for a retention run within `bounds`: the writer's answer comes
    /// a little later (a crash in between loses it, as the node's would be).
    pub(super) fn retention_asked(&mut self, i: usize, bounds: RetentionBounds) -> Checked {
        let delay = self.rng.range(1, 20);
        let incarnation = self.nodes[i].incarnation;
        self.schedule(
            delay,
            Event::RetentionDone {
                node: i,
                incarnation,
                bounds,
            },
        );
        Ok(())
    }

    /// The writer's run for node `i`: deletes up to a batch boundary within the bounds and the
    /// durable end, and says how far the policy wanted to go.
    pub(super) fn retention_done(
        &mut self,
        i: usize,
        incarnation: u32,
        bounds: RetentionBounds,
    ) -> Checked {
        let node = &self.nodes[i];
        if node.incarnation != incarnation || !node.running() {
            return Ok(()); // the node went away: its next run asks again
        }
        let hw = node.core().and_then(|core| core.high_watermark());
        let start = node.disk.written_start.0;
        let mut reached = start;
        // A reset not yet durable: the writer applies retention after it; nothing goes now.
        if !node.disk.reset_pending() {
            // The writer's own bound on top of the replica's: its durable end
            // (docs/storage.md, "Retention").
            let limit = bounds.limit.min(disk::end_offset(&node.disk.durable));
            // A batch boundary in (start, limit]: the base of a random batch, as whole
            // segments would leave.
            let candidates: Vec<Offset> = node
                .disk
                .durable
                .iter()
                .map(|b| b.end_offset())
                .filter(|&end| end > start && end <= limit)
                .collect();
            if !candidates.is_empty() && self.rng.chance(0.7) {
                reached = candidates[self.rng.index(candidates.len())];
                self.nodes[i].disk.retain(reached);
                self.retentions += 1;
                let id = self.nodes[i].id;
                self.count_event("retain", id as NodeId, reached, 0);
            }
        }
        // The policy would have gone up to the high watermark now and then (more often while
        // faults run): a replica held back by a pinned record carries it forward.
        let wanted = match hw.filter(|&hw| hw > reached && bounds.limit < hw) {
            Some(hw) if self.phase != Phase::Calm || self.rng.chance(0.5) => hw,
            _ => reached,
        };
        self.step_node(
            i,
            ReplicaInput::Retained {
                start: reached,
                wanted,
            },
        )?;
        self.sweep(i)
    }
}
