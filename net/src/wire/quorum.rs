//! The quorum RPCs on the wire (docs/protocol.md sections 13 and 1): flexible (compact strings
//! and arrays, a tagged-field section after every struct), version 0, and Vote 0-1: v1 is v0
//! plus the PreVote bool, and a Vote is sent as v1 only when it is a pre-vote (so a real vote
//! reaches a node that knows only v0 exactly as before).
//!
//! Bodies map one to one onto `engine::raft::{Request, Response}`. FetchQuorumRecords responses
//! encode to a chain of [`Bytes`] in which the record batches are the log's own buffers, so a
//! response is sent as an iovec chain without copying the records.

use bytes::Bytes;
use engine::producer_ids::BlockWanted;
use engine::raft::admission::MAX_TARGET_VOTERS;
use engine::raft::{
    AlterQuorumRequest, AlterQuorumResponse, AlterQuorumVoter, AlterQuorumVoterResult,
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, DescribeQuorumRequest,
    DescribeQuorumResponse, DirectoryId, EndQuorumEpochRequest, EndQuorumEpochResponse, ErrorCode,
    FetchQuorumRecordsRequest, FetchQuorumRecordsResponse, FindQuorumRequest, FindQuorumResponse,
    OffsetAndEpoch, ReplicaState, Request, Response, VoteRequest, VoteResponse, VoterEndpoint,
};
use engine::record::{BatchIter, RecordError};
use thiserror::Error;

use super::api;
use super::broker_list::ClientEndpoint;
use super::broker_list::{decode_endpoints, encode_endpoints, BrokerList, BrokerListError};
use super::kafka::flex::Flex;
use super::primitives::{WireError, WireReader, WireWriter};

/// The one topic-partition the quorum serves.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
pub const METADATA_PARTITION: i32 = 0;

/// Tagged field of FetchQuorumRecords requests: the requester's durable end offset.
const TAG_DURABLE_OFFSET: u32 = 0;
/// Tagged fields of FetchQuorumRecords requests the node adds around the core's request
/// (docs/protocol.md, "Client endpoints"): the fetcher's advertised client endpoints, and the
/// version of the broker list it holds.
const TAG_CLIENT_ENDPOINTS: u32 = 1;
const TAG_KNOWN_BROKERS: u32 = 2;
/// Tagged field of FetchQuorumRecords requests: the fetcher wants a block of producer ids
/// (docs/protocol.md, "Idempotent producers"): incarnation u64, the first id of the newest block
/// it has i64.
const TAG_PRODUCER_IDS_WANTED: u32 = 3;
/// Tagged field of FetchQuorumRecords requests: the fetcher's log directory id (docs/protocol.md,
/// "Directory ids"); omitted when unknown.
const TAG_FETCH_DIRECTORY_ID: u32 = 4;
/// Tagged field of FetchQuorumRecords requests: the lease stamp of the last answer the fetcher
/// took from the leader (i64; docs/consistency.md, "The leader lease"); omitted when none.
const TAG_LEASE_ECHO: u32 = 5;
/// Tagged fields of Vote requests (docs/protocol.md, "Voter identity"): the candidate's log
/// directory, and the directory its voter set binds the receiver to; each omitted when unknown.
const TAG_CANDIDATE_DIRECTORY_ID: u32 = 0;
const TAG_VOTER_DIRECTORY_ID: u32 = 1;
/// Tagged fields of FetchQuorumRecords responses: the leader's broker list; with
/// OFFSET_OUT_OF_RANGE, the leader's log start (offset i64, epoch i32: docs/protocol.md,
/// "Retention and the log start").
const TAG_BROKER_LIST: u32 = 0;
const TAG_LOG_START: u32 = 1;
/// With the log start: the leader's producer-state snapshot, its file's bytes (checked by its
/// own decoder: `engine::producer_snapshot`).
const TAG_PRODUCER_STATE: u32 = 2;
/// The leader's clock when it made the answer (i64), for the follower to echo
/// (docs/consistency.md, "The leader lease"); omitted when none.
const TAG_LEASE_STAMP: u32 = 3;

/// What a node adds to a FetchQuorumRecords request beside the core's fields. A node that
/// does not know these tags skips them (KIP-482), so old and new nodes fetch from each other.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchRequestExtras {
    /// The fetcher's own client endpoints (sent until the leader's list shows them).
    pub endpoints: Option<Vec<ClientEndpoint>>,
    /// The version of the broker list the fetcher holds, 0 for none; None from a fetcher that
    /// takes no list (the leader then sends none).
    pub known_brokers: Option<u64>,
    /// The fetcher wants producer ids.
    pub producer_ids: Option<BlockWanted>,
}
/// Tagged fields of DescribeQuorum: the partition's target voters, and per replica timestamps.
const TAG_TARGET_VOTERS: u32 = 0;
const TAG_LAST_CAUGHT_UP: u32 = 0;
const TAG_LAST_FETCH: u32 = 1;
const TAG_REPLICA_DIRECTORY_ID: u32 = 2;
/// Tagged field of AlterQuorum requests: Force (bool), skip the strict reconfiguration check.
const TAG_FORCE: u32 = 0;

#[derive(Debug, Error)]
pub enum DecodeError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("records at byte {at} of the records field: {source}")]
    Records { at: usize, source: RecordError },
    #[error("api key {0} is not a quorum RPC")]
    UnknownApi(i16),
    #[error("DescribeQuorum asks about {topic}-{partition}; this server hosts only {METADATA_TOPIC}-{METADATA_PARTITION}")]
    UnknownPartition { topic: String, partition: i32 },
    #[error("DescribeQuorum must name exactly one partition, it names {0}")]
    PartitionCount(usize),
    #[error("broker endpoints: {0}")]
    BrokerList(#[from] BrokerListError),
    #[error("{field}: {count} entries, at most {max}")]
    TooMany {
        field: &'static str,
        count: usize,
        max: usize,
    },
}

