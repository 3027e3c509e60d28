//! The raft thread: one io_uring event loop that owns every socket, the Raft core and its
//! timers, and hands log operations to the group-commit writer thread.
//!
//! Loop: poll the ring until the core's next deadline → decode each frame → step the core →
//! carry out its outputs in order (persist the election state, send, respond, hand log ops to
//! the writer) → the writer's durable reports come back through its eventfd.
//!
//! Parts: this file (start-up, the loop, carrying out outputs), `peers` (outbound connections and
//! endpoint probes), `inbound` (dispatch through the API table, responses in request order),
//! `produce` (the Produce handler), `access` (authorization), `tls` (TLS listeners, peers and
//! certificate principals), `sasl` (the SASL handlers and each SASL connection's exchange).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use engine::fail_stop::{exit_on_any_panic, fail_stop, EXIT_CORE, EXIT_QUORUM_STATE};
use engine::io::{
    exit_on_fatal, GroupCommitWriter, SyncMode, SyncProbe, WriterConfig, WriterEvent, WriterRequest,
};
use engine::log::{Log, LogConfig};
use engine::producer_snapshot_store::ProducerSnapshotStore;
use engine::quorum_state_store::QuorumStateStore;
use engine::raft::{
    bootstrap_server_id, Acks, AppendResult, Batch, Correlation, ErrorCode, Input, LogOp,
    LogOpKind, NodeId, Output, RaftCore, Request, Response, Role, Sender, VoterEndpoint,
};
use engine::record::BatchView;
use engine::replica::{Output as ReplicaOutput, Replica};
use tracing::{debug, info, warn};

mod access;
mod arena;
mod consume;
mod groups;
mod idempotence;
mod inbound;
mod listening;
mod metadata;
mod peers;
mod produce;
mod producer_ids;
mod producer_snapshots;
mod retention;
mod sasl;
mod tls;

use inbound::{PendingRequest, ResponseQueue};
use peers::{Peer, Probe, UnresolvedProbe, MIN_RECONNECT};
use produce::{PendingProduce, PRODUCE_TIMEOUT_TICK_MS};

use super::api_table::{self, ApiRow, Asked, API_TABLE};
use super::brokers::BrokerDirectory;
use super::close_log::CloseLog;
use super::config::NodeConfig;
use super::config::{Listener, SecurityProtocol, SslSettings};
use super::counters::{NodeCounters, NodeStatsLine};
use super::lock::DirLock;
use super::metrics::{self as node_metrics, HttpLimits, MetricsServer, RaftMetrics, Sources};
use super::resolver::Resolver;
use super::session::{Identity, Session};
use super::signals::ShutdownSignals;
use super::stepping::{CoreDriver, InputQueue};
use crate::security::authorizer::Authorizer;
use crate::transport::{ConnId, Event, EventLoop, ListenerId, WatchId};
use crate::wire::api::{self, ApiSpec};
use crate::wire::broker_list::ClientEndpoint;
use crate::wire::frame::size_prefix;
use crate::wire::kafka::{
    ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse, LeaderIdAndEpoch,
    LegacyProduceRequest, NodeEndpoint, ProducePartitionResponse, ProduceResponse, FETCH_SPEC,
    PRODUCE_MIN_ACCEPTED, PRODUCE_SPEC,
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
    #[error("authorizer: {0}")]
    Acl(crate::security::acl::AclLoadError),
    #[error("listener {0}: TLS: {1}")]
    Tls(String, crate::security::tls::TlsConfigError),
    /// The credentials file (`sasl.credentials.file`) did not load; the error names it.
    #[error("SASL: {0}")]
    Credentials(crate::security::credentials::CredentialError),
    #[error("starting the SASL worker thread: {0}")]
    SaslWorker(std::io::Error),
    #[error("rebuilding the producer state and the committed offsets from the log: {0}")]
    Producers(#[from] idempotence::RebuildError),
    #[error("starting the producer-state snapshot thread: {0}")]
    SnapshotThread(std::io::Error),
    #[error(
        "metrics.listener http://{0}: {1} (pick a free port, or leave metrics.listener empty to \
         serve no metrics)"
    )]
    MetricsListener(String, std::io::Error),
}

