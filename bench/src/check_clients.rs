//! The clients of `ringraft-bench check`: watchers that tell where the leader is, plain and
//! idempotent producers with several requests in flight, and consumers reading the log with
//! Fetch. They only record events ([`Recorder`]); the checks are in check_history.rs.
//!
//! Every client follows the leader the watchers name (failover_client.rs's rule:
//! [`pick_leader`]) and leaves a connection when the node closes it, refuses a request, a
//! later leader is named, or a request waits past the request timeout. A producer leaving a
//! connection gives up everything unanswered on it (recorded as indeterminate) before it
//! opens the next one, so its acknowledged records are in the order it sent them
//! (check_history.rs, the model). An idempotent producer sends what was not acknowledged
//! again, with the same sequence numbers (docs/protocol.md, "Idempotent producers").

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::raft::ErrorCode;
use engine::record::{peek_batch_len, BatchView, RecordBatchBuilder};
use net::client::BlockingClient;
use net::wire::kafka::{
    FetchPartition, FetchRequest, FetchTopic, InitProducerIdRequest, FETCH_SPEC,
};
use testkit::netns::Host;

use crate::check_history::{value_of, Event, Seen};
use crate::failover_client::{pick_leader, View, FRESH, WATCH_EVERY};

/// A watcher's connect and answer timeout.
const WATCH_TIMEOUT: Duration = Duration::from_millis(300);
/// Connect timeout of producers and consumers.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How often a waiting client looks at the watchers and the stop flag.
const TICK: Duration = Duration::from_millis(5);
/// Produce request version (v9, as the other benchmarks).
const PRODUCE_VERSION: i16 = 9;
/// A consumer's Fetch long-poll.
const FETCH_MAX_WAIT_MS: i32 = 200;
const FETCH_MAX_BYTES: i32 = 1 << 20;
const METADATA_TOPIC: &str = "__cluster_metadata";

/// The run's history, in the order events happened (each stamped under the lock).
pub struct Recorder {
    start: Instant,
    events: Mutex<Vec<Event>>,
    pub acks: AtomicU64,
    pub records_read: AtomicU64,
}

impl Recorder {
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            events: Mutex::new(Vec::new()),
            acks: AtomicU64::new(0),
            records_read: AtomicU64::new(0),
        }
    }

    /// Milliseconds from the run's start to `at`, to the microsecond.
    pub fn ms_since_start(&self, at: Instant) -> f64 {
        let micros = at.saturating_duration_since(self.start).as_micros();
        micros as f64 / 1000.0
    }

    /// Records the event `make` builds from the time now.
    pub fn push(&self, make: impl FnOnce(f64) -> Event) {
        let mut events = self.events.lock().unwrap();
        let t = self.ms_since_start(Instant::now());
        events.push(make(t));
    }

    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut self.events.lock().unwrap())
    }
}

/// What the clients share: the nodes, the watchers' views and the flags.
pub struct Shared {
    pub ids: Vec<i32>,
    pub addrs: Vec<SocketAddr>,
    pub views: Mutex<Vec<Option<View>>>,
    pub recorder: Arc<Recorder>,
    /// Stops the producers.
    pub stop_producers: AtomicBool,
    /// Stops the consumers and the watchers.
    pub stop_all: AtomicBool,
    /// Each consumer's position (the next offset it asks for).
    pub positions: Vec<AtomicU64>,
    /// The highest offset acknowledged so far (+1), for the final wait.
    pub acked_end: AtomicU64,
    /// The first error that stopped a thread (none expected: every failure is retried).
    pub error: Mutex<Option<String>>,
    pub request_timeout: Duration,
    pub inflight: usize,
    /// The producers' acks: -1, or 1 to show the checker failing on real losses.
    pub acks: i16,
    /// Each producer's pause between sends (its rate).
    pub send_every: Duration,
}

impl Shared {
    pub fn leader(&self) -> Option<(i32, i32)> {
        pick_leader(&self.views.lock().unwrap(), Instant::now(), FRESH)
    }

