//! A node's simulated disk: the log as written (page cache) and as durable (survives a crash).
//!
//! Log operations reach the written log at once; they become durable in `seq` order when the
//! simulator says so. A crash keeps the durable log plus a random prefix of the operations that
//! were still pending, the last of which may be torn (a prefix of its batches survives).

use std::collections::VecDeque;

use crate::raft::{Batch, Epoch, LogOp, LogOpKind, LogSnapshot, Offset};

use super::rng::SimRng;

/// Why a log operation could not be applied as the contract says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogOpError {
    SeqNotIncreasing {
        previous: u64,
        seq: u64,
    },
    AppendNotAtEnd {
        log_end: Offset,
        base_offset: Offset,
    },
    EmptyBatch {
        base_offset: Offset,
    },
    EpochDecreasing {
        last: Epoch,
        epoch: Epoch,
    },
    HeaderMismatch {
        base_offset: Offset,
        epoch: Epoch,
    },
    TruncateMidBatch {
        offset: Offset,
        batch_base: Offset,
    },
    /// A reset whose committed prefix (the shadow, see [`SimDisk::written_start`]) does not end
    /// at its start.
    ResetPrefix {
        start: Offset,
        prefix_end: Offset,
    },
}

impl std::fmt::Display for LogOpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

#[derive(Clone, Debug, Default)]
pub struct SimDisk {
    /// The log as the node sees it: every op applied, durable or not.
    pub written: Vec<Batch>,
    /// The log as a crash right now would find it at the least.
    pub durable: Vec<Batch>,
    /// The log start the node's real log would have (retention, or a reset to the leader's
    /// log start: docs/protocol.md, "Retention and the log start"), with the epoch it is in.
    /// The batches below it stay in `written` and `durable` as a shadow of committed data, so
    /// that the invariants read every log from offset 0; the node never reads them (a read
    /// below the start breaks the contract).
    pub written_start: (Offset, Epoch),
    pub durable_start: (Offset, Epoch),
    /// Ops applied to `written` but not yet to `durable`, in seq order.
    pending: VecDeque<Pending>,
    last_seq: u64,
    durable_seq: u64,
    /// The producer-state snapshot file as the last completed write left it (replaced
    /// atomically and synced: a crash keeps the old one or the new one).
    pub producer_snapshot: Option<Vec<u8>>,
}

/// An op not yet durable; for a reset, the committed batches below its start (the shadow).
#[derive(Clone, Debug)]
struct Pending {
    op: LogOp,
    reset_prefix: Vec<Batch>,
}

pub fn end_offset(log: &[Batch]) -> Offset {
    log.last().map_or(0, Batch::end_offset)
}

pub fn last_epoch(log: &[Batch]) -> Epoch {
    log.last().map_or(0, |b| b.epoch)
}

/// Index of the batch holding `offset`, if any.
pub fn batch_index_covering(log: &[Batch], offset: Offset) -> Option<usize> {
    let i = log.partition_point(|b| b.end_offset() <= offset);
    (i < log.len() && log[i].base_offset <= offset).then_some(i)
}

/// The epoch cache of a log (the one the real log keeps), as the core gets it at start.
pub fn epoch_cache(log: &[Batch]) -> Vec<(Epoch, Offset)> {
    let mut cache = crate::base::EpochCache::new();
    for b in log {
        cache
            .assign(b.epoch, b.base_offset)
            .expect("the simulated log is checked to ascend in epoch on every append");
    }
    cache.entries().to_vec()
}

fn check_append(log: &[Batch], batches: &[Batch]) -> Result<(), LogOpError> {
    let mut end = end_offset(log);
    let mut epoch = last_epoch(log);
    for b in batches {
        if b.base_offset != end {
            return Err(LogOpError::AppendNotAtEnd {
                log_end: end,
                base_offset: b.base_offset,
            });
        }
        if b.record_count == 0 {
            return Err(LogOpError::EmptyBatch {
                base_offset: b.base_offset,
            });
        }
        if b.epoch < epoch {
            return Err(LogOpError::EpochDecreasing {
                last: epoch,
                epoch: b.epoch,
            });
        }
        if super::batch::stamped_header(&b.bytes) != Some((b.base_offset, b.epoch)) {
            return Err(LogOpError::HeaderMismatch {
                base_offset: b.base_offset,
                epoch: b.epoch,
            });
        }
        end = b.end_offset();
        epoch = b.epoch;
    }
    Ok(())
}

fn apply_kind(log: &mut Vec<Batch>, start: &mut (Offset, Epoch), pending: &Pending) {
    match &pending.op.kind {
        LogOpKind::Append(batches) => log.extend(batches.iter().cloned()),
        LogOpKind::TruncateTo(offset) => {
            let keep = log.partition_point(|b| b.base_offset < *offset);
            log.truncate(keep);
        }
        LogOpKind::ResetTo { start: s, epoch } => {
            log.clone_from(&pending.reset_prefix);
            *start = (*s, *epoch);
        }
    }
}

