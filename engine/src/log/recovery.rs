//! Opening a log: find the segments, start from the checkpoint, scan to the end validating every
//! batch, cut a torn tail, refuse corruption: damage that valid data follows, or that lies below
//! what a durable mark or the checkpoint says was written and synced (docs/storage.md, "Torn
//! tail or corruption: the durable mark").

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use super::batch_meta::{self, Peek, BATCH_HEADER_LEN};
use super::checkpoint::Checkpoint;
use super::durable_mark::{DurableMark, MARK_LEN};
use super::index::{remove_if_present, SparseIndex};
use super::index_file::parse_index_file_name;
use super::segment::{list_segments, segment_file_name, ChunkReader, Segment, SegmentFile};
use super::{
    create_segment, load_partial_block, Active, Log, LogConfig, LogError, LogView, SegmentCounts,
};
use crate::base::EpochCache;
use crate::base::Offset;
use crate::os::aligned::{align_up, AlignedBuf, BLOCK};
use crate::os::file;

/// Size of the zero buffer used for zero-fill ahead.
const ZEROS_BYTES: usize = 1 << 20;

pub(super) fn open(dir: &Path, config: LogConfig) -> Result<Log, LogError> {
    std::fs::create_dir_all(dir).map_err(LogError::io("create dir", dir))?;
    // A spare allocated before a stop is allocated again when due (its space is given back).
    let spare = dir.join(super::SPARE_FILE);
    if spare.exists() {
        std::fs::remove_file(&spare).map_err(LogError::io("remove", &spare))?;
    }
    let bases = list_segments(dir).map_err(LogError::io("list", dir))?;
    remove_stray_index_files(dir, bases.split_last().map_or(&[], |(_, sealed)| sealed))?;
    if bases.is_empty() {
        return create_empty(dir, config);
    }
    let mut start = choose_start(dir, &bases, config.index_interval_bytes)?;
    let mut epochs = start.epochs;
    let mut segments = BTreeMap::new();
    for (i, &base) in bases[..start.index].iter().enumerate() {
        segments.insert(base, open_sealed(dir, base, bases[i + 1])?);
    }
    let mut expected = start.offset;
    let mut position = start.position;
    let mut torn_tail = false;
    let mut mark_current = false;
    for (i, &base) in bases.iter().enumerate().skip(start.index) {
        let last = i + 1 == bases.len();
        let path = dir.join(segment_file_name(base));
        if i > start.index && base != expected {
            return Err(LogError::Corrupt {
                path,
                position: 0,
                offset: expected,
                reason: format!(
                    "segment starts at offset {base} but the previous one ends at {expected}"
                ),
            });
        }
        let reader = SegmentFile::open_reader(&path).map_err(LogError::io("open", &path))?;
        let length = reader
            .metadata()
            .map_err(LogError::io("stat", &path))?
            .len();
        let mut index = match i == start.index {
            true => std::mem::replace(&mut start.prefix_index, SparseIndex::new(true)),
            false => SparseIndex::new(true),
        };
        let scan = scan_segment(
            &reader,
            length,
            (base, position),
            expected,
            &mut epochs,
            &mut index,
            config.index_interval_bytes,
        )
        .map_err(LogError::io("read", &path))?;
        if last {
            let found = find_mark(&reader, length, base, scan.end_position)
                .map_err(LogError::io("read", &path))?;
            mark_current = found.is_some_and(|(mark, adjacent)| {
                adjacent
                    && mark.durable_position == scan.end_position
                    && mark.durable_offset == scan.end_offset
            });
            let floor = start.floor.filter(|floor| floor.segment_base == base);
            let claim = newest_claim(found.map(|(mark, _)| Claim::from_mark(&mark)), floor);
            match judge_last(&scan, claim) {
                Verdict::End => {}
                Verdict::TornTail(reason) => {
                    tracing::warn!(path = %path.display(), position = scan.end_position, offset = scan.end_offset,
                        reason = %reason, "torn tail: truncating the log to the last valid batch (normal after a crash or power \
                        loss: the batches cut were never acknowledged; without one, check the disk)");
                    torn_tail = true;
                }
                Verdict::Corrupt(reason) => {
                    return Err(LogError::Corrupt {
                        path,
                        position: scan.end_position,
                        offset: scan.end_offset,
                        reason,
                    })
                }
            }
        } else if !matches!(scan.stop, ScanStop::FileEnd) {
            return Err(LogError::Corrupt {
                path,
                position: scan.end_position,
                offset: scan.end_offset,
                reason: match &scan.stop {
                    ScanStop::Invalid { reason, .. } => reason.clone(),
                    ScanStop::Mark => "a durable mark inside a sealed segment".to_string(),
                    _ => "zeros inside a sealed segment".to_string(),
                },
            });
        }
        segments.insert(
            base,
            Segment {
                file: SegmentFile::new(path, reader, scan.end_position, index),
                size: scan.end_position,
                end_offset: scan.end_offset,
            },
        );
        expected = scan.end_offset;
        position = 0;
    }
    // Sealed segments the scan indexed keep their hints in index files, not in memory.
    for (&base, segment) in segments.iter().rev().skip(1) {
        let mut index = segment.file.index.lock();
        if index.complete {
            index.persist_or_warn(&segment.file.index_path(), base, segment.size);
        }
    }
    // Epochs past the end go (a torn tail took their batches), except the one that covers the
    // log start of a log that retention emptied (start = end): no batch is left to name it.
    epochs.truncate_to(expected.max(bases[0] + 1));
    // A checkpoint written before retention moved the start may name epochs wholly below it.
    epochs.trim_front(bases[0]);
    let active = open_active(
        segments.values().next_back().expect("segments"),
        (*segments.keys().next_back().expect("segments"), expected),
        &config,
        torn_tail,
        !mark_current,
    )?;
    Ok(Log {
        dir: dir.to_path_buf(),
        view: new_view(&segments, &epochs, &config),
        config,
        segments,
        epochs,
        end_offset: expected,
        durable_end_offset: expected,
        active,
        zeros: AlignedBuf::zeroed(ZEROS_BYTES),
        recovery_start: start.offset,
        checkpoint: start.checkpoint,
        spare: None,
        segment_counts: SegmentCounts::default(),
    })
}

