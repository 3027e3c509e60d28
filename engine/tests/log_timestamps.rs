//! Timestamp lookups on the segmented log (real files under /tmp): the first record at or after
//! a timestamp and the first record with the largest timestamp, below a committed end, through
//! the sparse index's running maximum (docs/storage.md, "Sparse index"); against a scan of every
//! record across rolls, truncations, reopens and compressed and log-append-time batches.

mod log_support;

use bytes::{Bytes, BytesMut};
use engine::log::{FoundRecord, Log, LogConfig, LookupStep, TimestampLookup, TimestampTarget};
use engine::record::{BatchView, RecordBatchBuilder, CRC_START, RECORDS_OFFSET};
use proptest::prelude::*;

use TimestampTarget::{AtOrAfter, Max};

fn config(segment_bytes: u64, index_interval_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        ..log_support::unallocated()
    }
}

/// How a test batch is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plain,
    /// Records compressed with this codec (attributes bits 0-2).
    Compressed(i16),
    /// LogAppendTime with this MaxTimestamp: every record reads as that time.
    AppendTime(i64),
}

/// A batch at `base` in `epoch` with one record per timestamp in `stamps`.
fn batch(base: i64, epoch: i32, stamps: &[i64], kind: Kind, value_len: usize) -> Bytes {
    let mut builder = RecordBatchBuilder::new(base, epoch);
    if let Kind::AppendTime(time) = kind {
        builder = builder.log_append_time(time);
    }
    for (i, ts) in stamps.iter().enumerate() {
        let value = vec![i as u8 ^ base as u8; value_len];
        builder.append(*ts, None, Some(&value), &[]);
    }
    let plain = builder.build();
    match kind {
        Kind::Compressed(codec) => compress(&plain, codec),
        _ => plain.freeze(),
    }
}

/// `plain` with its records compressed by `codec` (1 gzip, 2 snappy, 3 lz4, 4 zstd), its
/// BatchLength and CRC made right: what a client's compressed batch looks like.
fn compress(plain: &[u8], codec: i16) -> Bytes {
    use std::io::Write;
    let records = &plain[RECORDS_OFFSET..];
    let packed = match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(records).unwrap();
            e.finish().unwrap()
        }
        2 => snap::raw::Encoder::new().compress_vec(records).unwrap(),
        3 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
            e.write_all(records).unwrap();
            e.finish().0
        }
        _ => zstd::stream::encode_all(records, 1).unwrap(),
    };
    let mut out = BytesMut::from(&plain[..RECORDS_OFFSET]);
    out.extend_from_slice(&packed);
    let attributes = i16::from_be_bytes([out[21], out[22]]) | codec;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let batch_length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// Appends one batch per entry of `batches` (its timestamps and kind) in `epoch`.
fn append(log: &mut Log, epoch: i32, batches: &[(&[i64], Kind)]) {
    for (stamps, kind) in batches {
        let b = batch(log.end_offset(), epoch, stamps, *kind, 20);
        log.append(&[b]).unwrap();
    }
}

/// Every record below `end` as (offset, timestamp, epoch), by reading every batch.
fn records(log: &Log, end: i64) -> Vec<(i64, i64, i32)> {
    let mut out = Vec::new();
    for piece in log_support::read_all(log) {
        let view = BatchView::parse(piece).unwrap();
        for r in view.record_refs() {
            let offset = r.offset(view.base_offset());
            let ts = if view.is_log_append_time() {
                view.max_timestamp()
            } else {
                r.timestamp(view.base_timestamp())
            };
            if offset < end {
                out.push((offset, ts, view.partition_leader_epoch()));
            }
        }
    }
    out
}

/// The answer by a scan of every record (the definition the lookup must meet).
fn naive(records: &[(i64, i64, i32)], target: TimestampTarget) -> Option<FoundRecord> {
    let found = |&(offset, timestamp, leader_epoch): &(i64, i64, i32)| FoundRecord {
        offset,
        timestamp,
        leader_epoch,
    };
    match target {
        AtOrAfter(t) => records.iter().find(|r| r.1 >= t).map(found),
        Max => {
            let max = records.iter().map(|r| r.1).max()?;
            records.iter().find(|r| r.1 == max).map(found)
        }
    }
}

fn at(log: &Log, target: TimestampTarget, end: i64) -> Option<(i64, i64)> {
    log.lookup_timestamp(target, end)
        .unwrap()
        .map(|f| (f.offset, f.timestamp))
}

