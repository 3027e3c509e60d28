//! The liar's hooks: scheduling its messages and turning its lies into network messages.

use crate::raft::Correlation;
use crate::sim::invariants::Checked;
use crate::sim::liar;
use crate::sim::liar::{Draw, Lie, TargetView, LIAR_ID};
use crate::sim::trace::TraceEntry;
use crate::sim::Violation;

use super::faults::Phase;
use super::network::Message;
use super::scheduler::Event;
use super::{Simulation, CLUSTER_ID};

/// The liar's bookkeeping (its messages come from `liar.rs`).
#[derive(Default)]
pub(super) struct LiarState {
    /// Fault periods started so far: a `Lie` event of an earlier one is stale.
    pub(super) period: u64,
    /// The correlation ids of its requests (their responses are dropped anyway).
    pub(super) next_correlation: Correlation,
    /// Requests and stray responses sent.
    pub(super) messages: u64,
    /// Of its requests, those the nodes' admission checks refused.
    pub(super) refused: u64,
}

impl Simulation {
    /// A fault period began: the liar starts a new chain of messages (when enabled).
    pub(super) fn start_lying(&mut self) {
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
    pub(super) fn lie_tick(&mut self, period: u64) -> Checked {
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
        let core = node.core()?;
        Some(TargetView {
            node: node.id,
            cluster_id: CLUSTER_ID.to_owned(),
            epoch: core.epoch(),
            last_epoch: core.last_epoch(),
            log_end: core.log_end_offset(),
            voters: core.voters().to_vec(),
            nodes: self.nodes.len(),
            pre_vote: self.cfg.pre_vote,
        })
    }

    /// The message that carries `lie` from the liar to node `i`.
    pub(super) fn lie_message(&mut self, i: usize, lie: Lie) -> Message {
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
                    wish: None,
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
}
