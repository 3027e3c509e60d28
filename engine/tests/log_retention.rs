//! Retention on real files (ext4 under /tmp): whole segments leave the front of the log, the log
//! start is the first remaining segment's base across reopens and crashes between deletions,
//! the epoch cache and the readers' view follow, and appends carry on (docs/storage.md,
//! "Retention").

mod log_support;

use engine::log::{retention_start, Log, RetentionPolicy, SpareAtRoll};
use engine::record::BatchView;
use log_support::{
    append_batches, batch, batches_from, header, read_all, small_config, stored_checkpoint,
};

/// The segment size of every log here: small enough that a few dozen batches fill several.
const SEGMENT_BYTES: u64 = 8 << 10;

/// The log in `dir`, opened as every test here opens it (first, or again after a crash).
fn open(dir: &std::path::Path) -> Log {
    Log::open(dir, small_config(SEGMENT_BYTES)).unwrap()
}

/// `log` closed and opened again, as a restarted node finds it.
fn reopen(log: Log, dir: &std::path::Path) -> Log {
    drop(log);
    open(dir)
}

/// A log of 60 batches of 10 records (offsets 0..600) in epochs 1, 2 and 3 (20 batches each),
/// in segments of about 8 KiB: several sealed segments and an active one.
fn segmented_log(dir: &std::path::Path) -> (Log, Vec<bytes::Bytes>) {
    let mut log = open(dir);
    let mut written = Vec::new();
    for epoch in 1..=3 {
        written.extend(append_batches(&mut log, 20, epoch, 10, 100));
    }
    assert_eq!(log.end_offset(), 600);
    assert!(log.segment_bases().len() >= 4, "{:?}", log.segment_bases());
    (log, written)
}

/// [`segmented_log`] closed, as a node that died left it: its segment bases and its batches.
fn closed_segmented_log(dir: &std::path::Path) -> (Vec<i64>, Vec<bytes::Bytes>) {
    let (log, written) = segmented_log(dir);
    (log.segment_bases(), written)
}

/// The file of the segment at `base` in `dir`.
fn segment_path(dir: &std::path::Path, base: i64) -> std::path::PathBuf {
    dir.join(engine::log::segment_file_name(base))
}

fn segment_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

#[test]
fn deleting_the_front_moves_the_start_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, written) = segmented_log(dir.path());
    let bases = log.segment_bases();
    let files_before = segment_files(dir.path());

    // A start inside the third segment deletes the first two only: whole segments go.
    let new_start = log.delete_segments_before(bases[2] + 1).unwrap();
    assert_eq!(new_start, bases[2]);
    assert_eq!(log.start_offset(), bases[2]);
    assert_eq!(segment_files(dir.path()), files_before[2..]);

    // What remains reads as before, from the new start; below it nothing is there.
    let kept = batches_from(&written, new_start);
    assert_eq!(read_all(&log), kept);
    assert!(log.read(0, 1 << 20).unwrap().is_empty());
    let (below_start, _) = log.view().read(0, 1 << 20).unwrap();
    assert!(below_start.is_empty(), "the readers' view dropped them too");
    let (through_view, _) = log.view().read(new_start, 1 << 20).unwrap();
    assert_eq!(header(&through_view[0]).0, new_start);

    // The epoch cache starts at the log start and still answers for every epoch in the log.
    let entries = log.epoch_cache().entries().to_vec();
    assert_eq!(entries[0].1, new_start, "{entries:?}");
    assert_eq!(log.end_offset_for_epoch(3), Some((3, 600)));

    // Reopened: the same start, end, epochs and batches; appends carry on.
    let mut log = reopen(log, dir.path());
    assert_eq!(log.start_offset(), new_start);
    assert_eq!(log.end_offset(), 600);
    assert_eq!(log.epoch_cache().entries(), &entries[..]);
    assert_eq!(read_all(&log), kept);
    log.append(&[batch(600, 4, 5, 100)]).unwrap();
    assert_eq!(log.end_offset(), 605);
}

