//! The producer state a replica starts with (docs/storage.md, "The producer-state snapshot"):
//! the snapshot when it fits the log, then the batches after it (or the whole log without one)
//! replayed into the producer state, the producer-id ledger and the groups' committed offsets. The node and the simulator read
//! their logs differently but decide the same way here, so a start the seeds prove is the start
//! the node makes.

use bytes::Bytes;
use thiserror::Error;

use crate::base::{Epoch, NodeId, Offset};
use crate::groups::offsets::{group_offsets_record, OffsetStore};
use crate::producer_ids::ProducerIdLedger;
use crate::producer_snapshot::ProducerSnapshot;
use crate::producers::{ProducerLimits, ProducerStates, Sequenced};
use crate::record::{BatchHeader, RecordError};

use super::producer_ids::producer_id_block;

/// Why a snapshot does not fit the log it would start from (the replica then reads the whole
/// log).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SnapshotMisfit {
    #[error(
        "its offset {offset} is outside the log's {start}..={end} (retention went past it, or \
         the log was reset or lost its tail)"
    )]
    Outside {
        offset: Offset,
        start: Offset,
        end: Offset,
    },
    #[error("it names epoch {named} at offset {offset}, the log {found:?}")]
    Epoch {
        named: Epoch,
        offset: Offset,
        found: Option<Epoch>,
    },
}

/// Does `snapshot` fit a log from `start` to `end` whose record at an offset has the epoch
/// `epoch_at` gives? Its offset must lie above the start (the batches below it are then still
/// in the log, or were when it was taken: a start at it replays nothing it lacks) and at most
/// the end, and the record just below it must be of the epoch it names (the same history, not
/// a log truncated and written again since). The offset is a high watermark, so a batch
/// boundary.
pub fn check_snapshot(
    snapshot: &ProducerSnapshot,
    start: Offset,
    end: Offset,
    epoch_at: impl FnOnce(Offset) -> Option<Epoch>,
) -> Result<(), SnapshotMisfit> {
    let offset = snapshot.offset;
    if offset <= start || offset > end {
        return Err(SnapshotMisfit::Outside { offset, start, end });
    }
    let found = epoch_at(offset - 1);
    if found != Some(snapshot.epoch) {
        return Err(SnapshotMisfit::Epoch {
            named: snapshot.epoch,
            offset: offset - 1,
            found,
        });
    }
    Ok(())
}

/// Why a batch could not be taken in.
#[derive(Debug, Error)]
pub enum FeedError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("a batch at offset {found} where the one at {expected} was due")]
    OutOfOrder { expected: Offset, found: Offset },
}

/// A rebuild under way: fed the log's batches from [`ProducerRebuild::from`] to the end, oldest
/// first, then [`ProducerRebuild::finish`]ed.
pub struct ProducerRebuild {
    producers: ProducerStates,
    ledger: ProducerIdLedger,
    offsets: OffsetStore,
    /// The first offset replayed: the snapshot's, or the log's start (also with a version 1
    /// snapshot, which did not keep the committed offsets: they are read from the whole log).
    from: Offset,
    /// Batches below this offset are the snapshot's producers' and blocks' already.
    producers_from: Offset,
    snapshot: Option<Offset>,
    /// The offset the next batch must start at (batches come in order, without gaps).
    next: Option<Offset>,
    batches: u64,
    bytes: u64,
}

/// What a rebuild made.
pub struct Rebuilt {
    pub producers: ProducerStates,
    pub ledger: ProducerIdLedger,
    /// The committed offsets (the snapshot's), and the records after them waiting for the
    /// high watermark the replica learns.
    pub offsets: OffsetStore,
    /// The snapshot's offset, when the rebuild started from one.
    pub snapshot: Option<Offset>,
    /// Batches and bytes replayed, for the start-up log line.
    pub batches: u64,
    pub bytes: u64,
}

