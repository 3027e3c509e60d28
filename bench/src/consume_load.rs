//! Consumers against one leader: N threads, each with its own connection, each a Fetch loop on
//! `__cluster_metadata`-0 from one start offset (earliest by default, from ListOffsets), one
//! request at a time as a Kafka consumer sends them (max wait, min bytes, max bytes, partition
//! max bytes as given). Every answer's batches are checked and counted by `fetch_tally`: a gap
//! or a repeat stops the consumer with an error that fails the run. The counters are atomics
//! the phase samples at the start and end of its window.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine::raft::ErrorCode;
use net::client::BlockingClient;
use net::wire::kafka::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ListOffsetsPartition,
    ListOffsetsRequest, ListOffsetsTopic, EARLIEST_TIMESTAMP, FETCH_SPEC, LATEST_TIMESTAMP,
};
use net::wire::quorum::{METADATA_PARTITION, METADATA_TOPIC};
use serde::Serialize;

use crate::fetch_tally::{Counts, Position};

/// Added to the fetch's max wait for the socket's read timeout: a node answers a parked fetch
/// at its max wait, so an answer this much later means the node is stuck.
const ANSWER_GRACE: Duration = Duration::from_secs(10);
/// How often a connected consumer looks whether it may start.
const GO_POLL: Duration = Duration::from_millis(1);

/// Where each consumer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartAt {
    /// The log start (ListOffsets -2).
    Earliest,
    /// The high watermark (ListOffsets -1): only what is committed after the start.
    Latest,
    Offset(i64),
}

impl std::str::FromStr for StartAt {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "earliest" | "beginning" => Ok(StartAt::Earliest),
            "latest" | "end" => Ok(StartAt::Latest),
            _ => match text.parse::<i64>() {
                Ok(offset) if offset >= 0 => Ok(StartAt::Offset(offset)),
                _ => Err(format!(
                    "{text}: use earliest, latest or an offset (0 or more)"
                )),
            },
        }
    }
}

#[derive(Debug, Clone)]
pub struct ConsumeConfig {
    pub leader: SocketAddr,
    pub consumers: usize,
    pub from: StartAt,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    /// Each consumer stops once it has read up to the high watermark of its last answer (as
    /// `kcat -e` does at the end of a partition).
    pub to_end: bool,
    /// Connect over TLS (a cluster whose client listener is SSL).
    pub tls: Option<testkit::ClientTls>,
}

/// One consumer's counters, written by its thread.
#[derive(Default)]
struct Shared {
    records: AtomicU64,
    batches: AtomicU64,
    control_records: AtomicU64,
    control_batches: AtomicU64,
    bytes: AtomicU64,
    partial_bytes: AtomicU64,
    fetches: AtomicU64,
    empty_fetches: AtomicU64,
    position: AtomicI64,
    high_watermark: AtomicI64,
    /// Reached the end (with `to_end`).
    done: AtomicBool,
    error: Mutex<Option<String>>,
}

