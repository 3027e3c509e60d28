//! Idempotent producers (docs/simulation.md, "The whole replica"): each asks a random node for
//! a producer id (InitProducerId, answered from the blocks the replicas reserve through the
//! log), then sends batches with that id, epoch 0 and consecutive sequences, keeps at most five of them unacknowledged (Kafka's bound
//! with idempotence), and retries every batch whose answer failed or never came, in sequence
//! order, to the leader it believes in. Retries therefore reach new leaders, and duplicate both
//! committed batches and batches still uncommitted; the replica must answer each with the
//! offsets of the one copy in the log.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::BytesMut;

use crate::producers::BATCHES_PER_PRODUCER;
use crate::raft::{Acks, AppendResult, ErrorCode, Input, NodeId, TimeMs};
use crate::replica::Input as ReplicaInput;
use crate::sim::batch::sequenced_batch;
use crate::sim::invariants::{answered_once, breach, Acked, Checked, Invariant};

use super::clients::CLIENT_TIMEOUT_MS;
use super::scheduler::Event;
use super::Simulation;

/// Append ids of the producers' attempts start here, apart from the plain client's (which are
/// its values, counted from 1).
pub(super) const ATTEMPT_ID_BASE: u64 = 1 << 62;
/// Request ids of the producers' InitProducerIds start here.
const INIT_ID_BASE: u64 = 1 << 61;
/// After an acknowledgement that leaves nothing unacknowledged, the chance that the producer
/// starts over with a new producer id (as a restarted client does).
const NEW_ID_CHANCE: f64 = 0.02;
/// Batches one producer has unacknowledged at most, from the oldest: the replica recognises a
/// retry among a producer's last five batches only.
const WINDOW: u64 = BATCHES_PER_PRODUCER as u64;
/// Attempts one producer has in flight at most.
const MAX_IN_FLIGHT: usize = 3;
/// The chance that an acknowledgement never reaches the producer (its connection dropped after
/// the node answered), which then stalls for [`STALL_MS`] before it sends again (a client
/// that reconnects slowly, or pauses for a garbage collection). Its retry then comes after
/// retention may have deleted the batch, and after the leader may have restarted: the replica
/// must still recognise it (docs/simulation.md, "The whole replica").
const LOST_ACK_CHANCE: f64 = 0.02;
/// How long a producer whose acknowledgement was lost stalls, in ms.
const STALL_MS: (u64, u64) = (200, 3_000);

/// One send of a batch.
struct Attempt {
    id: u64,
    node: usize,
    incarnation: u32,
    sent_at: TimeMs,
}

/// A batch not acknowledged yet.
struct Unacked {
    /// The producer's n-th batch.
    index: u64,
    value: u64,
    record_count: u32,
    bytes: BytesMut,
    /// The send in flight, if any.
    attempt: Option<Attempt>,
    sends: u32,
}

/// An InitProducerId sent and not answered yet.
struct InitAttempt {
    request: u64,
    node: usize,
    incarnation: u32,
    sent_at: TimeMs,
}

pub(super) struct Producer {
    /// None until an InitProducerId is answered (and after the producer starts over).
    producer_id: Option<i64>,
    init: Option<InitAttempt>,
    next_index: u64,
    next_sequence: i32,
    /// In sequence order.
    unacked: VecDeque<Unacked>,
    believed_leader: usize,
    /// When its last attempt reaches its node: attempts arrive in the order they were sent, as
    /// on a producer's one connection (a reordered pipeline is refused OUT_OF_ORDER_SEQUENCE).
    last_delivery: TimeMs,
    /// It sends nothing before this (an acknowledgement of it was lost).
    stalled_until: TimeMs,
}

