//! The client: its appends, their timeouts, and the outcomes the invariants check.

use std::collections::{BTreeMap, BTreeSet};

use crate::raft::{Acks, AppendResult, Input, NodeId, Offset, TimeMs};
use crate::sim::batch::client_batch;
use crate::sim::invariants::{answered_once, breach, Acked, Checked, Invariant};

use super::scheduler::Event;
use super::Simulation;

pub(super) struct ClientAppend {
    pub(super) node: usize,
    pub(super) incarnation: u32,
    pub(super) value: u64,
    pub(super) batch: bytes::BytesMut,
    pub(super) record_count: u32,
    pub(super) acks: Acks,
    pub(super) sent_at: TimeMs,
}

#[derive(Default)]
pub(super) struct Client {
    pub(super) next_value: u64,
    pub(super) believed_leader: usize,
    pub(super) in_flight: BTreeMap<u64, ClientAppend>,
    /// Appends already answered (a second answer breaks the exactly-once contract).
    pub(super) answered: BTreeSet<u64>,
    /// Quorum-acknowledged appends, as (ack time, sent time, last offset).
    pub(super) acks: Vec<(TimeMs, TimeMs, Offset)>,
    /// Sends nothing new while set (the disruption scenario's quiet cluster).
    pub(super) paused: bool,
}

/// The client keeps at most this many appends outstanding.
pub(super) const CLIENT_MAX_IN_FLIGHT: usize = 3;
/// An append unanswered for this long is given up (its outcome stays unknown).
pub(super) const CLIENT_TIMEOUT_MS: TimeMs = 4_000;

impl Simulation {
    /// Stops (or resumes) new appends; those in flight still get their answers.
    pub fn pause_client(&mut self, paused: bool) {
        self.client.paused = paused;
    }

    /// Appends sent and not answered yet.
    pub fn client_in_flight(&self) -> usize {
        self.client.in_flight.len()
    }

    pub(super) fn client_tick(&mut self) -> Checked {
        let delay = self.rng.range(5, 40);
        self.schedule(delay, Event::ClientTick);
        // Give up on appends that went unanswered too long (their node probably crashed).
        let now = self.now;
        self.client
            .in_flight
            .retain(|_, a| now < a.sent_at + CLIENT_TIMEOUT_MS);
        if self.client.paused || self.client.in_flight.len() >= CLIENT_MAX_IN_FLIGHT {
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

    pub(super) fn client_deliver(&mut self, append_id: u64) -> Checked {
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

    pub(super) fn client_pick_other_node(&mut self) {
        self.client.believed_leader = self.rng.index(self.nodes.len());
    }

    pub(super) fn client_done(
        &mut self,
        i: usize,
        append_id: u64,
        result: AppendResult,
    ) -> Checked {
        let id = self.nodes[i].id;
        answered_once(&mut self.client.answered, id, "append", append_id)?;
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
}
