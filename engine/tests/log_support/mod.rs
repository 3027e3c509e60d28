//! Shared helpers for the log, writer and crash tests.
#![allow(dead_code)]

use bytes::Bytes;
use std::time::Duration;

use engine::io::{GroupCommitWriter, WriterConfig, WriterEvent, WriterRequest};
use engine::log::{Log, LogConfig};
use engine::record::{BatchHeader, BatchView, RecordBatchBuilder};

/// What a test appended through a writer: one batch (epoch 1) an append, in offset order.
#[derive(Default)]
pub struct Appended {
    pub end_offset: i64,
    pub batches: Vec<Bytes>,
}

impl Appended {
    /// Submits append `seq`: a batch of `records` records of `value_len` bytes at the end.
    pub fn submit(&mut self, writer: &GroupCommitWriter, seq: u64, records: u32, value_len: usize) {
        let b = batch(self.end_offset, 1, records, value_len);
        self.end_offset += i64::from(records);
        self.batches.push(b.clone());
        writer.submit(append_request(seq, b));
    }
}

/// Append request `seq` of the one batch `b`.
pub fn append_request(seq: u64, b: Bytes) -> WriterRequest {
    WriterRequest::Append {
        seq,
        batches: vec![stored(b)],
    }
}

/// `b` as the writer takes it.
pub fn stored(b: Bytes) -> engine::record::Batch {
    engine::record::Batch::from_stored(b).expect("a whole batch")
}

/// A RecordBatch v2 with `records` records of `value_len`-byte values, built by engine::record.
pub fn batch(base_offset: i64, epoch: i32, records: u32, value_len: usize) -> Bytes {
    let mut builder = RecordBatchBuilder::new(base_offset, epoch);
    for i in 0..records {
        let value: Vec<u8> = (0..value_len)
            .map(|j| (j as u8) ^ (base_offset as u8) ^ (i as u8))
            .collect();
        builder.append(1_700_000_000_000 + i64::from(i), None, Some(&value), &[]);
    }
    builder.build().freeze()
}

/// The batches of `written` from the one at `start` on: what a log that starts at `start` holds.
pub fn batches_from(written: &[Bytes], start: i64) -> Vec<Bytes> {
    written
        .iter()
        .filter(|b| header(b).0 >= start)
        .cloned()
        .collect()
}

/// The recovery checkpoint stored in `dir` (there, and readable).
pub fn stored_checkpoint(dir: &std::path::Path) -> engine::log::Checkpoint {
    engine::log::Checkpoint::load(dir)
        .unwrap()
        .expect("a checkpoint is stored")
        .unwrap()
}

/// A batch at `base` (epoch 1, one record) of exactly `len` bytes.
pub fn batch_of_len(base: i64, len: usize) -> Bytes {
    // The value's length varints grow by a few bytes at most.
    let overhead = batch(base, 1, 1, 0).len();
    (len.saturating_sub(overhead + 8)..len)
        .map(|value_len| batch(base, 1, 1, value_len))
        .find(|b| b.len() == len)
        .expect("a batch of that length")
}

/// Base offset, epoch and record count of a stored batch.
pub fn header(batch: &[u8]) -> (i64, i32, u32) {
    let header = BatchHeader::read(batch).unwrap();
    (
        header.base_offset,
        header.partition_leader_epoch,
        header.records_count as u32,
    )
}

/// Whether a stored batch is valid in full (CRC-32C and records).
pub fn crc_ok(batch: &Bytes) -> bool {
    BatchView::parse(batch.clone()).is_ok()
}

/// A small-segment config so tests roll often.
pub fn small_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        ..LogConfig::default()
    }
}

/// The default configuration with segments left at their written length: what the tests use
/// that do not want a 1 GiB (`segment_bytes` by default) file on the disk, or that check what a
/// segment holds without preallocation.
pub fn unallocated() -> LogConfig {
    LogConfig {
        preallocate: false,
        ..LogConfig::default()
    }
}

/// Appends `count` batches of `records` records each in `epoch`, one `append` call each.
pub fn append_batches(
    log: &mut Log,
    count: usize,
    epoch: i32,
    records: u32,
    value_len: usize,
) -> Vec<Bytes> {
    let mut written = Vec::new();
    for _ in 0..count {
        let b = batch(log.end_offset(), epoch, records, value_len);
        log.append(std::slice::from_ref(&b)).unwrap();
        written.push(b);
    }
    written
}

/// A log opened in `dir` with segments of `segment_bytes` and `count` batches of `records`
/// records of `value_len` bytes appended in epoch 1: the log, its configuration (to reopen it
/// with) and the batches.
pub fn log_of_batches(
    dir: &std::path::Path,
    segment_bytes: u64,
    count: usize,
    records: u32,
    value_len: usize,
) -> (Log, LogConfig, Vec<Bytes>) {
    let config = small_config(segment_bytes);
    let mut log = Log::open(dir, config.clone()).unwrap();
    let written = append_batches(&mut log, count, 1, records, value_len);
    (log, config, written)
}

/// Every batch of the log, read in `max_bytes` steps.
pub fn read_all(log: &Log) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut next = log.start_offset();
    loop {
        let got = log.read(next, 64 << 10).unwrap();
        let Some(last) = got.last() else { break };
        let (base, _, count) = header(last);
        next = base + i64::from(count);
        out.extend(got);
    }
    out
}

/// How long a test waits for any one writer event.
pub const WAIT: Duration = Duration::from_secs(20);

pub fn start_writer(dir: &std::path::Path, config: LogConfig, writer: WriterConfig) -> TestWriter {
    TestWriter(Some(
        GroupCommitWriter::start(Log::open(dir, config).unwrap(), writer).unwrap(),
    ))
}

/// A writer that a failing test leaves running instead of stopping: dropping a
/// [`GroupCommitWriter`] waits for its thread, and a writer broken so that it never finishes
/// (a mutant, docs/testing.md "Mutation testing") would hang the failed test instead of
/// letting it report.
pub struct TestWriter(Option<GroupCommitWriter>);

impl TestWriter {
    pub fn shutdown(mut self) -> Option<Log> {
        self.0.take().expect("running").shutdown()
    }
}

impl std::ops::Deref for TestWriter {
    type Target = GroupCommitWriter;

    fn deref(&self) -> &GroupCommitWriter {
        self.0.as_ref().expect("running")
    }
}

impl Drop for TestWriter {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::mem::forget(self.0.take());
        }
    }
}

/// Waits for the Durable event covering `seq`; returns its end offset. Any other event but an
/// earlier Durable is a test failure.
pub fn wait_durable(writer: &GroupCommitWriter, seq: u64) -> i64 {
    wait_durable_where(writer, seq, false)
}

/// [`wait_durable`], letting read results go by.
pub fn wait_durable_ignoring_reads(writer: &GroupCommitWriter, seq: u64) -> i64 {
    wait_durable_where(writer, seq, true)
}

fn wait_durable_where(writer: &GroupCommitWriter, seq: u64, reads_allowed: bool) -> i64 {
    loop {
        match writer.events().recv_timeout(WAIT).expect("writer event") {
            WriterEvent::Durable {
                up_to_seq,
                end_offset,
            } if up_to_seq >= seq => return end_offset,
            WriterEvent::Durable { .. } => {}
            WriterEvent::ReadDone { .. } if reads_allowed => {}
            WriterEvent::Fatal(error) => panic!("writer failed: {error}"),
            other => panic!("unexpected event {other:?}"),
        }
    }
}
