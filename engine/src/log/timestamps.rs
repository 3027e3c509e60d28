//! Timestamp lookups (ListOffsets by timestamp and by max timestamp, docs/protocol.md "Kafka
//! client APIs"): the first record whose timestamp reaches a target, or the first record with the
//! largest timestamp, among the records below an offset (the committed end).
//!
//! The segments' sparse indexes keep a running maximum of the batches' MaxTimestamp at every
//! hint (docs/storage.md, "Sparse index"), so a lookup skips every segment whose batches all stay
//! below the target and, inside the one that reaches it, starts at the one stretch of at most an
//! index interval (and a batch) that holds the first batch reaching it, as Kafka's time index
//! does. From there it walks batch headers, and only a batch whose MaxTimestamp reaches the
//! target is read whole, validated and (decompressed if compressed) searched record by record.
//!
//! A lookup runs in steps of at most [`LOOKUP_STEP_BYTES`] of batches walked, each step a
//! function of a snapshot of the segments ([`step`]): the reader thread runs one step per job,
//! so a long lookup never holds it for long, and a step that a truncation overtook is run again
//! (`LogView::lookup_step`).

use std::sync::Arc;

use super::batch_meta::{self, Peek, BATCH_HEADER_LEN};
use super::index::NO_TIMESTAMP;
use super::segment::SegmentFile;
use super::LogError;
use crate::base::{Epoch, Offset};
use crate::record::BatchView;

/// Bytes of batches one step walks over at most (headers of skipped batches count whole: the
/// chunked reads fetch them anyway). A step also reads the one batch it stops in, and a segment
/// never read since the open builds its index once (a walk of its headers, as a Fetch would).
pub const LOOKUP_STEP_BYTES: usize = 1 << 20;

/// What a lookup looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampTarget {
    /// The first record (in offset order) whose timestamp is at least this.
    AtOrAfter(i64),
    /// The first record with the largest timestamp (KIP-734's MAX_TIMESTAMP).
    Max,
}

/// The record a lookup found: its offset, its timestamp and the leader epoch of its batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundRecord {
    pub offset: Offset,
    pub timestamp: i64,
    pub leader_epoch: Epoch,
}

/// Where a lookup goes on: segment (by base offset) and byte position of the next batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Resume {
    segment: Offset,
    position: u64,
}

/// A lookup, possibly part done. Only records below `end` count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampLookup {
    target: TimestampTarget,
    end: Offset,
    resume: Option<Resume>,
}

impl TimestampLookup {
    /// A lookup of `target` among the records below offset `end`, a batch boundary (the high
    /// watermark is one): [`TimestampTarget::Max`] takes each batch's MaxTimestamp whole, so a
    /// batch cut by `end` would count records above it.
    pub fn new(target: TimestampTarget, end: Offset) -> Self {
        Self {
            target,
            end,
            resume: None,
        }
    }
}

/// The outcome of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupStep {
    /// Finished: the record, or None when no record below the end qualifies.
    Done(Option<FoundRecord>),
    /// Not finished: run this next (it starts where this step stopped).
    Continue(TimestampLookup),
}

/// A segment as a step sees it: its base offset, its file, and the bytes of it to read.
pub(super) type SnapshotFile = (Offset, Arc<SegmentFile>, u64);

/// Runs one step of `lookup` over `files` (consecutive segments, ascending); returns the outcome
/// and the bytes of batches it walked.
pub(super) fn step(
    files: &[SnapshotFile],
    lookup: TimestampLookup,
    interval: u64,
) -> Result<(LookupStep, usize), LogError> {
    let below_end = files.partition_point(|(base, _, _)| *base < lookup.end);
    let files = &files[..below_end];
    let mut spent = 0;
    let target = match lookup.target {
        TimestampTarget::AtOrAfter(target) => target,
        TimestampTarget::Max => match max_below(files, lookup.end, interval, &mut spent)? {
            None => return Ok((LookupStep::Done(None), spent)),
            // The first record reaching the largest MaxTimestamp is the first one carrying it.
            Some(max) => max,
        },
    };
    let search = TimestampLookup {
        target: TimestampTarget::AtOrAfter(target),
        ..lookup
    };
    let outcome = search_from(files, search, interval, &mut spent)?;
    Ok((outcome, spent))
}