    fn addr_of(&self, id: i32) -> Option<SocketAddr> {
        let index = self.ids.iter().position(|&i| i == id)?;
        Some(self.addrs[index])
    }

    /// Whether the watchers name a leader other than `leader` in a later epoch than `epoch`.
    fn moved_on(&self, (leader, epoch): (i32, i32)) -> bool {
        self.leader()
            .is_some_and(|(now, e)| now != leader && e > epoch)
    }
}

/// The client threads; stopped and joined on drop.
pub struct Clients {
    pub shared: Arc<Shared>,
    producers: Vec<JoinHandle<()>>,
    others: Vec<JoinHandle<()>>,
}

/// How many of each client.
pub struct Counts {
    pub plain: u32,
    pub idempotent: u32,
    pub consumers: u32,
}

impl Clients {
    /// Starts a watcher per node, a leader logger, the producers and the consumers, all in
    /// `host`'s network namespace when given.
    pub fn start(shared: Shared, host: Option<Host>, counts: &Counts) -> Clients {
        let shared = Arc::new(shared);
        let mut clients = Clients {
            shared: Arc::clone(&shared),
            producers: Vec::new(),
            others: Vec::new(),
        };
        let spawn = |host: &Option<Host>, body: Box<dyn FnOnce(&Shared) + Send>| {
            let (shared, host) = (Arc::clone(&shared), host.clone());
            std::thread::spawn(move || in_namespace(&shared, host.as_ref(), body))
        };
        for index in 0..shared.ids.len() {
            clients
                .others
                .push(spawn(&host, Box::new(move |s| watch(s, index))));
        }
        clients.others.push(spawn(&host, Box::new(log_leaders)));
        for producer in 0..counts.plain + counts.idempotent {
            let idempotent = producer >= counts.plain;
            clients.producers.push(spawn(
                &host,
                Box::new(move |s| {
                    if idempotent {
                        produce_idempotent(s, producer)
                    } else {
                        produce_plain(s, producer)
                    }
                }),
            ));
        }
        for consumer in 0..counts.consumers {
            clients
                .others
                .push(spawn(&host, Box::new(move |s| consume(s, consumer))));
        }
        clients
    }

    /// Fails with the first error a thread stopped on.
    pub fn check(&self) -> Result<(), String> {
        match self.shared.error.lock().unwrap().as_ref() {
            Some(error) => Err(format!("a client stopped: {error}")),
            None => Ok(()),
        }
    }

    /// Stops the producers and waits for them.
    pub fn stop_producers(&mut self) {
        self.shared.stop_producers.store(true, Ordering::Relaxed);
        for thread in self.producers.drain(..) {
            let _ = thread.join();
        }
    }

    /// Stops every thread and waits for them.
    pub fn stop(&mut self) {
        self.stop_producers();
        self.shared.stop_all.store(true, Ordering::Relaxed);
        for thread in self.others.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.stop();
    }
}

fn in_namespace(shared: &Shared, host: Option<&Host>, body: impl FnOnce(&Shared)) {
    let entered = match host.map(Host::enter).transpose() {
        Ok(entered) => entered,
        Err(error) => {
            shared.error.lock().unwrap().get_or_insert(error);
            return;
        }
    };
    body(shared);
    drop(entered);
}

fn sleep_unless(flag: &AtomicBool, pause: Duration) {
    if !flag.load(Ordering::Relaxed) {
        std::thread::sleep(pause);
    }
}