impl ProducerRebuild {
    /// A rebuild for run `incarnation` of node `own_id`, from `snapshot` (one
    /// [`check_snapshot`] accepted) or, without one, from `log_start`.
    pub fn new(
        own_id: NodeId,
        incarnation: u64,
        snapshot: Option<ProducerSnapshot>,
        log_start: Offset,
    ) -> Self {
        let (producers, ledger, offsets, from, snapshot) = match snapshot {
            Some(s) => {
                assert!(s.offset > log_start, "a snapshot at or below the log start");
                let (offsets, from) = match s.groups {
                    Some(groups) => (OffsetStore::restored(s.offset, groups), s.offset),
                    None => (OffsetStore::default(), log_start),
                };
                (
                    ProducerStates::restored(ProducerLimits::default(), s.offset, s.producers),
                    ProducerIdLedger::restored(own_id, incarnation, s.blocks),
                    offsets,
                    from,
                    Some(s.offset),
                )
            }
            None => (
                ProducerStates::default(),
                ProducerIdLedger::new(own_id, incarnation),
                OffsetStore::default(),
                log_start,
                None,
            ),
        };
        Self {
            producers,
            ledger,
            offsets,
            from,
            producers_from: snapshot.unwrap_or(log_start),
            snapshot,
            next: None,
            batches: 0,
            bytes: 0,
        }
    }

    /// Where the log is to be read from.
    pub fn from(&self) -> Offset {
        self.from
    }

    /// The batch of the log at `base_offset`, up to `end_offset` (exclusive): its producer's
    /// batch, its producer-id block or its committed offsets taken in. A batch below
    /// [`ProducerRebuild::from`] (a read that returns the batch across it whole) is the
    /// snapshot's already and is skipped; so are the producers and blocks below the snapshot
    /// when a version 1 one makes the rebuild read the whole log for the offsets.
    pub fn feed(
        &mut self,
        base_offset: Offset,
        end_offset: Offset,
        batch: &Bytes,
    ) -> Result<(), FeedError> {
        assert!(base_offset < end_offset, "an empty batch");
        if base_offset < self.from {
            return Ok(());
        }
        // Out of order or with a gap: the producer state would miss batches (a damaged log;
        // the log's own checks should have refused it first).
        let expected = self.next.unwrap_or(base_offset);
        if base_offset != expected {
            return Err(FeedError::OutOfOrder {
                expected,
                found: base_offset,
            });
        }
        self.next = Some(end_offset);
        let header = BatchHeader::read(batch)?;
        let producers = base_offset >= self.producers_from;
        if header.is_control() {
            if let Some(record) = group_offsets_record(batch) {
                self.offsets.on_append(base_offset, record);
            } else if let Some(block) = producer_id_block(batch).filter(|_| producers) {
                self.ledger.on_append(base_offset, block);
            }
        } else if let Some(sequenced) = Sequenced::of(&header).filter(|_| producers) {
            self.producers.append(&sequenced, base_offset);
        }
        self.batches += 1;
        self.bytes += batch.len() as u64;
        Ok(())
    }