impl DecodeError {
    /// The Kafka error code a server answers with for a request that failed to decode this way.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            DecodeError::Records { .. } => ErrorCode::CORRUPT_MESSAGE,
            DecodeError::UnknownPartition { .. } => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            _ => ErrorCode::INVALID_REQUEST,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

/// The version `request` goes out in: Vote v1 for a pre-vote, v0 for everything else (the
/// request header must say it; `encode_request` writes that version's body).
pub fn request_version(request: &Request) -> i16 {
    match request {
        Request::Vote(r) if r.pre_vote => api::VOTE_PRE_VOTE_VERSION,
        _ => 0,
    }
}

pub fn encode_request(request: &Request, w: &mut WireWriter) {
    encode_request_with(request, &FetchRequestExtras::default(), w)
}

/// [`encode_request`] with the node's extras on a FetchQuorumRecords request (ignored on others).
pub fn encode_request_with(request: &Request, extras: &FetchRequestExtras, w: &mut WireWriter) {
    match request {
        Request::Vote(r) => {
            w.compact_string(&r.cluster_id);
            w.i32(r.candidate_epoch);
            w.i32(r.candidate_id);
            w.i32(r.last_epoch);
            w.i64(r.last_epoch_end_offset);
            if request_version(request) >= api::VOTE_PRE_VOTE_VERSION {
                w.bool(r.pre_vote);
            }
            return w.present_tagged_fields(&[
                (
                    TAG_CANDIDATE_DIRECTORY_ID,
                    directory_tag(&r.candidate_directory_id),
                ),
                (TAG_VOTER_DIRECTORY_ID, directory_tag(&r.voter_directory_id)),
            ]);
        }
        Request::BeginQuorumEpoch(r) => {
            w.compact_string(&r.cluster_id);
            w.i32(r.leader_id);
            w.i32(r.leader_epoch);
        }
        Request::EndQuorumEpoch(r) => {
            w.compact_string(&r.cluster_id);
            w.i32(r.replica_id);
            w.i32(r.leader_id);
            w.i32(r.leader_epoch);
            w.compact_array_len(Some(r.preferred_successors.len()));
            for id in &r.preferred_successors {
                w.i32(*id);
            }
        }
        Request::FetchQuorumRecords(r) => {
            w.compact_string(&r.cluster_id);
            w.i32(r.replica_id);
            w.i32(r.leader_epoch);
            w.i64(r.fetch_offset);
            w.i32(r.last_fetched_epoch);
            w.bool(r.is_follower);
            w.i32(r.max_wait_ms);
            return write_fetch_tags(w, r, extras);
        }
        Request::FindQuorum(r) => {
            w.compact_string(&r.cluster_id);
            w.i32(r.replica_id);
            w.i64(r.boot_timestamp);
            w.compact_string(&r.host);
            w.i32(r.port);
        }
        Request::DescribeQuorum(DescribeQuorumRequest {}) => {
            w.compact_array_len(Some(1));
            w.compact_string(METADATA_TOPIC);
            w.compact_array_len(Some(1));
            w.i32(METADATA_PARTITION);
            w.no_tagged_fields(); // partition
            w.no_tagged_fields(); // topic
        }
        Request::AlterQuorum(r) => return encode_alter_quorum(r, w),
    }
    w.no_tagged_fields();
}

fn encode_alter_quorum(r: &AlterQuorumRequest, w: &mut WireWriter) {
    w.compact_string(&r.cluster_id);
    Flex(true).write_structs(w, &r.target_voters, |w, v| {
        w.i32(v.voter_id);
        w.uuid(&v.directory_id.0);
    });
    w.i32(r.timeout_ms);
    w.bool(r.validate_only);
    // Force rides a tagged field, written only when set: a request without it is the plain v0
    // body, and a leader that does not know the tag skips it.
    if r.force {
        w.tagged_fields(&[(TAG_FORCE, &[1])]);
    } else {
        w.no_tagged_fields();
    }
}

fn decode_alter_quorum(r: &mut WireReader) -> Result<AlterQuorumRequest, DecodeError> {
    let cluster_id = r.compact_string("cluster id")?;
    // Each voter: id, uuid, an empty tagged-field section.
    let target_voters = read_voter_structs(r, 4 + 16 + 1, read_target_voter)?;
    let mut request = AlterQuorumRequest {
        cluster_id,
        target_voters,
        timeout_ms: r.i32("timeout ms")?,
        validate_only: r.bool("validate only")?,
        force: false,
    };
    r.tagged_fields(|tag, payload| {
        if tag != TAG_FORCE {
            return Ok(false);
        }
        request.force = WireReader::whole(payload, |r| r.bool("force"))?;
        Ok(true)
    })?;
    Ok(request)
}

fn read_target_voter(r: &mut WireReader) -> Result<AlterQuorumVoter, WireError> {
    Ok(AlterQuorumVoter {
        voter_id: r.i32("voter id")?,
        directory_id: DirectoryId(r.uuid("voter directory id")?),
    })
}

/// AlterQuorum's target voters (request or response): a compact array (null reads as empty) of
/// structs of at least `min_element_bytes`, each read by `read` and closed by its tagged-field
/// section. Refused above [`MAX_TARGET_VOTERS`]: a voter list longer than any voter set is
/// hostile, and its decoding must not cost more than a real one.
fn read_voter_structs<T>(
    r: &mut WireReader,
    min_element_bytes: usize,
    mut read: impl FnMut(&mut WireReader) -> Result<T, WireError>,
) -> Result<Vec<T>, DecodeError> {
    let field = "target voters";
    let count = r.compact_array_len(field, min_element_bytes)?.unwrap_or(0);
    if count > MAX_TARGET_VOTERS {
        return Err(DecodeError::TooMany {
            field,
            count,
            max: MAX_TARGET_VOTERS,
        });
    }
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        items.push(read(r)?);
        r.skip_tagged_fields()?;
    }
    Ok(items)
}

fn read_voter_result(r: &mut WireReader) -> Result<AlterQuorumVoterResult, WireError> {
    Ok(AlterQuorumVoterResult {
        voter_id: r.i32("voter id")?,
        error: ErrorCode(r.i16("voter error code")?),
    })
}

fn encode_alter_quorum_response(r: &AlterQuorumResponse, w: &mut WireWriter) {
    w.i16(r.error.0);
    w.compact_nullable_string(r.error_message.as_deref());
    w.i32(r.leader_id);
    w.i32(r.leader_epoch);
    Flex(true).write_structs(w, &r.target_voters, |w, v| {
        w.i32(v.voter_id);
        w.i16(v.error.0);
    });
}

fn decode_alter_quorum_response(r: &mut WireReader) -> Result<AlterQuorumResponse, DecodeError> {
    let error = ErrorCode(r.i16("error code")?);
    let error_message = r.compact_nullable_string("error message")?;
    let leader_id = r.i32("leader id")?;
    let leader_epoch = r.i32("leader epoch")?;
    let target_voters = read_voter_structs(r, 4 + 2 + 1, read_voter_result)?;
    Ok(AlterQuorumResponse {
        error,
        error_message,
        leader_id,
        leader_epoch,
        target_voters,
    })
}

fn write_fetch_tags(
    w: &mut WireWriter,
    r: &FetchQuorumRecordsRequest,
    extras: &FetchRequestExtras,
) {
    let durable = (r.durable_offset != -1).then(|| r.durable_offset.to_be_bytes());
    let endpoints = extras.endpoints.as_ref().map(|e| {
        let mut inner = WireWriter::new();
        encode_endpoints(&mut inner, e);
        inner.into_inner()
    });
    let known = extras.known_brokers.map(u64::to_be_bytes);
    let wanted = extras.producer_ids.map(|wanted| {
        WireWriter::bytes_of(|t| {
            t.i64(wanted.incarnation as i64);
            t.i64(wanted.have);
        })
    });
    let echo = r.lease_echo.map(i64::to_be_bytes);
    w.present_tagged_fields(&[
        (TAG_DURABLE_OFFSET, durable.as_ref().map(|d| &d[..])),
        (TAG_CLIENT_ENDPOINTS, endpoints.as_deref()),
        (TAG_KNOWN_BROKERS, known.as_ref().map(|k| &k[..])),
        (TAG_PRODUCER_IDS_WANTED, wanted.as_deref()),
        (
            TAG_FETCH_DIRECTORY_ID,
            directory_tag(&r.replica_directory_id),
        ),
        (TAG_LEASE_ECHO, echo.as_ref().map(|e| &e[..])),
    ]);
}

/// A directory id's tagged-field payload: none for the zero id (not known or not sent).
fn directory_tag(id: &DirectoryId) -> Option<&[u8]> {
    (!id.is_zero()).then_some(&id.0)
}

