//! The log reader on real files (ext4 under /tmp, real io_uring for the writer): reads of written
//! data through the reader thread, reads racing appends and truncations through the log's view,
//! reads beyond the written end, and the bounded channels (reader queue, event channel with
//! coalesced durability reports, writer request channel). The rule these check is in
//! docs/storage.md ("Reads off the writer thread").

mod log_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::io::{
    GroupCommitWriter, ReadRefused, ReadRequest, SubmitError, WriterConfig, WriterEvent,
    WriterRequest, EVENT_CAPACITY, READ_QUEUE_CAPACITY,
};
use engine::log::{Checkpoint, Log, LogConfig, LogView};
use log_support::{
    append_batches, append_request, batch, crc_ok, header, small_config, start_writer as start,
    wait_durable_ignoring_reads as wait_durable, WAIT,
};

/// Waits for the ReadDone of `read_id` (ignoring durability reports).
fn wait_read(writer: &GroupCommitWriter, read_id: u64) -> Vec<Bytes> {
    loop {
        match writer.events().recv_timeout(WAIT).expect("writer event") {
            WriterEvent::ReadDone {
                read_id: id,
                result,
            } if id == read_id => return result.expect("read succeeds"),
            WriterEvent::Durable { .. } => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
}

/// Size of the batch at `base` in `epoch`: deterministic, so a reader can rebuild what it expects.
fn records_at(base: i64, epoch: i32) -> u32 {
    1 + ((base as u64 * 7 + epoch as u64) % 5) as u32
}

fn value_len(epoch: i32) -> usize {
    200 + 37 * epoch as usize
}

fn expected_batch(base: i64, epoch: i32) -> Bytes {
    batch(base, epoch, records_at(base, epoch), value_len(epoch))
}

/// Appends batches in `epoch` from `from` until `end` is reached; returns the new end.
fn append_epoch(writer: &GroupCommitWriter, seq: &mut u64, from: i64, end: i64, epoch: i32) -> i64 {
    let mut next = from;
    while next < end {
        let b = expected_batch(next, epoch);
        next += i64::from(records_at(next, epoch));
        *seq += 1;
        writer.submit(append_request(*seq, b));
    }
    next
}

#[test]
fn the_reader_thread_returns_written_batches() {
    let dir = tempfile::tempdir().unwrap();
    // Small segments: reads cross segment boundaries.
    let writer = start(dir.path(), small_config(64 << 10), WriterConfig::default());
    let mut seq = 0;
    let end = append_epoch(&writer, &mut seq, 0, 2000, 1);
    assert_eq!(wait_durable(&writer, seq), end);
    // Every batch of the log, as written, read in 16 KiB steps from mid-batch offsets too.
    let mut expected = BTreeMap::new();
    let mut next = 0;
    while next < end {
        expected.insert(next, expected_batch(next, 1));
        next += i64::from(records_at(next, 1));
    }
    let mut from = 1; // inside the first batch (it has more than one record)
    let mut read_id = 0;
    let mut seen = 0;
    while from < end {
        read_id += 1;
        writer
            .read(ReadRequest {
                read_id,
                from_offset: from,
                max_bytes: 16 << 10,
            })
            .unwrap();
        let got = wait_read(&writer, read_id);
        assert!(!got.is_empty(), "a read below the end returns a batch");
        let (first, _, count) = header(&got[0]);
        assert!(first <= from && from < first + i64::from(count));
        for b in &got {
            let (base, _, count) = header(b);
            assert_eq!(Some(b), expected.get(&base), "batch at {base}");
            seen += 1;
            from = base + i64::from(count);
        }
    }
    assert_eq!(seen, expected.len());
    let stats = writer.reader_stats();
    assert_eq!(stats.reads.load(Ordering::Relaxed), read_id);
    assert_eq!(stats.invalid_batches.load(Ordering::Relaxed), 0);
    drop(writer.shutdown().unwrap());
}

#[test]
fn a_read_beyond_the_written_end_returns_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let written = append_batches(&mut log, 10, 1, 3, 100);
    let view = log.view();
    let end = log.end_offset();
    // Staged but not written: the view must not show it (only written and synced bytes are
    // readable), and reads at or past the written end return nothing.
    let staged = batch(end, 1, 3, 100);
    log.stage(std::slice::from_ref(&staged)).unwrap();
    assert_eq!(log.end_offset(), end + 3);
    for from in [end, end + 1, end + 3, end + 1000] {
        let (got, _) = view.read(from, 1 << 20).unwrap();
        assert!(
            got.is_empty(),
            "read from {from} returned {} batches",
            got.len()
        );
    }
    let (got, _) = view.read(0, 1 << 20).unwrap();
    assert_eq!(got, written, "only the written batches");
    // A group write in flight is not readable either (it is readable once it completed).
    let _in_flight = log.prepare_group_write().unwrap();
    assert!(view.read(end, 1 << 20).unwrap().0.is_empty());
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.end_offset(), end, "the staged batch was never written");
}