/// A graceful shutdown stops waiting for a successor after the core's shutdown timeout plus this.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// A running node. Build with [`Node::start`], then [`Node::run`] until shutdown.
pub struct Node {
    config: NodeConfig,
    _lock: DirLock,
    quorum_state: QuorumStateStore,
    /// The Raft core and the node's decisions around it (engine::replica).
    replica: Replica,
    writer: Option<GroupCommitWriter>,
    ring: EventLoop,
    writer_watch: WatchId,
    signal_watch: WatchId,
    reload_watch: WatchId,
    _signals: ShutdownSignals,
    started: Instant,
    /// When the raft thread last came back from waiting for events: the node's clock for
    /// everything that wake-up handles (timers, deadlines, the commit latency), read once per
    /// wake-up rather than once per request (docs/architecture.md, "Node runtime").
    woke: Instant,
    /// Where each listener of `config.listeners` is bound, by index.
    listener_addrs: Vec<SocketAddr>,
    /// Transport listener → index in `config.listeners.all`.
    listener_index: BTreeMap<ListenerId, usize>,
    /// Per listener (by index), its TLS side if it uses TLS (tls.rs).
    listener_tls: Vec<Option<tls::ListenerTls>>,
    /// How peers are dialled when the controller listener uses TLS.
    peer_tls: Option<tls::PeerTls>,
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
    /// Inbound connection → its listener, address and what it proved (session.rs).
    sessions: BTreeMap<ConnId, Session>,
    /// Senders whose refused messages were logged already (once each).
    refused_logged: BTreeSet<String>,
    /// Which closes of a connection because of its request get a log line (rate-limited).
    close_log: CloseLog,
    next_wire_correlation: i32,
    next_request_id: u64,
    requests: BTreeMap<u64, PendingRequest>,
    /// Inbound connection → the responses it is owed, in request order.
    inbound: BTreeMap<ConnId, ResponseQueue>,
    next_produce_id: u64,
    produces: BTreeMap<u64, PendingProduce>,
    /// Where Produce and fetch answers are written (arena.rs).
    frames: arena::FrameArena,
    /// Where clients' batches are copied for the core to stamp (arena.rs).
    batch_copies: arena::BatchCopies,
    /// Vectors of the Produce path kept for the next request (produce.rs).
    slot_vecs: Vec<Vec<produce::ProduceSlot>>,
    append_scratch: Vec<(usize, BatchView)>,
    /// Kafka Fetches waiting for the core's `ClientFetchDone`, by fetch id (consume.rs).
    fetches: BTreeMap<u64, consume::PendingFetch>,
    /// ListOffsets waiting for timestamp lookups on the reader thread (consume.rs).
    lookups: consume::Lookups,
    next_fetch_id: u64,
    /// (deadline ms, produce id) of every Produce with appends outstanding.
    produce_deadlines: BTreeSet<(u64, u64)>,
    /// Client append id → (produce id, partition slot).
    appends: BTreeMap<u64, (u64, usize)>,
    next_append_id: u64,
    shutdown_deadline: Option<Instant>,
    shutdown_done: bool,
    /// Inputs for the core: stepping is never re-entrant (stepping.rs).
    inputs: InputQueue,
    /// None without `authorizer.acl.file`: everything is allowed (access.rs).
    authorizer: Option<Arc<Authorizer>>,
    /// The credentials, each SASL connection's exchange, the PLAIN worker (sasl.rs).
    sasl: sasl::SaslRuntime,
    /// Every broker's client endpoints, for Metadata and DescribeCluster (node/brokers.rs).
    brokers: BrokerDirectory,
    counters: NodeCounters,
    /// The InitProducerIds the replica has not answered yet (producer_ids.rs).
    init_requests: producer_ids::InitRequests,
    /// The group requests the replica has not answered yet (groups.rs).
    group_requests: groups::GroupRequests,
    /// The producer-state snapshots' writing thread.
    snapshots: producer_snapshots::Snapshots,
    /// What the raft thread publishes for `/metrics` (node/metrics), and the listener, if any.
    metrics: Arc<RaftMetrics>,
    metrics_server: Option<MetricsServer>,
    /// When this node started its current election (ms of `metrics.clock`), and the leader it
    /// last knew: the election latency and leader changes.
    election_started_ms: Option<u64>,
    known_leader: Option<NodeId>,
    lags_published_ms: u64,
    lag_scratch: Vec<engine::raft::ReplicaLag>,
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
        let mut startup = super::startup_checks::run(&config, &log_config)?;
        let sync_mode = probe_sync_modes(&config, &mut startup);
        startup.sync_mode = Some(sync_mode);
        let authorizer = access::load_authorizer(&config)?;
        let credentials = sasl::load_credentials(&config)?;
        let quorum_state =
            QuorumStateStore::open(&config.log_dir, config.broker_id, config.cluster_id.clone())?;
        let stored = quorum_state.read()?;
        let log = Log::open(&config.log_dir, log_config)?;
        let mut snapshot = log.snapshot();
        // The voter records above the file's AppliedOffset: the core rebuilds the voter set in
        // force from them (docs/protocol.md, "The voter set lives in the log").
        snapshot.voter_records =
            log.voter_records_from(stored.as_ref().map_or(0, |s| s.applied_offset))?;
        // Before serving: a new leader must know every producer the log holds.
        let snapshot_store = ProducerSnapshotStore::new(&config.log_dir);
        // And every committed offset of the consumer groups, in the same pass.
        let idempotence::Rebuilt {
            producers,
            ledger,
            offsets: group_offsets,
            loaded,
        } = Node::rebuild_idempotence(&log, &snapshot_store, config.broker_id)?;
        info!(
            node = config.broker_id,
            end_offset = snapshot.end_offset,
            stored = ?stored,
            directory_id = %quorum_state.directory_id(),
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
        raft_config.directory_id = quorum_state.directory_id();
        let core = RaftCore::new(raft_config, stored, snapshot, 0)?;
        let replica = Replica::new(core, producers, ledger)
            .with_snapshots(config.segment_bytes, loaded)
            .with_groups(groups::new_groups(
                config.group_limits.clone(),
                group_offsets,
            ));
        let replica = match config.retention.keeps_everything() {
            true => replica,
            false => replica.with_retention(config.retention_check_interval_ms),
        };
        // Signals first, so every thread spawned later shares the handler.
        let signals = ShutdownSignals::install().map_err(NodeError::Signals)?;
        let writer = GroupCommitWriter::start(
            log,
            WriterConfig {
                cpu: config.log_cpu,
                read_bytes_per_sec: config.log_read_bytes_per_sec,
                sync_mode,
                ..WriterConfig::default()
            },
        )?;
        startup.registered_buffers = writer.ring_info().registered_buffers;
        info!(node = config.broker_id, sync = %sync_mode, "log writer started");
        let metrics = Arc::new(RaftMetrics::default());
        // Before the pinning: the metrics and SASL threads must not share the raft thread's CPU.
        let metrics_server = start_metrics(&config, &metrics, &writer, startup)?;
        let mut sasl = sasl::start(&config, credentials)?;
        let snapshots = producer_snapshots::Snapshots::start(
            snapshot_store,
            config.broker_id,
            Arc::clone(&metrics),
        )?;
        if let Some(cpu) = config.raft_cpu {
            engine::os::file::pin_current_thread(cpu)?;
        }
        let mut ring = EventLoop::new(crate::transport::Config {
            max_frame_bytes: config.max_request_bytes,
            tls_handshake_timeout: Duration::from_millis(config.security.handshake_timeout_ms),
            ..crate::transport::Config::default()
        })?;
        if let Some(warning) = config.per_ip_limit_warning() {
            warn!(node = config.broker_id, "{warning}");
        }
        let mut listener_addrs = Vec::new();
        let mut listener_index = BTreeMap::new();
        let mut listener_tls = Vec::new();
        let peer_tls = tls::peer_tls(&config)?;
        for (index, listener) in config.listeners.all.iter().enumerate() {
            let (host, port) = (&listener.host, listener.port);
            let listen_addr = resolve(host, port).map_err(|e| {
                NodeError::Listener(format!("{}://{host}:{port}", listener.name), e)
            })?;
            if listener.protocol == SecurityProtocol::Plaintext
                && index == config.listeners.controller
            {
                warn!(
                    node = config.broker_id,
                    listener = %listener.name,
                    "the controller listener is PLAINTEXT: anyone who reaches it can speak for \
                     any voter (docs/security.md, \"Voters trust only voters\")"
                );
            }
            let (id, tls) = listening::bind_when_free(
                listening::BIND_PATIENCE,
                || tls::listen(&mut ring, listener, listen_addr),
                |error| {
                    warn!(
                        node = config.broker_id,
                        listener = %listener.name,
                        patience_ms = listening::BIND_PATIENCE.as_millis() as u64,
                        "{error}: retrying (a run of this node that just exited may still hold \
                         the address while the kernel tears down its io_uring)"
                    )
                },
            )?;
            ring.set_listener_max_connections(id, listener.max_connections)?;
            ring.set_listener_per_ip_limit(id, listener.per_ip_limit.clone())?;
            listener_tls.push(tls);
            let bound = ring.local_addr(id)?;
            info!(node = config.broker_id, listener = %listener.name, protocol = %listener.protocol, %bound, "listening");
            listener_addrs.push(bound);
            listener_index.insert(id, index);
        }
        sasl.watch(&mut ring)?;
        let writer_watch = ring.watch_eventfd(writer.eventfd())?;
        let signal_watch = ring.watch_eventfd(signals.eventfd())?;
        let reload_watch = ring.watch_eventfd(signals.reload_eventfd())?;
        let mut peers = config
            .voters
            .iter()
            .filter(|v| v.id != config.broker_id)
            .map(|v| {
                let addr = v
                    .socket_addr()
                    .map_err(|e| NodeError::VoterAddress(v.to_string(), e))?;
                Ok(Peer::new(v.id, addr, &v.host, started))
            })
            .collect::<Result<Vec<_>, NodeError>>()?;
        let brokers = BrokerDirectory::new(
            config.broker_id,
            own_client_endpoints(&config, &listener_addrs),
        );
        // The core addresses bootstrap server i by a pseudo node id (FindQuorum only).
        for (index, (host, port)) in config.bootstrap_servers.iter().enumerate() {
            let addr = resolve(host, *port)
                .map_err(|e| NodeError::BootstrapAddress(format!("{host}:{port}"), e))?;
            peers.push(Peer::new(bootstrap_server_id(index), addr, host, started));
        }
        Ok(Node {
            config,
            _lock: lock,
            quorum_state,
            replica,
            writer: Some(writer),
            ring,
            writer_watch,
            signal_watch,
            reload_watch,
            _signals: signals,
            started,
            woke: started,
            listener_addrs,
            listener_index,
            listener_tls,
            peer_tls,
            peers,
            peer_conns: BTreeMap::new(),
            probes: BTreeMap::new(),
            unresolved_probes: BTreeMap::new(),
            next_lookup_token: 0,
            resolver: Resolver::default(),
            probed_addrs: BTreeMap::new(),
            sessions: BTreeMap::new(),
            refused_logged: BTreeSet::new(),
            close_log: CloseLog::default(),
            next_wire_correlation: 1,
            next_request_id: 1,
            requests: BTreeMap::new(),
            inbound: BTreeMap::new(),
            next_produce_id: 1,
            produces: BTreeMap::new(),
            frames: arena::FrameArena::default(),
            batch_copies: arena::BatchCopies::default(),
            slot_vecs: Vec::new(),
            append_scratch: Vec::new(),
            fetches: BTreeMap::new(),
            lookups: consume::Lookups::default(),
            next_fetch_id: 1,
            produce_deadlines: BTreeSet::new(),
            appends: BTreeMap::new(),
            next_append_id: 1,
            shutdown_deadline: None,
            shutdown_done: false,
            inputs: InputQueue::default(),
            authorizer,
            sasl,
            brokers,
            counters: NodeCounters::default(),
            init_requests: producer_ids::InitRequests::default(),
            group_requests: groups::GroupRequests::default(),
            snapshots,
            metrics,
            metrics_server,
            election_started_ms: None,
            known_leader: None,
            lags_published_ms: 0,
            lag_scratch: Vec::new(),
        })
    }

