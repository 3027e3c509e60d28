//! Segment files: naming, the sparse offset index, and positioned reads through a chunk cache.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

use super::batch_meta::{self, Peek, BATCH_HEADER_LEN};
use crate::base::Offset;
use crate::os::file::read_at_most;

/// The suffix of segment files.
pub const SEGMENT_SUFFIX: &str = ".log";

/// `00000000000000000042.log` for base offset 42 (Kafka's naming: 20 digits, zero-padded).
pub fn segment_file_name(base_offset: Offset) -> String {
    assert!(base_offset >= 0);
    format!("{base_offset:020}{SEGMENT_SUFFIX}")
}

/// The base offset named by a segment file name, if it is one.
pub fn parse_segment_file_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Sorted base offsets of the segment files in `dir`.
pub fn list_segments(dir: &Path) -> io::Result<Vec<Offset>> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(base) = entry.file_name().to_str().and_then(parse_segment_file_name) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Below every timestamp a batch can carry: the running maximum of no batch at all.
pub const NO_TIMESTAMP: i64 = i64::MIN;

/// One hint of the sparse index: a batch's base offset, where it starts, and the largest
/// MaxTimestamp of the segment's batches before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IndexEntry {
    offset: Offset,
    position: u64,
    /// Running maximum over the batches before this one in the segment ([`NO_TIMESTAMP`] for
    /// the first): non-decreasing along the entries, so a search by timestamp is a binary search.
    max_before: i64,
}

/// Offset -> byte position hints, one per `interval` bytes of batches, ascending, each with the
/// running maximum of the batches' MaxTimestamp up to it (docs/storage.md, "Sparse index").
/// Memory: one 24-byte entry per `interval` bytes of log, never one per batch.
#[derive(Debug)]
pub struct SparseIndex {
    entries: Vec<IndexEntry>,
    /// Position of the last indexed batch (to space entries `interval` apart).
    last_indexed_position: Option<u64>,
    /// The largest MaxTimestamp of every batch noted ([`NO_TIMESTAMP`] when none).
    max_timestamp: i64,
    /// False for a segment that was not scanned at open: built on its first read.
    pub complete: bool,
}

impl SparseIndex {
    pub fn new(complete: bool) -> Self {
        Self {
            entries: Vec::new(),
            last_indexed_position: None,
            max_timestamp: NO_TIMESTAMP,
            complete,
        }
    }

    /// Notes a batch starting at `position` with base offset `offset` and MaxTimestamp
    /// `max_timestamp` (called in file order, for every batch).
    pub fn note(&mut self, offset: Offset, position: u64, max_timestamp: i64, interval: u64) {
        let due = self
            .last_indexed_position
            .is_none_or(|last| position >= last + interval);
        if due {
            assert!(self
                .entries
                .last()
                .is_none_or(|e| e.offset < offset && e.position < position));
            self.entries.push(IndexEntry {
                offset,
                position,
                max_before: self.max_timestamp,
            });
            self.last_indexed_position = Some(position);
        }
        self.max_timestamp = self.max_timestamp.max(max_timestamp);
    }

    /// The position of a batch at or before the one holding `offset` (0 when none is indexed).
    pub fn lookup(&self, offset: Offset) -> u64 {
        let index = self.entries.partition_point(|e| e.offset <= offset);
        if index == 0 {
            0
        } else {
            self.entries[index - 1].position
        }
    }

    /// Bytes the entries take on the heap (the vector's capacity).
    pub fn heap_bytes(&self) -> u64 {
        (self.entries.capacity() * std::mem::size_of::<IndexEntry>()) as u64
    }

    /// The largest MaxTimestamp of the batches noted ([`NO_TIMESTAMP`] for none).
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Where to start looking for the first batch whose MaxTimestamp is at least `target`: the
    /// start of the one stretch between two hints that holds it (at most `interval` bytes and a
    /// batch before it), or None when no batch of the segment reaches `target`.
    pub fn first_reaching(&self, target: i64) -> Option<u64> {
        if self.max_timestamp < target {
            return None;
        }
        // The first hint whose predecessors already reach `target`: the batch is before it.
        let after = self.entries.partition_point(|e| e.max_before < target);
        Some(match after {
            0 => 0,
            i => self.entries[i - 1].position,
        })
    }

