//! Produce load against one leader: C connections with up to D requests pipelined on each,
//! driven by T load threads (connection i by thread i mod T; a thread waits on all of its
//! sockets at once with ppoll, so a few threads can carry many connections). Closed loop (the default): a new request goes out as soon as one
//! is answered. Open loop (`rate`): each connection sends its share of the rate at scheduled
//! times, and latency counts from the intended send time, so a stall that fills the window is
//! charged to every request it delays (open_loop.rs). Latency ends at the response (with
//! acks=-1: the batch is committed, i.e. fsync'd on a majority). One hdrhistogram per interval.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::record::RecordBatchBuilder;
use hdrhistogram::Histogram;
use net::client::{ppoll_readable, BlockingClient};
use net::wire::kafka::ProduceResponse;
use serde::Serialize;

use crate::open_loop::{Schedule, Window};
use crate::proc_sample;

/// Produce request version the load uses.
const PRODUCE_VERSION: i16 = 9;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a load thread waits before looking at the stop flag again.
const STOP_CHECK: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub leader: SocketAddr,
    pub connections: usize,
    /// Requests in flight per connection.
    pub inflight: usize,
    /// Total records/s across connections (open loop); None: closed loop.
    pub rate: Option<f64>,
    pub record_bytes: usize,
    pub batch_records: usize,
    pub acks: i16,
    pub warmup: Duration,
    pub duration: Duration,
    /// Threads that drive the connections (1 ..= connections).
    pub load_threads: usize,
    /// Load thread i runs on `bench_cpus[i % len]`; empty: unpinned.
    pub bench_cpus: Vec<usize>,
    /// Connect over TLS (a cluster whose client listener is SSL).
    pub tls: Option<testkit::ClientTls>,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Self {
        Self {
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        }
    }
}

/// One interval (about a second) of the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// Seconds into the measured window at the interval's end.
    pub end_sec: f64,
    pub seconds: f64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub latency_us: Latency,
    /// Resident memory of the leader at the interval's end (when this run started it).
    pub leader_rss_kib: Option<u64>,
    /// Resident memory of every node this run started, in node order, at the interval's end.
    pub node_rss_kib: Vec<Option<u64>>,
}

/// One whole minute of the measured window: its latency over every request answered in it
/// (not a summary of its seconds), for checking that p99 stays flat over a long run.
#[derive(Debug, Clone, Serialize)]
pub struct Minute {
    /// 1 for the window's first minute.
    pub minute: u64,
    pub records_per_sec: f64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub records: u64,
    /// Requests answered (acks=0: sent).
    pub requests: u64,
    pub elapsed_sec: f64,
    pub records_per_sec: f64,
    /// Record value bytes only, 10^6 bytes per MB.
    pub mb_per_sec: f64,
    /// From the intended send time (open loop) or the send (closed loop) to the answer.
    pub latency_us: Latency,
    /// From the actual send to the answer: open loop only (equal to `latency_us` otherwise).
    pub service_latency_us: Option<Latency>,
    pub intervals: Vec<Interval>,
    /// Every whole minute of the window (none in a run shorter than a minute).
    pub minutes: Vec<Minute>,
    /// The measured window's latency, for the SVG.
    #[serde(skip)]
    pub histogram: Histogram<u64>,
}

/// Hooks into the measured window: the cluster benchmark samples the nodes' /proc counters.
pub trait WindowObserver {
    fn window_started(&mut self) {}
    /// At each interval's end, before it is reported; may fill in `leader_rss_kib`.
    fn interval(&mut self, _interval: &mut Interval) {}
    fn window_ended(&mut self) {}
}

/// What each worker adds to between two collections.
struct WorkerShare {
    latency: Histogram<u64>,
    service: Histogram<u64>,
    requests: u64,
}

struct Worker {
    share: Mutex<WorkerShare>,
    error: Mutex<Option<String>>,
}

