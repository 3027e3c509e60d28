//! What the core knows of its own log: end offset (including appends not yet durable), the
//! durable end offset reported by the driver, the ops in flight to the log, the epoch cache and
//! the in-memory tail.

use std::collections::VecDeque;

use super::tail_cache::TailCache;
use super::types::{Batch, Epoch, LogOp, LogOpKind, LogSnapshot, Offset, Output};
use crate::base::{EpochCache, EpochCacheError};

#[derive(Clone, Copy, Debug)]
struct PendingOp {
    seq: u64,
    /// Log end offset once this op is applied.
    end_after: Offset,
    /// For a truncation: its offset (data at or above it is no longer ours).
    truncated_to: Option<Offset>,
    /// Bytes of the batches it appends (0 for a truncation).
    bytes: usize,
}

#[derive(Debug)]
pub(crate) struct LogState {
    /// The first offset: what the snapshot said, moved forward by retention
    /// ([`LogState::advance_start`]) or a reset ([`LogState::reset_to`]).
    start_offset: Offset,
    end_offset: Offset,
    durable_end_offset: Offset,
    next_seq: u64,
    pending: VecDeque<PendingOp>,
    /// Bytes appended whose op is not yet durable: what sits between the core and the disk.
    unflushed_bytes: usize,
    pub(crate) epochs: EpochCache,
    pub(crate) tail: TailCache,
}

impl LogState {
    pub(crate) fn new(
        snapshot: &LogSnapshot,
        tail_cache_bytes: usize,
    ) -> Result<Self, EpochCacheError> {
        Ok(Self {
            start_offset: snapshot.start_offset,
            end_offset: snapshot.end_offset,
            durable_end_offset: snapshot.end_offset,
            next_seq: 1,
            pending: VecDeque::new(),
            unflushed_bytes: 0,
            epochs: EpochCache::from_entries(&snapshot.epochs)?,
            tail: TailCache::new(tail_cache_bytes),
        })
    }

    pub(crate) fn start_offset(&self) -> Offset {
        self.start_offset
    }

    pub(crate) fn end_offset(&self) -> Offset {
        self.end_offset
    }

    pub(crate) fn durable_end_offset(&self) -> Offset {
        self.durable_end_offset
    }

    pub(crate) fn last_epoch(&self) -> Epoch {
        self.epochs.last_epoch()
    }

    pub(crate) fn epoch_at(&self, offset: Offset) -> Option<Epoch> {
        self.epochs.epoch_at(offset)
    }

    pub(crate) fn unflushed_bytes(&self) -> usize {
        self.unflushed_bytes
    }

    /// Log ops handed to the driver and not yet durable.
    pub(crate) fn unflushed_ops(&self) -> usize {
        self.pending.len()
    }

    /// Appends contiguous batches as ONE log op. Returns its seq.
    pub(crate) fn append(&mut self, batches: Vec<Batch>, out: &mut Vec<Output>) -> u64 {
        assert!(!batches.is_empty());
        let bytes: usize = batches.iter().map(|b| b.bytes.len()).sum();
        for b in &batches {
            assert_eq!(b.base_offset, self.end_offset, "append must be contiguous");
            assert!(b.record_count > 0);
            self.epochs
                .assign(b.epoch, b.base_offset)
                .expect("the core appends batches in epoch order");
            self.end_offset = b.end_offset();
            self.tail.push(b.clone());
        }
        let seq = self.push_op(None, bytes);
        out.push(Output::Log(LogOp {
            seq,
            kind: LogOpKind::Append(batches),
        }));
        seq
    }

    /// Drops everything at or beyond `offset`.
    pub(crate) fn truncate_to(&mut self, offset: Offset, out: &mut Vec<Output>) {
        assert!(offset <= self.end_offset && offset >= 0);
        self.end_offset = offset;
        self.durable_end_offset = self.durable_end_offset.min(offset);
        self.epochs.truncate_to(offset);
        self.tail.truncate_to(offset);
        let seq = self.push_op(Some(offset), 0);
        out.push(Output::Log(LogOp {
            seq,
            kind: LogOpKind::TruncateTo(offset),
        }));
    }

    /// Retention deleted the log below `start` (a segment's base, never past what the core
    /// said was committed). The epoch cache forgets the epochs wholly below it and keeps the
    /// one it starts in, as the log's own cache does (docs/storage.md, "Retention").
    pub(crate) fn advance_start(&mut self, start: Offset) {
        if start <= self.start_offset {
            return; // a report that crossed a reset, or a repeat: nothing to forget
        }
        // Not checked against the durable end known here: the writer deletes only what it has
        // made durable, and its durability report may still be on its way.
        assert!(
            start <= self.end_offset,
            "log start {start} past the log end {}",
            self.end_offset
        );
        self.start_offset = start;
        self.epochs.trim_front(start);
    }

    /// Drops the whole log and starts it again, empty, at the leader's log start `start`, in
    /// `epoch` (docs/protocol.md, "Retention and the log start"). The caller has checked that
    /// nothing at or above `start` is committed here (its high watermark is at most `start`):
    /// what the log holds below is committed, and what it holds above is not.
    pub(crate) fn reset_to(&mut self, start: Offset, epoch: Epoch, out: &mut Vec<Output>) {
        assert!(start > 0 && epoch >= 0, "a reset to ({start}, {epoch})");
        self.start_offset = start;
        self.end_offset = start;
        self.epochs =
            EpochCache::from_entries(&[(epoch, start)]).expect("one entry is a valid cache");
        self.tail.clear();
        // Nothing of the old log at or above `start` is ours any more, durable or not: ops
        // before the reset reported durable later count no further than `start`.
        self.durable_end_offset = self.durable_end_offset.min(start);
        let seq = self.push_op(Some(start), 0);
        out.push(Output::Log(LogOp {
            seq,
            kind: LogOpKind::ResetTo { start, epoch },
        }));
    }

    fn push_op(&mut self, truncated_to: Option<Offset>, bytes: usize) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.unflushed_bytes += bytes;
        self.pending.push_back(PendingOp {
            seq,
            end_after: self.end_offset,
            truncated_to,
            bytes,
        });
        seq
    }

    /// The driver reports ops up to `up_to_seq` durable. Returns true if the durable end moved.
    pub(crate) fn mark_durable(&mut self, up_to_seq: u64) -> bool {
        let mut last = None;
        while self.pending.front().is_some_and(|op| op.seq <= up_to_seq) {
            last = self.pending.pop_front();
            if let Some(op) = &last {
                self.unflushed_bytes -= op.bytes;
            }
        }
        let Some(last) = last else {
            return false;
        };
        let mut durable = last.end_after;
        // Data above a truncation that is not yet durable is not ours any more.
        for op in &self.pending {
            if let Some(t) = op.truncated_to {
                durable = durable.min(t);
            }
        }
        let before = self.durable_end_offset;
        assert!(
            durable <= self.end_offset,
            "durable end {durable} beyond the log end {}",
            self.end_offset
        );
        self.durable_end_offset = durable;
        durable != before
    }
}
