//! The sparse offset index of a segment: in memory while the segment is written, in its index
//! file ([`index_file`]) once it is sealed, so that memory holds the hints of the active
//! segment only (docs/storage.md, "Sparse index").

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::index_file::{self, IndexFileHeader, PersistedIndex};
use crate::base::Offset;

/// Below every timestamp a batch can carry: the running maximum of no batch at all.
pub const NO_TIMESTAMP: i64 = i64::MIN;

/// One hint of the sparse index: a batch's base offset, where it starts, and the largest
/// MaxTimestamp of the segment's batches before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct IndexEntry {
    pub(super) offset: Offset,
    pub(super) position: u64,
    /// Running maximum over the batches before this one in the segment ([`NO_TIMESTAMP`] for
    /// the first): non-decreasing along the entries, so a search by timestamp is a binary search.
    pub(super) max_before: i64,
}

/// Offset -> byte position hints, one per `interval` bytes of batches, ascending, each with the
/// running maximum of the batches' MaxTimestamp up to it (docs/storage.md, "Sparse index").
/// Memory: one 24-byte entry per `interval` bytes of the active segment, never one per batch;
/// a sealed segment's hints are in its index file.
#[derive(Debug)]
pub struct SparseIndex {
    /// The hints, while they are not in an index file.
    entries: Vec<IndexEntry>,
    /// The index file that holds the hints instead (then `entries` is empty).
    persisted: Option<PersistedIndex>,
    /// Position of the last indexed batch (to space entries `interval` apart).
    last_indexed_position: Option<u64>,
    /// The largest MaxTimestamp of every batch noted ([`NO_TIMESTAMP`] when none).
    max_timestamp: i64,
    /// False for a segment that was not scanned at open: loaded or built on its first read.
    pub complete: bool,
    /// Reads of the index file that failed (each answered from the segment's start); the first
    /// is logged, the rest only counted, so a bad disk under a busy reader does not flood the
    /// log with one warning per lookup.
    read_failures: AtomicU64,
}

impl SparseIndex {
    pub fn new(complete: bool) -> Self {
        Self {
            entries: Vec::new(),
            persisted: None,
            last_indexed_position: None,
            max_timestamp: NO_TIMESTAMP,
            complete,
            read_failures: AtomicU64::new(0),
        }
    }

    /// The index of a sealed segment, from its checked index file.
    pub fn from_file(header: &IndexFileHeader, persisted: PersistedIndex) -> Self {
        Self {
            entries: Vec::new(),
            persisted: Some(persisted),
            last_indexed_position: header.last_position,
            max_timestamp: header.max_timestamp,
            complete: true,
            read_failures: AtomicU64::new(0),
        }
    }

