//! The producer-state snapshot in the simulator (docs/simulation.md, "Retention"): a replica's
//! `Output::WriteProducerSnapshot` is written to the simulated disk later, as the node's
//! snapshot thread writes, replaces and syncs the file; a crash before then keeps the old file,
//! and with producers some writes are slow and some fail (a full disk), as on a node. A restart
//! uses the file when it fits the log (`nodes.rs`, `rebuilt_idempotence`).

use crate::base::Offset;
use crate::replica::Input as ReplicaInput;
use crate::sim::invariants::Checked;

use super::scheduler::Event;
use super::Simulation;

/// How long a snapshot write takes without producers (fixed: no random draw, so runs without
/// producers keep their random streams).
const SNAPSHOT_WRITE_MS: u64 = 5;
/// With producers: a write takes 1-399 ms, and this share of them fails.
const SNAPSHOT_WRITE_FAILS: f64 = 0.1;

impl Simulation {
    pub(super) fn snapshot_asked(&mut self, i: usize, offset: Offset, bytes: Vec<u8>) -> Checked {
        let incarnation = self.nodes[i].incarnation;
        let (delay, ok) = match self.cfg.idempotent_producers {
            0 => (SNAPSHOT_WRITE_MS, true),
            _ => (
                self.rng.range(1, 400),
                !self.rng.chance(SNAPSHOT_WRITE_FAILS),
            ),
        };
        self.schedule(
            delay,
            Event::ProducerSnapshotWritten {
                node: i,
                incarnation,
                offset,
                bytes: ok.then_some(bytes),
            },
        );
        Ok(())
    }

    pub(super) fn snapshot_written(
        &mut self,
        i: usize,
        incarnation: u32,
        offset: Offset,
        bytes: Option<Vec<u8>>,
    ) -> Checked {
        let node = &mut self.nodes[i];
        if node.incarnation != incarnation || !node.running() {
            return Ok(()); // the node went away first: the old file stays
        }
        let ok = bytes.is_some();
        if let Some(bytes) = bytes {
            node.disk.producer_snapshot = Some(bytes);
            self.producer_snapshots += 1;
        }
        self.step_node(i, ReplicaInput::ProducerSnapshotWritten { offset, ok })?;
        self.sweep(i)
    }
}