/// Asks node `index` DescribeQuorum every [`WATCH_EVERY`] until stopped.
fn watch(shared: &Shared, index: usize) {
    let addr = shared.addrs[index];
    let mut client: Option<BlockingClient> = None;
    while !shared.stop_all.load(Ordering::Relaxed) {
        if client.is_none() {
            client = BlockingClient::connect(addr, WATCH_TIMEOUT).ok();
        }
        match client.as_mut().map(|c| c.describe_quorum()) {
            Some(Ok(d)) if d.leader_epoch >= 0 => {
                shared.views.lock().unwrap()[index] = Some(View {
                    at: Instant::now(),
                    epoch: d.leader_epoch,
                    leader: (d.leader_id >= 0).then_some(d.leader_id),
                });
            }
            Some(_) => client = None,
            None => {}
        }
        sleep_unless(&shared.stop_all, WATCH_EVERY);
    }
}

/// Records a [`Event::Leader`] whenever the leader the watchers name changes.
fn log_leaders(shared: &Shared) {
    let mut last = None;
    while !shared.stop_all.load(Ordering::Relaxed) {
        let now = shared.leader();
        if let Some((node, epoch)) = now.filter(|_| now != last) {
            shared
                .recorder
                .push(|t_ms| Event::Leader { t_ms, node, epoch });
            last = now;
        }
        sleep_unless(&shared.stop_all, WATCH_EVERY);
    }
}

/// Why a client left a connection.
#[derive(Debug)]
enum Left {
    Stopped,
    Closed,
    Refused(ErrorCode),
    NewLeader,
    TimedOut,
}

impl Left {
    fn why(&self) -> String {
        match self {
            Left::Stopped => "stopped".into(),
            Left::Closed => "connection lost".into(),
            Left::Refused(code) => format!("answered {code}"),
            Left::NewLeader => "a later leader named".into(),
            Left::TimedOut => "request timed out".into(),
        }
    }
}

/// Connects to the leader the watchers name; None (after a tick) when none is named or it
/// cannot be reached.
fn connect_to_leader(shared: &Shared, stop: &AtomicBool) -> Option<((i32, i32), BlockingClient)> {
    let leader = shared.leader();
    let connected = leader.and_then(|(id, epoch)| {
        let client = BlockingClient::connect(shared.addr_of(id)?, CONNECT_TIMEOUT).ok()?;
        Some(((id, epoch), client))
    });
    if connected.is_none() {
        sleep_unless(stop, TICK);
    }
    connected
}

/// A request in flight: correlation id, record sequence, when sent.
struct InFlight {
    correlation: i32,
    seq: u64,
    sent: Instant,
}

/// What the in-flight loop does with a batch to send: plain producers make a new record,
/// idempotent ones may send an old one again.
trait Source {
    /// The next record to send on this connection, if any is due.
    fn next(&mut self) -> Option<(u64, Bytes)>;
    /// Whether `seq` was acknowledged (NONE) or not: the answer.
    fn answered(&mut self, seq: u64, acked: bool);
    /// The connection is left: everything unanswered is given up.
    fn left(&mut self);
}

