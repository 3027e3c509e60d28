//! The sparse index of sealed segments lives in index files next to them, on real files (ext4
//! under /tmp): memory holds the active segment's hints only, whatever the log's length; a
//! reopened log reads through the files and rebuilds one that is missing or damaged, byte for
//! byte; truncation, retention and a reset take a segment's index file with it
//! (docs/storage.md, "Sparse index").

mod log_support;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use engine::log::{Log, LogConfig};
use log_support::{append_batches, batches_from, header, read_all, small_config};

const SEGMENT: u64 = 16 << 10;

/// Files in `dir` whose names end with `suffix`, sorted.
fn files_ending(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

fn index_of(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.index"))
}

/// The sealed segments' bases (every segment but the last).
fn sealed(log: &Log) -> Vec<i64> {
    let mut bases = log.segment_bases();
    bases.pop();
    bases
}

/// Every batch read from each batch's own base offset and from an offset inside it, through
/// the log and through its view: each read must start with that batch.
fn check_reads(log: &Log, written: &[Bytes]) {
    for b in written.iter().step_by(7) {
        let (base, _, count) = header(b);
        for from in [base, base + i64::from(count) - 1] {
            let got = log.read(from, 1).unwrap();
            assert_eq!(got.first(), Some(b), "log read from {from}");
            let (got, _) = log.view().read(from, 1).unwrap();
            assert_eq!(got.first(), Some(b), "view read from {from}");
        }
    }
}

/// Hints of one segment at most: a segment of 16 KiB has 5 hints of 24 bytes at the most, 8 of
/// them with the vector's doubling.
fn one_segment_of_hints() -> u64 {
    ((SEGMENT / LogConfig::default().index_interval_bytes + 1) * 24).next_power_of_two()
}

#[test]
fn sealed_segments_keep_their_hints_on_disk_and_memory_stays_flat() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(SEGMENT)).unwrap();
    let mut written = Vec::new();
    let mut most_heap = 0;
    // About 40 segments: with every hint in memory the index would grow with each one.
    for epoch in 1..=4 {
        for _ in 0..40 {
            written.extend(append_batches(&mut log, 10, epoch, 10, 50));
            most_heap = most_heap.max(log.view().index_bytes());
        }
    }
    let sealed = sealed(&log);
    assert!(sealed.len() >= 30, "{} sealed segments", sealed.len());
    let expected: Vec<String> = sealed.iter().map(|b| format!("{b:020}.index")).collect();
    assert_eq!(
        files_ending(dir.path(), ".index"),
        expected,
        "one per sealed segment"
    );
    let one_segment = one_segment_of_hints();
    assert!(most_heap >= 24, "the active segment's hints are counted");
    assert!(
        most_heap <= one_segment,
        "{most_heap} bytes of hints in memory, more than one segment's {one_segment}"
    );
    assert_eq!(read_all(&log), written);
    check_reads(&log, &written);
}

