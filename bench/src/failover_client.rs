//! The failover benchmark's client: a producer that follows the leader through faults, and the
//! watchers that tell it where the leader is.
//!
//! One watcher thread per node asks it DescribeQuorum every [`WATCH_EVERY`] (short timeouts,
//! so a stopped or cut-off node costs its own watcher only) and keeps what it answered: its
//! epoch and the leader it knows. The leader is the one named in the highest epoch among the
//! answers of the last [`FRESH`]. The producer sends one acks=-1 Produce at a time, each record
//! a value of its own (`failover-<n>`, never sent twice), to that leader, and leaves the
//! connection when:
//! - the node closes it or it fails (a killed leader's connection closes at once: its death is
//!   noticed from the closed connection, not from a timeout);
//! - the node refuses the request (NOT_LEADER_OR_FOLLOWER, ...);
//! - the watchers name another leader in a later epoch while the request waits (a stopped or
//!   cut-off leader answers nothing and closes nothing);
//! - the request has waited the request timeout.
//!
//! The request it leaves may still be committed: its record is then in the log without having
//! been acknowledged, which the read-back allows.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use engine::record::RecordBatchBuilder;
use net::client::BlockingClient;
use serde::Serialize;
use testkit::netns::Host;

use crate::failover_figures::{value_of, Ack};

/// How often each watcher asks its node.
pub const WATCH_EVERY: Duration = Duration::from_millis(25);
/// A watcher's connect and answer timeout.
const WATCH_TIMEOUT: Duration = Duration::from_millis(300);
/// Answers older than this do not count when the leader is picked.
pub const FRESH: Duration = Duration::from_secs(1);
/// The producer's connect timeout (and how long it waits for the rest of an answer that has
/// begun to arrive).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How often a waiting producer looks at the watchers and the stop flag.
const PRODUCER_TICK: Duration = Duration::from_millis(5);
/// Produce request version (v9, as the cluster benchmark).
const PRODUCE_VERSION: i16 = 9;

/// What one node last answered to DescribeQuorum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub at: Instant,
    pub epoch: i32,
    /// The leader it knows in that epoch, if any.
    pub leader: Option<i32>,
}

/// The leader and its epoch: named in the highest epoch among the answers younger than
/// `fresh` (the first such answer that names one).
pub fn pick_leader(views: &[Option<View>], now: Instant, fresh: Duration) -> Option<(i32, i32)> {
    views
        .iter()
        .flatten()
        .filter(|v| now.saturating_duration_since(v.at) <= fresh)
        .filter_map(|v| v.leader.map(|leader| (v.epoch, leader)))
        .max_by_key(|&(epoch, _)| epoch)
        .map(|(epoch, leader)| (leader, epoch))
}

/// Counters of the producer, for the report: how it left connections.
#[derive(Debug, Default, Serialize)]
pub struct ClientCounters {
    pub sent: AtomicU64,
    pub acknowledged: AtomicU64,
    /// The node closed the connection or it failed (EOF, reset, refused while sending).
    pub closed: AtomicU64,
    /// Connects that failed (refused: the node is down; timed out: cut off).
    pub connect_failed: AtomicU64,
    /// Answers with an error code (NOT_LEADER_OR_FOLLOWER, ...).
    pub refused: AtomicU64,
    /// Requests left because the watchers named a later leader meanwhile.
    pub left_for_new_leader: AtomicU64,
    /// Requests left after the request timeout.
    pub timed_out: AtomicU64,
}

/// The shared state of the watchers and the producer.
pub struct Shared {
    /// Node ids, in the order of `addrs` and `views`.
    pub ids: Vec<i32>,
    pub addrs: Vec<SocketAddr>,
    pub views: Mutex<Vec<Option<View>>>,
    /// The highest epoch any node has answered with since the start (candidates' included).
    pub max_epoch: AtomicI32,
    /// Every acknowledgement, in the order received.
    pub acks: Mutex<Vec<Ack>>,
    pub counters: ClientCounters,
    pub stop: AtomicBool,
    /// The first error that stopped a thread (none expected: every failure is retried).
    pub error: Mutex<Option<String>>,
}

