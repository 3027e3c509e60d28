//! The index file of a sealed segment (`<base>.index`, Kafka's `.index` and `.timeindex` roles
//! in one file): the segment's sparse-index hints on disk, so that a node keeps no hints in
//! memory for the segments it no longer writes (docs/storage.md, "Sparse index").
//!
//! The file is derived data. It is written without fsync when a segment is sealed and checked
//! whole when it is loaded: a file that is missing, torn or from another life of the segment is
//! rebuilt from the segment's batch headers. A hint is only ever a place to start a walk, but a
//! wrong one would start a walk inside a batch, so the checks are strict.
//!
//! Layout, little-endian: a 64-byte header (magic, base offset, the segment's size in bytes, the
//! largest MaxTimestamp, the position of the last hint, the number of hints, 8 zero bytes, a
//! CRC-32C of the whole file taken with its own 4 bytes zero, 4 zero bytes), then 24 bytes a hint (base offset,
//! byte position, the running maximum of MaxTimestamp before it).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::batch_meta::{self, Peek, BATCH_HEADER_LEN};
use super::index::IndexEntry;
use crate::base::Offset;
use crate::os::file::read_at_most;

/// The suffix of index files.
pub const INDEX_SUFFIX: &str = ".index";
const MAGIC: [u8; 8] = *b"RRSPIX01";
const HEADER_LEN: u64 = 64;
const CRC_AT: usize = 56;
pub const ENTRY_LEN: u64 = 24;
/// `last_position` when the index holds no hint.
const NO_POSITION: u64 = u64::MAX;

/// The index file next to the segment file at `segment_path` (same base offset, `.index`).
pub fn index_path(segment_path: &Path) -> PathBuf {
    segment_path.with_extension(&INDEX_SUFFIX[1..])
}

/// The base offset an index file name stands for, if it is one.
pub fn parse_index_file_name(name: &str) -> Option<Offset> {
    super::segment::parse_offset_file_name(name, INDEX_SUFFIX)
}

/// What the header says besides the hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexFileHeader {
    pub base_offset: Offset,
    /// The size of the sealed segment the hints describe: a segment of another size is another
    /// segment (cut by a truncation, or grown again), and its file is not trusted.
    pub segment_bytes: u64,
    pub max_timestamp: i64,
    pub last_position: Option<u64>,
}

/// A loaded index file: the hints stay on disk and are read one at a time (a binary search
/// reads about 20 of them through the page cache), so a sealed segment costs a file handle and
/// a few words of memory, whatever its size.
#[derive(Debug)]
pub struct PersistedIndex {
    file: File,
    count: u64,
}

impl PersistedIndex {
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Hint `i` (below [`Self::len`]).
    pub fn entry(&self, i: usize) -> io::Result<IndexEntry> {
        assert!((i as u64) < self.count, "hint {i} of {}", self.count);
        let mut buf = [0u8; ENTRY_LEN as usize];
        self.file
            .read_exact_at(&mut buf, HEADER_LEN + i as u64 * ENTRY_LEN)?;
        Ok(decode_entry(&buf))
    }

    /// Every hint, in order (a truncation into a sealed segment takes them back into memory).
    pub fn entries(&self) -> io::Result<Vec<IndexEntry>> {
        let mut buf = vec![0u8; (self.count * ENTRY_LEN) as usize];
        self.file.read_exact_at(&mut buf, HEADER_LEN)?;
        Ok(buf
            .chunks_exact(ENTRY_LEN as usize)
            .map(decode_entry)
            .collect())
    }
}