    pub fn finish(self) -> Rebuilt {
        Rebuilt {
            producers: self.producers,
            ledger: self.ledger,
            offsets: self.offsets,
            snapshot: self.snapshot,
            batches: self.batches,
            bytes: self.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer_ids::CommittedBlocks;

    fn snapshot(offset: Offset, epoch: Epoch) -> ProducerSnapshot {
        ProducerSnapshot {
            offset,
            epoch,
            blocks: CommittedBlocks {
                committed_to: offset,
                committed_end: 0,
                newest_record: None,
                latest: Vec::new(),
            },
            producers: Vec::new(),
            groups: Some(Vec::new()),
        }
    }

    #[test]
    fn a_snapshot_fits_inside_the_log_on_the_same_history() {
        let s = snapshot(10, 3);
        assert_eq!(check_snapshot(&s, 0, 10, |_| Some(3)), Ok(()));
        assert_eq!(check_snapshot(&s, 9, 20, |_| Some(3)), Ok(()));
        for (start, end) in [(10, 20), (11, 20), (0, 9)] {
            assert_eq!(
                check_snapshot(&s, start, end, |_| Some(3)),
                Err(SnapshotMisfit::Outside {
                    offset: 10,
                    start,
                    end
                })
            );
        }
        let mut asked = None;
        let misfit = check_snapshot(&s, 0, 20, |o| {
            asked = Some(o);
            Some(4)
        });
        assert_eq!(asked, Some(9), "the record just below the snapshot");
        assert_eq!(
            misfit,
            Err(SnapshotMisfit::Epoch {
                named: 3,
                offset: 9,
                found: Some(4)
            })
        );
    }

    #[test]
    fn batches_are_fed_in_order_from_where_the_rebuild_starts() {
        let batch = |producer: i64, seq: i32| {
            Bytes::from(crate::sim::batch::sequenced_batch(
                1,
                2,
                0,
                Some((producer, 0, seq)),
            ))
        };
        let mut r = ProducerRebuild::new(1, 7, Some(snapshot(10, 3)), 0);
        assert_eq!(r.from(), 10);
        r.feed(8, 10, &batch(5, 0))
            .expect("below the snapshot: skipped");
        r.feed(10, 12, &batch(6, 0))
            .expect("the first batch replayed");
        let gap = r.feed(14, 16, &batch(6, 2));
        assert!(
            matches!(
                gap,
                Err(FeedError::OutOfOrder {
                    expected: 12,
                    found: 14
                })
            ),
            "{gap:?}"
        );
        r.feed(12, 14, &batch(6, 2)).expect("the next in order");
        let rebuilt = r.finish();
        assert_eq!((rebuilt.batches, rebuilt.snapshot), (2, Some(10)));
        assert_eq!(
            rebuilt.producers.len(),
            1,
            "only the producer above the snapshot"
        );
    }

    /// A version 1 snapshot did not keep the committed offsets: the rebuild reads the whole log
    /// for them, and takes the producers' batches in only from the snapshot on (those below are
    /// the snapshot's). A current one restores them and replays from its offset.
    #[test]
    fn a_version_1_snapshot_reads_the_offsets_from_the_whole_log() {
        use crate::groups::offsets::{GroupOffsetsRecord, PartitionOffset};
        let commit = |offset: Offset| GroupOffsetsRecord {
            group_id: "g".into(),
            commit_timestamp_ms: 5,
            delete_group: false,
            offsets: vec![PartitionOffset {
                topic: "t".into(),
                partition: 0,
                offset: Some(offset),
                leader_epoch: None,
                metadata: None,
            }],
        };
        let producer = |seq: i32| {
            Bytes::from(crate::sim::batch::sequenced_batch(
                1,
                1,
                0,
                Some((6, 0, seq)),
            ))
        };
        let log: Vec<(Offset, Bytes)> = vec![
            (0, commit(7).to_batch(0, 3, 0).freeze()),
            (1, producer(0)),
            (2, producer(1)),
            (3, commit(9).to_batch(3, 3, 0).freeze()),
        ];
        let replay = |mut r: ProducerRebuild| {
            let from = r.from();
            for (base, bytes) in log.iter().filter(|(b, _)| *b >= from) {
                r.feed(*base, base + 1, bytes).expect("in order");
            }
            r.finish()
        };
        let mut v1 = snapshot(2, 3);
        v1.groups = None;
        v1.producers = vec![(6, Vec::new())];
        let r = ProducerRebuild::new(1, 7, Some(v1), 0);
        assert_eq!(r.from(), 0, "the whole log, for the offsets");
        let mut rebuilt = replay(r);
        assert_eq!(rebuilt.offsets.uncommitted(), 2, "both commit records");
        rebuilt.offsets.on_committed(4);
        assert_eq!(
            rebuilt.offsets.group("g").unwrap()[&("t".into(), 0)].offset,
            9
        );
        assert_eq!(rebuilt.batches, 4);
        rebuilt.producers.set_committed(4);
        let producers = rebuilt.producers.committed_part();
        let batches: usize = producers.iter().map(|(_, b)| b.len()).sum();
        assert_eq!(
            batches, 1,
            "only the batch at 2, above the snapshot: {producers:?}"
        );

        let current = snapshot(2, 3);
        let r = ProducerRebuild::new(1, 7, Some(current), 0);
        assert_eq!(r.from(), 2);
        let mut rebuilt = replay(r);
        assert_eq!(rebuilt.offsets.uncommitted(), 1, "the record at 3 only");
        rebuilt.offsets.on_committed(4);
        assert_eq!(
            rebuilt.offsets.group("g").unwrap()[&("t".into(), 0)].offset,
            9
        );
    }
}