/// Sends on one connection, up to `shared.inflight` unanswered, until it must be left.
fn run_connection(
    shared: &Shared,
    producer: u32,
    idempotent: bool,
    (leader, epoch): (i32, i32),
    client: &mut BlockingClient,
    source: &mut dyn Source,
    next_send: &mut Instant,
) -> Left {
    let recorder = &shared.recorder;
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let left = loop {
        if shared.stop_producers.load(Ordering::Relaxed) {
            break Left::Stopped;
        }
        let now = Instant::now();
        if in_flight.len() < shared.inflight && now >= *next_send {
            if let Some((seq, batch)) = source.next() {
                *next_send = (*next_send + shared.send_every).max(now);
                let Ok(correlation) = client.send_produce(PRODUCE_VERSION, shared.acks, batch)
                else {
                    // Not sent: the record may be sent again later (idempotent) or never.
                    source.answered(seq, false);
                    break Left::Closed;
                };
                recorder.push(|t_ms| Event::Send {
                    t_ms,
                    producer,
                    seq,
                    idempotent,
                    node: leader,
                });
                in_flight.push_back(InFlight {
                    correlation,
                    seq,
                    sent: now,
                });
                continue;
            }
        }
        let wait = if in_flight.len() < shared.inflight {
            next_send
                .saturating_duration_since(now)
                .clamp(Duration::ZERO, TICK)
        } else {
            TICK
        };
        if in_flight.is_empty() {
            std::thread::sleep(wait);
            continue;
        }
        match client.wait_readable(wait) {
            Ok(true) => {}
            Ok(false) => {
                if in_flight[0].sent.elapsed() >= shared.request_timeout {
                    break Left::TimedOut;
                }
                if shared.moved_on((leader, epoch)) {
                    break Left::NewLeader;
                }
                continue;
            }
            Err(_) => break Left::Closed,
        }
        let Ok((correlation, response)) = client.recv_produce(PRODUCE_VERSION) else {
            break Left::Closed;
        };
        let Some(position) = in_flight.iter().position(|f| f.correlation == correlation) else {
            break Left::Closed;
        };
        let InFlight { seq, .. } = in_flight.remove(position).expect("found");
        let answer = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| (p.error, p.base_offset));
        match answer {
            Some((error, offset)) if error.is_none() => {
                recorder.push(|t_ms| Event::Ack {
                    t_ms,
                    producer,
                    seq,
                    offset,
                    node: leader,
                });
                recorder.acks.fetch_add(1, Ordering::Relaxed);
                shared
                    .acked_end
                    .fetch_max(offset as u64 + 1, Ordering::Relaxed);
                source.answered(seq, true);
            }
            other => {
                let code = other.map_or(ErrorCode::UNKNOWN_SERVER_ERROR, |(e, _)| e);
                recorder.push(|t_ms| Event::Unknown {
                    t_ms,
                    producer,
                    seq,
                    why: format!("answered {code}"),
                });
                source.answered(seq, false);
                break Left::Refused(code);
            }
        }
    };
    let why = left.why();
    for f in in_flight {
        recorder.push(|t_ms| Event::Unknown {
            t_ms,
            producer,
            seq: f.seq,
            why: why.clone(),
        });
        source.answered(f.seq, false);
    }
    source.left();
    left
}

/// A plain producer: a new record for every send, never one sent again.
struct Plain {
    producer: u32,
    next_seq: u64,
}

impl Source for Plain {
    fn next(&mut self) -> Option<(u64, Bytes)> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut builder = RecordBatchBuilder::new(0, 0);
        builder.append(0, None, Some(value_of(self.producer, seq).as_bytes()), &[]);
        Some((seq, builder.build().freeze()))
    }
    fn answered(&mut self, _: u64, _: bool) {}
    fn left(&mut self) {}
}

fn produce_plain(shared: &Shared, producer: u32) {
    let mut source = Plain {
        producer,
        next_seq: 0,
    };
    let mut next_send = Instant::now();
    while !shared.stop_producers.load(Ordering::Relaxed) {
        let Some((leader, mut client)) = connect_to_leader(shared, &shared.stop_producers) else {
            continue;
        };
        let left = run_connection(
            shared,
            producer,
            false,
            leader,
            &mut client,
            &mut source,
            &mut next_send,
        );
        if matches!(left, Left::Refused(_)) {
            sleep_unless(&shared.stop_producers, TICK);
        }
    }
}

/// An idempotent producer: its records carry its producer id and sequence numbers; what was
/// not acknowledged is sent again, in order, on the next connection.
struct Idempotent {
    producer: u32,
    producer_id: i64,
    /// Sent (or to be sent again), not acknowledged, in sequence order.
    unacked: VecDeque<u64>,
    /// How many of `unacked` went out on this connection.
    sent_here: usize,
    next_seq: u64,
}

impl Idempotent {
    fn batch(&self, seq: u64) -> Bytes {
        let sequence = i32::try_from(seq).expect("fewer than 2^31 records");
        let mut builder = RecordBatchBuilder::new(0, 0).producer(self.producer_id, 0, sequence);
        builder.append(0, None, Some(value_of(self.producer, seq).as_bytes()), &[]);
        builder.build().freeze()
    }
}

