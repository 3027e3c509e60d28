//! The group-commit writer: one thread, one io_uring, owning the log's files.
//!
//! Requests arrive on a bounded channel. While a group's write and fdatasync are in flight the
//! channel keeps collecting; when they complete, everything queued becomes the next group: staged
//! into the log's aligned buffer, written with one O_DIRECT write (the last partial block of the
//! previous group rewritten in front of it), with a linked fdatasync behind it. Each new durable
//! point is reported as [`WriterEvent::Durable`] on a bounded event channel, and the writer's
//! eventfd is signalled so a thread parked in its own io_uring can watch it. An IO error is fatal:
//! reported once as [`WriterEvent::Fatal`], after which the thread stops and nothing later is
//! reported durable.
//!
//! The handle also starts the log's reader thread ([`super::reader`]): catch-up reads never run
//! in this thread's sequence, and their results come back on the same event channel and eventfd.
//! The bounds and what happens when a channel is full: docs/architecture.md, "Threads".

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_channel::{Receiver, SendTimeoutError, Sender, TrySendError};
use io_uring::{opcode, squeue, types, IoUring};

use super::events::{EventChannel, EventSink, SendOrRecv, EVENT_CAPACITY};
use super::group_plan::{GroupPlan, PlannedOp, Step};
use super::reader::{LogReader, LookupRequest, ReadRefused, ReadRequest, ReaderStats};
use crate::base::{Epoch, Offset};
use crate::log::{
    GroupWrite, Log, LogError, LogView, LookupStep, RetentionPolicy, SpareAtRoll, StageStop,
};
use crate::os::aligned::align_up;
use crate::os::file::{self, PinError};
use crate::record::Batch;
use crate::stats::{LocalHistogram, GROUP_BATCHES_BOUNDS, GROUP_BYTES_BOUNDS, LATENCY_US_BOUNDS};

/// How a group is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// The O_DIRECT write with an fdatasync linked behind it (IOSQE_IO_LINK).
    LinkedFdatasync,
    /// One O_DIRECT write with RWF_DSYNC (a zero-fill, when due, still goes with a linked fdatasync).
    RwfDsync,
}

impl std::fmt::Display for SyncMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SyncMode::LinkedFdatasync => "O_DIRECT write + linked fdatasync",
            SyncMode::RwfDsync => "O_DIRECT write with RWF_DSYNC",
        })
    }
}

#[derive(Clone, Debug)]
pub struct WriterConfig {
    /// Pin the writer thread to this CPU (checked against sched_getaffinity first).
    pub cpu: Option<usize>,
    pub sync_mode: SyncMode,
    /// Register the staging and zero buffers with the ring (needs RLIMIT_MEMLOCK room; falls back
    /// to plain writes with a warning).
    pub register_buffers: bool,
    /// A group larger than this goes out as several parallel writes of this size (block
    /// multiple), with the fdatasync drained behind them.
    pub split_write_bytes: usize,
    /// Requests the channel holds before [`GroupCommitWriter::submit`] has to wait
    /// ([`REQUEST_CAPACITY`] by default).
    pub request_capacity: usize,
    /// How long [`GroupCommitWriter::submit`] waits for room in a full channel before it declares
    /// the writer stalled (fail-stop, [`WriterError::Stalled`]).
    pub submit_timeout: Duration,
    /// The reader thread's budget in bytes read per second (None or 0: unpaced); default
    /// [`READ_BYTES_PER_SEC`].
    pub read_bytes_per_sec: Option<u64>,
}

/// The default catch-up read budget, 32 MiB/s: on the 2-vCPU benchmark machine an unpaced
/// catch-up from the start of a large log multiplied the leader's commit p99 several times, and
/// this budget kept it within 2x (docs/benchmarks.md, "Commit latency while a replica catches
/// up"). A follower 1 GiB behind needs at least 32 s to catch up at this rate.
pub const READ_BYTES_PER_SEC: u64 = 32 << 20;

/// The default bound of the request channel. The raft thread's pipeline into the writer is one
/// request per client append in flight on the leader (a follower has one or two fetch responses
/// in flight), so this holds about 4096 Produce requests in flight before the raft thread feels
/// backpressure: 800 connections at a Kafka client's default 5 in flight.
pub const REQUEST_CAPACITY: usize = 4096;

/// The writer takes requests off the channel into its own queue only while that queue holds
/// less than this many groups' worth of batch bytes (`max_group_bytes` each) and fewer than
/// `request_capacity` requests: more could not go out sooner, and the rest waits in the bounded
/// channel, where it pushes back on the sender.
const QUEUED_GROUPS: usize = 2;

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            cpu: None,
            sync_mode: SyncMode::LinkedFdatasync,
            register_buffers: true,
            split_write_bytes: 512 << 10,
            request_capacity: REQUEST_CAPACITY,
            submit_timeout: Duration::from_secs(10),
            read_bytes_per_sec: Some(READ_BYTES_PER_SEC),
        }
    }
}

/// What the writer is asked to do. `seq` follows [`LogOp::seq`]: strictly increasing.
#[derive(Debug)]
pub enum WriterRequest {
    /// Append whole batches whose base offsets continue the log.
    Append { seq: u64, batches: Vec<Batch> },
    /// Drop everything at or beyond `offset`, durably.
    TruncateTo { seq: u64, offset: Offset },
    /// Finish what is queued, checkpoint, and stop (answered with [`WriterEvent::Stopped`]).
    Shutdown,
    /// Retention in the writer's sequence ([`Log::apply_retention`]): the sealed segments the
    /// policy lets go, never past `limit` (for a node, the core's retention limit: the high
    /// watermark, or the newest record the log must keep), are deleted or recycled. Reported
    /// with [`WriterEvent::Retained`], with the start the policy would have gone to with
    /// `unpinned` (the high watermark) as the limit.
    Retain {
        policy: RetentionPolicy,
        limit: Offset,
        unpinned: Offset,
    },
    /// The retention policy, the newest limit and the high watermark (`unpinned`), as in
    /// [`WriterRequest::Retain`], for the rolls to apply to the oldest segment between
    /// retention runs: a log at its retention size then reuses that segment's file as the next
    /// one instead of allocating one and deleting one (docs/storage.md, "Recycling at the
    /// roll"). Deletes nothing by itself; not answered.
    RetentionLimit {
        policy: RetentionPolicy,
        limit: Offset,
        unpinned: Offset,
    },
    /// Drop the whole log and start it again, empty, at `start` in `epoch` ([`Log::reset_to`]),
    /// durably; reported like an append.
    ResetTo {
        seq: u64,
        start: Offset,
        epoch: Epoch,
    },
}

