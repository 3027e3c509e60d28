//! The log as a reader on another thread sees it: the segment files, how much of each is
//! written, and a truncation generation; and the read of whole batches from such a snapshot.
//!
//! The writer owns the [`super::Log`] and tells the view about every change that matters to a
//! reader (a group made durable, a roll, a truncation). A reader snapshots the view, reads without
//! any lock, and keeps the result only if no truncation began meanwhile. The rule, in full, is in
//! docs/storage.md ("Reads off the writer thread").

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::batch_meta::{self, BATCH_HEADER_LEN};
use super::segment::SegmentFile;
use super::timestamps::{self, LookupStep, SnapshotFile, TimestampLookup};
use super::LogError;
use crate::base::{Epoch, Offset};
use crate::record::Batch;

/// How often a read is retried when truncations keep racing it, before it returns nothing (the
/// Raft core then answers the fetch empty and the follower asks again).
const MAX_ATTEMPTS: usize = 4;

/// Shared between the writer (through its `Log`) and readers.
#[derive(Debug)]
pub struct LogView {
    state: Mutex<ViewState>,
    index_interval_bytes: u64,
    /// Tests of the retry rule: a truncation (segment base, position) that begins right after
    /// the next snapshot, as if the writer had started it while the read was under way.
    #[cfg(test)]
    truncation_after_snapshot: Mutex<Option<(Offset, u64)>>,
}

#[derive(Debug)]
struct ViewState {
    /// Bumped when a truncation begins, before any file is cut or removed.
    generation: u64,
    segments: BTreeMap<Offset, Arc<SegmentFile>>,
    /// The leader-epoch cache's entries (epoch, start offset): every stored batch carries the
    /// epoch of the entry covering its base offset, which a read checks (the batch CRC does not
    /// cover the PartitionLeaderEpoch). Replaced whole when it changes (rarely: a new epoch, a
    /// truncation, retention).
    epochs: Arc<Vec<(Epoch, Offset)>>,
}

/// What one [`LogView::read`] did, besides its batches.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ViewRead {
    /// Snapshots thrown away because a truncation began during the read.
    pub retries: u32,
    /// Batches dropped for failing validation (never expected: a stored batch was validated
    /// when it was appended).
    pub invalid: u32,
}

impl LogView {
    pub(super) fn new(
        segments: impl IntoIterator<Item = (Offset, Arc<SegmentFile>)>,
        index_interval_bytes: u64,
    ) -> Self {
        Self {
            state: Mutex::new(ViewState {
                generation: 0,
                segments: segments.into_iter().collect(),
                epochs: Arc::new(Vec::new()),
            }),
            index_interval_bytes,
            #[cfg(test)]
            truncation_after_snapshot: Mutex::new(None),
        }
    }

    #[cfg(test)]
    fn truncate_if_set_for_test(&self) {
        let set = self.truncation_after_snapshot.lock().take();
        if let Some((base, position)) = set {
            self.begin_truncation(base, position);
        }
    }

    /// Heap bytes of the segments' sparse indexes: what the index costs in memory (one lock per
    /// segment, each held for a read of two fields; for metrics, not for a hot path).
    pub fn index_bytes(&self) -> u64 {
        let files: Vec<Arc<SegmentFile>> = self.state.lock().segments.values().cloned().collect();
        files.iter().map(|f| f.index.lock().heap_bytes()).sum()
    }

    /// The log's leader-epoch cache changed: reads check batches' epochs against `entries`.
    pub(super) fn set_epochs(&self, entries: &[(Epoch, Offset)]) {
        self.state.lock().epochs = Arc::new(entries.to_vec());
    }

    /// The truncation generation (how many truncations have begun).
    pub fn generation(&self) -> u64 {
        self.state.lock().generation
    }

    /// A new segment (a roll): readable from now on, as its writes become durable.
    pub(super) fn add_segment(&self, base: Offset, file: Arc<SegmentFile>) {
        self.state.lock().segments.insert(base, file);
    }

    /// Segments before `start` left the front of the log (retention). No generation bump: they
    /// were sealed, so a read that snapshotted one still reads exactly what it held (the open
    /// handle outlives the file's name).
    pub(super) fn drop_front(&self, start: Offset) {
        self.state.lock().segments.retain(|&b, _| b >= start);
    }