impl Worker {
    fn record(&self, latency_ns: u64, service_ns: u64) {
        let mut share = self.share.lock().unwrap();
        share.latency.saturating_record((latency_ns / 1000).max(1));
        share.service.saturating_record((service_ns / 1000).max(1));
        share.requests += 1;
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 us .. 60 s at 3 significant digits.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// One batch of `records` records of `record_bytes` bytes each, built once and resent.
pub fn build_batch(record_bytes: usize, records: usize) -> Bytes {
    assert!(records > 0);
    let value = vec![b'x'; record_bytes];
    let mut builder = RecordBatchBuilder::new(0, 0);
    for _ in 0..records {
        builder.append(0, None, Some(&value), &[]);
    }
    builder.build().freeze()
}

/// What a load thread needs besides its worker.
struct ThreadPlan {
    index: usize,
    leader: SocketAddr,
    acks: i16,
    depth: usize,
    /// Its connections: each one's index among all and its send schedule.
    lanes: Vec<(usize, Schedule)>,
    cpu: Option<usize>,
    tls: Option<testkit::ClientTls>,
}

/// One connection of a load thread: its client, in-flight window and send schedule.
struct Lane {
    /// Among all the load's connections, for errors.
    index: usize,
    client: BlockingClient,
    window: Window,
    schedule: Schedule,
}

/// Runs the load: connects every connection, then warm-up, then the measured window, calling
/// the observer around it and once a second. Stops early (with the figures so far) when
/// `interrupted` is set; fails when a connection fails or a Produce is refused.
pub fn run(
    config: &LoadConfig,
    interrupted: &AtomicBool,
    observer: &mut impl WindowObserver,
    mut on_interval: impl FnMut(&Interval),
) -> Result<LoadReport, String> {
    assert!(config.connections > 0 && config.batch_records > 0 && config.inflight > 0);
    assert!((1..=config.connections).contains(&config.load_threads));
    let batch = build_batch(config.record_bytes, config.batch_records);
    let stop = Arc::new(AtomicBool::new(false));
    let all_connected = Arc::new(Barrier::new(config.load_threads + 1));
    let start = Arc::new(OnceLock::new());
    let workers: Vec<Arc<Worker>> = (0..config.load_threads)
        .map(|_| {
            Arc::new(Worker {
                share: Mutex::new(WorkerShare {
                    latency: new_histogram(),
                    service: new_histogram(),
                    requests: 0,
                }),
                error: Mutex::new(None),
            })
        })
        .collect();
    let threads: Vec<_> = workers
        .iter()
        .enumerate()
        .map(|(index, worker)| {
            let plan = plan_thread(config, index);
            let (worker, stop, batch) = (Arc::clone(worker), Arc::clone(&stop), batch.clone());
            let (all_connected, start) = (Arc::clone(&all_connected), Arc::clone(&start));
            std::thread::spawn(move || {
                let connected = connect(&plan);
                all_connected.wait();
                let start = *start.get_or_init(Instant::now);
                let thread = ProducerThread {
                    plan: &plan,
                    batch: &batch,
                    worker: &worker,
                    stop: &stop,
                    start,
                };
                let result = connected.and_then(|lanes| produce_loop(&thread, lanes));
                if let Err(error) = result {
                    *worker.error.lock().unwrap() = Some(error);
                }
            })
        })
        .collect();
    all_connected.wait();
    start.get_or_init(Instant::now);
    let result = check_errors(&workers)
        .and_then(|()| measure(config, &workers, interrupted, observer, &mut on_interval));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().map_err(|_| "a load thread panicked")?;
    }
    result
}

fn plan_thread(config: &LoadConfig, index: usize) -> ThreadPlan {
    let schedule = |connection: usize| match config.rate {
        Some(records_per_sec) => Schedule::share_of_rate(
            records_per_sec / config.batch_records as f64,
            config.connections,
            connection,
        ),
        None => Schedule::closed(),
    };
    ThreadPlan {
        index,
        leader: config.leader,
        acks: config.acks,
        depth: config.inflight,
        lanes: (index..config.connections)
            .step_by(config.load_threads)
            .map(|connection| (connection, schedule(connection)))
            .collect(),
        cpu: (!config.bench_cpus.is_empty())
            .then(|| config.bench_cpus[index % config.bench_cpus.len()]),
        tls: config.tls.clone(),
    }
}

fn connect(plan: &ThreadPlan) -> Result<Vec<Lane>, String> {
    if let Some(cpu) = plan.cpu {
        proc_sample::pin_current_thread(cpu)
            .map_err(|e| format!("pinning load thread {}: {e}", plan.index))?;
    }
    let mut lanes = Vec::with_capacity(plan.lanes.len());
    for (index, schedule) in &plan.lanes {
        let client = match &plan.tls {
            Some(tls) => tls.connect(plan.leader, CONNECT_TIMEOUT),
            None => {
                BlockingClient::connect(plan.leader, CONNECT_TIMEOUT).map_err(|e| e.to_string())
            }
        }
        .map_err(|e| format!("connection {index}: {e}"))?;
        lanes.push(Lane {
            index: *index,
            client,
            window: Window::new(plan.depth),
            schedule: schedule.clone(),
        });
    }
    Ok(lanes)
}

fn measure(
    config: &LoadConfig,
    workers: &[Arc<Worker>],
    interrupted: &AtomicBool,
    observer: &mut impl WindowObserver,
    on_interval: &mut impl FnMut(&Interval),
) -> Result<LoadReport, String> {
    let tick = Duration::from_millis(100);
    let warmup_end = Instant::now() + config.warmup;
    while Instant::now() < warmup_end && !interrupted.load(Ordering::Relaxed) {
        check_errors(workers)?;
        std::thread::sleep(tick.min(warmup_end.saturating_duration_since(Instant::now())));
    }
    collect(workers); // the warm-up's figures are dropped
    observer.window_started();
    let started = Instant::now();
    let end = started + config.duration;
    let mut total = new_histogram();
    let mut service = new_histogram();
    let mut requests = 0u64;
    let mut intervals = Vec::new();
    let mut minute = (new_histogram(), 0u64, started);
    let mut minutes = Vec::new();
    let mut interval_start = started;
    while Instant::now() < end {
        let next = (interval_start + Duration::from_secs(1)).min(end);
        std::thread::sleep(tick.min(next.saturating_duration_since(Instant::now())));
        check_errors(workers)?;
        // Interrupted: the time since the last interval becomes a last, shorter one, so the
        // records counted and the /proc samples cover the same window.
        let stopping = interrupted.load(Ordering::Relaxed);
        if Instant::now() < next && !stopping {
            continue;
        }
        let collected = collect(workers);
        let now = Instant::now();
        let seconds = now.duration_since(interval_start).as_secs_f64();
        interval_start = now;
        total.add(&collected.latency).expect("same bounds");
        service.add(&collected.service).expect("same bounds");
        requests += collected.requests;
        minute.0.add(&collected.latency).expect("same bounds");
        minute.1 += collected.requests;
        // A minute is whole at 60 s, or at the window's end when it ends one (the last
        // interval closes at the end, a few microseconds short of the minute's 60 s).
        let ends_window = now >= end && minute.2 + Duration::from_secs(59) <= now;
        if now.duration_since(minute.2) >= Duration::from_secs(60) || ends_window {
            let records = (minute.1 * config.batch_records as u64) as f64;
            minutes.push(Minute {
                minute: minutes.len() as u64 + 1,
                records_per_sec: records / now.duration_since(minute.2).as_secs_f64(),
                latency_us: Latency::of(&minute.0),
            });
            minute = (new_histogram(), 0, now);
        }
        let mut interval = interval_figures(config, &collected, seconds);
        interval.end_sec = now.duration_since(started).as_secs_f64();
        observer.interval(&mut interval);
        on_interval(&interval);
        intervals.push(interval);
        if stopping {
            break;
        }
    }
    observer.window_ended();
    let elapsed = interval_start.duration_since(started).as_secs_f64();
    let records = requests * config.batch_records as u64;
    let per_sec = |n: f64| if elapsed > 0.0 { n / elapsed } else { 0.0 };
    Ok(LoadReport {
        records,
        requests,
        elapsed_sec: elapsed,
        records_per_sec: per_sec(records as f64),
        mb_per_sec: per_sec(records as f64 * config.record_bytes as f64) / 1e6,
        latency_us: Latency::of(&total),
        service_latency_us: config.rate.map(|_| Latency::of(&service)),
        intervals,
        minutes,
        histogram: total,
    })
}

fn interval_figures(config: &LoadConfig, collected: &Collected, seconds: f64) -> Interval {
    let records = (collected.requests * config.batch_records as u64) as f64;
    Interval {
        end_sec: 0.0,
        seconds,
        records_per_sec: records / seconds,
        mb_per_sec: records * config.record_bytes as f64 / seconds / 1e6,
        latency_us: Latency::of(&collected.latency),
        leader_rss_kib: None,
        node_rss_kib: Vec::new(),
    }
}

fn check_errors(workers: &[Arc<Worker>]) -> Result<(), String> {
    for worker in workers {
        if let Some(error) = worker.error.lock().unwrap().as_ref() {
            return Err(format!("load connection failed: {error}"));
        }
    }
    Ok(())
}

struct Collected {
    latency: Histogram<u64>,
    service: Histogram<u64>,
    requests: u64,
}

/// Takes and resets every worker's share.
fn collect(workers: &[Arc<Worker>]) -> Collected {
    let mut collected = Collected {
        latency: new_histogram(),
        service: new_histogram(),
        requests: 0,
    };
    for worker in workers {
        let mut share = worker.share.lock().unwrap();
        collected.latency.add(&share.latency).expect("same bounds");
        collected.service.add(&share.service).expect("same bounds");
        collected.requests += share.requests;
        share.latency.reset();
        share.service.reset();
        share.requests = 0;
    }
    collected
}

/// Nanoseconds since the load's start.
fn nanos_since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// What a producing thread works with besides its connection.
#[derive(Clone, Copy)]
struct ProducerThread<'a> {
    plan: &'a ThreadPlan,
    /// The batch every request carries.
    batch: &'a Bytes,
    worker: &'a Worker,
    stop: &'a AtomicBool,
    /// When the load started: the schedule's times count from it.
    start: Instant,
}

