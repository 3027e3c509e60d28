//! Segment files: naming, the file readers share with the writer, and positioned reads through
//! a chunk cache.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

use super::batch_meta::{self, Peek, BATCH_HEADER_LEN};
use super::index::SparseIndex;
use super::index_file::{self, IndexFileRefused};
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
    parse_offset_file_name(name, SEGMENT_SUFFIX)
}

/// The offset named by `name` if it is Kafka's 20 zero-padded digits and then `suffix` (a
/// segment's or its index's file).
pub(super) fn parse_offset_file_name(name: &str, suffix: &str) -> Option<Offset> {
    let digits = name.strip_suffix(suffix)?;
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
    /// Held while a sealed segment's index is loaded or built, so that two threads never
    /// write its index file at once.
    building: Mutex<()>,
}

impl SegmentFile {
    pub fn new(path: PathBuf, reader: File, readable_size: u64, index: SparseIndex) -> Arc<Self> {
        Arc::new(Self {
            path,
            reader,
            readable_size: AtomicU64::new(readable_size),
            index: Mutex::new(index),
            building: Mutex::new(()),
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

    /// The index file next to this segment.
    pub fn index_path(&self) -> PathBuf {
        index_file::index_path(&self.path)
    }

    /// The base offset this segment's file name gives.
    pub fn base_offset(&self) -> Offset {
        self.path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_segment_file_name)
            .expect("a segment file name")
    }

    /// Gives a sealed segment that was not scanned at open its sparse index: from its index
    /// file when that passes its checks, else built by walking the batch headers and written
    /// to the index file. The walk runs without the index lock (it may read a whole segment), so
    /// a reader building it never holds up the writer; only a segment nobody has changed since
    /// the open lacks an index (a truncation indexes its target first).
    pub fn ensure_indexed(&self, interval: u64) -> io::Result<()> {
        if self.index.lock().complete {
            return Ok(());
        }
        let _building = self.building.lock();
        if self.index.lock().complete {
            return Ok(());
        }
        let (base, size) = (self.base_offset(), self.readable_size());
        let path = self.index_path();
        let loaded = match index_file::load(&path, base, size, &self.reader) {
            Ok((header, persisted)) => SparseIndex::from_file(&header, persisted),
            Err(refused) => {
                if !matches!(refused, IndexFileRefused::Missing) {
                    tracing::warn!(path = %path.display(), reason = %refused,
                        "sparse-index file not used: rebuilding it from the segment's batches \
                         (derived data; nothing to do unless this repeats, which points at the disk)");
                }
                let mut built = self.build_index(interval)?;
                built.persist_or_warn(&path, base, size);
                built
            }
        };
        let mut index = self.index.lock();
        if !index.complete {
            *index = loaded;
        }
        Ok(())
    }

    /// The sparse index of this segment's batches, walking their headers.
    fn build_index(&self, interval: u64) -> io::Result<SparseIndex> {
        let mut built = SparseIndex::new(true);
        let limit = self.readable_size();
        let mut reader = self.chunk_reader(limit);
        let mut position = 0;
        let mut expected = self.base_offset();
        while position < limit {
            let header = reader.get(position, BATCH_HEADER_LEN)?;
            let Peek::Header(meta) = batch_meta::peek(&header) else {
                break;
            };
            // A header whose BaseOffset (which the batch CRC does not cover) does not continue
            // the one before is never indexed: no hint names a wrong offset, and a read that
            // walks there refuses it (docs/storage.md, "Header fields the CRC leaves out").
            if meta.base_offset != expected {
                tracing::warn!(path = %self.path.display(), position, offset = expected,
                    found = meta.base_offset, "a batch header in this segment does not continue \
                    the log (its BaseOffset is wrong): reads from here on are refused; restore \
                    this replica from a peer");
                break;
            }
            built.note(meta.base_offset, position, meta.max_timestamp, interval);
            position += meta.len as u64;
            expected = meta.next_offset();
        }
        Ok(built)
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

    /// Reads through the cached chunk return the file's bytes wherever they fall: forward over
    /// several chunks, backwards, across a chunk's end, and cut at the limit.
    #[test]
    fn chunk_reads_return_the_files_bytes_anywhere_below_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bytes");
        let data: Vec<u8> = (0..(3 * CHUNK_BYTES + 12_345) as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        let limit = data.len() as u64 - 100;
        let mut reader = ChunkReader::new(&file, limit);
        let mut positions: Vec<u64> = (0..limit).step_by(65_521).collect();
        positions.extend([CHUNK_BYTES as u64 - 10, 5, 2 * CHUNK_BYTES as u64 + 7, 1]);
        positions.extend(positions.clone().into_iter().rev());
        for position in positions {
            let got = reader.get(position, 300).unwrap();
            let end = (position + 300).min(limit) as usize;
            assert_eq!(&got[..], &data[position as usize..end], "at {position}");
        }
        assert!(reader.get(limit, 10).unwrap().is_empty());
    }

    /// A sealed segment without an index file gets one built in silence (the normal case after
    /// an upgrade or a crash before the file was written); a damaged one is rebuilt with a
    /// warning, as it points at the disk.
    #[test]
    fn a_missing_index_file_is_built_quietly_and_a_damaged_one_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(segment_file_name(0));
        let batch = crate::record::batch_for_tests(0, &[1_000], b"value");
        std::fs::write(&path, &batch).unwrap();
        let open = || {
            let reader = SegmentFile::open_reader(&path).unwrap();
            SegmentFile::new(
                path.clone(),
                reader,
                batch.len() as u64,
                SparseIndex::new(false),
            )
        };
        let warned = |segment: &SegmentFile| {
            let warnings = crate::warnings_counter::Warnings::default();
            tracing::subscriber::with_default(warnings.clone(), || {
                segment.ensure_indexed(4096).unwrap();
            });
            assert!(segment.index.lock().complete);
            warnings.count()
        };
        let first = open();
        assert_eq!(warned(&first), 0, "no index file yet");
        assert!(first.index_path().exists(), "written once built");
        std::fs::write(first.index_path(), b"damaged").unwrap();
        assert_eq!(warned(&open()), 1, "a damaged index file");
    }
}
