//! Prometheus metrics (docs/operations.md, "Metrics"; docs/architecture.md, "Metrics").
//!
//! The raft thread and the log thread keep their figures in single-writer cells
//! (`engine::stats`): an update is an add to the thread's own memory, with no lock and no
//! locked instruction. The metrics thread (`http`) reads them at scrape time and renders the
//! OpenMetrics text through prometheus-client's encoder (`render`). Nothing here ever makes
//! the raft or log thread wait: the one lock they touch (the replica lags) is taken with
//! `try_lock`, and a scrape holding it only delays that publication to the next one.

mod http;
mod render;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use engine::io::{ReaderStats, WriterStats};
use engine::log::LogView;
use engine::raft::{ErrorCode, ReplicaLag, Role};
use engine::stats::{
    LocalCounter, LocalGauge, LocalHistogram, WindowedMax, ELECTION_MS_BOUNDS, LATENCY_US_BOUNDS,
};

pub use http::{HttpLimits, MetricsServer};
pub use render::render;

use super::counters::NodeCounters;
use crate::transport::Stats as TransportStats;

/// Api keys with a request counter of their own: Kafka's (below 112) by key, then the node's
/// private quorum RPCs (keys from 1000, docs/protocol.md section 13) in the last slots. A key
/// with no row in the API table is refused before it is counted.
pub const API_SLOTS: usize = 128;
const PRIVATE_BASE: i16 = 1000;
const PRIVATE_SLOTS: usize = 16;

/// The counter slot of `api_key` (None outside both ranges).
pub fn api_slot(api_key: i16) -> Option<usize> {
    let kafka = (API_SLOTS - PRIVATE_SLOTS) as i16;
    if (0..kafka).contains(&api_key) {
        Some(api_key as usize)
    } else if (PRIVATE_BASE..PRIVATE_BASE + PRIVATE_SLOTS as i16).contains(&api_key) {
        Some(API_SLOTS - PRIVATE_SLOTS + (api_key - PRIVATE_BASE) as usize)
    } else {
        None
    }
}

/// The api key of counter slot `slot` (the inverse of [`api_slot`]).
pub fn slot_api(slot: usize) -> i16 {
    assert!(slot < API_SLOTS);
    if slot < API_SLOTS - PRIVATE_SLOTS {
        slot as i16
    } else {
        PRIVATE_BASE + (slot - (API_SLOTS - PRIVATE_SLOTS)) as i16
    }
}
/// Error codes -1..=126 each have a response counter per api; others share the last slot.
pub const ERROR_SLOTS: usize = 128;
/// Kafka's metrics window for `*-max` (two samples of 30 s: `metrics.sample.window.ms`).
pub const MAX_WINDOW_MS: u64 = 30_000;
/// The raft thread refreshes the replica lags at most this often.
pub const LAG_PUBLISH_MS: u64 = 100;

/// The role as `ringraft_raft_current_state` labels it (Kafka's current-state values, plus
/// `prospective` for pre-vote and `resigned`).
pub fn state_name(role: Role, observer: bool) -> &'static str {
    if observer {
        return "observer";
    }
    match role {
        Role::Unattached => "unattached",
        Role::Voted => "voted",
        Role::Prospective => "prospective",
        Role::Candidate => "candidate",
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Resigned => "resigned",
    }
}

/// Every state name, in the order the state-set is rendered.
pub const STATES: &[&str] = &[
    "unattached",
    "voted",
    "prospective",
    "candidate",
    "leader",
    "follower",
    "resigned",
    "observer",
];