#[test]
fn reads_after_a_truncation_show_only_the_log_that_is_current() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(32 << 10)).unwrap();
    let old = append_batches(&mut log, 200, 1, 2, 300);
    let view = log.view();
    assert_eq!(view.generation(), 0);
    let (got, _) = view.read(300, 1 << 20).unwrap();
    assert_eq!(header(&got[0]).0, 300);
    // Truncate into an earlier segment (later ones are removed), then append a new epoch.
    log.truncate_to(150).unwrap();
    assert_eq!(view.generation(), 1);
    for from in [150, 151, 300, 399] {
        assert!(
            view.read(from, 1 << 20).unwrap().0.is_empty(),
            "offset {from} was truncated away"
        );
    }
    let (got, _) = view.read(140, 1 << 20).unwrap();
    assert_eq!(got, old[70..75].to_vec(), "what is below the cut stays");
    let new = append_batches(&mut log, 100, 2, 2, 500);
    let (got, _) = view.read(150, 1 << 20).unwrap();
    assert_eq!(got[0], new[0]);
    assert!(got.iter().all(|b| header(b).1 == 2 && crc_ok(b)));
    let (got, _) = view.read(0, 64 << 10).unwrap();
    assert_eq!(got[0], old[0]);
}

/// What the main thread did to the log, for the checking readers: each truncation (offset, the
/// epoch appended after it), recorded before the writer is asked to truncate.
#[derive(Default)]
struct History {
    truncations: Vec<(i64, i32)>,
}

/// Checks one read result: whole, CRC-valid batches, contiguous from the one holding `from`,
/// each exactly as written in its epoch, epochs never going back, and nothing a truncation
/// finished before the read began had cut away.
fn check_read(got: &[Bytes], from: i64, truncations_before: &[(i64, i32)]) -> usize {
    let mut expected_base = None;
    let mut last_epoch = 0;
    for b in got {
        assert!(crc_ok(b), "a returned batch fails its CRC");
        let (base, epoch, count) = header(b);
        match expected_base {
            None => assert!(base <= from && from < base + i64::from(count)),
            Some(next) => assert_eq!(base, next, "batches are contiguous"),
        }
        assert_eq!(
            *b,
            expected_batch(base, epoch),
            "batch at {base} as written"
        );
        assert!(epoch >= last_epoch, "epochs never go back within a read");
        for &(cut, new_epoch) in truncations_before {
            assert!(
                base + i64::from(count) <= cut || epoch >= new_epoch,
                "batch {base} of epoch {epoch} was truncated away at {cut} before the read"
            );
        }
        last_epoch = epoch;
        expected_base = Some(base + i64::from(count));
    }
    got.len()
}

