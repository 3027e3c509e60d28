//! The core's contract with the world: plain types for what goes in and what comes out.
//!
//! The core never performs IO, reads a clock or draws randomness. The driver (the node runtime,
//! a test, or the simulator) feeds it [`Input`]s and carries out the [`Output`]s **in order**:
//! an [`Output::PersistElectionState`] must be durable before any output after it takes effect,
//! and [`Output::Log`] operations must reach the log in the order they were emitted.

use super::error::ErrorCode;
use super::message::{Request, Response};

pub use crate::base::{DirectoryId, Epoch, NodeId, Offset, OffsetAndEpoch, TimeMs};
pub use crate::log::LogSnapshot;
pub use crate::quorum_state_store::ElectionState;
pub use crate::record::Batch;

/// How a client append is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// Answered once the high watermark passes the batch (acks=-1, the default).
    Quorum,
    /// Answered once the leader has the batch durable (acks=1).
    Leader,
    /// Never answered (acks=0).
    None,
}

/// Where an inbound request came from, so its response can be routed back. Opaque to the core.
pub type RequestId = u64;

/// Correlates a request the core sent with its response. Assigned by the core.
pub type Correlation = u64;

/// Who sent a request, as far as the transport can prove it (docs/security.md, "Voters trust
/// only voters"). A request that names a replica id (candidate, leader or replica id) is
/// admitted only when the sender may speak for that replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    /// The connection is not authenticated (a PLAINTEXT listener): nothing is proven, every
    /// claim is taken as made.
    Unverified,
    /// Authenticated as the principal of this replica id: it speaks for this replica only.
    Replica(NodeId),
    /// Authenticated as a principal that is no replica's (an operator's tool): it may send
    /// requests that name no replica (replica id -1), and nothing else.
    NotAReplica,
}

impl Sender {
    /// The replica the sender is proven to be, if any.
    pub fn replica(self) -> Option<NodeId> {
        match self {
            Sender::Replica(id) => Some(id),
            Sender::Unverified | Sender::NotAReplica => None,
        }
    }
}

/// Everything the core reacts to.
#[derive(Clone, Debug)]
pub enum Input {
    /// Time advanced to `now` (monotonic, never decreasing). The core's clock is the last Tick:
    /// a driver ticks on every wake-up, before it hands the core that wake-up's messages, or
    /// timers reset by those messages are measured from a stale time and fire early.
    Tick { now: TimeMs },
    /// A request from a peer node or an admin client; `from` is what the transport proved
    /// about its sender.
    Request {
        id: RequestId,
        from: Sender,
        request: Request,
    },
    /// The response to a request this core sent.
    Response {
        from: NodeId,
        correlation: Correlation,
        response: Response,
    },
    /// A request this core sent failed (connection error, or the transport's request timeout).
    RequestFailed {
        to: NodeId,
        correlation: Correlation,
    },
    /// Every [`LogOp`] with `seq <= up_to_seq` is durable (written and fdatasync'd).
    LogDurable { up_to_seq: u64 },
    /// A read the core asked for with [`Output::ReadLog`] finished.
    LogReadDone { read_id: u64, batches: Vec<Batch> },
    /// A client wants to append one batch. The bytes are a RecordBatch v2 whose BaseOffset and
    /// PartitionLeaderEpoch the leader overwrites.
    ClientAppend {
        id: u64,
        batch: bytes::BytesMut,
        record_count: u32,
        acks: Acks,
    },
    /// On the leader, one control batch of the node's own (a producer-id block, docs/protocol.md
    /// "Idempotent producers"), appended like a client's batch. Not answered; dropped when not
    /// the leader or over the bound on bytes not yet durable (the node asks again).
    AppendControl { batch: bytes::BytesMut },
    /// A consumer's read of the log (a Kafka Fetch of `__cluster_metadata`-0 with replica id
    /// -1), answered exactly once with [`Output::ClientFetchDone`] of the same `id`
    /// (docs/protocol.md section 16).
    ClientFetch { id: u64, fetch: ClientFetch },
    /// Resign (if leader) and stop; the core answers with [`Output::ShutdownComplete`].
    Shutdown,
    /// The log can (`full: false`) or cannot (`full: true`) allocate its next segment
    /// (docs/storage.md, "A full disk"). While full: appends are refused with
    /// KAFKA_STORAGE_ERROR, a follower or observer sends no fetch, and among several voters a
    /// leader resigns and the node stands for no election (a lone voter keeps leading: nobody
    /// else could, and it still serves reads). Votes and every read are answered as before.
    StorageFull { full: bool },
    /// Retention deleted the log's front: it now starts at `start` (docs/protocol.md,
    /// "Retention and the log start"). Never past [`crate::raft::RaftCore::retention_limit`]
    /// as it was when the driver asked, so everything below `start` is committed.
    LogStartMoved { start: Offset },
    /// Retention would delete below `below`, but the newest committed voter record is there
    /// and must stay in the log (a replica that starts from the log start learns the voter set
    /// from it): a leader appends the voter set again, above it. Ignored elsewhere, and while a
    /// voter record is uncommitted or a reassignment is in progress.
    CarryVoterRecord { below: Offset },
    /// The node has something new to say in its fetches (a wish for producer ids,
    /// docs/protocol.md "Producer ids"): a follower or observer whose fetch at its log end is
    /// outstanding (parked at the leader for up to its MaxWait) sends a fresh one now, as for a
    /// newer durable offset (at most two in flight). Ignored elsewhere.
    RefreshFetch,
}