fn produce_loop(thread: &ProducerThread, mut lanes: Vec<Lane>) -> Result<(), String> {
    if thread.plan.acks == 0 {
        return produce_without_answers(thread, &mut lanes);
    }
    let mut polls: Vec<(libc::pollfd, usize)> = Vec::with_capacity(lanes.len());
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(lanes.len());
    while !thread.stop.load(Ordering::Relaxed) {
        let mut wait = STOP_CHECK;
        for lane in &mut lanes {
            if let Some(next_due) = send_due(thread, lane)? {
                let now = nanos_since(thread.start);
                wait = wait.min(Duration::from_nanos(next_due.saturating_sub(now)));
            }
        }
        // Answers already read with an earlier one are taken before waiting on any socket.
        let mut answered = false;
        for lane in &mut lanes {
            while lane.client.holds_frame() {
                answer(thread, lane)?;
                answered = true;
            }
        }
        if answered {
            continue;
        }
        polls.clear();
        polls.extend(
            lanes
                .iter()
                .enumerate()
                .filter(|(_, l)| !l.window.is_empty())
                .map(|(at, lane)| {
                    let fd = libc::pollfd {
                        fd: lane.client.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    (fd, at)
                }),
        );
        match polls.as_slice() {
            [] => {
                std::thread::sleep(wait);
                continue;
            }
            // A thread's only connection with a full window can only wait for its answer: read
            // at once (the node answers within the socket's read timeout or the run fails),
            // saving a ppoll per answer.
            [(_, at)] if lanes.len() == 1 && !lanes[*at].window.has_room() => {
                answer(thread, &mut lanes[*at])?;
                continue;
            }
            _ => {}
        }
        fds.clear();
        fds.extend(polls.iter().map(|(fd, _)| *fd));
        if !ppoll_readable(&mut fds, wait)
            .map_err(|e| format!("{}: ppoll: {e}", thread.plan.leader))?
        {
            continue;
        }
        // A readable socket may hold only part of an answer (or of a TLS record): its read then
        // waits for the rest, which the node sends whole, holding this thread's other
        // connections for that long.
        for (fd, (_, at)) in fds.iter().zip(&polls) {
            if fd.revents != 0 {
                answer(thread, &mut lanes[*at])?;
            }
        }
    }
    Ok(())
}

/// Sends every request of `lane` that is due while its window has room; returns when its next
/// one falls due if it has room then (open loop), None otherwise.
fn send_due(thread: &ProducerThread, lane: &mut Lane) -> Result<Option<u64>, String> {
    while lane.window.has_room() {
        let now = nanos_since(thread.start);
        let Some(intended) = lane.schedule.due(now) else {
            return Ok(lane.schedule.next_due());
        };
        let correlation_id = lane
            .client
            .send_produce(PRODUCE_VERSION, thread.plan.acks, thread.batch.clone())
            .map_err(|e| format!("connection {}: {e}", lane.index))?;
        lane.window.sent(correlation_id, intended, now);
        lane.schedule.advance();
    }
    Ok(None)
}

/// Reads one answer on `lane` (from the bytes held or the socket) and records it.
fn answer(thread: &ProducerThread, lane: &mut Lane) -> Result<(), String> {
    let leader = thread.plan.leader;
    let (correlation_id, response) = lane
        .client
        .recv_produce(PRODUCE_VERSION)
        .map_err(|e| format!("connection {}: {e}", lane.index))?;
    let answered = lane
        .window
        .answered(correlation_id, nanos_since(thread.start))
        .map_err(|e| format!("{leader}: answer to unknown correlation id {}", e.0))?;
    check_accepted(leader, &response)?;
    thread
        .worker
        .record(answered.latency_ns, answered.service_ns);
    Ok(())
}

/// acks=0: nothing is answered, so every send counts and its latency is the send itself (from
/// its intended time in open loop).
fn produce_without_answers(thread: &ProducerThread, lanes: &mut [Lane]) -> Result<(), String> {
    let (batch, worker, stop, start) = (thread.batch, thread.worker, thread.stop, thread.start);
    while !stop.load(Ordering::Relaxed) {
        let mut wait = STOP_CHECK;
        for lane in lanes.iter_mut() {
            let now = nanos_since(start);
            match lane.schedule.due(now) {
                Some(intended) => {
                    lane.client
                        .send_produce(PRODUCE_VERSION, 0, batch.clone())
                        .map_err(|e| format!("connection {}: {e}", lane.index))?;
                    let done = nanos_since(start);
                    lane.schedule.advance();
                    worker.record(done - intended, done - now);
                    wait = Duration::ZERO;
                }
                None => {
                    let due = lane.schedule.next_due().expect("open loop when not due");
                    wait = wait.min(Duration::from_nanos(due - now));
                }
            }
        }
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}

fn check_accepted(leader: SocketAddr, response: &ProduceResponse) -> Result<(), String> {
    let error = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.error)
        .ok_or_else(|| format!("{leader}: Produce response without a partition"))?;
    if !error.is_none() {
        return Err(format!("produce refused by {leader}: {error}"));
    }
    Ok(())
}