/// What the raft thread publishes. Every cell is written by the raft thread only.
#[derive(Debug)]
pub struct RaftMetrics {
    /// The clock both threads read for the windowed maxima.
    pub clock: Instant,
    /// Index into [`STATES`].
    pub state: LocalGauge,
    pub leader: LocalGauge,
    pub epoch: LocalGauge,
    pub vote: LocalGauge,
    pub high_watermark: LocalGauge,
    pub log_end_offset: LocalGauge,
    pub tail_cache_bytes: LocalGauge,
    pub open_connections: LocalGauge,
    pub unknown_voter_connections: LocalGauge,
    pub append_records: LocalCounter,
    pub fetch_records: LocalCounter,
    pub poll_idle_us: LocalCounter,
    pub leader_changes: LocalCounter,
    pub commit_latency_us: LocalHistogram,
    pub commit_latency_max_us: WindowedMax,
    pub election_latency_ms: LocalHistogram,
    pub election_latency_max_ms: WindowedMax,
    /// Published from [`NodeCounters`] and the transport's stats once per loop turn.
    pub node: PublishedCounters,
    /// Requests received, by api key.
    pub requests: Box<[LocalCounter]>,
    /// Responses by (api key, error code) of the APIs that answer one error per request or
    /// partition (the quorum RPCs, Produce).
    pub responses: Box<[LocalCounter]>,
    /// Leader only: the other voters' lags (empty elsewhere).
    pub replica_lags: Mutex<Vec<ReplicaLag>>,
    /// Written by the producer-state snapshot thread (its only writer): the offset of the
    /// newest snapshot it wrote this run (-1: none yet), and its failed writes.
    pub producer_snapshot_offset: LocalGauge,
    pub producer_snapshot_failures: LocalCounter,
}

/// The node's existing counters, as the metrics thread sees them.
#[derive(Debug, Default)]
pub struct PublishedCounters {
    pub wakeups: LocalCounter,
    pub produce_requests: LocalCounter,
    pub produce_batches: LocalCounter,
    pub fetch_data_responses: LocalCounter,
    pub log_reads: LocalCounter,
    pub refused_messages: LocalCounter,
    pub consumer_fetches: LocalCounter,
    pub accepted: LocalCounter,
    pub refused_connections: LocalCounter,
    pub refused_connections_per_ip: LocalCounter,
    pub frames_received: LocalCounter,
    pub bytes_received: LocalCounter,
    pub bytes_sent: LocalCounter,
}

impl PublishedCounters {
    pub fn publish(&self, node: &NodeCounters, transport: &TransportStats) {
        self.wakeups.publish(node.wakeups);
        self.produce_requests.publish(node.produce_requests);
        self.produce_batches.publish(node.produce_batches);
        self.fetch_data_responses.publish(node.fetch_data_responses);
        self.log_reads.publish(node.log_reads);
        self.refused_messages.publish(node.refused);
        self.consumer_fetches.publish(node.consumer_fetches);
        self.accepted.publish(transport.accepted);
        self.refused_connections.publish(transport.refused);
        self.refused_connections_per_ip
            .publish(transport.refused_per_ip);
        self.frames_received.publish(transport.frames_received);
        self.bytes_received.publish(transport.bytes_received);
        self.bytes_sent.publish(transport.bytes_sent);
    }
}

impl Default for RaftMetrics {
    fn default() -> Self {
        Self {
            clock: Instant::now(),
            state: LocalGauge::new(0),
            leader: LocalGauge::new(-1),
            epoch: LocalGauge::new(0),
            vote: LocalGauge::new(-1),
            high_watermark: LocalGauge::new(-1),
            log_end_offset: LocalGauge::new(0),
            tail_cache_bytes: LocalGauge::new(0),
            open_connections: LocalGauge::new(0),
            unknown_voter_connections: LocalGauge::new(0),
            append_records: LocalCounter::new(),
            fetch_records: LocalCounter::new(),
            poll_idle_us: LocalCounter::new(),
            leader_changes: LocalCounter::new(),
            commit_latency_us: LocalHistogram::new(LATENCY_US_BOUNDS),
            commit_latency_max_us: WindowedMax::new(MAX_WINDOW_MS),
            election_latency_ms: LocalHistogram::new(ELECTION_MS_BOUNDS),
            election_latency_max_ms: WindowedMax::new(MAX_WINDOW_MS),
            node: PublishedCounters::default(),
            requests: (0..API_SLOTS).map(|_| LocalCounter::new()).collect(),
            responses: (0..API_SLOTS * ERROR_SLOTS)
                .map(|_| LocalCounter::new())
                .collect(),
            replica_lags: Mutex::new(Vec::new()),
            producer_snapshot_offset: LocalGauge::new(-1),
            producer_snapshot_failures: LocalCounter::new(),
        }
    }
}

