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
//!
//! Reads are paced to a byte budget (`WriterConfig::read_bytes_per_sec`, a token bucket holding
//! one second of it): moving catch-up data costs the disk, the CPUs and the network the commit
//! path needs too, and the budget is what keeps a replica catching up from the start of a large
//! log from taking them over (docs/benchmarks.md, "Commit latency while a replica catches up").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};

use super::events::EventSink;
use super::writer::{WriterError, WriterEvent};
use crate::base::Offset;
use crate::log::{LogView, TimestampLookup};

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

/// One step of a timestamp lookup (ListOffsets by timestamp: `engine::log::TimestampLookup`):
/// answered with [`WriterEvent::LookupDone`], whose step says whether it is finished or what
/// to queue next. One step walks at most `engine::log::LOOKUP_STEP_BYTES` of batches, so a long
/// lookup takes turns with the catch-up reads in this queue instead of holding the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupRequest {
    pub lookup_id: u64,
    pub lookup: TimestampLookup,
}

/// What the reader thread is asked to do; both kinds share its bounded queue and its budget.
#[derive(Clone, Copy, Debug)]
enum Job {
    Read(ReadRequest),
    Lookup(LookupRequest),
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
    /// Timestamp lookup steps run.
    pub lookup_steps: AtomicU64,
    /// Batches dropped for failing validation (never expected).
    pub invalid_batches: AtomicU64,
    pub errors: AtomicU64,
    /// The longest read so far, in microseconds.
    pub max_read_us: AtomicU64,
    /// Time spent waiting for the read budget, in microseconds.
    pub paced_us: AtomicU64,
}

/// A token bucket over bytes read: it refills at `rate` bytes/s up to one second's worth, and a
/// read waits while the bucket is in debt (a read may take it into debt by up to one read).
struct Pacer {
    rate: f64,
    tokens: f64,
    refilled: Instant,
}

impl Pacer {
    fn new(rate: u64) -> Self {
        Self {
            rate: rate as f64,
            tokens: rate as f64,
            refilled: Instant::now(),
        }
    }

    fn refill(&mut self) {
        let now = Instant::now();
        let earned = now.duration_since(self.refilled).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + earned).min(self.rate);
        self.refilled = now;
    }

    /// How long until the bucket is out of debt (zero when it is not in debt).
    fn wait(&mut self) -> Duration {
        self.refill();
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }

    fn spend(&mut self, bytes: usize) {
        self.refill();
        self.tokens -= bytes as f64;
    }
}

/// Handle to the reader thread. Dropping it stops the thread after the read in progress.
pub struct LogReader {
    requests: Option<Sender<Job>>,
    stats: Arc<ReaderStats>,
    thread: Option<JoinHandle<()>>,
}

impl LogReader {
    /// Starts the thread; `bytes_per_sec` paces its reads (None: as fast as the disk goes).
    pub(crate) fn start(
        view: Arc<LogView>,
        sink: EventSink,
        bytes_per_sec: Option<u64>,
    ) -> Result<Self, WriterError> {
        let (request_tx, request_rx) = crossbeam_channel::bounded(READ_QUEUE_CAPACITY);
        let stats = Arc::new(ReaderStats::default());
        let thread_stats = Arc::clone(&stats);
        let pacer = bytes_per_sec.filter(|&rate| rate > 0).map(Pacer::new);
        let thread = std::thread::Builder::new()
            .name("ringraft-read".into())
            .spawn(move || run(&view, &request_rx, &sink, &thread_stats, pacer))
            .map_err(WriterError::Spawn)?;
        Ok(Self {
            requests: Some(request_tx),
            stats,
            thread: Some(thread),
        })
    }

    /// Queues `request` (never blocks).
    pub fn submit(&self, request: ReadRequest) -> Result<(), ReadRefused> {
        self.queue(Job::Read(request))
    }

    /// Queues one step of a timestamp lookup (never blocks), in the same queue as the reads.
    pub fn submit_lookup(&self, request: LookupRequest) -> Result<(), ReadRefused> {
        self.queue(Job::Lookup(request))
    }

