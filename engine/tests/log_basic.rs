//! The segmented log on real files (ext4 under /tmp): append, read, roll, truncate, reopen, and
//! the leader-epoch cache.

mod log_support;

use engine::log::{Log, LogConfig, LogError};
use log_support::{append_batches, batch, header, read_all, small_config};

#[test]
fn append_read_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.end_offset(), 0);
    let written = append_batches(&mut log, 50, 1, 3, 100);
    assert_eq!(log.end_offset(), 150);
    assert_eq!(log.durable_end_offset(), 150);
    assert_eq!(read_all(&log), written);
    // A read from the middle of a batch starts with that batch.
    let got = log.read(31, 1).unwrap();
    assert_eq!(
        got.len(),
        1,
        "at least one batch even when it exceeds max_bytes"
    );
    assert_eq!(header(&got[0]).0, 30);
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.end_offset(), 150);
    assert_eq!(log.last_epoch(), 1);
    assert_eq!(read_all(&log), written);
    assert!(log.read(150, 1 << 20).unwrap().is_empty());
}

#[test]
fn read_honours_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let written = append_batches(&mut log, 10, 1, 1, 1000);
    let one = written[0].len();
    let got = log.read(0, 3 * one).unwrap();
    assert_eq!(got, written[..3]);
    let got = log.read(0, 3 * one + one / 2).unwrap();
    assert_eq!(got.len(), 3, "a batch that does not fit is not returned");
}

#[test]
fn one_append_of_many_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut batches = Vec::new();
    let mut next = 0;
    for _ in 0..200 {
        let b = batch(next, 2, 5, 37);
        next += 5;
        batches.push(b);
    }
    assert_eq!(log.append(&batches).unwrap(), 1000);
    assert_eq!(read_all(&log), batches);
}

#[test]
fn append_rejects_a_gap_or_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    append_batches(&mut log, 2, 1, 2, 10);
    let gap = batch(5, 1, 1, 10);
    assert!(matches!(
        log.append(&[gap]),
        Err(LogError::OffsetMismatch {
            expected: 4,
            got: 5
        })
    ));
    let overlap = batch(3, 1, 1, 10);
    assert!(matches!(
        log.append(&[overlap]),
        Err(LogError::OffsetMismatch { .. })
    ));
    let garbage = bytes::Bytes::from(vec![7u8; 100]);
    assert!(matches!(
        log.append(&[garbage]),
        Err(LogError::InvalidBatch { .. })
    ));
    assert_eq!(log.end_offset(), 4);
}

#[test]
fn segments_roll_and_are_named_by_base_offset() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(64 << 10);
    let mut log = Log::open(dir.path(), config.clone()).unwrap();
    let written = append_batches(&mut log, 300, 1, 2, 500);
    let bases = log.segment_bases();
    assert!(bases.len() >= 4, "expected several segments, got {bases:?}");
    assert_eq!(bases[0], 0);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    let expected: Vec<String> = bases.iter().map(|b| format!("{b:020}.log")).collect();
    assert_eq!(names, expected);
    // Sealed segments are trimmed to their data, and each stays within segment_bytes.
    for (i, base) in bases[..bases.len() - 1].iter().enumerate() {
        let len = std::fs::metadata(dir.path().join(format!("{base:020}.log")))
            .unwrap()
            .len();
        assert!(
            len <= config.segment_bytes && len > 0,
            "segment {i} is {len} bytes"
        );
    }
    assert_eq!(read_all(&log), written);
    drop(log);
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(log.segment_bases(), bases);
    assert_eq!(read_all(&log), written);
    // A read in an old segment (indexed lazily after the reopen) finds its batch.
    let got = log.read(101, 1).unwrap();
    assert_eq!(header(&got[0]).0, 100);
}

#[test]
fn truncate_within_the_active_segment_then_append_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut written = append_batches(&mut log, 10, 1, 3, 50);
    written.extend(append_batches(&mut log, 10, 2, 3, 50));
    assert_eq!(log.epoch_cache().entries(), &[(1, 0), (2, 30)]);
    assert_eq!(log.truncate_to(33).unwrap(), 33);
    assert_eq!(log.end_offset(), 33);
    assert_eq!(log.epoch_cache().entries(), &[(1, 0), (2, 30)]);
    assert_eq!(
        log.truncate_to(28).unwrap(),
        27,
        "a cut inside a batch drops the batch"
    );
    assert_eq!(log.epoch_cache().entries(), &[(1, 0)]);
    assert_eq!(log.last_epoch(), 1);
    written.truncate(9);
    assert_eq!(read_all(&log), written);
    written.extend(append_batches(&mut log, 5, 3, 2, 70));
    assert_eq!(log.end_offset(), 37);
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.end_offset(), 37);
    assert_eq!(log.epoch_cache().entries(), &[(1, 0), (3, 27)]);
    assert_eq!(read_all(&log), written);
}