impl RaftMetrics {
    pub fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// Counts a request of `api_key` (the caller looked it up in the API table).
    #[inline]
    pub fn request(&self, api_key: i16) {
        if let Some(slot) = api_slot(api_key) {
            self.requests[slot].add(1);
        }
    }

    /// Counts a response of `api_key` carrying `error`.
    #[inline]
    pub fn response(&self, api_key: i16, error: ErrorCode) {
        if let Some(slot) = response_slot(api_key, error) {
            self.responses[slot].add(1);
        }
    }

    pub fn observe_commit(&self, micros: u64) {
        self.commit_latency_us.observe(micros);
        self.commit_latency_max_us.observe(self.now_ms(), micros);
    }

    pub fn observe_election(&self, millis: u64) {
        self.election_latency_ms.observe(millis);
        self.election_latency_max_ms.observe(self.now_ms(), millis);
    }

    /// Replaces the replica lags unless a scrape is reading them (then the next turn does).
    pub fn publish_lags(&self, lags: &[ReplicaLag]) {
        if let Ok(mut published) = self.replica_lags.try_lock() {
            published.clear();
            published.extend_from_slice(lags);
        }
    }
}

/// The cell of (api, error) in [`RaftMetrics::responses`]; None for a key outside the table.
pub fn response_slot(api_key: i16, error: ErrorCode) -> Option<usize> {
    let api = api_slot(api_key)?;
    let code = usize::try_from(i32::from(error.0) + 1)
        .unwrap_or(ERROR_SLOTS - 1)
        .min(ERROR_SLOTS - 1);
    Some(api * ERROR_SLOTS + code)
}

/// The error code of response slot `code_slot` (the last slot stands for every code above).
pub fn slot_error(code_slot: usize) -> i16 {
    (code_slot as i16) - 1
}

/// The start-up checks' results (docs/operations.md, "Start-up checks").
#[derive(Debug, Clone, Default)]
pub struct StartupReport {
    /// The slowest of the sync probe's 4 KiB write + fdatasync cycles, and of its RWF_DSYNC
    /// writes; None when the probe failed.
    pub fdatasync_probe: Option<std::time::Duration>,
    pub dsync_probe: Option<std::time::Duration>,
    /// How the writer makes groups durable (`log.sync.mode`, or what `auto` chose).
    pub sync_mode: Option<engine::io::SyncMode>,
    /// RLIMIT_MEMLOCK (None: unlimited) and what the writer registers.
    pub memlock_limit: Option<u64>,
    pub memlock_needed: u64,
    /// The O_DIRECT probe passed (the node does not start otherwise).
    pub o_direct: bool,
    /// Whether the writer's buffers ended up registered with its ring.
    pub registered_buffers: bool,
}

/// Everything a scrape reads.
pub struct Sources {
    pub node_id: i32,
    pub raft: Arc<RaftMetrics>,
    pub writer: Arc<WriterStats>,
    pub reader: Arc<ReaderStats>,
    pub view: Arc<LogView>,
    pub startup: StartupReport,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_of_the_table_has_a_slot_of_its_own() {
        let mut seen = std::collections::BTreeSet::new();
        for key in (0..200).chain(1000..1020) {
            if let Some(slot) = api_slot(key) {
                assert_eq!(slot_api(slot), key);
                assert!(seen.insert(slot), "slot {slot} twice");
            }
        }
        for key in [0, 1, 3, 55, 1000, 1001, 1002] {
            assert!(api_slot(key).is_some(), "{key}");
        }
        assert_eq!(api_slot(-1), None);
        assert_eq!(api_slot(500), None);
    }
}
