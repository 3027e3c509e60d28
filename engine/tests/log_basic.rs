//! The segmented log on real files (ext4 under /tmp): append, read, roll, truncate, reopen, and
//! the leader-epoch cache.

mod log_support;

use engine::log::{Log, LogConfig, LogError};
use log_support::{
    append_batches, batch, batch_of_len, header, log_of_batches, read_all, stored_checkpoint,
    unallocated,
};

/// A log of the default configuration in a directory of its own, which the test keeps for as
/// long as it uses the log (and to reopen it).
fn fresh_log() -> (tempfile::TempDir, Log) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    (dir, log)
}

#[test]
fn append_read_reopen() {
    let (dir, mut log) = fresh_log();
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
    let (_dir, mut log) = fresh_log();
    let written = append_batches(&mut log, 10, 1, 1, 1000);
    let one = written[0].len();
    let got = log.read(0, 3 * one).unwrap();
    assert_eq!(got, written[..3]);
    let got = log.read(0, 3 * one + one / 2).unwrap();
    assert_eq!(got.len(), 3, "a batch that does not fit is not returned");
}

#[test]
fn one_append_of_many_batches() {
    let (_dir, mut log) = fresh_log();
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
    let (_dir, mut log) = fresh_log();
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
    let (log, config, written) = log_of_batches(dir.path(), 64 << 10, 300, 2, 500);
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
    let (dir, mut log) = fresh_log();
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
    let (mut log, config, mut written) = log_of_batches(dir.path(), 32 << 10, 200, 1, 400);
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
    let (dir, mut log) = fresh_log();
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
    let (dir, mut log) = fresh_log();
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
    let (_dir, mut log) = fresh_log();
    append_batches(&mut log, 1, 5, 1, 10);
    let old = batch(1, 4, 1, 10);
    assert!(matches!(log.append(&[old]), Err(LogError::Epoch(_))));
}

#[test]
fn checkpoint_limits_the_recovery_scan() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, config, written) = log_of_batches(dir.path(), 16 << 10, 100, 1, 300);
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
    // A lost or garbled checkpoint costs a full scan, not data (a changed bit too:
    // log_recovery.rs, a_checkpoint_with_a_flipped_bit_is_refused_and_the_log_scanned).
    std::fs::write(dir.path().join(engine::log::CHECKPOINT_FILE), b"{not json").unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(log.recovery_start(), 0);
    assert_eq!(log.end_offset(), 100);
    assert_eq!(read_all(&log), written);
}

/// A truncation below the recovery checkpoint moves the checkpoint to the new end: a checkpoint
/// left where the log used to end would have recovery trust the epochs and the position of
/// batches that are gone, and take the batches written over them for the old ones.
#[test]
fn truncating_below_the_checkpoint_moves_it_to_the_new_end() {
    let (dir, mut log) = fresh_log();
    let mut written = append_batches(&mut log, 10, 1, 1, 50);
    log.checkpoint_now().unwrap();
    assert_eq!(log.truncate_to(5).unwrap(), 5);
    let stored = stored_checkpoint(dir.path());
    assert_eq!((stored.offset, stored.segment_base), (5, 0));
    assert_eq!(stored.epochs, vec![(1, 0)]);
    written.truncate(5);
    // Batches of the same size in a new epoch, past where the checkpoint was; no clean stop.
    written.extend(append_batches(&mut log, 10, 2, 1, 50));
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.end_offset(), 15);
    assert_eq!(log.epoch_cache().entries(), &[(1, 0), (2, 5)]);
    assert_eq!(read_all(&log), written);

    // Truncating above the checkpoint leaves it where it is.
    let mut log = log;
    log.checkpoint_now().unwrap();
    written.extend(append_batches(&mut log, 5, 2, 1, 50));
    assert_eq!(log.truncate_to(17).unwrap(), 17);
    let stored = stored_checkpoint(dir.path());
    assert_eq!(stored.offset, 15);
}