    /// The last hint of a batch starting below `offset` and below byte `position`, as (its
    /// position, the running maximum before it); (0, [`NO_TIMESTAMP`]) when there is none. The
    /// batches from there to (`offset`, `position`) are what a reader must still look at to know
    /// the maximum below that point.
    pub fn last_hint_below(&self, offset: Offset, position: u64) -> (u64, i64) {
        let index = self
            .entries
            .partition_point(|e| e.offset < offset && e.position < position);
        match index {
            0 => (0, NO_TIMESTAMP),
            i => (self.entries[i - 1].position, self.entries[i - 1].max_before),
        }
    }

    /// Drops hints at or beyond `position` (a truncation there). `walked_max` is the largest
    /// MaxTimestamp of the batches between the last hint kept and `position`, which the caller
    /// read while finding `position` (from [`Self::lookup`]'s hint), so the running maximum
    /// becomes that of the batches left without reading them again.
    pub fn truncate_at(&mut self, position: u64, walked_max: i64) {
        let keep = self.entries.partition_point(|e| e.position < position);
        let at_cut = self
            .entries
            .get(keep)
            .filter(|e| e.position == position)
            .map_or(NO_TIMESTAMP, |e| e.max_before);
        let before_last = self.entries[..keep]
            .last()
            .map_or(NO_TIMESTAMP, |e| e.max_before);
        self.max_timestamp = before_last.max(walked_max).max(at_cut);
        self.entries.truncate(keep);
        self.last_indexed_position = self.entries.last().map(|e| e.position);
    }

    /// Hints held (for the memory checks of the tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// One segment file: what only the writer keeps (sizes including staged batches), and the
/// [`SegmentFile`] it shares with readers on other threads.
#[derive(Debug)]
pub struct Segment {
    pub file: Arc<SegmentFile>,
    /// Bytes of batches in the file, staged ones included for the active segment.
    pub size: u64,
    /// One past the last offset in the segment (staged batches included).
    pub end_offset: Offset,
}

/// The part of a segment that readers on other threads share with the writer (docs/storage.md,
/// "Reads off the writer thread"): the file, how much of it is written, and its sparse index.
#[derive(Debug)]
pub struct SegmentFile {
    pub path: PathBuf,
    /// Buffered read-only handle for reads and scans (coherent with O_DIRECT writes: the kernel
    /// drops cached pages of a range a direct write covers).
    pub reader: File,
    /// Bytes of batches written and synced to the file (what reads may return). Only the writer
    /// changes it: it grows when a group is durable and shrinks, before the file is cut, in a
    /// truncation.
    readable_size: AtomicU64,
    pub index: Mutex<SparseIndex>,
}

impl SegmentFile {
    pub fn new(path: PathBuf, reader: File, readable_size: u64, index: SparseIndex) -> Arc<Self> {
        Arc::new(Self {
            path,
            reader,
            readable_size: AtomicU64::new(readable_size),
            index: Mutex::new(index),
        })
    }

    pub fn open_reader(path: &Path) -> io::Result<File> {
        OpenOptions::new().read(true).open(path)
    }

    pub fn readable_size(&self) -> u64 {
        self.readable_size.load(Ordering::Acquire)
    }

    /// Publishes how much of the file is written (Release: the bytes below are on disk first).
    pub fn set_readable_size(&self, size: u64) {
        self.readable_size.store(size, Ordering::Release);
    }

    /// A reader over `[0, limit)` of this segment's file.
    pub fn chunk_reader(&self, limit: u64) -> ChunkReader<'_> {
        ChunkReader::new(&self.reader, limit)
    }

    /// Builds the sparse index of a segment that was not scanned at open, walking batch headers.
    /// The walk runs without the index lock (it may read a whole segment), so a reader building
    /// it never holds up the writer; only a segment nobody has changed since the open lacks an
    /// index (a truncation indexes its target first), so two walks build the same index.
    pub fn ensure_indexed(&self, interval: u64) -> io::Result<()> {
        if self.index.lock().complete {
            return Ok(());
        }
        let mut built = SparseIndex::new(true);
        let limit = self.readable_size();
        let mut reader = self.chunk_reader(limit);
        let mut position = 0;
        while position < limit {
            let header = reader.get(position, BATCH_HEADER_LEN)?;
            let Peek::Header(meta) = batch_meta::peek(&header) else {
                break;
            };
            built.note(meta.base_offset, position, meta.max_timestamp, interval);
            position += meta.len as u64;
        }
        let mut index = self.index.lock();
        if !index.complete {
            *index = built;
        }
        Ok(())
    }
}