/// What a consumer asks for: the fields of one partition of a Kafka Fetch request, with Kafka's
/// "none" (-1) as `None` (docs/protocol.md section 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientFetch {
    pub fetch_offset: Offset,
    /// The epoch of the last batch the consumer has (Fetch v12+): checked for divergence.
    pub last_fetched_epoch: Option<Epoch>,
    /// The leader epoch the consumer believes current (Fetch v9+): fenced when it differs.
    pub current_leader_epoch: Option<Epoch>,
    /// How long the read may wait for `min_bytes` (capped by `RaftConfig::fetch_max_wait_ms`).
    pub max_wait_ms: u64,
    /// Bytes of committed data worth answering for; 0 answers at once.
    pub min_bytes: usize,
    /// Byte budget of the answer (capped by `RaftConfig::fetch_max_bytes`); one whole batch is
    /// always sent when there is one, however large.
    pub max_bytes: usize,
}

impl ClientFetch {
    /// From the wire's fields: a negative epoch means none (Kafka's `optionalEpoch`), a negative
    /// wait or size counts as 0.
    pub fn from_wire(
        fetch_offset: i64,
        last_fetched_epoch: i32,
        current_leader_epoch: i32,
        max_wait_ms: i32,
        min_bytes: i32,
        max_bytes: i32,
    ) -> Self {
        let epoch = |e: i32| (e >= 0).then_some(e);
        let size = |n: i32| usize::try_from(n).unwrap_or(0);
        Self {
            fetch_offset,
            last_fetched_epoch: epoch(last_fetched_epoch),
            current_leader_epoch: epoch(current_leader_epoch),
            max_wait_ms: u64::try_from(max_wait_ms).unwrap_or(0),
            min_bytes: size(min_bytes),
            max_bytes: size(max_bytes),
        }
    }
}

/// The answer to a [`ClientFetch`]: one partition of a Kafka Fetch response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientFetchResult {
    /// NONE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH or
    /// OFFSET_OUT_OF_RANGE.
    pub error: ErrorCode,
    /// The committed end the batches respect; -1 unless this node leads.
    pub high_watermark: Offset,
    /// -1 unless this node leads.
    pub log_start_offset: Offset,
    /// The leader as far as this node knows (-1 when it knows none): Kafka's leader hint.
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    /// The consumer's log diverges (Fetch v12): the largest epoch `<=` its last fetched epoch and
    /// where that epoch ends; no batches come with it.
    pub diverging_epoch: Option<OffsetAndEpoch>,
    /// Whole committed batches from the one holding the fetch offset on: the tail cache's or the
    /// log read's own bytes, never copied.
    pub batches: Vec<Batch>,
}

/// Which offset a ListOffsets partition asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// -2: the log start offset.
    Earliest,
    /// -1: the high watermark (the end of what a consumer may read).
    Latest,
}