#[test]
fn reads_racing_appends_and_truncations_return_only_batches_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config(128 << 10)).unwrap();
    let view: Arc<LogView> = log.view();
    let writer = GroupCommitWriter::start(log, WriterConfig::default()).unwrap();
    let history = Arc::new(Mutex::new(History::default()));
    let durable = Arc::new(AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (view, history, durable, stop) = (
                Arc::clone(&view),
                Arc::clone(&history),
                Arc::clone(&durable),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut reads = 0u64;
                let mut batches = 0;
                let mut retries = 0;
                let mut step = r as i64;
                while !stop.load(Ordering::Relaxed) || reads < 100 {
                    let durable_before = durable.load(Ordering::Acquire);
                    // The generation, read before the read starts: truncations it counts were
                    // recorded in the history before they began.
                    let generation = view.generation() as usize;
                    let truncations = history.lock().unwrap().truncations[..generation].to_vec();
                    step = (step * 31 + 17) % 4001;
                    let from = step % (durable_before + 50).max(1);
                    let (got, outcome) = view.read(from, 8 << 10).unwrap();
                    retries += outcome.retries;
                    assert_eq!(outcome.invalid, 0, "no batch read fails validation");
                    batches += check_read(&got, from, &truncations);
                    // With no truncation yet, anything below the durable end is readable.
                    if from < durable_before && history.lock().unwrap().truncations.is_empty() {
                        assert!(!got.is_empty(), "a read below the durable end returns data");
                    }
                    reads += 1;
                }
                eprintln!("reader {r}: {reads} reads, {retries} retried after a truncation");
                (reads, batches)
            })
        })
        .collect();
    let mut seq = 0;
    let mut end = 0;
    for round in 0..12 {
        let epoch = round + 1;
        if round > 0 {
            // Cut somewhere in the second half, then continue in a new epoch.
            let cut = end / 2 + (round as i64 * 97) % (end / 2).max(1);
            history.lock().unwrap().truncations.push((cut, epoch));
            seq += 1;
            writer.submit(WriterRequest::TruncateTo { seq, offset: cut });
            end = wait_durable(&writer, seq);
            durable.store(end, Ordering::Release);
        }
        // Appends in many small requests: reads race groups being written and the tail block
        // being rewritten.
        let target = end + 1500;
        let mut next = end;
        while next < target {
            let stop_at = (next + 150).min(target);
            next = append_epoch(&writer, &mut seq, next, stop_at, epoch);
            end = wait_durable(&writer, seq);
            durable.store(end, Ordering::Release);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut total_batches = 0;
    for reader in readers {
        let (reads, batches) = reader.join().expect("reader checks pass");
        assert!(reads >= 100);
        total_batches += batches;
    }
    assert!(total_batches > 0, "the readers read data");
    drop(writer.shutdown().unwrap());
}

/// Submits reads without taking any event until `EVENT_CAPACITY + READ_QUEUE_CAPACITY + 1` are
/// accepted (refusals before that are retried: the reader is still moving results into the event
/// channel). Then the event channel is full, the reader holds one finished result it cannot
/// deliver, and its queue is full. Returns how many reads were accepted.
fn fill_reader(writer: &GroupCommitWriter) -> u64 {
    let holds = (EVENT_CAPACITY + READ_QUEUE_CAPACITY + 1) as u64;
    let mut accepted = 0;
    let deadline = Instant::now() + WAIT;
    while accepted < holds {
        let request = ReadRequest {
            read_id: accepted + 1,
            from_offset: 0,
            max_bytes: 1 << 10,
        };
        match writer.read(request) {
            Ok(()) => accepted += 1,
            Err(ReadRefused::Full(capacity)) => {
                assert_eq!(capacity, READ_QUEUE_CAPACITY);
                assert!(Instant::now() < deadline, "the reader never made room");
                std::thread::yield_now();
            }
            Err(other) => panic!("unexpected refusal {other}"),
        }
    }
    accepted
}

#[test]
fn a_full_reader_refuses_reads_and_durability_reports_coalesce() {
    let dir = tempfile::tempdir().unwrap();
    let writer = start(dir.path(), LogConfig::default(), WriterConfig::default());
    let mut seq = 0;
    let end = append_epoch(&writer, &mut seq, 0, 100, 1);
    assert_eq!(wait_durable(&writer, seq), end);
    let accepted = fill_reader(&writer);
    // Nothing can take another read now: refused at once, and it will get no ReadDone.
    let refused = ReadRequest {
        read_id: 10_000,
        from_offset: 0,
        max_bytes: 1 << 10,
    };
    assert_eq!(
        writer.read(refused),
        Err(ReadRefused::Full(READ_QUEUE_CAPACITY))
    );
    assert!(writer.reader_stats().refused.load(Ordering::Relaxed) >= 1);
    // The writer never waits for the full event channel: appends keep being made durable, their
    // reports coalesce, and the newest is delivered once there is room.
    let first_append = seq + 1;
    let end = append_epoch(&writer, &mut seq, end, end + 300, 1);
    let deadline = Instant::now() + WAIT;
    while writer.stats().reports_coalesced.load(Ordering::Relaxed) == 0 {
        assert!(
            Instant::now() < deadline,
            "no durability report was held back"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut reads_done = Vec::new();
    let mut durable = (0, 0);
    while durable.0 < seq || (reads_done.len() as u64) < accepted {
        match writer.events().recv_timeout(WAIT).expect("event") {
            WriterEvent::ReadDone { read_id, result } => {
                assert!(!result.unwrap().is_empty());
                reads_done.push(read_id);
            }
            WriterEvent::Durable {
                up_to_seq,
                end_offset,
            } => {
                assert!(up_to_seq >= first_append && up_to_seq > durable.0);
                durable = (up_to_seq, end_offset);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(durable, (seq, end), "the newest report arrives");
    reads_done.sort_unstable();
    assert_eq!(
        reads_done,
        (1..=accepted).collect::<Vec<_>>(),
        "each accepted read answered once"
    );
    // Room again: reads are accepted and answered.
    writer
        .read(ReadRequest {
            read_id: 20_000,
            from_offset: end - 1,
            max_bytes: 1 << 10,
        })
        .unwrap();
    assert_eq!(wait_read(&writer, 20_000).len(), 1);
    assert!(
        writer.events().try_recv().is_err(),
        "the refused read got no answer"
    );
    drop(writer.shutdown().unwrap());
}

#[test]
fn a_writer_that_takes_no_requests_fills_its_bounded_channel() {
    let dir = tempfile::tempdir().unwrap();
    let capacity = 4;
    let writer_config = WriterConfig {
        request_capacity: capacity,
        ..WriterConfig::default()
    };
    let writer = start(dir.path(), LogConfig::default(), writer_config);
    // Many more requests than the channel holds: `submit` waits for room and all are written.
    let mut seq = 0;
    let end = append_epoch(&writer, &mut seq, 0, 3000, 1);
    assert!(seq as usize > 10 * capacity);
    assert_eq!(wait_durable(&writer, seq), end);
    // Make the writer stop taking requests: with the event channel full (the reader holds
    // results nobody takes), a shutdown leaves it waiting to report Stopped, after it wrote the
    // shutdown checkpoint at the end (which is how this test knows it got there).
    fill_reader(&writer);
    writer.sender().send(WriterRequest::Shutdown).unwrap();
    let deadline = Instant::now() + WAIT;
    while Checkpoint::load(dir.path())
        .unwrap()
        .and_then(Result::ok)
        .is_none_or(|c| c.offset != end)
    {
        assert!(
            Instant::now() < deadline,
            "the writer never wrote its shutdown checkpoint"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut queued = 0;
    let full = loop {
        seq += 1;
        let request = append_request(seq, expected_batch(end, 1));
        match writer.try_submit(request) {
            Ok(()) => queued += 1,
            Err(SubmitError::Full(request)) => break request,
            Err(SubmitError::Stopped(_)) => panic!("the writer stopped"),
        }
        assert!(queued <= capacity, "more than {capacity} requests queued");
    };
    assert!(matches!(full, WriterRequest::Append { .. }));
    assert_eq!(queued, capacity);
    assert_eq!(writer.backlog(), capacity);
    assert!(writer.congested());
    // Shutting down closes the event channel: the writer gives up on the report and stops; the
    // requests it never took are not applied.
    let log = writer.shutdown().expect("the writer stopped cleanly");
    assert_eq!(log.end_offset(), end);
}