/// Writes the index file at `path` (through a temporary name and a rename, so a reader never
/// sees half of it; no fsync: a torn file after a crash fails its check and is rebuilt) and
/// opens it for reading.
pub fn write(
    path: &Path,
    header: &IndexFileHeader,
    entries: &[IndexEntry],
) -> io::Result<PersistedIndex> {
    let mut bytes = Vec::with_capacity(HEADER_LEN as usize + entries.len() * ENTRY_LEN as usize);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&header.base_offset.to_le_bytes());
    bytes.extend_from_slice(&header.segment_bytes.to_le_bytes());
    bytes.extend_from_slice(&header.max_timestamp.to_le_bytes());
    bytes.extend_from_slice(&header.last_position.unwrap_or(NO_POSITION).to_le_bytes());
    bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&[0u8; 16]);
    debug_assert_eq!(bytes.len(), HEADER_LEN as usize);
    for e in entries {
        bytes.extend_from_slice(&e.offset.to_le_bytes());
        bytes.extend_from_slice(&e.position.to_le_bytes());
        bytes.extend_from_slice(&e.max_before.to_le_bytes());
    }
    let crc = checksum(&bytes);
    bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    let tmp = path.with_extension("index.tmp");
    {
        let mut file = File::create(&tmp)?;
        file.write_all(&bytes)?;
    }
    fs::rename(&tmp, path)?;
    Ok(PersistedIndex {
        file: OpenOptions::new().read(true).open(path)?,
        count: entries.len() as u64,
    })
}

/// Why an index file was not used.
#[derive(Debug, thiserror::Error)]
pub enum IndexFileRefused {
    #[error("no index file")]
    Missing,
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Invalid(String),
}