/// One lookup and what it must find: the target, the committed end it looks below, the
/// (offset, timestamp) found as [`at`] gives it, and why that is the answer.
type Lookup<'a> = (TimestampTarget, i64, Option<(i64, i64)>, &'a str);

/// Runs every lookup of the table on `log`.
fn assert_lookups(log: &Log, lookups: &[Lookup]) {
    for &(target, end, want, why) in lookups {
        assert_eq!(at(log, target, end), want, "{target:?} below {end}: {why}");
    }
}

#[test]
fn lookups_find_the_first_record_at_or_after_the_target_below_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(1 << 20, 64)).unwrap();
    assert_eq!(at(&log, AtOrAfter(0), 0), None, "an empty log");
    assert_eq!(at(&log, Max, 0), None);
    // Offsets 0-2: 100, 110, 120; 3-5: 200, 230, 210; 6-7: 300, 250.
    append(
        &mut log,
        1,
        &[
            (&[100, 110, 120], Kind::Plain),
            (&[200, 230, 210], Kind::Plain),
            (&[300, 250], Kind::Plain),
        ],
    );
    let end = log.end_offset();
    assert_eq!(end, 8);
    assert_lookups(
        &log,
        &[
            (AtOrAfter(0), end, Some((0, 100)), "before the first"),
            (AtOrAfter(100), end, Some((0, 100)), "exactly the first"),
            (AtOrAfter(105), end, Some((1, 110)), "inside a batch"),
            (AtOrAfter(150), end, Some((3, 200)), "between batches"),
            (AtOrAfter(215), end, Some((4, 230)), "not the next in time"),
            (AtOrAfter(240), end, Some((6, 300)), ""),
            (AtOrAfter(301), end, None, "past the last record"),
            (Max, end, Some((6, 300)), ""),
            // A committed end below the log end: nothing at or above it counts.
            (AtOrAfter(240), 6, None, "300 is not committed"),
            (Max, 6, Some((4, 230)), ""),
            (Max, 3, Some((2, 120)), ""),
            (AtOrAfter(0), 0, None, "nothing committed"),
        ],
    );
    let found = log.lookup_timestamp(AtOrAfter(105), end).unwrap().unwrap();
    assert_eq!(found.leader_epoch, 1, "the epoch of the record's batch");
}

#[test]
fn timestamps_going_back_in_time_are_found_in_offset_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(1 << 20, 64)).unwrap();
    // Batch maxima 500, 100, 900, 300: later batches carry older times.
    append(
        &mut log,
        2,
        &[
            (&[500, 400], Kind::Plain),
            (&[100, 50], Kind::Plain),
            (&[700, 900, 800], Kind::Plain),
            (&[300], Kind::Plain),
        ],
    );
    let end = log.end_offset();
    assert_lookups(
        &log,
        &[
            (AtOrAfter(450), end, Some((0, 500)), ""),
            (AtOrAfter(501), end, Some((4, 700)), ""),
            (AtOrAfter(850), end, Some((5, 900)), ""),
            (AtOrAfter(200), end, Some((0, 500)), "first in offsets"),
            (Max, end, Some((5, 900)), ""),
        ],
    );
    // Two records share the largest timestamp: the first.
    append(&mut log, 2, &[(&[900, 900], Kind::Plain)]);
    assert_eq!(at(&log, Max, log.end_offset()), Some((5, 900)));
}

#[test]
fn compressed_and_log_append_time_batches_are_searched_record_by_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(1 << 20, 64)).unwrap();
    let mut next = 0;
    for codec in [1, 2, 3, 4] {
        let stamps = [
            1000 * codec as i64,
            1000 * codec as i64 + 7,
            1000 * codec as i64 + 3,
        ];
        append(&mut log, 1, &[(&stamps, Kind::Compressed(codec))]);
        let b = log.read(next, 1 << 20).unwrap().remove(0);
        assert_eq!(b[22] & 7, codec as u8, "stored compressed");
        next = log.end_offset();
    }
    // LogAppendTime: the records' own times (1, 2) do not count, the batch's 4500 does.
    append(&mut log, 1, &[(&[1, 2], Kind::AppendTime(4500))]);
    let end = log.end_offset();
    assert_lookups(
        &log,
        &[
            (AtOrAfter(1001), end, Some((1, 1007)), "gzip"),
            (AtOrAfter(2005), end, Some((4, 2007)), "snappy"),
            (AtOrAfter(3004), end, Some((7, 3007)), "lz4"),
            (AtOrAfter(4002), end, Some((10, 4007)), "zstd"),
            (AtOrAfter(4008), end, Some((12, 4500)), "append time"),
            (Max, end, Some((12, 4500)), ""),
            (Max, 12, Some((10, 4007)), ""),
        ],
    );
}