    /// Called by the writer before it changes any file in a truncation to `position` of segment
    /// `base`: bumps the generation, forgets the later segments, and caps what `base` shows.
    pub(super) fn begin_truncation(&self, base: Offset, position: u64) {
        let mut state = self.state.lock();
        state.generation += 1;
        state.segments.retain(|&b, _| b <= base);
        if let Some(file) = state.segments.get(&base) {
            file.set_readable_size(file.readable_size().min(position));
        }
    }

    /// Reads whole, validated batches from the one holding `from_offset` on, up to about
    /// `max_bytes` (at least one batch when any is written there), as the log was when the read
    /// took its snapshot: only written and synced bytes, and nothing from a snapshot that a
    /// truncation overtook (such a read is retried on a fresh snapshot, and after
    /// [`MAX_ATTEMPTS`] returns nothing). Safe to call on any thread, concurrently with the writer.
    pub fn read(
        &self,
        from_offset: Offset,
        max_bytes: usize,
    ) -> Result<(Vec<Bytes>, ViewRead), LogError> {
        let mut outcome = ViewRead::default();
        for _ in 0..MAX_ATTEMPTS {
            let (generation, files, epochs) = self.snapshot(from_offset);
            #[cfg(test)]
            self.truncate_if_set_for_test();
            let result = read_files(
                files.iter().map(|(file, limit)| (&**file, *limit)),
                from_offset,
                max_bytes,
                self.index_interval_bytes,
            );
            // Valid only if no truncation began between the snapshot and now: a truncation bumps
            // the generation (under this lock) before it cuts or removes a file, so an unchanged
            // generation means every byte read was the log's when the snapshot was taken.
            if self.state.lock().generation != generation {
                outcome.retries += 1;
                continue;
            }
            let batches = result?;
            let (batches, invalid) = validate_run(batches, from_offset, &epochs);
            outcome.invalid = invalid;
            return Ok((batches, outcome));
        }
        Ok((Vec::new(), outcome))
    }

    /// Runs one step of a timestamp lookup (at most [`super::LOOKUP_STEP_BYTES`] of batches, see
    /// [`super::timestamps`]) on a snapshot of the segments, under the same rule as [`Self::read`]:
    /// a step a truncation overtook is run again on a fresh snapshot, and after [`MAX_ATTEMPTS`]
    /// the lookup comes back unchanged, to be run again later. Returns the outcome and the bytes
    /// of batches walked (for pacing).
    pub fn lookup_step(
        &self,
        lookup: TimestampLookup,
    ) -> Result<(LookupStep, usize, ViewRead), LogError> {
        let mut outcome = ViewRead::default();
        let mut walked = 0;
        for _ in 0..MAX_ATTEMPTS {
            let (generation, files) = {
                let state = self.state.lock();
                let files: Vec<SnapshotFile> = state
                    .segments
                    .iter()
                    .map(|(&base, file)| (base, Arc::clone(file), file.readable_size()))
                    .collect();
                (state.generation, files)
            };
            #[cfg(test)]
            self.truncate_if_set_for_test();
            let result = timestamps::step(&files, lookup, self.index_interval_bytes);
            if self.state.lock().generation != generation {
                outcome.retries += 1;
                if let Ok((_, bytes)) = result {
                    walked += bytes;
                }
                continue;
            }
            let (step, bytes) = result?;
            return Ok((step, walked + bytes, outcome));
        }
        Ok((LookupStep::Continue(lookup), walked, outcome))
    }

    /// The generation and, from the segment holding `from_offset` on, each file with the bytes
    /// of it written at this moment.
    #[allow(clippy::type_complexity)]
    fn snapshot(
        &self,
        from_offset: Offset,
    ) -> (u64, Vec<(Arc<SegmentFile>, u64)>, Arc<Vec<(Epoch, Offset)>>) {
        let state = self.state.lock();
        let start = state
            .segments
            .range(..=from_offset)
            .next_back()
            .map(|(&base, _)| base);
        let files = match start {
            Some(start) => state
                .segments
                .range(start..)
                .map(|(_, file)| (Arc::clone(file), file.readable_size()))
                .collect(),
            None => Vec::new(),
        };
        (state.generation, files, Arc::clone(&state.epochs))
    }
}