/// A truncation exactly at the base of the segment the checkpoint names (the last roll's)
/// removes that segment: the checkpoint moves to the same offset in the segment before, so the
/// next open starts there instead of scanning the whole log for a missing segment.
#[test]
fn truncating_at_the_checkpointed_segments_base_keeps_a_usable_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, config, written) = log_of_batches(dir.path(), 16 << 10, 100, 1, 300);
    let last = *log.segment_bases().last().unwrap();
    assert!(
        last > 0 && log.end_offset() > last,
        "{:?}",
        log.segment_bases()
    );
    assert_eq!(log.truncate_to(last).unwrap(), last);
    let stored = stored_checkpoint(dir.path());
    assert_eq!(stored.offset, last);
    assert!(
        log.segment_bases().contains(&stored.segment_base),
        "the checkpoint names segment {} of {:?}",
        stored.segment_base,
        log.segment_bases()
    );
    drop(log);
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(log.recovery_start(), last);
    assert_eq!(read_all(&log), written[..last as usize]);
}

/// One `append` call whose batches fill several groups and roll several segments: every batch
/// lands once, in order (the call resumes after the batches already staged).
#[test]
fn one_append_across_full_groups_and_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 1, 4, 1000).len();
    let config = small_groups(5 * one as u64);
    let mut log = Log::open(dir.path(), config).unwrap();
    let batches: Vec<_> = (0..20).map(|i| batch(i * 4, 1, 4, 1000)).collect();
    assert_eq!(log.append(&batches).unwrap(), 80);
    assert_eq!(read_all(&log), batches);
    assert_eq!(log.segment_bases(), vec![0, 20, 40, 60]);
}

/// A segment filled to exactly `segment_bytes` takes its last batch; only the next one rolls.
/// A batch larger than a whole segment (and than a group) still goes in whole, into a segment of
/// its own, through a staging buffer grown for it (a little more than the batch, not a multiple).
#[test]
fn segment_and_group_bounds_are_inclusive_and_a_huge_batch_fits() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 1, 2, 1000).len();
    let config = small_groups(3 * one as u64);
    let mut log = Log::open(dir.path(), config.clone()).unwrap();
    let mut written = append_batches(&mut log, 3, 1, 2, 1000);
    assert_eq!(log.segment_bases(), vec![0], "exactly full, not rolled");
    written.extend(append_batches(&mut log, 1, 1, 2, 1000));
    assert_eq!(log.segment_bases(), vec![0, 6]);

    let huge = batch(log.end_offset(), 1, 3, 20_000);
    assert!(huge.len() as u64 > 3 * one as u64 && huge.len() > 8192);
    log.append(std::slice::from_ref(&huge)).unwrap();
    written.push(huge.clone());
    assert_eq!(log.segment_bases(), vec![0, 6, 8]);
    written.extend(append_batches(&mut log, 1, 1, 2, 1000));
    assert_eq!(log.segment_bases(), vec![0, 6, 8, 11]);
    assert_eq!(read_all(&log), written);
    drop(log);
    let log = Log::open(dir.path(), LogConfig::for_reading()).unwrap();
    assert_eq!(read_all(&log), written);

    // The grown buffer, seen while the huge batch is staged (it is dropped once written).
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config).unwrap();
    let huge = batch(0, 1, 3, 20_000);
    assert_eq!(log.stage(std::slice::from_ref(&huge)).unwrap().0, 1);
    let largest = log.staging_regions().iter().map(|r| r.1).max().unwrap();
    assert!(
        (huge.len()..2 * huge.len()).contains(&largest),
        "staging grown to {largest} for a batch of {}",
        huge.len()
    );
    log.append(&[]).unwrap();
    assert_eq!(read_all(&log), vec![huge]);
    let regions = log.staging_regions();
    assert_eq!(
        regions.len(),
        2,
        "the grown buffer is not kept once written"
    );
    assert!(regions.iter().all(|r| r.1 == 8192), "{regions:?}");
}