#[test]
fn the_active_segment_and_undurable_data_never_go() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = segmented_log(dir.path());
    let active = *log.segment_bases().last().unwrap();
    // Asking for everything deletes every sealed segment, never the active one.
    assert_eq!(log.delete_segments_before(600).unwrap(), active);
    assert_eq!(log.segment_bases(), vec![active]);
    assert_eq!(log.delete_segments_before(600).unwrap(), active);
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        log.delete_segments_before(601)
    }));
    assert!(
        done.is_err(),
        "retention past the durable end must be refused"
    );
}

#[test]
fn a_crash_between_deletions_opens_at_the_next_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (bases, written) = closed_segmented_log(dir.path());
    // As if the node died after deleting the first file of three: the rest is contiguous.
    std::fs::remove_file(segment_path(dir.path(), bases[0])).unwrap();
    let log = open(dir.path());
    assert_eq!(log.start_offset(), bases[1]);
    assert_eq!(log.end_offset(), 600);
    let kept = batches_from(&written, bases[1]);
    assert_eq!(read_all(&log), kept);
    assert_eq!(log.epoch_cache().entries()[0].1, bases[1]);
}

#[test]
fn retention_down_to_an_empty_active_segment_keeps_the_last_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = segmented_log(dir.path());
    // Roll, so that the active segment is empty, then delete every sealed one: no batch is
    // left to tell a reopened log its last epoch.
    log.roll().unwrap();
    assert_eq!(log.delete_segments_before(600).unwrap(), 600);
    assert_eq!(log.last_epoch(), 3);
    let log = reopen(log, dir.path());
    assert_empty_at(&log, 600, 3);
}

#[test]
fn deleting_the_checkpointed_segment_writes_a_checkpoint_at_the_new_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = segmented_log(dir.path());
    log.roll().unwrap();
    drop(log);
    // An unreadable checkpoint: the log opens by scanning from its first segment, which is then
    // its recovery point, and retention deletes that segment.
    let checkpoint = dir.path().join(engine::log::CHECKPOINT_FILE);
    std::fs::write(&checkpoint, b"not a checkpoint").unwrap();
    let mut log = open(dir.path());
    assert_eq!(log.recovery_start(), 0);
    assert_eq!(log.delete_segments_before(600).unwrap(), 600);
    drop(log);
    let stored = stored_checkpoint(dir.path());
    assert_eq!((stored.offset, stored.segment_base), (600, 600));
    assert_eq!(stored.epochs, vec![(3, 600)]);
    let log = open(dir.path());
    assert_eq!(log.recovery_start(), 600);
    assert_eq!((log.start_offset(), log.end_offset()), (600, 600));
    assert_eq!(log.last_epoch(), 3);
}

#[test]
fn the_policy_decides_on_the_log_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = segmented_log(dir.path());
    let summaries = log.segment_summaries().unwrap();
    assert_eq!(summaries.len(), log.segment_bases().len());
    let total: u64 = summaries.iter().map(|s| s.bytes).sum();
    // Every batch is stamped 1_700_000_000_000 + i (log_support::batch).
    assert!(summaries
        .iter()
        .all(|s| (1_700_000_000_000..1_700_000_000_010).contains(&s.max_timestamp)));
    // Keep at least half the bytes: the start moves, and what stays is at least that much.
    let policy = RetentionPolicy {
        bytes: Some(total / 2),
        ms: None,
    };
    let start = retention_start(&summaries, policy, 0, log.end_offset());
    assert!(start > 0);
    log.delete_segments_before(start).unwrap();
    let left: u64 = log
        .segment_summaries()
        .unwrap()
        .iter()
        .map(|s| s.bytes)
        .sum();
    assert!(left >= total / 2, "{left} of {total}");
    // Everything is older than a day at the wall clock of 2026: all sealed segments go by time,
    // but not past the high watermark given.
    let summaries = log.segment_summaries().unwrap();
    let policy = RetentionPolicy {
        bytes: None,
        ms: Some(86_400_000),
    };
    let hw = summaries[1].end_offset;
    let start = retention_start(&summaries, policy, 1_790_000_000_000, hw);
    assert_eq!(start, hw);
    // A lazily opened sealed segment is indexed for its timestamp too.
    let log = reopen(log, dir.path());
    assert_eq!(log.segment_summaries().unwrap(), summaries);
    let first = log.read(log.start_offset(), 1).unwrap();
    assert!(BatchView::parse(first[0].clone()).is_ok());
}