/// Keeps the leading run of batches whose framing and CRC-32C are intact ([`Batch::from_stored`]),
/// that continue each other in offset order from the one holding `from_offset`, and whose
/// PartitionLeaderEpoch is the epoch `epochs` (the log's cache) gives their base offset; returns
/// it and how many batches were dropped.
fn validate_run(
    batches: Vec<Bytes>,
    from_offset: Offset,
    epochs: &[(Epoch, Offset)],
) -> (Vec<Bytes>, u32) {
    let total = batches.len();
    let mut kept = Vec::with_capacity(total);
    let mut expected: Option<Offset> = None;
    for batch in batches {
        // Every batch was validated in full before it was appended: a read checks the framing
        // and CRC-32C, which catch whatever the disk did to it.
        let meta = match Batch::from_stored(batch.clone()) {
            Ok(meta) => meta,
            Err(error) => {
                let reason = error.to_string();
                tracing::warn!(%reason, "a batch read from the log failed validation; read cut short (the fetch is retried): if \
                     it repeats, this disk returns damaged data; replace it and let the replica \
                     fetch its log again (docs/operations.md, \"Warnings at run time\")");
                break;
            }
        };
        let continues = match expected {
            // The first batch holds `from_offset` (no batch is skipped over).
            None => meta.base_offset <= from_offset && meta.end_offset() > from_offset,
            Some(next) => meta.base_offset == next,
        };
        if !continues {
            tracing::warn!(
                base_offset = meta.base_offset,
                ?expected,
                "a batch read from the log is out of order; read cut short (the fetch is retried): if \
                 it repeats, this disk returns damaged data; replace it and let the replica \
                 fetch its log again (docs/operations.md, \"Warnings at run time\")"
            );
            break;
        }
        let cached = epochs.partition_point(|&(_, start)| start <= meta.base_offset);
        let cached = cached.checked_sub(1).map(|i| epochs[i].0);
        if cached != Some(meta.epoch) {
            tracing::warn!(
                base_offset = meta.base_offset,
                epoch = meta.epoch,
                ?cached,
                "a batch read from the log carries another PartitionLeaderEpoch than the log's \
                 epoch cache gives its offset; read cut short (the fetch is retried): the header \
                 was changed on disk; restore this replica from a peer (docs/operations.md, \
                 \"Warnings at run time\")"
            );
            break;
        }
        expected = Some(meta.end_offset());
        kept.push(batch);
    }
    let dropped = (total - kept.len()) as u32;
    (kept, dropped)
}

/// Reads whole batches from `files` (consecutive segments, each with the byte limit to read up
/// to), from the one holding `from_offset` on, up to about `max_bytes` (at least one batch when
/// any exists there).
pub(super) fn read_files<'a>(
    files: impl IntoIterator<Item = (&'a SegmentFile, u64)>,
    from_offset: Offset,
    max_bytes: usize,
    index_interval_bytes: u64,
) -> Result<Vec<Bytes>, LogError> {
    let mut out = Vec::new();
    let mut budget = max_bytes;
    for (file, limit) in files {
        if read_file(
            file,
            limit,
            from_offset,
            index_interval_bytes,
            &mut budget,
            &mut out,
        )? {
            break;
        }
    }
    Ok(out)
}