/// A group holds up to `max_group_bytes` less the block of its durable mark exactly
/// (docs/storage.md, "Torn tail or corruption: the durable mark"); the batch after that waits for
/// the next group. A group's write counts its batches and its new bytes (not the partial block carried
/// over from the group before, which it rewrites).
#[test]
fn a_group_fills_to_its_capacity_exactly_and_counts_its_batches() {
    use engine::log::StageStop;
    let dir = tempfile::tempdir().unwrap();
    let capacity = 4 * 4096;
    let config = LogConfig {
        max_group_bytes: capacity,
        ..unallocated()
    };
    let mut log = Log::open(dir.path(), config).unwrap();
    let mut batches: Vec<_> = (0..3).map(|i| batch(i, 1, 1, 3000)).collect();
    let data_capacity = capacity - 4096;
    let left = data_capacity - 3 * batches[0].len();
    batches.push(batch_of_len(3, left));
    batches.push(batch(4, 1, 1, 10));
    let (staged, stop) = log.stage(&batches).unwrap();
    assert_eq!((staged, stop), (4, StageStop::GroupFull));
    let write = log.prepare_group_write().unwrap();
    assert_eq!(write.batches, 4);
    assert_eq!(write.new_bytes, data_capacity);
    assert_eq!(write.len, capacity, "the data and the mark's block");
    log.complete_group_write(&write);

    // The second group ends inside a block, which the third rewrites.
    for base in [4, 5] {
        let next = batch(base, 1, 1, 3000);
        assert_eq!(log.stage(std::slice::from_ref(&next)).unwrap().0, 1);
        let write = log.prepare_group_write().unwrap();
        assert_eq!((write.batches, write.new_bytes), (1, next.len()));
        log.complete_group_write(&write);
    }
}

/// The buffers the writer registers with its ring: both staging buffers at the configured size,
/// and the zero buffer.
#[test]
fn the_registered_regions_are_the_staging_buffers_and_the_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_group_bytes: 64 << 10,
        ..unallocated()
    };
    let log = Log::open(dir.path(), config).unwrap();
    let regions = log.staging_regions();
    assert_eq!(regions.len(), 2);
    for (ptr, len) in &regions {
        assert!(!ptr.is_null());
        assert_eq!(*len, 64 << 10);
    }
    assert_ne!(regions[0].0, regions[1].0);
    let (zeros, len) = log.zeros_region();
    assert!(!zeros.is_null());
    assert!(
        len >= engine::log::IDLE_ZERO_CHUNK,
        "zero buffer of {len} bytes"
    );
}

/// Opening a stopped node's log to read it never grows its active segment to `segment_bytes`.
#[test]
fn opening_for_reading_does_not_preallocate() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), unallocated()).unwrap();
    append_batches(&mut log, 2, 1, 1, 10);
    drop(log);
    let log = Log::open(dir.path(), LogConfig::for_reading()).unwrap();
    assert!(!log.config().preallocate);
    let segment = dir.path().join(engine::log::segment_file_name(0));
    let size = std::fs::metadata(&segment).unwrap().len();
    assert!(size < 1 << 20, "segment grown to {size} bytes");
}

/// The voter records from an offset on, across reads of more than one chunk: a record at the
/// offset counts, one before it does not, and data batches between are skipped.
#[test]
fn voter_records_from_an_offset() {
    use engine::record::control::QuorumReassignment;
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), unallocated()).unwrap();
    let voters = |log: &Log, ids: &[i32]| {
        QuorumReassignment {
            cluster_id: "c".into(),
            current_voters: ids.to_vec(),
            ..Default::default()
        }
        .to_batch(log.end_offset(), 1, 0)
        .freeze()
    };
    let mut offsets = Vec::new();
    for round in 0..3 {
        offsets.push(log.end_offset());
        let v = voters(&log, &[1, 2, round + 3]);
        log.append(&[v]).unwrap();
        // 1.2 MiB of data between voter records: more than one read's worth.
        for _ in 0..3 {
            let b = batch(log.end_offset(), 1, 4, 100_000);
            log.append(&[b]).unwrap();
        }
    }
    let found = |from| -> Vec<(i64, i32)> {
        log.voter_records_from(from)
            .unwrap()
            .iter()
            .map(|r| (r.offset, r.config.current[2]))
            .collect()
    };
    let all = vec![(offsets[0], 3), (offsets[1], 4), (offsets[2], 5)];
    assert_eq!(found(0), all);
    assert_eq!(found(offsets[1]), all[1..]);
    assert_eq!(found(offsets[1] + 1), all[2..]);
    assert_eq!(found(log.end_offset()), vec![]);
}