    fn queue(&self, job: Job) -> Result<(), ReadRefused> {
        let Some(requests) = &self.requests else {
            return Err(ReadRefused::Stopped);
        };
        match requests.try_send(job) {
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

fn run(
    view: &LogView,
    requests: &Receiver<Job>,
    sink: &EventSink,
    stats: &ReaderStats,
    mut pacer: Option<Pacer>,
) {
    while let Ok(job) = requests.recv() {
        if let Some(pacer) = &mut pacer {
            let wait = pacer.wait();
            if !wait.is_zero() {
                stats
                    .paced_us
                    .fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
                if sink.wait_closed(wait) {
                    return; // the handle shut down meanwhile
                }
            }
        }
        let started = Instant::now();
        let (event, bytes) = match job {
            Job::Read(request) => read(view, request, stats),
            Job::Lookup(request) => lookup(view, request, stats),
        };
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        stats.max_read_us.fetch_max(micros, Ordering::Relaxed);
        stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        if let Some(pacer) = &mut pacer {
            pacer.spend(bytes);
        }
        if !sink.send(event) {
            return; // the handle shut down: nobody reads results any more
        }
    }
}

/// One catch-up read: its event and the bytes it read.
fn read(view: &LogView, request: ReadRequest, stats: &ReaderStats) -> (WriterEvent, usize) {
    let result = view.read(request.from_offset, request.max_bytes);
    stats.reads.fetch_add(1, Ordering::Relaxed);
    let mut read = 0;
    let result = match result {
        Ok((batches, outcome)) => {
            read = batches.iter().map(|b| b.len()).sum();
            stats
                .batches
                .fetch_add(batches.len() as u64, Ordering::Relaxed);
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
    (event, read)
}

/// One step of a timestamp lookup: its event and the bytes of batches it walked.
fn lookup(view: &LogView, request: LookupRequest, stats: &ReaderStats) -> (WriterEvent, usize) {
    stats.lookup_steps.fetch_add(1, Ordering::Relaxed);
    let (result, walked) = match view.lookup_step(request.lookup) {
        Ok((step, walked, outcome)) => {
            stats
                .retries
                .fetch_add(u64::from(outcome.retries), Ordering::Relaxed);
            (Ok(step), walked)
        }
        Err(error) => {
            stats.errors.fetch_add(1, Ordering::Relaxed);
            (Err(error), 0)
        }
    };
    let event = WriterEvent::LookupDone {
        lookup_id: request.lookup_id,
        result,
    };
    (event, walked)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debt is paid off at `rate` bytes a second as time passes: 100 s of debt at 1,000 bytes/s
    /// is at least 0.1 s shorter after sleeping 0.1 s (and never longer).
    #[test]
    fn the_pacers_debt_shrinks_as_time_passes() {
        let mut pacer = Pacer::new(1000);
        pacer.spend(101_000);
        let before = pacer.wait();
        assert!(before <= Duration::from_secs(100), "{before:?}");
        std::thread::sleep(Duration::from_millis(100));
        let after = pacer.wait();
        assert!(
            after <= before - Duration::from_millis(100),
            "{before:?} then {after:?}"
        );
        assert!(after > Duration::from_secs(90), "{after:?}");
    }

    #[test]
    fn the_pacer_lets_a_second_of_budget_through_then_makes_reads_wait() {
        let rate = 1 << 20;
        let mut pacer = Pacer::new(rate);
        assert!(
            pacer.wait().is_zero(),
            "a full bucket lets a read go at once"
        );
        pacer.spend(rate as usize / 2);
        assert!(
            pacer.wait().is_zero(),
            "half the burst spent: still no wait"
        );
        // Two more seconds' worth: in debt by about 1.5 s of budget.
        pacer.spend(2 * rate as usize);
        let wait = pacer.wait();
        assert!(!wait.is_zero(), "a bucket in debt makes the next read wait");
        assert!(
            wait <= Duration::from_secs(2),
            "never more than the debt: {wait:?}"
        );
    }
}
