//! The `log` subcommand: N closed-loop appenders (each waits for its batch to be durable before
//! building the next) feeding one GroupCommitWriter, as the raft thread would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use clap::{Args, ValueEnum};
use crossbeam_channel::{Receiver, Sender};
use engine::io::{
    GroupCommitWriter, SyncMode, WriterConfig, WriterEvent, WriterRequest, WriterStats,
};
use engine::log::{Log, LogConfig, LogError, RetentionPolicy};
use engine::record::{stamp, RecordBatchBuilder};
use hdrhistogram::Histogram;
use serde::Serialize;

#[derive(Args, Debug, Clone)]
pub struct LogArgs {
    /// Directory on the disk to measure; a fresh subdirectory is created in it and removed after.
    #[arg(long)]
    dir: PathBuf,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// Records per batch.
    #[arg(long, default_value_t = 1)]
    batch_records: u32,
    /// Closed-loop writers: each waits for its batch to be durable before sending the next.
    #[arg(long, default_value_t = 1)]
    writers: usize,
    /// Threads the writers are spread over (default: min(writers, 4)); many writers per thread
    /// keep the load generator's own context switches from being what is measured.
    #[arg(long)]
    threads: Option<usize>,
    /// Seconds measured (after a warm-up of a fifth of this, at most 2 s).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Segment size (log.segment.bytes).
    #[arg(long, default_value_t = 1 << 30)]
    segment_bytes: u64,
    /// Pin the log writer thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// How each group is made durable.
    #[arg(long, value_enum, default_value_t = SyncArg::Fdatasync)]
    sync: SyncArg,
    /// Zero-fill this many bytes ahead of the write head (0 = off).
    #[arg(long, default_value_t = LogConfig::default().zero_ahead_bytes)]
    zero_ahead_bytes: u64,
    /// Only groups up to this many bytes carry a zero-fill (0: none does).
    #[arg(long, default_value_t = LogConfig::default().zero_ahead_max_group_bytes)]
    zero_ahead_max_group_bytes: usize,
    /// The writer does not zero-fill while idle (with --zero-ahead-max-group-bytes 65536: the
    /// zero-fill of the builds before idle zero-fill).
    #[arg(long)]
    no_idle_zero_fill: bool,
    /// Do not fallocate segments.
    #[arg(long)]
    no_preallocate: bool,
    /// Run retention (retention.bytes) every 100 ms up to the durable end: sealed segments
    /// leave the front once the log holds more than this (docs/storage.md, "Recycling").
    #[arg(long)]
    retention_bytes: Option<u64>,
    /// With --retention-bytes: delete retired segments instead of recycling them.
    #[arg(long)]
    no_recycle: bool,
    /// Capacity of each staging buffer: the largest group (above 3 MiB the buffers no longer fit
    /// a memlock limit of 8 MiB and are written unregistered).
    #[arg(long, default_value_t = LogConfig::default().max_group_bytes)]
    max_group_bytes: usize,
    /// Groups larger than this go out as parallel writes of this size.
    #[arg(long, default_value_t = WriterConfig::default().split_write_bytes)]
    split_write_bytes: usize,
    /// Do not register buffers with the ring.
    #[arg(long)]
    no_register_buffers: bool,
    /// Write the results as one JSON object to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum SyncArg {
    /// O_DIRECT write + linked fdatasync.
    Fdatasync,
    /// O_DIRECT write with RWF_DSYNC.
    Dsync,
}

#[derive(Serialize)]
struct Report {
    records_per_sec: f64,
    mb_per_sec: f64,
    device_mb_per_sec: f64,
    fsyncs_per_sec: f64,
    mean_group_bytes: f64,
    mean_group_batches: f64,
    zero_fills_per_sec: f64,
    latency_us: Latency,
    durability: String,
    record_bytes: usize,
    batch_records: u32,
    writers: usize,
    threads: usize,
    duration_secs: f64,
    segment_bytes: u64,
    zero_ahead_bytes: u64,
    zero_ahead_max_group_bytes: usize,
    idle_zero_fill: bool,
    preallocate: bool,
    retention_bytes: Option<u64>,
    recycle_segments: bool,
    registered_buffers: bool,
    single_issuer: bool,
    defer_taskrun: bool,
    pinned_cpu: Option<usize>,
    loadavg: String,
}

