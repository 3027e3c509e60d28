//! Consumers: simulated Kafka consumers that read the log with `Input::ClientFetch` from whoever
//! they believe leads, follow NOT_LEADER_OR_FOLLOWER hints, fencing and diverging epochs, and
//! are checked on every answer (docs/simulation.md, "Consumers").

use std::collections::BTreeSet;

use crate::raft::{
    ClientFetch, ClientFetchResult, Epoch, ErrorCode, Input, NodeId, Offset, TimeMs,
};
use crate::sim::invariants::{answered_once, breach, Checked, Invariant};

use super::scheduler::Event;
use super::Simulation;

/// A fetch unanswered this long on a node that kept running was dropped: every wait is capped
/// by the cores' fetch max wait (100 ms) and a log read takes at most 5 ms.
const CONSUMER_ANSWER_BOUND_MS: TimeMs = 1_000;

/// One fetch a consumer has outstanding.
#[derive(Clone, Copy, Debug)]
pub(super) struct ConsumerFetch {
    id: u64,
    node: usize,
    incarnation: u32,
    position: Offset,
    /// The end of the appends acknowledged (acks=-1) when it was sent: the answer's high
    /// watermark must reach it (ConsumerReadFresh).
    acked_end: Offset,
}

#[derive(Clone, Debug, Default)]
pub(super) struct SimConsumer {
    believed_leader: usize,
    /// The leader epoch it sends as current (learned from answers), if any.
    known_epoch: Option<Epoch>,
    /// The next offset to read: everything below was handed over, in order, from offset 0.
    position: Offset,
    /// The epoch of the last batch handed over.
    last_epoch: Option<Epoch>,
    in_flight: Option<ConsumerFetch>,
    /// The highest high watermark it was answered with (monotonic reads).
    seen_hw: Offset,
}

#[derive(Default)]
pub(super) struct Consumers {
    pub(super) all: Vec<SimConsumer>,
    next_id: u64,
    /// Fetch ids answered (a second answer breaks the exactly-once contract).
    answered: BTreeSet<u64>,
    pub(super) fetches: u64,
    pub(super) batches: u64,
}

impl Simulation {
    pub(super) fn start_consumers(&mut self) {
        for c in 0..self.cfg.consumers {
            let believed_leader = self.rng.index(self.nodes.len());
            self.consumers.all.push(SimConsumer {
                believed_leader,
                ..SimConsumer::default()
            });
            let delay = self.rng.range(1, 20);
            self.schedule(delay, Event::ConsumerTick { consumer: c });
        }
    }

    /// Sends the consumer's next fetch (if none is outstanding).
    pub(super) fn consumer_tick(&mut self, c: usize) -> Checked {
        let consumer = &self.consumers.all[c];
        if consumer.in_flight.is_some() {
            return Ok(());
        }
        // With reads checked (tick_before_input): now and then a metadata refresh that lands
        // on a node with a stale view sends the consumer to any node, a deposed leader
        // included, while the producers go where the leader is (docs/simulation.md, "Reads").
        if self.cfg.tick_before_input && self.rng.chance(0.05) {
            self.consumers.all[c].believed_leader = self.rng.index(self.nodes.len());
        }
        let consumer = &self.consumers.all[c];
        let node = consumer.believed_leader;
        if !self.nodes[node].running() {
            self.consumer_looks_elsewhere(c);
            return Ok(());
        }
        let fetch = self.draw_consumer_fetch(c);
        self.consumers.next_id += 1;
        let id = self.consumers.next_id;
        let incarnation = self.nodes[node].incarnation;
        self.consumers.all[c].in_flight = Some(ConsumerFetch {
            id,
            node,
            incarnation,
            position: fetch.fetch_offset,
            acked_end: self.checker.acked_end,
        });

        self.consumers.fetches += 1;
        self.schedule(
            CONSUMER_ANSWER_BOUND_MS,
            Event::ConsumerWatch {
                consumer: c,
                fetch_id: id,
            },
        );
        self.count_event(
            "consumer-fetch",
            node as NodeId,
            id as i64,
            fetch.fetch_offset,
        );
        self.step_node(node, Input::ClientFetch { id, fetch })?;
        self.sweep(node)
    }

    /// A real consumer's fetch, with the odd stale belief and every size and wait edge.
    fn draw_consumer_fetch(&mut self, c: usize) -> ClientFetch {
        let consumer = &self.consumers.all[c];
        let (position, last_epoch, known_epoch) =
            (consumer.position, consumer.last_epoch, consumer.known_epoch);
        // A newer epoch than the one it read: the leader answers with a diverging epoch that
        // must never cut what the consumer has.
        let last_fetched_epoch = if self.rng.chance(0.05) {
            last_epoch.map(|e| e + 1)
        } else {
            last_epoch
        };
        let current_leader_epoch = if self.rng.chance(0.1) {
            None
        } else {
            known_epoch
        };
        let max_wait_ms = [0, 10, 100, 500][self.rng.index(4)];
        let min_bytes = [0, 1, 1, 2_000][self.rng.index(4)];
        let max_bytes = [1, 500, 16 << 10, 1 << 20][self.rng.index(4)];
        ClientFetch {
            fetch_offset: position,
            last_fetched_epoch,
            current_leader_epoch,
            max_wait_ms,
            min_bytes,
            max_bytes,
        }
    }