/// Decodes the body of a `version` request of `api_key` (a version its spec supports: the
/// caller checked it against the API table).
pub fn decode_request(
    api_key: i16,
    version: i16,
    r: &mut WireReader,
) -> Result<Request, DecodeError> {
    decode_request_with(api_key, version, r).map(|(request, _)| request)
}

/// [`decode_request`] with the extras of a FetchQuorumRecords request (default for others).
pub fn decode_request_with(
    api_key: i16,
    version: i16,
    r: &mut WireReader,
) -> Result<(Request, FetchRequestExtras), DecodeError> {
    let request = match api_key {
        api::VOTE => {
            let mut vote = VoteRequest {
                cluster_id: r.compact_string("cluster id")?,
                candidate_epoch: r.i32("candidate epoch")?,
                candidate_id: r.i32("candidate id")?,
                last_epoch: r.i32("last epoch")?,
                last_epoch_end_offset: r.i64("last epoch end offset")?,
                // v0 has no such field: every v0 Vote is a real one.
                pre_vote: version >= api::VOTE_PRE_VOTE_VERSION && r.bool("pre vote")?,
                candidate_directory_id: DirectoryId::ZERO,
                voter_directory_id: DirectoryId::ZERO,
            };
            r.tagged_fields(|tag, payload| {
                let field = match tag {
                    TAG_CANDIDATE_DIRECTORY_ID => &mut vote.candidate_directory_id,
                    TAG_VOTER_DIRECTORY_ID => &mut vote.voter_directory_id,
                    _ => return Ok(false),
                };
                *field = DirectoryId(WireReader::whole(payload, |r| r.uuid("vote directory id"))?);
                Ok(true)
            })?;
            r.finish()?;
            return Ok((Request::Vote(vote), FetchRequestExtras::default()));
        }
        api::BEGIN_QUORUM_EPOCH => Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
            cluster_id: r.compact_string("cluster id")?,
            leader_id: r.i32("leader id")?,
            leader_epoch: r.i32("leader epoch")?,
        }),
        api::END_QUORUM_EPOCH => {
            let cluster_id = r.compact_string("cluster id")?;
            let replica_id = r.i32("replica id")?;
            let leader_id = r.i32("leader id")?;
            let leader_epoch = r.i32("leader epoch")?;
            let count = r.compact_array_len("preferred successors", 4)?.unwrap_or(0);
            let mut preferred_successors = Vec::with_capacity(count);
            for _ in 0..count {
                preferred_successors.push(r.i32("preferred successor")?);
            }
            Request::EndQuorumEpoch(EndQuorumEpochRequest {
                cluster_id,
                replica_id,
                leader_id,
                leader_epoch,
                preferred_successors,
            })
        }
        api::FETCH_QUORUM_RECORDS => {
            let mut fetch = FetchQuorumRecordsRequest {
                cluster_id: r.compact_string("cluster id")?,
                replica_id: r.i32("replica id")?,
                leader_epoch: r.i32("leader epoch")?,
                fetch_offset: r.i64("fetch offset")?,
                last_fetched_epoch: r.i32("last fetched epoch")?,
                is_follower: r.bool("is follower")?,
                max_wait_ms: r.i32("max wait ms")?,
                durable_offset: -1,
                replica_directory_id: DirectoryId::ZERO,
                lease_echo: None,
            };
            let mut endpoints = None;
            let mut known = None;
            let mut producer_ids = None;
            r.tagged_fields(|tag, payload| {
                match tag {
                    TAG_DURABLE_OFFSET => {
                        fetch.durable_offset = WireReader::new(payload).i64("durable offset")?
                    }
                    TAG_CLIENT_ENDPOINTS => endpoints = Some(payload),
                    TAG_KNOWN_BROKERS => {
                        known = Some(WireReader::new(payload).i64("known brokers")? as u64)
                    }
                    TAG_FETCH_DIRECTORY_ID => {
                        fetch.replica_directory_id = read_directory_id(payload)?;
                    }
                    TAG_LEASE_ECHO => {
                        fetch.lease_echo =
                            Some(WireReader::whole(payload, |r| r.i64("lease echo"))?);
                    }
                    TAG_PRODUCER_IDS_WANTED => {
                        producer_ids = Some(WireReader::whole(payload, |r| {
                            Ok::<_, WireError>(BlockWanted {
                                incarnation: r.i64("producer ids incarnation")? as u64,
                                have: r.i64("producer ids held")?,
                            })
                        })?);
                    }
                    _ => return Ok(false),
                }
                Ok(true)
            })?;
            r.finish()?;
            let endpoints = endpoints
                .map(|payload| {
                    WireReader::whole(payload, |r| decode_endpoints(r).map_err(DecodeError::from))
                })
                .transpose()?;
            let extras = FetchRequestExtras {
                endpoints,
                known_brokers: known,
                producer_ids,
            };
            return Ok((Request::FetchQuorumRecords(fetch), extras));
        }
        api::FIND_QUORUM => Request::FindQuorum(FindQuorumRequest {
            cluster_id: r.compact_string("cluster id")?,
            replica_id: r.i32("replica id")?,
            boot_timestamp: r.i64("boot timestamp")?,
            host: r.compact_string("host")?,
            port: r.i32("port")?,
        }),
        api::DESCRIBE_QUORUM => {
            decode_describe_topics(r)?;
            Request::DescribeQuorum(DescribeQuorumRequest {})
        }
        api::ALTER_QUORUM => {
            let request = Request::AlterQuorum(decode_alter_quorum(r)?);
            r.finish()?;
            return Ok((request, FetchRequestExtras::default()));
        }
        other => return Err(DecodeError::UnknownApi(other)),
    };
    r.skip_tagged_fields()?;
    r.finish()?;
    Ok((request, FetchRequestExtras::default()))
}