    /// Where `/metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_server.as_ref().map(MetricsServer::local_addr)
    }

    /// Once per loop turn: the raft thread's figures into its metric cells (a few stores; the
    /// replica lags, which walk the leader's progress, at most every `LAG_PUBLISH_MS`).
    fn publish_metrics(&mut self) {
        let m = &*self.metrics;
        let core = self.replica.core();
        let state = node_metrics::state_name(core.role(), core.is_observer());
        let index = node_metrics::STATES.iter().position(|s| *s == state);
        m.state.set(index.unwrap_or(0) as i64);
        m.leader.set(core.leader_id().map_or(-1, i64::from));
        m.epoch.set(i64::from(core.epoch()));
        m.vote.set(core.voted_id().map_or(-1, i64::from));
        m.high_watermark.set(core.high_watermark().unwrap_or(-1));
        m.log_end_offset.set(core.log_end_offset());
        m.tail_cache_bytes.set(core.tail_cache_bytes() as i64);
        m.open_connections.set(self.inbound.len() as i64);
        let unknown = self
            .peers
            .iter()
            .filter(|p| p.id >= 0 && p.conn.is_none())
            .count();
        m.unknown_voter_connections.set(unknown as i64);
        m.node.publish(&self.counters, &self.ring.stats());
        let now = m.now_ms();
        if now.saturating_sub(self.lags_published_ms) >= node_metrics::LAG_PUBLISH_MS {
            self.lags_published_ms = now;
            self.lag_scratch.clear();
            core.replica_lags(&mut self.lag_scratch);
            m.publish_lags(&self.lag_scratch);
        }
    }

    /// A role change: leader changes, and the election latency (from the start of this node's
    /// election, pre-vote or vote, to knowing a leader).
    fn note_role_for_metrics(&mut self, role: Role, leader_id: Option<NodeId>) {
        let now = self.metrics.now_ms();
        if matches!(role, Role::Prospective | Role::Candidate) {
            self.election_started_ms.get_or_insert(now);
        }
        if let Some(leader) = leader_id {
            if self.known_leader != Some(leader) {
                self.metrics.leader_changes.add(1);
            }
            if let Some(started) = self.election_started_ms.take() {
                self.metrics.observe_election(now.saturating_sub(started));
            }
        }
        self.known_leader = leader_id.or(self.known_leader);
    }

    /// Where the controller listener is bound (the only listener when there is one).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener_addrs[self.config.listeners.controller]
    }

    /// Where the listener named `name` is bound.
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        let index = self
            .config
            .listeners
            .all
            .iter()
            .position(|l| l.name.eq_ignore_ascii_case(name))?;
        Some(self.listener_addrs[index])
    }

    /// Milliseconds since the node started, as of the current wake-up ([`Node::woke`]).
    fn now_ms(&self) -> u64 {
        self.woke.duration_since(self.started).as_millis() as u64
    }

    /// Runs until a graceful shutdown finishes (SIGTERM/SIGINT). Fatal conditions exit the
    /// process (fail-stop) rather than return.
    pub fn run(mut self) -> Result<(), NodeError> {
        let mut events = Vec::new();
        self.step(Input::Tick { now: 0 });
        while !self.shutdown_done {
            let timeout = self.poll_timeout();
            let polled = Instant::now();
            self.ring.poll(Some(timeout), &mut events)?;
            self.woke = Instant::now();
            // Includes the completions' processing inside io_uring_enter: an upper bound of
            // idleness, as Kafka's poll-idle-ratio is of its poll.
            let idle = self.woke.duration_since(polled).as_micros();
            let idle = u64::try_from(idle).unwrap_or(u64::MAX);
            self.metrics.poll_idle_us.add(idle);
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
            self.pump_lookups();
            self.tend_producer_snapshots();
            self.expire_produces(self.now_ms());
            self.tend_probes();
            self.tend_sasl();
            self.publish_metrics();
            if self.shutdown_deadline.is_some_and(|d| Instant::now() >= d) {
                warn!("graceful shutdown timed out (no successor took over); stopping anyway: nothing to \
                       fix, the others elect a leader after their fetch timeout");
                self.shutdown_done = true;
            }
        }
        self.finish_shutdown();
        Ok(())
    }

    fn poll_timeout(&self) -> Duration {
        let now = self.now_ms();
        let core_wait = self
            .replica
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
        let close_wait = self.sasl.next_close(now).unwrap_or(Duration::MAX);
        core_wait
            .min(produce_wait)
            .min(close_wait)
            .min(Duration::from_millis(100))
    }

    /// Lets queued sends (EndQuorumEpoch, last responses) go out and the writer's last
    /// durability reports come in, then stops the writer cleanly.
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
        // The writer writes and syncs what it was given before it stops: the last producer-state
        // snapshot is taken after, at a high watermark the log then holds durably.
        let mut durable_end = None;
        if let Some(writer) = self.writer.take() {
            let stats = NodeStatsLine {
                node: &self.counters,
                transport: self.ring.stats(),
                writer: writer.stats(),
            };
            info!(target: "ringraft::stats", node = self.config.broker_id, "node stats: {stats}");
            durable_end = writer.shutdown().map(|log| log.durable_end_offset());
        }
        self.finish_producer_snapshots(durable_end);
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
                            warn!(%error, "log read failed (the fetch is answered empty and retried); if it repeats, \
                                 check the disk of log.dirs");
                            Vec::new()
                        }
                    };
                    self.step(Input::LogReadDone { read_id, batches });
                }
                WriterEvent::LookupDone { lookup_id, result } => {
                    self.lookup_done(lookup_id, result)
                }
                WriterEvent::Fatal(error) => exit_on_fatal(&error),
                WriterEvent::Stopped { .. } => {}
                WriterEvent::StorageFull { error } => {
                    warn!(
                        node = self.config.broker_id,
                        "disk full, this node takes no more appends (KAFKA_STORAGE_ERROR), \
                         fetches nothing and stands for no election until space returns; it \
                         still serves reads, votes and DescribeQuorum: {error}"
                    );
                    self.step(Input::StorageFull { full: true });
                }
                WriterEvent::Retained { start, wanted } => self.on_retained(start, wanted),
                WriterEvent::LogStartMoved { start } => self.on_log_start_moved(start),
                WriterEvent::RetentionHeldBack { wanted } => {
                    self.step(engine::replica::Input::RetentionHeldBack { wanted })
                }
                WriterEvent::StorageAvailable { free_bytes } => {
                    info!(
                        node = self.config.broker_id,
                        free_bytes,
                        dir = %self.config.log_dir.display(),
                        "disk space is back: the next segment is allocated, appends resume"
                    );
                    self.step(Input::StorageFull { full: false });
                }
            }
        }
    }

    // ---- events -----------------------------------------------------------------------------

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Accepted {
                listener,
                conn,
                peer,
            } => {
                debug!(?conn, %peer, "accepted");
                let Some(&index) = self.listener_index.get(&listener) else {
                    return self.close(conn, "accepted on an unknown listener");
                };
                self.inbound.insert(conn, ResponseQueue::default());
                let identity =
                    if self.config.listeners.all[index].protocol == SecurityProtocol::Plaintext {
                        Identity::Anonymous
                    } else {
                        Identity::Pending
                    };
                self.sessions
                    .insert(conn, Session::new(index, peer, identity));
                self.sasl_accepted(conn, index);
            }
            Event::Connected { conn } => {
                if let Some(&index) = self.peer_conns.get(&conn) {
                    let id = self.peers[index].id;
                    let expected = (id >= 0).then_some(id);
                    if self.verify_peer(conn, expected) {
                        self.peers[index].backoff = MIN_RECONNECT;
                        debug!(peer = id, "connected");
                    }
                } else if let Some(probe) = self.probes.get(&conn) {
                    let expected = Some(probe.voter_id);
                    self.verify_peer(conn, expected);
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
                } else if id == self.reload_watch {
                    self.reload();
                } else if Some(id) == self.sasl.worker_watch {
                    // Finished SASL steps are taken each loop turn (tend_sasl).
                } else {
                    debug_assert_eq!(id, self.writer_watch);
                }
            }
        }
    }

    /// SIGHUP: read the certificates, credentials and ACLs again (docs/security.md,
    /// "Reloading"). A file that no longer loads keeps the old settings, with an error logged.
    fn reload(&mut self) {
        info!(
            node = self.config.broker_id,
            "SIGHUP: reloading security settings"
        );
        self.reload_acls();
        self.reload_tls();
        self.reload_credentials();
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

    /// Closes `conn` because of its request (`at`: its api key and version, when its header
    /// was read that far) and says why in one warning line, at most one per reason every 10 s
    /// (close_log.rs): the client itself only sees the connection drop.
    fn close_for_request(&mut self, conn: ConnId, at: Option<(i16, i16)>, why: &str, detail: &str) {
        if let Some(left_out) = self.close_log.admit(why, Instant::now()) {
            let peer = self
                .sessions
                .get(&conn)
                .map_or("an unknown address".to_owned(), |s| s.addr.to_string());
            let (api_key, api_version) = at.unwrap_or((-1, -1));
            let api = at
                .and_then(|(key, _)| api_table::row(key))
                .map_or("", |row| row.spec.name);
            warn!(
                node = self.config.broker_id,
                %peer,
                api_key,
                api_version,
                api,
                reason = why,
                detail,
                left_out,
                "closed a connection because of its request (one line per reason every 10 s; \
                 left_out: closes of that reason since the last line); see docs/operations.md, \
                 \"Warnings at run time\""
            );
        }
        self.close(conn, why);
    }

    /// The role, for tests and logs.
    pub fn role(&self) -> Role {
        self.replica.core().role()
    }
}