impl Source for Idempotent {
    fn next(&mut self) -> Option<(u64, Bytes)> {
        let seq = match self.unacked.get(self.sent_here) {
            Some(&seq) => seq,
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.unacked.push_back(seq);
                seq
            }
        };
        self.sent_here += 1;
        Some((seq, self.batch(seq)))
    }

    fn answered(&mut self, seq: u64, acked: bool) {
        if acked {
            if let Some(i) = self.unacked.iter().position(|&s| s == seq) {
                self.unacked.remove(i);
                self.sent_here = self.sent_here.saturating_sub(1);
            }
        }
    }

    fn left(&mut self) {
        self.sent_here = 0;
    }
}

/// Asks the leader (or any node) for a producer id until one is given, or stopped.
fn producer_id(shared: &Shared) -> Option<i64> {
    let request = InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
    };
    while !shared.stop_producers.load(Ordering::Relaxed) {
        if let Some((_, mut client)) = connect_to_leader(shared, &shared.stop_producers) {
            match client.call(&request) {
                Ok(answer) if answer.error.is_none() => return Some(answer.producer_id),
                // COORDINATOR_LOAD_IN_PROGRESS (no block yet), a lost connection: again.
                _ => sleep_unless(&shared.stop_producers, Duration::from_millis(50)),
            }
        }
    }
    None
}

fn produce_idempotent(shared: &Shared, producer: u32) {
    let Some(producer_id) = producer_id(shared) else {
        return;
    };
    let mut source = Idempotent {
        producer,
        producer_id,
        unacked: VecDeque::new(),
        sent_here: 0,
        next_seq: 0,
    };
    let mut next_send = Instant::now();
    while !shared.stop_producers.load(Ordering::Relaxed) {
        let Some((leader, mut client)) = connect_to_leader(shared, &shared.stop_producers) else {
            continue;
        };
        let left = run_connection(
            shared,
            producer,
            true,
            leader,
            &mut client,
            &mut source,
            &mut next_send,
        );
        if matches!(left, Left::Refused(_)) {
            // OUT_OF_ORDER_SEQUENCE_NUMBER after an earlier batch failed, or not the leader:
            // a tick, then everything unacknowledged again from the oldest.
            sleep_unless(&shared.stop_producers, TICK);
        }
    }
}

fn fetch_request(offset: i64) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms: FETCH_MAX_WAIT_MS,
        min_bytes: 1,
        max_bytes: FETCH_MAX_BYTES,
        isolation_level: 1,
        topics: vec![FetchTopic {
            name: METADATA_TOPIC.into(),
            partitions: vec![FetchPartition {
                partition: 0,
                current_leader_epoch: -1,
                fetch_offset: offset,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: FETCH_MAX_BYTES,
            }],
        }],
        ..FetchRequest::default()
    }
}

/// One Fetch answer: (records at and past `offset`, high watermark, log start), or why not.
pub fn fetch_once(
    client: &mut BlockingClient,
    offset: i64,
) -> Result<(Vec<Seen>, i64, i64), FetchFailed> {
    let version = client
        .negotiate(&FETCH_SPEC)
        .map_err(|e| FetchFailed(e.to_string()))?;
    let response = client
        .call_at(version, &fetch_request(offset))
        .map_err(|e| FetchFailed(e.to_string()))?;
    if !response.error.is_none() {
        return Err(FetchFailed(format!("answered {}", response.error)));
    }
    let partition = response
        .topics
        .iter()
        .filter(|t| t.name == METADATA_TOPIC)
        .flat_map(|t| &t.partitions)
        .next()
        .ok_or_else(|| FetchFailed("no partition in the answer".into()))?;
    if !partition.error.is_none() {
        return Err(FetchFailed(format!("answered {}", partition.error)));
    }
    let records =
        records_of(&partition.records_bytes().unwrap_or_default(), offset).map_err(FetchFailed)?;
    Ok((
        records,
        partition.high_watermark,
        partition.log_start_offset,
    ))
}