impl Shared {
    pub fn leader(&self) -> Option<(i32, i32)> {
        pick_leader(&self.views.lock().unwrap(), Instant::now(), FRESH)
    }

    pub fn acks_len(&self) -> usize {
        self.acks.lock().unwrap().len()
    }

    pub fn last_ack(&self) -> Option<Ack> {
        self.acks.lock().unwrap().last().copied()
    }
}

/// The running watchers and producer; stopped and joined on drop (also on an error path).
pub struct Client {
    pub shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Client {
    /// Starts a watcher per node and the producer, all in `host`'s network namespace when given.
    pub fn start(
        ids: Vec<i32>,
        addrs: Vec<SocketAddr>,
        host: Option<Host>,
        request_timeout: Duration,
    ) -> Client {
        let shared = Arc::new(Shared {
            views: Mutex::new(vec![None; ids.len()]),
            ids,
            addrs,
            max_epoch: AtomicI32::new(-1),
            acks: Mutex::new(Vec::new()),
            counters: ClientCounters::default(),
            stop: AtomicBool::new(false),
            error: Mutex::new(None),
        });
        let mut threads = Vec::new();
        for index in 0..shared.ids.len() {
            let (shared, host) = (Arc::clone(&shared), host.clone());
            threads.push(std::thread::spawn(move || {
                in_namespace(&shared, host.as_ref(), |s| watch(s, index))
            }));
        }
        let (shared_p, host) = (Arc::clone(&shared), host);
        threads.push(std::thread::spawn(move || {
            in_namespace(&shared_p, host.as_ref(), |s| produce(s, request_timeout))
        }));
        Client { shared, threads }
    }

    /// Fails with the first error a thread stopped on.
    pub fn check(&self) -> Result<(), String> {
        match self.shared.error.lock().unwrap().as_ref() {
            Some(error) => Err(format!("the failover client stopped: {error}")),
            None => Ok(()),
        }
    }

    /// Stops the threads and waits for them (each looks at the flag within a tick or a
    /// connect timeout).
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `body` with the calling thread in `host`'s namespace (sockets made there stay there);
/// an error goes into `shared.error`.
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

fn sleep_unless_stopped(shared: &Shared, pause: Duration) {
    if !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(pause);
    }
}

/// Asks node `index` DescribeQuorum every [`WATCH_EVERY`] until stopped, keeping one
/// connection while it answers.
fn watch(shared: &Shared, index: usize) {
    let addr = shared.addrs[index];
    let mut client: Option<BlockingClient> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        if client.is_none() {
            client = BlockingClient::connect(addr, WATCH_TIMEOUT).ok();
        }
        let answer = client.as_mut().map(|c| c.describe_quorum());
        match answer {
            Some(Ok(d)) if d.leader_epoch >= 0 => {
                let view = View {
                    at: Instant::now(),
                    epoch: d.leader_epoch,
                    leader: (d.leader_id >= 0).then_some(d.leader_id),
                };
                shared.views.lock().unwrap()[index] = Some(view);
                shared
                    .max_epoch
                    .fetch_max(d.leader_epoch, Ordering::Relaxed);
            }
            // No answer, or one without an epoch: the node is starting, down or cut off.
            Some(_) => client = None,
            None => {}
        }
        sleep_unless_stopped(shared, WATCH_EVERY);
    }
}

/// Why the producer left a connection.
enum Left {
    Stopped,
    Closed,
    Refused,
    NewLeader,
    TimedOut,
}

