//! The io_uring group-commit writer on real files: durability reports by seq, group commit under
//! concurrent submitters, reads (on the reader thread), truncation, rolls, fail-stop on a bad
//! request, and reopen. The reader's own tests: log_reader.rs.

mod log_support;

use std::time::Duration;

use engine::io::{
    GroupCommitWriter, ReadRequest, SubmitError, SyncMode, WriterConfig, WriterEvent,
    WriterRequest, WriterStats, READ_BYTES_PER_SEC,
};
use engine::log::{Log, LogConfig};
use log_support::{
    append_request, batch, header, read_all, small_config, start_writer as start, stored,
    wait_durable, Appended, TestWriter, WAIT,
};

/// A writer on a log in `dir` (default configs) once request `seq`, one batch of `records`
/// records at offset 0, is durable.
fn started_with_one_append(dir: &std::path::Path, seq: u64, records: u32) -> TestWriter {
    let writer = start(dir, LogConfig::default(), WriterConfig::default());
    writer.submit(append_request(seq, batch(0, 1, records, 10)));
    assert_eq!(wait_durable(&writer, seq), i64::from(records));
    writer
}

fn drain_eventfd(fd: i32) -> u64 {
    let mut value = 0u64;
    // SAFETY: reads 8 bytes into a valid u64 from the writer's non-blocking eventfd.
    let n = unsafe { libc::read(fd, (&mut value as *mut u64).cast(), 8) };
    if n == 8 {
        value
    } else {
        0
    }
}

#[test]
fn appends_become_durable_in_seq_order_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let writer = start(dir.path(), LogConfig::default(), WriterConfig::default());
    assert!(writer.ring_info().single_issuer || !writer.ring_info().defer_taskrun);
    let mut written = Appended::default();
    for seq in 1..=100u64 {
        written.submit(&writer, seq, 4, 64);
    }
    assert_eq!(wait_durable(&writer, 100), 400);
    // The eventfd is signalled right after each event is queued.
    let signalled = (0..2000).any(|_| {
        drain_eventfd(writer.eventfd()) >= 1 || {
            std::thread::sleep(Duration::from_millis(1));
            false
        }
    });
    assert!(signalled, "the eventfd is signalled");
    let stats = writer.stats();
    let groups = stats.groups.load(std::sync::atomic::Ordering::Relaxed);
    assert!((1..=100).contains(&groups));
    let log = writer.shutdown().expect("clean shutdown returns the log");
    assert_eq!(log.end_offset(), 400);
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.recovery_start(), 400, "shutdown checkpoints the end");
    assert_eq!(read_all(&log), written.batches);
}

#[test]
fn concurrent_submitters_are_grouped() {
    let dir = tempfile::tempdir().unwrap();
    let writer = start(dir.path(), LogConfig::default(), WriterConfig::default());
    let sender = writer.sender();
    // One sequencer (like the raft thread) assigns offsets and seqs; many batches queue up while
    // each write is in flight, so groups hold more than one request.
    let total = 2000u64;
    for seq in 1..=total {
        let b = batch(seq as i64 - 1, 1, 1, 200);
        sender.send(append_request(seq, b)).unwrap();
    }
    assert_eq!(wait_durable(&writer, total), total as i64);
    let groups = writer
        .stats()
        .groups
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        groups < total,
        "{groups} groups for {total} appends: no grouping happened"
    );
    let log = writer.shutdown().unwrap();
    let all = read_all(&log);
    assert_eq!(all.len(), total as usize);
    for (i, b) in all.iter().enumerate() {
        assert_eq!(header(b).0, i as i64);
    }
}

