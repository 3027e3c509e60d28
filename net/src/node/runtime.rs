//! The raft thread: one io_uring event loop that owns every socket, the Raft core and its
//! timers, and hands log operations to the group-commit writer thread.
//!
//! Loop: poll the ring until the core's next deadline → decode each frame → step the core →
//! carry out its outputs in order (persist the election state, send, respond, hand log ops to
//! the writer) → the writer's durable reports come back through its eventfd.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use engine::fail_stop::{exit_on_any_panic, fail_stop, EXIT_CORE, EXIT_QUORUM_STATE};
use engine::io::{exit_on_fatal, GroupCommitWriter, WriterConfig, WriterEvent, WriterRequest};
use engine::log::{Log, LogConfig};
use engine::quorum_state_store::QuorumStateStore;
use engine::raft::{
    bootstrap_server_id, Acks, AppendResult, Batch, Correlation, ErrorCode, Input, LogOp,
    LogOpKind, NodeId, Output, RaftCore, Request, Response, Role, VoterEndpoint,
};
use engine::record::BatchView;
use tracing::{debug, info, warn};

use super::api_table::{self, API_TABLE};
use super::config::NodeConfig;
use super::counters::{NodeCounters, NodeStatsLine};
use super::lock::DirLock;
use super::resolver::Resolver;
use super::signals::ShutdownSignals;
use super::stepping::{CoreDriver, InputQueue};
use crate::transport::{ConnId, Event, EventLoop, WatchId};
use crate::wire::api::{self, ApiSpec};
use crate::wire::frame::size_prefix;
use crate::wire::kafka::{
    ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse, ProducePartitionResponse,
    ProduceRequest, ProduceResponse, ProduceTopicResponse, PRODUCE_SPEC,
};
use crate::wire::quorum::{self, METADATA_PARTITION, METADATA_TOPIC};
use crate::wire::{RequestHeader, RequestPrefix, ResponseHeader, WireReader, WireWriter};

