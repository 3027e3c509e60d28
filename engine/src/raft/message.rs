//! The quorum RPCs as plain data (docs/protocol.md section 13, with the decisions of section 1).
//!
//! These are what the core consumes and produces. `net::wire` maps them to and from Kafka's
//! flexible wire format; the simulator passes them around as they are.

use super::error::ErrorCode;
use super::types::{DirectoryId, Epoch, NodeId, Offset};

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct VoteRequest {
    pub cluster_id: String,
    pub candidate_epoch: Epoch,
    pub candidate_id: NodeId,
    /// Epoch of the candidate's last batch (0 for an empty log).
    pub last_epoch: Epoch,
    /// The candidate's log end offset (docs/protocol.md section 3: LEO on both sides).
    pub last_epoch_end_offset: Offset,
    /// A pre-vote (Vote v1, docs/protocol.md, "Pre-vote"): would the receiver vote for this
    /// candidate in `candidate_epoch` (the sender's epoch + 1)? Nothing is persisted or changed
    /// by either side. False: a real vote (all Vote v0 requests).
    pub pre_vote: bool,
    /// The candidate's log directory (docs/protocol.md, "Voter identity"); ZERO: not stated.
    pub candidate_directory_id: DirectoryId,
    /// The directory the candidate's voter set binds the receiver to; ZERO: not bound there.
    pub voter_directory_id: DirectoryId,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteResponse {
    pub error: ErrorCode,
    /// -1 when unknown.
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    pub vote_granted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeginQuorumEpochRequest {
    pub cluster_id: String,
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeginQuorumEpochResponse {
    pub error: ErrorCode,
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndQuorumEpochRequest {
    pub cluster_id: String,
    /// The sender.
    pub replica_id: NodeId,
    /// The current leader, or -1 when a candidate sends it.
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    /// Most caught-up first.
    pub preferred_successors: Vec<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndQuorumEpochResponse {
    pub error: ErrorCode,
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchQuorumRecordsRequest {
    pub cluster_id: String,
    pub replica_id: NodeId,
    pub leader_epoch: Epoch,
    /// The next offset the requester wants (its log end offset).
    pub fetch_offset: Offset,
    /// Epoch of the batch just before `fetch_offset` (0 for an empty log).
    pub last_fetched_epoch: Epoch,
    /// True when the sender believes it is a voter.
    pub is_follower: bool,
    pub max_wait_ms: i32,
    /// Tagged field 0: the requester's durable end offset (-1 = unknown). Only this counts toward
    /// the high watermark; `fetch_offset` says where to read next (pipelined fetches).
    pub durable_offset: Offset,
    /// Tagged field 4: the requester's log directory id (ZERO = not given; docs/protocol.md,
    /// "Directory ids").
    pub replica_directory_id: DirectoryId,
    /// Tagged field 5: the leader's `lease_stamp` from the last answer this follower took from
    /// it in this epoch (None: none yet). The leader's lease counts it, not the time it got
    /// this request: this follower refuses pre-votes for a fetch timeout from when it got
    /// that answer, which is after the stamp (docs/consistency.md, "The leader lease").
    pub lease_echo: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchQuorumRecordsResponse {
    pub error: ErrorCode,
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    /// Truncation point, meaningful only when `next_fetch_offset_epoch >= 0`.
    pub next_fetch_offset: Offset,
    /// `>= 0` means "truncate" (never test the offset). -1 = no divergence.
    pub next_fetch_offset_epoch: Epoch,
    /// Record batches (Kafka RecordBatch v2), in offset order, as slices of the leader's log.
    pub batches: Vec<super::types::Batch>,
    /// -1 when unknown.
    pub high_watermark: Offset,
    pub first_dirty_offset: Offset,
    pub last_caught_up_time_ms: i64,
    /// With OFFSET_OUT_OF_RANGE: the leader's log start and the epoch it is in, for a fetcher
    /// whose log ends below it (docs/protocol.md, "Retention and the log start"). A tagged
    /// field on the wire.
    pub log_start: Option<super::types::OffsetAndEpoch>,
    /// With `log_start`: the leader's producer-state snapshot (its bytes, as written to its
    /// file), at an offset above the log start, so that a fetcher that resets its log to the
    /// start still knows the producers whose batches were deleted (docs/protocol.md,
    /// "Retention and the log start"). Filled by the leader's replica, never by the core. A
    /// tagged field on the wire.
    pub producer_state: Option<bytes::Bytes>,
    /// Tagged field 3: the leader's clock when it made this answer, for the follower to echo in
    /// its next fetch (`FetchQuorumRecordsRequest::lease_echo`). Opaque to the follower.
    pub lease_stamp: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindQuorumRequest {
    /// The cluster the sender belongs to: a node answers only its own cluster's requests, and
    /// learns nothing from another's (docs/protocol.md section 9).
    pub cluster_id: String,
    pub replica_id: NodeId,
    pub boot_timestamp: i64,
    pub host: String,
    pub port: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterEndpoint {
    pub voter_id: NodeId,
    pub boot_timestamp: i64,
    /// Empty when unknown.
    pub host: String,
    pub port: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindQuorumResponse {
    pub error: ErrorCode,
    pub cluster_id: String,
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    pub voters: Vec<VoterEndpoint>,
    /// None when no reassignment is in progress.
    pub target_voters: Option<Vec<VoterEndpoint>>,
}

impl FindQuorumResponse {
    /// An answer with `error` that tells nothing: not the cluster id, the voters or the leader.
    pub fn telling_nothing(error: ErrorCode) -> Self {
        FindQuorumResponse {
            error,
            cluster_id: String::new(),
            leader_id: -1,
            leader_epoch: -1,
            voters: Vec::new(),
            target_voters: None,
        }
    }
}

/// DescribeQuorum asks about `__cluster_metadata`-0; the wire layer maps Topics[]/Partitions[] to
/// this and answers UNKNOWN_TOPIC_OR_PARTITION for anything else before it reaches the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeQuorumRequest {}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    pub replica_id: NodeId,
    /// The replica's log directory id ([`DirectoryId::ZERO`] when unknown); a tagged field on
    /// the wire.
    pub directory_id: DirectoryId,
    /// -1 when unknown.
    pub log_end_offset: Offset,
    /// -1 when unknown.
    pub last_fetch_timestamp: i64,
    /// -1 when unknown.
    pub last_caught_up_timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeQuorumResponse {
    pub error: ErrorCode,
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    pub high_watermark: Offset,
    pub current_voters: Vec<ReplicaState>,
    pub target_voters: Option<Vec<ReplicaState>>,
    pub observers: Vec<ReplicaState>,
}

/// One voter of an AlterQuorum target: a node id and the log directory that node must have.
/// [`DirectoryId::ZERO`] asks for whatever directory the leader has seen that node fetch with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AlterQuorumVoter {
    pub voter_id: NodeId,
    pub directory_id: DirectoryId,
}

/// AlterQuorum (docs/protocol.md, "AlterQuorum"): make `target_voters` the voter set, one
/// member per committed step. An idempotent overwrite, so a retry after REQUEST_TIMED_OUT is
/// safe; `target_voters` equal to the current voters cancels a reassignment in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterQuorumRequest {
    pub cluster_id: String,
    pub target_voters: Vec<AlterQuorumVoter>,
    /// How long the leader waits for the target to commit before REQUEST_TIMED_OUT.
    pub timeout_ms: i32,
    /// Check the request and answer as if it had been applied, changing nothing.
    pub validate_only: bool,
    /// Tagged field 0: skip the check that the new set keeps a live, caught-up majority
    /// (etcd's strict reconfiguration check).
    pub force: bool,
}

impl AlterQuorumRequest {
    /// Make `voters` (node id, directory id) the voter set of `cluster_id` within `timeout_ms`:
    /// applied, not only validated, and not forced.
    pub fn new(
        cluster_id: &str,
        voters: impl IntoIterator<Item = (NodeId, DirectoryId)>,
        timeout_ms: i32,
    ) -> Self {
        AlterQuorumRequest {
            cluster_id: cluster_id.to_owned(),
            target_voters: voters
                .into_iter()
                .map(|(voter_id, directory_id)| AlterQuorumVoter {
                    voter_id,
                    directory_id,
                })
                .collect(),
            timeout_ms,
            validate_only: false,
            force: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterQuorumVoterResult {
    pub voter_id: NodeId,
    /// NONE, or UNKNOWN_VOTER_ID for a voter the leader never heard fetch.
    pub error: ErrorCode,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterQuorumResponse {
    pub error: ErrorCode,
    /// Why, for the operator (None on success).
    pub error_message: Option<String>,
    /// -1 when unknown.
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    pub target_voters: Vec<AlterQuorumVoterResult>,
}

/// A request the core receives or sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Vote(VoteRequest),
    BeginQuorumEpoch(BeginQuorumEpochRequest),
    EndQuorumEpoch(EndQuorumEpochRequest),
    FetchQuorumRecords(FetchQuorumRecordsRequest),
    FindQuorum(FindQuorumRequest),
    DescribeQuorum(DescribeQuorumRequest),
    AlterQuorum(AlterQuorumRequest),
}

/// A response the core receives or sends; same variants as [`Request`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Vote(VoteResponse),
    BeginQuorumEpoch(BeginQuorumEpochResponse),
    EndQuorumEpoch(EndQuorumEpochResponse),
    FetchQuorumRecords(FetchQuorumRecordsResponse),
    FindQuorum(FindQuorumResponse),
    DescribeQuorum(DescribeQuorumResponse),
    AlterQuorum(AlterQuorumResponse),
}

/// The api keys of the quorum RPCs: Kafka's where Kafka numbered the API, private ones (1000+)
/// for the draft's RPCs that Kafka never did (docs/protocol.md section 13). The wire layer, the
/// simulator and the fuzz targets take them from here.
pub mod api_key {
    pub const VOTE: i16 = 52;
    pub const BEGIN_QUORUM_EPOCH: i16 = 53;
    pub const END_QUORUM_EPOCH: i16 = 54;
    pub const DESCRIBE_QUORUM: i16 = 55;
    pub const FETCH_QUORUM_RECORDS: i16 = 1000;
    pub const FIND_QUORUM: i16 = 1001;
    pub const ALTER_QUORUM: i16 = 1002;
}

impl Request {
    pub fn api_key(&self) -> i16 {
        match self {
            Request::Vote(_) => api_key::VOTE,
            Request::BeginQuorumEpoch(_) => api_key::BEGIN_QUORUM_EPOCH,
            Request::EndQuorumEpoch(_) => api_key::END_QUORUM_EPOCH,
            Request::FetchQuorumRecords(_) => api_key::FETCH_QUORUM_RECORDS,
            Request::FindQuorum(_) => api_key::FIND_QUORUM,
            Request::DescribeQuorum(_) => api_key::DESCRIBE_QUORUM,
            Request::AlterQuorum(_) => api_key::ALTER_QUORUM,
        }
    }

    /// The answer that refuses this request with `error` and tells its sender nothing: no
    /// leader, no epoch, no records, no voters. What a node answers a sender that may not make
    /// the request at all (docs/security.md), before the core sees it.
    pub fn refusal(&self, error: ErrorCode) -> Response {
        match self {
            Request::Vote(_) => Response::Vote(VoteResponse {
                error,
                leader_id: -1,
                leader_epoch: -1,
                vote_granted: false,
            }),
            Request::BeginQuorumEpoch(_) => Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
                error,
                leader_id: -1,
                leader_epoch: -1,
            }),
            Request::EndQuorumEpoch(_) => Response::EndQuorumEpoch(EndQuorumEpochResponse {
                error,
                leader_id: -1,
                leader_epoch: -1,
            }),
            Request::FetchQuorumRecords(_) => {
                Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
                    error,
                    leader_id: -1,
                    leader_epoch: -1,
                    next_fetch_offset: -1,
                    next_fetch_offset_epoch: -1,
                    batches: Vec::new(),
                    high_watermark: -1,
                    first_dirty_offset: -1,
                    last_caught_up_time_ms: -1,
                    log_start: None,
                    producer_state: None,
                    lease_stamp: None,
                })
            }
            Request::FindQuorum(_) => {
                Response::FindQuorum(FindQuorumResponse::telling_nothing(error))
            }
            Request::DescribeQuorum(_) => Response::DescribeQuorum(DescribeQuorumResponse {
                error,
                leader_id: -1,
                leader_epoch: -1,
                high_watermark: -1,
                current_voters: Vec::new(),
                target_voters: None,
                observers: Vec::new(),
            }),
            Request::AlterQuorum(_) => Response::AlterQuorum(AlterQuorumResponse {
                error,
                error_message: None,
                leader_id: -1,
                leader_epoch: -1,
                target_voters: Vec::new(),
            }),
        }
    }
}

impl Response {
    /// The error code every quorum RPC's response carries.
    pub fn error(&self) -> ErrorCode {
        match self {
            Response::Vote(r) => r.error,
            Response::BeginQuorumEpoch(r) => r.error,
            Response::EndQuorumEpoch(r) => r.error,
            Response::FetchQuorumRecords(r) => r.error,
            Response::FindQuorum(r) => r.error,
            Response::DescribeQuorum(r) => r.error,
            Response::AlterQuorum(r) => r.error,
        }
    }

    pub fn api_key(&self) -> i16 {
        match self {
            Response::Vote(_) => api_key::VOTE,
            Response::BeginQuorumEpoch(_) => api_key::BEGIN_QUORUM_EPOCH,
            Response::EndQuorumEpoch(_) => api_key::END_QUORUM_EPOCH,
            Response::FetchQuorumRecords(_) => api_key::FETCH_QUORUM_RECORDS,
            Response::FindQuorum(_) => api_key::FIND_QUORUM,
            Response::DescribeQuorum(_) => api_key::DESCRIBE_QUORUM,
            Response::AlterQuorum(_) => api_key::ALTER_QUORUM,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_answers_the_same_api_with_the_error_and_nothing_else() {
        let requests = [
            Request::Vote(VoteRequest {
                cluster_id: "c".into(),
                candidate_epoch: 3,
                candidate_id: 2,
                last_epoch: 2,
                last_epoch_end_offset: 9,
                pre_vote: false,
                ..Default::default()
            }),
            Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
                cluster_id: "c".into(),
                leader_id: 2,
                leader_epoch: 3,
            }),
            Request::EndQuorumEpoch(EndQuorumEpochRequest {
                cluster_id: "c".into(),
                replica_id: 2,
                leader_id: 2,
                leader_epoch: 3,
                preferred_successors: vec![1],
            }),
            Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
                cluster_id: "c".into(),
                replica_id: 2,
                leader_epoch: 3,
                fetch_offset: 9,
                last_fetched_epoch: 2,
                is_follower: true,
                max_wait_ms: 500,
                durable_offset: 9,
                replica_directory_id: Default::default(),
                lease_echo: None,
            }),
            Request::FindQuorum(FindQuorumRequest {
                cluster_id: "c".into(),
                replica_id: 2,
                boot_timestamp: 1,
                host: "h".into(),
                port: 1,
            }),
            Request::DescribeQuorum(DescribeQuorumRequest {}),
            Request::AlterQuorum(AlterQuorumRequest {
                cluster_id: "c".into(),
                target_voters: vec![AlterQuorumVoter {
                    voter_id: 2,
                    directory_id: DirectoryId::ZERO,
                }],
                timeout_ms: 1000,
                validate_only: false,
                force: false,
            }),
        ];
        for request in requests {
            let response = request.refusal(ErrorCode::CLUSTER_AUTHORIZATION_FAILED);
            assert_eq!(response.api_key(), request.api_key());
            assert_eq!(response.error(), ErrorCode::CLUSTER_AUTHORIZATION_FAILED);
            let text = format!("{response:?}");
            assert!(!text.contains("leader_id: 2"), "{text}");
            assert!(!text.contains("leader_epoch: 3"), "{text}");
        }
    }
}