#[test]
fn truncate_and_read_through_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let writer = start(dir.path(), small_config(32 << 10), WriterConfig::default());
    let mut next = 0;
    let mut seq = 0;
    for epoch in [1, 2] {
        for _ in 0..100 {
            seq += 1;
            let b = batch(next, epoch, 2, 300);
            next += 2;
            writer.submit(append_request(seq, b));
        }
    }
    assert_eq!(wait_durable(&writer, seq), 400);
    seq += 1;
    writer.submit(WriterRequest::TruncateTo { seq, offset: 150 });
    assert_eq!(wait_durable(&writer, seq), 150);
    writer
        .read(ReadRequest {
            read_id: 7,
            from_offset: 140,
            max_bytes: 1 << 20,
        })
        .unwrap();
    match writer.events().recv_timeout(WAIT).unwrap() {
        WriterEvent::ReadDone { read_id: 7, result } => {
            let got = result.unwrap();
            assert_eq!(got.len(), 5);
            assert_eq!(header(&got[0]).0, 140);
            assert_eq!(header(got.last().unwrap()).0, 148);
        }
        other => panic!("unexpected {other:?}"),
    }
    // Appends continue from the truncation point, in a new epoch.
    let b = batch(150, 3, 2, 10);
    writer.submit(append_request(seq + 1, b));
    assert_eq!(wait_durable(&writer, seq + 1), 152);
    let log = writer.shutdown().unwrap();
    assert_eq!(log.epoch_cache().entries(), &[(1, 0), (3, 150)]);
    drop(log);
    let log = Log::open(dir.path(), small_config(32 << 10)).unwrap();
    assert_eq!(log.end_offset(), 152);
    assert_eq!(log.epoch_cache().entries(), &[(1, 0), (3, 150)]);
}

#[test]
fn rolls_inside_the_writer_and_large_batches() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 256 << 10,
        max_group_bytes: 64 << 10,
        ..LogConfig::default()
    };
    let writer = start(dir.path(), config.clone(), WriterConfig::default());
    let mut written = Appended::default();
    for seq in 1..=60u64 {
        // Some batches are larger than the staging buffer (it grows for them).
        let value = if seq % 10 == 0 { 100 << 10 } else { 5000 };
        written.submit(&writer, seq, 3, value);
    }
    assert_eq!(wait_durable(&writer, 60), 180);
    let log = writer.shutdown().unwrap();
    assert!(log.segment_bases().len() > 3);
    drop(log);
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(read_all(&log), written.batches);
}

#[test]
fn rwf_dsync_mode_and_unregistered_buffers_work() {
    for (mode, register) in [
        (SyncMode::RwfDsync, true),
        (SyncMode::LinkedFdatasync, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let writer_config = WriterConfig {
            sync_mode: mode,
            register_buffers: register,
            ..WriterConfig::default()
        };
        let writer = start(dir.path(), LogConfig::default(), writer_config);
        assert_eq!(writer.ring_info().registered_buffers, register);
        let mut written = Vec::new();
        for seq in 1..=50u64 {
            let b = batch(seq as i64 - 1, 1, 1, 3000);
            written.push(b.clone());
            writer.submit(append_request(seq, b));
        }
        assert_eq!(wait_durable(&writer, 50), 50);
        drop(writer.shutdown().unwrap());
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(read_all(&log), written);
    }
}

#[test]
fn a_bad_append_is_fatal_and_nothing_later_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let writer = started_with_one_append(dir.path(), 1, 1);
    // A gap in offsets is a driver bug: fail-stop.
    writer.submit(append_request(2, batch(5, 1, 1, 10)));
    writer.submit(append_request(3, batch(1, 1, 1, 10)));
    let mut fatals = 0;
    while let Ok(event) = writer.events().recv_timeout(Duration::from_secs(2)) {
        match event {
            WriterEvent::Fatal(_) => fatals += 1,
            WriterEvent::Durable { up_to_seq, .. } => {
                panic!("seq {up_to_seq} reported durable after a fatal error")
            }
            _ => {}
        }
    }
    assert_eq!(fatals, 1);
    // Stopped: a request is refused as such, never queued (mutant: `try_submit` made to
    // return Ok without queueing).
    let refused = writer.try_submit(append_request(4, batch(1, 1, 1, 10)));
    assert!(
        matches!(refused, Err(SubmitError::Stopped(_))),
        "{refused:?}"
    );
    assert!(writer.shutdown().is_none());
}

/// An idle writer has nothing waiting and is not congested, reports the capacity it was given,
/// and queues a request it has room for (mutants: `backlog` made to return 1,
/// `request_capacity` 0 or 1, `congested` true, `try_submit` Ok without queueing).
#[test]
fn an_idle_writer_takes_a_request_it_has_room_for() {
    let dir = tempfile::tempdir().unwrap();
    let config = WriterConfig {
        request_capacity: 64,
        ..WriterConfig::default()
    };
    let writer = start(dir.path(), LogConfig::default(), config);
    assert_eq!(writer.request_capacity(), 64);
    assert_eq!(writer.backlog(), 0);
    assert!(!writer.congested());
    writer
        .try_submit(append_request(1, batch(0, 1, 2, 10)))
        .unwrap();
    assert_eq!(wait_durable(&writer, 1), 2);
    drop(writer.shutdown().unwrap());
}