/// What the writer reports.
#[derive(Debug)]
pub enum WriterEvent {
    /// Every request with `seq <= up_to_seq` is durable; the log ends at `end_offset`. When the
    /// channel is full, reports coalesce: the next one delivered covers the ones not delivered.
    Durable { up_to_seq: u64, end_offset: Offset },
    /// A read queued with [`GroupCommitWriter::read`] finished (sent by the reader thread; reads
    /// finish in no fixed order relative to durability reports).
    ReadDone {
        read_id: u64,
        result: Result<Vec<Bytes>, LogError>,
    },
    /// A step of a timestamp lookup queued with [`GroupCommitWriter::lookup`] ran (sent by the
    /// reader thread): finished, or the step to queue next.
    LookupDone {
        lookup_id: u64,
        result: Result<LookupStep, LogError>,
    },
    /// The writer stopped on an error; nothing after the last `Durable` is known to be on disk.
    /// Sent once. The node must stop: see [`exit_on_fatal`].
    Fatal(WriterError),
    /// Clean shutdown finished.
    Stopped { end_offset: Offset },
    /// The next segment cannot be allocated ([`LogError::NoSpace`], carried in `error`: the
    /// directory, the bytes needed and free). Not fatal: nothing was written or lost. The
    /// writer keeps what it holds and tries again every [`SPACE_RETRY`]; sent once per episode,
    /// then [`WriterEvent::StorageAvailable`] when an allocation succeeds. The driver stops new
    /// appends meanwhile (docs/storage.md, "A full disk").
    StorageFull { error: LogError },
    /// The next segment was allocated after a [`WriterEvent::StorageFull`]: appends may resume.
    StorageAvailable { free_bytes: u64 },
    /// A [`WriterRequest::Retain`] ran: the log starts at `start`; the policy would have let it
    /// start at `wanted` had nothing held it back below the high watermark.
    Retained { start: Offset, wanted: Offset },
    /// A roll let the oldest segment go, under the policy and limit the writer last heard
    /// ([`WriterRequest::RetentionLimit`], [`WriterRequest::Retain`]), to reuse its file as the
    /// next segment ([`Log::recycle_oldest_as_spare`]): the log now starts at `start`.
    LogStartMoved { start: Offset },
    /// The next segment fell due in a log at its retention size, but the limit holds the
    /// oldest segment back where the high watermark would not (a record the log must keep is
    /// in it): retention wants the log to start at `wanted` by the roll. The writer allocates
    /// nothing yet, expecting the driver to carry that record forward and send a newer limit;
    /// if none comes by the roll, the roll allocates. Sent at most once per `wanted`.
    RetentionHeldBack { wanted: Offset },
}

/// How often a writer whose disk is full tries to allocate the next segment again.
pub const SPACE_RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error(
        "creating the io_uring failed: {0} (check the kernel.io_uring_disabled sysctl and seccomp)"
    )]
    Ring(std::io::Error),
    #[error("eventfd: {0}")]
    EventFd(std::io::Error),
    #[error("pinning the log writer: {0}")]
    Pin(#[from] PinError),
    #[error("spawning the log writer thread: {0}")]
    Spawn(std::io::Error),
    #[error("{op} failed at file position {position}: {source}")]
    Io {
        op: &'static str,
        position: u64,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("request seq {seq} after seq {last}: seqs must increase")]
    SeqOrder { seq: u64, last: u64 },
    #[error(
        "the log writer took no request for {waited:?} with {capacity} queued: the disk has \
         stalled"
    )]
    Stalled { waited: Duration, capacity: usize },
}

/// Why [`GroupCommitWriter::try_submit`] did not queue a request (handed back).
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The channel holds `request_capacity` requests: back off (a Produce can be answered with
    /// a retriable error) or wait with [`GroupCommitWriter::submit`].
    #[error("the log writer's queue is full")]
    Full(WriterRequest),
    /// The writer stopped (after a Fatal, which it reported).
    #[error("the log writer has stopped")]
    Stopped(WriterRequest),
}

/// Stops the process after a fatal storage error, with a clear message (exit code 74, EX_IOERR).
/// After a failed write or fdatasync the page cache state is unknown, so continuing could
/// acknowledge data that is not on disk (fail-stop).
pub fn exit_on_fatal(error: &WriterError) -> ! {
    crate::fail_stop::fail_stop(
        crate::fail_stop::EXIT_STORAGE,
        format_args!(
            "storage error in the log writer: {error}. Stopping (fail-stop): after a failed \
             write or fsync nothing later can be trusted to be durable. Check the disk, then \
             restart; recovery truncates any torn tail."
        ),
    )
}

/// How the ring ended up configured.
#[derive(Clone, Debug, Default)]
pub struct RingInfo {
    pub single_issuer: bool,
    pub defer_taskrun: bool,
    pub registered_buffers: bool,
    pub pinned_cpu: Option<usize>,
}

/// Counters kept by the writer thread (relaxed atomics; read them for reports and metrics).
#[derive(Debug)]
pub struct WriterStats {
    /// Groups written (each one write plus one sync).
    pub groups: AtomicU64,
    /// Of those, the groups made durable by an fdatasync, and those made durable by their
    /// RWF_DSYNC write alone ([`SyncMode`]; a zero-fill or a split group takes an fdatasync
    /// in either mode).
    pub groups_fdatasynced: AtomicU64,
    pub groups_dsync_written: AtomicU64,
    /// Bytes of batches written (excluding rewritten partial blocks and padding).
    pub batch_bytes: AtomicU64,
    /// Bytes submitted to the device, rewrites, padding and zero-fill included.
    pub device_bytes: AtomicU64,
    pub batches: AtomicU64,
    pub zero_fills: AtomicU64,
    /// The longest group so far, submit to durable (write + fdatasync), in microseconds.
    pub max_group_us: AtomicU64,
    /// Groups that took longer than [`SLOW_GROUP`] (each also logged as a warning).
    pub slow_groups: AtomicU64,
    /// Submits that found the request channel full and had to wait.
    pub submits_waited: AtomicU64,
    /// Durability reports the full event channel could not take at once (coalesced).
    pub reports_coalesced: AtomicU64,
    /// Batches copied into the staging buffer while the previous group's write was in flight
    /// (the copy overlapped the IO instead of waiting for it).
    pub batches_staged_during_write: AtomicU64,
    /// 1 while the next segment cannot be allocated (the disk is full), else 0.
    pub storage_full: AtomicU64,
    /// Times the disk was found full (episodes, each reported once).
    pub storage_full_episodes: AtomicU64,
    /// Segment files allocated fresh, recycled, and deleted ([`crate::log::SegmentCounts`]).
    pub segments_allocated: AtomicU64,
    pub segments_recycled: AtomicU64,
    pub segments_deleted: AtomicU64,
    /// Per group, submit to durable (write + fdatasync), in microseconds (etcd's
    /// `disk_wal_fsync_duration_seconds`, for a group).
    pub group_us: LocalHistogram,
    /// Per group: bytes of batches, and batches.
    pub group_bytes: LocalHistogram,
    pub group_batches: LocalHistogram,
}

impl Default for WriterStats {
    fn default() -> Self {
        Self {
            groups: AtomicU64::new(0),
            groups_fdatasynced: AtomicU64::new(0),
            groups_dsync_written: AtomicU64::new(0),
            batch_bytes: AtomicU64::new(0),
            device_bytes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            zero_fills: AtomicU64::new(0),
            max_group_us: AtomicU64::new(0),
            slow_groups: AtomicU64::new(0),
            submits_waited: AtomicU64::new(0),
            reports_coalesced: AtomicU64::new(0),
            batches_staged_during_write: AtomicU64::new(0),
            storage_full: AtomicU64::new(0),
            storage_full_episodes: AtomicU64::new(0),
            segments_allocated: AtomicU64::new(0),
            segments_recycled: AtomicU64::new(0),
            segments_deleted: AtomicU64::new(0),
            group_us: LocalHistogram::new(LATENCY_US_BOUNDS),
            group_bytes: LocalHistogram::new(GROUP_BYTES_BOUNDS),
            group_batches: LocalHistogram::new(GROUP_BATCHES_BOUNDS),
        }
    }
}

/// Handle to the writer thread and the log's reader thread.
pub struct GroupCommitWriter {
    requests: Sender<WriterRequest>,
    events: Receiver<WriterEvent>,
    eventfd: Arc<OwnedFd>,
    /// Dropped at shutdown: tells the log threads that nobody reads events any more.
    close_events: Option<Sender<()>>,
    reader: LogReader,
    /// The log's view, for the sparse index's memory (metrics, off every thread's hot path).
    view: Arc<LogView>,
    stats: Arc<WriterStats>,
    info: RingInfo,
    request_capacity: usize,
    submit_timeout: Duration,
    thread: Option<JoinHandle<Option<Log>>>,
}