/// A ListOffsets answer: the offset, and the leader epoch of the data there (None: unknown, -1 on
/// the wire). No timestamp is looked up for Earliest and Latest (Kafka answers -1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedOffset {
    pub offset: Offset,
    pub leader_epoch: Option<Epoch>,
}

/// What the leader tells a consumer about the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    pub log_start_offset: Offset,
    /// The committed end (a batch boundary): consumers read below it.
    pub high_watermark: Offset,
}

/// Why a consumer's read or query was not served; `error_code` is the Kafka error to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadRefused {
    #[error("not the leader (leader {leader_id}, epoch {leader_epoch})")]
    NotLeader {
        leader_id: NodeId,
        leader_epoch: Epoch,
    },
    #[error("leader epoch {requested} is older than the leader's {leader_epoch}")]
    FencedLeaderEpoch {
        requested: Epoch,
        leader_id: NodeId,
        leader_epoch: Epoch,
    },
    #[error("leader epoch {requested} is newer than the leader's {leader_epoch}")]
    UnknownLeaderEpoch {
        requested: Epoch,
        leader_id: NodeId,
        leader_epoch: Epoch,
    },
}

impl ReadRefused {
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ReadRefused::NotLeader { .. } => ErrorCode::NOT_LEADER_OR_FOLLOWER,
            ReadRefused::FencedLeaderEpoch { .. } => ErrorCode::FENCED_LEADER_EPOCH,
            ReadRefused::UnknownLeaderEpoch { .. } => ErrorCode::UNKNOWN_LEADER_EPOCH,
        }
    }

    /// The leader hint to answer with (-1: none known).
    pub fn leader_id(&self) -> NodeId {
        match *self {
            ReadRefused::NotLeader { leader_id, .. }
            | ReadRefused::FencedLeaderEpoch { leader_id, .. }
            | ReadRefused::UnknownLeaderEpoch { leader_id, .. } => leader_id,
        }
    }

    pub fn leader_epoch(&self) -> Epoch {
        match *self {
            ReadRefused::NotLeader { leader_epoch, .. }
            | ReadRefused::FencedLeaderEpoch { leader_epoch, .. }
            | ReadRefused::UnknownLeaderEpoch { leader_epoch, .. } => leader_epoch,
        }
    }
}

/// A change to the log, applied in `seq` order.
#[derive(Clone, Debug)]
pub enum LogOpKind {
    /// Append batches at the current end (offsets already assigned and contiguous).
    Append(Vec<Batch>),
    /// Drop every record at or beyond `offset`.
    TruncateTo(Offset),
    /// Drop the whole log and start it again, empty, at `start`, in `epoch`: the leader's log
    /// start, which this replica fell behind (docs/protocol.md, "Retention and the log
    /// start"). Everything below `start` is committed; what this log held is all below it.
    ResetTo { start: Offset, epoch: Epoch },
}

#[derive(Clone, Debug)]
pub struct LogOp {
    /// Strictly increasing per core incarnation, starting at 1.
    pub seq: u64,
    pub kind: LogOpKind,
}

/// How far one voter is behind the leader ([`crate::raft::RaftCore::replica_lags`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaLag {
    pub replica_id: NodeId,
    /// The leader's log end offset minus the replica's last fetch offset.
    pub records: i64,
    /// Milliseconds since the replica last fetched up to the leader's end (Kafka's lag time);
    /// None when it never did in this epoch.
    pub ms_since_caught_up: Option<u64>,
}

/// The result of a client append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendResult {
    /// Committed (or durable on the leader, for [`Acks::Leader`]) at these offsets.
    Appended {
        base_offset: Offset,
        last_offset: Offset,
    },
    /// Not appended or not known to be committed: NOT_LEADER_OR_FOLLOWER (with a leader hint),
    /// REQUEST_TIMED_OUT, INVALID_REQUEST, ...
    Failed {
        error: ErrorCode,
        leader_id: NodeId,
        leader_epoch: Epoch,
    },
}

