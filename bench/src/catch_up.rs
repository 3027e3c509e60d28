//! The catch-up scenario of the cluster benchmark: fill the log first (`--prefill-mb`), then
//! start an observer with an empty log (`--catch-up-observer`) that replicates it from offset 0
//! while the measured load runs. The observer's fetches miss the leader's in-memory tail, so the
//! leader serves them with log reads: the benchmark shows what those reads cost the commits of
//! new appends (docs/benchmarks.md, "Commit latency while a replica catches up").

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use net::client::BlockingClient;
use serde::Serialize;
use testkit::ClientTls;

use crate::produce_load::{self, LoadConfig, WindowObserver};

/// The prefill's batches: large, so the log grows fast (256 records of `--record-bytes` each).
const PREFILL_BATCH_RECORDS: usize = 256;
const PREFILL_CONNECTIONS: usize = 8;
/// The prefill runs in rounds of this length until it has committed enough.
const PREFILL_ROUND: Duration = Duration::from_secs(1);

/// What the scenario did, for the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CatchUpReport {
    /// Record value bytes committed before the warm-up (10^6 B per MB), and how long it took.
    pub prefill_mb: f64,
    pub prefill_sec: f64,
    /// The observer started with an empty log after the prefill, if any.
    pub observer_id: Option<usize>,
    /// The observer's log end offset as the leader saw it (DescribeQuorum) at the measured
    /// window's start and end, and the leader's high watermark at the same moments.
    pub observer_offset_start: Option<i64>,
    pub observer_offset_end: Option<i64>,
    pub high_watermark_start: Option<i64>,
    pub high_watermark_end: Option<i64>,
    /// Still behind the high watermark at the window's end: it caught up during none of the
    /// window, so every one of its fetches in the window was a log read on the leader.
    pub observer_behind_at_end: Option<bool>,
}

struct Quiet;
impl WindowObserver for Quiet {}

/// Commits at least `mb` MB of record values at `leader` (acks=-1, closed loop); returns the MB
/// committed and the seconds taken.
pub fn prefill(
    leader: SocketAddr,
    record_bytes: usize,
    mb: f64,
    interrupted: &AtomicBool,
    tls: Option<testkit::ClientTls>,
) -> Result<(f64, f64), String> {
    let config = LoadConfig {
        leader,
        connections: PREFILL_CONNECTIONS,
        inflight: 1,
        load_threads: PREFILL_CONNECTIONS,
        rate: None,
        record_bytes,
        batch_records: PREFILL_BATCH_RECORDS,
        acks: -1,
        warmup: Duration::ZERO,
        duration: PREFILL_ROUND,
        bench_cpus: Vec::new(),
        tls,
    };
    let started = Instant::now();
    let mut done = 0.0;
    while done < mb && !interrupted.load(std::sync::atomic::Ordering::Relaxed) {
        let round = produce_load::run(&config, interrupted, &mut Quiet, |_| {})?;
        done += round.records as f64 * record_bytes as f64 / 1e6;
        outln!(
            "prefill: {done:.0} of {mb:.0} MB committed ({:.0} MB/s)",
            round.mb_per_sec
        )
        .map_err(|e| crate::out::describe(&e))?;
    }
    Ok((done, started.elapsed().as_secs_f64()))
}

/// A client connection to `leader`'s client listener (over TLS when `tls` is given).
pub fn connect(
    leader: SocketAddr,
    tls: Option<&ClientTls>,
    timeout: Duration,
) -> Result<BlockingClient, String> {
    match tls {
        Some(tls) => tls.connect(leader, timeout),
        None => BlockingClient::connect(leader, timeout).map_err(|e| e.to_string()),
    }
}

/// From one DescribeQuorum of the leader: its high watermark and the log end offset it last saw
/// of each observer in `ids` (None for one it does not list); None when it does not answer.
pub fn sample_observers(
    leader: SocketAddr,
    tls: Option<&ClientTls>,
    ids: &[i32],
) -> Option<(i64, Vec<Option<i64>>)> {
    let mut client = connect(leader, tls, Duration::from_secs(2)).ok()?;
    let quorum = client.describe_quorum().ok()?;
    if !quorum.error.is_none() {
        return None;
    }
    let offsets = ids
        .iter()
        .map(|id| {
            quorum
                .observers
                .iter()
                .find(|o| o.replica_id == *id)
                .map(|o| o.log_end_offset)
        })
        .collect();
    Some((quorum.high_watermark, offsets))
}

/// The observer's log end offset and the high watermark, as the leader reports them.
pub fn sample(
    leader: SocketAddr,
    tls: Option<&ClientTls>,
    observer_id: usize,
) -> (Option<i64>, Option<i64>) {
    match sample_observers(leader, tls, &[observer_id as i32]) {
        Some((high_watermark, offsets)) => (offsets[0], Some(high_watermark)),
        None => (None, None),
    }
}

impl CatchUpReport {
    pub fn window_started(&mut self, leader: SocketAddr, tls: Option<&ClientTls>) {
        if let Some(id) = self.observer_id {
            (self.observer_offset_start, self.high_watermark_start) = sample(leader, tls, id);
        }
    }

    pub fn window_ended(&mut self, leader: SocketAddr, tls: Option<&ClientTls>) {
        if let Some(id) = self.observer_id {
            (self.observer_offset_end, self.high_watermark_end) = sample(leader, tls, id);
            self.observer_behind_at_end = match (self.observer_offset_end, self.high_watermark_end)
            {
                (Some(offset), Some(hw)) => Some(offset < hw),
                _ => None,
            };
        }
    }

    pub fn summary(&self) -> Option<String> {
        let id = self.observer_id?;
        let text = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        Some(format!(
            "  catch-up: prefill {:.0} MB in {:.1} s; observer {id} at offset {} -> {} over the \
             window (high watermark {} -> {}){}",
            self.prefill_mb,
            self.prefill_sec,
            text(self.observer_offset_start),
            text(self.observer_offset_end),
            text(self.high_watermark_start),
            text(self.high_watermark_end),
            match self.observer_behind_at_end {
                Some(true) => ", still behind at the end",
                Some(false) => ", caught up before the end",
                None => "",
            }
        ))
    }
}