#[derive(Serialize)]
struct Latency {
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
    mean: f64,
}

/// Assigns offsets and seqs in send order (the raft thread's job in the node) and remembers who
/// waits for which seq.
struct Sequencer {
    next_offset: i64,
    next_seq: u64,
    /// seq -> (thread, writer within the thread).
    waiters: BTreeMap<u64, (usize, usize)>,
    requests: Sender<WriterRequest>,
}

struct Shared {
    sequencer: Mutex<Sequencer>,
    /// Per thread: the writers whose batch became durable.
    wakers: Vec<Sender<Vec<usize>>>,
    measuring: AtomicBool,
    stop: AtomicBool,
    durable_end: AtomicI64,
}

pub fn run(args: LogArgs) -> Result<(), String> {
    assert!(args.writers > 0 && args.batch_records > 0);
    let run_dir = RunDir::create(&args.dir)?;
    let log_config = LogConfig {
        segment_bytes: args.segment_bytes,
        preallocate: !args.no_preallocate,
        zero_ahead_bytes: args.zero_ahead_bytes,
        zero_ahead_max_group_bytes: args.zero_ahead_max_group_bytes,
        zero_fill_when_idle: !args.no_idle_zero_fill,
        max_group_bytes: args.max_group_bytes,
        recycle_segments: !args.no_recycle,
        ..LogConfig::default()
    };
    let writer_config = WriterConfig {
        cpu: args.cpu,
        sync_mode: match args.sync {
            SyncArg::Fdatasync => SyncMode::LinkedFdatasync,
            SyncArg::Dsync => SyncMode::RwfDsync,
        },
        register_buffers: !args.no_register_buffers,
        split_write_bytes: args.split_write_bytes,
        ..WriterConfig::default()
    };
    let log = Log::open(&run_dir.path, log_config).map_err(|e| e.to_string())?;
    let writer = GroupCommitWriter::start(log, writer_config.clone()).map_err(|e| e.to_string())?;
    let report = drive(&args, &writer, writer_config.sync_mode);
    drop(writer.shutdown());
    drop(run_dir);
    let report = report?;
    // The JSON file is written even when stdout is closed (docs/operations.md).
    let printed = print_report(&args, &report);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    printed.map_err(|e| crate::out::describe(&e))
}