/// The largest MaxTimestamp of the batches below `end`, or None when there is none: the index's
/// maximum of every segment wholly below `end`, and of the last one the hint below `end` plus
/// the headers from it to `end` (at most an index interval and a batch).
fn max_below(
    files: &[SnapshotFile],
    end: Offset,
    interval: u64,
    spent: &mut usize,
) -> Result<Option<i64>, LogError> {
    let Some(((_, last, limit), whole)) = files.split_last() else {
        return Ok(None);
    };
    let mut max = NO_TIMESTAMP;
    for (_, file, _) in whole {
        ensure_indexed(file, interval)?;
        max = max.max(file.index.lock().max_timestamp());
    }
    ensure_indexed(last, interval)?;
    let (mut position, before) = last.index.lock().last_hint_below(end, *limit);
    max = max.max(before);
    let mut reader = last.chunk_reader(*limit);
    while position < *limit {
        let header = reader
            .get(position, BATCH_HEADER_LEN)
            .map_err(LogError::io("read", &last.path))?;
        let Peek::Header(meta) = batch_meta::peek(&header) else {
            break;
        };
        if meta.base_offset >= end {
            break;
        }
        max = max.max(meta.max_timestamp);
        *spent += meta.len;
        position += meta.len as u64;
    }
    Ok((max != NO_TIMESTAMP).then_some(max))
}

/// The search for the first record at or after the target, from `lookup.resume` (or from the
/// index of each segment), until it finds one, passes `lookup.end`, or has walked a step's bytes.
fn search_from(
    files: &[SnapshotFile],
    lookup: TimestampLookup,
    interval: u64,
    spent: &mut usize,
) -> Result<LookupStep, LogError> {
    let TimestampTarget::AtOrAfter(target) = lookup.target else {
        unreachable!("the search runs on a timestamp");
    };
    let first = match lookup.resume {
        Some(resume) => files.partition_point(|(base, _, _)| *base < resume.segment),
        None => 0,
    };
    for (base, file, limit) in &files[first..] {
        let resumed = lookup.resume.filter(|r| r.segment == *base);
        let start = match resumed {
            Some(resume) => resume.position,
            None => {
                ensure_indexed(file, interval)?;
                match file.index.lock().first_reaching(target) {
                    Some(position) => position,
                    None => continue, // no batch of this segment reaches the target
                }
            }
        };
        let mut reader = file.chunk_reader(*limit);
        let mut position = start;
        while position < *limit {
            if *spent >= LOOKUP_STEP_BYTES {
                let resume = Some(Resume {
                    segment: *base,
                    position,
                });
                return Ok(LookupStep::Continue(TimestampLookup { resume, ..lookup }));
            }
            let io = LogError::io("read", &file.path);
            let header = reader.get(position, BATCH_HEADER_LEN).map_err(io)?;
            let Peek::Header(meta) = batch_meta::peek(&header) else {
                break;
            };
            if meta.base_offset >= lookup.end {
                return Ok(LookupStep::Done(None));
            }
            *spent += meta.len;
            if meta.max_timestamp >= target {
                let bytes = reader
                    .get(position, meta.len)
                    .map_err(LogError::io("read", &file.path))?;
                if bytes.len() < meta.len {
                    break;
                }
                let view = BatchView::parse(bytes).map_err(|e| LogError::Corrupt {
                    path: file.path.clone(),
                    position,
                    offset: meta.base_offset,
                    reason: format!("a stored batch failed validation in a timestamp lookup: {e}"),
                })?;
                if let Some(found) = first_record_at_or_after(&view, target, lookup.end) {
                    return Ok(LookupStep::Done(Some(found)));
                }
                // A MaxTimestamp above every record's timestamp (ringraft stores the header as
                // the producer sent it): Kafka's search goes on with the next batch too.
            }
            position += meta.len as u64;
        }
    }
    Ok(LookupStep::Done(None))
}

/// The first record of `view` below `end` whose timestamp is at least `target`. A batch with
/// LogAppendTime gives every record the batch's MaxTimestamp, as Kafka's readers do.
pub fn first_record_at_or_after(view: &BatchView, target: i64, end: Offset) -> Option<FoundRecord> {
    let base = view.base_offset();
    let leader_epoch = view.partition_leader_epoch();
    if view.is_log_append_time() {
        let timestamp = view.max_timestamp();
        return (timestamp >= target && base < end).then_some(FoundRecord {
            offset: base,
            timestamp,
            leader_epoch,
        });
    }
    view.record_refs()
        .map(|r| (r.offset(base), r.timestamp(view.base_timestamp())))
        .take_while(|&(offset, _)| offset < end)
        .find(|&(_, timestamp)| timestamp >= target)
        .map(|(offset, timestamp)| FoundRecord {
            offset,
            timestamp,
            leader_epoch,
        })
}

fn ensure_indexed(file: &SegmentFile, interval: u64) -> Result<(), LogError> {
    file.ensure_indexed(interval)
        .map_err(LogError::io("read", &file.path))
}