/// Positioned reads through one cached chunk, so that walking many small batches costs few
/// syscalls. Returned `Bytes` share the chunk (no copy).
pub struct ChunkReader<'a> {
    file: &'a File,
    limit: u64,
    chunk: Bytes,
    chunk_position: u64,
}

const CHUNK_BYTES: usize = 1 << 20;

impl<'a> ChunkReader<'a> {
    pub fn new(file: &'a File, limit: u64) -> Self {
        Self {
            file,
            limit,
            chunk: Bytes::new(),
            chunk_position: 0,
        }
    }

    /// Up to `len` bytes at `position` (fewer at the limit).
    pub fn get(&mut self, position: u64, len: usize) -> io::Result<Bytes> {
        let end = (position + len as u64).min(self.limit);
        if position >= end {
            return Ok(Bytes::new());
        }
        let chunk_end = self.chunk_position + self.chunk.len() as u64;
        if position < self.chunk_position || end > chunk_end {
            self.fill(position, (end - position) as usize)?;
        }
        let start = (position - self.chunk_position) as usize;
        let stop = ((end - self.chunk_position) as usize).min(self.chunk.len());
        Ok(self.chunk.slice(start..stop))
    }

    fn fill(&mut self, position: u64, at_least: usize) -> io::Result<()> {
        let want = at_least
            .max(CHUNK_BYTES)
            .min((self.limit - position) as usize);
        let mut buf = BytesMut::zeroed(want);
        let got = read_at_most(self.file, &mut buf, position)?;
        buf.truncate(got);
        self.chunk = buf.freeze();
        self.chunk_position = position;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(segment_file_name(42), "00000000000000000042.log");
        assert_eq!(
            parse_segment_file_name("00000000000000000042.log"),
            Some(42)
        );
        assert_eq!(parse_segment_file_name("42.log"), None);
        assert_eq!(parse_segment_file_name("0000000000000000004x.log"), None);
        assert_eq!(parse_segment_file_name("00000000000000000042.index"), None);
    }

    #[test]
    fn sparse_index_spaces_entries() {
        let mut index = SparseIndex::new(true);
        index.note(0, 0, 5, 4096);
        index.note(10, 1000, 7, 4096);
        index.note(50, 5000, 6, 4096);
        assert_eq!(index.lookup(9), 0);
        assert_eq!(index.lookup(60), 5000);
        assert_eq!(index.len(), 2, "the batch at 1000 is within the interval");
        index.truncate_at(5000, 7);
        assert_eq!(index.lookup(60), 0);
    }

    #[test]
    fn the_running_maximum_follows_appends_and_truncations() {
        let mut index = SparseIndex::new(true);
        assert_eq!(index.max_timestamp(), NO_TIMESTAMP);
        assert_eq!(index.first_reaching(0), None);
        // Batches of 1000 bytes at 0, 1000, ..., 9000 with interval 2000: hints at 0, 2000, ...
        let stamps = [10, 30, 20, 5, 40, 40, 1, 50, 2, 3];
        for (i, ts) in stamps.iter().enumerate() {
            index.note(i as i64 * 10, i as u64 * 1000, *ts, 2000);
        }
        assert_eq!(index.max_timestamp(), 50);
        assert_eq!(index.first_reaching(51), None);
        assert_eq!(index.first_reaching(10), Some(0));
        // 30 first appears in the batch at 1000: the stretch [0, 2000) holds it.
        assert_eq!(index.first_reaching(25), Some(0));
        // 40 at 4000, a hint itself: the stretch before the first hint past it, [4000, 6000).
        assert_eq!(index.first_reaching(35), Some(4000));
        assert_eq!(index.first_reaching(45), Some(6000));
        assert_eq!(index.last_hint_below(55, 5500), (4000, 30));
        assert_eq!(index.last_hint_below(40, 9000), (2000, 30));
        assert_eq!(index.last_hint_below(0, 9000), (0, NO_TIMESTAMP));
        // Cut at the batch at 7000 (ts 50): the walk from the hint at 6000 saw the batch at 6000.
        index.truncate_at(7000, 1);
        assert_eq!(index.max_timestamp(), 40);
        assert_eq!(index.first_reaching(45), None);
        // Cut at a hint (4000): its own running maximum is what stays, whatever was walked.
        index.truncate_at(4000, NO_TIMESTAMP);
        assert_eq!(index.max_timestamp(), 30);
        assert_eq!(index.first_reaching(35), None);
        index.truncate_at(0, NO_TIMESTAMP);
        assert_eq!(index.max_timestamp(), NO_TIMESTAMP);
        assert_eq!(index.len(), 0);
    }