/// Dropping the handle stops the writer as a shutdown does: the log is closed with its end
/// checkpointed (mutant: the body of `Drop` deleted, which leaves the thread running and the
/// end unrecorded).
#[test]
fn dropping_the_writer_shuts_it_down() {
    let dir = tempfile::tempdir().unwrap();
    let writer = started_with_one_append(dir.path(), 1, 3);
    drop(writer);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.recovery_start(), 3, "the end was checkpointed on drop");
}

/// The names the startup log gives the sync modes, and the documented default read budget.
#[test]
fn sync_modes_are_named_and_the_read_budget_is_32_mib_a_second() {
    assert_eq!(
        SyncMode::LinkedFdatasync.to_string(),
        "O_DIRECT write + linked fdatasync"
    );
    assert_eq!(
        SyncMode::RwfDsync.to_string(),
        "O_DIRECT write with RWF_DSYNC"
    );
    assert_eq!(READ_BYTES_PER_SEC, 32 * 1024 * 1024);
}

#[test]
fn pinning_checks_the_allowed_set() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = engine::os::file::allowed_cpus().unwrap();
    let writer_config = WriterConfig {
        cpu: Some(allowed[0]),
        ..WriterConfig::default()
    };
    let writer = start(dir.path(), LogConfig::default(), writer_config);
    assert_eq!(writer.ring_info().pinned_cpu, Some(allowed[0]));
    drop(writer);
    let bad = WriterConfig {
        cpu: Some(100_000),
        ..WriterConfig::default()
    };
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(matches!(
        GroupCommitWriter::start(log, bad),
        Err(engine::io::WriterError::Pin(_))
    ));
}

#[test]
fn large_groups_split_into_parallel_writes_land_whole() {
    let dir = tempfile::tempdir().unwrap();
    let writer_config = WriterConfig {
        split_write_bytes: 8 << 10,
        ..WriterConfig::default()
    };
    let writer = start(dir.path(), LogConfig::default(), writer_config);
    let mut written = Vec::new();
    let mut next = 0;
    // Several batches per request, so every group spans many 8 KiB writes.
    for seq in 1..=40u64 {
        let batches: Vec<_> = (0..8)
            .map(|_| {
                let b = batch(next, 1, 2, 1500);
                next += 2;
                b
            })
            .collect();
        written.extend(batches.iter().cloned());
        let batches = batches.into_iter().map(stored).collect();
        writer.submit(WriterRequest::Append { seq, batches });
    }
    assert_eq!(wait_durable(&writer, 40), next);
    drop(writer.shutdown().unwrap());
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(read_all(&log), written);
}

/// An idle writer zero-fills ahead of the write head in chunks, up to `zero_ahead_bytes`, with
/// no zero-fill in any group; appends carry on over the zeroed blocks and the log reads back
/// the same, also after a reopen (docs/storage.md, "Zero-fill ahead"). Without
/// `zero_fill_when_idle` nothing is zero-filled.
#[test]
fn an_idle_writer_zero_fills_ahead_and_appends_carry_on_over_it() {
    use std::sync::atomic::Ordering::Relaxed;
    for idle in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            zero_fill_when_idle: idle,
            ..small_config(4 << 20)
        };
        let writer = start(dir.path(), config.clone(), WriterConfig::default());
        let mut written = Appended::default();
        written.submit(&writer, 1, 4, 64);
        wait_durable(&writer, 1);
        let stats = std::sync::Arc::clone(writer.stats());
        let chunks = (config.zero_ahead_bytes / engine::log::IDLE_ZERO_CHUNK as u64) as usize;
        let deadline = std::time::Instant::now() + WAIT;
        while idle && (stats.zero_fills.load(Relaxed) as usize) < chunks {
            assert!(std::time::Instant::now() < deadline, "no idle zero-fill");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        let zero_fills = stats.zero_fills.load(Relaxed) as usize;
        let device = stats.device_bytes.load(Relaxed);
        if idle {
            // One refill up to the full distance (a chunk more when the first idle moment came
            // before the first append), then nothing while nothing is written.
            assert!(
                (chunks..=chunks + 1).contains(&zero_fills),
                "{zero_fills} chunks"
            );
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(
                stats.zero_fills.load(Relaxed) as usize,
                zero_fills,
                "idle means done"
            );
            assert!(
                device >= config.zero_ahead_bytes,
                "{device} bytes to the device"
            );
        } else {
            assert_eq!(zero_fills, 0);
        }
        for seq in 2..=300u64 {
            written.submit(&writer, seq, 4, 1000);
        }
        wait_durable(&writer, 300);
        let log = writer.shutdown().expect("clean shutdown returns the log");
        assert_eq!(read_all(&log), written.batches);
        drop(log);
        let log = Log::open(dir.path(), config).unwrap();
        assert_eq!(read_all(&log), written.batches, "idle {idle}");
    }
}