impl GroupCommitWriter {
    /// Starts the writer thread, which takes ownership of `log`, and the reader thread, which
    /// reads through the log's view. The ring is created on the writer thread (SINGLE_ISSUER
    /// requires it); set-up errors are returned here.
    pub fn start(log: Log, config: WriterConfig) -> Result<Self, WriterError> {
        let channel = EventChannel::new(EVENT_CAPACITY)?;
        let request_capacity = config.request_capacity.max(1);
        let submit_timeout = config.submit_timeout;
        let read_bytes_per_sec = config.read_bytes_per_sec;
        let (request_tx, request_rx) = crossbeam_channel::bounded(request_capacity);
        let (ready_tx, ready_rx) = crossbeam_channel::bounded(1);
        let stats = Arc::new(WriterStats::default());
        let thread_stats = Arc::clone(&stats);
        let view = log.view();
        let sink = channel.sink.clone();
        let thread = std::thread::Builder::new()
            .name("ringraft-log".into())
            .spawn(move || {
                let setup = WriterThread::new(log, &config, request_rx, sink, thread_stats);
                match setup {
                    Ok(writer) => {
                        let _ = ready_tx.send(Ok(writer.info.clone()));
                        writer.run()
                    }
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                        None
                    }
                }
            })
            .map_err(WriterError::Spawn)?;
        let info = ready_rx.recv().expect("writer thread reports its set-up")?;
        let reader = match LogReader::start(view.clone(), channel.sink, read_bytes_per_sec) {
            Ok(reader) => reader,
            Err(error) => {
                let _ = request_tx.send(WriterRequest::Shutdown);
                let _ = thread.join();
                return Err(error);
            }
        };
        Ok(Self {
            requests: request_tx,
            events: channel.events,
            eventfd: channel.eventfd,
            close_events: Some(channel.close),
            reader,
            view,
            stats,
            info,
            request_capacity,
            submit_timeout,
            thread: Some(thread),
        })
    }

    /// Where to send requests (clone it freely; send order is processing order). The channel is
    /// bounded: a send waits while it is full.
    pub fn sender(&self) -> Sender<WriterRequest> {
        self.requests.clone()
    }

    /// Queues `request`. When the channel is full this waits for room (backpressure: the writer
    /// frees room at every group), but at most `submit_timeout`: a writer that takes no request
    /// for that long has a stalled disk, and the node stops ([`exit_on_fatal`] with
    /// [`WriterError::Stalled`]) rather than block its caller for ever. Use [`Self::try_submit`]
    /// or [`Self::congested`] to refuse work before that.
    pub fn submit(&self, request: WriterRequest) {
        let request = match self.requests.try_send(request) {
            Ok(()) => return,
            // The writer stopped after a Fatal, which it reported.
            Err(TrySendError::Disconnected(_)) => return,
            Err(TrySendError::Full(request)) => request,
        };
        self.stats.submits_waited.fetch_add(1, Ordering::Relaxed);
        match self.requests.send_timeout(request, self.submit_timeout) {
            Ok(()) | Err(SendTimeoutError::Disconnected(_)) => {}
            Err(SendTimeoutError::Timeout(_)) => exit_on_fatal(&WriterError::Stalled {
                waited: self.submit_timeout,
                capacity: self.request_capacity,
            }),
        }
    }

    /// Queues `request` if the channel has room; never waits.
    pub fn try_submit(&self, request: WriterRequest) -> Result<(), SubmitError> {
        self.requests
            .try_send(request)
            .map_err(|error| match error {
                TrySendError::Full(request) => SubmitError::Full(request),
                TrySendError::Disconnected(request) => SubmitError::Stopped(request),
            })
    }

    /// Requests waiting in the channel (not yet taken by the writer).
    pub fn backlog(&self) -> usize {
        self.requests.len()
    }

    pub fn request_capacity(&self) -> usize {
        self.request_capacity
    }

    /// True when the channel is at least three quarters full: the moment for a driver to answer
    /// new client appends with a retriable error instead of queueing them.
    pub fn congested(&self) -> bool {
        self.backlog() * 4 >= self.request_capacity * 3
    }

    /// Queues a catch-up read on the reader thread, answered with [`WriterEvent::ReadDone`] on
    /// [`Self::events`] (and the eventfd). Never blocks: refused at once when the reader's queue
    /// is full; a refused read gets no `ReadDone`.
    pub fn read(&self, request: ReadRequest) -> Result<(), ReadRefused> {
        self.reader.submit(request)
    }

    /// Queues one step of a timestamp lookup on the reader thread (its queue, its budget),
    /// answered with [`WriterEvent::LookupDone`]. Never blocks: refused at once when the
    /// reader's queue is full; a refused step gets no `LookupDone`.
    pub fn lookup(&self, request: LookupRequest) -> Result<(), ReadRefused> {
        self.reader.submit_lookup(request)
    }

    pub fn reader_stats(&self) -> &Arc<ReaderStats> {
        self.reader.stats()
    }

    /// Durability reports, read results, the fatal error and the stop, from both log threads.
    pub fn events(&self) -> &Receiver<WriterEvent> {
        &self.events
    }

    /// An eventfd (non-blocking) signalled after each event is queued; read it to reset.
    pub fn eventfd(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }

    pub fn stats(&self) -> &Arc<WriterStats> {
        &self.stats
    }

    /// The log's view of its segments (safe on any thread: `LogView::index_bytes`).
    pub fn view(&self) -> &Arc<LogView> {
        &self.view
    }

    pub fn ring_info(&self) -> &RingInfo {
        &self.info
    }

    /// Asks for a clean shutdown and waits; returns the log (None after a fatal error). Reads
    /// still queued are dropped unanswered, and events nobody reads any more are dropped too.
    pub fn shutdown(mut self) -> Option<Log> {
        self.stop()
    }

    fn stop(&mut self) -> Option<Log> {
        let thread = self.thread.take()?;
        // Nobody reads events from here on: a log thread waiting for room gives up.
        self.close_events = None;
        self.reader.stop();
        let _ = self.requests.send(WriterRequest::Shutdown);
        thread.join().ok().flatten()
    }
}

impl Drop for GroupCommitWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

enum Queued {
    Append {
        seq: u64,
        batches: Vec<Batch>,
        next: usize,
    },
    TruncateTo {
        seq: u64,
        offset: Offset,
    },
    Retain(RetentionLimits),
    ResetTo {
        seq: u64,
        start: Offset,
        epoch: Epoch,
    },
}

/// A group slower than this is logged as a disk stall (a healthy one takes well under 10 ms).
pub const SLOW_GROUP: Duration = Duration::from_millis(100);