fn drive(
    args: &LogArgs,
    writer: &GroupCommitWriter,
    sync_mode: SyncMode,
) -> Result<Report, String> {
    let threads = args
        .threads
        .unwrap_or(args.writers.min(4))
        .clamp(1, args.writers);
    let mut wakers = Vec::new();
    let mut woken = Vec::new();
    for _ in 0..threads {
        let (tx, rx) = crossbeam_channel::unbounded();
        wakers.push(tx);
        woken.push(rx);
    }
    let shared = Arc::new(Shared {
        sequencer: Mutex::new(Sequencer {
            next_offset: 0,
            next_seq: 1,
            waiters: BTreeMap::new(),
            requests: writer.sender(),
        }),
        wakers,
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        durable_end: AtomicI64::new(0),
    });
    // With one thread, it reads the writer's events itself, as the raft thread would; with more,
    // a dispatcher thread wakes each thread's writers.
    let direct = threads == 1;
    let dispatcher = (!direct).then(|| {
        let shared = Arc::clone(&shared);
        let events = writer.events().clone();
        std::thread::spawn(move || dispatch(&shared, &events))
    });
    let appenders: Vec<_> = woken
        .into_iter()
        .enumerate()
        .map(|(thread, woken)| {
            let shared = Arc::clone(&shared);
            // Writers are dealt round-robin: thread t runs writers t, t + threads, ...
            let count = (args.writers + threads - 1 - thread) / threads;
            let (record_bytes, batch_records) = (args.record_bytes, args.batch_records);
            let source = if direct {
                Wakeups::Direct(writer.events().clone())
            } else {
                Wakeups::Dispatcher(woken)
            };
            std::thread::spawn(move || {
                append_loop(thread, count, &shared, &source, record_bytes, batch_records)
            })
        })
        .collect();
    let retention = args
        .retention_bytes
        .map(|bytes| start_retention(bytes, writer.sender(), Arc::clone(&shared)));
    let warmup = Duration::from_secs_f64((args.duration / 5.0).min(2.0));
    std::thread::sleep(warmup);
    let stats = writer.stats();
    let before = Counters::read(stats, &shared);
    shared.measuring.store(true, Ordering::SeqCst);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(args.duration));
    shared.measuring.store(false, Ordering::SeqCst);
    let elapsed = started.elapsed().as_secs_f64();
    let after = Counters::read(stats, &shared);
    shared.stop.store(true, Ordering::SeqCst);
    let mut histogram = new_histogram();
    for appender in appenders {
        let h = appender.join().map_err(|_| "an appender panicked")??;
        histogram.add(h).map_err(|e| e.to_string())?;
    }
    // The dispatcher ends when the writer stops (after shutdown); detach it.
    drop(dispatcher);
    if let Some(retention) = retention {
        retention
            .join()
            .map_err(|_| "the retention thread panicked")?;
    }
    let groups = (after.groups - before.groups).max(1) as f64;
    let info = writer.ring_info();
    Ok(Report {
        records_per_sec: (after.durable_end - before.durable_end) as f64 / elapsed,
        mb_per_sec: (after.batch_bytes - before.batch_bytes) as f64 / elapsed / 1e6,
        device_mb_per_sec: (after.device_bytes - before.device_bytes) as f64 / elapsed / 1e6,
        fsyncs_per_sec: (after.groups - before.groups) as f64 / elapsed,
        mean_group_bytes: (after.batch_bytes - before.batch_bytes) as f64 / groups,
        mean_group_batches: (after.batches - before.batches) as f64 / groups,
        zero_fills_per_sec: (after.zero_fills - before.zero_fills) as f64 / elapsed,
        latency_us: Latency {
            p50: histogram.value_at_quantile(0.5),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
            mean: histogram.mean(),
        },
        durability: sync_mode.to_string(),
        record_bytes: args.record_bytes,
        batch_records: args.batch_records,
        writers: args.writers,
        threads,
        duration_secs: elapsed,
        segment_bytes: args.segment_bytes,
        zero_ahead_bytes: args.zero_ahead_bytes,
        zero_ahead_max_group_bytes: args.zero_ahead_max_group_bytes,
        idle_zero_fill: !args.no_idle_zero_fill,
        preallocate: !args.no_preallocate,
        retention_bytes: args.retention_bytes,
        recycle_segments: !args.no_recycle,
        registered_buffers: info.registered_buffers,
        single_issuer: info.single_issuer,
        defer_taskrun: info.defer_taskrun,
        pinned_cpu: info.pinned_cpu,
        loadavg: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string(),
    })
}

struct Counters {
    groups: u64,
    batch_bytes: u64,
    device_bytes: u64,
    batches: u64,
    zero_fills: u64,
    durable_end: i64,
}

impl Counters {
    fn read(stats: &WriterStats, shared: &Shared) -> Self {
        Counters {
            groups: stats.groups.load(Ordering::Relaxed),
            batch_bytes: stats.batch_bytes.load(Ordering::Relaxed),
            device_bytes: stats.device_bytes.load(Ordering::Relaxed),
            batches: stats.batches.load(Ordering::Relaxed),
            zero_fills: stats.zero_fills.load(Ordering::Relaxed),
            durable_end: shared.durable_end.load(Ordering::Relaxed),
        }
    }
}

impl Shared {
    /// Records the new durable end and takes the waiters (thread, writer) whose seqs are now
    /// durable, in seq order.
    fn take_durable(&self, up_to_seq: u64, end_offset: i64) -> BTreeMap<u64, (usize, usize)> {
        self.durable_end.store(end_offset, Ordering::Relaxed);
        let mut sequencer = self.sequencer.lock().expect("sequencer lock");
        let later = sequencer.waiters.split_off(&(up_to_seq + 1));
        std::mem::replace(&mut sequencer.waiters, later)
    }
}