/// A batch of exactly `len` bytes at `base`.
/// Groups of one block each (and the block of their durable mark, so a write ends a block past
/// its data): the first carries `zero_ahead_bytes` (64 KiB) of zeros right after itself; the next ones carry none while at least half of that is zeroed ahead of their
/// end (the ninth ends exactly half a chunk short of the zeroed end: none yet); the tenth
/// refills from the zeroed end, cut at the segment's end; past that, nothing is left to zero.
/// A group larger than `zero_ahead_max_group_bytes` never carries one.
#[test]
fn group_writes_carry_zero_fills_from_half_a_chunk_left_up_to_the_segment_end() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 128 << 10,
        zero_ahead_bytes: 64 << 10,
        zero_ahead_max_group_bytes: 4096,
        zero_fill_when_idle: false,
        ..unallocated()
    };
    let mut log = Log::open(dir.path(), config.clone()).unwrap();
    let mut fills = Vec::new();
    for k in 0..26 {
        let b = batch_of_len(k, 4096);
        assert_eq!(log.stage(&[b]).unwrap().0, 1);
        let write = log.prepare_group_write().unwrap();
        assert_eq!(write.file_offset + write.len as u64, 4096 * (k as u64 + 2));
        fills.push(write.zero_fill);
        log.complete_group_write(&write);
    }
    assert_eq!(fills[0], Some((8192, 64 << 10)));
    assert!(fills[1..9].iter().all(Option::is_none), "{fills:?}");
    assert_eq!(
        fills[9],
        Some((8192 + (64 << 10), (128 << 10) - 8192 - (64 << 10)))
    );
    assert!(fills[10..].iter().all(Option::is_none), "{fills:?}");

    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config).unwrap();
    log.stage(&[batch_of_len(0, 4097)]).unwrap();
    let write = log.prepare_group_write().unwrap();
    assert_eq!(
        write.zero_fill, None,
        "a group above the size that carries zeros"
    );
}

/// The idle zero-fill: from the write head, chunk by chunk of IDLE_ZERO_CHUNK, up to
/// `zero_ahead_bytes` ahead; then nothing until less than half of that is left ahead of the
/// head, when it refills in one run up to the full distance again, within the segment. Never
/// while a group is staged or in flight, and never when disabled either way.
#[test]
fn idle_zero_fill_runs_ahead_in_chunks_and_refills_from_half_way() {
    const K: u64 = 1024;
    let chunk = engine::log::IDLE_ZERO_CHUNK;
    assert_eq!(chunk as u64, 64 * K);
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 640 * K,
        zero_ahead_bytes: 256 * K,
        ..unallocated()
    };
    let mut log = Log::open(dir.path(), config.clone()).unwrap();
    let fill_until_done = |log: &mut Log| {
        let mut chunks = Vec::new();
        while let Some(due) = log.idle_zero_fill_due() {
            assert!(chunks.len() < 100, "{chunks:?}");
            assert_eq!(log.zero_fill_idle().unwrap(), due.1);
            chunks.push(due);
        }
        assert_eq!(log.zero_fill_idle().unwrap(), 0);
        chunks
    };
    // The empty log's first block holds its durable mark: zeros from the next one.
    let first = fill_until_done(&mut log);
    let mut expected: Vec<_> = (0..4).map(|i| (4 * K + i * 64 * K, chunk)).collect();
    expected[3].1 = chunk - 4096;
    assert_eq!(first, expected);

    // 100 KiB written: 156 KiB still zeroed ahead, more than half the distance.
    let mut offset = 0;
    let mut append = |log: &mut Log, len: usize| {
        log.append(&[batch_of_len(offset, len)]).unwrap();
        offset += 1;
    };
    append(&mut log, 100 * 1024);
    assert_eq!(log.idle_zero_fill_due(), None);
    // 128 KiB written: exactly half the distance left, not yet a refill.
    append(&mut log, 28 * 1024);
    assert_eq!(log.idle_zero_fill_due(), None);
    // 160 KiB written: 96 KiB ahead, under half: refilled from 256 KiB up to 416 KiB.
    append(&mut log, 32 * 1024);
    let refill = fill_until_done(&mut log);
    assert_eq!(
        refill,
        vec![(256 * K, chunk), (320 * K, chunk), (384 * K, 32 * 1024)]
    );
    // 400 KiB written: 16 KiB ahead; the distance ends at the segment's end (640 KiB).
    append(&mut log, 240 * 1024);
    let refill = fill_until_done(&mut log);
    let expected = vec![
        (416 * K, chunk),
        (480 * K, chunk),
        (544 * K, chunk),
        (608 * K, 32 * 1024),
    ];
    assert_eq!(refill, expected);

    // Not while a group is staged, nor while it is in flight.
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config.clone()).unwrap();
    log.stage(&[batch(0, 1, 1, 10)]).unwrap();
    assert_eq!(log.idle_zero_fill_due(), None);
    let write = log.prepare_group_write().unwrap();
    assert_eq!(log.idle_zero_fill_due(), None);
    log.complete_group_write(&write);
    assert_eq!(
        log.idle_zero_fill_due(),
        Some((8192, chunk)),
        "after the mark"
    );

    for disabled in [
        LogConfig {
            zero_fill_when_idle: false,
            ..config.clone()
        },
        LogConfig {
            zero_ahead_bytes: 0,
            ..config.clone()
        },
    ] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), disabled).unwrap();
        assert_eq!(log.idle_zero_fill_due(), None);
    }
}