struct WriterThread {
    // The ring is declared (so dropped) before the log whose buffers it may still reference.
    ring: IoUring,
    log: Log,
    sync_mode: SyncMode,
    requests: Receiver<WriterRequest>,
    sink: EventSink,
    /// The newest durability report the full event channel could not take yet.
    undelivered: Option<WriterEvent>,
    stats: Arc<WriterStats>,
    info: RingInfo,
    queue: VecDeque<Queued>,
    /// Bytes of batches in `queue` not staged yet, and the bound on taking more (see
    /// [`QUEUED_GROUPS`]).
    queued_bytes: usize,
    max_queued_bytes: usize,
    max_queued_requests: usize,
    last_seq: u64,
    shutting_down: bool,
    /// Buffers registered with the ring, by slot (staging buffers, then the zero buffer).
    registered: Vec<(*const u8, usize)>,
    /// A request that broke the seq order (fatal at the next staging).
    pending_error: Option<WriterError>,
    /// The last seq whose batches are all staged (reported once their group is durable).
    staged_seq: Option<u64>,
    /// The group write in flight.
    in_flight: Option<InFlight>,
    /// When the group in flight was submitted.
    in_flight_since: Instant,
    split_bytes: usize,
    /// The next segment could not be allocated (reported); retried every [`SPACE_RETRY`].
    storage_full: bool,
    /// The retention policy and the newest limit heard ([`WriterRequest::RetentionLimit`],
    /// [`WriterRequest::Retain`]): a roll applies them to the oldest segment, to reuse its file
    /// ([`Log::recycle_oldest_as_spare`]). The limit never moves back while the log lives (it
    /// is at most the high watermark, which a truncation never goes below); a reset forgets it.
    retention: Option<RetentionLimits>,
    /// Whether the active segment's successor will be a recycled file, so none is allocated
    /// ahead ([`Log::spare_at_roll`]); `None` until asked, again after each roll and
    /// each limit heard.
    spare_recycled: Option<bool>,
    /// The last `wanted` sent with [`WriterEvent::RetentionHeldBack`].
    held_back_reported: Offset,
}

/// Retention's policy and limits: what a queued [`WriterRequest::Retain`] carries, and the
/// newest the writer has heard ([`WriterThread::retention`]).
#[derive(Clone, Copy, Debug)]
struct RetentionLimits {
    policy: RetentionPolicy,
    limit: Offset,
    unpinned: Offset,
}

impl WriterThread {
    fn new(
        log: Log,
        config: &WriterConfig,
        requests: Receiver<WriterRequest>,
        sink: EventSink,
        stats: Arc<WriterStats>,
    ) -> Result<Self, WriterError> {
        let mut info = RingInfo::default();
        if let Some(cpu) = config.cpu {
            file::pin_current_thread(cpu)?;
            info.pinned_cpu = Some(cpu);
        }
        let ring = build_ring(&mut info)?;
        let max_queued_bytes = QUEUED_GROUPS * log.config().max_group_bytes;
        let mut writer = WriterThread {
            log,
            ring,
            sync_mode: config.sync_mode,
            requests,
            sink,
            undelivered: None,
            stats,
            info,
            queue: VecDeque::new(),
            queued_bytes: 0,
            max_queued_bytes,
            max_queued_requests: config.request_capacity.max(1),
            last_seq: 0,
            shutting_down: false,
            registered: Vec::new(),
            staged_seq: None,
            in_flight: None,
            in_flight_since: Instant::now(),
            pending_error: None,
            split_bytes: align_up(config.split_write_bytes.max(1) as u64) as usize,
            storage_full: false,
            retention: None,
            spare_recycled: None,
            held_back_reported: 0,
        };
        if config.register_buffers {
            writer.register_buffers();
        }
        Ok(writer)
    }

    fn register_buffers(&mut self) {
        let mut regions = self.log.staging_regions();
        regions.push(self.log.zeros_region());
        let iovecs: Vec<libc::iovec> = regions
            .iter()
            .map(|&(base, len)| libc::iovec {
                iov_base: base as *mut _,
                iov_len: len,
            })
            .collect();
        let bytes: usize = regions.iter().map(|&(_, len)| len).sum();
        // SAFETY: the buffers live as long as the log, which this thread owns; they are
        // unregistered before the log is handed back (`finish`). A buffer not in this table is
        // written with a plain Write (see `slot_of`).
        match unsafe { self.ring.submitter().register_buffers(&iovecs) } {
            Ok(()) => {
                self.registered = regions;
                self.info.registered_buffers = true;
            }
            Err(error) => tracing::warn!(
                %error,
                memlock_limit = ?file::memlock_limit(),
                bytes,
                "could not register the log's buffers with io_uring (raise `ulimit -l` or grant \
                 CAP_IPC_LOCK); writing from unregistered buffers"
            ),
        }
    }

    /// The registered slot holding `[buf, buf + len)`, if any.
    fn slot_of(&self, buf: *const u8, len: usize) -> Option<u16> {
        let at = buf as usize;
        self.registered
            .iter()
            .position(|&(base, size)| at >= base as usize && at + len <= base as usize + size)
            .map(|slot| slot as u16)
    }

    fn run(mut self) -> Option<Log> {
        loop {
            if self.storage_full && !self.shutting_down {
                self.wait_space_retry();
            } else if self.queue.is_empty() && !self.shutting_down {
                if self.undelivered.is_none() && self.log.idle_zero_fill_due().is_some() {
                    // Idle with zero-fill to do: one chunk, unless a request is already there.
                    match self.requests.try_recv() {
                        Ok(request) => self.accept(request),
                        Err(crossbeam_channel::TryRecvError::Empty) => {
                            if let Err(error) = self.zero_fill_idle() {
                                return self.stop_on_fatal(error);
                            }
                            continue;
                        }
                        Err(crossbeam_channel::TryRecvError::Disconnected) => {
                            self.shutting_down = true
                        }
                    }
                } else {
                    match self.wait_request() {
                        Ok(request) => self.accept(request),
                        Err(_) => self.shutting_down = true,
                    }
                }
            }
            self.drain_requests();
            let result = self.process().and_then(|()| self.idle_work());
            if let Err(error) = result {
                return self.stop_on_fatal(error);
            }
            // A full disk holds appends that cannot be written: a shutdown drops them (none
            // was reported durable, so none was acknowledged on this node's account).
            if self.shutting_down && (self.queue.is_empty() || self.storage_full) {
                return self.finish();
            }
        }
    }

    /// Stops the writer on an error that leaves the data's state unknown (fail-stop).
    fn stop_on_fatal(&mut self, error: WriterError) -> Option<Log> {
        tracing::error!(%error, "log writer stopped on a fatal error");
        // Close the request channel first, so a sender waiting for room returns at once and the
        // raft thread gets to read the Fatal.
        self.requests = crossbeam_channel::never();
        self.sink.send(WriterEvent::Fatal(error));
        None
    }