impl Shared {
    fn add(&self, counts: &Counts) {
        self.records.fetch_add(counts.records, Ordering::Relaxed);
        self.batches.fetch_add(counts.batches, Ordering::Relaxed);
        let control = counts.control_records;
        self.control_records.fetch_add(control, Ordering::Relaxed);
        let control = counts.control_batches;
        self.control_batches.fetch_add(control, Ordering::Relaxed);
        self.bytes.fetch_add(counts.bytes, Ordering::Relaxed);
        let partial = counts.partial_bytes;
        self.partial_bytes.fetch_add(partial, Ordering::Relaxed);
        self.fetches.fetch_add(1, Ordering::Relaxed);
        if counts.bytes == 0 {
            self.empty_fetches.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn sample(&self) -> ConsumerSample {
        ConsumerSample {
            counts: Counts {
                records: self.records.load(Ordering::Relaxed),
                batches: self.batches.load(Ordering::Relaxed),
                control_records: self.control_records.load(Ordering::Relaxed),
                control_batches: self.control_batches.load(Ordering::Relaxed),
                bytes: self.bytes.load(Ordering::Relaxed),
                partial_bytes: self.partial_bytes.load(Ordering::Relaxed),
            },
            fetches: self.fetches.load(Ordering::Relaxed),
            empty_fetches: self.empty_fetches.load(Ordering::Relaxed),
            position: self.position.load(Ordering::Relaxed),
            high_watermark: self.high_watermark.load(Ordering::Relaxed),
            done: self.done.load(Ordering::Relaxed),
        }
    }
}

/// One consumer's counters at one moment (totals since it started).
#[derive(Debug, Clone, Copy)]
pub struct ConsumerSample {
    pub counts: Counts,
    pub fetches: u64,
    pub empty_fetches: u64,
    /// The next offset it will fetch.
    pub position: i64,
    /// From its last answer (ListOffsets latest before the first).
    pub high_watermark: i64,
    pub done: bool,
}

/// Every consumer's counters at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    pub consumers: Vec<ConsumerSample>,
}

/// What one consumer did between two snapshots.
#[derive(Debug, Clone, Serialize)]
pub struct ConsumerFigures {
    /// Data records (control records apart), from the batch headers.
    pub records: u64,
    pub batches: u64,
    pub control_records: u64,
    pub control_batches: u64,
    /// Bytes of the records fields received (batch headers included), 10^6 per MB.
    pub bytes: u64,
    pub fetches: u64,
    /// Answers with no records.
    pub empty_fetches: u64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub fetches_per_sec: f64,
    pub bytes_per_fetch: f64,
    /// Offsets at the window's start and end (the next to fetch), and the high watermark of
    /// the last answer at the end.
    pub position_start: i64,
    pub position_end: i64,
    pub high_watermark_end: i64,
    /// high_watermark_end - position_end.
    pub lag_end: i64,
    /// Read up to the high watermark (with `to_end`).
    pub reached_end: bool,
}

/// All consumers between two snapshots: the sums, and each one.
#[derive(Debug, Clone, Serialize)]
pub struct ConsumeFigures {
    pub elapsed_sec: f64,
    pub records: u64,
    pub control_records: u64,
    pub bytes: u64,
    pub fetches: u64,
    pub empty_fetches: u64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub fetches_per_sec: f64,
    pub bytes_per_fetch: f64,
    /// The largest lag of any consumer at the end.
    pub max_lag_end: i64,
    pub per_consumer: Vec<ConsumerFigures>,
}

impl ConsumeFigures {
    pub fn between(start: &Snapshot, end: &Snapshot) -> Self {
        assert_eq!(start.consumers.len(), end.consumers.len());
        let seconds = end.at.duration_since(start.at).as_secs_f64();
        let per_sec = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        let per_fetch = |bytes: u64, fetches: u64| {
            if fetches > 0 {
                bytes as f64 / fetches as f64
            } else {
                0.0
            }
        };
        let per_consumer: Vec<ConsumerFigures> = start
            .consumers
            .iter()
            .zip(&end.consumers)
            .map(|(a, b)| {
                let records = b.counts.records - a.counts.records;
                let bytes = b.counts.bytes - a.counts.bytes;
                let fetches = b.fetches - a.fetches;
                ConsumerFigures {
                    records,
                    batches: b.counts.batches - a.counts.batches,
                    control_records: b.counts.control_records - a.counts.control_records,
                    control_batches: b.counts.control_batches - a.counts.control_batches,
                    bytes,
                    fetches,
                    empty_fetches: b.empty_fetches - a.empty_fetches,
                    records_per_sec: per_sec(records),
                    mb_per_sec: per_sec(bytes) / 1e6,
                    fetches_per_sec: per_sec(fetches),
                    bytes_per_fetch: per_fetch(bytes, fetches),
                    position_start: a.position,
                    position_end: b.position,
                    high_watermark_end: b.high_watermark,
                    lag_end: b.high_watermark - b.position,
                    reached_end: b.done,
                }
            })
            .collect();
        let sum = |f: fn(&ConsumerFigures) -> u64| per_consumer.iter().map(f).sum::<u64>();
        let (records, bytes, fetches) = (sum(|c| c.records), sum(|c| c.bytes), sum(|c| c.fetches));
        Self {
            elapsed_sec: seconds,
            records,
            control_records: sum(|c| c.control_records),
            bytes,
            fetches,
            empty_fetches: sum(|c| c.empty_fetches),
            records_per_sec: per_sec(records),
            mb_per_sec: per_sec(bytes) / 1e6,
            fetches_per_sec: per_sec(fetches),
            bytes_per_fetch: per_fetch(bytes, fetches),
            max_lag_end: per_consumer.iter().map(|c| c.lag_end).max().unwrap_or(0),
            per_consumer,
        }
    }
}

/// Consumers, connected; they fetch once [`Consumers::go`] is called.
pub struct Consumers {
    shared: Vec<Arc<Shared>>,
    stop: Arc<AtomicBool>,
    go: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The log start and high watermark ListOffsets gave before the first fetch.
    pub earliest: i64,
    pub latest: i64,
}

impl Consumers {
    /// Connects every consumer and finds its start offset; their loops wait for
    /// [`Consumers::go`].
    pub fn start(config: &ConsumeConfig) -> Result<Consumers, String> {
        assert!(config.consumers > 0);
        assert!(config.max_wait_ms >= 0 && config.max_bytes > 0 && config.partition_max_bytes > 0);
        let timeout = Duration::from_millis(config.max_wait_ms as u64) + ANSWER_GRACE;
        let stop = Arc::new(AtomicBool::new(false));
        let go = Arc::new(AtomicBool::new(false));
        let mut consumers = Consumers {
            shared: Vec::new(),
            stop: Arc::clone(&stop),
            go: Arc::clone(&go),
            threads: Vec::new(),
            earliest: -1,
            latest: -1,
        };
        for index in 0..config.consumers {
            let mut client = match &config.tls {
                Some(tls) => tls.connect(config.leader, timeout)?,
                None => {
                    BlockingClient::connect(config.leader, timeout).map_err(|e| e.to_string())?
                }
            };
            let earliest = list_offset(&mut client, EARLIEST_TIMESTAMP)?;
            let latest = list_offset(&mut client, LATEST_TIMESTAMP)?;
            (consumers.earliest, consumers.latest) = (earliest, latest);
            let start = match config.from {
                StartAt::Earliest => earliest,
                StartAt::Latest => latest,
                StartAt::Offset(offset) => offset,
            };
            let shared = Arc::new(Shared::default());
            shared.position.store(start, Ordering::Relaxed);
            shared.high_watermark.store(latest, Ordering::Relaxed);
            let plan = (config.clone(), Arc::clone(&shared), Arc::clone(&stop));
            let go = Arc::clone(&go);
            let thread = std::thread::Builder::new()
                .name(format!("consumer-{index}"))
                .spawn(move || {
                    let (config, shared, stop) = plan;
                    // The phase's first snapshot comes before the first fetch.
                    while !go.load(Ordering::Acquire) {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(GO_POLL);
                    }
                    if let Err(error) = consume_loop(&config, client, &shared, &stop) {
                        *shared.error.lock().unwrap() = Some(error);
                    }
                })
                .map_err(|e| format!("starting consumer {index}: {e}"))?;
            consumers.shared.push(shared);
            consumers.threads.push(thread);
        }
        Ok(consumers)
    }

