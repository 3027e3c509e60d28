//! Recovery on open: torn tails are cut back to the last valid batch; corruption that valid
//! batches follow fails the open with a typed error naming the file and the offset.

mod log_support;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use engine::log::{Log, LogConfig, LogError};
use log_support::{append_batches, log_of_batches, read_all, small_config};

fn first_segment(dir: &Path) -> PathBuf {
    dir.join(format!("{:020}.log", 0))
}

/// A log of 20 batches (2 records each) with no checkpoint past offset 0, so the open scans it
/// all: 18 appends of one batch, then one of the last two together. Only that last write may be
/// torn: each earlier one was synced before it (docs/storage.md, "Torn tail or corruption: the
/// durable mark"), so damage to batches 0 to 17 is corruption.
fn log_with_batches(dir: &Path) -> Vec<bytes::Bytes> {
    let mut log = Log::open(dir, LogConfig::default()).unwrap();
    let mut written = append_batches(&mut log, 18, 1, 2, 200);
    let last: Vec<_> = (0..2)
        .map(|i| log_support::batch(36 + 2 * i, 1, 2, 200))
        .collect();
    log.append(&last).unwrap();
    written.extend(last);
    written
}

fn position_of(written: &[bytes::Bytes], index: usize) -> u64 {
    written[..index].iter().map(|b| b.len() as u64).sum()
}

fn write_at(path: &Path, position: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, position).unwrap();
    file.sync_all().unwrap();
}

/// Flips the bits of `mask` in the byte at `position`, as a bad disk or a stray write would.
fn flip_bits(path: &Path, position: u64, mask: u8) {
    let mut byte = [0u8; 1];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut byte, position)
        .unwrap();
    write_at(path, position, &[byte[0] ^ mask]);
}

/// After recovery to `expected` batches, the log appends and reopens normally.
fn check_recovered(dir: &Path, written: &[bytes::Bytes], expected: usize) {
    let mut log = Log::open(dir, LogConfig::default()).unwrap();
    assert_eq!(log.end_offset(), 2 * expected as i64);
    assert_eq!(read_all(&log), written[..expected]);
    let more = append_batches(&mut log, 3, 2, 2, 100);
    drop(log);
    let log = Log::open(dir, LogConfig::default()).unwrap();
    let mut all = written[..expected].to_vec();
    all.extend(more);
    assert_eq!(read_all(&log), all);
    assert_eq!(
        log.epoch_cache().entries(),
        &[(1, 0), (2, 2 * expected as i64)]
    );
}

/// A log of [`log_with_batches`] whose segment `damage` then changes (given the segment's path
/// and the batches written) recovers to its first `expected` batches.
fn recovers_after_damage(expected: usize, damage: impl FnOnce(&Path, &[bytes::Bytes])) {
    let dir = tempfile::tempdir().unwrap();
    let written = log_with_batches(dir.path());
    damage(&first_segment(dir.path()), &written);
    check_recovered(dir.path(), &written, expected);
}

#[test]
fn file_cut_mid_batch_recovers_to_the_last_whole_batch() {
    recovers_after_damage(19, |segment, written| {
        let cut = position_of(written, 19) + 100;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(segment)
            .unwrap();
        file.set_len(cut).unwrap();
    });
}

#[test]
fn zeroed_tail_recovers_to_the_last_whole_batch() {
    recovers_after_damage(18, |segment, written| {
        // The last two batches' second halves never reached the disk.
        let start = position_of(written, 18) + 150;
        let end = position_of(written, 20);
        write_at(segment, start, &vec![0; (end - start) as usize]);
    });
}

#[test]
fn zeroed_header_at_the_tail_ends_the_log() {
    recovers_after_damage(19, |segment, written| {
        write_at(segment, position_of(written, 19), &[0; 61]);
    });
}

#[test]
fn flipped_byte_in_the_last_batch_drops_it() {
    recovers_after_damage(19, |segment, written| {
        flip_bits(segment, position_of(written, 19) + 120, 0x40);
    });
}

#[test]
fn bad_crc_in_the_middle_fails_open_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let written = log_with_batches(dir.path());
    let at = position_of(&written, 7) + 100;
    let path = first_segment(dir.path());
    flip_bits(&path, at, 1);
    match Log::open(dir.path(), LogConfig::default()) {
        Err(LogError::Corrupt {
            path: bad,
            offset,
            position,
            ..
        }) => {
            assert_eq!(bad, path);
            assert_eq!(offset, 14);
            assert_eq!(position, position_of(&written, 7));
        }
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, the log opened"),
    }
    // The message names the file and the offset, for the operator.
    let message = Log::open(dir.path(), LogConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("00000000000000000000.log") && message.contains("offset 14"),
        "{message}"
    );
}