    /// Node `i` answered fetch `id`: exactly once, to the consumer that asked it there, and
    /// everything handed over is the committed log from the consumer's position.
    pub(super) fn consumer_done(
        &mut self,
        i: usize,
        id: u64,
        result: ClientFetchResult,
    ) -> Checked {
        let node_id = self.nodes[i].id;
        answered_once(&mut self.consumers.answered, node_id, "consumer fetch", id)?;
        let asked = self.consumers.all.iter().position(|c| {
            c.in_flight.is_some_and(|f| {
                f.id == id && f.node == i && f.incarnation == self.nodes[i].incarnation
            })
        });
        let Some(c) = asked else {
            return breach(
                Invariant::ExactlyOnceContract,
                format!("node {node_id} answered consumer fetch {id} that it was not asked"),
            );
        };
        let fetch = self.consumers.all[c].in_flight.take().expect("found");
        self.consume(c, node_id, fetch, result)?;
        // A consumer's think time, like the client's: the fetches stay a minority of events.
        let delay = self.rng.range(5, 40);
        self.schedule(delay, Event::ConsumerTick { consumer: c });
        Ok(())
    }

    fn consume(
        &mut self,
        c: usize,
        node_id: NodeId,
        fetch: ConsumerFetch,
        r: ClientFetchResult,
    ) -> Checked {
        let nodes = self.nodes.len();
        let consumer = &mut self.consumers.all[c];
        match r.error {
            ErrorCode::NONE => {
                if let Some(d) = r.diverging_epoch {
                    // It read committed data only, and committed data is never cut.
                    if d.offset < fetch.position || !r.batches.is_empty() {
                        return breach(
                            Invariant::ConsumerReadCommitted,
                            format!(
                                "node {node_id} tells consumer {c} at {} to diverge to {d:?} ({} batches)",
                                fetch.position,
                                r.batches.len()
                            ),
                        );
                    }
                    return Ok(());
                }
                self.checker.on_consumed(
                    c,
                    node_id,
                    fetch.position,
                    r.high_watermark,
                    &r.batches,
                )?;
                // Freshness rests on the lease, which rests on clocks: checked when every core
                // reads the present before each input, as the node runtime does
                // (docs/simulation.md, "Reads"). Without, a core handles a message with the
                // clock of its last deadline, a clock that jumps by more than any drift bound.
                if self.cfg.tick_before_input {
                    self.checker.on_read_answered(
                        c,
                        node_id,
                        r.high_watermark,
                        fetch.acked_end,
                        self.consumers.all[c].seen_hw,
                    )?;
                }
                let consumer = &mut self.consumers.all[c];
                consumer.seen_hw = consumer.seen_hw.max(r.high_watermark);
                consumer.known_epoch = Some(r.leader_epoch);
                if let Some(last) = r.batches.last() {
                    consumer.position = last.end_offset();
                    consumer.last_epoch = Some(last.epoch);
                }
                self.consumers.batches += r.batches.len() as u64;
            }
            ErrorCode::NOT_LEADER_OR_FOLLOWER => {
                consumer.believed_leader = if (0..nodes as NodeId).contains(&r.leader_id) {
                    consumer.known_epoch = Some(r.leader_epoch);
                    r.leader_id as usize
                } else {
                    consumer.known_epoch = None;
                    self.rng.index(nodes)
                };
            }
            // Its epoch is behind: learn the leader's (a metadata refresh).
            ErrorCode::FENCED_LEADER_EPOCH => consumer.known_epoch = Some(r.leader_epoch),
            // This node is behind the leader it knows of: ask elsewhere.
            ErrorCode::UNKNOWN_LEADER_EPOCH => consumer.believed_leader = self.rng.index(nodes),
            ErrorCode::OFFSET_OUT_OF_RANGE => {
                // Only a node whose log ends before the position (a stale leader the consumer
                // did not fence) may say so; the consumer keeps its position and looks again.
                let outside =
                    fetch.position < r.log_start_offset || fetch.position > r.high_watermark;
                if !outside {
                    return breach(
                        Invariant::ConsumerReadCommitted,
                        format!(
                            "node {node_id} answers consumer {c} at {} out of range with bounds {}..{}",
                            fetch.position, r.log_start_offset, r.high_watermark
                        ),
                    );
                }
                consumer.believed_leader = self.rng.index(nodes);
                consumer.known_epoch = None;
            }
            other => {
                return breach(
                    Invariant::ConsumerReadCommitted,
                    format!("node {node_id} answers consumer {c} with error {other:?}"),
                )
            }
        }
        Ok(())
    }

    /// The fetch must have been answered by now unless its node went away.
    pub(super) fn consumer_watch(&mut self, c: usize, fetch_id: u64) -> Checked {
        let Some(f) = self.consumers.all[c].in_flight.filter(|f| f.id == fetch_id) else {
            return Ok(());
        };
        let node = &self.nodes[f.node];
        if node.running() && node.incarnation == f.incarnation {
            return breach(
                Invariant::ExactlyOnceContract,
                format!(
                    "node {} never answered consumer fetch {fetch_id} ({CONSUMER_ANSWER_BOUND_MS} ms)",
                    node.id
                ),
            );
        }
        Ok(())
    }

    /// Node `i` went away: its consumers' connections broke; they look for the leader again.
    pub(super) fn consumers_lost_node(&mut self, i: usize) {
        for c in 0..self.consumers.all.len() {
            if self.consumers.all[c].in_flight.is_some_and(|f| f.node == i) {
                self.consumers.all[c].in_flight = None;
                self.consumer_looks_elsewhere(c);
            }
        }
    }

    /// Consumer `c` lost its node: it believes a random one leads and fetches there a little
    /// later.
    fn consumer_looks_elsewhere(&mut self, c: usize) {
        self.consumers.all[c].believed_leader = self.rng.index(self.nodes.len());
        let delay = self.rng.range(5, 20);
        self.schedule(delay, Event::ConsumerTick { consumer: c });
    }
}