/// Recycling (docs/storage.md, "Recycling"): the oldest retired segment becomes the next
/// segment, new batches are written over its old ones, and recovery ends the log where the new
/// batches end, whatever old batches follow them in the file, with or without a clean stop.
#[test]
fn a_recycled_segment_is_written_over_and_its_old_batches_are_never_read_as_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, mut written) = segmented_log(dir.path());
    let bases = log.segment_bases();
    let files_before = segment_files(dir.path());
    let old_first = std::fs::read(dir.path().join(&files_before[0])).unwrap();
    log.delete_segments_before(bases[2]).unwrap();
    assert!(log.has_spare(), "the oldest retired segment is the spare");
    let spare = dir.path().join(engine::log::SPARE_FILE);
    let spare_bytes = std::fs::read(&spare).unwrap();
    assert_eq!(
        &spare_bytes[..old_first.len()],
        &old_first[..],
        "renamed, not rewritten"
    );
    assert_eq!(segment_files(dir.path()), files_before[2..]);

    // Appends until the spare is the active segment, then a few batches into it.
    let active_before = *log.segment_bases().last().unwrap();
    while *log.segment_bases().last().unwrap() == active_before {
        written.extend(append_batches(&mut log, 1, 3, 10, 100));
    }
    assert!(!spare.exists(), "the roll used the spare");
    written.extend(append_batches(&mut log, 2, 3, 10, 100));
    let kept = batches_from(&written, bases[2]);
    assert_eq!(read_all(&log), kept);
    let end = log.end_offset();

    // Old batches right after the new ones (as when the new data ends on a block boundary):
    // whole, valid, at offsets below the segment's base.
    let active = segment_path(dir.path(), *log.segment_bases().last().unwrap());
    let data_end: usize = read_all(&log)
        .iter()
        .filter(|b| header(b).0 >= *log.segment_bases().last().unwrap())
        .map(|b| b.len())
        .sum();
    drop(log); // no clean checkpoint: recovery scans the active segment
    let stale: Vec<u8> = written[..2].iter().flat_map(|b| b.to_vec()).collect();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&active)
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &stale, data_end as u64).unwrap();
    file.sync_all().unwrap();
    drop(file);

    let mut log = open(dir.path());
    assert_eq!(log.end_offset(), end, "the old batches are not the log");
    assert_eq!(read_all(&log), kept);
    written.extend(append_batches(&mut log, 3, 4, 10, 100));
    log.checkpoint_now().unwrap();
    let log = reopen(log, dir.path());
    let kept = batches_from(&written, bases[2]);
    assert_eq!(
        read_all(&log),
        kept,
        "appends over the old batches, reopened"
    );
}