    mod model {
        use super::super::*;
        use proptest::prelude::*;

        /// A batch of the model segment: base offset, position, length, MaxTimestamp.
        #[derive(Clone, Copy, Debug)]
        struct B {
            offset: Offset,
            position: u64,
            len: u64,
            ts: i64,
        }

        #[derive(Clone, Debug)]
        enum Op {
            Append {
                len: u64,
                ts: i64,
            },
            /// Truncate at the batch this fraction of the way in.
            Truncate(f64),
            /// The index built again from the batches (recovery, or a lazy index).
            Rebuild,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                8 => (61u64..3000, -3i64..40).prop_map(|(len, ts)| Op::Append { len, ts }),
                1 => (0.0f64..1.0).prop_map(Op::Truncate),
                1 => Just(Op::Rebuild),
            ]
        }

        const INTERVAL: u64 = 4096;

        fn rebuilt(batches: &[B]) -> SparseIndex {
            let mut index = SparseIndex::new(true);
            for b in batches {
                index.note(b.offset, b.position, b.ts, INTERVAL);
            }
            index
        }

        /// Checks every answer of `index` against a scan of `batches`.
        fn check(index: &SparseIndex, batches: &[B]) -> Result<(), TestCaseError> {
            let naive_max = batches.iter().map(|b| b.ts).max().unwrap_or(NO_TIMESTAMP);
            prop_assert_eq!(index.max_timestamp(), naive_max);
            let widest = batches.iter().map(|b| b.len).max().unwrap_or(0);
            let positions: Vec<u64> = batches.iter().map(|b| b.position).collect();
            for target in -4..42 {
                let naive = batches.iter().find(|b| b.ts >= target);
                match (index.first_reaching(target), naive) {
                    (None, None) => {}
                    (Some(start), Some(b)) => {
                        prop_assert!(start <= b.position, "{} past {:?}", start, b);
                        prop_assert!(positions.contains(&start) || start == 0);
                        prop_assert!(
                            b.position - start < INTERVAL + widest,
                            "stretch from {} to {:?}",
                            start,
                            b
                        );
                    }
                    (got, want) => prop_assert!(false, "{target}: {got:?} vs {want:?}"),
                }
            }
            for cut in batches.iter().step_by(3) {
                let (start, before) = index.last_hint_below(cut.offset + 1, cut.position + 1);
                prop_assert!(start <= cut.position);
                let naive_before = batches
                    .iter()
                    .take_while(|b| b.position < start)
                    .map(|b| b.ts)
                    .max()
                    .unwrap_or(NO_TIMESTAMP);
                prop_assert_eq!(before, naive_before);
                prop_assert!(cut.position - start < INTERVAL + widest);
            }
            let bytes = batches.last().map_or(0, |b| b.position + b.len);
            prop_assert!(index.len() as u64 <= bytes / INTERVAL + 1, "sparse");
            Ok(())
        }

        proptest! {
            #[test]
            fn the_index_answers_as_a_scan_of_the_batches(ops in proptest::collection::vec(op(), 1..120)) {
                let mut batches: Vec<B> = Vec::new();
                let mut index = SparseIndex::new(true);
                for op in ops {
                    match op {
                        Op::Append { len, ts } => {
                            let (offset, position) = batches
                                .last()
                                .map_or((0, 0), |b| (b.offset + 3, b.position + b.len));
                            let b = B { offset, position, len, ts };
                            index.note(b.offset, b.position, b.ts, INTERVAL);
                            batches.push(b);
                        }
                        Op::Truncate(fraction) => {
                            let k = (batches.len() as f64 * fraction) as usize;
                            let Some(cut) = batches.get(k).copied() else { continue };
                            // What Log::truncate_to walks: from the hint to the cut.
                            let from = index.lookup(cut.offset);
                            let walked = batches
                                .iter()
                                .filter(|b| b.position >= from && b.position < cut.position)
                                .map(|b| b.ts)
                                .max()
                                .unwrap_or(NO_TIMESTAMP);
                            index.truncate_at(cut.position, walked);
                            batches.truncate(k);
                        }
                        Op::Rebuild => index = rebuilt(&batches),
                    }
                    check(&index, &batches)?;
                }
            }
        }
    }
}