impl SimDisk {
    /// A disk holding `log`, all durable (a fresh node, or one that just recovered), that
    /// starts at `start` (the batches below it are the shadow).
    pub fn with_log_from(log: Vec<Batch>, start: (Offset, Epoch)) -> Self {
        Self {
            written: log.clone(),
            durable: log,
            written_start: start,
            durable_start: start,
            ..Self::default()
        }
    }

    /// Applies `op` to the written log (validated against the contract first). For a reset,
    /// `reset_prefix` is the committed log below its start, kept as the shadow; ignored for
    /// the other ops.
    pub fn apply(&mut self, op: LogOp, reset_prefix: Vec<Batch>) -> Result<(), LogOpError> {
        if op.seq <= self.last_seq {
            return Err(LogOpError::SeqNotIncreasing {
                previous: self.last_seq,
                seq: op.seq,
            });
        }
        match &op.kind {
            LogOpKind::Append(batches) => check_append(&self.written, batches)?,
            LogOpKind::TruncateTo(offset) => {
                if let Some(i) = batch_index_covering(&self.written, *offset) {
                    if self.written[i].base_offset != *offset {
                        return Err(LogOpError::TruncateMidBatch {
                            offset: *offset,
                            batch_base: self.written[i].base_offset,
                        });
                    }
                }
            }
            LogOpKind::ResetTo { start, .. } => {
                let prefix_end = end_offset(&reset_prefix);
                if prefix_end != *start {
                    return Err(LogOpError::ResetPrefix {
                        start: *start,
                        prefix_end,
                    });
                }
                check_append(&[], &reset_prefix)?;
            }
        }
        let seq = op.seq;
        let pending = Pending { op, reset_prefix };
        apply_kind(&mut self.written, &mut self.written_start, &pending);
        self.last_seq = seq;
        self.pending.push_back(pending);
        Ok(())
    }

    /// The epoch of the written log's last batch; for a log that starts where it ends (after a
    /// reset, or retention of everything durable), the epoch it started in, which the shadow
    /// batches below the start may not show.
    pub fn written_last_epoch(&self) -> Epoch {
        let (start, epoch) = self.written_start;
        if start > 0 && end_offset(&self.written) == start {
            epoch
        } else {
            last_epoch(&self.written)
        }
    }

    /// Is a reset among the ops not yet durable?
    pub fn reset_pending(&self) -> bool {
        self.pending
            .iter()
            .any(|p| matches!(p.op.kind, LogOpKind::ResetTo { .. }))
    }

    /// Retention: the log now starts at `start`, a batch boundary at most the durable end
    /// (deleting is durable at once, as unlinking and syncing the directory is). The epoch is
    /// the one the written log's cache names at `start`, as the core's trimmed cache does.
    /// Not while a reset is pending (the real writer would apply retention after it).
    pub fn retain(&mut self, start: Offset) {
        assert!(!self.reset_pending(), "retention with a reset pending");
        assert!(start > self.durable_start.0 && start <= end_offset(&self.durable));
        assert!(
            start == end_offset(&self.durable)
                || batch_index_covering(&self.durable, start)
                    .is_some_and(|i| self.durable[i].base_offset == start),
            "retention mid-batch at {start}"
        );
        let mut cache = crate::base::EpochCache::from_entries(&epoch_cache(&self.written))
            .expect("a valid cache");
        cache.trim_front(start);
        let epoch = cache.epoch_at(start).unwrap_or(0);
        self.written_start = (start, epoch);
        self.durable_start = (start, epoch);
    }

    #[cfg(test)]
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Every op with `seq <= up_to` reached the platter.
    pub fn make_durable(&mut self, up_to: u64) {
        assert!(up_to <= self.last_seq);
        while self.pending.front().is_some_and(|p| p.op.seq <= up_to) {
            let pending = self.pending.pop_front().expect("front checked");
            apply_kind(&mut self.durable, &mut self.durable_start, &pending);
        }
        self.durable_seq = self.durable_seq.max(up_to);
    }

    /// A clean close: the OS writes everything back; the next incarnation's seqs start over.
    pub fn close(&mut self) {
        self.make_durable(self.last_seq);
        assert_eq!(self.durable, self.written);
        assert_eq!(self.durable_start, self.written_start);
        let snapshot = self.producer_snapshot.take();
        *self = Self::with_log_from(std::mem::take(&mut self.durable), self.durable_start);
        self.producer_snapshot = snapshot;
    }

    /// Power loss: what recovery finds. Keeps a random prefix of the pending ops; the op at the
    /// cut, if an append, may leave a prefix of its batches (a torn write).
    /// Log operations applied but not durable yet: what a crash now tears or loses.
    pub fn unsynced_ops(&self) -> usize {
        self.pending.len()
    }