/// A recycled spare is grown back to `segment_bytes` when segments are preallocated (its sealed
/// file was trimmed to its batches at the roll), and keeps its trimmed size when they are not.
#[test]
fn a_recycled_spare_is_preallocated_only_when_segments_are() {
    for preallocate in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = engine::log::LogConfig {
            preallocate,
            ..small_config(SEGMENT_BYTES)
        };
        let mut log = Log::open(dir.path(), config).unwrap();
        append_batches(&mut log, 60, 1, 10, 100);
        let bases = log.segment_bases();
        let first = segment_path(dir.path(), bases[0]);
        let sealed = std::fs::metadata(&first).unwrap().len();
        assert!(sealed < SEGMENT_BYTES, "sealed segment of {sealed} bytes");
        log.delete_segments_before(bases[2]).unwrap();
        assert!(log.has_spare());
        let spare = std::fs::metadata(dir.path().join(engine::log::SPARE_FILE)).unwrap();
        let expected = if preallocate { SEGMENT_BYTES } else { sealed };
        assert_eq!(spare.len(), expected, "preallocate {preallocate}");
    }
}

/// Retention that keeps the segment holding the recovery checkpoint keeps the checkpoint: the
/// next open scans from it, not from the new start.
#[test]
fn retention_that_keeps_the_checkpointed_segment_keeps_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, written) = segmented_log(dir.path());
    log.checkpoint_now().unwrap();
    let active = *log.segment_bases().last().unwrap();
    assert!(active < 600, "the active segment holds batches");
    assert_eq!(log.delete_segments_before(active).unwrap(), active);
    let log = reopen(log, dir.path());
    assert_eq!(log.recovery_start(), 600);
    assert_eq!(log.start_offset(), active);
    let kept = batches_from(&written, active);
    assert_eq!(read_all(&log), kept);
}

/// Without recycling, retired segments are deleted and no spare is made, and a roll never takes
/// a retired segment's file.
#[test]
fn retired_segments_are_deleted_when_recycling_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let config = engine::log::LogConfig {
        recycle_segments: false,
        ..small_config(SEGMENT_BYTES)
    };
    let mut log = Log::open(dir.path(), config).unwrap();
    append_batches(&mut log, 60, 1, 10, 100);
    let bases = log.segment_bases();
    log.delete_segments_before(bases[2]).unwrap();
    assert!(!log.has_spare());
    assert!(!dir.path().join(engine::log::SPARE_FILE).exists());
    let everything = RetentionPolicy {
        bytes: Some(1),
        ms: None,
    };
    let end = log.end_offset();
    assert_nothing_recycled(&mut log, everything, 0, end);
    assert_eq!(log.segment_bases(), bases[2..]);
}

/// A replica behind its leader's log start (docs/storage.md, "Starting again at the leader's
/// log start"): the whole log goes, an empty one starts at the leader's start in its epoch,
/// survives a reopen, and takes appends from there; the readers see nothing of the old log.
#[test]
fn a_reset_starts_an_empty_log_at_the_leaders_start_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = segmented_log(dir.path());
    let view = log.view();
    log.reset_to(5_000, 7).unwrap();
    assert_empty_at(&log, 5_000, 7);
    assert_eq!(log.durable_end_offset(), 5_000);
    assert_eq!(segment_files(dir.path()).len(), 1);
    assert!(view.read(0, 1 << 20).unwrap().0.is_empty());
    let mut log = reopen(log, dir.path());
    assert_empty_at(&log, 5_000, 7);
    log.append(&[batch(5_000, 7, 5, 100)]).unwrap();
    log.append(&[batch(5_005, 8, 5, 100)]).unwrap();
    assert_eq!(log.end_offset(), 5_010);
    let log = reopen(log, dir.path());
    assert_eq!((log.start_offset(), log.end_offset()), (5_000, 5_010));
    assert_eq!(log.epoch_cache().entries(), &[(7, 5_000), (8, 5_005)]);
    assert_eq!(read_all(&log).len(), 2);
}

/// A log that reaches past the start it is reset to (its tail in an epoch its leader never
/// had) loses all of it too, and a recycled spare with batches at or above the start goes.
#[test]
fn a_reset_below_the_log_end_drops_everything_and_leaves_no_spare() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = segmented_log(dir.path());
    // Retention with recycling leaves a spare that holds old batches.
    let bases = log.segment_bases();
    log.delete_segments_before(bases[2]).unwrap();
    assert!(log.has_spare());
    log.reset_to(300, 2).unwrap();
    assert!(!log.has_spare());
    assert!(!dir.path().join("next-segment.spare").exists());
    assert_eq!((log.start_offset(), log.end_offset()), (300, 300));
    let log = reopen(log, dir.path());
    assert_empty_at(&log, 300, 2);
}