/// A batch whose header's MaxTimestamp overstates its records (stored as the producer sent it):
/// the search reads it, finds no record, and goes on to the next batch, as Kafka's does.
#[test]
fn an_overstated_max_timestamp_sends_the_search_on_to_the_next_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(1 << 20, 64)).unwrap();
    let honest = batch(0, 1, &[10, 20], Kind::Plain, 20);
    let mut liar = BytesMut::from(&honest[..]);
    liar[35..43].copy_from_slice(&1000i64.to_be_bytes());
    let crc = crc32c::crc32c(&liar[CRC_START..]);
    liar[17..21].copy_from_slice(&crc.to_be_bytes());
    log.append(&[liar.freeze()]).unwrap();
    append(&mut log, 1, &[(&[50, 60], Kind::Plain)]);
    let end = log.end_offset();
    assert_lookups(
        &log,
        &[
            (
                AtOrAfter(40),
                end,
                Some((2, 50)),
                "past the overstated batch",
            ),
            (AtOrAfter(15), end, Some((1, 20)), ""),
            (AtOrAfter(61), end, None, ""),
        ],
    );
}

#[test]
fn lookups_span_segments_and_survive_truncation_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(4096, 256);
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    // 60 batches of 3 records, times rising by 10 per record: several 4 KiB segments.
    for i in 0..60i64 {
        let t = 10_000 + i * 30;
        append(&mut log, 1, &[(&[t, t + 10, t + 20], Kind::Plain)]);
    }
    assert!(log.segment_bases().len() >= 3, "{:?}", log.segment_bases());
    let end = log.end_offset();
    let check = |log: &Log| {
        for target in [0, 10_000, 10_005, 10_900, 11_111, 11_780, 11_790] {
            let want = naive(&records(log, log.end_offset()), AtOrAfter(target));
            let got = log
                .lookup_timestamp(AtOrAfter(target), log.end_offset())
                .unwrap();
            assert_eq!(got, want, "target {target}");
        }
        let want = naive(&records(log, log.end_offset()), Max);
        assert_eq!(log.lookup_timestamp(Max, log.end_offset()).unwrap(), want);
    };
    assert_eq!(at(&log, AtOrAfter(11_111), end), Some((112, 11_120)));
    check(&log);
    // Cut inside the third segment: the running maxima follow, then newer (older-stamped) data.
    assert_eq!(
        log.truncate_to(100).unwrap(),
        99,
        "the batch holding 100 goes whole"
    );
    assert_eq!(at(&log, Max, log.end_offset()), Some((98, 10_980)));
    append(&mut log, 2, &[(&[5_000, 20_000], Kind::Plain)]);
    check(&log);
    assert_eq!(at(&log, Max, log.end_offset()), Some((100, 20_000)));
    drop(log);
    // Reopened: the sealed segments are indexed again when a lookup first needs them (here
    // before anything reads them).
    let log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(
        at(&log, AtOrAfter(10_005), log.end_offset()),
        Some((1, 10_010))
    );
    check(&log);
    assert_eq!(
        at(&log, AtOrAfter(10_995), log.end_offset()),
        Some((100, 20_000))
    );
}