/// The next segment is allocated while the writer is idle once the active one is half full,
/// and not before (mutants of `idle_work`: its body made `Ok(())`, the `!` of its queue check
/// or of either allocation condition deleted, `&&` turned into `||` between them).
#[test]
fn the_next_segment_is_allocated_when_idle_past_half_the_active_one() {
    const SEGMENT: u64 = 256 << 10;
    let dir = tempfile::tempdir().unwrap();
    let writer = start(dir.path(), small_config(SEGMENT), WriterConfig::default());
    let spare = dir.path().join(engine::log::SPARE_FILE);
    let mut written = Appended::default();
    written.submit(&writer, 1, 4, 1000);
    wait_durable(&writer, 1);
    // Far below half: an idle writer allocates nothing (it had 300 ms to).
    std::thread::sleep(Duration::from_millis(300));
    assert!(!spare.exists(), "allocated before it was due");
    // Past half (each batch about 4 KiB): allocated without another request.
    for seq in 2..=40 {
        written.submit(&writer, seq, 4, 1000);
    }
    wait_durable(&writer, 40);
    let deadline = std::time::Instant::now() + WAIT;
    while !spare.exists() {
        assert!(std::time::Instant::now() < deadline, "no spare allocated");
        std::thread::sleep(Duration::from_millis(10));
    }
    let log = writer.shutdown().unwrap();
    assert_eq!(log.segment_bases().len(), 1, "no roll yet");
}