/// Removes the index files no sealed segment owns (docs/storage.md, "Sparse index"): those of
/// segments gone, the active segment's (its hints are rebuilt by the scan), and temporaries of
/// a write a crash cut short.
fn remove_stray_index_files(dir: &Path, sealed: &[Offset]) -> Result<(), LogError> {
    let entries = std::fs::read_dir(dir).map_err(LogError::io("list", dir))?;
    for entry in entries {
        let entry = entry.map_err(LogError::io("list", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // Only names the log gives its own index files: anything else is left alone.
        let stray = match name.strip_suffix(".tmp") {
            Some(written) => parse_index_file_name(written).is_some(),
            None => parse_index_file_name(name).is_some_and(|b| sealed.binary_search(&b).is_err()),
        };
        if stray {
            let path = entry.path();
            remove_if_present(&path).map_err(LogError::io("remove", &path))?;
        }
    }
    Ok(())
}

fn create_empty(dir: &Path, config: LogConfig) -> Result<Log, LogError> {
    let (segment, direct) = create_segment(dir, 0, &config)?;
    let checkpoint = Checkpoint::new(0, 0, 0, Vec::new());
    checkpoint
        .store(dir)
        .map_err(LogError::io("store checkpoint", dir))?;
    let mut active = Active::new(direct, 0, Active::new_buffers(&config));
    super::write_mark_synced(&mut active, &segment.file.path, 0, 0, 0)?;
    let mut segments = BTreeMap::new();
    segments.insert(0, segment);
    Ok(Log {
        dir: dir.to_path_buf(),
        active,
        view: new_view(&segments, &EpochCache::new(), &config),
        config,
        segments,
        epochs: EpochCache::new(),
        end_offset: 0,
        durable_end_offset: 0,
        zeros: AlignedBuf::zeroed(ZEROS_BYTES),
        checkpoint,
        recovery_start: 0,
        spare: None,
        segment_counts: SegmentCounts::default(),
    })
}

/// The view readers on other threads start from: every segment as opened.
fn new_view(
    segments: &BTreeMap<Offset, Segment>,
    epochs: &EpochCache,
    config: &LogConfig,
) -> Arc<LogView> {
    let files = segments
        .iter()
        .map(|(&base, segment)| (base, Arc::clone(&segment.file)));
    let view = LogView::new(files, config.index_interval_bytes);
    view.set_epochs(epochs.entries());
    Arc::new(view)
}

/// Where the scan starts.
struct Start {
    index: usize,
    position: u64,
    offset: Offset,
    epochs: EpochCache,
    checkpoint: Checkpoint,
    /// The sparse index of the batches of the first scanned segment before `position`.
    prefix_index: SparseIndex,
    /// What an intact checkpoint says was durable, trusted as a start or not: the scan must
    /// not end below it (it was written only once its data was synced).
    floor: Option<Floor>,
}

/// A checkpoint's recovery point as a durability claim.
#[derive(Clone, Copy, Debug)]
struct Floor {
    segment_base: Offset,
    claim: Claim,
}

/// Starts at the checkpoint when it is readable and consistent with the files, else at the first
/// segment (the checkpoint is derived data: losing it costs a longer scan, never correctness).
fn choose_start(dir: &Path, bases: &[Offset], interval: u64) -> Result<Start, LogError> {
    let full = Start {
        index: 0,
        position: 0,
        offset: bases[0],
        epochs: EpochCache::new(),
        checkpoint: Checkpoint::new(bases[0], bases[0], 0, Vec::new()),
        prefix_index: SparseIndex::new(true),
        floor: None,
    };
    let loaded = Checkpoint::load(dir).map_err(LogError::io("read checkpoint", dir))?;
    let checkpoint = match loaded {
        None => return Ok(full),
        Some(Err(reason)) => {
            tracing::warn!(dir = %dir.display(), %reason, "recovery checkpoint refused ({reason}): scanning the whole log instead (the open \
                takes longer; nothing to do, a new checkpoint is written; if it repeats, check the disk)");
            return Ok(full);
        }
        Some(Ok(checkpoint)) => checkpoint,
    };
    let Some(index) = bases.iter().position(|&b| b == checkpoint.segment_base) else {
        tracing::warn!(dir = %dir.display(), "recovery checkpoint names a missing segment: scanning the whole log (the open takes \
            longer; nothing to do unless segment files were removed by hand)");
        return Ok(full);
    };
    let floor = Some(Floor {
        segment_base: checkpoint.segment_base,
        claim: Claim {
            position: checkpoint.position,
            offset: checkpoint.offset,
            source: ClaimSource::Checkpoint,
        },
    });
    let path = dir.join(segment_file_name(checkpoint.segment_base));
    let length = std::fs::metadata(&path)
        .map_err(LogError::io("stat", &path))?
        .len();
    let epochs = EpochCache::from_entries(&checkpoint.epochs);
    let prefix = match checkpoint.position <= length {
        true => index_prefix(&path, length, &checkpoint, interval)?,
        false => None,
    };
    match (epochs, prefix) {
        (Ok(epochs), Some(prefix_index)) if checkpoint.offset >= checkpoint.segment_base => {
            Ok(Start {
                index,
                position: checkpoint.position,
                offset: checkpoint.offset,
                epochs,
                checkpoint,
                prefix_index,
                floor,
            })
        }
        _ => {
            tracing::warn!(dir = %dir.display(), "recovery checkpoint inconsistent with the files: scanning the whole log (the open takes \
                longer; nothing to do unless segment files were changed by hand)");
            Ok(Start { floor, ..full })
        }
    }
}

/// The sparse index of the checkpoint segment's batches before the checkpoint, from a walk of
/// their headers (trusted as validated when the checkpoint was written), so the segment's index
/// and its running maximum of timestamps cover the whole segment, not only what the scan sees.
/// None when the headers do not lead exactly to the checkpoint's position and offset: the
/// checkpoint does not describe this file.
fn index_prefix(
    path: &Path,
    length: u64,
    checkpoint: &Checkpoint,
    interval: u64,
) -> Result<Option<SparseIndex>, LogError> {
    let mut index = SparseIndex::new(true);
    let file = SegmentFile::open_reader(path).map_err(LogError::io("open", path))?;
    let mut reader = ChunkReader::new(&file, length);
    let (mut position, mut offset) = (0, checkpoint.segment_base);
    while position < checkpoint.position {
        let header = reader
            .get(position, BATCH_HEADER_LEN)
            .map_err(LogError::io("read", path))?;
        let Peek::Header(meta) = batch_meta::peek(&header) else {
            return Ok(None);
        };
        if meta.base_offset != offset {
            return Ok(None);
        }
        index.note(meta.base_offset, position, meta.max_timestamp, interval);
        position += meta.len as u64;
        offset = meta.next_offset();
    }
    Ok((position == checkpoint.position && offset == checkpoint.offset).then_some(index))
}

/// A segment before the checkpoint: trusted as written (sealed segments are trimmed to their data
/// when the next one is created), indexed on first read.
fn open_sealed(dir: &Path, base: Offset, next_base: Offset) -> Result<Segment, LogError> {
    let path = dir.join(segment_file_name(base));
    let reader = SegmentFile::open_reader(&path).map_err(LogError::io("open", &path))?;
    let size = reader
        .metadata()
        .map_err(LogError::io("stat", &path))?
        .len();
    Ok(Segment {
        file: SegmentFile::new(path, reader, size, SparseIndex::new(false)),
        size,
        end_offset: next_base,
    })
}

/// Opens the last segment for O_DIRECT appends; cuts a torn tail and restores preallocation;
/// writes a durable mark for the recovered end (`base`, `end_offset`) when the file does not end
/// with one already (docs/storage.md, "Torn tail or corruption: the durable mark").
fn open_active(
    segment: &Segment,
    (base, end_offset): (Offset, Offset),
    config: &LogConfig,
    torn_tail: bool,
    mark_needed: bool,
) -> Result<Active, LogError> {
    let path = &segment.file.path;
    let direct = file::open_direct(path, false).map_err(LogError::io("open", path))?;
    let length = direct.metadata().map_err(LogError::io("stat", path))?.len();
    let mut changed = false;
    if torn_tail {
        // Zero everything after the last valid batch so the next open sees a clean end.
        direct
            .set_len(segment.size)
            .map_err(LogError::io("truncate", path))?;
        changed = true;
    }
    if config.preallocate && (torn_tail || length < config.segment_bytes) {
        file::fallocate(&direct, 0, config.segment_bytes)
            .map_err(LogError::io("fallocate", path))?;
        changed = true;
    }
    if changed || mark_needed {
        // Also makes the recovered batches durable before a mark says they are: a crash may
        // have left a group written but not yet synced.
        direct.sync_all().map_err(LogError::io("fsync", path))?;
    }
    let mut active = Active::new(direct, segment.size, Active::new_buffers(config));
    if mark_needed {
        super::write_mark_synced(&mut active, path, base, segment.size, end_offset)?;
    }
    load_partial_block(&mut active, &segment.file.reader, segment.size)
        .map_err(LogError::io("read", path))?;
    Ok(active)
}

/// A statement that a segment's batches up to `position` (offset `offset`) were on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Claim {
    position: u64,
    offset: Offset,
    source: ClaimSource,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClaimSource {
    /// A durable mark found at this byte position.
    Mark(u64),
    /// The recovery checkpoint.
    Checkpoint,
}

impl Claim {
    fn from_mark(mark: &DurableMark) -> Self {
        Claim {
            position: mark.durable_position,
            offset: mark.durable_offset,
            source: ClaimSource::Mark(mark.mark_position),
        }
    }
}

impl std::fmt::Display for ClaimSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimSource::Mark(at) => write!(f, "the durable mark at byte {at}"),
            ClaimSource::Checkpoint => f.write_str("the recovery checkpoint"),
        }
    }
}