#[derive(Default)]
pub(super) struct Producers {
    pub(super) list: Vec<Producer>,
    next_attempt: u64,
    /// Attempts answered already (a second answer breaks the exactly-once contract).
    answered: BTreeSet<u64>,
    /// Attempt id -> (producer, batch index), while the attempt may still be answered.
    attempts: BTreeMap<u64, (usize, u64)>,
    /// Sends of a batch after its first.
    pub(super) retries: u64,
    /// Batches acknowledged (an acknowledgement of a retry counts again).
    pub(super) acks: u64,
    /// Acknowledgements the producers never heard (each followed by a stall).
    pub(super) lost_acks: u64,
    next_init: u64,
    /// InitProducerIds answered already (a second answer breaks the exactly-once contract).
    inits_answered: BTreeSet<u64>,
    /// Producer ids handed out.
    pub(super) ids_granted: u64,
}

impl Simulation {
    pub(super) fn start_producers(&mut self) {
        for p in 0..self.cfg.idempotent_producers {
            self.producers.list.push(Producer {
                producer_id: None,
                init: None,
                next_index: 0,
                next_sequence: 0,
                unacked: VecDeque::new(),
                believed_leader: 0,
                last_delivery: 0,
                stalled_until: 0,
            });
            self.schedule(1 + p as TimeMs, Event::ProducerTick { producer: p });
        }
    }

    /// One turn of producer `p`: give up on attempts unanswered too long, make a new batch
    /// when the window allows, and send what waits, oldest first.
    pub(super) fn producer_tick(&mut self, p: usize) -> Checked {
        let delay = self.rng.range(5, 40);
        self.schedule(delay, Event::ProducerTick { producer: p });
        let now = self.now;
        for batch in &mut self.producers.list[p].unacked {
            if batch
                .attempt
                .as_ref()
                .is_some_and(|a| now >= a.sent_at + CLIENT_TIMEOUT_MS)
            {
                let gone = batch.attempt.take().expect("checked");
                self.producers.attempts.remove(&gone.id);
            }
        }
        if now < self.producers.list[p].stalled_until {
            return Ok(());
        }
        if self.producers.list[p].producer_id.is_none() {
            return self.ask_for_producer_id(p);
        }
        let producer = &self.producers.list[p];
        let room = producer
            .unacked
            .front()
            .is_none_or(|oldest| producer.next_index - oldest.index < WINDOW);
        if room && !self.client.paused {
            self.new_producer_batch(p);
        }
        self.send_waiting(p);
        Ok(())
    }

    fn new_producer_batch(&mut self, p: usize) {
        let value = self.client.next_value;
        self.client.next_value += 1;
        let record_count = self.rng.range(1, 3) as u32;
        let producer = &mut self.producers.list[p];
        let producer_id = producer
            .producer_id
            .expect("a producer with an id makes batches");
        let fields = (producer_id, 0, producer.next_sequence);
        let bytes = sequenced_batch(value, record_count, self.now as i64, Some(fields));
        producer.next_sequence += record_count as i32;
        producer.unacked.push_back(Unacked {
            index: producer.next_index,
            value,
            record_count,
            bytes,
            attempt: None,
            sends: 0,
        });
        producer.next_index += 1;
        self.checker.register_idempotent_batch(
            &self.producers.list[p].unacked.back().expect("pushed").bytes,
            value,
        );
    }

    /// Sends the batches without an attempt in flight, in sequence order, up to the bound.
    fn send_waiting(&mut self, p: usize) {
        let node = self.producers.list[p].believed_leader;
        let incarnation = self.nodes[node].incarnation;
        let in_flight = self.producers.list[p]
            .unacked
            .iter()
            .filter(|b| b.attempt.is_some())
            .count();
        let waiting: Vec<u64> = self.producers.list[p]
            .unacked
            .iter()
            .filter(|b| b.attempt.is_none())
            .map(|b| b.index)
            .take(MAX_IN_FLIGHT.saturating_sub(in_flight))
            .collect();
        for index in waiting {
            let id = ATTEMPT_ID_BASE + self.producers.next_attempt;
            self.producers.next_attempt += 1;
            let sent_at = self.now;
            let batch = self.producer_batch(p, index).expect("waiting batch");
            batch.attempt = Some(Attempt {
                id,
                node,
                incarnation,
                sent_at,
            });
            batch.sends += 1;
            if batch.sends > 1 {
                self.producers.retries += 1;
            }
            self.producers.attempts.insert(id, (p, index));
            let latency = self.rng.range(1, 3);
            let producer = &mut self.producers.list[p];
            let at = (self.now + latency).max(producer.last_delivery);
            producer.last_delivery = at;
            self.schedule(at - self.now, Event::ProducerDeliver { attempt: id });
        }
    }