/// Topics[]{TopicName, Partitions[]{PartitionIndex}}: exactly `__cluster_metadata`-0.
fn decode_describe_topics(r: &mut WireReader) -> Result<(), DecodeError> {
    let topics = r.compact_array_len("topics", 3)?.unwrap_or(0);
    let mut partitions_seen = 0;
    for _ in 0..topics {
        let topic = r.compact_string("topic name")?;
        let partitions = r.compact_array_len("partitions", 5)?.unwrap_or(0);
        for _ in 0..partitions {
            let partition = r.i32("partition index")?;
            r.skip_tagged_fields()?;
            if topic != METADATA_TOPIC || partition != METADATA_PARTITION {
                return Err(DecodeError::UnknownPartition { topic, partition });
            }
            partitions_seen += 1;
        }
        r.skip_tagged_fields()?;
    }
    if partitions_seen != 1 {
        return Err(DecodeError::PartitionCount(partitions_seen));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Responses

/// Encodes a response body. The result is a chain: FetchQuorumRecords responses put each record
/// batch in as its own [`Bytes`] (the log's buffer), everything else is one piece.
pub fn encode_response(response: &Response, w: WireWriter) -> Vec<Bytes> {
    encode_response_with(response, None, w)
}

/// [`encode_response`] with the leader's broker list (`BrokerList::build`'s bytes) in a
/// FetchQuorumRecords response's tagged field (ignored on others).
pub fn encode_response_with(
    response: &Response,
    broker_list: Option<&Bytes>,
    w: WireWriter,
) -> Vec<Bytes> {
    let mut w = w;
    match response {
        Response::Vote(r) => {
            write_leader(&mut w, r.error, r.leader_id, r.leader_epoch);
            w.bool(r.vote_granted);
        }
        Response::BeginQuorumEpoch(r) => write_leader(&mut w, r.error, r.leader_id, r.leader_epoch),
        Response::EndQuorumEpoch(r) => write_leader(&mut w, r.error, r.leader_id, r.leader_epoch),
        Response::FetchQuorumRecords(r) => return encode_fetch_response(r, broker_list, w),
        Response::FindQuorum(r) => {
            w.i16(r.error.0);
            w.compact_string(&r.cluster_id);
            w.i32(r.leader_id);
            w.i32(r.leader_epoch);
            write_endpoints(&mut w, Some(&r.voters));
            write_endpoints(&mut w, r.target_voters.as_deref());
        }
        Response::DescribeQuorum(r) => encode_describe_response(r, &mut w),
        Response::AlterQuorum(r) => encode_alter_quorum_response(r, &mut w),
    }
    w.no_tagged_fields();
    vec![w.into_inner().freeze()]
}

/// ErrorCode, LeaderId, LeaderEpoch: how the quorum RPCs' answers (a DescribeQuorum
/// partition's too) begin.
fn write_leader(w: &mut WireWriter, error: ErrorCode, leader_id: i32, leader_epoch: i32) {
    w.i16(error.0);
    w.i32(leader_id);
    w.i32(leader_epoch);
}

fn encode_fetch_response(
    r: &FetchQuorumRecordsResponse,
    broker_list: Option<&Bytes>,
    mut w: WireWriter,
) -> Vec<Bytes> {
    write_fetch_head(r, &mut w);
    let mut tail = WireWriter::with_capacity(32);
    write_fetch_tail(r, broker_list, &mut tail);
    fetch_chain(r, w.into_inner().freeze(), tail.into_inner().freeze())
}

/// A whole FetchQuorumRecords response frame written into `w`, an empty buffer that pieces are
/// split off: the size (4 bytes), what `header` writes (the response header), then the body as
/// [`encode_response_with`] writes it. The tail is written first, so the size is known and
/// stamped before the first piece is split: no piece is copied or allocated to stamp it, and
/// the records stay the log's buffers.
pub fn encode_fetch_response_frame(
    r: &FetchQuorumRecordsResponse,
    broker_list: Option<&Bytes>,
    w: &mut WireWriter,
    header: impl FnOnce(&mut WireWriter),
) -> Vec<Bytes> {
    assert!(w.is_empty(), "a frame starts in an empty buffer");
    write_fetch_tail(r, broker_list, w);
    let tail = w.split_piece();
    w.i32(0);
    header(w);
    write_fetch_head(r, w);
    let size = w.len() + records_len(r) + tail.len() - 4;
    w.overwrite(0, &super::frame::size_prefix(size));
    fetch_chain(r, w.split_piece(), tail)
}

fn records_len(r: &FetchQuorumRecordsResponse) -> usize {
    r.batches.iter().map(|b| b.bytes.len()).sum()
}

/// Everything before the records, their length last.
fn write_fetch_head(r: &FetchQuorumRecordsResponse, w: &mut WireWriter) {
    write_leader(w, r.error, r.leader_id, r.leader_epoch);
    w.i64(r.next_fetch_offset);
    w.i32(r.next_fetch_offset_epoch);
    w.compact_bytes_len(Some(records_len(r)));
}

/// Everything after the records.
fn write_fetch_tail(
    r: &FetchQuorumRecordsResponse,
    broker_list: Option<&Bytes>,
    w: &mut WireWriter,
) {
    w.i64(r.high_watermark);
    w.i64(r.first_dirty_offset);
    w.i64(r.last_caught_up_time_ms);
    let log_start = r.log_start.map(|start| {
        let mut payload = [0u8; 12];
        payload[..8].copy_from_slice(&start.offset.to_be_bytes());
        payload[8..].copy_from_slice(&start.epoch.to_be_bytes());
        payload
    });
    let stamp = r.lease_stamp.map(i64::to_be_bytes);
    w.present_tagged_fields(&[
        (TAG_BROKER_LIST, broker_list.map(|list| &list[..])),
        (TAG_LOG_START, log_start.as_ref().map(|p| &p[..])),
        (TAG_PRODUCER_STATE, r.producer_state.as_deref()),
        (TAG_LEASE_STAMP, stamp.as_ref().map(|s| &s[..])),
    ]);
}

/// The head, each batch as its own piece (the log's buffer), the tail.
fn fetch_chain(r: &FetchQuorumRecordsResponse, head: Bytes, tail: Bytes) -> Vec<Bytes> {
    let mut chain = Vec::with_capacity(r.batches.len() + 2);
    chain.push(head);
    chain.extend(r.batches.iter().map(|b| b.bytes.clone()));
    chain.push(tail);
    chain
}

fn write_endpoints(w: &mut WireWriter, voters: Option<&[VoterEndpoint]>) {
    Flex(true).write_nullable_structs(w, voters, |w, v| {
        w.i32(v.voter_id);
        w.i64(v.boot_timestamp);
        w.compact_string(&v.host);
        w.i32(v.port);
    });
}

fn read_endpoints(r: &mut WireReader) -> Result<Option<Vec<VoterEndpoint>>, WireError> {
    Flex(true).read_nullable_structs(r, "voters", 18, |r| {
        Ok(VoterEndpoint {
            voter_id: r.i32("voter id")?,
            boot_timestamp: r.i64("boot timestamp")?,
            host: r.compact_string("host")?,
            port: r.i32("port")?,
        })
    })
}

fn encode_describe_response(r: &DescribeQuorumResponse, w: &mut WireWriter) {
    // A failure of the whole request goes in the top-level code; a partition-level answer
    // (including NOT_QUORUM_LEADER) in the partition's.
    w.i16(ErrorCode::NONE.0);
    w.compact_array_len(Some(1));
    w.compact_string(METADATA_TOPIC);
    w.compact_array_len(Some(1));
    w.i32(METADATA_PARTITION);
    write_leader(w, r.error, r.leader_id, r.leader_epoch);
    w.i64(r.high_watermark);
    write_replicas(w, &r.current_voters);
    write_replicas(w, &r.observers);
    match &r.target_voters {
        None => w.no_tagged_fields(),
        Some(target) => {
            let mut inner = WireWriter::new();
            write_replicas(&mut inner, target);
            w.tagged_fields(&[(TAG_TARGET_VOTERS, &inner.into_inner())]);
        }
    }
    w.no_tagged_fields(); // topic
}

fn write_replicas(w: &mut WireWriter, replicas: &[ReplicaState]) {
    w.compact_array_len(Some(replicas.len()));
    for replica in replicas {
        w.i32(replica.replica_id);
        w.i64(replica.log_end_offset);
        // -1: the timestamp is not known, and its tag is left out.
        let timestamp = |ms: i64| (ms != -1).then(|| ms.to_be_bytes());
        let caught_up = timestamp(replica.last_caught_up_timestamp);
        let fetched = timestamp(replica.last_fetch_timestamp);
        w.present_tagged_fields(&[
            (TAG_LAST_CAUGHT_UP, caught_up.as_ref().map(|t| &t[..])),
            (TAG_LAST_FETCH, fetched.as_ref().map(|t| &t[..])),
            (
                TAG_REPLICA_DIRECTORY_ID,
                directory_tag(&replica.directory_id),
            ),
        ]);
    }
}

/// A replica's directory id, the whole payload of its tagged field.
fn read_directory_id(payload: Bytes) -> Result<DirectoryId, WireError> {
    WireReader::whole(payload, |r| r.uuid("replica directory id")).map(DirectoryId)
}

fn read_replicas(r: &mut WireReader) -> Result<Vec<ReplicaState>, WireError> {
    let count = r.compact_array_len("replicas", 13)?.unwrap_or(0);
    let mut replicas = Vec::with_capacity(count);
    for _ in 0..count {
        let mut replica = ReplicaState {
            replica_id: r.i32("replica id")?,
            directory_id: DirectoryId::ZERO,
            log_end_offset: r.i64("log end offset")?,
            last_fetch_timestamp: -1,
            last_caught_up_timestamp: -1,
        };
        r.tagged_fields(|tag, payload| {
            let value = || WireReader::new(payload.clone()).i64("replica timestamp");
            match tag {
                TAG_LAST_CAUGHT_UP => replica.last_caught_up_timestamp = value()?,
                TAG_LAST_FETCH => replica.last_fetch_timestamp = value()?,
                TAG_REPLICA_DIRECTORY_ID => {
                    replica.directory_id = read_directory_id(payload.clone())?
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        replicas.push(replica);
    }
    Ok(replicas)
}

pub fn decode_response(api_key: i16, r: &mut WireReader) -> Result<Response, DecodeError> {
    decode_response_with(api_key, r).map(|(response, _)| response)
}

/// [`decode_response`] with the broker list a FetchQuorumRecords response may carry.
pub fn decode_response_with(
    api_key: i16,
    r: &mut WireReader,
) -> Result<(Response, Option<BrokerList>), DecodeError> {
    if api_key == api::FETCH_QUORUM_RECORDS {
        let mut response = decode_fetch_response(r)?;
        let mut list = None;
        r.tagged_fields(|tag, payload| match tag {
            TAG_BROKER_LIST => {
                list = Some(payload);
                Ok(true)
            }
            TAG_LOG_START => {
                response.log_start = Some(WireReader::whole(payload, |r| {
                    Ok::<_, WireError>(OffsetAndEpoch {
                        offset: r.i64("log start offset")?,
                        epoch: r.i32("log start epoch")?,
                    })
                })?);
                Ok(true)
            }
            TAG_PRODUCER_STATE => {
                response.producer_state = Some(payload);
                Ok(true)
            }
            TAG_LEASE_STAMP => {
                response.lease_stamp = Some(WireReader::whole(payload, |r| r.i64("lease stamp"))?);
                Ok(true)
            }
            _ => Ok(false),
        })?;
        r.finish()?;
        let list = list.map(BrokerList::decode).transpose()?;
        return Ok((Response::FetchQuorumRecords(response), list));
    }
    let response = match api_key {
        api::VOTE => Response::Vote(VoteResponse {
            error: ErrorCode(r.i16("error code")?),
            leader_id: r.i32("leader id")?,
            leader_epoch: r.i32("leader epoch")?,
            vote_granted: r.bool("vote granted")?,
        }),
        api::BEGIN_QUORUM_EPOCH => Response::BeginQuorumEpoch(BeginQuorumEpochResponse {
            error: ErrorCode(r.i16("error code")?),
            leader_id: r.i32("leader id")?,
            leader_epoch: r.i32("leader epoch")?,
        }),
        api::END_QUORUM_EPOCH => Response::EndQuorumEpoch(EndQuorumEpochResponse {
            error: ErrorCode(r.i16("error code")?),
            leader_id: r.i32("leader id")?,
            leader_epoch: r.i32("leader epoch")?,
        }),
        api::FIND_QUORUM => Response::FindQuorum(FindQuorumResponse {
            error: ErrorCode(r.i16("error code")?),
            cluster_id: r.compact_string("cluster id")?,
            leader_id: r.i32("leader id")?,
            leader_epoch: r.i32("leader epoch")?,
            voters: read_endpoints(r)?.unwrap_or_default(),
            target_voters: read_endpoints(r)?,
        }),
        api::DESCRIBE_QUORUM => Response::DescribeQuorum(decode_describe_response(r)?),
        api::ALTER_QUORUM => Response::AlterQuorum(decode_alter_quorum_response(r)?),
        other => return Err(DecodeError::UnknownApi(other)),
    };
    r.skip_tagged_fields()?;
    r.finish()?;
    Ok((response, None))
}

fn decode_fetch_response(r: &mut WireReader) -> Result<FetchQuorumRecordsResponse, DecodeError> {
    let error = ErrorCode(r.i16("error code")?);
    let leader_id = r.i32("leader id")?;
    let leader_epoch = r.i32("leader epoch")?;
    let next_fetch_offset = r.i64("next fetch offset")?;
    let next_fetch_offset_epoch = r.i32("next fetch offset epoch")?;
    let records = r.compact_nullable_bytes("records")?.unwrap_or_default();
    let batches = split_batches(records)?;
    Ok(FetchQuorumRecordsResponse {
        error,
        leader_id,
        leader_epoch,
        next_fetch_offset,
        next_fetch_offset_epoch,
        batches,
        high_watermark: r.i64("high watermark")?,
        first_dirty_offset: r.i64("first dirty offset")?,
        last_caught_up_time_ms: r.i64("last caught up time")?,
        log_start: None,
        producer_state: None,
        lease_stamp: None,
    })
}

/// Splits a records field into batches, each a slice of the frame. The leader validated each in
/// full when it entered the log; here the framing and CRC-32C are checked
/// (`Batch::from_stored`), so a follower does not decompress every compressed batch again.
pub fn split_batches(records: Bytes) -> Result<Vec<engine::raft::Batch>, DecodeError> {
    let mut iter = BatchIter::new(records).stored();
    let mut batches = Vec::new();
    while let Some(batch) = iter.next() {
        let at = iter.position();
        batches.push(batch.map_err(|source| DecodeError::Records { at, source })?);
    }
    Ok(batches)
}

fn decode_describe_response(r: &mut WireReader) -> Result<DescribeQuorumResponse, DecodeError> {
    let top_error = ErrorCode(r.i16("error code")?);
    let topics = r.compact_array_len("topics", 3)?.unwrap_or(0);
    let mut found = None;
    for _ in 0..topics {
        let topic = r.compact_string("topic name")?;
        let partitions = r.compact_array_len("partitions", 25)?.unwrap_or(0);
        for _ in 0..partitions {
            let partition = r.i32("partition index")?;
            let mut response = DescribeQuorumResponse {
                error: ErrorCode(r.i16("partition error code")?),
                leader_id: r.i32("leader id")?,
                leader_epoch: r.i32("leader epoch")?,
                high_watermark: r.i64("high watermark")?,
                current_voters: read_replicas(r)?,
                observers: read_replicas(r)?,
                target_voters: None,
            };
            r.tagged_fields(|tag, payload| {
                if tag != TAG_TARGET_VOTERS {
                    return Ok(false);
                }
                response.target_voters = Some(WireReader::whole(payload, read_replicas)?);
                Ok(true)
            })?;
            if topic == METADATA_TOPIC && partition == METADATA_PARTITION {
                found = Some(response);
            }
        }
        r.skip_tagged_fields()?;
    }
    match found {
        Some(mut response) => {
            if !top_error.is_none() {
                response.error = top_error;
            }
            Ok(response)
        }
        None => Err(DecodeError::PartitionCount(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::joined;
    use crate::wire::primitives::assert_every_prefix_refused;
    use bytes::BytesMut;
    use engine::record::{BatchView, RecordBatchBuilder};

    fn request_round_trip(request: Request) {
        let mut w = WireWriter::new();
        encode_request(&request, &mut w);
        let mut r = WireReader::new(w.into_inner().freeze());
        let decoded = decode_request(request.api_key(), request_version(&request), &mut r).unwrap();
        assert_eq!(decoded, request);
    }

    fn response_round_trip(api_key: i16, response: Response) {
        let chain = encode_response(&response, WireWriter::new());
        let mut r = WireReader::new(joined(&chain));
        assert_eq!(decode_response(api_key, &mut r).unwrap(), response);
    }

    fn batch(base: i64, epoch: i32, n: usize) -> engine::raft::Batch {
        let mut b = RecordBatchBuilder::new(base, epoch);
        for i in 0..n {
            b.append(0, None, Some(format!("v{i}").as_bytes()), &[]);
        }
        BatchView::parse(b.build().freeze())
            .unwrap()
            .to_raft_batch()
    }

    #[test]
    fn every_request_round_trips() {
        // Each directory id alone, both, neither: the tagged fields of "Voter identity".
        let directories = [
            (DirectoryId::ZERO, DirectoryId::ZERO),
            (DirectoryId([3; 16]), DirectoryId::ZERO),
            (DirectoryId::ZERO, DirectoryId([4; 16])),
            (DirectoryId([3; 16]), DirectoryId([0xff; 16])),
        ];
        for (pre_vote, (candidate, voter)) in [false, true].into_iter().zip(directories).chain(
            [true, false]
                .into_iter()
                .zip(directories.into_iter().skip(2)),
        ) {
            request_round_trip(Request::Vote(VoteRequest {
                candidate_directory_id: candidate,
                voter_directory_id: voter,
                ..vote_request(pre_vote)
            }));
        }
        request_round_trip(Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
            cluster_id: "c".into(),
            leader_id: 1,
            leader_epoch: 3,
        }));
        request_round_trip(Request::EndQuorumEpoch(EndQuorumEpochRequest {
            cluster_id: "c".into(),
            replica_id: 1,
            leader_id: 1,
            leader_epoch: 3,
            preferred_successors: vec![3, 2],
        }));
        let directories = [
            DirectoryId::ZERO,
            DirectoryId([7; 16]),
            DirectoryId([0xff; 16]),
            DirectoryId([1; 16]),
        ];
        // -1 (none) is left out of the tags; 1 must not be mistaken for it.
        let offsets = [-1, 0, 77, 1];
        for (durable_offset, replica_directory_id) in offsets.into_iter().zip(directories) {
            request_round_trip(Request::FetchQuorumRecords(FetchQuorumRecordsRequest {
                durable_offset,
                replica_directory_id,
                ..fetch_records_request()
            }));
        }
        request_round_trip(Request::FindQuorum(FindQuorumRequest {
            cluster_id: "cluster-1".into(),
            replica_id: 4,
            boot_timestamp: 1_700_000_000_000,
            host: "127.0.0.1".into(),
            port: 9093,
        }));
        request_round_trip(Request::DescribeQuorum(DescribeQuorumRequest {}));
        for (validate_only, force) in [(false, false), (true, false), (false, true)] {
            request_round_trip(alter_quorum(&[1, 2, 4], validate_only, force));
        }
    }

    fn alter_quorum(ids: &[i32], validate_only: bool, force: bool) -> Request {
        let voters = ids
            .iter()
            .map(|id| (*id, DirectoryId::from_halves(*id as u64, 7)));
        Request::AlterQuorum(AlterQuorumRequest {
            validate_only,
            force,
            ..AlterQuorumRequest::new("c", voters, 30_000)
        })
    }

    /// The AlterQuorum body, byte for byte: the layout docs/protocol.md gives.
    #[test]
    fn alter_quorum_bytes_are_the_documented_layout() {
        let mut expected: Vec<u8> = vec![0x02, b'c', 0x02]; // ClusterId "c", one voter
        expected.extend_from_slice(&[0, 0, 0, 4]); // VoterId
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 7]); // uuid
        expected.push(0); // voter's tagged fields
        expected.extend_from_slice(&[0, 0, 0x75, 0x30, 1]); // TimeoutMs 30000, ValidateOnly
        let mut plain = expected.clone();
        plain.push(0); // no tagged fields
        assert_eq!(&encoded(&alter_quorum(&[4], true, false))[..], &plain[..]);
        expected.extend_from_slice(&[1, 0, 1, 1]); // one tag: 0, length 1, Force = true
        assert_eq!(&encoded(&alter_quorum(&[4], true, true))[..], &expected[..]);
        assert_every_prefix_refused("AlterQuorum", &Bytes::from(expected), |r| {
            decode_request(api::ALTER_QUORUM, 0, r)
        });
    }

    #[test]
    fn an_alter_quorum_naming_too_many_voters_is_refused_before_it_is_read() {
        let ids: Vec<i32> = (0..=MAX_TARGET_VOTERS as i32).collect();
        let mut r = WireReader::new(encoded(&alter_quorum(&ids, false, false)));
        let err = decode_request(api::ALTER_QUORUM, 0, &mut r).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::TooMany {
                    max: MAX_TARGET_VOTERS,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(err.error_code(), ErrorCode::INVALID_REQUEST);
        let ids: Vec<i32> = (0..MAX_TARGET_VOTERS as i32).collect();
        request_round_trip(alter_quorum(&ids, false, false));
    }

    /// A voter count whose smallest possible voters (id, uuid and an empty tag section in a
    /// request; id, error and an empty tag section in a response) cannot fit in the bytes left is
    /// refused as such, before any voter is read: one byte short of two voters is enough.
    #[test]
    fn alter_quorum_voter_counts_are_checked_against_the_smallest_voter() {
        let mut request = vec![0x02, b'c', 0x03]; // ClusterId "c", two voters
        request.extend_from_slice(&[0; 2 * (4 + 16 + 1) - 1]);
        let mut r = WireReader::new(Bytes::from(request));
        let err = decode_request(api::ALTER_QUORUM, 0, &mut r).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::Wire(WireError::ArrayTooLong {
                    count: 2,
                    remaining: 41,
                    ..
                })
            ),
            "{err}"
        );
        // ErrorCode, null ErrorMessage, LeaderId, LeaderEpoch, two voter results.
        let mut response = vec![0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0x03];
        response.extend_from_slice(&[0; 2 * (4 + 2 + 1) - 1]);
        let mut r = WireReader::new(Bytes::from(response));
        let err = decode_response(api::ALTER_QUORUM, &mut r).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::Wire(WireError::ArrayTooLong {
                    count: 2,
                    remaining: 13,
                    ..
                })
            ),
            "{err}"
        );
    }

    #[test]
    fn every_response_round_trips() {
        response_round_trip(
            api::VOTE,
            Response::Vote(VoteResponse {
                error: ErrorCode::FENCED_LEADER_EPOCH,
                leader_id: -1,
                leader_epoch: 9,
                vote_granted: false,
            }),
        );
        response_round_trip(
            api::FETCH_QUORUM_RECORDS,
            Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
                batches: vec![batch(10, 3, 2), batch(12, 3, 5)],
                ..fetch_records_response()
            }),
        );
        // Behind the leader's log start: the start and its epoch ride a tagged field.
        response_round_trip(
            api::FETCH_QUORUM_RECORDS,
            Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
                error: ErrorCode::OFFSET_OUT_OF_RANGE,
                batches: vec![],
                high_watermark: 900,
                log_start: Some(OffsetAndEpoch {
                    offset: 1 << 40,
                    epoch: 2,
                }),
                ..fetch_records_response()
            }),
        );
        // ... and with them the leader's producer-state snapshot.
        response_round_trip(
            api::FETCH_QUORUM_RECORDS,
            Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
                error: ErrorCode::OFFSET_OUT_OF_RANGE,
                batches: vec![],
                log_start: Some(OffsetAndEpoch {
                    offset: 77,
                    epoch: 2,
                }),
                producer_state: Some(Bytes::from_static(b"snapshot bytes")),
                lease_stamp: Some(987_654),
                ..fetch_records_response()
            }),
        );
        let voter = |id| VoterEndpoint {
            voter_id: id,
            boot_timestamp: 5,
            host: "h".into(),
            port: 1,
        };
        response_round_trip(
            api::FIND_QUORUM,
            Response::FindQuorum(FindQuorumResponse {
                error: ErrorCode::NONE,
                cluster_id: "c".into(),
                leader_id: 2,
                leader_epoch: 4,
                voters: vec![voter(1), voter(2)],
                target_voters: Some(vec![voter(3)]),
            }),
        );
        let replica = |id, ts| ReplicaState {
            replica_id: id,
            directory_id: if ts == -1 {
                DirectoryId::ZERO
            } else {
                DirectoryId::from_halves(id as u64, ts as u64)
            },
            log_end_offset: 40,
            last_fetch_timestamp: ts,
            last_caught_up_timestamp: ts,
        };
        response_round_trip(
            api::DESCRIBE_QUORUM,
            Response::DescribeQuorum(DescribeQuorumResponse {
                error: ErrorCode::NONE,
                leader_id: 1,
                leader_epoch: 2,
                high_watermark: 39,
                current_voters: vec![replica(1, -1), replica(2, 12345), replica(3, 1)],
                target_voters: Some(vec![replica(4, 7)]),
                observers: vec![],
            }),
        );
        for error_message in [None, Some("why".to_string())] {
            response_round_trip(
                api::ALTER_QUORUM,
                Response::AlterQuorum(AlterQuorumResponse {
                    error: ErrorCode::UNKNOWN_VOTER_ID,
                    error_message,
                    leader_id: 1,
                    leader_epoch: 7,
                    target_voters: vec![
                        AlterQuorumVoterResult {
                            voter_id: 1,
                            error: ErrorCode::NONE,
                        },
                        AlterQuorumVoterResult {
                            voter_id: 4,
                            error: ErrorCode::UNKNOWN_VOTER_ID,
                        },
                    ],
                }),
            );
        }
    }

    fn fetch_request() -> Request {
        Request::FetchQuorumRecords(fetch_records_request())
    }

    /// A follower's fetch, with a durable offset and a directory id (both tagged fields).
    fn fetch_records_request() -> FetchQuorumRecordsRequest {
        FetchQuorumRecordsRequest {
            cluster_id: "c".into(),
            replica_id: 2,
            leader_epoch: 3,
            fetch_offset: 80,
            last_fetched_epoch: 3,
            is_follower: true,
            max_wait_ms: 500,
            durable_offset: 77,
            replica_directory_id: DirectoryId([7; 16]),
            lease_echo: Some(123_456),
        }
    }

    fn fetch_response() -> Response {
        Response::FetchQuorumRecords(fetch_records_response())
    }

    /// The leader's answer: one batch, no log start.
    fn fetch_records_response() -> FetchQuorumRecordsResponse {
        FetchQuorumRecordsResponse {
            error: ErrorCode::NONE,
            leader_id: 1,
            leader_epoch: 3,
            next_fetch_offset: -1,
            next_fetch_offset_epoch: -1,
            batches: vec![batch(10, 3, 2)],
            high_watermark: 11,
            first_dirty_offset: -1,
            last_caught_up_time_ms: -1,
            log_start: None,
            producer_state: None,
            lease_stamp: None,
        }
    }

    /// A whole fetch frame is its size, the header, and the body `encode_response_with` writes,
    /// with or without the broker list and log start, in a buffer that already held other
    /// frames; the records are the batches' own buffers.
    #[test]
    fn a_fetch_frame_is_its_size_header_and_body() {
        let list = Bytes::from_static(b"broker list bytes");
        let mut arena = WireWriter::new();
        arena.i32(7);
        let earlier = arena.split_piece();
        for (log_start, broker_list) in [
            (None, None),
            (
                Some(OffsetAndEpoch {
                    offset: 5,
                    epoch: 2,
                }),
                Some(&list),
            ),
        ] {
            let answer = FetchQuorumRecordsResponse {
                log_start,
                ..fetch_records_response()
            };
            let chain =
                encode_fetch_response_frame(&answer, broker_list, &mut arena, |w| w.i32(42));
            assert!(arena.is_empty());
            assert!(chain[1..chain.len() - 1]
                .iter()
                .zip(&answer.batches)
                .all(|(piece, batch)| piece.as_ptr() == batch.bytes.as_ptr()));
            let frame = joined(&chain);
            let body = joined(&encode_response_with(
                &Response::FetchQuorumRecords(answer),
                broker_list,
                WireWriter::new(),
            ));
            assert_eq!(
                frame[..4],
                super::super::frame::size_prefix(frame.len() - 4)
            );
            assert_eq!(frame[4..8], 42i32.to_be_bytes());
            assert_eq!(frame[8..], body[..]);
        }
        assert_eq!(earlier[..], 7i32.to_be_bytes());
    }

    #[test]
    fn fetch_request_extras_round_trip_and_an_old_decoder_skips_them() {
        let extras = FetchRequestExtras {
            endpoints: Some(vec![ClientEndpoint {
                listener: "CLIENT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }]),
            known_brokers: Some(0x1234),
            producer_ids: Some(BlockWanted {
                incarnation: u64::MAX - 3,
                have: 5000,
            }),
        };
        let mut w = WireWriter::new();
        encode_request_with(&fetch_request(), &extras, &mut w);
        let bytes = w.into_inner().freeze();
        let mut r = WireReader::new(bytes.clone());
        let (request, decoded) = decode_request_with(api::FETCH_QUORUM_RECORDS, 0, &mut r).unwrap();
        assert_eq!((request, decoded), (fetch_request(), extras));
        // A node that knows only tag 0 reads the same request and skips tags 1 to 3.
        let mut r = WireReader::new(bytes);
        assert_eq!(
            decode_request(api::FETCH_QUORUM_RECORDS, 0, &mut r).unwrap(),
            fetch_request()
        );
        // From such a node: no extras, so the leader sends it no list.
        let mut w = WireWriter::new();
        encode_request(&fetch_request(), &mut w);
        let mut r = WireReader::new(w.into_inner().freeze());
        let (_, decoded) = decode_request_with(api::FETCH_QUORUM_RECORDS, 0, &mut r).unwrap();
        assert_eq!(decoded, FetchRequestExtras::default());
    }

    #[test]
    fn a_broker_list_rides_a_fetch_response_and_an_old_decoder_skips_it() {
        use crate::wire::broker_list::BrokerInfo;
        let (list, bytes) = BrokerList::build(
            vec![BrokerInfo {
                id: 1,
                endpoints: vec![ClientEndpoint {
                    listener: "CLIENT".into(),
                    host: "h".into(),
                    port: 1,
                }],
            }],
            vec![1, 2],
        );
        let chain = encode_response_with(&fetch_response(), Some(&bytes), WireWriter::new());
        let all = joined(&chain);
        let mut r = WireReader::new(all.clone());
        let (response, decoded) = decode_response_with(api::FETCH_QUORUM_RECORDS, &mut r).unwrap();
        assert_eq!((response, decoded), (fetch_response(), Some(list)));
        let mut r = WireReader::new(all);
        assert_eq!(
            decode_response(api::FETCH_QUORUM_RECORDS, &mut r).unwrap(),
            fetch_response()
        );
        let plain = joined(&encode_response(&fetch_response(), WireWriter::new()));
        let mut r = WireReader::new(plain);
        let (_, decoded) = decode_response_with(api::FETCH_QUORUM_RECORDS, &mut r).unwrap();
        assert_eq!(decoded, None);
    }

    #[test]
    fn a_malformed_endpoint_list_is_a_decode_error() {
        let mut inner = WireWriter::new();
        inner.compact_array_len(Some(1));
        inner.compact_string("CLIENT");
        inner.compact_string("h");
        inner.i32(-5);
        inner.no_tagged_fields();
        let mut w = WireWriter::new();
        w.compact_string("c");
        for v in [2i32, 3] {
            w.i32(v);
        }
        w.i64(80);
        w.i32(3);
        w.bool(true);
        w.i32(500);
        w.tagged_fields(&[(TAG_CLIENT_ENDPOINTS, &inner.into_inner())]);
        let mut r = WireReader::new(w.into_inner().freeze());
        assert!(matches!(
            decode_request_with(api::FETCH_QUORUM_RECORDS, 0, &mut r),
            Err(DecodeError::BrokerList(BrokerListError::BadPort(-5)))
        ));
    }

    #[test]
    fn fetch_response_chains_the_log_buffers_without_copying() {
        let b = batch(0, 1, 3);
        let response = Response::FetchQuorumRecords(FetchQuorumRecordsResponse {
            error: ErrorCode::NONE,
            leader_id: 1,
            leader_epoch: 1,
            next_fetch_offset: -1,
            next_fetch_offset_epoch: -1,
            batches: vec![b.clone()],
            high_watermark: 3,
            first_dirty_offset: -1,
            last_caught_up_time_ms: -1,
            log_start: None,
            producer_state: None,
            lease_stamp: None,
        });
        let chain = encode_response(&response, WireWriter::new());
        assert_eq!(chain.len(), 3);
        assert_eq!(
            chain[1].as_ptr(),
            b.bytes.as_ptr(),
            "the batch is the log's own buffer"
        );
    }

    #[test]
    fn corrupt_records_and_foreign_partitions_get_kafka_codes() {
        let mut b = batch(0, 1, 2);
        let mut bytes = BytesMut::from(&b.bytes[..]);
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        b.bytes = bytes.freeze();
        let err = split_batches(b.bytes.clone()).unwrap_err();
        assert_eq!(err.error_code(), ErrorCode::CORRUPT_MESSAGE);

        let mut w = WireWriter::new();
        w.compact_array_len(Some(1));
        w.compact_string("other");
        w.compact_array_len(Some(1));
        w.i32(0);
        w.no_tagged_fields();
        w.no_tagged_fields();
        w.no_tagged_fields();
        let mut r = WireReader::new(w.into_inner().freeze());
        let err = decode_request(api::DESCRIBE_QUORUM, 0, &mut r).unwrap_err();
        assert_eq!(err.error_code(), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    }

    fn vote(pre_vote: bool) -> Request {
        Request::Vote(vote_request(pre_vote))
    }

    /// A Vote without directory ids.
    fn vote_request(pre_vote: bool) -> VoteRequest {
        VoteRequest {
            cluster_id: "c".into(),
            candidate_epoch: 5,
            candidate_id: 2,
            last_epoch: 4,
            last_epoch_end_offset: 100,
            pre_vote,
            ..Default::default()
        }
    }

    fn encoded(request: &Request) -> Bytes {
        WireWriter::bytes_of(|w| encode_request(request, w))
    }

    /// The bytes of a Vote: v0 exactly as before pre-vote (so a real vote is what a v0-only
    /// node always read), v1 the same plus the PreVote byte before the tagged fields.
    #[test]
    fn vote_v0_is_unchanged_and_v1_adds_the_pre_vote_byte() {
        let v0: &[u8] = &[
            0x02, b'c', // ClusterId, compact string "c"
            0, 0, 0, 5, // CandidateEpoch
            0, 0, 0, 2, // CandidateId
            0, 0, 0, 4, // LastEpoch
            0, 0, 0, 0, 0, 0, 0, 100, // LastEpochEndOffset
            0,   // no tagged fields
        ];
        assert_eq!(request_version(&vote(false)), 0);
        assert_eq!(&encoded(&vote(false))[..], v0);
        assert_eq!(request_version(&vote(true)), api::VOTE_PRE_VOTE_VERSION);
        let mut v1 = v0[..v0.len() - 1].to_vec();
        v1.extend_from_slice(&[1, 0]); // PreVote = true, no tagged fields
        assert_eq!(&encoded(&vote(true))[..], &v1[..]);
        // v1 with PreVote false is a real vote, as v0 is.
        let mut real_v1 = v1.clone();
        real_v1[v0.len() - 1] = 0;
        let mut r = WireReader::new(Bytes::from(real_v1));
        assert_eq!(decode_request(api::VOTE, 1, &mut r).unwrap(), vote(false));
        // Read at the wrong version, neither decodes: v0 has a byte left over, v1 misses one.
        let mut r = WireReader::new(Bytes::from(v1));
        assert!(decode_request(api::VOTE, 0, &mut r).is_err());
        let mut r = WireReader::new(Bytes::from_static(v0));
        assert!(decode_request(api::VOTE, 1, &mut r).is_err());
        // A PreVote byte other than 0 or 1 is malformed.
        let mut bad = v0[..v0.len() - 1].to_vec();
        bad.extend_from_slice(&[2, 0]);
        let mut r = WireReader::new(Bytes::from(bad));
        assert!(decode_request(api::VOTE, 1, &mut r).is_err());
    }

    #[test]
    fn every_prefix_of_a_pre_vote_is_an_error() {
        let full = encoded(&vote(true));
        assert_every_prefix_refused("pre-vote", &full, |r| decode_request(api::VOTE, 1, r));
    }

    #[test]
    fn every_prefix_of_every_request_is_an_error_not_a_panic() {
        let mut w = WireWriter::new();
        encode_request(
            &Request::EndQuorumEpoch(EndQuorumEpochRequest {
                cluster_id: "cluster".into(),
                replica_id: 1,
                leader_id: 1,
                leader_epoch: 3,
                preferred_successors: vec![3, 2],
            }),
            &mut w,
        );
        let full = w.into_inner().freeze();
        assert_every_prefix_refused("EndQuorumEpoch", &full, |r| {
            decode_request(api::END_QUORUM_EPOCH, 0, r)
        });
    }
}
