//! Idempotent produce on the node (docs/protocol.md, "Idempotent producers"): the producer state
//! fed from every log change the core makes, the check of each batch with a producer id before
//! the core sees it, duplicates answered with their original offsets once committed, and the
//! rebuild of the state (and of the producer-id blocks, producer_ids.rs) from the log at start.

use std::time::Instant;

use engine::log::{Log, LogError};
use engine::producer_snapshot_store::ProducerSnapshotStore;
use engine::producers::{ProducerLimits, ProducerStates, SequenceCheck, Sequenced};
use engine::raft::Offset;
use engine::record::control::ProducerIdBlock;
use engine::record::{BatchHeader, RecordError};

use super::*;

/// Bytes read per step of the start-up rebuild.
const REBUILD_READ_BYTES: usize = 8 << 20;

/// The idempotence state of a node.
#[derive(Default)]
pub(super) struct Idempotence {
    pub(super) producers: ProducerStates,
    /// Duplicates waiting for the high watermark to pass their original batch:
    /// (original end offset, append id) -> original base offset.
    waiting: BTreeMap<(Offset, u64), Offset>,
}

/// What becomes of one batch of a Produce request.
pub(super) enum Admission {
    /// To the core (no producer id, in sequence, a new producer, or not the leader: the core
    /// answers NOT_LEADER_OR_FOLLOWER).
    Append,
    /// Answered with this error, not appended.
    Refuse(ErrorCode),
    /// Already in the log at these offsets: answered from there, not appended again.
    Duplicate {
        base_offset: Offset,
        last_offset: Offset,
    },
}

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
                if let Some(block) = super::producer_ids::producer_id_block(&piece) {
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
    /// `snapshots` when it fits the log, else from the log's start.
    pub(super) fn rebuild_idempotence(
        log: &Log,
        snapshots: &ProducerSnapshotStore,
        own_id: NodeId,
    ) -> Result<(Idempotence, super::producer_ids::ProducerIds), NodeError> {
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
                let ids = super::producer_ids::ProducerIds::restored(own_id, snapshot.blocks);
                (rebuilt, ids, Some(from))
            }
            None => (
                Rebuilt::default(),
                super::producer_ids::ProducerIds::new(own_id),
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
            ids.recovered(offset, block);
        }
        let idempotence = Idempotence {
            producers: rebuilt.producers,
            ..Idempotence::default()
        };
        Ok((idempotence, ids))
    }

    /// Decides what becomes of one batch of a Produce from `conn`, before the core sees it.
    pub(super) fn admit(&mut self, conn: ConnId, view: &BatchView) -> Admission {
        if view.is_transactional() {
            self.log_transactional_once(conn);
            return Admission::Refuse(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        }
        let Some(batch) = Sequenced::of(view.header()) else {
            return Admission::Append;
        };
        if self.core.role() != Role::Leader {
            return Admission::Append;
        }
        match self.idempotence.producers.check(&batch) {
            SequenceCheck::Append => Admission::Append,
            SequenceCheck::Duplicate {
                base_offset,
                last_offset,
            } => Admission::Duplicate {
                base_offset,
                last_offset,
            },
            SequenceCheck::OutOfOrder => Admission::Refuse(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER),
            SequenceCheck::FencedEpoch => Admission::Refuse(ErrorCode::INVALID_PRODUCER_EPOCH),
            SequenceCheck::Invalid => Admission::Refuse(ErrorCode::INVALID_RECORD),
        }
    }

    fn log_transactional_once(&mut self, conn: ConnId) {
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

    /// A duplicate's answer (append `id`): its original offsets, once the high watermark passes
    /// them, like any acks=-1 answer (acks=1 waits for the same, which is stricter).
    pub(super) fn answer_duplicate(&mut self, id: u64, base_offset: Offset, last_offset: Offset) {
        let end = last_offset + 1;
        if self.core.high_watermark().is_some_and(|hw| hw >= end) {
            self.append_done(
                id,
                AppendResult::Appended {
                    base_offset,
                    last_offset,
                },
            );
        } else {
            self.idempotence.waiting.insert((end, id), base_offset);
        }
    }

    /// Every log change the core makes goes through the producer state, in order, on every
    /// replica, so a new leader has it already.
    pub(super) fn track_log_op(&mut self, op: &LogOp) {
        match &op.kind {
            LogOpKind::Append(batches) => {
                self.snapshots
                    .appended(batches.iter().map(|b| b.bytes.len() as u64).sum());
                for batch in batches.iter().filter(|b| !b.is_control) {
                    // The core's batches were validated when they came in.
                    if let Some(sequenced) = BatchHeader::read(&batch.bytes)
                        .ok()
                        .as_ref()
                        .and_then(Sequenced::of)
                    {
                        self.idempotence
                            .producers
                            .append(&sequenced, batch.base_offset);
                    }
                }
            }
            LogOpKind::TruncateTo(offset) => self.forget_producer_state_from(*offset),
            // What the log held at or above its high watermark went with it; the state of the
            // committed batches below stays (the batches between them and the new start are
            // not replayed: docs/protocol.md, "Retention and the log start").
            LogOpKind::ResetTo { .. } => {
                let hw = self.core.high_watermark().unwrap_or(0);
                self.forget_producer_state_from(hw);
            }
        }
    }

    fn forget_producer_state_from(&mut self, offset: Offset) {
        self.idempotence.producers.truncate_to(offset);
        // Ends past the new log end are the keys from (offset + 1, 0) on.
        let gone = self.idempotence.waiting.split_off(&(offset + 1, 0));
        self.fail_duplicates(gone);
    }

    /// The high watermark advanced: the producer state forgets what can no longer be truncated
    /// and waiting duplicates are answered.
    pub(super) fn on_high_watermark(&mut self, hw: Offset) {
        self.idempotence.producers.set_committed(hw);
        while let Some(entry) = self.idempotence.waiting.first_entry() {
            let (end, id) = *entry.key();
            if end > hw {
                break;
            }
            let base_offset = entry.remove();
            self.append_done(
                id,
                AppendResult::Appended {
                    base_offset,
                    last_offset: end - 1,
                },
            );
        }
    }

    /// No longer the leader: waiting duplicates are told to go to the new one.
    pub(super) fn on_role_for_idempotence(&mut self, role: Role) {
        if role != Role::Leader {
            let all = std::mem::take(&mut self.idempotence.waiting);
            self.fail_duplicates(all);
        }
    }

    /// Answers duplicates taken out of the waiting set: their original batch may never commit.
    fn fail_duplicates(&mut self, gone: BTreeMap<(Offset, u64), Offset>) {
        let leader_id = self.core.leader_id().unwrap_or(-1);
        let leader_epoch = self.core.epoch();
        for (_, id) in gone.into_keys() {
            self.append_done(
                id,
                AppendResult::Failed {
                    error: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                    leader_id,
                    leader_epoch,
                },
            );
        }
    }
}