    pub fn crash(&mut self, rng: &mut SimRng, tear: bool) -> Vec<Batch> {
        let mut recovered = std::mem::take(&mut self.durable);
        let mut start = self.durable_start;
        if tear && !self.pending.is_empty() {
            let survivors = rng.index(self.pending.len() + 1);
            for pending in self.pending.iter().take(survivors) {
                apply_kind(&mut recovered, &mut start, pending);
            }
            if let Some(Pending {
                op:
                    LogOp {
                        kind: LogOpKind::Append(batches),
                        ..
                    },
                ..
            }) = self.pending.get(survivors)
            {
                let torn = rng.index(batches.len() + 1);
                recovered.extend(batches.iter().take(torn).cloned());
            }
        }
        // The snapshot file is written apart from the log, synced, and replaced atomically.
        let snapshot = self.producer_snapshot.take();
        *self = Self::with_log_from(recovered.clone(), start);
        self.producer_snapshot = snapshot;
        recovered
    }

    /// What the core gets at start: the recovered log's end and epoch cache.
    pub fn snapshot(&self) -> LogSnapshot {
        assert_eq!(
            self.written, self.durable,
            "snapshot only right after recovery"
        );
        let (start, start_epoch) = self.written_start;
        let end = end_offset(&self.written);
        let mut epochs = crate::base::EpochCache::from_entries(&epoch_cache(&self.written))
            .expect("a valid cache");
        epochs.trim_front(start);
        // A log that starts where it ends knows its epoch only from where it started (the real
        // log's checkpoint: docs/storage.md, "Retention").
        let epochs = if start > 0 && end == start {
            vec![(start_epoch, start)]
        } else {
            epochs.entries().to_vec()
        };
        let mut voter_records = crate::record::voters::voter_records(&self.written)
            .expect("the simulated log holds only batches the cores wrote");
        voter_records.retain(|r| r.offset >= start);
        LogSnapshot {
            start_offset: start,
            end_offset: end,
            epochs,
            // The simulated log is small: every voter record from the log start, the core
            // keeps those at or above the stored AppliedOffset.
            voter_records,
        }
    }

    /// Whole batches from exactly `from`, about `max_bytes` (at least one batch if any).
    pub fn read(&self, from: Offset, max_bytes: usize) -> Vec<Batch> {
        let start = self.written.partition_point(|b| b.base_offset < from);
        if start >= self.written.len() || self.written[start].base_offset != from {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for b in &self.written[start..] {
            if !out.is_empty() && bytes + b.bytes.len() > max_bytes {
                break;
            }
            bytes += b.bytes.len();
            out.push(b.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn batch(base: Offset, epoch: Epoch, count: u32) -> Batch {
        let mut bytes = super::super::batch::client_batch(base as u64, count, 0);
        bytes[0..8].copy_from_slice(&base.to_be_bytes());
        bytes[12..16].copy_from_slice(&epoch.to_be_bytes());
        Batch {
            base_offset: base,
            epoch,
            record_count: count,
            is_control: false,
            bytes: Bytes::from(bytes),
        }
    }

    fn append(seq: u64, batches: Vec<Batch>) -> LogOp {
        LogOp {
            seq,
            kind: LogOpKind::Append(batches),
        }
    }

    #[test]
    fn crash_keeps_durable_prefix_and_maybe_some_pending() {
        let mut rng = SimRng::new(3);
        for _ in 0..50 {
            let mut disk = SimDisk::default();
            disk.apply(append(1, vec![batch(0, 1, 2)]), vec![]).unwrap();
            disk.apply(append(2, vec![batch(2, 1, 1), batch(3, 1, 1)]), vec![])
                .unwrap();
            disk.make_durable(1);
            disk.apply(
                LogOp {
                    seq: 3,
                    kind: LogOpKind::TruncateTo(3),
                },
                vec![],
            )
            .unwrap();
            let written = disk.written.clone();
            assert_eq!(end_offset(&written), 3);
            let recovered = disk.crash(&mut rng, true);
            assert!(end_offset(&recovered) >= 2);
            assert_eq!(recovered[0], written[0]);
            assert!(recovered.len() <= 3);
            assert_eq!(disk.last_seq(), 0);
        }
    }

    #[test]
    fn contract_breaches_are_reported() {
        let mut disk = SimDisk::default();
        disk.apply(append(1, vec![batch(0, 2, 2)]), vec![]).unwrap();
        assert!(matches!(
            disk.apply(append(1, vec![batch(2, 2, 1)]), vec![]),
            Err(LogOpError::SeqNotIncreasing { .. })
        ));
        assert!(matches!(
            disk.apply(append(2, vec![batch(5, 2, 1)]), vec![]),
            Err(LogOpError::AppendNotAtEnd { .. })
        ));
        assert!(matches!(
            disk.apply(append(2, vec![batch(2, 1, 1)]), vec![]),
            Err(LogOpError::EpochDecreasing { .. })
        ));
        assert!(matches!(
            disk.apply(
                LogOp {
                    seq: 2,
                    kind: LogOpKind::TruncateTo(1)
                },
                vec![]
            ),
            Err(LogOpError::TruncateMidBatch { .. })
        ));
        assert_eq!(disk.read(0, 1).len(), 1);
        assert!(disk.read(1, 100).is_empty());
    }
}