/// The crash points of a reset: the old segments going oldest first leave a contiguous suffix;
/// with none left (the checkpoint already names the new start) the log opens empty at 0, which
/// the replica's next fetch resets again.
#[test]
fn every_crash_point_of_a_reset_opens_as_a_valid_log() {
    let dir = tempfile::tempdir().unwrap();
    let (bases, _) = closed_segmented_log(dir.path());
    for base in &bases {
        std::fs::remove_file(segment_path(dir.path(), *base)).unwrap();
        if base == bases.last().unwrap() {
            break;
        }
        let log = open(dir.path());
        let next = bases[bases.iter().position(|b| b == base).unwrap() + 1];
        assert_eq!((log.start_offset(), log.end_offset()), (next, 600));
    }
    let log = open(dir.path());
    assert_eq!((log.start_offset(), log.end_offset()), (0, 0));
}

/// The inode of the file at `path`: a renamed file keeps it, a new one gets another.
fn inode(path: &std::path::Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap())
}

/// A log at its retention size takes its oldest segment's file as the next segment at the roll
/// (docs/storage.md, "Recycling"): `spare_at_roll` says so ahead, counting the active
/// segment as full and deleting nothing; `recycle_oldest_as_spare` then lets exactly that one
/// segment go, renamed (the same inode), and moves the start to its end. Neither acts when the
/// limit holds the oldest back, when a spare is there, or when recycling is off.
#[test]
fn at_its_retention_size_the_log_rolls_into_its_oldest_segments_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = segmented_log(dir.path());
    let bases = log.segment_bases();
    let sealed: Vec<u64> = bases[..bases.len() - 1]
        .iter()
        .map(|&b| std::fs::metadata(segment_path(dir.path(), b)).unwrap())
        .map(|m| m.len())
        .collect();
    // Keep every sealed segment but the oldest, plus a full active segment: the oldest goes
    // once the active one is full, not before.
    let keep: u64 = sealed[1..].iter().sum::<u64>() + SEGMENT_BYTES;
    let policy = RetentionPolicy {
        bytes: Some(keep),
        ms: None,
    };
    let now = 0;
    let end = log.end_offset();
    assert_eq!(
        log.spare_at_roll(policy, now, end, end).unwrap(),
        SpareAtRoll::Recycled
    );
    assert_eq!(log.segment_bases(), bases, "asking deletes nothing");
    assert!(!log.has_spare());
    assert_eq!(
        log.recycle_oldest_as_spare(policy, now, end).unwrap(),
        None,
        "not yet: the active segment is not full"
    );
    // One block less to keep: the oldest goes now.
    let now_policy = RetentionPolicy {
        bytes: Some(keep - SEGMENT_BYTES),
        ms: None,
    };
    // The limit holds it back: nothing.
    let held = bases[1] - 1;
    let at_roll = log.spare_at_roll(now_policy, now, held, end).unwrap();
    assert!(
        matches!(at_roll, SpareAtRoll::HeldBack { wanted } if wanted >= bases[1]),
        "held back by the limit alone: {at_roll:?}"
    );
    assert_nothing_recycled(&mut log, now_policy, now, held);
    assert_eq!(log.segment_bases(), bases);

    let oldest = inode(&segment_path(dir.path(), bases[0]));
    let before = log.segment_counts();
    assert_eq!(
        log.recycle_oldest_as_spare(now_policy, now, end).unwrap(),
        Some(bases[1])
    );
    assert_eq!(log.segment_bases(), bases[1..], "exactly the oldest went");
    assert_eq!(log.start_offset(), bases[1]);
    assert!(log.has_spare());
    assert_eq!(
        inode(&dir.path().join(engine::log::SPARE_FILE)),
        oldest,
        "the oldest segment's file, renamed"
    );
    let after = log.segment_counts();
    assert_eq!(after.recycled, before.recycled + 1);
    assert_eq!(
        (after.allocated, after.deleted),
        (before.allocated, before.deleted)
    );
    // With the spare there, nothing more, even where retention would let everything go: the
    // next roll has its segment, and deletions wait for a retention run.
    let everything = RetentionPolicy {
        bytes: Some(1),
        ms: None,
    };
    assert_nothing_recycled(&mut log, everything, now, end);
    assert_eq!(log.segment_bases(), bases[1..]);
}