    /// Notes a batch starting at `position` with base offset `offset` and MaxTimestamp
    /// `max_timestamp` (called in file order, for every batch; never on a sealed segment's
    /// index file).
    pub fn note(&mut self, offset: Offset, position: u64, max_timestamp: i64, interval: u64) {
        assert!(
            self.persisted.is_none(),
            "a batch noted in a sealed segment"
        );
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

    /// Writes the hints to the index file at `path` for the sealed segment at `base_offset` of
    /// `segment_bytes`, and from then on reads them from there. On an error nothing changes
    /// (the hints stay in memory).
    pub fn persist(
        &mut self,
        path: &Path,
        base_offset: Offset,
        segment_bytes: u64,
    ) -> io::Result<()> {
        if self.persisted.is_some() {
            return Ok(());
        }
        assert!(self.complete, "an index not built yet is persisted");
        let header = IndexFileHeader {
            base_offset,
            segment_bytes,
            max_timestamp: self.max_timestamp,
            last_position: self.last_indexed_position,
        };
        self.persisted = Some(index_file::write(path, &header, &self.entries)?);
        self.entries = Vec::new();
        Ok(())
    }

    /// [`Self::persist`], with a failure logged: it costs memory, not correctness (the hints
    /// stay in memory).
    pub fn persist_or_warn(&mut self, path: &Path, base_offset: Offset, segment_bytes: u64) {
        if let Err(error) = self.persist(path, base_offset, segment_bytes) {
            tracing::warn!(path = %path.display(), %error,
                "could not write a sparse-index file: the segment's index stays in memory; check \
                 free space and permissions in the log directory");
        }
    }

    /// Takes the hints back into memory and removes the index file at `path` (a truncation
    /// into a sealed segment makes it the active one again). On an error nothing changes.
    pub fn unpersist(&mut self, path: &Path) -> io::Result<()> {
        let Some(persisted) = &self.persisted else {
            return Ok(());
        };
        let entries = persisted.entries()?;
        remove_if_present(path)?;
        self.entries = entries;
        self.persisted = None;
        Ok(())
    }

    /// Whether the hints are in an index file.
    pub fn is_persisted(&self) -> bool {
        self.persisted.is_some()
    }

    fn len(&self) -> usize {
        match &self.persisted {
            Some(p) => p.len(),
            None => self.entries.len(),
        }
    }

    fn entry(&self, i: usize) -> io::Result<IndexEntry> {
        match &self.persisted {
            Some(p) => p.entry(i),
            None => Ok(self.entries[i]),
        }
    }

    /// The number of leading hints for which `pred` holds (`pred` is true then false along
    /// the hints), reading an index file's hints one at a time.
    fn partition_point(&self, pred: impl Fn(&IndexEntry) -> bool) -> io::Result<usize> {
        if self.persisted.is_none() {
            return Ok(self.entries.partition_point(pred));
        }
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if pred(&self.entry(mid)?) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        Ok(low)
    }

    /// The hint before the first one `pred` rejects, if any.
    fn last_where(&self, pred: impl Fn(&IndexEntry) -> bool) -> io::Result<Option<IndexEntry>> {
        match self.partition_point(pred)? {
            0 => Ok(None),
            i => self.entry(i - 1).map(Some),
        }
    }

    /// The position of a batch at or before the one holding `offset` (0 when none is indexed).
    pub fn lookup(&self, offset: Offset) -> u64 {
        let hint = self.last_where(|e| e.offset <= offset);
        self.hinted(hint, "lookup").map_or(0, |e| e.position)
    }

    /// The position and base offset of a batch at or before the one holding `offset` (None when
    /// none is indexed: the walk starts at the segment's first batch, at its base offset).
    pub fn lookup_hint(&self, offset: Offset) -> Option<(u64, Offset)> {
        let hint = self.last_where(|e| e.offset <= offset);
        self.hinted(hint, "lookup").map(|e| (e.position, e.offset))
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
        // The last hint whose predecessors do not reach `target` yet: the batch is at or
        // after it, and before the next hint.
        let hint = self.last_where(|e| e.max_before < target);
        Some(
            self.hinted(hint, "timestamp lookup")
                .map_or(0, |e| e.position),
        )
    }

    /// The last hint of a batch starting below `offset` and below byte `position`, as (its
    /// position, the running maximum before it); (0, [`NO_TIMESTAMP`]) when there is none. The
    /// batches from there to (`offset`, `position`) are what a reader must still look at to know
    /// the maximum below that point.
    pub fn last_hint_below(&self, offset: Offset, position: u64) -> (u64, i64) {
        let hint = self.last_where(|e| e.offset < offset && e.position < position);
        self.hinted(hint, "timestamp lookup")
            .map_or((0, NO_TIMESTAMP), |e| (e.position, e.max_before))
    }

    /// Reads of the index file that failed since the index was loaded.
    #[cfg(test)]
    fn read_failures(&self) -> u64 {
        self.read_failures.load(Ordering::Relaxed)
    }

    /// A hint read from an index file that fails to read is no hint: the walk starts at the
    /// segment's first batch, which is always right, only slower (the segment read that
    /// follows reports a failing disk on its own). Warns on the first failure only.
    fn hinted(&self, hint: io::Result<Option<IndexEntry>>, what: &str) -> Option<IndexEntry> {
        hint.unwrap_or_else(|error| {
            if self.read_failures.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(%error, "reading a sparse-index file for a {what} failed: \
                    reading the segment from its start instead, here and on every later \
                    failure of this file (not logged again); check the disk (the index file \
                    is rebuilt when the node restarts if it is damaged)");
            }
            None
        })
    }