/// Everything the core asks the world to do, in order.
#[derive(Clone, Debug)]
pub enum Output {
    /// Make this election state durable before carrying out any later output.
    PersistElectionState(ElectionState),
    /// Send a request to a peer; its response comes back as [`Input::Response`] with `from`
    /// equal to this `to`. A negative `to` names a bootstrap server (see
    /// [`bootstrap_server_index`]); only FindQuorum is ever sent there.
    Send {
        to: NodeId,
        correlation: Correlation,
        request: Request,
    },
    /// Answer an inbound request.
    Respond { id: RequestId, response: Response },
    /// Change the log; durability is reported with [`Input::LogDurable`].
    Log(LogOp),
    /// Read batches from `from_offset` up to about `max_bytes` (at least one batch if any) for a
    /// fetch the in-memory tail cannot serve; answered with [`Input::LogReadDone`].
    ReadLog {
        read_id: u64,
        from_offset: Offset,
        max_bytes: usize,
    },
    /// The high watermark advanced (leader: newly committed; follower: learned).
    HighWatermark(Offset),
    /// A client append finished.
    AppendDone { id: u64, result: AppendResult },
    /// The answer to [`Input::ClientFetch`] `id` (exactly one per id).
    ClientFetchDone { id: u64, result: ClientFetchResult },
    /// The role changed (for logs, metrics and the runtime's routing).
    RoleChanged {
        role: super::Role,
        epoch: Epoch,
        leader_id: NodeId,
    },
    /// Shutdown finished (another leader is known, or the shutdown timeout passed).
    ShutdownComplete,
    /// A voter's (new) endpoint, verified by a probe: connect there from now on.
    EndpointChanged(super::message::VoterEndpoint),
    /// Before a voter's advertised endpoint is used, check that it is that voter: send `request`
    /// (a FindQuorum) on a connection of its own to `endpoint`'s host and port, not to the
    /// voter's current address, and hand the answer back as [`Input::Response`] (a failure as
    /// [`Input::RequestFailed`]) with `from` / `to` equal to `endpoint.voter_id`.
    ProbeEndpoint {
        correlation: Correlation,
        endpoint: super::message::VoterEndpoint,
        request: Request,
    },
    /// A peer's message was refused before it could change anything (docs/protocol.md,
    /// "Hostile input"): for the operator's log, with the sender's address where the driver
    /// knows it. A refused request's error answer follows as an ordinary [`Output::Respond`].
    Refused {
        /// The inbound request, or None for a response to one of this node's requests.
        request: Option<RequestId>,
        /// The node that sent it, where known (the transport's word, not the message's).
        peer: Option<NodeId>,
        reason: String,
    },
    /// Something the operator must act on while the node carries on (an epoch near its limit).
    Alert(String),
    /// A safety rule would be broken (for example a truncation below the high watermark). The
    /// driver must stop the node: nothing after this is valid.
    Fatal(String),
}