    fn producer_batch(&mut self, p: usize, index: u64) -> Option<&mut Unacked> {
        self.producers.list[p]
            .unacked
            .iter_mut()
            .find(|b| b.index == index)
    }

    /// The attempt reaches its node, if that node still runs the incarnation it was sent to.
    pub(super) fn producer_deliver(&mut self, attempt: u64) -> Checked {
        let Some(&(p, index)) = self.producers.attempts.get(&attempt) else {
            return Ok(()); // given up on
        };
        let batch = self.producer_batch(p, index).expect("an attempt's batch");
        let a = batch.attempt.as_ref().expect("the attempt in flight");
        let (node, incarnation) = (a.node, a.incarnation);
        let input = Input::ClientAppend {
            id: attempt,
            batch: batch.bytes.clone(),
            record_count: batch.record_count,
            acks: Acks::Quorum,
        };
        if !self.nodes[node].running() || self.nodes[node].incarnation != incarnation {
            self.producer_attempt_lost(attempt);
            self.producers.list[p].believed_leader = self.rng.index(self.nodes.len());
            return Ok(());
        }
        self.count_event("produce", node as NodeId, attempt as i64, 0);
        self.step_node(node, input)?;
        self.sweep(node)
    }

    /// The attempt will not be answered (its node went away): its batch waits to be sent again.
    fn producer_attempt_lost(&mut self, attempt: u64) {
        let Some((p, index)) = self.producers.attempts.remove(&attempt) else {
            return;
        };
        if let Some(batch) = self.producer_batch(p, index) {
            if batch.attempt.as_ref().is_some_and(|a| a.id == attempt) {
                batch.attempt = None;
            }
        }
    }

    /// Node `i` stopped: its attempts in flight are lost.
    pub(super) fn producers_lost_node(&mut self, i: usize) {
        let lost: Vec<u64> = self
            .producers
            .list
            .iter()
            .flat_map(|p| p.unacked.iter())
            .filter_map(|b| b.attempt.as_ref())
            .filter(|a| a.node == i)
            .map(|a| a.id)
            .collect();
        for attempt in lost {
            self.producer_attempt_lost(attempt);
        }
    }