#[test]
fn corruption_in_a_sealed_segment_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let (log, config, written) = log_of_batches(dir.path(), 16 << 10, 60, 1, 500);
    let bases = log.segment_bases();
    assert!(bases.len() >= 3);
    drop(log);
    // Remove the checkpoint so the open scans every segment, then damage the last batch of the
    // first (sealed) segment: later segments follow it, so this is not a torn tail.
    std::fs::remove_file(dir.path().join(engine::log::CHECKPOINT_FILE)).unwrap();
    let seg0_batches = bases[1] as usize;
    let at = position_of(&written, seg0_batches - 1) + 80;
    write_at(&first_segment(dir.path()), at, &[0xAA]);
    match Log::open(dir.path(), config) {
        Err(LogError::Corrupt {
            path,
            offset,
            reason,
            ..
        }) => {
            assert_eq!(path, first_segment(dir.path()));
            assert_eq!(offset, bases[1] - 1);
            assert!(!reason.contains("zeros"), "the batch's own fault: {reason}");
        }
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, the log opened"),
    }
}

/// A log of several segments, closed without a usable checkpoint so the open scans them all.
fn scanned_segments(dir: &Path) -> (LogConfig, Vec<i64>) {
    let config = small_config(16 << 10);
    let mut log = Log::open(dir, config.clone()).unwrap();
    append_batches(&mut log, 60, 1, 1, 500);
    let bases = log.segment_bases();
    assert!(bases.len() >= 3);
    drop(log);
    std::fs::remove_file(dir.join(engine::log::CHECKPOINT_FILE)).unwrap();
    (config, bases)
}

fn corrupt_reason(dir: &Path, config: LogConfig) -> (PathBuf, String) {
    match Log::open(dir, config) {
        Err(LogError::Corrupt { path, reason, .. }) => (path, reason),
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, the log opened"),
    }
}

/// Zeros after a sealed segment's last batch are not a torn tail (a roll trims the segment it
/// seals): the open fails naming the segment.
#[test]
fn zeros_at_the_end_of_a_sealed_segment_fail_open() {
    let dir = tempfile::tempdir().unwrap();
    let (config, _) = scanned_segments(dir.path());
    let first = first_segment(dir.path());
    let len = std::fs::metadata(&first).unwrap().len();
    write_at(&first, len, &[0u8; 4096]);
    let (path, reason) = corrupt_reason(dir.path(), config);
    assert_eq!(path, first);
    assert!(reason.contains("zeros inside a sealed segment"), "{reason}");
}

/// A segment missing from the middle of the log leaves a gap in its offsets: the open fails
/// naming the segment after the gap.
#[test]
fn a_segment_missing_from_the_middle_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let (config, bases) = scanned_segments(dir.path());
    let middle = dir.path().join(engine::log::segment_file_name(bases[1]));
    std::fs::remove_file(&middle).unwrap();
    let _ = std::fs::remove_file(middle.with_extension("index"));
    let (path, reason) = corrupt_reason(dir.path(), config);
    assert_eq!(
        path,
        dir.path().join(engine::log::segment_file_name(bases[2]))
    );
    assert!(
        reason.contains(&format!("previous one ends at {}", bases[1])),
        "{reason}"
    );
}

#[test]
fn garbage_after_the_tail_is_cleared() {
    recovers_after_damage(20, |segment, written| {
        // Half a header of garbage right after the last batch (a write torn inside the header).
        write_at(segment, position_of(written, 20), &[0x5A; 30]);
    });
}

/// No checkpoint file is no checkpoint (Ok(None)); a checkpoint that cannot be read for another
/// reason (here a directory in its place) is an IO error, not taken as absent.
#[test]
fn a_checkpoint_that_cannot_be_read_is_an_error_not_an_absence() {
    use engine::log::{Checkpoint, CHECKPOINT_FILE};
    let dir = tempfile::tempdir().unwrap();
    assert!(Checkpoint::load(dir.path()).unwrap().is_none());
    std::fs::create_dir(dir.path().join(CHECKPOINT_FILE)).unwrap();
    assert!(Checkpoint::load(dir.path()).is_err());
}