/// Produces one record at a time to whichever node the watchers name, until stopped.
fn produce(shared: &Shared, request_timeout: Duration) {
    let mut next_seq = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let Some((leader, epoch)) = shared.leader() else {
            sleep_unless_stopped(shared, PRODUCER_TICK);
            continue;
        };
        // A leader id that is none of the cluster's (no node should name one) is no leader.
        let Some(index) = shared.ids.iter().position(|&id| id == leader) else {
            sleep_unless_stopped(shared, PRODUCER_TICK);
            continue;
        };
        let Ok(mut client) = BlockingClient::connect(shared.addrs[index], CONNECT_TIMEOUT) else {
            shared
                .counters
                .connect_failed
                .fetch_add(1, Ordering::Relaxed);
            sleep_unless_stopped(shared, PRODUCER_TICK);
            continue;
        };
        let left = produce_on(
            shared,
            &mut client,
            (leader, epoch),
            request_timeout,
            &mut next_seq,
        );
        let counter = match left {
            Left::Stopped => return,
            Left::Closed => &shared.counters.closed,
            Left::Refused => &shared.counters.refused,
            Left::NewLeader => &shared.counters.left_for_new_leader,
            Left::TimedOut => &shared.counters.timed_out,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if matches!(left, Left::Refused) {
            // The node is not (or no longer) the leader: give the watchers a tick to learn.
            sleep_unless_stopped(shared, PRODUCER_TICK);
        }
    }
}

/// Produces on one connection to `leader` (of `epoch`) until it must be left.
fn produce_on(
    shared: &Shared,
    client: &mut BlockingClient,
    (leader, epoch): (i32, i32),
    request_timeout: Duration,
    next_seq: &mut u64,
) -> Left {
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return Left::Stopped;
        }
        let seq = *next_seq;
        *next_seq += 1;
        let mut builder = RecordBatchBuilder::new(0, 0);
        builder.append(0, None, Some(value_of(seq).as_bytes()), &[]);
        let sent = Instant::now();
        if client
            .send_produce(PRODUCE_VERSION, -1, builder.build().freeze())
            .is_err()
        {
            return Left::Closed;
        }
        shared.counters.sent.fetch_add(1, Ordering::Relaxed);
        // Wait for the answer, looking at the watchers and the stop flag every tick.
        loop {
            match client.wait_readable(PRODUCER_TICK) {
                Ok(true) => break,
                Ok(false) => {}
                Err(_) => return Left::Closed,
            }
            if shared.stop.load(Ordering::Relaxed) {
                return Left::Stopped;
            }
            if sent.elapsed() >= request_timeout {
                return Left::TimedOut;
            }
            if shared
                .leader()
                .is_some_and(|(now, e)| now != leader && e > epoch)
            {
                return Left::NewLeader;
            }
        }
        let Ok((_, response)) = client.recv_produce(PRODUCE_VERSION) else {
            return Left::Closed;
        };
        let received = Instant::now();
        let Some(partition) = response.topics.first().and_then(|t| t.partitions.first()) else {
            return Left::Refused;
        };
        if !partition.error.is_none() {
            return Left::Refused;
        }
        shared.acks.lock().unwrap().push(Ack {
            at: received,
            node: leader,
            offset: partition.base_offset,
            seq,
        });
        shared.counters.acknowledged.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_is_named_in_the_highest_fresh_epoch() {
        let now = Instant::now() + Duration::from_secs(10);
        let view = |age_ms: u64, epoch: i32, leader: Option<i32>| {
            Some(View {
                at: now - Duration::from_millis(age_ms),
                epoch,
                leader,
            })
        };
        let fresh = Duration::from_secs(1);
        assert_eq!(pick_leader(&[None, None], now, fresh), None);
        // Two followers name 1 in epoch 3; a candidate is at 4 without a leader.
        let views = [
            view(10, 3, Some(1)),
            view(10, 3, Some(1)),
            view(10, 4, None),
        ];
        assert_eq!(pick_leader(&views, now, fresh), Some((1, 3)));
        // Node 2 wins epoch 4: its own answer names it.
        let views = [
            view(10, 3, Some(1)),
            view(10, 4, Some(2)),
            view(10, 4, None),
        ];
        assert_eq!(pick_leader(&views, now, fresh), Some((2, 4)));
        // A stale answer from a later epoch does not count.
        let views = [view(10, 3, Some(1)), view(1500, 5, Some(3)), None];
        assert_eq!(pick_leader(&views, now, fresh), Some((1, 3)));
    }
}
