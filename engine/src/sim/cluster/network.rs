//! The simulated network: messages, sending and delivery, partitions, one-way blocks, latency.

use std::collections::BTreeSet;

use crate::producer_ids::BlockWanted;
use crate::raft::{
    Correlation, ElectionState, Epoch, Input, NodeId, Request, Response, Role, Sender, TimeMs,
};
use crate::replica::Input as ReplicaInput;
use crate::sim::invariants::{breach, Checked, Invariant};
use crate::sim::liar::LIAR_ID;
use crate::sim::trace::TraceEntry;

use super::nodes::PendingRequest;
use super::scheduler::Event;
use super::Simulation;

/// A message in flight.
#[derive(Clone, Debug)]
pub(super) enum Message {
    Request {
        from: NodeId,
        from_incarnation: u32,
        to: NodeId,
        /// The id the sender used: `to`, or the bootstrap server pseudo id that led to `to`.
        addressed_as: NodeId,
        correlation: Correlation,
        request: Request,
        /// A FetchQuorumRecords' wish for producer ids (its tagged field on the wire).
        wish: Option<BlockWanted>,
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

/// Network fault state.
#[derive(Default)]
pub(super) struct Network {
    /// Directed links that drop everything: (from, to).
    pub(super) blocked: BTreeSet<(NodeId, NodeId)>,
    pub(super) loss: f64,
    pub(super) duplicate: f64,
}

/// What a pre-vote must leave as it was on the node that answers it (docs/protocol.md,
/// "Pre-vote"): its epoch, role, leader, vote, timers and quorum-state file.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct InertView {
    incarnation: u32,
    epoch: Epoch,
    role: Role,
    leader: Option<NodeId>,
    vote: Option<NodeId>,
    election_state: ElectionState,
    next_deadline: Option<TimeMs>,
    persists: u64,
}

impl Simulation {
    pub(super) fn inert_view(&self, i: usize) -> Option<InertView> {
        let node = &self.nodes[i];
        let core = node.core()?;
        Some(InertView {
            incarnation: node.incarnation,
            epoch: core.epoch(),
            role: core.role(),
            leader: core.leader_id(),
            vote: core.voted_id(),
            election_state: core.election_state(),
            next_deadline: core.next_deadline(),
            persists: node.persists,
        })
    }

    /// PreVoteChangesNothing: answering a pre-vote moved nothing (unless the node crashed
    /// between outputs, which is a restart, not the pre-vote's doing). A check of the
    /// mechanism: off with `outcome_only`.
    pub(super) fn check_pre_vote_inert(&self, i: usize, before: &Option<InertView>) -> Checked {
        if self.cfg.outcome_only {
            return Ok(());
        }
        let (Some(before), Some(after)) = (before, self.inert_view(i)) else {
            return Ok(());
        };
        if before.incarnation != after.incarnation || *before == after {
            return Ok(());
        }
        breach(
            Invariant::PreVoteChangesNothing,
            format!("node {i} answered a pre-vote and changed: {before:?} -> {after:?}",),
        )
    }

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

    pub(super) fn link_up(&self, from: NodeId, to: NodeId) -> bool {
        !self.net.blocked.contains(&(from, to))
    }

    pub(super) fn send(&mut self, msg: Message) {
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
    pub(super) fn network_latency(&mut self) -> TimeMs {
        let mut latency = self.rng.range(1, 5);
        if self.rng.chance(0.1) {
            latency += self.rng.range(5, 50);
        }
        if self.cfg.latency_tail && self.rng.chance(0.01) {
            latency += self.rng.range(100, 500);
        }
        latency
    }

    pub(super) fn deliver(&mut self, msg: Message) -> Checked {
        match msg {
            Message::Request {
                from,
                from_incarnation,
                to,
                addressed_as,
                correlation,
                request,
                wish,
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
                // A granted pre-vote is no vote: nothing to have persisted.
                let vote = match &request {
                    Request::Vote(v) if !v.pre_vote => Some((v.candidate_id, v.candidate_epoch)),
                    _ => None,
                };
                let pre_vote = matches!(&request, Request::Vote(v) if v.pre_vote);
                let fetch_wait = match &request {
                    Request::FetchQuorumRecords(f) => Some(f.max_wait_ms),
                    _ => None,
                };
                // As the node grants a wish: after the fetch itself, in the fetch's epoch.
                let wish = match (&request, wish) {
                    (Request::FetchQuorumRecords(f), Some(wanted)) => {
                        Some(ReplicaInput::ProducerIdsWanted {
                            replica: f.replica_id,
                            epoch: f.leader_epoch,
                            wanted,
                        })
                    }
                    _ => None,
                };
                // The wake-up's tick first, so that only the pre-vote is judged.
                if pre_vote && !self.tick_first(dest)? {
                    return Ok(());
                }
                let before = pre_vote.then(|| self.inert_view(dest));
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
                if let Some(wait) = fetch_wait {
                    self.watch_fetch(dest, id, wait);
                }
                self.count_event("request", to, i64::from(from), i64::from(request.api_key()));
                self.step_node(
                    dest,
                    Input::Request {
                        id,
                        from: Sender::Replica(from),
                        request,
                    },
                )?;
                if let Some(before) = before {
                    self.check_pre_vote_inert(dest, &before)?;
                }
                if let Some(wish) = wish.filter(|_| self.nodes[dest].running()) {
                    self.step_node(dest, wish)?;
                }
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
}
