//! Closed-loop Produce load against one leader: C threads, each with one blocking connection and
//! one request in flight. Latency is send-to-response per request (with acks=-1: until the
//! batch is committed, i.e. fsync'd on a majority). One hdrhistogram per interval.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::record::RecordBatchBuilder;
use hdrhistogram::Histogram;
use net::node::BlockingClient;
use serde::Serialize;

/// Produce request version the load uses.
const PRODUCE_VERSION: i16 = 9;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub leader: SocketAddr,
    pub connections: usize,
    pub record_bytes: usize,
    pub batch_records: usize,
    pub acks: i16,
    pub warmup: Duration,
    pub duration: Duration,
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
    fn of(h: &Histogram<u64>) -> Self {
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
    pub seconds: f64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub records: u64,
    pub requests: u64,
    pub elapsed_sec: f64,
    pub records_per_sec: f64,
    /// Record value bytes only, 10^6 bytes per MB.
    pub mb_per_sec: f64,
    pub latency_us: Latency,
    pub intervals: Vec<Interval>,
}

/// What each worker adds to between two collections.
struct WorkerShare {
    histogram: Histogram<u64>,
    requests: u64,
}

struct Worker {
    share: Mutex<WorkerShare>,
    error: Mutex<Option<String>>,
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

/// Runs the load: warm-up, then the measured window, calling `on_interval` once a second.
/// Stops early (with the figures so far) when `interrupted` is set; fails when a connection
/// fails or a Produce is refused.
pub fn run(
    config: &LoadConfig,
    interrupted: &AtomicBool,
    mut on_interval: impl FnMut(&Interval),
) -> Result<LoadReport, String> {
    assert!(config.connections > 0 && config.batch_records > 0);
    let batch = build_batch(config.record_bytes, config.batch_records);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<Arc<Worker>> = (0..config.connections)
        .map(|_| {
            Arc::new(Worker {
                share: Mutex::new(WorkerShare {
                    histogram: new_histogram(),
                    requests: 0,
                }),
                error: Mutex::new(None),
            })
        })
        .collect();
    let threads: Vec<_> = workers
        .iter()
        .map(|worker| {
            let (worker, stop, batch) = (Arc::clone(worker), Arc::clone(&stop), batch.clone());
            let (leader, acks) = (config.leader, config.acks);
            std::thread::spawn(move || {
                if let Err(error) = produce_loop(leader, acks, &batch, &worker, &stop) {
                    *worker.error.lock().unwrap() = Some(error);
                }
            })
        })
        .collect();
    let result = measure(config, &workers, interrupted, &mut on_interval);
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().map_err(|_| "a load thread panicked")?;
    }
    result
}

fn measure(
    config: &LoadConfig,
    workers: &[Arc<Worker>],
    interrupted: &AtomicBool,
    on_interval: &mut impl FnMut(&Interval),
) -> Result<LoadReport, String> {
    let tick = Duration::from_millis(100);
    let warmup_end = Instant::now() + config.warmup;
    while Instant::now() < warmup_end && !interrupted.load(Ordering::Relaxed) {
        check_errors(workers)?;
        std::thread::sleep(tick);
    }
    collect(workers); // the warm-up's figures are dropped
    let started = Instant::now();
    let end = started + config.duration;
    let mut total = new_histogram();
    let mut requests = 0u64;
    let mut intervals = Vec::new();
    let mut interval_start = started;
    while !interrupted.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let next = (interval_start + Duration::from_secs(1)).min(end);
        std::thread::sleep(tick.min(next.saturating_duration_since(now)));
        check_errors(workers)?;
        if Instant::now() < next {
            continue;
        }
        let (histogram, count) = collect(workers);
        let now = Instant::now();
        let seconds = now.duration_since(interval_start).as_secs_f64();
        interval_start = now;
        total.add(&histogram).expect("same bounds");
        requests += count;
        let interval = interval_figures(config, &histogram, count, seconds);
        on_interval(&interval);
        intervals.push(interval);
    }
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
        intervals,
    })
}

fn interval_figures(
    config: &LoadConfig,
    histogram: &Histogram<u64>,
    requests: u64,
    seconds: f64,
) -> Interval {
    let records = (requests * config.batch_records as u64) as f64;
    Interval {
        seconds,
        records_per_sec: records / seconds,
        mb_per_sec: records * config.record_bytes as f64 / seconds / 1e6,
        latency_us: Latency::of(histogram),
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

/// Takes and resets every worker's share.
fn collect(workers: &[Arc<Worker>]) -> (Histogram<u64>, u64) {
    let mut histogram = new_histogram();
    let mut requests = 0;
    for worker in workers {
        let mut share = worker.share.lock().unwrap();
        histogram.add(&share.histogram).expect("same bounds");
        requests += share.requests;
        share.histogram.reset();
        share.requests = 0;
    }
    (histogram, requests)
}

fn produce_loop(
    leader: SocketAddr,
    acks: i16,
    batch: &Bytes,
    worker: &Worker,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut client = BlockingClient::connect(leader, CONNECT_TIMEOUT).map_err(|e| e.to_string())?;
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let response = client
            .produce(PRODUCE_VERSION, acks, batch.clone())
            .map_err(|e| e.to_string())?;
        if let Some(response) = response {
            let error = response
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| p.error)
                .ok_or_else(|| format!("{leader}: Produce response without a partition"))?;
            if !error.is_none() {
                return Err(format!("produce refused by {leader}: {error}"));
            }
        }
        let micros = (sent.elapsed().as_micros() as u64).max(1);
        let mut share = worker.share.lock().unwrap();
        share.histogram.saturating_record(micros);
        share.requests += 1;
    }
    Ok(())
}