/// A checkpoint whose position is a batch boundary but whose offset is not that batch's is not
/// trusted: the open scans the segment and loses nothing (trusting it would start the scan
/// expecting the wrong offset and cut the log there).
#[test]
fn a_checkpoint_naming_the_wrong_offset_at_a_batch_boundary_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let written = log_with_batches(dir.path());
    let position = position_of(&written, 10);
    engine::log::Checkpoint::new(21, 0, position, vec![(1, 0)])
        .store(dir.path())
        .unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.recovery_start(), 0, "scanned from the start");
    assert_eq!(log.end_offset(), 40);
    assert_eq!(read_all(&log), written);
}

/// An active segment shorter than `segment_bytes` (written without preallocation) is grown
/// back to it when the log is opened with preallocation.
#[test]
fn an_active_segment_is_preallocated_again_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let unallocated = LogConfig {
        segment_bytes: 1 << 20,
        preallocate: false,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), unallocated.clone()).unwrap();
    let written = append_batches(&mut log, 5, 1, 2, 200);
    drop(log);
    let active = first_segment(dir.path());
    assert!(std::fs::metadata(&active).unwrap().len() < 1 << 20);
    let log = Log::open(
        dir.path(),
        LogConfig {
            preallocate: true,
            ..unallocated
        },
    )
    .unwrap();
    assert_eq!(std::fs::metadata(&active).unwrap().len(), 1 << 20);
    assert_eq!(read_all(&log), written);
}

/// A bad last batch followed by a whole valid batch from before it (as the old data of a
/// recycled segment would be) is a torn tail: the older batch cannot belong to the log there.
#[test]
fn a_bad_batch_followed_by_an_older_valid_one_is_a_torn_tail() {
    recovers_after_damage(19, |segment, written| {
        flip_bits(segment, position_of(written, 19) + 120, 0x40);
        write_at(segment, position_of(written, 20), &written[5]);
    });
}

/// Two bad batches at the end (a group torn across both) are a torn tail: a header that
/// could belong to the log is not enough, the batch after a bad one must be whole and valid
/// for the bad one to be corruption inside the log.
#[test]
fn two_bad_batches_at_the_end_are_a_torn_tail() {
    recovers_after_damage(18, |segment, written| {
        flip_bits(segment, position_of(written, 18) + 120, 0x40);
        flip_bits(segment, position_of(written, 19) + 120, 0x40);
    });
}

/// A bad batch followed by a whole valid batch at the offset the log expects there is
/// corruption inside the log, not a torn tail: the open fails rather than cut it.
#[test]
fn a_bad_batch_followed_by_a_valid_one_at_the_expected_offset_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let written = log_with_batches(dir.path());
    let path = first_segment(dir.path());
    assert_eq!(written[18].len(), written[19].len());
    flip_bits(&path, position_of(&written, 18) + 120, 0x40);
    write_at(&path, position_of(&written, 19), &written[18]);
    match Log::open(dir.path(), LogConfig::default()) {
        Err(LogError::Corrupt { offset, .. }) => assert_eq!(offset, 36),
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(log) => panic!("expected Corrupt, opened at {}", log.end_offset()),
    }
}

/// A checkpoint changed in a way its JSON and the segments cannot tell (one bit of an epoch
/// number: epoch 3 read as 2) is refused by its checksum: the open scans the whole log and
/// rebuilds the epochs the batches carry, never the checkpoint's wrong ones.
#[test]
fn a_checkpoint_with_a_flipped_bit_is_refused_and_the_log_scanned() {
    use engine::log::CHECKPOINT_FILE;
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(16 << 10);
    let mut log = Log::open(dir.path(), config.clone()).unwrap();
    let mut written = append_batches(&mut log, 30, 1, 1, 500);
    written.extend(append_batches(&mut log, 30, 3, 1, 500));
    log.checkpoint_now().unwrap();
    let epochs = log.epoch_cache().entries().to_vec();
    assert_eq!(epochs, vec![(1, 0), (3, 30)]);
    drop(log);
    let path = dir.path().join(CHECKPOINT_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let flipped = text.replace("[3,30]", "[2,30]");
    assert_ne!(flipped, text);
    std::fs::write(&path, &flipped).unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(log.recovery_start(), 0, "scanned from the start");
    assert_eq!(log.epoch_cache().entries(), epochs.as_slice());
    assert_eq!(log.end_offset(), 60);
    assert_eq!(read_all(&log), written);
}