/// A test log: batches of record timestamps, each plain, compressed or with log-append time.
fn spec() -> impl Strategy<Value = Vec<(Vec<i64>, Kind)>> {
    let kind = prop_oneof![
        6 => Just(Kind::Plain),
        2 => (1i16..=4).prop_map(Kind::Compressed),
        1 => (0i64..60).prop_map(Kind::AppendTime),
    ];
    proptest::collection::vec((proptest::collection::vec(0i64..60, 1..6), kind), 1..50)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the timestamps, segments and index spacing, and after a truncation and a
    /// reopen: every lookup answers what a scan of every record below the end answers.
    #[test]
    fn lookups_answer_as_a_scan_of_every_record(
        batches in spec(),
        segment_bytes in (1u64..4).prop_map(|blocks| blocks * 4096),
        interval in 64u64..2048,
        cut in 0.0f64..1.0,
        more in spec(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(segment_bytes, interval);
        let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
        let check = |log: &Log| -> Result<(), TestCaseError> {
            // Every batch boundary is a possible committed end.
            let mut ends = vec![log.start_offset()];
            ends.extend(log_support::read_all(log).iter().map(|b| {
                let (base, _, count) = log_support::header(b);
                base + i64::from(count)
            }));
            for end in ends.iter().step_by(3).chain(ends.last()) {
                let all = records(log, *end);
                for target in (-1..62).step_by(3).map(AtOrAfter).chain([Max]) {
                    let got = log.lookup_timestamp(target, *end).unwrap();
                    prop_assert_eq!(got, naive(&all, target), "{:?} below {}", target, end);
                }
            }
            Ok(())
        };
        for (stamps, kind) in &batches {
            append(&mut log, 1, &[(stamps.as_slice(), *kind)]);
        }
        check(&log)?;
        let to = (log.end_offset() as f64 * cut) as i64;
        log.truncate_to(to).unwrap();
        for (stamps, kind) in &more {
            append(&mut log, 2, &[(stamps.as_slice(), *kind)]);
        }
        check(&log)?;
        drop(log);
        let log = Log::open(dir.path(), cfg).unwrap();
        check(&log)?;
    }
}

/// Runs `lookup` through the writer's reader thread, one step per job, as the node does; returns
/// the answer and how many steps it took.
fn lookup_through_the_reader(
    writer: &engine::io::GroupCommitWriter,
    lookup: TimestampLookup,
) -> (Option<FoundRecord>, usize) {
    use engine::io::{LookupRequest, WriterEvent};
    let mut next = lookup;
    for steps in 1..=10_000 {
        writer
            .lookup(LookupRequest {
                lookup_id: steps as u64,
                lookup: next,
            })
            .unwrap();
        let step = loop {
            match writer.events().recv_timeout(log_support::WAIT).unwrap() {
                WriterEvent::LookupDone { lookup_id, result } => {
                    assert_eq!(lookup_id, steps as u64);
                    break result.unwrap();
                }
                WriterEvent::Durable { .. } => {}
                other => panic!("unexpected event {other:?}"),
            }
        };
        match step {
            LookupStep::Done(found) => return (found, steps),
            LookupStep::Continue(more) => next = more,
        }
    }
    panic!("a lookup that never ends");
}

/// Through the reader thread: an answer in one step where the index points at it, and a search
/// sent through 3 MiB of batches (by a MaxTimestamp that overstates its records) in steps of at
/// most LOOKUP_STEP_BYTES, each a job of its own.
#[test]
fn lookups_through_the_reader_thread_run_in_bounded_steps() {
    use engine::io::WriterConfig;
    let dir = tempfile::tempdir().unwrap();
    let writer = log_support::start_writer(
        dir.path(),
        log_support::small_config(8 << 20),
        WriterConfig {
            read_bytes_per_sec: None,
            ..WriterConfig::default()
        },
    );
    let honest = batch(0, 1, &[10, 20], Kind::Plain, 20);
    let mut liar = BytesMut::from(&honest[..]);
    liar[35..43].copy_from_slice(&1_000_000_000_000_000i64.to_be_bytes());
    let crc = crc32c::crc32c(&liar[CRC_START..]);
    liar[17..21].copy_from_slice(&crc.to_be_bytes());
    let mut batches = vec![liar.freeze()];
    let mut next = 2;
    let mut bytes = 0;
    while bytes < 3 << 20 {
        // Records at 1_700_000_000_000 + 0..4 (log_support's batches).
        let b = log_support::batch(next, 1, 4, 1000);
        bytes += b.len();
        next += 4;
        batches.push(b);
    }
    for (seq, b) in batches.into_iter().enumerate() {
        writer.submit(log_support::append_request(seq as u64 + 1, b));
    }
    let end = log_support::wait_durable(&writer, (next as u64 - 2) / 4 + 1);
    assert_eq!(end, next);
    let (found, steps) = lookup_through_the_reader(
        &writer,
        TimestampLookup::new(AtOrAfter(1_700_000_000_002), end),
    );
    assert_eq!(
        found.map(|f| (f.offset, f.timestamp)),
        Some((4, 1_700_000_000_002))
    );
    assert_eq!(steps, 1);
    let before = writer
        .reader_stats()
        .bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    let (found, steps) = lookup_through_the_reader(
        &writer,
        TimestampLookup::new(AtOrAfter(2_000_000_000_000), end),
    );
    assert_eq!(found, None, "no record reaches it");
    let walked = writer
        .reader_stats()
        .bytes
        .load(std::sync::atomic::Ordering::Relaxed)
        - before;
    assert!(
        walked as usize >= bytes,
        "the whole segment was searched: {walked}"
    );
    assert!(steps >= 3, "3 MiB in steps of 1 MiB: {steps} steps");
    let widest = 8 << 10;
    assert!(
        walked as usize <= steps * (engine::log::LOOKUP_STEP_BYTES + widest),
        "{walked} bytes in {steps} steps"
    );
    // Nothing has the largest MaxTimestamp but the overstated batch, whose records do not.
    assert_eq!(
        lookup_through_the_reader(&writer, TimestampLookup::new(Max, end)).0,
        None
    );
    writer.shutdown();
}

/// A search that stops for its step's bytes inside the first of three segments goes on there at
/// its next step (the segments after the one it stopped in do not hide it) and finds the record.
#[test]
fn a_search_stopped_in_the_first_of_three_segments_resumes_there() {
    let dir = tempfile::tempdir().unwrap();
    // 2 MiB segments, a hint every 8 MiB: each segment's index points at its start only.
    let mut log = Log::open(dir.path(), config(2 << 20, 8 << 20)).unwrap();
    let low = [1_000i64; 4];
    let append_low = |log: &mut Log, bytes: usize| {
        let mut written = 0;
        while written < bytes {
            let batches: Vec<Bytes> = (0..64)
                .map(|i| batch(log.end_offset() + 4 * i, 1, &low, Kind::Plain, 1000))
                .collect();
            written += batches.iter().map(Bytes::len).sum::<usize>();
            log.append(&batches).unwrap();
        }
    };
    append_low(&mut log, 3 << 19); // 1.5 MiB, past one step's bytes
    let target = log.end_offset();
    append(&mut log, 1, &[(&[5_000], Kind::Plain)]);
    append_low(&mut log, 5 << 20);
    let bases = log.segment_bases();
    assert!(bases.len() >= 3 && bases[1] > target, "{bases:?}");
    let end = log.end_offset();

    let first = log
        .view()
        .lookup_step(TimestampLookup::new(AtOrAfter(5_000), end))
        .unwrap()
        .0;
    let LookupStep::Continue(next) = first else {
        panic!("one step walked all of it: {first:?}");
    };
    assert_eq!(at(&log, AtOrAfter(5_000), end), Some((target, 5_000)));
    let (second, _, _) = log.view().lookup_step(next).unwrap();
    assert_eq!(
        second,
        LookupStep::Done(Some(FoundRecord {
            offset: target,
            timestamp: 5_000,
            leader_epoch: 1
        }))
    );
}

/// A MAX_TIMESTAMP lookup's step counts the batch headers its maximum walked over (they are
/// read like any other), not only the search that follows.
#[test]
fn a_max_lookup_counts_the_headers_it_walked_for_the_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(8 << 20, 8 << 20)).unwrap();
    append(&mut log, 1, &[(&[9_000], Kind::Plain)]);
    for _ in 0..50 {
        append(&mut log, 1, &[(&[1_000, 2_000], Kind::Plain)]);
    }
    let total: usize = log_support::read_all(&log).iter().map(Bytes::len).sum();
    let (step, walked, _) = log
        .view()
        .lookup_step(TimestampLookup::new(Max, log.end_offset()))
        .unwrap();
    assert_eq!(
        step,
        LookupStep::Done(Some(FoundRecord {
            offset: 0,
            timestamp: 9_000,
            leader_epoch: 1
        }))
    );
    assert!(walked >= total, "walked {walked} of {total} bytes");
}

