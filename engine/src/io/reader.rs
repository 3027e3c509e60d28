//! The log reader: one thread that serves catch-up reads (fetches the Raft core's in-memory tail
//! cannot answer) off the group-commit writer's sequence, so a lagging follower never delays a
//! group commit.
//!
//! It reads through the log's [`LogView`] with plain buffered preads of the written part of the
//! segments (the rule that makes that safe against concurrent appends and truncations is in
//! docs/storage.md, "Reads off the writer thread") and answers each read with
//! [`WriterEvent::ReadDone`] on the writer's event channel and eventfd, so the thread driving the
//! log wakes for it exactly as for a durability report. Its request queue is bounded
//! ([`READ_QUEUE_CAPACITY`]); a read that finds it full is refused at once ([`ReadRefused`]), never
//! waited for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use super::events::EventSink;
use super::writer::{WriterError, WriterEvent};
use crate::log::LogView;
use crate::raft::Offset;

/// Reads waiting for the reader thread, at most. A follower has one fetch in flight, so this is
/// room for that many lagging replicas at once; the memory of their results is bounded by the
/// event channel (`EVENT_CAPACITY`).
pub const READ_QUEUE_CAPACITY: usize = 32;

/// One catch-up read: whole batches from the one holding `from_offset` on, up to about
/// `max_bytes` (at least one batch when any is written there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    pub read_id: u64,
    pub from_offset: Offset,
    pub max_bytes: usize,
}

/// Why a read was not queued. The read gets no `ReadDone`: the caller answers it itself (the node
/// answers the fetch with no records; the follower fetches again).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReadRefused {
    #[error("the log reader has {0} reads queued (its bound)")]
    Full(usize),
    #[error("the log reader has stopped")]
    Stopped,
}

/// Counters kept by the reader thread (relaxed atomics; read them for reports).
#[derive(Debug, Default)]
pub struct ReaderStats {
    pub reads: AtomicU64,
    pub batches: AtomicU64,
    pub bytes: AtomicU64,
    /// Reads refused because the queue was full.
    pub refused: AtomicU64,
    /// Snapshots thrown away because a truncation began during the read.
    pub retries: AtomicU64,
    /// Batches dropped for failing validation (never expected).
    pub invalid_batches: AtomicU64,
    pub errors: AtomicU64,
    /// The longest read so far, in microseconds.
    pub max_read_us: AtomicU64,
}

/// Handle to the reader thread. Dropping it stops the thread after the read in progress.
pub struct LogReader {
    requests: Option<Sender<ReadRequest>>,
    stats: Arc<ReaderStats>,
    thread: Option<JoinHandle<()>>,
}

impl LogReader {
    pub(crate) fn start(view: Arc<LogView>, sink: EventSink) -> Result<Self, WriterError> {
        let (request_tx, request_rx) = crossbeam_channel::bounded(READ_QUEUE_CAPACITY);
        let stats = Arc::new(ReaderStats::default());
        let thread_stats = Arc::clone(&stats);
        let thread = std::thread::Builder::new()
            .name("ringraft-read".into())
            .spawn(move || run(&view, &request_rx, &sink, &thread_stats))
            .map_err(WriterError::Spawn)?;
        Ok(Self {
            requests: Some(request_tx),
            stats,
            thread: Some(thread),
        })
    }

    /// Queues `request` (never blocks).
    pub fn submit(&self, request: ReadRequest) -> Result<(), ReadRefused> {
        let Some(requests) = &self.requests else {
            return Err(ReadRefused::Stopped);
        };
        match requests.try_send(request) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                Err(ReadRefused::Full(READ_QUEUE_CAPACITY))
            }
            Err(TrySendError::Disconnected(_)) => Err(ReadRefused::Stopped),
        }
    }

    pub fn stats(&self) -> &Arc<ReaderStats> {
        &self.stats
    }

    /// Reads queued and not started yet.
    pub fn queued(&self) -> usize {
        self.requests.as_ref().map_or(0, Sender::len)
    }

    /// Stops taking reads and waits for the thread (the read in progress finishes; queued ones
    /// are dropped unanswered: only for shutdown).
    pub(crate) fn stop(&mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for LogReader {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(view: &LogView, requests: &Receiver<ReadRequest>, sink: &EventSink, stats: &ReaderStats) {
    while let Ok(request) = requests.recv() {
        let started = Instant::now();
        let result = view.read(request.from_offset, request.max_bytes);
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        stats.reads.fetch_add(1, Ordering::Relaxed);
        stats.max_read_us.fetch_max(micros, Ordering::Relaxed);
        let result = match result {
            Ok((batches, outcome)) => {
                let bytes: usize = batches.iter().map(|b| b.len()).sum();
                stats
                    .batches
                    .fetch_add(batches.len() as u64, Ordering::Relaxed);
                stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
                stats
                    .retries
                    .fetch_add(u64::from(outcome.retries), Ordering::Relaxed);
                stats
                    .invalid_batches
                    .fetch_add(u64::from(outcome.invalid), Ordering::Relaxed);
                Ok(batches)
            }
            Err(error) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                Err(error)
            }
        };
        let event = WriterEvent::ReadDone {
            read_id: request.read_id,
            result,
        };
        if !sink.send(event) {
            return; // the handle shut down: nobody reads results any more
        }
    }
}