/// Loads and checks the index file at `path` for the sealed segment `segment` (its base offset
/// and size; `segment_file` to check the last hint against the batch it names).
pub fn load(
    path: &Path,
    base_offset: Offset,
    segment_bytes: u64,
    segment_file: &File,
) -> Result<(IndexFileHeader, PersistedIndex), IndexFileRefused> {
    // One handle for the check and the reads that follow: the hints read later are those
    // checked here, even if the name is replaced meanwhile.
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(IndexFileRefused::Missing),
        Err(e) => return Err(e.into()),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let invalid = |why: String| Err(IndexFileRefused::Invalid(why));
    if bytes.len() < HEADER_LEN as usize || bytes[..8] != MAGIC {
        return invalid(format!("no index header in {} bytes", bytes.len()));
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let stored_crc = u32::from_le_bytes(bytes[CRC_AT..CRC_AT + 4].try_into().expect("4 bytes"));
    let header = IndexFileHeader {
        base_offset: word(8) as i64,
        segment_bytes: word(16),
        max_timestamp: word(24) as i64,
        last_position: Some(word(32)).filter(|&p| p != NO_POSITION),
    };
    let count = word(40);
    let expected_len = count
        .checked_mul(ENTRY_LEN)
        .and_then(|n| n.checked_add(HEADER_LEN));
    if expected_len != Some(bytes.len() as u64) {
        return invalid(format!("{count} hints in a file of {} bytes", bytes.len()));
    }
    if checksum_unsummed(&bytes) != stored_crc {
        return invalid("checksum mismatch".into());
    }
    if header.base_offset != base_offset || header.segment_bytes != segment_bytes {
        return invalid(format!(
            "written for a segment at {} of {} bytes, not at {base_offset} of {segment_bytes}",
            header.base_offset, header.segment_bytes
        ));
    }
    let entries: Vec<IndexEntry> = bytes[HEADER_LEN as usize..]
        .chunks_exact(ENTRY_LEN as usize)
        .map(decode_entry)
        .collect();
    check_entries(&header, &entries, segment_file)?;
    Ok((header, PersistedIndex { file, count }))
}

/// The hints must be ascending, inside the segment, start at its first batch, and the last one
/// must name the batch that is there.
fn check_entries(
    header: &IndexFileHeader,
    entries: &[IndexEntry],
    segment_file: &File,
) -> Result<(), IndexFileRefused> {
    let invalid = |why: String| Err(IndexFileRefused::Invalid(why));
    let Some(last) = entries.last() else {
        return match header.segment_bytes {
            0 => Ok(()),
            n => invalid(format!("no hint for a segment of {n} bytes")),
        };
    };
    if entries[0].position != 0 || entries[0].offset != header.base_offset {
        return invalid(format!("the first hint is {:?}", entries[0]));
    }
    let ascending = entries
        .windows(2)
        .all(|w| w[0].offset < w[1].offset && w[0].position < w[1].position);
    if !ascending || last.position >= header.segment_bytes {
        return invalid("hints out of order or past the segment".into());
    }
    if header.last_position != Some(last.position) {
        return invalid(format!(
            "the last hint is not at {:?}",
            header.last_position
        ));
    }
    let mut batch_header = [0u8; BATCH_HEADER_LEN];
    let got = read_at_most(segment_file, &mut batch_header, last.position)?;
    match batch_meta::peek(&batch_header[..got]) {
        Peek::Header(meta) if meta.base_offset == last.offset => Ok(()),
        other => invalid(format!(
            "the last hint {last:?} names no batch there: {other:?}"
        )),
    }
}

fn decode_entry(bytes: &[u8]) -> IndexEntry {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    IndexEntry {
        offset: word(0) as i64,
        position: word(8),
        max_before: word(16) as i64,
    }
}

/// CRC-32C of the file with its checksum field zero.
fn checksum(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// [`checksum`] of a whole file as read, its checksum field taken as zero (without a copy).
fn checksum_unsummed(file: &[u8]) -> u32 {
    let head = crc32c::crc32c(&file[..CRC_AT]);
    let zeroed = crc32c::crc32c_append(head, &[0u8; 4]);
    crc32c::crc32c_append(zeroed, &file[CRC_AT + 4..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::index::NO_TIMESTAMP;
    use crate::record::batch_for_tests;

    const BASE: Offset = 100;

    /// A segment of three batches of 4 records at BASE: its file, size and batch positions.
    struct Segment {
        _dir: tempfile::TempDir,
        file: File,
        bytes: u64,
        positions: [u64; 3],
        index: PathBuf,
    }

    fn segment() -> Segment {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.log");
        let mut data = Vec::new();
        let mut positions = [0; 3];
        for (i, position) in positions.iter_mut().enumerate() {
            *position = data.len() as u64;
            let base = BASE + 4 * i as Offset;
            data.extend_from_slice(&batch_for_tests(
                base,
                &[1_000, 1_001, 1_002, 1_003],
                b"value",
            ));
        }
        fs::write(&path, &data).unwrap();
        Segment {
            file: File::open(&path).unwrap(),
            bytes: data.len() as u64,
            positions,
            index: dir.path().join("00000000000000000100.index"),
            _dir: dir,
        }
    }

    fn hint(offset: Offset, position: u64, max_before: i64) -> IndexEntry {
        IndexEntry {
            offset,
            position,
            max_before,
        }
    }

    /// Hints at the first and the third batch, as the log writes them.
    fn good(s: &Segment) -> (IndexFileHeader, Vec<IndexEntry>) {
        let header = IndexFileHeader {
            base_offset: BASE,
            segment_bytes: s.bytes,
            max_timestamp: 1_003,
            last_position: Some(s.positions[2]),
        };
        let entries = vec![
            hint(BASE, 0, NO_TIMESTAMP),
            hint(BASE + 8, s.positions[2], 1_003),
        ];
        (header, entries)
    }

    fn load_written(
        s: &Segment,
        header: &IndexFileHeader,
        entries: &[IndexEntry],
    ) -> Result<(IndexFileHeader, PersistedIndex), IndexFileRefused> {
        write(&s.index, header, entries).unwrap();
        load(&s.index, BASE, s.bytes, &s.file)
    }

    fn refused(result: Result<(IndexFileHeader, PersistedIndex), IndexFileRefused>) -> String {
        match result {
            Err(IndexFileRefused::Invalid(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_file_as_written_loads_with_its_hints() {
        let s = segment();
        let (header, entries) = good(&s);
        let (loaded, index) = load_written(&s, &header, &entries).unwrap();
        assert_eq!(loaded, header);
        assert_eq!(index.entries().unwrap(), entries);
        assert_eq!(index.entry(1).unwrap(), entries[1]);
        // An empty segment's file: the header alone.
        let empty = IndexFileHeader {
            segment_bytes: 0,
            last_position: None,
            ..header
        };
        write(&s.index, &empty, &[]).unwrap();
        let (loaded, index) = load(&s.index, BASE, 0, &s.file).unwrap();
        assert_eq!((loaded, index.len()), (empty, 0));
    }

    #[test]
    fn a_missing_file_is_missing_and_an_unopenable_one_an_error() {
        let s = segment();
        assert!(matches!(
            load(&s.index, BASE, s.bytes, &s.file),
            Err(IndexFileRefused::Missing)
        ));
        // A path through a regular file: ENOTDIR, not "missing".
        let through_a_file = s.index.with_extension("log").join("x.index");
        assert!(matches!(
            load(&through_a_file, BASE, s.bytes, &s.file),
            Err(IndexFileRefused::Io(_))
        ));
    }

    #[test]
    fn a_damaged_file_or_one_for_another_segment_is_refused() {
        let s = segment();
        let (header, entries) = good(&s);
        write(&s.index, &header, &entries).unwrap();
        let bytes = fs::read(&s.index).unwrap();
        let mut flipped = bytes.clone();
        flipped[HEADER_LEN as usize + 9] ^= 1;
        let mut magic = bytes.clone();
        magic[0] = b'X';
        for (bad, what) in [
            (flipped, "checksum mismatch"),
            (magic, "no index header"),
            (bytes[..HEADER_LEN as usize - 1].to_vec(), "no index header"),
            (bytes[..bytes.len() - 1].to_vec(), "hints in a file of"),
        ] {
            fs::write(&s.index, &bad).unwrap();
            let why = refused(load(&s.index, BASE, s.bytes, &s.file));
            assert!(why.contains(what), "{why}");
        }
        write(&s.index, &header, &entries).unwrap();
        let why = refused(load(&s.index, BASE + 1, s.bytes, &s.file));
        assert!(why.contains("written for a segment at 100"), "{why}");
        let why = refused(load(&s.index, BASE, s.bytes - 1, &s.file));
        assert!(why.contains("written for a segment at 100"), "{why}");
    }

    #[test]
    fn hints_that_do_not_describe_the_segment_are_refused() {
        let s = segment();
        let (header, entries) = good(&s);
        let p = s.positions;
        let cases: Vec<(&str, IndexFileHeader, Vec<IndexEntry>)> = vec![
            ("no hint for a non-empty segment", header, vec![]),
            (
                "first hint not at the start",
                header,
                vec![hint(BASE + 4, p[1], 1_003), entries[1]],
            ),
            (
                "first hint not the base offset",
                header,
                vec![hint(BASE + 1, 0, NO_TIMESTAMP), entries[1]],
            ),
            // A middle hint out of order, the first and last ones right.
            (
                "offsets not ascending",
                header,
                vec![entries[0], hint(BASE + 8, p[1], 1_003), entries[1]],
            ),
            (
                "positions not ascending",
                header,
                vec![entries[0], hint(BASE + 4, p[2], 1_003), entries[1]],
            ),
            (
                "last hint at the segment's end",
                IndexFileHeader {
                    last_position: Some(s.bytes),
                    ..header
                },
                vec![entries[0], hint(BASE + 8, s.bytes, 1_003)],
            ),
            (
                "last position not the header's",
                IndexFileHeader {
                    last_position: Some(p[1]),
                    ..header
                },
                entries.clone(),
            ),
            (
                "last hint naming another batch's offset",
                header,
                vec![entries[0], hint(BASE + 7, p[2], 1_003)],
            ),
            (
                "last hint inside a batch",
                IndexFileHeader {
                    last_position: Some(p[2] + 1),
                    ..header
                },
                vec![entries[0], hint(BASE + 8, p[2] + 1, 1_003)],
            ),
        ];
        for (case, header, entries) in cases {
            let result = load_written(&s, &header, &entries);
            assert!(
                matches!(result, Err(IndexFileRefused::Invalid(_))),
                "{case}: {result:?}"
            );
        }
    }

    #[test]
    fn index_file_names_are_twenty_digits() {
        assert_eq!(
            parse_index_file_name("00000000000000000100.index"),
            Some(100)
        );
        assert_eq!(parse_index_file_name("0000000000000000100.index"), None);
        assert_eq!(parse_index_file_name("0000000000000000010a.index"), None);
        assert_eq!(parse_index_file_name("00000000000000000100.log"), None);
    }
}