/// Log reads return raw batches; the core wants them with their header fields lifted out. The
/// log's reader checked their framing and CRC-32C already; this checks them once more in the
/// raft thread's own terms and never decompresses (`Batch::from_stored`).
fn to_batches(pieces: Vec<Bytes>) -> Vec<Batch> {
    let mut batches = Vec::with_capacity(pieces.len());
    for piece in pieces {
        match Batch::from_stored(piece) {
            Ok(batch) => batches.push(batch),
            Err(error) => {
                warn!(%error, "a batch read from the log failed validation; read cut short: if it repeats, \
                       this disk returns damaged data; replace it and let the replica fetch its \
                       log again (docs/operations.md, \"Warnings at run time\")");
                break;
            }
        }
    }
    batches
}

impl Node {
    /// Kafka's append-records (leader) and fetch-records (others) in records.
    fn count_records(&self, op: &LogOp) {
        if let LogOpKind::Append(batches) = &op.kind {
            let records: u64 = batches.iter().map(|b| u64::from(b.record_count)).sum();
            if self.replica.core().role() == Role::Leader {
                self.metrics.append_records.add(records);
            } else {
                self.metrics.fetch_records.add(records);
            }
        }
    }
}

/// Starts the `/metrics` listener when `metrics.listener` is set (docs/operations.md,
/// "Metrics").
fn start_metrics(
    config: &NodeConfig,
    metrics: &Arc<RaftMetrics>,
    writer: &GroupCommitWriter,
    startup: node_metrics::StartupReport,
) -> Result<Option<MetricsServer>, NodeError> {
    let Some((host, port)) = &config.metrics_listener else {
        return Ok(None);
    };
    let name = format!("{host}:{port}");
    let addr = resolve(host, *port).map_err(|e| NodeError::MetricsListener(name.clone(), e))?;
    let sources = Arc::new(Sources {
        node_id: config.broker_id,
        raft: metrics.clone(),
        writer: writer.stats().clone(),
        reader: writer.reader_stats().clone(),
        view: writer.view().clone(),
        startup,
    });
    let render = Arc::new(move || node_metrics::render(&sources));
    let server = MetricsServer::start(addr, HttpLimits::default(), render)
        .map_err(|e| NodeError::MetricsListener(name, e))?;
    info!(node = config.broker_id, bound = %server.local_addr(), "serving metrics at http://{}/metrics", server.local_addr());
    Ok(Some(server))
}