/// A request whose seq does not follow the last one is a driver bug: fatal, and nothing after
/// it is reported durable (mutant: the body of `check_seq` deleted).
#[test]
fn a_seq_that_does_not_follow_on_is_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let writer = started_with_one_append(dir.path(), 2, 1);
    writer.submit(append_request(2, batch(1, 1, 1, 10)));
    match writer.events().recv_timeout(WAIT) {
        Ok(WriterEvent::Fatal(error)) => assert!(error.to_string().contains("seq"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert!(writer.shutdown().is_none());
}

/// Each group's write and sync time is recorded (mutant: the body of `note_group_time`
/// deleted): one observation a group, and the longest one kept.
#[test]
fn each_groups_time_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let writer = start(dir.path(), LogConfig::default(), WriterConfig::default());
    let mut written = Appended::default();
    for seq in 1..=5 {
        written.submit(&writer, seq, 2, 100);
        wait_durable(&writer, seq);
    }
    let stats = writer.stats();
    let groups = stats.groups.load(std::sync::atomic::Ordering::Relaxed);
    assert!(groups >= 5, "{groups}");
    assert_eq!(stats.group_us.snapshot().count, groups);
    assert!(
        stats
            .max_group_us
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    drop(writer.shutdown().unwrap());
}

/// Retention through the writer: the log starts where the policy lets it within `limit`, and
/// the event says where it would have gone with `unpinned` as the limit (mutants of the
/// `unpinned > limit` choice in `process`).
#[test]
fn retention_through_the_writer_reports_where_it_started_and_where_it_wanted_to() {
    use engine::log::RetentionPolicy;
    let dir = tempfile::tempdir().unwrap();
    let (writer, end) = sealed_segments(dir.path());
    // Keep about one segment's worth: several segments may go, but only below `limit`.
    let policy = RetentionPolicy {
        bytes: Some(RETENTION_SEGMENT),
        ms: None,
    };
    // Pinned at 100: the log starts at most there, though the policy wants more.
    let (start, wanted) = retained(&writer, policy, 100, end);
    assert!(start > 0 && start <= 100, "{start}");
    assert!(wanted > 100, "{wanted}");
    // Unpinned up to where it is pinned: nothing more is wanted than done.
    let (again, wanted) = retained(&writer, policy, 100, 100);
    assert_eq!((again, wanted), (start, start));
    drop(writer.shutdown().unwrap());
}

/// The segment size of the retention tests: small, so 200 appends seal several.
const RETENTION_SEGMENT: u64 = 64 << 10;

/// A writer on `dir` with 200 durable appends (2 records of 1000 bytes each, stamped in
/// November 2023) over several sealed segments, and the log's end offset.
fn sealed_segments(dir: &std::path::Path) -> (log_support::TestWriter, i64) {
    let writer = start(
        dir,
        small_config(RETENTION_SEGMENT),
        WriterConfig::default(),
    );
    let mut written = Appended::default();
    for seq in 1..=200 {
        written.submit(&writer, seq, 2, 1000);
    }
    wait_durable(&writer, 200);
    (writer, written.end_offset)
}

/// Sends a Retain request and waits for its answer: (start, wanted).
fn retained(
    writer: &GroupCommitWriter,
    policy: engine::log::RetentionPolicy,
    limit: i64,
    unpinned: i64,
) -> (i64, i64) {
    writer.submit(WriterRequest::Retain {
        policy,
        limit,
        unpinned,
    });
    loop {
        match writer.events().recv_timeout(WAIT).expect("an event") {
            WriterEvent::Retained { start, wanted } => return (start, wanted),
            WriterEvent::Durable { .. } => {}
            other => panic!("{other:?}"),
        }
    }
}

/// Time retention through the writer measures the batches' timestamps against the wall
/// clock: batches stamped in November 2023 are older than a year today and go (up to the
/// limit), and younger than a century, so a century's retention keeps them all (mutants of
/// the writer's `wall_clock_ms`).
#[test]
fn time_retention_through_the_writer_measures_timestamps_against_the_wall_clock() {
    use engine::log::RetentionPolicy;
    const YEAR_MS: i64 = 365 * 24 * 3_600 * 1_000;
    let dir = tempfile::tempdir().unwrap();
    let (writer, end) = sealed_segments(dir.path());
    let keep = |ms| RetentionPolicy {
        bytes: None,
        ms: Some(ms),
    };
    assert_eq!(retained(&writer, keep(100 * YEAR_MS), end, end), (0, 0));
    let (start, wanted) = retained(&writer, keep(YEAR_MS), end, end);
    assert!(start > 0 && start == wanted, "{start} {wanted}");
    drop(writer.shutdown().unwrap());
}

/// The read budget paces reads: at 64 KiB/s the second of two 100 KB reads waits for the
/// first's debt (counted in `paced_us`); a budget of 0 means unpaced. Either way both are
/// answered, and shutting the writer down ends the reader thread (it lets go of the log's
/// view).
#[test]
fn reads_are_paced_by_the_read_budget_and_a_zero_budget_is_unpaced() {
    for (budget, paced) in [(Some(64 << 10), true), (Some(0), false), (None, false)] {
        let dir = tempfile::tempdir().unwrap();
        let config = WriterConfig {
            read_bytes_per_sec: budget,
            ..WriterConfig::default()
        };
        let writer = start(dir.path(), small_config(1 << 20), config);
        for seq in 1..=20 {
            writer.submit(append_request(seq, batch(seq as i64 - 1, 1, 1, 10_000)));
        }
        assert_eq!(wait_durable(&writer, 20), 20);
        for read_id in [1, 2] {
            writer
                .read(ReadRequest {
                    read_id,
                    from_offset: 0,
                    max_bytes: 100_000,
                })
                .unwrap();
        }
        let mut answered = Vec::new();
        while answered.len() < 2 {
            match writer.events().recv_timeout(WAIT).unwrap() {
                WriterEvent::ReadDone { read_id, result } => {
                    assert!(!result.unwrap().is_empty());
                    answered.push(read_id);
                }
                WriterEvent::Durable { .. } => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(answered, vec![1, 2]);
        let paced_us = writer
            .reader_stats()
            .paced_us
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            paced_us > 0,
            paced,
            "budget {budget:?}: paced {paced_us} us"
        );
        let log = writer.shutdown().unwrap();
        let view = log.view();
        assert_eq!(std::sync::Arc::strong_count(&view), 2, "the log's and ours");
    }
}

/// Once a Retain has told the writer the policy, and with the limit kept fresh, a log at its
/// retention size rolls into its oldest segment's file (docs/storage.md, "Recycling"): no
/// fresh segment is allocated ahead (the writer goes idle between the appends here, where it
/// would allocate one), none is deleted, every roll but the first (which takes the spare the
/// Retain recycled) recycles one, and each move of the start is reported.
#[test]
fn at_its_retention_size_the_writer_recycles_at_every_roll_and_allocates_nothing() {
    use engine::log::RetentionPolicy;
    let dir = tempfile::tempdir().unwrap();
    let (writer, mut end) = sealed_segments(dir.path());
    let policy = RetentionPolicy {
        bytes: Some(3 * RETENTION_SEGMENT),
        ms: None,
    };
    let (start_after_retain, _) = retained(&writer, policy, end, end);
    assert!(start_after_retain > 0);
    let stats = std::sync::Arc::clone(writer.stats());
    let before = SegmentCounts::of(&stats);
    let mut starts = vec![start_after_retain];
    let mut appended = Appended {
        end_offset: end,
        batches: Vec::new(),
    };
    for seq in 201..=400 {
        if seq % 10 == 0 {
            // As a node does (every 100 ms at most): the newest limit, here all that is durable.
            writer.submit(WriterRequest::RetentionLimit {
                policy,
                limit: appended.end_offset,
                unpinned: appended.end_offset,
            });
        }
        append_until_durable(&writer, &mut appended, seq, |event| match event {
            WriterEvent::LogStartMoved { start } => starts.push(start),
            other => panic!("{other:?}"),
        });
    }
    end = appended.end_offset;
    let rolls = starts.len() - 1;
    assert!(
        rolls >= 4,
        "200 appends of 2 KB roll 64 KiB segments: {starts:?}"
    );
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    let after = SegmentCounts::of(&stats);
    assert_eq!(after.allocated, before.allocated, "no fresh segment");
    assert_eq!(after.deleted, before.deleted, "no deletion");
    assert_eq!(after.recycled, before.recycled + rolls as u64);
    let log = writer.shutdown().unwrap();
    assert_eq!(log.end_offset(), end);
    assert_eq!(log.start_offset(), *starts.last().unwrap());
    // At its retention size: without its oldest, the sealed segments hold less than the policy
    // keeps (the roll let every other one go). Sealed files are trimmed to their batches, a
    // little under 64 KiB, so that is four of them here, never more.
    let summaries = log.segment_summaries().unwrap();
    let sealed = &summaries[..summaries.len() - 1];
    let sealed_bytes: u64 = sealed.iter().map(|s| s.bytes).sum();
    assert!(sealed.len() <= 4, "{summaries:?}");
    assert!(
        sealed_bytes - sealed[0].bytes < 3 * RETENTION_SEGMENT,
        "{summaries:?}"
    );
}

/// When a record the log must keep pins the oldest segment (the limit below where the high
/// watermark would let retention go), the writer says so once the next segment falls due
/// (`RetentionHeldBack`, for the driver to carry that record forward), allocates nothing
/// meanwhile, and recycles at the roll once the newer limit comes.
#[test]
fn a_pinned_oldest_segment_is_reported_and_recycled_once_the_limit_moves() {
    use engine::log::RetentionPolicy;
    let dir = tempfile::tempdir().unwrap();
    let (writer, end) = sealed_segments(dir.path());
    let policy = RetentionPolicy {
        bytes: Some(3 * RETENTION_SEGMENT),
        ms: None,
    };
    // Pinned at the end as it is now: the segment holding it stays, as do the ones after.
    let pinned = end;
    retained(&writer, policy, pinned, end);
    let stats = std::sync::Arc::clone(writer.stats());
    let before = SegmentCounts::of(&stats);
    let mut appended = Appended {
        end_offset: end,
        batches: Vec::new(),
    };
    let mut held_back = None;
    let mut moved = None;
    for seq in 201..=600 {
        // The limit stays at the pinned record until the writer reports it; then it moves.
        let limit = if held_back.is_some() {
            appended.end_offset
        } else {
            pinned
        };
        writer.submit(WriterRequest::RetentionLimit {
            policy,
            limit,
            unpinned: appended.end_offset,
        });
        append_until_durable(&writer, &mut appended, seq, |event| match event {
            WriterEvent::RetentionHeldBack { wanted } => {
                assert!(held_back.is_none(), "reported once");
                assert!(wanted > pinned, "{wanted} {pinned}");
                held_back = Some(wanted);
            }
            WriterEvent::LogStartMoved { start } if held_back.is_none() => {
                assert!(start <= pinned, "{start} went past the pinned {pinned}");
            }
            WriterEvent::LogStartMoved { start } => moved = Some(start),
            other => panic!("{other:?}"),
        });
        if moved.is_some() {
            break;
        }
    }
    assert!(
        held_back.is_some() && moved.is_some(),
        "{held_back:?} {moved:?}"
    );
    assert!(moved.unwrap() > pinned);
    let after = SegmentCounts::of(&stats);
    assert_eq!(after.allocated, before.allocated, "no fresh segment");
    assert_eq!(after.deleted, before.deleted, "no deletion");
    drop(writer.shutdown().unwrap());
}

/// Appends `seq` (2 records of 1000 bytes) and waits until it is durable, handing every event
/// but a `Durable` to `other`.
fn append_until_durable(
    writer: &GroupCommitWriter,
    appended: &mut Appended,
    seq: u64,
    mut other: impl FnMut(WriterEvent),
) {
    appended.submit(writer, seq, 2, 1000);
    loop {
        match writer.events().recv_timeout(WAIT).expect("an event") {
            WriterEvent::Durable { up_to_seq, .. } if up_to_seq >= seq => return,
            WriterEvent::Durable { .. } => {}
            event => other(event),
        }
    }
}

/// The writer's segment counters at one moment.
struct SegmentCounts {
    allocated: u64,
    recycled: u64,
    deleted: u64,
}

impl SegmentCounts {
    fn of(stats: &WriterStats) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        Self {
            allocated: stats.segments_allocated.load(Relaxed),
            recycled: stats.segments_recycled.load(Relaxed),
            deleted: stats.segments_deleted.load(Relaxed),
        }
    }
}

/// The sync probe (`log.sync.mode=auto`) times both ways on the real disk, within its bounds,
/// leaves no scratch file, replaces one a crash left behind, and never touches the log's files:
/// a log in the same directory opens with what it held.
#[test]
fn the_sync_probe_times_both_modes_and_leaves_the_log_alone() {
    use engine::io::sync_probe::{SyncProbe, MAX_PAIRS, MIN_PAIRS, PROBE_FILE_NAME};
    let dir = tempfile::tempdir().unwrap();
    drop(started_with_one_append(dir.path(), 1, 3));
    // A scratch file as a crash mid-probe would leave it: not block-sized, some other content.
    std::fs::write(dir.path().join(PROBE_FILE_NAME), b"left by a crash").unwrap();
    let probe = SyncProbe::run(dir.path()).unwrap();
    for (mode, samples) in [
        (SyncMode::LinkedFdatasync, &probe.fdatasync),
        (SyncMode::RwfDsync, &probe.dsync),
    ] {
        assert!(
            (MIN_PAIRS..=MAX_PAIRS).contains(&samples.len()),
            "{mode}: {} samples",
            samples.len()
        );
        assert!(
            samples.iter().all(|d| *d > Duration::ZERO),
            "{mode}: {samples:?}"
        );
        assert!(probe.median(mode).unwrap() <= probe.worst(mode).unwrap());
    }
    assert_eq!(probe.fdatasync.len(), probe.dsync.len(), "timed in pairs");
    let expected = if probe.median(SyncMode::RwfDsync) <= probe.median(SyncMode::LinkedFdatasync) {
        SyncMode::RwfDsync
    } else {
        SyncMode::LinkedFdatasync
    };
    assert_eq!(probe.choice(), expected);
    assert!(
        !dir.path().join(PROBE_FILE_NAME).exists(),
        "the scratch file is removed"
    );
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.end_offset(), 3, "the log's records are intact");
    println!(
        "fdatasync p50 {:?}, dsync p50 {:?} over {} pairs: {}",
        probe.median(SyncMode::LinkedFdatasync).unwrap(),
        probe.median(SyncMode::RwfDsync).unwrap(),
        probe.fdatasync.len(),
        probe.choice()
    );
}

/// A probe that cannot write (a directory that is not there) fails with the path and what it
/// was doing, and creates nothing.
#[test]
fn a_sync_probe_that_cannot_write_names_the_path() {
    use engine::io::sync_probe::SyncProbe;
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("not-there");
    let error = SyncProbe::run(&missing).unwrap_err().to_string();
    assert!(error.contains("not-there/.sync-probe"), "{error}");
    assert!(
        error.contains("start-up sync probe failed to create"),
        "{error}"
    );
    assert!(!missing.exists());
}