    /// The counters before any fetch, then the loops start.
    pub fn go(&self) -> Snapshot {
        let first = self.snapshot();
        self.go.store(true, Ordering::Release);
        first
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            consumers: self.shared.iter().map(|s| s.sample()).collect(),
        }
    }

    /// The first consumer's error, if one has failed.
    pub fn check_errors(&self) -> Result<(), String> {
        for (index, shared) in self.shared.iter().enumerate() {
            if let Some(error) = shared.error.lock().unwrap().as_ref() {
                return Err(format!("consumer {index}: {error}"));
            }
        }
        Ok(())
    }

    /// Every consumer has read to the end (with `to_end`).
    pub fn all_done(&self) -> bool {
        self.shared.iter().all(|s| s.done.load(Ordering::Relaxed))
    }

    /// Stops the loops (each within one fetch's max wait) and waits for them; then reports
    /// the first consumer error.
    pub fn stop(mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            thread.join().map_err(|_| "a consumer thread panicked")?;
        }
        self.check_errors()
    }
}

impl Drop for Consumers {
    fn drop(&mut self) {
        // An early return (an error elsewhere) still ends the threads.
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn list_offset(client: &mut BlockingClient, timestamp: i64) -> Result<i64, String> {
    let request = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 1,
        topics: vec![ListOffsetsTopic {
            name: METADATA_TOPIC.into(),
            partitions: vec![ListOffsetsPartition {
                index: METADATA_PARTITION,
                current_leader_epoch: -1,
                timestamp,
            }],
        }],
    };
    let response = client.call(&request).map_err(|e| e.to_string())?;
    let partition = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| format!("{}: ListOffsets answer without a partition", client.addr()))?;
    if !partition.error.is_none() {
        return Err(format!(
            "{}: ListOffsets ({timestamp}) answered {}",
            client.addr(),
            partition.error
        ));
    }
    Ok(partition.offset)
}