#[test]
fn truncate_across_segments_removes_files() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(32 << 10);
    let mut log = Log::open(dir.path(), config.clone()).unwrap();
    let mut written = append_batches(&mut log, 200, 1, 1, 400);
    let before = log.segment_bases();
    assert!(before.len() >= 3);
    // Truncate into the first segment.
    log.truncate_to(5).unwrap();
    assert_eq!(log.segment_bases(), vec![0]);
    written.truncate(5);
    assert_eq!(read_all(&log), written);
    written.extend(append_batches(&mut log, 200, 2, 1, 400));
    drop(log);
    let log = Log::open(dir.path(), config.clone()).unwrap();
    assert_eq!(read_all(&log), written);
    assert_eq!(log.epoch_cache().entries(), &[(1, 0), (2, 5)]);
    // Truncating exactly at a segment base keeps the segment before it whole.
    let bases = log.segment_bases();
    let mut log = log;
    log.truncate_to(bases[1]).unwrap();
    assert_eq!(log.segment_bases(), vec![0]);
    assert_eq!(log.end_offset(), bases[1]);
    drop(log);
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(log.end_offset(), bases[1]);
    assert_eq!(read_all(&log), written[..bases[1] as usize]);
}

#[test]
fn truncate_to_zero_empties_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    append_batches(&mut log, 10, 4, 2, 10);
    log.truncate_to(0).unwrap();
    assert_eq!(log.end_offset(), 0);
    assert_eq!(log.last_epoch(), 0);
    assert!(log.epoch_cache().entries().is_empty());
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.end_offset(), 0);
    assert!(read_all(&log).is_empty());
}

/// The worked example of docs/protocol.md section 6: epochs 1@0, 3@3, 5@6 with LEO 9.
#[test]
fn epoch_cache_worked_example_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for epoch in [1, 3, 5] {
        append_batches(&mut log, 1, epoch, 3, 20);
    }
    assert_eq!(log.end_offset(), 9);
    let check = |log: &Log| {
        assert_eq!(log.end_offset_for_epoch(2), Some((1, 3)));
        assert_eq!(log.end_offset_for_epoch(3), Some((3, 6)));
        assert_eq!(log.end_offset_for_epoch(5), Some((5, 9)));
        assert_eq!(log.end_offset_for_epoch(0), None);
        assert_eq!(log.snapshot().epochs, vec![(1, 0), (3, 3), (5, 6)]);
        assert_eq!(log.snapshot().end_offset, 9);
    };
    check(&log);
    drop(log);
    check(&Log::open(dir.path(), LogConfig::default()).unwrap());
}

#[test]
fn epoch_going_back_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    append_batches(&mut log, 1, 5, 1, 10);
    let old = batch(1, 4, 1, 10);
    assert!(matches!(log.append(&[old]), Err(LogError::Epoch(_))));
}

#[test]
fn checkpoint_limits_the_recovery_scan() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(16 << 10);
    let mut log = Log::open(dir.path(), config.clone()).unwrap();
    let written = append_batches(&mut log, 100, 1, 1, 300);
    append_batches(&mut log, 0, 1, 1, 300);
    let bases = log.segment_bases();
    let last = *bases.last().unwrap();
    drop(log);
    let log = Log::open(dir.path(), config.clone()).unwrap();
    assert_eq!(
        log.recovery_start(),
        last,
        "without a clean shutdown, the scan starts at the last roll"
    );
    let mut log = log;
    log.checkpoint_now().unwrap();
    drop(log);
    let log = Log::open(dir.path(), config.clone()).unwrap();
    assert_eq!(
        log.recovery_start(),
        100,
        "after checkpoint_now, nothing is scanned"
    );
    assert_eq!(read_all(&log), written);
    drop(log);
    // A lost or garbled checkpoint costs a full scan, not data.
    std::fs::write(dir.path().join(engine::log::CHECKPOINT_FILE), b"{not json").unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(log.recovery_start(), 0);
    assert_eq!(log.end_offset(), 100);
    assert_eq!(read_all(&log), written);
}
