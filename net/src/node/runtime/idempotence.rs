//! Idempotent produce on the node (docs/protocol.md, "Idempotent producers"): the rebuild of the
//! producer state (and of the producer-id blocks, producer_ids.rs) from the log at start, and
//! the operator's hint for transactional batches. The decisions (which batch is appended,
//! refused or answered as a duplicate) are the replica's (engine::replica::producing).

use std::time::Instant;

use engine::log::{Log, LogError};
use engine::producer_ids::ProducerIdLedger;
use engine::producer_snapshot_store::ProducerSnapshotStore;
use engine::producers::ProducerStates;
use engine::raft::Offset;
use engine::record::{BatchHeader, RecordError};
use engine::replica::rebuild::{FeedError, ProducerRebuild};

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
    #[error("the batch at offset {offset}: {source}")]
    Feed { offset: Offset, source: FeedError },
    #[error("the log ends at offset {offset}, before its end offset {end}")]
    EndsEarly { offset: Offset, end: Offset },
}

/// Feeds `rebuild` the log's batches from where it starts to the log's end, oldest first.
fn replay(log: &Log, rebuild: &mut ProducerRebuild) -> Result<(), RebuildError> {
    let end = log.end_offset();
    let mut offset = rebuild.from();
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
            let base = header.base_offset;
            offset = base + i64::from(header.last_offset_delta) + 1;
            rebuild
                .feed(base, offset, &piece)
                .map_err(|source| RebuildError::Feed {
                    offset: base,
                    source,
                })?;
        }
    }
    Ok(())
}

/// What a start rebuilt for idempotent producers and consumer groups: the producer state, the
/// producer-id ledger, the committed offsets, and the snapshot used (its offset and its file's
/// bytes), if one was.
pub(super) struct Rebuilt {
    pub(super) producers: ProducerStates,
    pub(super) ledger: ProducerIdLedger,
    pub(super) offsets: engine::groups::OffsetStore,
    pub(super) loaded: Option<(Offset, Bytes)>,
}

impl Node {
    /// Rebuilds the producer state and the producer-id blocks of node `own_id` from `log`
    /// before the node serves anything (start-up): from the producer-state snapshot in
    /// `snapshots` when it fits the log (its offset is returned too), else from the log's start
    /// (`engine::replica::rebuild` decides; this reads). With the snapshot's offset and
    /// bytes, when one was used.
    pub(super) fn rebuild_idempotence(
        log: &Log,
        snapshots: &ProducerSnapshotStore,
        own_id: NodeId,
    ) -> Result<Rebuilt, NodeError> {
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
        let (snapshot, file) = snapshot.unzip();
        let mut rebuild = ProducerRebuild::new(
            own_id,
            super::producer_ids::new_incarnation(),
            snapshot,
            log.start_offset(),
        );
        replay(log, &mut rebuild)?;
        let rebuilt = rebuild.finish();
        info!(
            batches = rebuilt.batches,
            bytes = rebuilt.bytes,
            from_snapshot = ?rebuilt.snapshot,
            producers = rebuilt.producers.len(),
            groups = rebuilt.offsets.group_count(),
            offset_records = rebuilt.offsets.uncommitted(),
            ms = started.elapsed().as_millis() as u64,
            "rebuilt the producer state and the committed offsets from the log"
        );
        Ok(Rebuilt {
            loaded: rebuilt.snapshot.zip(file),
            producers: rebuilt.producers,
            ledger: rebuilt.ledger,
            offsets: rebuilt.offsets,
        })
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