/// The core's configuration: the `quorum.*` settings and this node's identity.
#[derive(Clone, Debug)]
pub struct RaftConfig {
    pub node_id: NodeId,
    pub cluster_id: String,
    /// The configured voter set (used only when no quorum-state file exists yet). Empty for an
    /// observer that learns the voter set from its bootstrap servers through FindQuorum.
    pub voters: Vec<NodeId>,
    pub fetch_timeout_ms: u64,
    pub election_timeout_ms: u64,
    pub election_jitter_max_ms: u64,
    pub progress_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// MaxWaitTimeMs this node puts in its fetches (long poll).
    pub fetch_max_wait_ms: u64,
    /// As leader, answer an observer whose last answer gave it everything there was with
    /// records at most once per this many ms (docs/protocol.md, "Observer fetch pacing"); 0:
    /// at once, as voters are and as Kafka does ([`RaftConfig::new`]'s value; the node's
    /// default is 10).
    pub observer_fetch_interval_ms: u64,
    /// Byte budget of one fetch response.
    pub fetch_max_bytes: usize,
    /// Bytes of recent batches the leader keeps in memory to answer fetches without a log read.
    pub tail_cache_bytes: usize,
    /// Bytes appended but not yet durable beyond which a client append is refused with the
    /// retriable REQUEST_TIMED_OUT (the disk is behind): memory between the core and the disk
    /// stays bounded.
    pub max_unflushed_bytes: usize,
    /// The same for the number of log ops (one per client append, a few per fetch answer): the
    /// driver's queue to the log writer never holds more than this and a handful more.
    pub max_unflushed_ops: usize,
    /// How long a graceful shutdown waits for another leader.
    pub shutdown_timeout_ms: u64,
    /// Seed of the core's own deterministic PRNG (jitter, backoff, random bootstrap choice).
    pub seed: u64,
    /// The endpoint this node advertises in FindQuorum (its listener) and its boot timestamp.
    /// An empty host means the node takes no part in endpoint discovery (as in the simulator).
    pub host: String,
    pub port: i32,
    /// Wall-clock ms since the Unix epoch when the node started, as read by the driver (the
    /// core reads no clock). Besides being advertised, it tells the core the wall-clock time:
    /// this plus the monotonic time since `RaftCore::new`. 0 when the driver has no wall clock.
    pub boot_timestamp: i64,
    /// Voter endpoints known at start (from `quorum.voters`); FindQuorum keeps them current.
    pub voter_endpoints: Vec<super::message::VoterEndpoint>,
    /// Pre-vote (`quorum.prevote.enable`, docs/protocol.md, "Pre-vote"): a voter whose timer
    /// runs out first asks the others whether they would vote for it, without raising its
    /// epoch, and stands only if a majority would. False: it stands at once, as before pre-vote
    /// existed. Either way the node answers other voters' pre-votes.
    pub pre_vote: bool,
    /// The leader lease (`quorum.lease.enable`, docs/consistency.md, "The leader lease"): a
    /// leader answers clients as leader only while voters that make a majority with it echoed
    /// one of its answers within `lease_ms()`. Needs `pre_vote` (the lease rests on voters
    /// refusing pre-votes while they hear from a live leader): `RaftCore::new` refuses it
    /// without. False: a leader answers until it resigns, as before the lease.
    pub lease: bool,
    /// The bound on clock drift the lease assumes (`quorum.lease.clock.drift.percent`): over
    /// any interval, two nodes' clocks measure elapsed times that differ by at most this
    /// percentage. The lease runs for `fetch_timeout_ms × (100 − drift) / 100`.
    pub lease_drift_percent: u64,
    /// How many bootstrap servers (`bootstrap.servers`) the driver can reach. The core sends
    /// FindQuorum to server `i` as node [`bootstrap_server_id`]`(i)` when it knows no voter it
    /// can reach (an observer that has not learned the voter set yet, or their endpoints).
    pub bootstrap_servers: usize,
    /// This node's log directory id (the quorum-state file's `directoryId`, docs/protocol.md,
    /// "Directory ids"); ZERO when the driver keeps no directory (tests).
    pub directory_id: DirectoryId,
    /// A bug planted on purpose, for the simulator's proof that its invariants catch it
    /// (docs/simulation.md, "Planted bugs"). None everywhere else: no driver sets it.
    #[doc(hidden)]
    pub planted: Option<PlantedBug>,
}

/// The bugs the simulator plants to show its invariants have teeth (docs/simulation.md,
/// "Planted bugs"); each breaks one rule of docs/protocol.md, "Driving the change", or of
/// "Pre-vote".
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// Rule 1 skipped: a voter record before an entry of the leader's epoch committed.
    ChangeBeforeOwnEpochCommit,
    /// The voter set in force is the committed one (applied on commit, not on append).
    ApplyOnCommit,
    /// A truncation that removes voter records leaves the set they stated in force.
    NoRevertOnTruncation,
    /// A pre-vote granted even while this node hears from a live leader.
    PreVoteDespiteLiveLeader,
    /// A fetch behind the log start served as if the log still held it (no
    /// OFFSET_OUT_OF_RANGE with the log start).
    FetchBehindLogStartServed,
    /// A log reset to its leader's log start votes and stands at once, with the voter set it
    /// had before (not waiting for the voter record at the start).
    ResetLogVotesAtOnce,
    /// The replica's idempotence check skipped: a producer's retry of a batch already in the
    /// log is appended again (docs/protocol.md, "Idempotent producers").
    DuplicateAppended,
    /// A retry's answer given at once from the replica's log, without waiting for the high
    /// watermark to pass the original batch (which may still be truncated).
    DuplicateAnsweredEarly,
    /// A producer-id block granted from the end of the committed blocks only, not past the
    /// ones still uncommitted in the leader's log: two blocks granted in one commit window
    /// overlap.
    ProducerIdBlockOverlaps,
    /// Retention's limit ignores the producer-state snapshot: it deletes batches whose
    /// producers a restarted replica then no longer knows (it cannot use a snapshot the log
    /// start passed), and a retry of one is written again.
    RetentionPassesSnapshot,
    /// The lease check removed: a leader answers consumers (and ListOffsets, Metadata) as
    /// leader after its lease ran out, while a newer leader may already commit.
    LeaseIgnored,
}