/// Why a node could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("creating the log directory {path}: {source}")]
    LogDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Lock(#[from] super::lock::LockError),
    #[error(transparent)]
    StartupCheck(#[from] super::startup_checks::StartupCheckError),
    #[error("quorum-state file: {0}")]
    QuorumState(#[from] engine::quorum_state_store::QuorumStateError),
    #[error("opening the log: {0}")]
    Log(#[from] engine::log::LogError),
    #[error("starting the Raft core: {0}")]
    Core(#[from] engine::raft::InitError),
    #[error("starting the log writer: {0}")]
    Writer(#[from] engine::io::WriterError),
    #[error("transport: {0}")]
    Transport(#[from] crate::transport::TransportError),
    #[error("listener address {0}: {1}")]
    Listener(String, std::io::Error),
    #[error("voter {0}: cannot resolve its address: {1}")]
    VoterAddress(String, std::io::Error),
    #[error("bootstrap server {0}: cannot resolve its address: {1}")]
    BootstrapAddress(String, std::io::Error),
    #[error("pinning the raft thread: {0}")]
    Pin(#[from] engine::os::file::PinError),
    #[error("installing the SIGTERM/SIGINT handler: {0}")]
    Signals(std::io::Error),
}

/// The first reconnection delay to a peer, doubled per failure up to [`MAX_RECONNECT`].
const MIN_RECONNECT: Duration = Duration::from_millis(50);
const MAX_RECONNECT: Duration = Duration::from_secs(1);
/// Bytes queued on one connection beyond which it is closed (a reader that stopped reading).
const MAX_QUEUED_SEND_BYTES: usize = 256 << 20;
/// A graceful shutdown stops waiting for a successor after the core's shutdown timeout plus this.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Produce deadlines are checked on this coarse tick (node time, ms): every deadline inside one
/// tick shares one wake-up, and no timer is armed per request.
const PRODUCE_TIMEOUT_TICK_MS: u64 = 10;

/// An outbound connection to a peer voter (or a bootstrap server, under the pseudo node id the
/// core gives it) and the requests in flight on it.
struct Peer {
    id: NodeId,
    addr: SocketAddr,
    conn: Option<ConnId>,
    /// No connection attempt before this (backoff after a failure).
    retry_at: Instant,
    backoff: Duration,
    /// Wire correlation id → (core correlation, api key, sent at).
    in_flight: BTreeMap<i32, (Correlation, i16, Instant)>,
}

impl Peer {
    fn new(id: NodeId, addr: SocketAddr, now: Instant) -> Self {
        Peer {
            id,
            addr,
            conn: None,
            retry_at: now,
            backoff: MIN_RECONNECT,
            in_flight: BTreeMap::new(),
        }
    }
}

/// Endpoint probes (FindQuorum on connections of their own) in flight at most.
const MAX_PROBES: usize = 16;
/// Distinct senders whose refused messages are logged; beyond that they are only counted.
const MAX_REFUSED_LOGGED: usize = 1024;

/// A probe of an advertised voter endpoint: one FindQuorum on a connection of its own, whose
/// answer the core checks before it uses the endpoint (engine's raft/endpoints.rs).
struct Probe {
    voter_id: NodeId,
    correlation: Correlation,
    wire_correlation: i32,
    addr: SocketAddr,
    endpoint: (String, i32),
    started: Instant,
}

/// A probe waiting for its host name to resolve.
struct UnresolvedProbe {
    correlation: Correlation,
    endpoint: VoterEndpoint,
    request: Request,
}

/// An inbound request waiting for the core's answer.
struct PendingRequest {
    conn: ConnId,
    /// Its slot in the connection's [`ResponseQueue`].
    seq: u64,
    correlation_id: i32,
    spec: &'static ApiSpec,
    version: i16,
}

/// One partition of a Produce request: topic, partition index, and its outcome (error, base
/// offset) once known.
type ProduceSlot = (String, i32, Option<(ErrorCode, i64)>);

/// A Produce request waiting for the outcome of its appends.
struct PendingProduce {
    conn: ConnId,
    /// Its slot in the connection's [`ResponseQueue`].
    seq: u64,
    correlation_id: i32,
    version: i16,
    /// One entry per partition in request order; None while its append is outstanding.
    partitions: Vec<ProduceSlot>,
    outstanding: usize,
    /// Node time (ms) at which the outstanding partitions are answered REQUEST_TIMED_OUT: the
    /// request's `timeout_ms` after it arrived.
    deadline_ms: u64,
}

/// The responses owed on one inbound connection, released in request order: Kafka clients match
/// each response to their oldest request in flight (docs/protocol.md section 13), while the core
/// answers as things complete (a Produce waits for the high watermark, a DescribeQuorum does not).
#[derive(Debug, Default)]
struct ResponseQueue {
    /// The sequence number of `slots[0]`.
    head: u64,
    /// One slot per request still owed a response, in arrival order; Some once answered.
    slots: VecDeque<Option<Vec<Bytes>>>,
}

impl ResponseQueue {
    /// A slot for the next request; its response is released after every earlier one.
    fn reserve(&mut self) -> u64 {
        self.slots.push_back(None);
        self.head + self.slots.len() as u64 - 1
    }

    fn fill(&mut self, seq: u64, chain: Vec<Bytes>) {
        assert!(seq >= self.head, "slot {seq} was released already");
        let slot = &mut self.slots[(seq - self.head) as usize];
        assert!(slot.is_none(), "slot {seq} answered twice");
        *slot = Some(chain);
    }

    /// The oldest response if it is ready (then every earlier one went out before it).
    fn pop_ready(&mut self) -> Option<Vec<Bytes>> {
        if !matches!(self.slots.front(), Some(Some(_))) {
            return None;
        }
        self.head += 1;
        self.slots.pop_front().flatten()
    }
}

/// A running node. Build with [`Node::start`], then [`Node::run`] until shutdown.
pub struct Node {
    config: NodeConfig,
    _lock: DirLock,
    quorum_state: QuorumStateStore,
    core: RaftCore,
    writer: Option<GroupCommitWriter>,
    ring: EventLoop,
    writer_watch: WatchId,
    signal_watch: WatchId,
    _signals: ShutdownSignals,
    started: Instant,
    local_addr: SocketAddr,
    peers: Vec<Peer>,
    /// Connection → peer index, for outbound connections.
    peer_conns: BTreeMap<ConnId, usize>,
    /// Connection → the endpoint probe it carries.
    probes: BTreeMap<ConnId, Probe>,
    /// Probes whose host name is being looked up, by lookup token.
    unresolved_probes: BTreeMap<u64, UnresolvedProbe>,
    next_lookup_token: u64,
    resolver: Resolver,
    /// Where probes reached each (voter, host, port): the endpoint change that follows a probe
    /// that vouched needs no second lookup.
    probed_addrs: BTreeMap<(NodeId, String, i32), SocketAddr>,
    /// Inbound connection → the peer's address, for the log line of a refused request.
    inbound_addrs: BTreeMap<ConnId, SocketAddr>,
    /// Senders whose refused messages were logged already (once each).
    refused_logged: BTreeSet<String>,
    next_wire_correlation: i32,
    next_request_id: u64,
    requests: BTreeMap<u64, PendingRequest>,
    /// Inbound connection → the responses it is owed, in request order.
    inbound: BTreeMap<ConnId, ResponseQueue>,
    next_produce_id: u64,
    produces: BTreeMap<u64, PendingProduce>,
    /// (deadline ms, produce id) of every Produce with appends outstanding.
    produce_deadlines: BTreeSet<(u64, u64)>,
    /// Client append id → (produce id, partition slot).
    appends: BTreeMap<u64, (u64, usize)>,
    next_append_id: u64,
    shutdown_deadline: Option<Instant>,
    shutdown_done: bool,
    /// Inputs for the core: stepping is never re-entrant (stepping.rs).
    inputs: InputQueue,
    counters: NodeCounters,
}

fn boot_seed(node_id: NodeId) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(node_id as u32) << 32) ^ u64::from(std::process::id())
}

impl Node {
    /// Start-up: lock the log directory, check and read the quorum-state file, recover the log,
    /// start the writer thread, listen. Every failure is a typed error that names its cause.
    pub fn start(config: NodeConfig) -> Result<Node, NodeError> {
        std::fs::create_dir_all(&config.log_dir).map_err(|source| NodeError::LogDir {
            path: config.log_dir.clone(),
            source,
        })?;
        let lock = DirLock::acquire(&config.log_dir)?;
        let log_config = LogConfig {
            segment_bytes: config.segment_bytes,
            ..LogConfig::default()
        };
        // After the lock: the O_DIRECT probe writes a file in the directory.
        super::startup_checks::run(&config, &log_config)?;
        probe_fdatasync(&config.log_dir);
        let quorum_state =
            QuorumStateStore::open(&config.log_dir, config.broker_id, config.cluster_id.clone())?;
        let stored = quorum_state.read()?;
        let log = Log::open(&config.log_dir, log_config)?;
        let snapshot = log.snapshot();
        info!(
            node = config.broker_id,
            end_offset = snapshot.end_offset,
            stored = ?stored,
            "recovered the log"
        );
        let started = Instant::now();
        let mut raft_config = config.raft_config(boot_seed(config.broker_id));
        raft_config.boot_timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        // Without quorum.voters the core learns the voter set from these (FindQuorum).
        raft_config.bootstrap_servers = config.bootstrap_servers.len();
        let core = RaftCore::new(raft_config, stored, snapshot, 0)?;
        // Signals first, so every thread spawned later shares the handler.
        let signals = ShutdownSignals::install().map_err(NodeError::Signals)?;
        let writer = GroupCommitWriter::start(
            log,
            WriterConfig {
                cpu: config.log_cpu,
                read_bytes_per_sec: config.log_read_bytes_per_sec,
                ..WriterConfig::default()
            },
        )?;
        if let Some(cpu) = config.raft_cpu {
            engine::os::file::pin_current_thread(cpu)?;
        }
        let mut ring = EventLoop::new(crate::transport::Config {
            max_frame_bytes: config.max_request_bytes,
            ..crate::transport::Config::default()
        })?;
        let listen_addr = resolve(&config.listener.0, config.listener.1).map_err(|e| {
            NodeError::Listener(format!("{}:{}", config.listener.0, config.listener.1), e)
        })?;
        let listener = ring.listen(listen_addr)?;
        let local_addr = ring.local_addr(listener)?;
        let writer_watch = ring.watch_eventfd(writer.eventfd())?;
        let signal_watch = ring.watch_eventfd(signals.eventfd())?;
        let mut peers = config
            .voters
            .iter()
            .filter(|v| v.id != config.broker_id)
            .map(|v| {
                let addr = v
                    .socket_addr()
                    .map_err(|e| NodeError::VoterAddress(v.to_string(), e))?;
                Ok(Peer::new(v.id, addr, started))
            })
            .collect::<Result<Vec<_>, NodeError>>()?;
        // The core addresses bootstrap server i by a pseudo node id (FindQuorum only).
        for (index, (host, port)) in config.bootstrap_servers.iter().enumerate() {
            let addr = resolve(host, *port)
                .map_err(|e| NodeError::BootstrapAddress(format!("{host}:{port}"), e))?;
            peers.push(Peer::new(bootstrap_server_id(index), addr, started));
        }
        info!(node = config.broker_id, %local_addr, "listening");
        Ok(Node {
            config,
            _lock: lock,
            quorum_state,
            core,
            writer: Some(writer),
            ring,
            writer_watch,
            signal_watch,
            _signals: signals,
            started,
            local_addr,
            peers,
            peer_conns: BTreeMap::new(),
            probes: BTreeMap::new(),
            unresolved_probes: BTreeMap::new(),
            next_lookup_token: 0,
            resolver: Resolver::default(),
            probed_addrs: BTreeMap::new(),
            inbound_addrs: BTreeMap::new(),
            refused_logged: BTreeSet::new(),
            next_wire_correlation: 1,
            next_request_id: 1,
            requests: BTreeMap::new(),
            inbound: BTreeMap::new(),
            next_produce_id: 1,
            produces: BTreeMap::new(),
            produce_deadlines: BTreeSet::new(),
            appends: BTreeMap::new(),
            next_append_id: 1,
            shutdown_deadline: None,
            shutdown_done: false,
            inputs: InputQueue::default(),
            counters: NodeCounters::default(),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs until a graceful shutdown finishes (SIGTERM/SIGINT). Fatal conditions exit the
    /// process (fail-stop) rather than return.
    pub fn run(mut self) -> Result<(), NodeError> {
        let mut events = Vec::new();
        self.step(Input::Tick { now: 0 });
        while !self.shutdown_done {
            let timeout = self.poll_timeout();
            self.ring.poll(Some(timeout), &mut events)?;
            self.counters.wakeups += 1;
            self.counters.events += events.len() as u64;
            // The core reads time only from ticks: tick once per wake-up, before the events,
            // so the timers it arms for them start from the present (not the last deadline).
            let now = self.now_ms();
            self.step(Input::Tick { now });
            for event in events.drain(..) {
                self.on_event(event);
            }
            self.drain_writer();
            self.expire_produces(self.now_ms());
            self.tend_probes();
            if self.shutdown_deadline.is_some_and(|d| Instant::now() >= d) {
                warn!("graceful shutdown timed out; stopping anyway");
                self.shutdown_done = true;
            }
        }
        self.finish_shutdown();
        Ok(())
    }

    fn poll_timeout(&self) -> Duration {
        let now = self.now_ms();
        let core_wait = self
            .core
            .next_deadline()
            .map(|d| Duration::from_millis(d.saturating_sub(now)))
            .unwrap_or(Duration::from_millis(100));
        let produce_wait = self
            .produce_deadlines
            .first()
            .map(|&(deadline, _)| {
                let tick = deadline.div_ceil(PRODUCE_TIMEOUT_TICK_MS) * PRODUCE_TIMEOUT_TICK_MS;
                Duration::from_millis(tick.saturating_sub(now))
            })
            .unwrap_or(Duration::MAX);
        core_wait.min(produce_wait).min(Duration::from_millis(100))
    }

    /// Lets queued sends (EndQuorumEpoch, last responses) go out, then stops the writer cleanly.
    fn finish_shutdown(&mut self) {
        let until = Instant::now() + Duration::from_millis(200);
        let mut events = Vec::new();
        while Instant::now() < until {
            if self
                .ring
                .poll(Some(Duration::from_millis(20)), &mut events)
                .is_err()
            {
                break;
            }
            events.clear();
        }
        if let Some(writer) = self.writer.take() {
            let stats = NodeStatsLine {
                node: &self.counters,
                transport: self.ring.stats(),
                writer: writer.stats(),
            };
            info!(target: "ringraft::stats", node = self.config.broker_id, "node stats: {stats}");
            writer.shutdown();
        }
        info!(node = self.config.broker_id, "stopped");
    }

    // ---- core -------------------------------------------------------------------------------

    fn writer(&self) -> &GroupCommitWriter {
        self.writer.as_ref().expect("writer runs until shutdown")
    }

    fn drain_writer(&mut self) {
        loop {
            let event = match self.writer().events().try_recv() {
                Ok(event) => event,
                Err(_) => return,
            };
            tracing::trace!(?event, "writer");
            match event {
                WriterEvent::Durable { up_to_seq, .. } => {
                    self.step(Input::LogDurable { up_to_seq });
                }
                WriterEvent::ReadDone { read_id, result } => {
                    let batches = match result {
                        Ok(pieces) => to_batches(pieces),
                        Err(error) => {
                            warn!(%error, "log read failed");
                            Vec::new()
                        }
                    };
                    self.step(Input::LogReadDone { read_id, batches });
                }
                WriterEvent::Fatal(error) => exit_on_fatal(&error),
                WriterEvent::Stopped { .. } => {}
            }
        }
    }

    // ---- events -----------------------------------------------------------------------------

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Accepted { conn, peer, .. } => {
                debug!(?conn, %peer, "accepted");
                self.inbound.insert(conn, ResponseQueue::default());
                self.inbound_addrs.insert(conn, peer);
            }
            Event::Connected { conn } => {
                if let Some(&index) = self.peer_conns.get(&conn) {
                    self.peers[index].backoff = MIN_RECONNECT;
                    debug!(peer = self.peers[index].id, "connected");
                }
            }
            Event::ConnectFailed { conn, error } => {
                debug!(?conn, %error, "connect failed");
                if !self.probe_gone(conn) {
                    self.peer_gone(conn);
                }
            }
            Event::Closed { conn, reason } => {
                debug!(?conn, %reason, "closed");
                if self.probe_gone(conn) {
                    return;
                }
                if self.peer_conns.contains_key(&conn) {
                    self.peer_gone(conn);
                } else {
                    self.inbound_gone(conn);
                }
            }
            Event::Frame { conn, bytes } => {
                if self.probes.contains_key(&conn) {
                    self.on_probe_frame(conn, bytes);
                } else if self.peer_conns.contains_key(&conn) {
                    self.on_response_frame(conn, bytes);
                } else {
                    self.on_request_frame(conn, bytes);
                }
            }
            Event::TimerFired { .. } => {}
            Event::EventFd { id, .. } => {
                if id == self.signal_watch {
                    self.begin_shutdown();
                } else {
                    debug_assert_eq!(id, self.writer_watch);
                }
            }
        }
    }

    fn begin_shutdown(&mut self) {
        if self.shutdown_deadline.is_some() {
            return;
        }
        info!(node = self.config.broker_id, "shutting down (signal)");
        let timeout = Duration::from_millis(self.config.raft_config(0).shutdown_timeout_ms);
        self.shutdown_deadline = Some(Instant::now() + timeout + SHUTDOWN_GRACE);
        self.step(Input::Shutdown);
    }

    fn close(&mut self, conn: ConnId, why: &str) {
        debug!(?conn, why, "closing connection");
        let _ = self.ring.close(conn);
    }

    /// An inbound connection closed: its pending requests can no longer be answered.
    fn inbound_gone(&mut self, conn: ConnId) {
        self.inbound.remove(&conn);
        self.inbound_addrs.remove(&conn);
        self.requests.retain(|_, r| r.conn != conn);
        let deadlines = &mut self.produce_deadlines;
        self.produces.retain(|&id, p| {
            if p.conn == conn {
                deadlines.remove(&(p.deadline_ms, id));
            }
            p.conn != conn
        });
    }

    /// A slot for the response to a request just read from `conn`.
    fn reserve_response(&mut self, conn: ConnId) -> u64 {
        self.inbound.entry(conn).or_default().reserve()
    }

    /// Queues the response to request `seq` of `conn` (a chain whose first piece starts with 4
    /// placeholder bytes for the size) and sends every response that is now at the head.
    fn deliver(&mut self, conn: ConnId, seq: u64, chain: Vec<Bytes>) {
        let Some(queue) = self.inbound.get_mut(&conn) else {
            return; // the connection closed meanwhile
        };
        queue.fill(seq, chain);
        while let Some(ready) = self
            .inbound
            .get_mut(&conn)
            .and_then(ResponseQueue::pop_ready)
        {
            self.send_frame(conn, ready);
        }
    }

    // ---- peers ------------------------------------------------------------------------------

    fn send_to_peer(&mut self, to: NodeId, correlation: Correlation, request: Request) {
        let Some(index) = self.peers.iter().position(|p| p.id == to) else {
            warn!(to, "request to a node whose address is unknown");
            self.step(Input::RequestFailed { to, correlation });
            return;
        };
        let Some(conn) = self.peer_conn(index) else {
            self.step(Input::RequestFailed { to, correlation });
            return;
        };
        let api_key = request.api_key();
        let (wire_correlation, frame) = self.request_frame(&request);
        if self.ring.send(conn, vec![frame]).is_err() {
            self.step(Input::RequestFailed { to, correlation });
            return;
        }
        self.bound_send_queue(conn);
        tracing::trace!(to, api_key, wire_correlation, ?request, "send");
        let now = Instant::now();
        let peer = &mut self.peers[index];
        // The core has long since timed out (and retried) a request unanswered for twice its
        // request timeout; a peer that is paused but connected must not grow this map forever.
        let stale = Duration::from_millis(2 * self.config.request_timeout_ms);
        peer.in_flight
            .retain(|_, (_, _, sent)| now.duration_since(*sent) < stale);
        peer.in_flight
            .insert(wire_correlation, (correlation, api_key, now));
    }

    /// A quorum request as one frame, under a fresh wire correlation id.
    fn request_frame(&mut self, request: &Request) -> (i32, Bytes) {
        let wire_correlation = self.next_wire_correlation;
        self.next_wire_correlation = self.next_wire_correlation.wrapping_add(1).max(1);
        let mut w = WireWriter::with_capacity(128);
        w.i32(0); // size, filled below
        RequestHeader {
            api_key: request.api_key(),
            api_version: 0,
            correlation_id: wire_correlation,
            client_id: Some(format!("ringraft-{}", self.config.broker_id)),
        }
        .write(&mut w, true);
        quorum::encode_request(request, &mut w);
        let mut frame = w.into_inner();
        let size = size_prefix(frame.len() - 4);
        frame[..4].copy_from_slice(&size);
        (wire_correlation, frame.freeze())
    }

    // ---- endpoint probes ----------------------------------------------------------------------

    /// The core wants an advertised endpoint checked before it is used: one FindQuorum there, on
    /// a connection of its own. A host name is looked up off this thread.
    fn start_probe(&mut self, correlation: Correlation, endpoint: VoterEndpoint, request: Request) {
        let to = endpoint.voter_id;
        let busy = self.probes.len() + self.unresolved_probes.len() >= MAX_PROBES;
        let Ok(port) = u16::try_from(endpoint.port) else {
            return self.step(Input::RequestFailed { to, correlation });
        };
        if busy {
            debug!(peer = to, "too many endpoint probes in flight");
            return self.step(Input::RequestFailed { to, correlation });
        }
        let token = self.next_lookup_token;
        self.next_lookup_token += 1;
        let lookup = self.resolver.resolve(token, &endpoint.host, port);
        let probe = UnresolvedProbe {
            correlation,
            endpoint,
            request,
        };
        match lookup {
            Some(result) => self.connect_probe(probe, result),
            None => {
                self.unresolved_probes.insert(token, probe);
            }
        }
    }

    fn connect_probe(&mut self, probe: UnresolvedProbe, addr: std::io::Result<SocketAddr>) {
        let to = probe.endpoint.voter_id;
        let correlation = probe.correlation;
        let addr = match addr {
            Ok(addr) => addr,
            Err(error) => {
                debug!(peer = to, host = %probe.endpoint.host, %error, "probe: cannot resolve");
                return self.step(Input::RequestFailed { to, correlation });
            }
        };
        let conn = match self.ring.connect(addr) {
            Ok(conn) => conn,
            Err(error) => {
                debug!(peer = to, %addr, %error, "probe: connect");
                return self.step(Input::RequestFailed { to, correlation });
            }
        };
        let (wire_correlation, frame) = self.request_frame(&probe.request);
        if self.ring.send(conn, vec![frame]).is_err() {
            let _ = self.ring.close(conn);
            return self.step(Input::RequestFailed { to, correlation });
        }
        debug!(peer = to, %addr, "probing an advertised endpoint");
        self.probes.insert(
            conn,
            Probe {
                voter_id: to,
                correlation,
                wire_correlation,
                addr,
                endpoint: (probe.endpoint.host, probe.endpoint.port),
                started: Instant::now(),
            },
        );
    }

    /// Each loop turn: probes whose lookup finished connect; probes unanswered for twice the
    /// request timeout (the core gave up on them) are closed.
    fn tend_probes(&mut self) {
        for (token, result) in self.resolver.finished() {
            if let Some(probe) = self.unresolved_probes.remove(&token) {
                self.connect_probe(probe, result);
            }
        }
        let stale = Duration::from_millis(2 * self.config.request_timeout_ms);
        let expired: Vec<ConnId> = self
            .probes
            .iter()
            .filter(|(_, p)| p.started.elapsed() > stale)
            .map(|(conn, _)| *conn)
            .collect();
        for conn in expired {
            let _ = self.ring.close(conn);
            self.probe_gone(conn);
        }
    }

    /// A probe's connection failed or closed before an answer. False if `conn` is no probe.
    fn probe_gone(&mut self, conn: ConnId) -> bool {
        let Some(probe) = self.probes.remove(&conn) else {
            return false;
        };
        self.step(Input::RequestFailed {
            to: probe.voter_id,
            correlation: probe.correlation,
        });
        true
    }

    fn on_probe_frame(&mut self, conn: ConnId, bytes: Bytes) {
        let Some(probe) = self.probes.remove(&conn) else {
            return;
        };
        let _ = self.ring.close(conn);
        let (to, correlation) = (probe.voter_id, probe.correlation);
        let mut r = WireReader::new(bytes);
        let answered = ResponseHeader::read(&mut r, true)
            .ok()
            .filter(|h| h.correlation_id == probe.wire_correlation)
            .and_then(|_| quorum::decode_response(api::FIND_QUORUM, &mut r).ok());
        let Some(response) = answered else {
            debug!(peer = to, addr = %probe.addr, "probe: no usable answer");
            return self.step(Input::RequestFailed { to, correlation });
        };
        if self.probed_addrs.len() >= MAX_PROBES {
            self.probed_addrs.clear();
        }
        let (host, port) = probe.endpoint;
        self.probed_addrs.insert((to, host, port), probe.addr);
        self.step(Input::Response {
            from: to,
            correlation,
            response,
        });
    }

    /// Logs a refused message once per sender (by address where the transport knows it), and
    /// counts every one.
    fn log_refusal(&mut self, request: Option<u64>, peer: Option<NodeId>, reason: &str) {
        self.counters.refused += 1;
        let addr = request
            .and_then(|id| self.requests.get(&id))
            .and_then(|pending| self.inbound_addrs.get(&pending.conn));
        let sender = match (addr, peer) {
            (Some(addr), _) => addr.ip().to_string(),
            (None, Some(peer)) => format!("node {peer}"),
            (None, None) => "an unknown sender".to_string(),
        };
        if self.refused_logged.len() < MAX_REFUSED_LOGGED
            && self.refused_logged.insert(sender.clone())
        {
            warn!(
                node = self.config.broker_id,
                from = %sender,
                reason,
                "refused a message no honest node sends (logged once per sender; all are counted \
                 in node stats as refused); see docs/operations.md, \"Hostile input\""
            );
        }
    }

    /// FindQuorum taught the core a voter's endpoint: a voter this node had no address for (an
    /// observer started with bootstrap.servers alone), or one that now listens elsewhere (it
    /// restarted with a newer boot timestamp): connect there from now on; requests in flight on
    /// an old connection fail and are retried.
    fn peer_moved(&mut self, endpoint: &VoterEndpoint) {
        if endpoint.voter_id == self.config.broker_id {
            return;
        }
        let Ok(port) = u16::try_from(endpoint.port) else {
            warn!(
                peer = endpoint.voter_id,
                port = endpoint.port,
                "advertised port out of range"
            );
            return;
        };
        let probed =
            self.probed_addrs
                .get(&(endpoint.voter_id, endpoint.host.clone(), endpoint.port));
        let addr = match probed.map_or_else(|| resolve(&endpoint.host, port), |a| Ok(*a)) {
            Ok(addr) => addr,
            Err(error) => {
                warn!(peer = endpoint.voter_id, host = %endpoint.host, %error, "cannot resolve");
                return;
            }
        };
        let Some(index) = self.peers.iter().position(|p| p.id == endpoint.voter_id) else {
            info!(peer = endpoint.voter_id, %addr, "voter endpoint learned");
            self.peers
                .push(Peer::new(endpoint.voter_id, addr, Instant::now()));
            return;
        };
        if self.peers[index].addr == addr {
            return;
        }
        info!(peer = endpoint.voter_id, %addr, "voter endpoint changed");
        self.peers[index].addr = addr;
        self.peers[index].retry_at = Instant::now();
        if let Some(conn) = self.peers[index].conn {
            if let Err(error) = self.ring.close(conn) {
                debug!(peer = endpoint.voter_id, %error, "closing the old connection");
            }
            self.peer_gone(conn);
        }
    }

    /// The connection to peer `index`, opening one if none is open and the backoff allows.
    fn peer_conn(&mut self, index: usize) -> Option<ConnId> {
        let peer = &mut self.peers[index];
        if let Some(conn) = peer.conn {
            return Some(conn);
        }
        let now = Instant::now();
        if now < peer.retry_at {
            return None;
        }
        match self.ring.connect(peer.addr) {
            Ok(conn) => {
                peer.conn = Some(conn);
                peer.retry_at = now + peer.backoff;
                peer.backoff = (peer.backoff * 2).min(MAX_RECONNECT);
                self.peer_conns.insert(conn, index);
                Some(conn)
            }
            Err(error) => {
                warn!(peer = peer.id, %error, "connect");
                peer.retry_at = now + peer.backoff;
                None
            }
        }
    }

    /// A peer connection failed or closed: every request in flight on it failed.
    fn peer_gone(&mut self, conn: ConnId) {
        let Some(index) = self.peer_conns.remove(&conn) else {
            return;
        };
        let peer = &mut self.peers[index];
        if peer.conn == Some(conn) {
            peer.conn = None;
        }
        let to = peer.id;
        let failed = std::mem::take(&mut peer.in_flight);
        for (correlation, _, _) in failed.into_values() {
            tracing::trace!(to, correlation, "request failed");
            self.step(Input::RequestFailed { to, correlation });
        }
    }

    fn on_response_frame(&mut self, conn: ConnId, bytes: Bytes) {
        let index = self.peer_conns[&conn];
        let mut r = WireReader::new(bytes);
        let Ok(header) = ResponseHeader::read(&mut r, true) else {
            self.close(conn, "unreadable response header");
            return;
        };
        let Some((correlation, api_key, _)) =
            self.peers[index].in_flight.remove(&header.correlation_id)
        else {
            // Pruned as stale: the core gave up on it long ago.
            debug!(peer = self.peers[index].id, "late response dropped");
            return;
        };
        let from = self.peers[index].id;
        let decoded = quorum::decode_response(api_key, &mut r);
        tracing::trace!(from, api_key, ?decoded, "response");
        match decoded {
            Ok(response) => self.step(Input::Response {
                from,
                correlation,
                response,
            }),
            Err(error) => {
                warn!(from, %error, "undecodable response");
                self.step(Input::RequestFailed {
                    to: from,
                    correlation,
                });
                self.close(conn, "undecodable response");
            }
        }
    }

    // ---- inbound requests -------------------------------------------------------------------

    fn on_request_frame(&mut self, conn: ConnId, bytes: Bytes) {
        let mut r = WireReader::new(bytes);
        let Ok(prefix) = RequestPrefix::read(&mut r) else {
            self.close(conn, "short request");
            return;
        };
        let Some(row) = api_table::row(prefix.api_key) else {
            self.close(conn, "unknown api key");
            return;
        };
        let spec = &row.spec;
        if !spec.supports(prefix.api_version) {
            if spec.key == api::API_VERSIONS {
                let seq = self.reserve_response(conn);
                self.answer_api_versions(conn, seq, prefix.correlation_id, 0, true);
            } else {
                self.close(conn, "unsupported api version");
            }
            return;
        }
        let flexible = spec.is_flexible(prefix.api_version);
        let Ok(header) = RequestHeader::read_rest(&mut r, prefix, flexible) else {
            self.close(conn, "bad request header");
            return;
        };
        (row.handler)(self, conn, &header, spec, r);
    }

    // ---- handlers (rows of api_table.rs) ------------------------------------------------------

    pub(super) fn handle_api_versions(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        _spec: &'static ApiSpec,
        mut r: WireReader,
    ) {
        if ApiVersionsRequest::decode(&mut r, header.api_version).is_err() {
            self.close(conn, "bad ApiVersions body");
            return;
        }
        let seq = self.reserve_response(conn);
        self.answer_api_versions(conn, seq, header.correlation_id, header.api_version, false);
    }

    pub(super) fn handle_produce(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        _spec: &'static ApiSpec,
        mut r: WireReader,
    ) {
        match ProduceRequest::decode(&mut r, header.api_version) {
            Ok(request) => self.on_produce(conn, header, request),
            Err(_) => self.close(conn, "bad Produce body"),
        }
    }

    /// A quorum RPC goes to the core; its answer comes back as `Output::Respond`.
    pub(super) fn handle_quorum_request(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        spec: &'static ApiSpec,
        mut r: WireReader,
    ) {
        let request = match quorum::decode_request(spec.key, &mut r) {
            Ok(request) => request,
            Err(error) => {
                debug!(%error, "undecodable quorum request");
                self.close(conn, "bad quorum request body");
                return;
            }
        };
        tracing::trace!(?request, "request");
        let id = self.next_request_id;
        self.next_request_id += 1;
        let seq = self.reserve_response(conn);
        self.requests.insert(
            id,
            PendingRequest {
                conn,
                seq,
                correlation_id: header.correlation_id,
                spec,
                version: header.api_version,
            },
        );
        self.step(Input::Request {
            id,
            from: None,
            request,
        });
    }

    fn respond(&mut self, id: u64, response: &Response) {
        tracing::trace!(id, ?response, "respond");
        let Some(pending) = self.requests.remove(&id) else {
            return; // the connection closed meanwhile
        };
        if let Response::FetchQuorumRecords(fetch) = response {
            if !fetch.batches.is_empty() {
                self.counters.fetch_data_responses += 1;
                self.counters.fetch_batches += fetch.batches.len() as u64;
            }
        }
        let mut w = WireWriter::with_capacity(128);
        w.i32(0);
        ResponseHeader {
            correlation_id: pending.correlation_id,
        }
        .write(
            &mut w,
            pending.spec.response_header_flexible(pending.version),
        );
        let chain = quorum::encode_response(response, w);
        self.deliver(pending.conn, pending.seq, chain);
    }

    /// Sends a chain whose first piece starts with 4 placeholder bytes for the size.
    fn send_frame(&mut self, conn: ConnId, mut chain: Vec<Bytes>) {
        let total: usize = chain.iter().map(Bytes::len).sum();
        let mut first = BytesMut::from(&chain[0][..]);
        first[..4].copy_from_slice(&size_prefix(total - 4));
        chain[0] = first.freeze();
        if let Err(error) = self.ring.send(conn, chain) {
            debug!(?conn, %error, "send");
        }
        self.bound_send_queue(conn);
    }

    /// A peer or client that stops reading would make its send queue grow without bound:
    /// past [`MAX_QUEUED_SEND_BYTES`] its connection is closed (its requests then fail).
    fn bound_send_queue(&mut self, conn: ConnId) {
        if self
            .ring
            .queued_send_bytes(conn)
            .is_some_and(|queued| queued > MAX_QUEUED_SEND_BYTES)
        {
            warn!(
                ?conn,
                "send queue over {MAX_QUEUED_SEND_BYTES} bytes: closing"
            );
            self.close(conn, "send queue full");
        }
    }

    fn answer_api_versions(
        &mut self,
        conn: ConnId,
        seq: u64,
        correlation_id: i32,
        version: i16,
        bad: bool,
    ) {
        let api_keys = API_TABLE
            .iter()
            .map(|row| ApiVersionRange {
                api_key: row.spec.key,
                min_version: row.spec.min_version,
                max_version: row.spec.max_version,
            })
            .collect();
        let response = ApiVersionsResponse {
            error: if bad {
                ErrorCode::UNSUPPORTED_VERSION
            } else {
                ErrorCode::NONE
            },
            api_keys,
            throttle_time_ms: 0,
        };
        let mut w = WireWriter::with_capacity(128);
        w.i32(0);
        ResponseHeader { correlation_id }.write(&mut w, false);
        response.encode(&mut w, version);
        self.deliver(conn, seq, vec![w.into_inner().freeze()]);
    }

    // ---- Produce ----------------------------------------------------------------------------

    fn on_produce(&mut self, conn: ConnId, header: &RequestHeader, request: ProduceRequest) {
        let acks = match request.acks {
            -1 => Acks::Quorum,
            1 => Acks::Leader,
            0 => Acks::None,
            _ => {
                // INVALID_REQUIRED_ACKS (21) for every partition.
                self.reject_produce(conn, header, &request, ErrorCode(21));
                return;
            }
        };
        let (partitions, appends) = split_produce(&request);
        let outstanding = appends.len();
        let produce_id = self.next_produce_id;
        self.next_produce_id += 1;
        self.counters.produce_requests += 1;
        self.counters.produce_batches += outstanding as u64;
        if acks != Acks::None {
            let seq = self.reserve_response(conn);
            // Kafka's timeout_ms bounds the wait for the acknowledgement; a negative one is
            // treated as 0 (answered at the next tick unless already done).
            let timeout_ms = u64::try_from(request.timeout_ms).unwrap_or(0);
            let deadline_ms = self.now_ms().saturating_add(timeout_ms);
            self.produces.insert(
                produce_id,
                PendingProduce {
                    conn,
                    seq,
                    correlation_id: header.correlation_id,
                    version: header.api_version,
                    partitions,
                    outstanding,
                    deadline_ms,
                },
            );
            if outstanding > 0 {
                // Before the appends: the core may answer one at once.
                self.produce_deadlines.insert((deadline_ms, produce_id));
            }
        }
        for (slot, view) in appends {
            let id = self.next_append_id;
            self.next_append_id += 1;
            if acks != Acks::None {
                self.appends.insert(id, (produce_id, slot));
            }
            let record_count = view.record_count();
            self.step(Input::ClientAppend {
                id,
                batch: BytesMut::from(&view.bytes()[..]),
                record_count,
                acks,
            });
        }
        if outstanding == 0 {
            self.finish_produce(produce_id);
        }
    }

    fn reject_produce(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        request: &ProduceRequest,
        error: ErrorCode,
    ) {
        let partitions: Vec<ProduceSlot> = request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.clone(), p.index, Some((error, -1))))
            })
            .collect();
        let seq = self.reserve_response(conn);
        let frame = produce_response_frame(header.correlation_id, header.api_version, partitions);
        self.deliver(conn, seq, frame);
    }

    fn append_done(&mut self, id: u64, result: AppendResult) {
        let Some((produce_id, slot)) = self.appends.remove(&id) else {
            return;
        };
        let Some(produce) = self.produces.get_mut(&produce_id) else {
            return; // the client went away, or the request timed out
        };
        let outcome = match result {
            AppendResult::Appended { base_offset, .. } => (ErrorCode::NONE, base_offset),
            AppendResult::Failed { error, .. } => (error, -1),
        };
        assert!(
            produce.partitions[slot].2.is_none(),
            "append answered twice"
        );
        produce.partitions[slot].2 = Some(outcome);
        produce.outstanding -= 1;
        if produce.outstanding == 0 {
            self.finish_produce(produce_id);
        }
    }

    /// Answers every Produce whose `timeout_ms` passed with REQUEST_TIMED_OUT for the partitions
    /// still waiting (Kafka's semantics: their batches may still commit later).
    fn expire_produces(&mut self, now_ms: u64) {
        while let Some(&(deadline_ms, produce_id)) = self.produce_deadlines.first() {
            if deadline_ms > now_ms {
                return;
            }
            let produce = self
                .produces
                .get_mut(&produce_id)
                .expect("a deadline is removed with its produce");
            for slot in produce.partitions.iter_mut().filter(|s| s.2.is_none()) {
                slot.2 = Some((ErrorCode::REQUEST_TIMED_OUT, -1));
            }
            produce.outstanding = 0;
            debug!(produce_id, "produce timed out");
            self.finish_produce(produce_id);
        }
    }

    fn finish_produce(&mut self, produce_id: u64) {
        let Some(produce) = self.produces.remove(&produce_id) else {
            return;
        };
        self.produce_deadlines
            .remove(&(produce.deadline_ms, produce_id));
        let frame =
            produce_response_frame(produce.correlation_id, produce.version, produce.partitions);
        self.deliver(produce.conn, produce.seq, frame);
    }

    /// The role, for tests and logs.
    pub fn role(&self) -> Role {
        self.core.role()
    }
}

/// A Produce request's partitions in request order, each with its outcome when known at once
/// (wrong topic or partition, corrupt batch), and the batches to append with their slot.
fn split_produce(request: &ProduceRequest) -> (Vec<ProduceSlot>, Vec<(usize, BatchView)>) {
    let mut partitions = Vec::new();
    let mut appends = Vec::new();
    for topic in &request.topics {
        for partition in &topic.partitions {
            let slot = partitions.len();
            let outcome = if topic.name != METADATA_TOPIC || partition.index != METADATA_PARTITION {
                Some((ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1))
            } else {
                match partition.records.clone().map(BatchView::parse) {
                    Some(Ok(view)) if !view.is_control() => {
                        appends.push((slot, view));
                        None
                    }
                    _ => Some((ErrorCode::CORRUPT_MESSAGE, -1)),
                }
            };
            partitions.push((topic.name.clone(), partition.index, outcome));
        }
    }
    (partitions, appends)
}

/// The Produce response frame (4 placeholder bytes for the size first) for answered slots.
fn produce_response_frame(
    correlation_id: i32,
    version: i16,
    partitions: Vec<ProduceSlot>,
) -> Vec<Bytes> {
    let mut topics: Vec<ProduceTopicResponse> = Vec::new();
    for (name, index, outcome) in partitions {
        let (error, base_offset) = outcome.expect("every partition answered");
        let partition = ProducePartitionResponse {
            index,
            error,
            base_offset,
            log_append_time_ms: -1,
            log_start_offset: 0,
            error_message: None,
        };
        match topics.last_mut() {
            Some(topic) if topic.name == name => topic.partitions.push(partition),
            _ => topics.push(ProduceTopicResponse {
                name,
                partitions: vec![partition],
            }),
        }
    }
    let response = ProduceResponse {
        topics,
        throttle_time_ms: 0,
    };
    let mut w = WireWriter::with_capacity(128);
    w.i32(0);
    ResponseHeader { correlation_id }.write(&mut w, PRODUCE_SPEC.response_header_flexible(version));
    response.encode(&mut w, version);
    vec![w.into_inner().freeze()]
}

/// Log reads return raw batches; the core wants them with their header fields lifted out.
fn to_batches(pieces: Vec<Bytes>) -> Vec<Batch> {
    let mut batches = Vec::with_capacity(pieces.len());
    for piece in pieces {
        match BatchView::parse(piece) {
            Ok(view) => batches.push(view.to_raft_batch()),
            Err(error) => {
                warn!(%error, "a batch read from the log failed validation; read cut short");
                break;
            }
        }
    }
    batches
}

/// fdatasync latency above this gets a start-up warning: every commit waits for one.
const SLOW_FDATASYNC: Duration = Duration::from_millis(10);

/// Times a few 4 KiB write+fdatasync rounds in the log directory and warns when the device is slow
/// (docs/operations.md, "Start-up errors"). A probe failure is only a warning: the log's own writes
/// will report a real problem with its path.
fn probe_fdatasync(dir: &std::path::Path) {
    use std::io::Write;
    let path = dir.join(".fdatasync-probe");
    let probe = || -> std::io::Result<Duration> {
        let mut file = std::fs::File::create(&path)?;
        let block = [0u8; 4096];
        let mut worst = Duration::ZERO;
        for _ in 0..3 {
            let started = Instant::now();
            file.write_all(&block)?;
            file.sync_data()?;
            worst = worst.max(started.elapsed());
        }
        Ok(worst)
    };
    match probe() {
        Ok(worst) if worst > SLOW_FDATASYNC => warn!(
            dir = %dir.display(),
            worst_ms = worst.as_millis() as u64,
            "fdatasync is slow on the log directory's device: every commit waits for one"
        ),
        Ok(worst) => debug!(worst_us = worst.as_micros() as u64, "fdatasync probe"),
        Err(error) => warn!(%error, dir = %dir.display(), "fdatasync probe failed"),
    }
    let _ = std::fs::remove_file(&path);
}

/// The core's driver: stepping never re-entrant (stepping.rs), outputs carried out in order.
impl CoreDriver for Node {
    fn input_queue(&mut self) -> &mut InputQueue {
        &mut self.inputs
    }

    fn step_core(&mut self, input: Input, out: &mut Vec<Output>) {
        self.core.step(input, out);
    }

    fn carry_out(&mut self, output: Output) {
        match output {
            Output::PersistElectionState(state) => {
                if let Err(error) = self.quorum_state.write(&state) {
                    fail_stop(
                        EXIT_QUORUM_STATE,
                        format_args!(
                            "persisting the election state failed: {error}. Stopping \
                             (fail-stop)."
                        ),
                    );
                }
            }
            Output::Send {
                to,
                correlation,
                request,
            } => self.send_to_peer(to, correlation, request),
            Output::Respond { id, response } => self.respond(id, &response),
            Output::Log(op) => self.writer().submit(writer_request(op)),
            Output::ReadLog {
                read_id,
                from_offset,
                max_bytes,
            } => {
                self.counters.log_reads += 1;
                let read = engine::io::ReadRequest {
                    read_id,
                    from_offset,
                    max_bytes,
                };
                // The log's reader thread serves it; a full reader queue refuses it at once and
                // the fetch is answered with no records (docs/architecture.md, "Node runtime").
                if let Err(refused) = self.writer().read(read) {
                    debug!(%refused, read_id, "log read refused");
                    self.step(Input::LogReadDone {
                        read_id,
                        batches: Vec::new(),
                    });
                }
            }
            Output::HighWatermark(hw) => debug!(hw, "high watermark"),
            Output::AppendDone { id, result } => self.append_done(id, result),
            Output::RoleChanged {
                role,
                epoch,
                leader_id,
            } => info!(
                node = self.config.broker_id,
                ?role,
                epoch,
                leader_id,
                "role changed"
            ),
            Output::ShutdownComplete => self.shutdown_done = true,
            Output::EndpointChanged(endpoint) => self.peer_moved(&endpoint),
            Output::ProbeEndpoint {
                correlation,
                endpoint,
                request,
            } => self.start_probe(correlation, endpoint, request),
            Output::Refused {
                request,
                peer,
                reason,
            } => self.log_refusal(request, peer, &reason),
            Output::Alert(message) => {
                tracing::error!(node = self.config.broker_id, "{message}")
            }
            Output::Fatal(message) => fail_stop(
                EXIT_CORE,
                format_args!("the Raft core stopped the node: {message}"),
            ),
        }
    }
}

/// The writer request that carries out one of the core's log operations: the core's vocabulary
/// stays out of the storage layer (docs/architecture.md, "Layers").
fn writer_request(op: LogOp) -> WriterRequest {
    match op.kind {
        LogOpKind::Append(batches) => WriterRequest::Append {
            seq: op.seq,
            batches: batches.into_iter().map(|batch| batch.bytes).collect(),
        },
        LogOpKind::TruncateTo(offset) => WriterRequest::TruncateTo {
            seq: op.seq,
            offset,
        },
    }
}

fn resolve(host: &str, port: u16) -> std::io::Result<SocketAddr> {
    crate::client::resolve_host_port(host, port)
}

/// Loads nothing: builds, then runs a node until shutdown.
pub fn serve(config: NodeConfig) -> Result<(), NodeError> {
    exit_on_any_panic();
    Node::start(config)?.run()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(tag: u8) -> Vec<Bytes> {
        vec![Bytes::from(vec![tag])]
    }

    fn drain(queue: &mut ResponseQueue) -> Vec<u8> {
        std::iter::from_fn(|| queue.pop_ready())
            .map(|c| c[0][0])
            .collect()
    }

    #[test]
    fn responses_leave_in_request_order_whatever_order_they_are_answered_in() {
        let mut queue = ResponseQueue::default();
        let seqs: Vec<u64> = (0..4).map(|_| queue.reserve()).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3]);
        queue.fill(2, chain(2));
        queue.fill(1, chain(1));
        assert!(
            drain(&mut queue).is_empty(),
            "the head (0) is not answered yet"
        );
        queue.fill(0, chain(0));
        assert_eq!(drain(&mut queue), vec![0, 1, 2]);
        assert_eq!(queue.reserve(), 4);
        queue.fill(4, chain(4));
        assert!(drain(&mut queue).is_empty(), "3 still waits");
        queue.fill(3, chain(3));
        assert_eq!(drain(&mut queue), vec![3, 4]);
        assert!(queue.slots.is_empty());
    }

    #[test]
    #[should_panic(expected = "answered twice")]
    fn a_slot_answered_twice_is_a_bug() {
        let mut queue = ResponseQueue::default();
        let seq = queue.reserve();
        let _ = queue.reserve();
        queue.fill(seq + 1, chain(1));
        queue.fill(seq + 1, chain(1));
    }

    #[test]
    fn a_produce_answer_lists_partitions_under_their_topics_in_request_order() {
        let slots: Vec<ProduceSlot> = vec![
            ("a".into(), 0, Some((ErrorCode::NONE, 5))),
            ("a".into(), 1, Some((ErrorCode::REQUEST_TIMED_OUT, -1))),
            (
                "b".into(),
                0,
                Some((ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1)),
            ),
        ];
        let frame = produce_response_frame(42, 9, slots);
        let mut r = WireReader::new(frame[0].slice(4..));
        let header = ResponseHeader::read(&mut r, PRODUCE_SPEC.response_header_flexible(9));
        assert_eq!(header.unwrap().correlation_id, 42);
        let response = ProduceResponse::decode(&mut r, 9).unwrap();
        let flat: Vec<(String, i32, ErrorCode, i64)> = response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.clone(), p.index, p.error, p.base_offset))
            })
            .collect();
        assert_eq!(response.topics.len(), 2);
        assert_eq!(
            flat,
            vec![
                ("a".into(), 0, ErrorCode::NONE, 5),
                ("a".into(), 1, ErrorCode::REQUEST_TIMED_OUT, -1),
                ("b".into(), 0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1),
            ]
        );
    }
}