/// The search inside one batch on its own: only records below the end count, and a batch with
/// log-append time answers with its base offset only when that time reaches the target and the
/// base is below the end.
#[test]
fn the_search_inside_a_batch_counts_only_records_below_the_end() {
    use engine::log::first_record_at_or_after;
    let found = |view: &BatchView, target: i64, end: i64| {
        first_record_at_or_after(view, target, end).map(|f| (f.offset, f.timestamp, f.leader_epoch))
    };
    let plain = BatchView::parse(batch(10, 3, &[100, 200, 300, 400], Kind::Plain, 5)).unwrap();
    assert_eq!(found(&plain, 250, 14), Some((12, 300, 3)));
    assert_eq!(found(&plain, 250, 13), Some((12, 300, 3)));
    assert_eq!(
        found(&plain, 250, 12),
        None,
        "offset 12 is not below the end"
    );
    assert_eq!(found(&plain, 500, 14), None);
    let appended = BatchView::parse(batch(20, 3, &[1, 2], Kind::AppendTime(700), 5)).unwrap();
    assert_eq!(found(&appended, 700, 22), Some((20, 700, 3)));
    assert_eq!(
        found(&appended, 701, 22),
        None,
        "its time is below the target"
    );
    assert_eq!(
        found(&appended, 700, 20),
        None,
        "its base is not below the end"
    );
}