    /// Node `i` answered attempt `attempt`.
    pub(super) fn producer_done(
        &mut self,
        i: usize,
        attempt: u64,
        result: AppendResult,
    ) -> Checked {
        let id = self.nodes[i].id;
        answered_once(&mut self.producers.answered, id, "produce attempt", attempt)?;
        let Some((p, index)) = self.producers.attempts.remove(&attempt) else {
            return Ok(()); // given up on, or the batch was acknowledged through another attempt
        };
        let batch = self.producer_batch(p, index).expect("an attempt's batch");
        let sent_to = batch.attempt.as_ref().map(|a| a.node);
        if sent_to != Some(i) {
            return breach(
                Invariant::ExactlyOnceContract,
                format!("node {id} answered produce attempt {attempt} sent to {sent_to:?}"),
            );
        }
        batch.attempt = None;
        let (value, record_count) = (batch.value, batch.record_count);
        match result {
            AppendResult::Appended {
                base_offset,
                last_offset,
            } => {
                if last_offset - base_offset + 1 != i64::from(record_count) {
                    return breach(
                        Invariant::IdempotentExactlyOnce,
                        format!("produce attempt {attempt} of {record_count} records acknowledged at {base_offset}..={last_offset}"),
                    );
                }
                let ack = Acked {
                    value,
                    base_offset,
                    last_offset,
                };
                let log = &self.nodes[i].disk.written;
                self.checker.on_idempotent_ack(id, ack, log)?;
                if self.cfg.producer_stalls && self.rng.chance(LOST_ACK_CHANCE) {
                    // Checked, but never heard: the batch waits to be sent again, after the
                    // stall.
                    let stall = self.rng.range(STALL_MS.0, STALL_MS.1);
                    self.producers.list[p].stalled_until = self.now + stall;
                    self.producers.lost_acks += 1;
                    return Ok(());
                }
                self.producers.acks += 1;
                let producer = &mut self.producers.list[p];
                producer.unacked.retain(|b| b.index != index);
                if producer.unacked.is_empty() && self.rng.chance(NEW_ID_CHANCE) {
                    // A new session of the client: a new id, sequences from 0.
                    let producer = &mut self.producers.list[p];
                    producer.producer_id = None;
                    producer.next_sequence = 0;
                }
            }
            AppendResult::Failed { leader_id, .. } => {
                let producer = &mut self.producers.list[p];
                producer.believed_leader = match usize::try_from(leader_id) {
                    Ok(leader) if leader < self.nodes.len() => leader,
                    _ => self.rng.index(self.nodes.len()),
                };
            }
        }
        Ok(())
    }

    /// A producer without an id asks a random node for one (again after 4 s unanswered).
    fn ask_for_producer_id(&mut self, p: usize) -> Checked {
        let now = self.now;
        if let Some(init) = &self.producers.list[p].init {
            if now < init.sent_at + CLIENT_TIMEOUT_MS {
                return Ok(());
            }
        }
        let node = self.rng.index(self.nodes.len());
        let request = INIT_ID_BASE + self.producers.next_init;
        self.producers.next_init += 1;
        self.producers.list[p].init = Some(InitAttempt {
            request,
            node,
            incarnation: self.nodes[node].incarnation,
            sent_at: now,
        });
        let latency = self.rng.range(1, 3);
        self.schedule(latency, Event::InitDeliver { producer: p });
        Ok(())
    }

    /// Producer `p`'s InitProducerId reaches its node, if that node still runs the incarnation
    /// it was sent to.
    pub(super) fn init_deliver(&mut self, p: usize) -> Checked {
        let Some(init) = &self.producers.list[p].init else {
            return Ok(());
        };
        let (request, node, incarnation) = (init.request, init.node, init.incarnation);
        if !self.nodes[node].running() || self.nodes[node].incarnation != incarnation {
            self.producers.list[p].init = None;
            return Ok(());
        }
        self.count_event("init-producer-id", node as NodeId, request as i64, 0);
        self.step_node(node, ReplicaInput::InitProducerId { request })?;
        self.sweep(node)
    }

    /// Node `i` answered InitProducerId `request`: an id no replica handed out before.
    pub(super) fn producer_id_answered(
        &mut self,
        i: usize,
        request: u64,
        result: Result<i64, ErrorCode>,
    ) -> Checked {
        let id = self.nodes[i].id;
        answered_once(
            &mut self.producers.inits_answered,
            id,
            "InitProducerId",
            request,
        )?;
        if let Ok(producer_id) = result {
            self.checker.on_producer_id(id, producer_id)?;
            self.producers.ids_granted += 1;
        }
        let waiting = self.producers.list.iter().position(|p| {
            p.init
                .as_ref()
                .is_some_and(|init| init.request == request && init.node == i)
        });
        let Some(p) = waiting else {
            return Ok(()); // given up on
        };
        let producer = &mut self.producers.list[p];
        producer.init = None;
        if let Ok(producer_id) = result {
            producer.producer_id = Some(producer_id);
            producer.next_sequence = 0;
        }
        Ok(())
    }
}