    /// Drops hints at or beyond `position` (a truncation there). `walked_max` is the largest
    /// MaxTimestamp of the batches between the last hint kept and `position`, which the caller
    /// read while finding `position` (from [`Self::lookup`]'s hint), so the running maximum
    /// becomes that of the batches left without reading them again. Only on hints in memory
    /// ([`Self::unpersist`] first).
    pub fn truncate_at(&mut self, position: u64, walked_max: i64) {
        assert!(self.persisted.is_none(), "a truncation of an index file");
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
}

pub(super) use crate::os::file::remove_if_present;

#[cfg(test)]
mod tests {
    use super::*;

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

    /// An index file that can no longer be read (here: cut short under the open handle) gives
    /// no hint, so every search starts at the segment's start; each failure is counted and only
    /// the first is logged.
    #[test]
    fn an_unreadable_index_file_gives_no_hint_and_counts_each_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut index = SparseIndex::new(true);
        for i in 0..10u64 {
            index.note(i as Offset * 10, i * 5000, i as i64, 4096);
        }
        assert!(!index.is_persisted());
        let in_memory = index.heap_bytes();
        assert!(
            in_memory >= 10 * std::mem::size_of::<IndexEntry>() as u64,
            "{in_memory} bytes for 10 hints"
        );
        index.persist(&path, 0, 50_000).unwrap();
        assert!(index.is_persisted());
        assert_eq!(index.heap_bytes(), 0, "the hints live in the file");
        assert_eq!(index.lookup(95), 45_000);
        assert_eq!(index.read_failures(), 0);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(64)
            .unwrap();
        let warnings = crate::warnings_counter::Warnings::default();
        tracing::subscriber::with_default(warnings.clone(), || {
            assert_eq!(index.lookup(95), 0);
            assert_eq!(index.first_reaching(8), Some(0));
            assert_eq!(index.last_hint_below(95, 47_000), (0, NO_TIMESTAMP));
        });
        assert_eq!(index.read_failures(), 3);
        assert_eq!(warnings.count(), 1, "logged once");
    }

    /// A file already gone is fine; any other failure to remove it is an error.
    #[test]
    fn remove_if_present_ignores_only_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gone.index");
        std::fs::write(&file, b"x").unwrap();
        remove_if_present(&file).unwrap();
        assert!(!file.exists());
        remove_if_present(&file).unwrap();
        let error = remove_if_present(dir.path()).expect_err("a directory is not removed");
        assert_ne!(error.kind(), io::ErrorKind::NotFound);
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
            /// The segment sealed: the hints go to an index file (and come back into memory
            /// before the next append or truncation, as the log takes them back).
            Persist,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                8 => (61u64..3000, -3i64..40).prop_map(|(len, ts)| Op::Append { len, ts }),
                1 => (0.0f64..1.0).prop_map(Op::Truncate),
                1 => Just(Op::Rebuild),
                1 => Just(Op::Persist),
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
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("0.index");
                for op in ops {
                    if !matches!(op, Op::Persist) {
                        index.unpersist(&path).unwrap();
                        prop_assert!(!path.exists());
                    }
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
                        Op::Persist => {
                            let size = batches.last().map_or(0, |b| b.position + b.len);
                            index.persist(&path, 0, size).unwrap();
                            prop_assert!(index.is_persisted() && index.heap_bytes() == 0);
                        }
                    }
                    check(&index, &batches)?;
                }
            }
        }
    }
}