/// The next segment is allocated once the active one is half full (at exactly half, not
/// before), and only while none is allocated.
#[test]
fn the_next_segment_is_due_from_half_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 64 << 10,
        ..unallocated()
    };
    let mut log = Log::open(dir.path(), config).unwrap();
    assert!(!log.spare_due());
    let small = batch(0, 1, 1, 0).len() + 1;
    log.append(&[batch_of_len(0, (32 << 10) - small)]).unwrap();
    assert!(!log.spare_due(), "below half");
    log.append(&[batch_of_len(1, small)]).unwrap();
    assert!(log.spare_due(), "exactly half full");
    log.prepare_spare().unwrap();
    assert!(log.has_spare());
    assert!(!log.spare_due(), "already allocated");
    let spare = dir.path().join(engine::log::SPARE_FILE);
    assert_eq!(
        std::fs::metadata(&spare).unwrap().len(),
        0,
        "not preallocated"
    );

    // With preallocation the spare is a whole segment, allocated.
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 64 << 10,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config).unwrap();
    log.prepare_spare().unwrap();
    let spare = std::fs::metadata(dir.path().join(engine::log::SPARE_FILE)).unwrap();
    assert_eq!(spare.len(), 64 << 10);
    assert!(
        std::os::unix::fs::MetadataExt::blocks(&spare) * 512 >= 64 << 10,
        "allocated, not sparse"
    );
}

/// A truncation back into an older segment makes it the active one again, cut at the
/// truncation point and, when segments are preallocated, grown back to `segment_bytes` (so
/// appends over it find their blocks allocated); without preallocation it stays cut, followed
/// by the block of the durable mark that says where it ends.
#[test]
fn truncation_into_an_older_segment_preallocates_it_again() {
    for preallocate in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 64 << 10,
            preallocate,
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path(), config).unwrap();
        let written = append_batches(&mut log, 40, 1, 1, 4000);
        assert!(log.segment_bases().len() >= 3, "{:?}", log.segment_bases());
        log.truncate_to(5).unwrap();
        assert_eq!(log.segment_bases(), vec![0]);
        let first = dir.path().join(engine::log::segment_file_name(0));
        let len = std::fs::metadata(&first).unwrap().len();
        let kept: u64 = written[..5].iter().map(|b| b.len() as u64).sum();
        let expected = if preallocate {
            64 << 10
        } else {
            kept.next_multiple_of(4096) + 4096
        };
        assert_eq!(len, expected, "preallocate {preallocate}");
        assert_eq!(read_all(&log), written[..5]);
    }
}

/// Segments of `segment_bytes`, groups of at most 8 KiB, nothing allocated ahead: small enough
/// that a test's appends fill several groups and roll several segments.
fn small_groups(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        max_group_bytes: 8192,
        ..unallocated()
    }
}