/// The pseudo node id under which the core addresses bootstrap server `index`. Real node ids are
/// `>= 0` and -1 means "none", so bootstrap servers count down from -2.
pub fn bootstrap_server_id(index: usize) -> NodeId {
    let index = NodeId::try_from(index).expect("fewer than 2^31 bootstrap servers");
    -2 - index
}

/// The bootstrap server a pseudo node id names, or None for a real node id (or -1).
pub fn bootstrap_server_index(id: NodeId) -> Option<usize> {
    if id <= -2 {
        usize::try_from(-2 - i64::from(id)).ok()
    } else {
        None
    }
}

/// The clock-drift bound the lease assumes unless configured (docs/consistency.md, "Clocks").
pub const DEFAULT_LEASE_DRIFT_PERCENT: u64 = 10;

impl RaftConfig {
    /// How long a leader's lease runs from the oldest stamp a majority echoed:
    /// `fetch_timeout_ms × (100 − drift) / 100` (docs/consistency.md, "The leader lease").
    pub fn lease_ms(&self) -> u64 {
        let keep = 100u64.saturating_sub(self.lease_drift_percent.min(100));
        self.fetch_timeout_ms.saturating_mul(keep) / 100
    }

    /// Kafka's final defaults (docs/protocol.md section 1, "Defaults").
    pub fn new(node_id: NodeId, cluster_id: impl Into<String>, voters: Vec<NodeId>) -> Self {
        Self {
            node_id,
            cluster_id: cluster_id.into(),
            voters,
            fetch_timeout_ms: 2000,
            election_timeout_ms: 1000,
            election_jitter_max_ms: 1000,
            progress_timeout_ms: 3000,
            request_timeout_ms: 2000,
            retry_backoff_ms: 20,
            retry_backoff_max_ms: 1000,
            fetch_max_wait_ms: 500,
            observer_fetch_interval_ms: 0,
            fetch_max_bytes: 1 << 20,
            tail_cache_bytes: 64 << 20,
            max_unflushed_bytes: 128 << 20,
            max_unflushed_ops: 1024,
            shutdown_timeout_ms: 5000,
            seed: 0,
            host: String::new(),
            port: -1,
            boot_timestamp: 0,
            voter_endpoints: Vec::new(),
            pre_vote: true,
            lease: true,
            lease_drift_percent: DEFAULT_LEASE_DRIFT_PERCENT,
            bootstrap_servers: 0,
            directory_id: DirectoryId::ZERO,
            planted: None,
        }
    }
}

/// Why an error response was produced is always one [`ErrorCode`]; re-exported for convenience.
pub type Error = ErrorCode;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_server_ids_round_trip_and_never_name_a_node() {
        for index in [0, 1, 7, 1000] {
            let id = bootstrap_server_id(index);
            assert!(id <= -2);
            assert_eq!(bootstrap_server_index(id), Some(index));
        }
        assert_eq!(bootstrap_server_index(-1), None);
        assert_eq!(bootstrap_server_index(0), None);
        assert_eq!(bootstrap_server_index(5), None);
        assert_eq!(bootstrap_server_index(NodeId::MIN), Some(2_147_483_646));
    }
}

/// The leader's view of its replicas (`RaftCore::replica_view`), what Kafka's Metadata calls the
/// in-sync replicas and what the node lists as brokers beside the voters (docs/clients.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaView {
    /// The voters (the leader included) whose fetches reached the leader's log end within the
    /// fetch timeout, in voter order.
    pub in_sync: Vec<NodeId>,
    /// The observers that fetched within the observer expiry, by id.
    pub observers: Vec<NodeId>,
}