/// A durable 4 KiB write slower than this gets a start-up warning: every commit waits for one.
const SLOW_DURABLE_WRITE: Duration = Duration::from_millis(10);

/// Times both ways of making a 4 KiB write durable in the log directory ([`SyncProbe`]), warns
/// when the one the writer will use is slow, and picks the mode (`log.sync.mode`; `auto` takes
/// the faster): docs/operations.md, "Choosing the sync mode" and "Start-up errors". A probe
/// failure is only a warning, with fdatasync for `auto`: the log's own writes will report a
/// real problem with its path.
fn probe_sync_modes(config: &NodeConfig, startup: &mut node_metrics::StartupReport) -> SyncMode {
    let dir = &config.log_dir;
    let probe = match SyncProbe::run(dir) {
        Ok(probe) => Some(probe),
        Err(error) => {
            warn!(
                %error,
                "start-up check: the sync probe failed; check that log.dirs is writable and its \
                 filesystem healthy (the log's own writes stop the node if they fail)"
            );
            None
        }
    };
    let mode = config.log_sync_mode.choose(probe.as_ref());
    let Some(probe) = probe else { return mode };
    let us = |d: Option<Duration>| d.map_or(0, |d| d.as_micros() as u64);
    startup.fdatasync_probe = probe.worst(SyncMode::LinkedFdatasync);
    startup.dsync_probe = probe.worst(SyncMode::RwfDsync);
    info!(
        dir = %dir.display(),
        pairs = probe.fdatasync.len(),
        fdatasync_p50_us = us(probe.median(SyncMode::LinkedFdatasync)),
        fdatasync_worst_us = us(startup.fdatasync_probe),
        dsync_p50_us = us(probe.median(SyncMode::RwfDsync)),
        dsync_worst_us = us(startup.dsync_probe),
        setting = %config.log_sync_mode,
        chosen = %mode,
        "start-up check: durable 4 KiB writes timed in log.dirs"
    );
    let worst = probe.worst(mode).unwrap_or_default();
    if worst > SLOW_DURABLE_WRITE {
        warn!(
            dir = %dir.display(),
            worst_us = worst.as_micros() as u64,
            "start-up check: a durable 4 KiB write ({mode}) is slow on the log directory's device \
             ({} us, over {} ms): every commit waits for one; put log.dirs on a local SSD or \
             NVMe device, not a network, throttled or shared volume",
            worst.as_micros(),
            SLOW_DURABLE_WRITE.as_millis()
        );
    }
    mode
}