#[cfg(test)]
thread_local! {
    /// A planted bug for the tests to catch: recovery ignores every durability claim (marks
    /// and checkpoint), so damage below what was synced is taken for a torn tail again.
    pub(super) static IGNORE_DURABLE_CLAIMS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The furthest of the claims found (each one true when written: see docs/storage.md).
fn newest_claim(mark: Option<Claim>, floor: Option<Floor>) -> Option<Claim> {
    #[cfg(test)]
    if IGNORE_DURABLE_CLAIMS.with(|ignore| ignore.get()) {
        return None;
    }
    let floor = floor.map(|floor| floor.claim);
    match (mark, floor) {
        (Some(a), Some(b)) => Some(if b.position > a.position { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// What the stop of the last segment's scan means.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The normal end of the log.
    End,
    /// A torn write past what was durable: cut there.
    TornTail(String),
    /// Damage inside the log: refuse to open.
    Corrupt(String),
}

/// Decides the last segment's stop (pure): damage that valid data follows, or below what a
/// claim says was durable, is corruption; an invalid batch past every claim is a torn tail.
fn judge_last(scan: &ScanOutcome, claim: Option<Claim>) -> Verdict {
    let stop = match &scan.stop {
        ScanStop::FileEnd => "the end of the file".to_string(),
        ScanStop::Zeros | ScanStop::Mark => "zeros".to_string(),
        ScanStop::Invalid { reason, .. } => reason.clone(),
    };
    if let ScanStop::Invalid {
        followed_by_valid: true,
        ..
    } = scan.stop
    {
        return Verdict::Corrupt(format!("{stop}; valid data follows"));
    }
    if let Some(claim) = claim {
        if claim.position > scan.end_position {
            return Verdict::Corrupt(format!(
                "{stop}, but {} says the batches up to byte {} (offsets up to {}) were written \
                 and synced: offsets {} to {} (at least) are damaged, not torn",
                claim.source,
                claim.position,
                claim.offset - 1,
                scan.end_offset,
                claim.offset - 1,
            ));
        }
        if claim.position == scan.end_position && claim.offset != scan.end_offset {
            return Verdict::Corrupt(format!(
                "{stop}, where {} says offset {} ends, but the batches end at offset {}",
                claim.source, claim.offset, scan.end_offset
            ));
        }
    }
    match &scan.stop {
        ScanStop::Invalid { .. } => Verdict::TornTail(stop),
        _ => Verdict::End,
    }
}

/// Bytes the search for a durable mark reads at a time.
const SEARCH_CHUNK: usize = 1 << 20;

/// The newest durable mark of segment `base` at or after the block holding the end of the
/// scan (`stop`), and whether it lies right there (the normal case: every group's write puts
/// its mark in the block after its data). Otherwise the rest of the file is searched, block by
/// block, skipping holes: every group's write covers the previous group's mark block, so the
/// first mark of this segment found after the damage is the last one written. A mark of another
/// base (a recycled file's earlier life) or found where it was not written is not one.
fn find_mark(
    file: &File,
    length: u64,
    base: Offset,
    stop: u64,
) -> std::io::Result<Option<(DurableMark, bool)>> {
    let first = align_up(stop);
    let mut block = [0u8; MARK_LEN];
    let got = file::read_at_most(file, &mut block, first)?;
    if let Some(mark) = DurableMark::decode(&block[..got]) {
        if mark.belongs_at(base, first) {
            return Ok(Some((mark, true)));
        }
    }
    let mut chunk = vec![0u8; SEARCH_CHUNK];
    let mut position = first + BLOCK as u64;
    // Each round moves at least one block on: at most length / BLOCK rounds.
    while position < length {
        position = match file::seek_data(file, position)? {
            Some(data) => align_up(data),
            None => break,
        };
        if position >= length {
            break;
        }
        let want = SEARCH_CHUNK.min((length - position) as usize);
        let got = file::read_at_most(file, &mut chunk[..want], position)?;
        if got == 0 {
            break;
        }
        for at in (0..got).step_by(BLOCK) {
            let Some(mark) = DurableMark::decode(&chunk[at..got]) else {
                continue;
            };
            if mark.belongs_at(base, position + at as u64) {
                return Ok(Some((mark, false)));
            }
        }
        position += align_up(got as u64);
    }
    Ok(None)
}

struct ScanOutcome {
    /// Position after the last valid batch.
    end_position: u64,
    /// Offset after the last valid batch.
    end_offset: Offset,
    stop: ScanStop,
}

enum ScanStop {
    /// The last valid batch ends exactly at the end of the file.
    FileEnd,
    /// Zeros follow the last valid batch (the unwritten, preallocated end of the active segment).
    Zeros,
    /// A durable mark follows the last valid batch, at a block boundary (docs/storage.md, "Torn
    /// tail or corruption: the durable mark").
    Mark,
    /// Something that is not a valid continuation of the log.
    Invalid {
        reason: String,
        followed_by_valid: bool,
    },
}

/// Validates batches from `position` (offset `offset`) to the first stop, noting index hints and
/// epochs.
fn scan_segment(
    file: &File,
    length: u64,
    (base, mut position): (Offset, u64),
    mut offset: Offset,
    epochs: &mut EpochCache,
    index: &mut SparseIndex,
    interval: u64,
) -> std::io::Result<ScanOutcome> {
    let mut reader = ChunkReader::new(file, length);
    let stop = loop {
        if position >= length {
            break ScanStop::FileEnd;
        }
        let header = reader.get(position, BATCH_HEADER_LEN)?;
        if position % BLOCK as u64 == 0 && DurableMark::looks_like_mark(&header) {
            break ScanStop::Mark;
        }
        let meta = match batch_meta::peek(&header) {
            Peek::End => break ScanStop::Zeros,
            Peek::Incomplete => break invalid("a batch header cut short".into(), false),
            Peek::Invalid(reason) => break invalid(reason, false),
            Peek::Header(meta) => meta,
        };
        let bytes = reader.get(position, meta.len)?;
        if bytes.len() < meta.len {
            break invalid(
                format!(
                    "a {}-byte batch cut short at {} bytes",
                    meta.len,
                    bytes.len()
                ),
                false,
            );
        }
        let checked = batch_meta::validate(&bytes);
        if checked.as_ref().is_ok_and(|meta| meta.base_offset < base) {
            // A whole valid batch from before this file's base: the old data of a recycled
            // segment (docs/storage.md, "Recycling"), never written at this base. The end.
            break ScanStop::Zeros;
        }
        let checked = checked.and_then(|meta| {
            if meta.base_offset != offset {
                return Err(format!(
                    "batch at offset {} where {offset} was expected",
                    meta.base_offset
                ));
            }
            epochs
                .assign(meta.epoch, meta.base_offset)
                .map_err(|e| e.to_string())
        });
        if let Err(reason) = checked {
            let followed = valid_batch_at(&mut reader, position + meta.len as u64, offset)?;
            break invalid(reason, followed);
        }
        index.note(meta.base_offset, position, meta.max_timestamp, interval);
        position += meta.len as u64;
        offset = meta.next_offset();
    };
    Ok(ScanOutcome {
        end_position: position,
        end_offset: offset,
        stop,
    })
}

fn invalid(reason: String, followed_by_valid: bool) -> ScanStop {
    ScanStop::Invalid {
        reason,
        followed_by_valid,
    }
}

/// True when a whole batch with a valid CRC that could belong to the log (at or after
/// `expected`) starts at `position`: the bad batch before it is corruption inside the log, not a
/// torn tail. A valid batch below `expected` is the old data of a recycled segment.
fn valid_batch_at(
    reader: &mut ChunkReader<'_>,
    position: u64,
    expected: Offset,
) -> std::io::Result<bool> {
    let header = reader.get(position, BATCH_HEADER_LEN)?;
    let Peek::Header(meta) = batch_meta::peek(&header) else {
        return Ok(false);
    };
    if meta.base_offset < expected {
        return Ok(false);
    }
    let bytes = reader.get(position, meta.len)?;
    Ok(bytes.len() == meta.len && batch_meta::validate(&bytes).is_ok())
}

#[cfg(test)]
mod tests {
    //! Torn tail or corruption (docs/storage.md, "Torn tail or corruption: the durable mark"):
    //! on real files, a log written one synced append at a time and left as a crash leaves it
    //! (dropped without a clean stop), then damaged.

    use std::os::unix::fs::FileExt;
    use std::path::{Path, PathBuf};

    use bytes::Bytes;

    use super::*;
    use crate::record::batch_for_tests;

    /// Small segments, so that a search of one reads little.
    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 1 << 20,
            ..LogConfig::default()
        }
    }

    /// `count` batches of about 300 bytes, one synced append each, then `last_group` more in one
    /// append (the write a crash may tear); the log is dropped without a clean stop.
    fn crashed_log(dir: &Path, count: i64, last_group: i64) -> (Vec<Bytes>, PathBuf) {
        let mut log = Log::open(dir, config()).unwrap();
        let batch = |i: i64| batch_for_tests(i, &[1_000 + i], &[i as u8; 250]);
        let mut written: Vec<Bytes> = (0..count).map(batch).collect();
        for b in &written {
            log.append(std::slice::from_ref(b)).unwrap();
        }
        let last: Vec<Bytes> = (count..count + last_group).map(batch).collect();
        if !last.is_empty() {
            log.append(&last).unwrap();
        }
        written.extend(last);
        (written, dir.join(segment_file_name(0)))
    }

    fn position_of(written: &[Bytes], index: usize) -> u64 {
        written[..index].iter().map(|b| b.len() as u64).sum()
    }

    fn write_at(path: &Path, position: u64, bytes: &[u8]) {
        let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.write_all_at(bytes, position).unwrap();
        file.sync_all().unwrap();
    }

    /// Every durable mark in the file, with where it lies.
    fn marks_in(path: &Path) -> Vec<(u64, DurableMark)> {
        let bytes = std::fs::read(path).unwrap();
        bytes
            .chunks(BLOCK)
            .enumerate()
            .filter_map(|(i, block)| DurableMark::decode(block).map(|m| ((i * BLOCK) as u64, m)))
            .collect()
    }

    /// The user's case: a 4 KiB block of acknowledged (synced) batches zeroed in the newest
    /// segment. Ok when the open refuses it, naming the damaged offsets, and leaves the file
    /// as it was; Err says what it did instead.
    fn zeroed_block_is_refused(dir: &Path) -> Result<(), String> {
        let (written, path) = crashed_log(dir, 100, 0);
        write_at(&path, 2 * BLOCK as u64, &[0u8; BLOCK]);
        let before = std::fs::read(&path).unwrap();
        // The first batch that the block damages.
        let first = (0..written.len())
            .find(|&i| position_of(&written, i + 1) > 2 * BLOCK as u64)
            .unwrap() as i64;
        match Log::open(dir, config()) {
            Err(LogError::Corrupt { offset, reason, .. }) => {
                if offset != first {
                    return Err(format!("refused at offset {offset}, not {first}"));
                }
                if !reason.contains("durable mark")
                    || !reason.contains(&format!("offsets {first} to 98"))
                {
                    return Err(format!("reason does not name the mark and range: {reason}"));
                }
            }
            Err(other) => return Err(format!("another error: {other}")),
            Ok(log) => return Err(format!("opened, cut at {}", log.end_offset())),
        }
        if std::fs::read(&path).unwrap() != before {
            return Err("the segment was changed".into());
        }
        Ok(())
    }

    #[test]
    fn a_zeroed_block_below_the_durable_mark_is_corruption_not_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        zeroed_block_is_refused(dir.path()).unwrap();
        let message = Log::open(dir.path(), config()).err().unwrap().to_string();
        assert!(
            message.contains("Restore this replica from a peer"),
            "{message}"
        );
    }

    /// The planted bug: recovery that ignores the durable claims takes the hole for a torn tail
    /// and cuts acknowledged batches away, and the test above catches it.
    #[test]
    fn the_planted_bug_of_ignoring_the_mark_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        IGNORE_DURABLE_CLAIMS.with(|ignore| ignore.set(true));
        let outcome = zeroed_block_is_refused(dir.path());
        IGNORE_DURABLE_CLAIMS.with(|ignore| ignore.set(false));
        let error = outcome.unwrap_err();
        assert!(error.starts_with("opened, cut at"), "{error}");
    }

    /// A write torn past what was durable (the last group's batches garbled, its mark landed,
    /// or not) is cut as before, with a fresh mark for the new end; the log then appends and
    /// reopens.
    #[test]
    fn a_torn_last_write_past_the_mark_is_cut() {
        for mark_landed in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let (written, path) = crashed_log(dir.path(), 50, 3);
            let last_start = position_of(&written, 50);
            write_at(&path, last_start + 120, &[0x5A; 400]);
            if !mark_landed {
                let mark_at = position_of(&written, 53).next_multiple_of(BLOCK as u64);
                write_at(&path, mark_at, &[0u8; BLOCK]);
            }
            let log = Log::open(dir.path(), config()).unwrap();
            assert_eq!(log.end_offset(), 50, "mark landed: {mark_landed}");
            assert_eq!(log.read(0, 1 << 20).unwrap(), written[..50]);
            let marks = marks_in(&path);
            assert_eq!(marks.len(), 1, "{marks:?}");
            assert_eq!(
                (marks[0].1.durable_position, marks[0].1.durable_offset),
                (last_start, 50)
            );
            drop(log);
            let mut log = Log::open(dir.path(), config()).unwrap();
            log.append(&[batch_for_tests(50, &[7], b"after")]).unwrap();
            drop(log);
            assert_eq!(Log::open(dir.path(), config()).unwrap().end_offset(), 51);
        }
    }

    /// A recycled file keeps the marks of its earlier life, under another base: they say
    /// nothing about this one. Nor does a mark found anywhere but where it was written. Here
    /// the last write is torn and its mark lost, so recovery searches the file and meets both.
    #[test]
    fn a_mark_of_another_base_or_another_place_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), config()).unwrap();
        log.reset_to(1_000, 1).unwrap();
        let written: Vec<Bytes> = (0..30)
            .map(|i| batch_for_tests(1_000 + i, &[i], &[1; 250]))
            .collect();
        for b in &written[..27] {
            log.append(std::slice::from_ref(b)).unwrap();
        }
        log.append(&written[27..]).unwrap();
        drop(log);
        let path = dir.path().join(segment_file_name(1_000));
        let torn_at = position_of(&written, 27);
        write_at(&path, torn_at + 100, &[0x5A; 300]);
        let end = position_of(&written, 30).next_multiple_of(BLOCK as u64);
        write_at(&path, end, &[0u8; BLOCK]);
        let plant = |base: Offset, written_at: u64, lies_at: u64| {
            let mut block = vec![0u8; BLOCK];
            DurableMark {
                segment_base: base,
                mark_position: written_at,
                durable_position: written_at - BLOCK as u64,
                durable_offset: 5_000,
            }
            .encode_into(&mut block);
            write_at(&path, lies_at, &block);
        };
        plant(500, end + 4 * BLOCK as u64, end + 4 * BLOCK as u64);
        plant(1_000, end + 2 * BLOCK as u64, end + 8 * BLOCK as u64);
        let log = Log::open(dir.path(), config()).unwrap();
        assert_eq!(log.end_offset(), 1_027, "cut as a torn tail");
    }

    /// A truncation leaves no mark of what it cut: the blocks past the cut go with the
    /// ftruncate, and the one mark left says where the log now ends, so a crash after it
    /// opens at the cut and appends over it reopen.
    #[test]
    fn after_a_truncation_no_mark_of_the_cut_data_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = crashed_log(dir.path(), 40, 0);
        let mut log = Log::open(dir.path(), config()).unwrap();
        assert!(marks_in(&path).iter().any(|(_, m)| m.durable_offset >= 39));
        log.truncate_to(10).unwrap();
        let marks = marks_in(&path);
        assert_eq!(marks.len(), 1, "{marks:?}");
        assert_eq!(marks[0].1.durable_offset, 10);
        for i in 10..13 {
            log.append(&[batch_for_tests(i, &[i], b"again")]).unwrap();
        }
        drop(log);
        assert!(marks_in(&path).iter().all(|(_, m)| m.durable_offset <= 13));
        assert_eq!(Log::open(dir.path(), config()).unwrap().end_offset(), 13);
    }

    /// After a clean stop the checkpoint and the stop's mark both say where the log ends: a
    /// block zeroed below is refused, even with the mark gone (the checkpoint alone), and
    /// the open falls back to a full scan only to find the damage.
    #[test]
    fn after_a_clean_stop_the_checkpoint_alone_refuses_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let (written, path) = crashed_log(dir.path(), 100, 0);
        let mut log = Log::open(dir.path(), config()).unwrap();
        log.checkpoint_now().unwrap();
        drop(log);
        write_at(&path, 2 * BLOCK as u64, &[0u8; BLOCK]);
        let end = position_of(&written, 100).next_multiple_of(BLOCK as u64);
        write_at(&path, end, &[0u8; BLOCK]);
        assert!(marks_in(&path).is_empty());
        match Log::open(dir.path(), config()) {
            Err(LogError::Corrupt { reason, .. }) => {
                assert!(reason.contains("recovery checkpoint"), "{reason}")
            }
            Err(other) => panic!("{other}"),
            Ok(log) => panic!("opened at {}", log.end_offset()),
        }
    }

    /// The decision alone: a claim past the stop is corruption whatever the stop; at or below
    /// it, an invalid batch is a torn tail and zeros the end; a claim at the stop with another
    /// offset is an inconsistency; valid data after a bad batch is corruption regardless.
    #[test]
    fn judging_the_last_segments_stop() {
        let outcome = |stop: ScanStop| ScanOutcome {
            end_position: 1_000,
            end_offset: 10,
            stop,
        };
        let invalid = |followed| ScanStop::Invalid {
            reason: "bad crc".into(),
            followed_by_valid: followed,
        };
        let claim = |position, offset| {
            Some(Claim {
                position,
                offset,
                source: ClaimSource::Mark(8192),
            })
        };
        let corrupt = |v: Verdict| matches!(v, Verdict::Corrupt(_));
        assert!(corrupt(judge_last(
            &outcome(ScanStop::Zeros),
            claim(1_001, 11)
        )));
        assert!(corrupt(judge_last(
            &outcome(invalid(false)),
            claim(2_000, 20)
        )));
        assert!(corrupt(judge_last(
            &outcome(ScanStop::Zeros),
            claim(1_000, 11)
        )));
        assert!(corrupt(judge_last(&outcome(invalid(true)), None)));
        assert_eq!(
            judge_last(&outcome(invalid(false)), claim(1_000, 10)),
            Verdict::TornTail("bad crc".into())
        );
        assert_eq!(
            judge_last(&outcome(invalid(false)), None),
            Verdict::TornTail("bad crc".into())
        );
        assert_eq!(
            judge_last(&outcome(ScanStop::Mark), claim(900, 9)),
            Verdict::End
        );
    }
}