    /// One idle chunk of zero-fill ahead of the write head (docs/storage.md, "Zero-fill
    /// ahead"), counted with the group zero-fills.
    fn zero_fill_idle(&mut self) -> Result<(), WriterError> {
        let written = self.log.zero_fill_idle()?;
        self.stats
            .device_bytes
            .fetch_add(written as u64, Ordering::Relaxed);
        self.stats.zero_fills.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// While the disk is full: waits for a request or [`SPACE_RETRY`], whichever comes first
    /// (the caller then tries the allocation again), delivering a held durability report first.
    /// With its queue full it takes no request (what it holds stays bounded and the channel
    /// pushes back on the senders) and waits out [`SPACE_RETRY`] unless the handle shuts down:
    /// the Shutdown request may be stuck behind a full channel.
    fn wait_space_retry(&mut self) {
        if let Some(report) = self.undelivered.take() {
            if let Err(report) = self.sink.try_send(report) {
                self.undelivered = Some(report);
            }
        }
        if !self.queue_has_room() {
            if self.sink.wait_closed(SPACE_RETRY) {
                self.shutting_down = true;
            }
            return;
        }
        match self.requests.recv_timeout(SPACE_RETRY) {
            Ok(request) => self.accept(request),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => self.shutting_down = true,
        }
    }

    /// With nothing queued: allocates the next segment when it is due (the active segment is
    /// past half full), or again while the disk is full, so a roll never waits for it and a
    /// full disk is reported while the active segment still has room.
    fn idle_work(&mut self) -> Result<(), WriterError> {
        if !self.queue.is_empty() || self.in_flight.is_some() || self.shutting_down {
            return Ok(());
        }
        if !self.storage_full && !self.log.spare_due() {
            return Ok(());
        }
        if !self.storage_full && self.spare_will_be_recycled()? {
            return Ok(());
        }
        let result = self.log.prepare_spare();
        self.publish_segment_counts();
        self.note_allocation(result)
    }

    /// Keeps `policy` and the larger of each limit and the one already heard (a queued Retain
    /// may carry older limits than a RetentionLimit taken since).
    fn hear_retention(&mut self, new: RetentionLimits) {
        self.retention = Some(match self.retention {
            Some(heard) => RetentionLimits {
                policy: new.policy,
                limit: heard.limit.max(new.limit),
                unpinned: heard.unpinned.max(new.unpinned),
            },
            None => new,
        });
        self.spare_recycled = None;
    }

    /// Asked once per active segment and limit heard: see [`Self::spare_recycled`]. Also true
    /// when only a pinned record holds the oldest segment back, which is then reported
    /// ([`WriterEvent::RetentionHeldBack`]) so that a newer limit comes before the roll.
    fn spare_will_be_recycled(&mut self) -> Result<bool, LogError> {
        if let Some(known) = self.spare_recycled {
            return Ok(known);
        }
        let Some(heard) = self.retention else {
            return Ok(false);
        };
        let at_roll =
            self.log
                .spare_at_roll(heard.policy, wall_clock_ms(), heard.limit, heard.unpinned)?;
        let known = match at_roll {
            SpareAtRoll::Allocated => false,
            SpareAtRoll::Recycled => true,
            SpareAtRoll::HeldBack { wanted } => {
                if wanted > self.held_back_reported {
                    self.held_back_reported = wanted;
                    self.sink.send(WriterEvent::RetentionHeldBack { wanted });
                }
                true
            }
        };
        self.spare_recycled = Some(known);
        Ok(known)
    }

    /// Before a roll: the oldest segment becomes the next one when retention lets it go
    /// (reported with [`WriterEvent::LogStartMoved`]); else the roll allocates one.
    fn recycle_for_roll(&mut self) -> Result<(), LogError> {
        self.spare_recycled = None;
        let Some(heard) = self.retention else {
            return Ok(());
        };
        if let Some(start) =
            self.log
                .recycle_oldest_as_spare(heard.policy, wall_clock_ms(), heard.limit)?
        {
            self.sink.send(WriterEvent::LogStartMoved { start });
        }
        Ok(())
    }

    fn publish_segment_counts(&self) {
        let counts = self.log.segment_counts();
        let stats = &self.stats;
        stats
            .segments_allocated
            .store(counts.allocated, Ordering::Relaxed);
        stats
            .segments_recycled
            .store(counts.recycled, Ordering::Relaxed);
        stats
            .segments_deleted
            .store(counts.deleted, Ordering::Relaxed);
    }

    /// Reports the change when an allocation of the next segment succeeded after a refusal, or
    /// was refused for the first time; any other error is returned (fatal).
    fn note_allocation(&mut self, result: Result<(), LogError>) -> Result<(), WriterError> {
        match result {
            Ok(()) => {
                if std::mem::take(&mut self.storage_full) {
                    self.stats.storage_full.store(0, Ordering::Relaxed);
                    let free_bytes = file::free_bytes(self.log.dir()).unwrap_or(0);
                    self.sink.send(WriterEvent::StorageAvailable { free_bytes });
                }
                Ok(())
            }
            Err(error @ LogError::NoSpace { .. }) => {
                if !self.storage_full {
                    self.storage_full = true;
                    self.stats.storage_full.store(1, Ordering::Relaxed);
                    self.stats
                        .storage_full_episodes
                        .fetch_add(1, Ordering::Relaxed);
                    self.sink.send(WriterEvent::StorageFull { error });
                }
                Ok(())
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Clean shutdown: checkpoint (so the next open scans nothing), report, hand the log back.
    fn finish(self) -> Option<Log> {
        let WriterThread {
            mut log,
            ring,
            sink,
            undelivered,
            ..
        } = self;
        if let Some(report) = undelivered {
            sink.send(report);
        }
        let event = match log.checkpoint_now() {
            Ok(()) => WriterEvent::Stopped {
                end_offset: log.end_offset(),
            },
            Err(error) => WriterEvent::Fatal(error.into()),
        };
        let stopped = matches!(event, WriterEvent::Stopped { .. });
        sink.send(event);
        // The registered buffers belong to the log: release them before handing it back.
        let _ = ring.submitter().unregister_buffers();
        drop(ring);
        stopped.then_some(log)
    }

    /// Blocks for the next request. With a durability report still undelivered (the event
    /// channel was full), it waits for either room for the report or a request.
    fn wait_request(&mut self) -> Result<WriterRequest, crossbeam_channel::RecvError> {
        loop {
            let Some(report) = self.undelivered.take() else {
                return self.requests.recv();
            };
            match self.sink.send_or_recv(report, &self.requests) {
                SendOrRecv::Sent => {}
                SendOrRecv::Received(request, report) => {
                    self.undelivered = Some(report);
                    return request;
                }
            }
        }
    }

    /// Takes queued requests off the channel while the writer's own queue has room (what stays in
    /// the channel pushes back on the senders).
    fn drain_requests(&mut self) {
        while self.queue_has_room() {
            let Ok(request) = self.requests.try_recv() else {
                return;
            };
            self.accept(request);
        }
    }

    /// Whether the writer's own queue may take another request (see [`QUEUED_GROUPS`]).
    fn queue_has_room(&self) -> bool {
        self.queue.len() < self.max_queued_requests && self.queued_bytes < self.max_queued_bytes
    }

    fn accept(&mut self, request: WriterRequest) {
        match request {
            WriterRequest::Append { seq, batches } => {
                self.check_seq(seq);
                self.queued_bytes += batches.iter().map(|b| b.bytes.len()).sum::<usize>();
                self.queue.push_back(Queued::Append {
                    seq,
                    batches,
                    next: 0,
                })
            }
            WriterRequest::TruncateTo { seq, offset } => {
                self.check_seq(seq);
                self.queue.push_back(Queued::TruncateTo { seq, offset })
            }
            WriterRequest::Shutdown => self.shutting_down = true,
            WriterRequest::Retain {
                policy,
                limit,
                unpinned,
            } => self.queue.push_back(Queued::Retain(RetentionLimits {
                policy,
                limit,
                unpinned,
            })),
            // Taken at once, not queued: a limit only grows while the log lives, and a reset
            // queued before it forgets it when it runs (the next one comes soon).
            WriterRequest::RetentionLimit {
                policy,
                limit,
                unpinned,
            } => self.hear_retention(RetentionLimits {
                policy,
                limit,
                unpinned,
            }),
            WriterRequest::ResetTo { seq, start, epoch } => {
                self.check_seq(seq);
                self.queue.push_back(Queued::ResetTo { seq, start, epoch })
            }
        }
    }

    /// Checks that a request's seq follows the last one (a driver bug otherwise, and fatal:
    /// durability reports would be ambiguous); the error surfaces at the next staging.
    fn check_seq(&mut self, seq: u64) {
        if seq <= self.last_seq && self.pending_error.is_none() {
            self.pending_error = Some(WriterError::SeqOrder {
                seq,
                last: self.last_seq,
            });
        }
        self.last_seq = self.last_seq.max(seq);
    }

    /// Writes groups until the queue is empty and nothing is staged. While a group's write is in
    /// flight, requests that arrived meanwhile are staged into the other buffer, so the copy
    /// overlaps the IO and the next group goes out as soon as this one is durable.
    fn process(&mut self) -> Result<(), WriterError> {
        loop {
            let (stop, _) = self.stage_group()?;
            let Some(write) = self.log.prepare_group_write() else {
                if stop == StageStop::NeedsRoll {
                    self.recycle_for_roll()?;
                    let rolled = self.log.roll();
                    self.publish_segment_counts();
                    let refused = matches!(rolled, Err(LogError::NoSpace { .. }));
                    self.note_allocation(rolled)?;
                    if refused {
                        // The queue waits for space (run retries); nothing is lost or reported.
                        return Ok(());
                    }
                    continue;
                }
                if let Some(seq) = self.staged_seq.take() {
                    self.report_durable(seq); // appends with no batches
                }
                match self.queue.front() {
                    Some(&Queued::TruncateTo { seq, offset }) => {
                        self.log.truncate_to(offset)?;
                        self.spare_recycled = None;
                        self.publish_segment_counts();
                        self.queue.pop_front();
                        self.report_durable(seq);
                        continue;
                    }
                    Some(&Queued::Retain(asked)) => {
                        let now = wall_clock_ms();
                        let start = self.log.apply_retention(asked.policy, now, asked.limit)?;
                        self.hear_retention(asked);
                        self.publish_segment_counts();
                        let wanted = if asked.unpinned > asked.limit {
                            self.log
                                .retention_wants(asked.policy, now, asked.unpinned)?
                        } else {
                            start
                        };
                        self.queue.pop_front();
                        self.sink.send(WriterEvent::Retained { start, wanted });
                        continue;
                    }
                    Some(&Queued::ResetTo { seq, start, epoch }) => {
                        self.log.reset_to(start, epoch)?;
                        self.retention = None;
                        self.spare_recycled = None;
                        self.held_back_reported = 0;
                        self.publish_segment_counts();
                        self.queue.pop_front();
                        self.report_durable(seq);
                        continue;
                    }
                    None => return Ok(()),
                    Some(Queued::Append { .. }) => unreachable!("an append stages or rolls"),
                }
            };
            let done_seq = self.staged_seq.take();
            self.submit_group(write, done_seq)?;
            if stop == StageStop::Done {
                self.drain_requests();
                let (_, overlapped) = self.stage_group()?;
                self.stats
                    .batches_staged_during_write
                    .fetch_add(overlapped as u64, Ordering::Relaxed);
            }
            self.wait_group()?;
        }
    }

    /// Stages queued appends until a truncation, a full group, or a roll; returns why it
    /// stopped and how many batches it staged. Notes the last seq staged whole in `staged_seq`.
    fn stage_group(&mut self) -> Result<(StageStop, usize), WriterError> {
        if let Some(error) = self.pending_error.take() {
            return Err(error);
        }
        let mut staged_batches = 0;
        while let Some(Queued::Append { seq, batches, next }) = self.queue.front_mut() {
            let (staged, stop) = self.log.stage(&batches[*next..])?;
            let bytes: usize = batches[*next..*next + staged]
                .iter()
                .map(|b| b.bytes.len())
                .sum();
            self.queued_bytes -= bytes;
            *next += staged;
            staged_batches += staged;
            if *next == batches.len() {
                self.staged_seq = Some(*seq);
                self.queue.pop_front();
            }
            if stop != StageStop::Done {
                return Ok((stop, staged_batches));
            }
        }
        Ok((StageStop::Done, staged_batches))
    }

    /// Reports `seq` durable without ever waiting: when the event channel is full the report
    /// is kept (replacing an older undelivered one, which it covers) and delivered later.
    fn report_durable(&mut self, seq: u64) {
        let report = WriterEvent::Durable {
            up_to_seq: seq,
            end_offset: self.log.durable_end_offset(),
        };
        let superseded = self.undelivered.take();
        if let Err(report) = self.sink.try_send(report) {
            if superseded.is_none() {
                self.stats.reports_coalesced.fetch_add(1, Ordering::Relaxed);
            }
            self.undelivered = Some(report);
        }
    }

    /// Submits the group's entries ([`GroupPlan`]) without waiting: one write, or a write with
    /// its zero-fill and fdatasync linked behind it (IO_LINK), or several parallel writes whose
    /// fdatasync `wait_group` submits once they are done. (IO_DRAIN would save that second
    /// submission, but drained syncs were seen to hang with DEFER_TASKRUN on kernel 6.18.)
    fn submit_group(
        &mut self,
        write: GroupWrite,
        done_seq: Option<u64>,
    ) -> Result<(), WriterError> {
        assert!(self.in_flight.is_none());
        let plan = GroupPlan::for_write(
            write.len,
            write.file_offset,
            write.zero_fill,
            self.sync_mode,
            self.split_bytes,
        );
        let ops: Vec<Op> = plan.first.iter().map(|p| self.op_for(&write, p)).collect();
        let then_sync = plan.then_sync.map(|p| self.op_for(&write, &p));
        self.push_and_submit(&ops)?;
        let stats = &self.stats;
        stats.groups.fetch_add(1, Ordering::Relaxed);
        let durable_by = if plan.has_fdatasync() {
            &stats.groups_fdatasynced
        } else {
            &stats.groups_dsync_written
        };
        durable_by.fetch_add(1, Ordering::Relaxed);
        stats
            .batches
            .fetch_add(write.batches as u64, Ordering::Relaxed);
        stats
            .batch_bytes
            .fetch_add(write.new_bytes as u64, Ordering::Relaxed);
        stats
            .device_bytes
            .fetch_add(plan.device_bytes(), Ordering::Relaxed);
        stats.group_bytes.observe(write.new_bytes as u64);
        stats.group_batches.observe(write.batches as u64);
        stats
            .zero_fills
            .fetch_add(u64::from(write.zero_fill.is_some()), Ordering::Relaxed);
        self.in_flight = Some(InFlight {
            write,
            done_seq,
            ops,
            then_sync,
        });
        self.in_flight_since = Instant::now();
        Ok(())
    }

    /// Waits for the group in flight, then marks it durable and reports its seq.
    fn wait_group(&mut self) -> Result<(), WriterError> {
        let InFlight {
            write,
            done_seq,
            ops,
            then_sync,
        } = self.in_flight.take().expect("a group in flight");
        self.wait_ops(&ops)?;
        if let Some(sync) = then_sync {
            self.push_and_submit(std::slice::from_ref(&sync))?;
            self.wait_ops(std::slice::from_ref(&sync))?;
        }
        self.note_group_time(write.len);
        self.log.complete_group_write(&write);
        if let Some(seq) = done_seq {
            self.report_durable(seq);
        }
        Ok(())
    }

    /// A commit waits for this write + fdatasync on a majority: a stalled disk shows up here
    /// first, so a slow group is logged (operators correlate it with latency spikes).
    fn note_group_time(&self, bytes: usize) {
        let elapsed = self.in_flight_since.elapsed();
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.stats.max_group_us.fetch_max(micros, Ordering::Relaxed);
        self.stats.group_us.observe(micros);
        if is_slow_group(elapsed) {
            self.stats.slow_groups.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                elapsed_ms = elapsed.as_millis() as u64,
                bytes,
                sync = %self.sync_mode,
                "slow durable log write: the disk stalled; if it repeats, move log.dirs to a \
                 device of its own or replace the failing one (docs/operations.md, \"Warnings at \
                 run time\")"
            );
        }
    }

    /// The io_uring entry of one planned step of `write`.
    fn op_for(&self, write: &GroupWrite, planned: &PlannedOp) -> Op {
        let fd = types::Fd(write.fd);
        let rw_flags = if planned.dsync { libc::RWF_DSYNC } else { 0 };
        let (entry, name) = match planned.step {
            Step::Data => {
                let at = (planned.position - write.file_offset) as usize;
                assert!(at + planned.len <= write.len);
                // SAFETY: within the group's buffer (checked above).
                let buf = unsafe { write.buf.add(at) };
                let entry = self.write_entry(fd, buf, planned.len, planned.position, rw_flags);
                (entry, "write")
            }
            Step::ZeroFill => {
                let (zeros, zeros_len) = self.log.zeros_region();
                assert!(planned.len <= zeros_len);
                let entry = self.write_entry(fd, zeros, planned.len, planned.position, rw_flags);
                (entry, "zero-fill write")
            }
            Step::Sync => {
                let entry = opcode::Fsync::new(fd)
                    .flags(types::FsyncFlags::DATASYNC)
                    .build();
                (entry, "fdatasync")
            }
        };
        let mut op = Op::new(entry, name, planned.position, planned.len as u32);
        if planned.linked {
            op.flags = squeue::Flags::IO_LINK;
        }
        op
    }

    /// WriteFixed from a registered buffer, else a plain Write.
    fn write_entry(
        &self,
        fd: types::Fd,
        buf: *const u8,
        len: usize,
        position: u64,
        rw_flags: i32,
    ) -> squeue::Entry {
        match self.slot_of(buf, len) {
            Some(slot) => opcode::WriteFixed::new(fd, buf, len as u32, slot)
                .offset(position)
                .rw_flags(rw_flags)
                .build(),
            None => opcode::Write::new(fd, buf, len as u32)
                .offset(position)
                .rw_flags(rw_flags)
                .build(),
        }
    }

    fn push_and_submit(&mut self, ops: &[Op]) -> Result<(), WriterError> {
        {
            let mut sq = self.ring.submission();
            for (i, op) in ops.iter().enumerate() {
                let entry = op.entry.clone().user_data(i as u64).flags(op.flags);
                // SAFETY: the buffers referenced stay alive and untouched until the completions
                // are reaped (the log keeps a group's buffer aside until complete_group_write).
                unsafe { sq.push(&entry) }.expect("the ring has room for one group");
            }
        }
        let ring = &self.ring;
        retry_interrupted(|| ring.submit())
            .map(drop)
            .map_err(|source| enter_failed(ops, source))
    }

    /// Waits for the completions of `ops` (submitted by `push_and_submit`) and checks them.
    fn wait_ops(&mut self, ops: &[Op]) -> Result<(), WriterError> {
        let ring = &mut self.ring;
        let results = gather_completions(ops.len(), |want, take| {
            retry_interrupted(|| ring.submit_and_wait(want))?;
            for cqe in ring.completion() {
                take(cqe.user_data(), cqe.result());
            }
            Ok(())
        })
        .map_err(|source| enter_failed(ops, source))?;
        // The first failure is the cause; linked entries after it complete with ECANCELED.
        for (op, result) in ops.iter().zip(results) {
            check_completion(op, result)?;
        }
        Ok(())
    }
}

/// One result per entry of a submission of `count` entries (user data 0 to `count - 1`).
/// `wait(want, take)` waits until at least `want` more completions are ready and hands each
/// ready one to `take(user_data, result)`. Should a wait come back with fewer than it asked
/// for, the next asks for the rest only: asking for more than are left would never return.
fn gather_completions(
    count: usize,
    mut wait: impl FnMut(usize, &mut dyn FnMut(u64, i32)) -> std::io::Result<()>,
) -> std::io::Result<Vec<i32>> {
    let mut results = vec![None; count];
    let mut reaped = 0;
    while reaped < count {
        wait(count - reaped, &mut |user_data, result| {
            let i = user_data as usize;
            assert!(
                i < count && results[i].is_none(),
                "unexpected completion {i}"
            );
            results[i] = Some(result);
            reaped += 1;
        })?;
    }
    Ok(results
        .into_iter()
        .map(|result| result.expect("every entry completed"))
        .collect())
}

/// A group whose write and sync took this long is a disk stall (see [`SLOW_GROUP`]).
fn is_slow_group(elapsed: Duration) -> bool {
    elapsed >= SLOW_GROUP
}

/// What one completion says of its entry: done, failed with an errno, or a write that
/// transferred fewer bytes than asked (fatal too: the data's state is unknown).
fn check_completion(op: &Op, result: i32) -> Result<(), WriterError> {
    let source = if result < 0 {
        std::io::Error::from_raw_os_error(-result)
    } else if op.len > 0 && result as u32 != op.len {
        std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("short write: {result} of {} bytes", op.len),
        )
    } else {
        return Ok(());
    };
    Err(WriterError::Io {
        op: op.name,
        position: op.position,
        source,
    })
}

/// Milliseconds since the Unix epoch: what retention compares batches' timestamps with.
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Calls `enter` again while it fails with EINTR: a signal cut the wait short. Calling it again
/// is safe: an entry already taken from the submission queue is not submitted twice, and a
/// completion already posted stays in the completion queue for the next reap.
fn retry_interrupted<T>(mut enter: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    loop {
        match enter() {
            Err(error) if error.raw_os_error() == Some(libc::EINTR) => continue,
            result => return result,
        }
    }
}

/// The group in flight: its write, the seq it makes durable, its entries, and the fdatasync
/// submitted once they completed (a split group's).
struct InFlight {
    write: GroupWrite,
    done_seq: Option<u64>,
    ops: Vec<Op>,
    then_sync: Option<Op>,
}

/// The io_uring_enter of the group starting at `ops[0]` failed (not EINTR, which is retried).
fn enter_failed(ops: &[Op], source: std::io::Error) -> WriterError {
    WriterError::Io {
        op: "io_uring_enter",
        position: ops[0].position,
        source,
    }
}

/// One submission queue entry of a group, with what to report if it fails.
struct Op {
    entry: squeue::Entry,
    flags: squeue::Flags,
    name: &'static str,
    position: u64,
    /// Bytes a write must transfer (0 for the sync).
    len: u32,
}

impl Op {
    fn new(entry: squeue::Entry, name: &'static str, position: u64, len: u32) -> Self {
        Op {
            entry,
            flags: squeue::Flags::empty(),
            name,
            position,
            len,
        }
    }
}

/// SINGLE_ISSUER + DEFER_TASKRUN (+ COOP_TASKRUN) where the kernel has them, else less.
pub(super) fn build_ring(info: &mut RingInfo) -> Result<IoUring, WriterError> {
    // Enough for a 4 MiB group split in 64 KiB writes, plus zero-fill and sync.
    const ENTRIES: u32 = 128;
    let full = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_coop_taskrun()
        .build(ENTRIES);
    if let Ok(ring) = full {
        info.single_issuer = true;
        info.defer_taskrun = true;
        return Ok(ring);
    }
    if let Ok(ring) = IoUring::builder().setup_single_issuer().build(ENTRIES) {
        info.single_issuer = true;
        return Ok(ring);
    }
    IoUring::new(ENTRIES).map_err(WriterError::Ring)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer to run on the test's own thread (`run`), with `requests` queued before it
    /// starts, and what it reports.
    struct QueuedWriter {
        writer: WriterThread,
        events: Receiver<WriterEvent>,
        stats: Arc<WriterStats>,
        /// Kept open: dropping it would tell the writer that nobody reads its events.
        _close: crossbeam_channel::Sender<()>,
    }

    fn queued_writer(
        log: Log,
        config: &WriterConfig,
        requests: Vec<WriterRequest>,
    ) -> QueuedWriter {
        let (requests_tx, requests_rx) = crossbeam_channel::bounded(requests.len().max(1));
        for request in requests {
            requests_tx.send(request).unwrap();
        }
        let channel = EventChannel::new(EVENT_CAPACITY).unwrap();
        let stats = Arc::new(WriterStats::default());
        let writer =
            WriterThread::new(log, config, requests_rx, channel.sink, Arc::clone(&stats)).unwrap();
        QueuedWriter {
            writer,
            events: channel.events,
            stats,
            _close: channel.close,
        }
    }

    /// A shutdown taken together with the last append writes it and stops: it does not
    /// allocate the next segment on its way out (the next open would only remove it). The
    /// writer loop runs on the test's thread, so both requests are queued before it starts.
    #[test]
    fn a_shutdown_taken_with_the_last_append_allocates_no_next_segment() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::log::LogConfig {
            segment_bytes: 64 << 10,
            preallocate: false,
            ..crate::log::LogConfig::default()
        };
        let log = Log::open(dir.path(), config).unwrap();
        // More than half the segment: the next one is due once it is written.
        let batches = vec![Batch::from_stored(crate::record::batch_for_tests(
            0,
            &[1_000],
            &[1u8; 40 << 10],
        ))
        .unwrap()];
        let requests = vec![
            WriterRequest::Append { seq: 1, batches },
            WriterRequest::Shutdown,
        ];
        let queued = queued_writer(log, &WriterConfig::default(), requests);
        let log = queued.writer.run().expect("a clean stop");
        assert_eq!(log.end_offset(), 1);
        assert!(log.spare_due(), "the next segment was due");
        assert!(!log.has_spare());
        assert!(!dir.path().join(crate::log::SPARE_FILE).exists());
        let events: Vec<WriterEvent> = queued.events.try_iter().collect();
        assert!(
            matches!(events.last(), Some(WriterEvent::Stopped { end_offset: 1 })),
            "{events:?}"
        );
    }

    /// Appends that arrive while a group is being written are staged during that write (the
    /// copy overlaps the IO), and each goes out as its own group once the one before is
    /// durable. A writer that holds one request at a time takes each of the appends queued
    /// here only after the previous one is staged, as if it had just arrived.
    #[test]
    fn appends_taken_while_a_group_is_written_are_staged_during_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), crate::log::LogConfig::default()).unwrap();
        let mut requests: Vec<WriterRequest> = (1..=3)
            .map(|seq| WriterRequest::Append {
                seq,
                batches: vec![Batch::from_stored(crate::record::batch_for_tests(
                    seq as i64 - 1,
                    &[1_000],
                    &[7u8; 100],
                ))
                .unwrap()],
            })
            .collect();
        requests.push(WriterRequest::Shutdown);
        let config = WriterConfig {
            request_capacity: 1,
            ..WriterConfig::default()
        };
        let queued = queued_writer(log, &config, requests);
        let (stats, events) = (queued.stats, queued.events);
        let log = queued.writer.run().expect("a clean stop");
        assert_eq!(log.end_offset(), 3);
        assert_eq!(stats.groups.load(Ordering::Relaxed), 3);
        assert_eq!(stats.batches_staged_during_write.load(Ordering::Relaxed), 2);
        let durable: Vec<(u64, Offset)> = events
            .try_iter()
            .filter_map(|event| match event {
                WriterEvent::Durable {
                    up_to_seq,
                    end_offset,
                } => Some((up_to_seq, end_offset)),
                _ => None,
            })
            .collect();
        assert_eq!(durable, [(1, 1), (2, 2), (3, 3)]);
    }

    #[test]
    fn a_group_is_slow_from_slow_group_on() {
        assert!(!is_slow_group(Duration::ZERO));
        assert!(!is_slow_group(SLOW_GROUP - Duration::from_micros(1)));
        assert!(is_slow_group(SLOW_GROUP));
        assert!(is_slow_group(Duration::from_secs(10)));
    }

    #[test]
    fn a_completion_is_done_failed_or_a_short_write() {
        let write = Op::new(opcode::Nop::new().build(), "write", 8192, 4096);
        let sync = Op::new(opcode::Nop::new().build(), "fdatasync", 8192, 0);
        assert!(check_completion(&write, 4096).is_ok());
        assert!(check_completion(&sync, 0).is_ok());
        let failed = |op: &Op, result| match check_completion(op, result) {
            Err(WriterError::Io {
                op,
                position,
                source,
            }) => (op, position, source.raw_os_error(), source.kind()),
            other => panic!("expected an IO error, got {other:?}"),
        };
        assert_eq!(failed(&sync, -libc::EIO).2, Some(libc::EIO));
        assert_eq!(failed(&write, -libc::ENOSPC).2, Some(libc::ENOSPC));
        let short = failed(&write, 4095);
        assert_eq!(
            (short.0, short.1, short.3),
            ("write", 8192, std::io::ErrorKind::WriteZero)
        );
        assert_eq!(failed(&write, 0).3, std::io::ErrorKind::WriteZero);
    }

    /// Completions that come over several waits: each wait asks only for those still to
    /// come, and the results land by user data, whatever order they complete in.
    #[test]
    fn completions_over_several_waits_are_asked_for_as_they_remain() {
        let arrivals: [&[(u64, i32)]; 3] = [&[(2, 0)], &[(0, 4096), (3, -libc::EIO)], &[(1, 8)]];
        let mut asked = Vec::new();
        let results = gather_completions(4, |want, take| {
            let arrived = arrivals[asked.len()];
            asked.push(want);
            for &(user_data, result) in arrived {
                take(user_data, result);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(asked, [4, 3, 1]);
        assert_eq!(results, [4096, 8, 0, -libc::EIO]);
        let failed =
            gather_completions(2, |_, _| Err(std::io::Error::from_raw_os_error(libc::EIO)));
        assert_eq!(failed.unwrap_err().raw_os_error(), Some(libc::EIO));
    }

    /// A write comes from a registered slot only when the slot holds all of it; anything else
    /// (past a slot's end, or memory of its own) is written with a plain Write.
    #[test]
    fn a_write_uses_the_registered_slot_that_holds_all_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), crate::log::LogConfig::default()).unwrap();
        let writer = queued_writer(log, &WriterConfig::default(), Vec::new()).writer;
        assert!(
            writer.info.registered_buffers,
            "registration needs root or `ulimit -l`"
        );
        let slots = writer.registered.clone();
        assert!(slots.len() >= 2, "staging buffers and the zero buffer");
        for (slot, &(base, len)) in slots.iter().enumerate() {
            let expected = Some(slot as u16);
            assert_eq!(writer.slot_of(base, len), expected);
            assert_eq!(
                writer.slot_of(base.wrapping_add(len - 4096), 4096),
                expected
            );
            assert_eq!(
                writer.slot_of(base.wrapping_add(4096), len - 4096),
                expected
            );
            assert_eq!(
                writer.slot_of(base, len + 1),
                None,
                "past the end of slot {slot}"
            );
            assert_ne!(writer.slot_of(base.wrapping_add(len), 4096), expected);
        }
        let own = vec![0u8; 4096];
        assert_eq!(writer.slot_of(own.as_ptr(), own.len()), None);
        let _ = writer.finish();
    }

    #[test]
    fn an_interrupted_enter_is_retried_and_any_other_error_is_returned() {
        let mut calls = 0;
        let result = retry_interrupted(|| {
            calls += 1;
            if calls < 3 {
                Err(std::io::Error::from_raw_os_error(libc::EINTR))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(result.unwrap(), 3);
        let mut calls = 0;
        let result: std::io::Result<()> = retry_interrupted(|| {
            calls += 1;
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        });
        assert_eq!(result.unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(calls, 1);
    }
}
