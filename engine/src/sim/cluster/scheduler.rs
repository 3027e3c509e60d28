//! The event queue: what can happen, in which order, and when the next tick or restart is due.

use std::cmp::Ordering;

use crate::raft::{Correlation, Epoch, NodeId, Offset, RequestId, TimeMs};

use super::network::Message;
use super::Simulation;

#[derive(Clone, Debug)]
pub(super) enum Event {
    Tick {
        node: usize,
        incarnation: u32,
    },
    Deliver(Box<Message>),
    Durable {
        node: usize,
        incarnation: u32,
        seq: u64,
    },
    ReadDone {
        node: usize,
        incarnation: u32,
        read_id: u64,
        from: Offset,
        max_bytes: usize,
    },
    RequestFailed {
        node: usize,
        incarnation: u32,
        to: NodeId,
        correlation: Correlation,
    },
    ClientDeliver {
        append_id: u64,
    },
    ClientTick,
    /// Idempotent producer `producer` takes its next turn (only with
    /// `SimConfig::idempotent_producers`).
    ProducerTick {
        producer: usize,
    },
    /// A producer's InitProducerId reaches the node it was sent to.
    InitDeliver {
        producer: usize,
    },
    /// A producer's attempt reaches the node it was sent to.
    ProducerDeliver {
        attempt: u64,
    },
    /// The group committer takes its next turn (only with `SimConfig::group_commits`).
    CommitterTick,
    /// An offset commit reaches the node it was sent to.
    CommitDeliver {
        request: u64,
    },
    /// Consumer `consumer` sends its next fetch.
    ConsumerTick {
        consumer: usize,
    },
    /// Fetch `fetch_id` of `consumer` must be answered by now (unless its node went away).
    ConsumerWatch {
        consumer: usize,
        fetch_id: u64,
    },
    /// Request `request` (a FetchQuorumRecords) to `node` must be answered by now, unless the
    /// node went away. Handled without a trace entry or a random draw: runs replay as before.
    FetchWatch {
        node: usize,
        incarnation: u32,
        request: RequestId,
    },
    Chaos,
    Restart {
        node: usize,
    },
    /// Kill `node` if it still leads `epoch`.
    KillIfLeader {
        node: usize,
        epoch: Epoch,
    },
    PhaseChange,
    /// The reassigner's next move (only with `SimConfig::reassign`).
    ReassignTick,
    /// The writer of `node` finished the retention run its replica asked for (only with
    /// `SimConfig::retention`).
    /// The producer-state snapshot `node` asked for is written (its file replaced), or its
    /// write failed (`bytes` None: the old file stays).
    ProducerSnapshotWritten {
        node: usize,
        incarnation: u32,
        offset: crate::base::Offset,
        bytes: Option<Vec<u8>>,
    },
    RetentionDone {
        node: usize,
        incarnation: u32,
        bounds: crate::replica::RetentionBounds,
    },
    /// The reassigner's request reaches the node it was sent to.
    ReassignDeliver {
        timeout: TimeMs,
    },
    /// The liar's next message, if fault period `period` is still the current one.
    Lie {
        period: u64,
    },
}

pub(super) struct Scheduled {
    pub(super) time: TimeMs,
    pub(super) seq: u64,
    pub(super) event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    // Reversed: BinaryHeap is a max-heap and the earliest (time, seq) must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

impl Simulation {
    pub(super) fn schedule(&mut self, delay: TimeMs, event: Event) {
        self.next_seq += 1;
        self.queue.push(Scheduled {
            time: self.now + delay,
            seq: self.next_seq,
            event,
        });
    }

    pub(super) fn schedule_tick(&mut self, i: usize) {
        let node = &self.nodes[i];
        let Some(replica) = node.replica.as_ref() else {
            return;
        };
        let Some(deadline) = replica.next_deadline() else {
            return;
        };
        let at = deadline.max(self.now + 1);
        if node.tick_at.is_some_and(|t| t <= at && t > self.now) {
            return; // an earlier tick is already due
        }
        let incarnation = node.incarnation;
        self.nodes[i].tick_at = Some(at);
        self.schedule(
            at - self.now,
            Event::Tick {
                node: i,
                incarnation,
            },
        );
    }

    pub(super) fn schedule_restart(&mut self, i: usize) {
        if self.cfg.faults {
            let downtime = self.rng.range(50, 2_000);
            self.schedule(downtime, Event::Restart { node: i });
        }
    }
}