#[test]
fn a_reopened_log_reads_through_its_index_files_and_rebuilds_damaged_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(SEGMENT)).unwrap();
    let written = append_batches(&mut log, 400, 1, 10, 50);
    let sealed = sealed(&log);
    assert!(sealed.len() >= 6, "{sealed:?}");
    log.checkpoint_now().unwrap();
    drop(log);
    let originals: Vec<Vec<u8>> = sealed
        .iter()
        .map(|&b| std::fs::read(index_of(dir.path(), b)).unwrap())
        .collect();

    // Damage five of them, each a different way.
    let flip = |base: i64, at: usize| {
        let path = index_of(dir.path(), base);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at] ^= 0x40;
        std::fs::write(&path, bytes).unwrap();
    };
    flip(sealed[0], 70); // a hint's offset (the checksum no longer matches)
    flip(sealed[1], 20); // the segment size in the header
    std::fs::remove_file(index_of(dir.path(), sealed[2])).unwrap();
    std::fs::write(index_of(dir.path(), sealed[3]), b"").unwrap(); // torn to nothing
                                                                   // Another segment's index file, valid in itself, under this segment's name.
    std::fs::copy(
        index_of(dir.path(), sealed[5]),
        index_of(dir.path(), sealed[4]),
    )
    .unwrap();
    // Stray files: an index file with no segment, one for the active segment, a temporary.
    let active = *read_dir_bases(dir.path()).last().unwrap();
    std::fs::write(index_of(dir.path(), 999_999), b"stray").unwrap();
    std::fs::write(index_of(dir.path(), active), b"stray").unwrap();
    std::fs::write(
        dir.path().join(format!("{:020}.index.tmp", sealed[0])),
        b"x",
    )
    .unwrap();
    // A file the log did not name is not its to remove.
    std::fs::write(dir.path().join("notes.index"), b"an operator's").unwrap();

    let log = Log::open(dir.path(), small_config(SEGMENT)).unwrap();
    let expected: Vec<String> = sealed.iter().map(|b| format!("{b:020}.index")).collect();
    let on_disk: Vec<String> = files_ending(dir.path(), ".index")
        .into_iter()
        .filter(|n| n != "notes.index")
        .collect();
    assert!(
        on_disk.iter().all(|n| expected.contains(n)),
        "the strays are gone: {on_disk:?}"
    );
    assert!(files_ending(dir.path(), ".tmp").is_empty());
    assert!(dir.path().join("notes.index").exists());
    assert_eq!(read_all(&log), written);
    check_reads(&log, &written);
    assert!(
        log.view().index_bytes() <= one_segment_of_hints(),
        "the active segment's only"
    );
    // Every damaged file was rebuilt on first use, to the very bytes first written.
    for (base, original) in sealed.iter().zip(&originals) {
        let now = std::fs::read(index_of(dir.path(), *base)).unwrap();
        assert!(
            now == *original,
            "index file of {base} differs from the original"
        );
    }
}

fn read_dir_bases(dir: &Path) -> Vec<i64> {
    files_ending(dir, ".log")
        .iter()
        .map(|n| n.trim_end_matches(".log").parse().unwrap())
        .collect()
}

#[test]
fn a_truncation_into_a_sealed_segment_takes_its_index_file_and_the_later_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(SEGMENT)).unwrap();
    let mut written = append_batches(&mut log, 300, 1, 10, 50);
    let sealed = sealed(&log);
    assert!(sealed.len() >= 4, "{sealed:?}");
    // Into the middle of the third segment (past its first batch).
    let cut = sealed[2] + 25;
    let end = log.truncate_to(cut).unwrap();
    assert!(end > sealed[2] && end <= cut);
    written.retain(|b| header(b).0 < end);
    let expected: Vec<String> = sealed[..2]
        .iter()
        .map(|b| format!("{b:020}.index"))
        .collect();
    assert_eq!(files_ending(dir.path(), ".index"), expected);
    assert_eq!(read_all(&log), written);

    // The cut segment is the active one again: it grows, seals and gets a new index file.
    written.extend(append_batches(&mut log, 200, 2, 10, 50));
    assert!(sealed_files_match(&log, dir.path()));
    check_reads(&log, &written);
    log.checkpoint_now().unwrap();
    drop(log);
    let log = Log::open(dir.path(), small_config(SEGMENT)).unwrap();
    assert_eq!(read_all(&log), written);
    check_reads(&log, &written);
}

/// One index file for each sealed segment and none other.
fn sealed_files_match(log: &Log, dir: &Path) -> bool {
    let expected: Vec<String> = sealed(log)
        .iter()
        .map(|b| format!("{b:020}.index"))
        .collect();
    files_ending(dir, ".index") == expected
}

#[test]
fn retention_and_a_reset_take_the_index_files_with_their_segments() {
    for recycle in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            recycle_segments: recycle,
            ..small_config(SEGMENT)
        };
        let mut log = Log::open(dir.path(), config.clone()).unwrap();
        let written = append_batches(&mut log, 300, 1, 10, 50);
        let sealed = sealed(&log);
        let start = log.delete_segments_before(sealed[3]).unwrap();
        assert_eq!(start, sealed[3]);
        assert!(sealed_files_match(&log, dir.path()), "recycle {recycle}");
        let kept = batches_from(&written, start);
        assert_eq!(read_all(&log), kept);
        check_reads(&log, &kept);

        let end = log.end_offset();
        log.reset_to(end + 1000, 3).unwrap();
        assert!(files_ending(dir.path(), ".index").is_empty());
        drop(log);
        let log = Log::open(dir.path(), config).unwrap();
        assert_eq!(log.start_offset(), end + 1000);
        assert!(sealed_files_match(&log, dir.path()));
    }
}
