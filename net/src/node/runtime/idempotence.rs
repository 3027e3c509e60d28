//! Idempotent produce on the node (docs/protocol.md, "Idempotent producers"): the rebuild of the
//! producer state (and of the producer-id blocks, producer_ids.rs) from the log at start, and
//! the operator's hint for transactional batches. The decisions (which batch is appended,
//! refused or answered as a duplicate) are the replica's (engine::replica::producing).

use std::time::Instant;

use engine::log::{Log, LogError};
use engine::producer_ids::ProducerIdLedger;
use engine::producer_snapshot_store::ProducerSnapshotStore;
use engine::producers::{ProducerLimits, ProducerStates, Sequenced};
use engine::raft::Offset;
use engine::record::control::ProducerIdBlock;
use engine::record::{BatchHeader, RecordError};

use super::*;

/// Bytes read per step of the start-up rebuild.
const REBUILD_READ_BYTES: usize = 8 << 20;

/// Why the producer state could not be rebuilt from the log at start.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error("reading the log at offset {offset}: {source}")]
    Read { offset: Offset, source: LogError },
    #[error("the batch at offset {offset} does not parse: {source}")]
    Batch { offset: Offset, source: RecordError },
    #[error("the log ends at offset {offset}, before its end offset {end}")]
    EndsEarly { offset: Offset, end: Offset },
}

/// What a rebuild read, for the start-up log line.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RebuildStats {
    pub(super) batches: u64,
    pub(super) bytes: u64,
}

/// What the log implies for idempotent producers: the producer state, and the producer-id
/// blocks with their offsets.
#[derive(Default)]
pub(super) struct Rebuilt {
    pub(super) producers: ProducerStates,
    pub(super) blocks: Vec<(Offset, ProducerIdBlock)>,
    pub(super) stats: RebuildStats,
}

/// Feeds `rebuilt` the log's batch headers from `from` (a batch boundary) to its end, oldest
/// first: the producer state and the block records they imply.
fn replay(log: &Log, from: Offset, rebuilt: &mut Rebuilt) -> Result<(), RebuildError> {
    let end = log.end_offset();
    let mut offset = from;
    while offset < end {
        let pieces = log
            .read(offset, REBUILD_READ_BYTES)
            .map_err(|source| RebuildError::Read { offset, source })?;
        if pieces.is_empty() {
            return Err(RebuildError::EndsEarly { offset, end });
        }
        for piece in pieces {
            let header = BatchHeader::read(&piece)
                .map_err(|source| RebuildError::Batch { offset, source })?;
            offset = header.base_offset + i64::from(header.last_offset_delta) + 1;
            if header.base_offset < from {
                // A batch across `from` (a snapshot's offset is a high watermark, so a batch
                // boundary, but the read would return it whole): the snapshot holds it.
                continue;
            }
            if header.is_control() {
                if let Some(block) = engine::replica::producer_ids::producer_id_block(&piece) {
                    rebuilt.blocks.push((header.base_offset, block));
                }
            } else if let Some(batch) = Sequenced::of(&header) {
                rebuilt.producers.append(&batch, header.base_offset);
            }
            rebuilt.stats.batches += 1;
            rebuilt.stats.bytes += piece.len() as u64;
        }
    }
    Ok(())
}

impl Node {
    /// Rebuilds the producer state and the producer-id blocks of node `own_id` from `log`
    /// before the node serves anything (start-up): from the producer-state snapshot in
    /// `snapshots` when it fits the log (its offset is returned too), else from the log's start.
    pub(super) fn rebuild_idempotence(
        log: &Log,
        snapshots: &ProducerSnapshotStore,
        own_id: NodeId,
    ) -> Result<(ProducerStates, ProducerIdLedger, Option<Offset>), NodeError> {
        let started = Instant::now();
        let snapshot = match producer_snapshots::load(snapshots, log) {
            Ok(found) => found,
            Err(why) => {
                warn!(
                    node = own_id,
                    file = %snapshots.path().display(),
                    "the producer-state snapshot is not used ({why}): reading the whole log \
                     instead"
                );
                None
            }
        };
        let (mut rebuilt, mut ids, from) = match snapshot {
            Some(snapshot) => {
                let from = snapshot.offset;
                let rebuilt = Rebuilt {
                    producers: ProducerStates::restored(
                        ProducerLimits::default(),
                        from,
                        snapshot.producers,
                    ),
                    ..Rebuilt::default()
                };
                let ids = super::producer_ids::new_ledger(own_id, Some(snapshot.blocks));
                (rebuilt, ids, Some(from))
            }
            None => (
                Rebuilt::default(),
                super::producer_ids::new_ledger(own_id, None),
                None,
            ),
        };
        replay(log, from.unwrap_or(log.start_offset()), &mut rebuilt)?;
        info!(
            batches = rebuilt.stats.batches,
            bytes = rebuilt.stats.bytes,
            from_snapshot = ?from,
            producers = rebuilt.producers.len(),
            producer_id_blocks = rebuilt.blocks.len(),
            ms = started.elapsed().as_millis() as u64,
            "rebuilt the producer state from the log"
        );
        for (offset, block) in rebuilt.blocks {
            ids.on_append(offset, block);
        }
        Ok((rebuilt.producers, ids, from))
    }

    /// The replica refused a transactional batch from `conn`: the operator's hint, once per
    /// connection.
    pub(super) fn log_transactional_once(&mut self, conn: ConnId) {
        let Some(session) = self.sessions.get_mut(&conn) else {
            return;
        };
        if !session.warned_transactional {
            session.warned_transactional = true;
            warn!(
                peer = %session.addr,
                "refusing transactional batches with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: \
                 this node has no transaction coordinator (logged once per connection); \
                 leave transactional.id unset in the client (docs/clients.md)"
            );
        }
    }
}