/// Reads from one segment up to `limit`; returns true when the budget is spent.
fn read_file(
    file: &SegmentFile,
    limit: u64,
    from_offset: Offset,
    index_interval_bytes: u64,
    budget: &mut usize,
    out: &mut Vec<Bytes>,
) -> Result<bool, LogError> {
    let io_err = || LogError::io("read", &file.path);
    file.ensure_indexed(index_interval_bytes)
        .map_err(io_err())?;
    let hint = file.index.lock().lookup_hint(from_offset);
    let (mut position, mut expected) = hint.unwrap_or_else(|| (0, file.base_offset()));
    let mut reader = file.chunk_reader(limit);
    // Below `limit` (a batch boundary of written, synced batches) every batch continues the one
    // before in offset order, from the hint's offset: the check covers the BaseOffset, which the
    // batch CRC does not, so a changed one is refused rather than served at the wrong offset
    // (docs/storage.md, "Header fields the CRC leaves out").
    let corrupt = |position: u64, offset: Offset, reason: String| LogError::Corrupt {
        path: file.path.clone(),
        position,
        offset,
        reason,
    };
    while position < limit {
        let header = reader.get(position, BATCH_HEADER_LEN).map_err(io_err())?;
        let meta = match batch_meta::peek(&header) {
            batch_meta::Peek::Header(meta) => meta,
            other => {
                let reason = format!("no batch header below the written end ({other:?})");
                return Err(corrupt(position, expected, reason));
            }
        };
        if meta.base_offset != expected {
            let reason = format!(
                "batch at offset {} where {expected} was expected",
                meta.base_offset
            );
            return Err(corrupt(position, expected, reason));
        }
        expected = meta.next_offset();
        if meta.last_offset >= from_offset {
            if !out.is_empty() && meta.len > *budget {
                return Ok(true);
            }
            let batch = reader.get(position, meta.len).map_err(io_err())?;
            if batch.len() < meta.len {
                let reason = format!(
                    "a {}-byte batch cut short by the written end ({} bytes)",
                    meta.len,
                    batch.len()
                );
                return Err(corrupt(position, meta.base_offset, reason));
            }
            *budget = budget.saturating_sub(meta.len);
            out.push(batch);
            if *budget == 0 {
                return Ok(true);
            }
        }
        position += meta.len as u64;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{Log, LogConfig, TimestampTarget};
    use crate::record::batch_for_tests;

    /// A log of 10 batches of one record each (offset i at time 1_000 + i) and the position of
    /// the sixth batch.
    fn ten_batches(dir: &std::path::Path) -> (Log, u64) {
        let mut log = Log::open(dir, LogConfig::default()).unwrap();
        let mut sixth = 0;
        for i in 0..10 {
            let batch = batch_for_tests(i, &[1_000 + i], &[7u8; 100]);
            if i < 5 {
                sixth += batch.len() as u64;
            }
            log.append(&[batch]).unwrap();
        }
        (log, sixth)
    }

    /// Damage to the header fields the batch CRC leaves out, in a sealed segment the open does
    /// not scan (docs/storage.md, "Header fields the CRC leaves out"): each is refused on the
    /// read path, never served at a wrong offset or with a wrong epoch. A changed BaseOffset,
    /// Magic or BatchLength fails the read with `Corrupt` (the walk's offset order; the header
    /// check; the next header not where the length says), with the index file or without (then
    /// built only up to the damage); a changed PartitionLeaderEpoch disagrees with the epoch
    /// cache and the read is cut before it. Past the damage: the right batches or a refusal.
    #[test]
    fn header_fields_the_crc_leaves_out_are_refused_when_read_from_a_sealed_segment() {
        use crate::record::RecordBatchBuilder;
        // (field, byte position in the header, change)
        // (field, change, the reason a refusing read gives; None: cut before it instead)
        type Damage = (&'static str, fn(&mut [u8]), Option<&'static str>);
        let damages: [Damage; 4] = [
            ("BaseOffset", |b| b[7] ^= 0x40, Some("where 8 was expected")),
            ("BatchLength", |b| b[11] ^= 0x04, Some("")),
            ("PartitionLeaderEpoch", |b| b[15] ^= 0x02, None),
            ("Magic", |b| b[16] = 1, Some("no batch header")),
        ];
        for (field, damage, refusal) in damages {
            for keep_index_file in [true, false] {
                let dir = tempfile::tempdir().unwrap();
                let config = LogConfig {
                    segment_bytes: 16 << 10,
                    preallocate: false,
                    ..LogConfig::default()
                };
                let mut log = Log::open(dir.path(), config.clone()).unwrap();
                let batches: Vec<Bytes> = (0..60)
                    .map(|i| {
                        let mut builder = RecordBatchBuilder::new(i, if i < 5 { 1 } else { 3 });
                        builder.append(1_000 + i, None, Some(&[i as u8; 500]), &[]);
                        builder.build().freeze()
                    })
                    .collect();
                for b in &batches {
                    log.append(std::slice::from_ref(b)).unwrap();
                }
                assert!(log.segment_bases().len() >= 3);
                log.checkpoint_now().unwrap();
                drop(log);
                // Batch 8 of the first, sealed segment.
                let path = dir.path().join(crate::log::segment_file_name(0));
                let at: u64 = batches[..8].iter().map(|b| b.len() as u64).sum();
                let mut header = [0u8; 61];
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .unwrap();
                use std::os::unix::fs::FileExt;
                file.read_exact_at(&mut header, at).unwrap();
                damage(&mut header);
                file.write_all_at(&header, at).unwrap();
                if !keep_index_file {
                    std::fs::remove_file(crate::log::index_file::index_path(&path)).unwrap();
                }
                let log = Log::open(dir.path(), config).unwrap();
                assert_eq!(log.recovery_start(), 60, "the open scanned no segment");
                let view = log.view();
                let case = format!("{field}, index file kept: {keep_index_file}");
                for from in [0, 5, 8] {
                    match (view.read(from, 1 << 20), refusal) {
                        (Ok((got, outcome)), None) => {
                            let expected: Vec<Bytes> = batches[from as usize..8].to_vec();
                            assert_eq!(got, expected, "{case}, from {from}");
                            assert!(outcome.invalid >= 1, "{case}, from {from}");
                        }
                        // The damaged batch, or (a wrong BatchLength) where the header
                        // after it should start.
                        (Err(LogError::Corrupt { offset, reason, .. }), Some(why)) => {
                            assert!(offset == 8 || offset == 9, "{case}, from {from}: {offset}");
                            assert!(reason.contains(why), "{case}, from {from}: {reason}");
                        }
                        (other, _) => {
                            let other = other.map(|(got, outcome)| (got.len(), outcome));
                            panic!("{case}, from {from}: batches and outcome {other:?}")
                        }
                    }
                }
                // Past the damage: the right batches or a refusal, never one at a wrong offset.
                match view.read(9, 1 << 20) {
                    Ok((got, _)) => assert_eq!(got, batches[9..9 + got.len()], "{case}"),
                    Err(LogError::Corrupt { .. }) => {}
                    Err(other) => panic!("{case}: {other}"),
                }
            }
        }
    }

    /// A read whose snapshot a truncation overtook is thrown away, counted, and made again on
    /// the view as the truncation left it.
    #[test]
    fn a_read_overtaken_by_a_truncation_is_counted_and_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let (log, sixth) = ten_batches(dir.path());
        let view = log.view();
        let (all, outcome) = view.read(0, 1 << 20).unwrap();
        assert_eq!((all.len(), outcome.retries), (10, 0));
        *view.truncation_after_snapshot.lock() = Some((0, sixth));
        let (kept, outcome) = view.read(0, 1 << 20).unwrap();
        assert_eq!((kept.len(), outcome.retries), (5, 1));
    }

    /// A timestamp search stops at a batch its snapshot's limit cuts (header or body): the
    /// bytes past the limit are not the snapshot's, so the cut batch is neither read as
    /// corrupt nor searched. (A limit is a batch boundary in every snapshot the view takes;
    /// this is the walk's own guard.)
    #[test]
    fn a_timestamp_search_ends_at_a_batch_its_snapshot_cuts() {
        let dir = tempfile::tempdir().unwrap();
        let (log, sixth) = ten_batches(dir.path());
        let view = log.view();
        let (base, file) = {
            let state = view.state.lock();
            let (&base, file) = state.segments.iter().next().unwrap();
            (base, Arc::clone(file))
        };
        let lookup = TimestampLookup::new(TimestampTarget::AtOrAfter(1_005), 10);
        let interval = view.index_interval_bytes;
        let whole = [(base, Arc::clone(&file), file.readable_size())];
        let (found, _) = timestamps::step(&whole, lookup, interval).unwrap();
        assert!(matches!(found, LookupStep::Done(Some(f)) if f.offset == 5));
        for cut in [sixth + 10, sixth + 100] {
            let files = [(base, Arc::clone(&file), cut)];
            let (found, _) = timestamps::step(&files, lookup, interval).unwrap();
            assert_eq!(found, LookupStep::Done(None), "cut at {cut}");
        }
    }

    /// So is a lookup step, and the bytes it walked for nothing still count (for pacing).
    #[test]
    fn a_lookup_step_overtaken_by_a_truncation_is_counted_with_what_it_walked() {
        let dir = tempfile::tempdir().unwrap();
        let (log, sixth) = ten_batches(dir.path());
        let view = log.view();
        let lookup = TimestampLookup::new(TimestampTarget::AtOrAfter(1_007), 10);
        let (found, full, outcome) = view.lookup_step(lookup).unwrap();
        assert!(matches!(found, LookupStep::Done(Some(f)) if f.offset == 7));
        assert_eq!(outcome.retries, 0);
        *view.truncation_after_snapshot.lock() = Some((0, sixth));
        let (found, walked, outcome) = view.lookup_step(lookup).unwrap();
        assert_eq!(found, LookupStep::Done(None), "offset 7 is gone");
        assert_eq!(outcome.retries, 1);
        assert!(
            walked >= full,
            "walked {walked}, the overtaken step alone {full}"
        );
    }
}