fn fetch_request(config: &ConsumeConfig) -> FetchRequest {
    FetchRequest {
        max_wait_ms: config.max_wait_ms,
        min_bytes: config.min_bytes,
        max_bytes: config.max_bytes,
        isolation_level: 1,
        topics: vec![FetchTopic {
            name: METADATA_TOPIC.into(),
            partitions: vec![FetchPartition {
                partition: METADATA_PARTITION,
                current_leader_epoch: -1,
                fetch_offset: 0,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: config.partition_max_bytes,
            }],
        }],
        ..FetchRequest::default()
    }
}

fn consume_loop(
    config: &ConsumeConfig,
    mut client: BlockingClient,
    shared: &Shared,
    stop: &AtomicBool,
) -> Result<(), String> {
    let version = client.negotiate(&FETCH_SPEC).map_err(|e| e.to_string())?;
    let mut position = Position::new(shared.position.load(Ordering::Relaxed));
    let mut high_watermark = shared.high_watermark.load(Ordering::Relaxed);
    let mut request = fetch_request(config);
    while !stop.load(Ordering::Relaxed) {
        if config.to_end && position.next >= high_watermark {
            shared.done.store(true, Ordering::Relaxed);
            return Ok(());
        }
        request.topics[0].partitions[0].fetch_offset = position.next;
        let response = client
            .call_at(version, &request)
            .map_err(|e| e.to_string())?;
        let (records, answered_hw) = our_partition(&response, position.next)?;
        let counts = position
            .accept(&records)
            .map_err(|e| format!("Fetch from offset {}: {e}", position.next))?;
        high_watermark = answered_hw;
        shared.add(&counts);
        shared.position.store(position.next, Ordering::Relaxed);
        shared
            .high_watermark
            .store(high_watermark, Ordering::Relaxed);
    }
    Ok(())
}

/// The records and the high watermark of our partition's answer; any error code is an error.
fn our_partition(response: &FetchResponse, offset: i64) -> Result<(bytes::Bytes, i64), String> {
    if response.error != ErrorCode::NONE {
        return Err(format!(
            "Fetch from offset {offset} answered {}",
            response.error
        ));
    }
    let partition = response
        .topics
        .iter()
        .filter(|t| t.name == METADATA_TOPIC)
        .flat_map(|t| &t.partitions)
        .find(|p| p.index == METADATA_PARTITION)
        .ok_or_else(|| format!("Fetch from offset {offset}: no answer for our partition"))?;
    if partition.error != ErrorCode::NONE {
        return Err(format!(
            "Fetch from offset {offset} answered {} (log start {}, high watermark {})",
            partition.error, partition.log_start_offset, partition.high_watermark
        ));
    }
    Ok((
        partition.records_bytes().unwrap_or_default(),
        partition.high_watermark,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_offsets_parse() {
        assert_eq!("earliest".parse(), Ok(StartAt::Earliest));
        assert_eq!("latest".parse(), Ok(StartAt::Latest));
        assert_eq!("42".parse(), Ok(StartAt::Offset(42)));
        assert!("-3".parse::<StartAt>().is_err());
        assert!("soon".parse::<StartAt>().is_err());
    }

    fn sample(records: u64, bytes: u64, fetches: u64, position: i64, hw: i64) -> ConsumerSample {
        ConsumerSample {
            counts: Counts {
                records,
                bytes,
                ..Counts::default()
            },
            fetches,
            empty_fetches: 0,
            position,
            high_watermark: hw,
            done: false,
        }
    }

    #[test]
    fn figures_are_the_differences_over_the_window() {
        let t0 = Instant::now();
        let start = Snapshot {
            at: t0,
            consumers: vec![sample(10, 1_000, 2, 11, 50), sample(0, 0, 0, 0, 50)],
        };
        let end = Snapshot {
            at: t0 + Duration::from_secs(2),
            consumers: vec![
                sample(30, 3_000_000, 6, 31, 60),
                sample(20, 1_000_000, 4, 20, 70),
            ],
        };
        let f = ConsumeFigures::between(&start, &end);
        assert_eq!((f.records, f.fetches), (40, 8));
        assert_eq!(f.bytes, 3_999_000);
        assert!((f.records_per_sec - 20.0).abs() < 1e-9);
        assert!((f.mb_per_sec - 1.9995).abs() < 1e-9);
        assert!((f.bytes_per_fetch - 499_875.0).abs() < 1e-9);
        assert_eq!(f.per_consumer[0].lag_end, 29);
        assert_eq!(f.per_consumer[1].lag_end, 50);
        assert_eq!(f.max_lag_end, 50);
        assert_eq!(f.per_consumer[1].position_start, 0);
    }
}