/// The core's driver: stepping never re-entrant (stepping.rs), outputs carried out in order.
impl CoreDriver for Node {
    fn input_queue(&mut self) -> &mut InputQueue {
        &mut self.inputs
    }

    fn step_core(&mut self, input: engine::replica::Input, out: &mut Vec<ReplicaOutput>) {
        self.replica.step(input, out);
    }

    fn carry_out(&mut self, output: ReplicaOutput) {
        match output {
            ReplicaOutput::Core(output) => self.carry_out_core(output),
            ReplicaOutput::ProducerId { request, result } => self.init_answered(request, result),
            ReplicaOutput::Retain(bounds) => self.retain(bounds),
            ReplicaOutput::RollBounds(bounds) => self.roll_bounds(bounds),
            ReplicaOutput::WriteProducerSnapshot { offset, bytes } => {
                self.write_producer_snapshot(offset, bytes)
            }
            ReplicaOutput::Group { request, reply } => self.group_answered(request, reply),
        }
    }
}

impl Node {
    /// Carries out one of the core's outputs (or one the replica made in the core's terms).
    fn carry_out_core(&mut self, output: Output) {
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
            Output::Log(op) => {
                if let LogOpKind::ResetTo { start, epoch } = op.kind {
                    // The whole log goes: the operator should know, and that retention is
                    // shorter than this replica's outage was (docs/operations.md).
                    tracing::warn!(
                        node = self.config.broker_id,
                        start,
                        epoch,
                        "this replica's log ends below the leader's log start: dropping it and \
                         starting it again there (nothing committed is lost; a longer retention \
                         keeps a replica's log across an outage this long)"
                    );
                }
                self.count_records(&op);
                self.writer().submit(writer_request(op))
            }
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
            Output::ClientFetchDone { id, result } => self.client_fetch_done(id, result),
            Output::RoleChanged {
                role,
                epoch,
                leader_id,
            } => {
                info!(
                    node = self.config.broker_id,
                    ?role,
                    epoch,
                    leader_id,
                    "role changed"
                );
                self.note_role_for_metrics(role, (leader_id >= 0).then_some(leader_id));
            }
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
            batches,
        },
        LogOpKind::TruncateTo(offset) => WriterRequest::TruncateTo {
            seq: op.seq,
            offset,
        },
        LogOpKind::ResetTo { start, epoch } => WriterRequest::ResetTo {
            seq: op.seq,
            start,
            epoch,
        },
    }
}