/// Asks the writer to run retention every 100 ms up to the durable end, until the run stops.
fn start_retention(
    bytes: u64,
    requests: Sender<WriterRequest>,
    shared: Arc<Shared>,
) -> std::thread::JoinHandle<()> {
    let policy = RetentionPolicy {
        bytes: Some(bytes),
        ms: None,
    };
    std::thread::spawn(move || {
        while !shared.stop.load(Ordering::SeqCst) {
            let limit = shared.durable_end.load(Ordering::Relaxed);
            if requests
                .send(WriterRequest::Retain {
                    policy,
                    limit,
                    unpinned: limit,
                })
                .is_err()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds")
}

/// The log writer's events the bench acts on; the others (reads, lookups, retention, space
/// coming back) answer requests it never makes or concern a node.
enum Progress {
    /// The writers whose batches this event made durable, taken from the waiting ones
    /// ([`Shared::take_durable`]).
    Durable(BTreeMap<u64, (usize, usize)>),
    Stopped,
    /// A run on a full disk measures nothing: it stops, saying why.
    StorageFull(LogError),
}

/// `event` as the bench sees it (None: nothing to do); a fatal writer error exits here.
fn progress(shared: &Shared, event: WriterEvent) -> Option<Progress> {
    match event {
        WriterEvent::Durable {
            up_to_seq,
            end_offset,
        } => Some(Progress::Durable(
            shared.take_durable(up_to_seq, end_offset),
        )),
        WriterEvent::Fatal(error) => engine::io::exit_on_fatal(&error),
        WriterEvent::Stopped { .. } => Some(Progress::Stopped),
        WriterEvent::StorageFull { error } => Some(Progress::StorageFull(error)),
        WriterEvent::ReadDone { .. }
        | WriterEvent::LookupDone { .. }
        | WriterEvent::StorageAvailable { .. }
        | WriterEvent::Retained { .. }
        | WriterEvent::LogStartMoved { .. }
        | WriterEvent::RetentionHeldBack { .. } => None,
    }
}

/// Wakes appenders as their seqs become durable.
fn dispatch(shared: &Shared, events: &Receiver<WriterEvent>) {
    while let Ok(event) = events.recv() {
        match progress(shared, event) {
            Some(Progress::Durable(done)) => {
                let mut per_thread = vec![Vec::new(); shared.wakers.len()];
                for (thread, writer) in done.into_values() {
                    per_thread[thread].push(writer);
                }
                for (thread, writers) in per_thread.into_iter().enumerate() {
                    if !writers.is_empty() {
                        let _ = shared.wakers[thread].send(writers);
                    }
                }
            }
            Some(Progress::Stopped) => return,
            Some(Progress::StorageFull(error)) => {
                engine::fail_stop::fail_stop(1, format_args!("the bench's disk is full: {error}"))
            }
            None => {}
        }
    }
}

/// Where an appender thread learns that its writers' batches are durable.
enum Wakeups {
    /// From the dispatcher thread: the writers (indexes in this thread) to wake.
    Dispatcher(Receiver<Vec<usize>>),
    /// Straight from the log writer's events (the only appender thread).
    Direct(Receiver<WriterEvent>),
}

impl Wakeups {
    fn next(&self, shared: &Shared) -> Result<Vec<usize>, String> {
        match self {
            Wakeups::Dispatcher(woken) => {
                let mut ready = woken.recv().map_err(|_| "the dispatcher stopped")?;
                while let Ok(more) = woken.try_recv() {
                    ready.extend(more);
                }
                Ok(ready)
            }
            Wakeups::Direct(events) => loop {
                let event = events.recv().map_err(|_| "the log writer stopped")?;
                match progress(shared, event) {
                    Some(Progress::Durable(done)) if !done.is_empty() => {
                        return Ok(done.into_values().map(|(_, writer)| writer).collect());
                    }
                    Some(Progress::Durable(_)) => {}
                    Some(Progress::Stopped) => return Err("the log writer stopped".into()),
                    Some(Progress::StorageFull(error)) => {
                        return Err(format!("the bench's disk is full: {error}"))
                    }
                    None => {}
                }
            },
        }
    }
}

/// Runs `count` closed-loop writers on this thread: each sends one batch, and sends the next
/// when its wake-ups report the previous one durable.
fn append_loop(
    thread: usize,
    count: usize,
    shared: &Shared,
    wakeups: &Wakeups,
    record_bytes: usize,
    batch_records: u32,
) -> Result<Histogram<u64>, String> {
    let mut histogram = new_histogram();
    let value: Vec<u8> = (0..record_bytes)
        .map(|i| (i * 31 + thread * 7) as u8)
        .collect();
    let mut sent_at = vec![Instant::now(); count];
    let mut ready: Vec<usize> = (0..count).collect();
    while !shared.stop.load(Ordering::Relaxed) {
        let batches: Vec<BytesMut> = ready
            .iter()
            .map(|_| build_batch(&value, batch_records))
            .collect();
        {
            let mut sequencer = shared.sequencer.lock().expect("sequencer lock");
            for (&writer, mut batch) in ready.iter().zip(batches) {
                let (offset, seq) = (sequencer.next_offset, sequencer.next_seq);
                stamp(&mut batch, offset, 1);
                sequencer.next_offset += i64::from(batch_records);
                sequencer.next_seq += 1;
                sequencer.waiters.insert(seq, (thread, writer));
                sent_at[writer] = Instant::now();
                let request = WriterRequest::Append {
                    seq,
                    batches: vec![engine::record::Batch {
                        base_offset: offset,
                        epoch: 1,
                        record_count: batch_records,
                        is_control: false,
                        bytes: batch.freeze(),
                    }],
                };
                sequencer
                    .requests
                    .send(request)
                    .map_err(|_| "the log writer stopped")?;
            }
        }
        ready = wakeups.next(shared)?;
        if shared.measuring.load(Ordering::Relaxed) {
            for &writer in &ready {
                let micros = sent_at[writer].elapsed().as_micros().max(1) as u64;
                histogram.saturating_record(micros);
            }
        }
    }
    Ok(histogram)
}

fn build_batch(value: &[u8], records: u32) -> BytesMut {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut builder = RecordBatchBuilder::new(0, 1);
    for _ in 0..records {
        builder.append(now, None, Some(value), &[]);
    }
    builder.build()
}

fn print_report(args: &LogArgs, r: &Report) -> std::io::Result<()> {
    outln!(
        "ringraft-bench log: {} B records x {} per batch, {} closed-loop writers on {} threads, {:.1} s measured",
        r.record_bytes, r.batch_records, r.writers, r.threads, r.duration_secs
    )?;
    outln!(
        "  durability: {}; segment {} B, preallocate {}, zero-ahead {} B for groups <= {} B, \
         idle {}; ring: single_issuer {}, defer_taskrun {}, registered buffers {}, writer cpu {:?}",
        r.durability,
        r.segment_bytes,
        r.preallocate,
        r.zero_ahead_bytes,
        r.zero_ahead_max_group_bytes,
        r.idle_zero_fill,
        r.single_issuer,
        r.defer_taskrun,
        r.registered_buffers,
        r.pinned_cpu
    )?;
    outln!(
        "  records/s {:.0}  MB/s {:.1} (device {:.1})  fdatasyncs/s {:.0}  mean group {:.0} B / {:.1} batches  zero-fills/s {:.1}",
        r.records_per_sec,
        r.mb_per_sec,
        r.device_mb_per_sec,
        r.fsyncs_per_sec,
        r.mean_group_bytes,
        r.mean_group_batches,
        r.zero_fills_per_sec
    )?;
    outln!(
        "  append-to-durable latency (us): p50 {}  p99 {}  p99.9 {}  max {}  mean {:.1}",
        r.latency_us.p50,
        r.latency_us.p99,
        r.latency_us.p999,
        r.latency_us.max,
        r.latency_us.mean
    )?;
    if let Some(bytes) = r.retention_bytes {
        outln!(
            "  retention.bytes {bytes}: retired segments {}",
            if r.recycle_segments {
                "recycled"
            } else {
                "deleted"
            }
        )?;
    }
    outln!("  loadavg: {}  dir: {}", r.loadavg, args.dir.display())?;
    Ok(())
}

/// The directory the run writes in: created fresh inside `--dir`, removed at the end. `--dir`
/// itself is removed only if this run created it and it is empty again.
struct RunDir {
    path: PathBuf,
    created_parent: Option<PathBuf>,
}

impl RunDir {
    fn create(parent: &Path) -> Result<Self, String> {
        let created_parent = if parent.exists() {
            None
        } else {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
            Some(parent.to_path_buf())
        };
        let name = format!("ringraft-bench-log-{}", std::process::id());
        let path = parent.join(name);
        std::fs::create_dir(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(RunDir {
            path,
            created_parent,
        })
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!(
                "ringraft-bench: could not remove {}: {e}",
                self.path.display()
            );
        }
        if let Some(parent) = &self.created_parent {
            let _ = std::fs::remove_dir(parent);
        }
    }
}