/// Why a Fetch failed: the error, or the answer's error code.
#[derive(Debug)]
pub struct FetchFailed(pub String);

/// The records of a Fetch answer's records field at and past `from`, in order: whole batches
/// only (an incomplete last one is left for the next fetch), the part of the first batch below
/// `from` dropped as a Kafka consumer drops it; control records as None.
pub fn records_of(bytes: &Bytes, from: i64) -> Result<Vec<Seen>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let len = match peek_batch_len(rest).map_err(|e| format!("batch at byte {at}: {e}"))? {
            Some(len) if len <= rest.len() => len,
            _ => break,
        };
        let view = BatchView::parse(bytes.slice(at..at + len))
            .map_err(|e| format!("batch at byte {at}: {e}"))?;
        at += len;
        let control = view.is_control();
        for record in view.records() {
            let offset = record.offset(view.base_offset());
            if offset < from {
                continue;
            }
            let value = if control {
                None
            } else {
                Some(
                    String::from_utf8_lossy(record.value.as_deref().unwrap_or_default())
                        .into_owned(),
                )
            };
            out.push((offset, value));
        }
    }
    Ok(out)
}

/// A consumer: from offset 0, reads the leader's log with Fetch (read_committed) and records
/// every answer, until stopped.
fn consume(shared: &Shared, consumer: u32) {
    let recorder = &shared.recorder;
    let mut position = 0i64;
    while !shared.stop_all.load(Ordering::Relaxed) {
        let Some(((node, epoch), mut client)) = connect_to_leader(shared, &shared.stop_all) else {
            continue;
        };
        while !shared.stop_all.load(Ordering::Relaxed) {
            let fetch_offset = position;
            match fetch_once(&mut client, fetch_offset) {
                Ok((records, high_watermark, _)) => {
                    if let Some((last, _)) = records.last() {
                        position = last + 1;
                    }
                    recorder
                        .records_read
                        .fetch_add(records.len() as u64, Ordering::Relaxed);
                    shared.positions[consumer as usize].store(position as u64, Ordering::Relaxed);
                    recorder.push(|t_ms| Event::Read {
                        t_ms,
                        consumer,
                        node,
                        fetch_offset,
                        high_watermark,
                        records,
                    });
                }
                Err(FetchFailed(why)) => {
                    recorder.push(|t_ms| Event::ReadError {
                        t_ms,
                        consumer,
                        node,
                        fetch_offset,
                        why,
                    });
                    sleep_unless(&shared.stop_all, TICK);
                    break;
                }
            }
            if shared.moved_on((node, epoch)) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, values: &[&str], control: bool) -> Vec<u8> {
        let mut builder = RecordBatchBuilder::new(base, 1).control(control);
        for (i, v) in values.iter().enumerate() {
            builder.append(i as i64, None, Some(v.as_bytes()), &[]);
        }
        builder.build().to_vec()
    }

    #[test]
    fn records_are_taken_from_the_fetch_offset_on_with_control_records_as_none() {
        let mut bytes = batch(5, &["a", "b", "c"], false);
        bytes.extend(batch(8, &["ctl"], true));
        bytes.extend(batch(9, &["d"], false));
        let whole = bytes.len();
        // An answer cut inside its last batch: that batch is left for the next fetch.
        bytes.extend(&batch(10, &["e"], false)[..20]);
        let bytes = Bytes::from(bytes);
        let seen = records_of(&bytes, 6).unwrap();
        let s = |v: &str| Some(v.to_string());
        assert_eq!(seen, vec![(6, s("b")), (7, s("c")), (8, None), (9, s("d"))]);
        assert_eq!(records_of(&bytes.slice(..whole), 0).unwrap().len(), 5);
        assert_eq!(records_of(&Bytes::new(), 0).unwrap(), vec![]);
    }
}