/// This node's advertised client endpoints (every listener that serves clients), as the broker
/// directory shares them: a port of 0 is the one the listener was bound to; past the wire's
/// bounds (16 endpoints, 255-byte names) the rest is left out, with a warning.
fn own_client_endpoints(config: &NodeConfig, bound: &[SocketAddr]) -> Vec<ClientEndpoint> {
    use crate::wire::broker_list::{MAX_ENDPOINTS, MAX_NAME_BYTES};
    let mut endpoints = Vec::new();
    for (index, listener) in config.listeners.all.iter().enumerate() {
        if !config.listeners.serves_clients(index) {
            continue;
        }
        let (host, port) = &listener.advertised;
        let port = if *port == 0 {
            bound[index].port()
        } else {
            *port
        };
        if endpoints.len() == MAX_ENDPOINTS
            || host.len() > MAX_NAME_BYTES
            || listener.name.len() > MAX_NAME_BYTES
        {
            warn!(listener = %listener.name, "not shared with the other nodes: over the bounds of docs/protocol.md, \"Client \
                   endpoints\"; advertise a shorter host name or fewer client listeners");
            continue;
        }
        endpoints.push(ClientEndpoint {
            listener: listener.name.clone(),
            host: host.clone(),
            port,
        });
    }
    endpoints
}

fn resolve(host: &str, port: u16) -> std::io::Result<SocketAddr> {
    crate::client::resolve_host_port(host, port)
}

/// Loads nothing: builds, then runs a node until shutdown.
pub fn serve(config: NodeConfig) -> Result<(), NodeError> {
    exit_on_any_panic();
    Node::start(config)?.run()
}