/// One sealed segment before the active one is enough to recycle (the fewest a log can have
/// for it); the active segment alone never goes.
#[test]
fn one_sealed_segment_is_recycled_and_an_active_one_alone_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let everything = RetentionPolicy {
        bytes: Some(1),
        ms: None,
    };
    append_batches(&mut log, 1, 1, 10, 100);
    let end = log.end_offset();
    assert_eq!(log.segment_bases().len(), 1);
    assert_nothing_recycled(&mut log, everything, 0, end);
    while log.segment_bases().len() < 2 {
        append_batches(&mut log, 1, 1, 10, 100);
    }
    let bases = log.segment_bases();
    let end = log.end_offset();
    assert_eq!(
        log.spare_at_roll(everything, 0, end, end).unwrap(),
        SpareAtRoll::Recycled
    );
    assert_eq!(
        log.recycle_oldest_as_spare(everything, 0, end).unwrap(),
        Some(bases[1])
    );
    assert_eq!(log.segment_bases(), bases[1..]);
    assert!(log.has_spare());
}

/// A log more than one segment over its retention size at a roll (an earlier roll came before
/// a newer limit) catches up there: the oldest segment becomes the spare and the others
/// retention lets go are deleted.
#[test]
fn a_roll_over_the_retention_size_recycles_the_oldest_and_deletes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = segmented_log(dir.path());
    let bases = log.segment_bases();
    assert!(bases.len() >= 4, "{bases:?}");
    let oldest = inode(&segment_path(dir.path(), bases[0]));
    let before = log.segment_counts();
    // Everything sealed may go: all but the active segment.
    let everything = RetentionPolicy {
        bytes: Some(1),
        ms: None,
    };
    let end = log.end_offset();
    let active = *bases.last().unwrap();
    assert_eq!(
        log.recycle_oldest_as_spare(everything, 0, end).unwrap(),
        Some(active)
    );
    assert_eq!(log.segment_bases(), vec![active]);
    assert_eq!(inode(&dir.path().join(engine::log::SPARE_FILE)), oldest);
    let after = log.segment_counts();
    assert_eq!(after.recycled, before.recycled + 1);
    assert_eq!(after.deleted, before.deleted + bases.len() as u64 - 2);
}

/// `log` holds nothing and starts at `start` in `epoch`.
#[track_caller]
fn assert_empty_at(log: &Log, start: i64, epoch: i32) {
    assert_eq!((log.start_offset(), log.end_offset()), (start, start));
    assert_eq!(log.epoch_cache().entries(), &[(epoch, start)]);
    assert!(read_all(log).is_empty());
}

/// Under `policy` within `limit` the next roll allocates its segment, and a roll now recycles
/// nothing (the log stays as it is).
#[track_caller]
fn assert_nothing_recycled(log: &mut Log, policy: RetentionPolicy, now: i64, limit: i64) {
    assert_eq!(
        log.spare_at_roll(policy, now, limit, limit).unwrap(),
        SpareAtRoll::Allocated
    );
    assert_eq!(
        log.recycle_oldest_as_spare(policy, now, limit).unwrap(),
        None
    );
}
