//! The Kafka read APIs on a node (docs/clients.md, docs/protocol.md "Consumer reads"): Fetch
//! (each partition of ours becomes one `Input::ClientFetch`, answered when the core's
//! `Output::ClientFetchDone` for it arrives), ListOffsets and OffsetForLeaderEpoch (read-only
//! queries of the core; a ListOffsets by timestamp also looks the log up on the reader thread,
//! below the committed end the core gave, and is answered when that lookup ends). Only the
//! leader serves them; the others answer NOT_LEADER_OR_FOLLOWER with the leader they know, which
//! a Kafka client follows after refreshing its Metadata. InitProducerId is in producer_ids.rs.

use super::metadata::listed_leader;
use super::*;
use crate::wire::kafka::{
    ClusterBroker, EpochEndOffset, EpochEndOffsetResponse, FetchPartitionData, FetchRequest,
    FetchResponse, FetchableTopic, LeaderIdAndEpoch, ListOffsetsPartitionResponse,
    ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult, EARLIEST_TIMESTAMP, FETCH,
    LATEST_TIMESTAMP, LIST_OFFSETS, MAX_TIMESTAMP, OFFSET_FOR_LEADER_EPOCH,
};
use engine::io::{LookupRequest, ReadRefused};
use engine::log::{FoundRecord, LogError, LookupStep, TimestampLookup, TimestampTarget};
use engine::raft::{ClientFetch, ClientFetchResult, OffsetSpec};

/// A Fetch waiting for the core's answers to its partitions of ours.
pub(super) struct PendingFetch {
    conn: ConnId,
    seq: u64,
    correlation_id: i32,
    version: i16,
    /// The answer, in request order; a partition of ours waits as `None` for its fetch id.
    topics: Vec<(String, Vec<Option<FetchPartitionData>>)>,
    /// Partitions still waiting.
    outstanding: usize,
}

/// Kafka's FETCH_SESSION_ID_NOT_FOUND: the node keeps no fetch sessions, so an incremental
/// fetch (a session id other than 0) is answered with it and the client falls back to full
/// fetches.
const FETCH_SESSION_ID_NOT_FOUND: ErrorCode = ErrorCode(70);
/// Kafka's KAFKA_STORAGE_ERROR (retriable for a ListOffsets client): a timestamp lookup whose
/// read of the log failed.
const KAFKA_STORAGE_ERROR: ErrorCode = ErrorCode(56);

/// Timestamp lookups on the reader thread at once, at most: its queue (32) is shared with the
/// replicas' catch-up reads and the consumers' (the core keeps at most 16 of those in flight).
const MAX_LOOKUPS_IN_FLIGHT: usize = 4;
/// ListOffsets requests waiting for a lookup (in flight or queued), at most; one more is
/// answered REQUEST_TIMED_OUT at once, which clients retry (docs/clients.md).
const MAX_PENDING_LOOKUPS: usize = 256;
/// Steps of one lookup, at most (each walks at most `engine::log::LOOKUP_STEP_BYTES` of
/// batches, 1 MiB): the work one request may cause. Batches whose MaxTimestamp is their records'
/// are found in the step the index points to; only batches whose header overstates their
/// records can send a search through a whole segment (docs/protocol.md, "Kafka client APIs").
const MAX_LOOKUP_STEPS: u32 = 4096;

/// A ListOffsets waiting for the timestamp lookup of its partition of ours (one per request:
/// a partition named twice is refused, as Kafka does).
pub(super) struct PendingListOffsets {
    conn: ConnId,
    seq: u64,
    version: i16,
    /// The size placeholder and the response header, written at the request.
    writer: WireWriter,
    /// The answer, with the slot of our partition to fill at (topic, partition) `slot`.
    response: ListOffsetsResponse,
    slot: (usize, usize),
    /// The lookup as far as it got: its next step.
    lookup: TimestampLookup,
    steps: u32,
}

/// The ListOffsets requests waiting for lookups, and the steps queued for the reader thread.
#[derive(Default)]
pub(super) struct Lookups {
    pending: BTreeMap<u64, PendingListOffsets>,
    /// Lookups whose next step waits for room on the reader thread, in order.
    waiting: VecDeque<u64>,
    in_flight: usize,
    next_id: u64,
}

/// What a ListOffsets partition of ours gets: an answer now, or a lookup of the log below the
/// committed end.
enum Listing {
    Now(PartitionAnswer),
    Lookup(TimestampLookup),
}

/// (error, timestamp, offset, leader epoch) of a ListOffsets partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PartitionAnswer {
    error: ErrorCode,
    timestamp: i64,
    offset: i64,
    leader_epoch: i32,
}

impl PartitionAnswer {
    fn error(error: ErrorCode) -> Self {
        Self {
            error,
            timestamp: -1,
            offset: -1,
            leader_epoch: -1,
        }
    }

    /// A lookup's answer: the record found, or Kafka's "none" (-1, -1 with no error).
    fn found(found: Option<FoundRecord>) -> Self {
        match found {
            Some(f) => Self {
                error: ErrorCode::NONE,
                timestamp: f.timestamp,
                offset: f.offset,
                leader_epoch: if f.leader_epoch >= 0 {
                    f.leader_epoch
                } else {
                    -1
                },
            },
            None => Self::error(ErrorCode::NONE),
        }
    }
}

/// Kafka's "no epoch" (-1) as the core's None.
fn epoch_or_none(epoch: i32) -> Option<i32> {
    (epoch >= 0).then_some(epoch)
}

fn is_ours(topic: &str, partition: i32) -> bool {
    topic == METADATA_TOPIC && partition == METADATA_PARTITION
}

impl Node {
    pub(in crate::node) fn handle_fetch(&mut self, asked: Asked, request: FetchRequest) {
        let Asked { conn, header, spec } = asked;
        let seq = self.reserve_response(conn);
        let refused = self.access(conn, FETCH).err();
        if request.session_id != 0 || refused.is_some() {
            let error = refused.unwrap_or(FETCH_SESSION_ID_NOT_FOUND);
            let response = fetch_refusal(&request, error, refused.is_some());
            let chain =
                response.encode_chain(self.response_writer(header, spec), header.api_version);
            return self.deliver(conn, seq, chain);
        }
        let fetch_id = self.next_fetch_id;
        self.next_fetch_id += 1;
        let mut pending = PendingFetch {
            conn,
            seq,
            correlation_id: header.correlation_id,
            version: header.api_version,
            topics: Vec::with_capacity(request.topics.len()),
            outstanding: 0,
        };
        let mut reads = Vec::new();
        for topic in &request.topics {
            let mut answers = Vec::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                if is_ours(&topic.name, p.partition) && reads.is_empty() {
                    let max_bytes = request.max_bytes.min(p.partition_max_bytes);
                    reads.push(ClientFetch::from_wire(
                        p.fetch_offset,
                        p.last_fetched_epoch,
                        p.current_leader_epoch,
                        request.max_wait_ms,
                        request.min_bytes,
                        max_bytes,
                    ));
                    answers.push(None);
                    pending.outstanding += 1;
                } else {
                    // Another topic or partition, or ours named twice (answered once).
                    let error = if is_ours(&topic.name, p.partition) {
                        ErrorCode::INVALID_REQUEST
                    } else {
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                    };
                    answers.push(Some(FetchPartitionData::empty(p.partition, error)));
                }
            }
            pending.topics.push((topic.name.clone(), answers));
        }
        let Some(fetch) = reads.pop() else {
            return self.finish_fetch(pending);
        };
        self.fetches.insert(fetch_id, pending);
        self.step(Input::ClientFetch {
            id: fetch_id,
            fetch,
        });
    }

    /// The core answered the partition of Fetch `id`.
    pub(super) fn client_fetch_done(&mut self, id: u64, result: ClientFetchResult) {
        let Some(mut pending) = self.fetches.remove(&id) else {
            return;
        };
        let slot = pending
            .topics
            .iter_mut()
            .flat_map(|(_, partitions)| partitions.iter_mut())
            .find(|p| p.is_none())
            .expect("a pending fetch has its partition of ours unanswered");
        let conn = pending.conn;
        *slot = Some(fetch_answer(result, || self.brokers_here(conn)));
        pending.outstanding -= 1;
        assert_eq!(pending.outstanding, 0, "one partition of ours per fetch");
        self.counters.consumer_fetches += 1;
        self.finish_fetch(pending);
    }

    fn finish_fetch(&mut self, pending: PendingFetch) {
        let response = FetchResponse {
            throttle_time_ms: 0,
            error: ErrorCode::NONE,
            session_id: 0,
            topics: pending
                .topics
                .into_iter()
                .map(|(name, partitions)| FetchableTopic {
                    name,
                    partitions: partitions
                        .into_iter()
                        .map(|p| p.expect("every partition answered"))
                        .collect(),
                })
                .collect(),
        };
        let flexible = FETCH_SPEC.response_header_flexible(pending.version);
        let w = inbound::response_start(pending.correlation_id, flexible);
        let chain = response.encode_chain(w, pending.version);
        self.deliver(pending.conn, pending.seq, chain);
    }

    pub(in crate::node) fn handle_list_offsets(
        &mut self,
        asked: Asked,
        request: ListOffsetsRequest,
    ) {
        let Asked { conn, header, spec } = asked;
        let seq = self.reserve_response(conn);
        let refused = self.access(conn, LIST_OFFSETS).err();
        // Kafka refuses every copy of a partition a request names twice (INVALID_REQUEST).
        let ours_named = request
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| is_ours(&t.name, p.index)))
            .filter(|ours| *ours)
            .count();
        let mut lookup = None;
        let mut response = ListOffsetsResponse {
            throttle_time_ms: 0,
            topics: Vec::with_capacity(request.topics.len()),
        };
        for (t, topic) in request.topics.iter().enumerate() {
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for (i, p) in topic.partitions.iter().enumerate() {
                let answer = match refused {
                    Some(error) => PartitionAnswer::error(error),
                    None if !is_ours(&topic.name, p.index) => {
                        PartitionAnswer::error(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                    }
                    None if ours_named > 1 => PartitionAnswer::error(ErrorCode::INVALID_REQUEST),
                    None => match self.listing(p.current_leader_epoch, p.timestamp) {
                        Listing::Now(answer) => answer,
                        Listing::Lookup(search) => {
                            lookup = Some(((t, i), search));
                            PartitionAnswer::error(ErrorCode::NONE) // filled in when it ends
                        }
                    },
                };
                partitions.push(ListOffsetsPartitionResponse {
                    index: p.index,
                    error: answer.error,
                    timestamp: answer.timestamp,
                    offset: answer.offset,
                    leader_epoch: answer.leader_epoch,
                });
            }
            response.topics.push(ListOffsetsTopicResponse {
                name: topic.name.clone(),
                partitions,
            });
        }
        let mut w = self.response_writer(header, spec);
        let Some((slot, lookup)) = lookup else {
            response.encode(&mut w, header.api_version);
            return self.deliver(conn, seq, vec![w.into_inner().freeze()]);
        };
        let pending = PendingListOffsets {
            conn,
            seq,
            version: header.api_version,
            writer: w,
            response,
            slot,
            lookup,
            steps: 0,
        };
        self.start_lookup(pending);
    }

    /// What a ListOffsets partition of ours gets: earliest and latest from the core's query; a
    /// timestamp (>= 0) or MAX_TIMESTAMP (-3) a lookup below the committed end the core gives
    /// (followers, and a leader epoch that does not match, are refused by the same query).
    fn listing(&self, current_leader_epoch: i32, timestamp: i64) -> Listing {
        let epoch = epoch_or_none(current_leader_epoch);
        let spec = match timestamp {
            EARLIEST_TIMESTAMP => OffsetSpec::Earliest,
            LATEST_TIMESTAMP => OffsetSpec::Latest,
            MAX_TIMESTAMP | 0.. => {
                let target = match timestamp {
                    MAX_TIMESTAMP => TimestampTarget::Max,
                    t => TimestampTarget::AtOrAfter(t),
                };
                return match self.replica.core().consumer_offsets(epoch) {
                    Err(refused) => Listing::Now(PartitionAnswer::error(refused.error_code())),
                    // Nothing committed: no record can be found.
                    Ok(p) if p.high_watermark <= p.log_start_offset => {
                        Listing::Now(PartitionAnswer::found(None))
                    }
                    Ok(p) => Listing::Lookup(TimestampLookup::new(target, p.high_watermark)),
                };
            }
            // Another negative value names no offset at these versions.
            _ => return Listing::Now(PartitionAnswer::error(ErrorCode::INVALID_REQUEST)),
        };
        Listing::Now(match self.replica.core().list_offsets(epoch, spec) {
            Ok(listed) => PartitionAnswer {
                error: ErrorCode::NONE,
                timestamp: -1,
                offset: listed.offset,
                leader_epoch: listed.leader_epoch.unwrap_or(-1),
            },
            Err(refused) => PartitionAnswer::error(refused.error_code()),
        })
    }

    /// Queues the first step of a lookup (or refuses it when too many wait).
    fn start_lookup(&mut self, pending: PendingListOffsets) {
        if self.lookups.pending.len() >= MAX_PENDING_LOOKUPS {
            let answer = PartitionAnswer::error(ErrorCode::REQUEST_TIMED_OUT);
            return self.answer_list_offsets(pending, answer);
        }
        let id = self.lookups.next_id;
        self.lookups.next_id += 1;
        self.lookups.pending.insert(id, pending);
        self.lookups.waiting.push_back(id);
        self.pump_lookups();
    }

    /// Hands waiting lookup steps to the reader thread while it has room (called after every
    /// change and on every turn of the loop: a full reader queue frees up as reads finish).
    pub(super) fn pump_lookups(&mut self) {
        while self.lookups.in_flight < MAX_LOOKUPS_IN_FLIGHT {
            let Some(&id) = self.lookups.waiting.front() else {
                return;
            };
            let lookup = self.lookups.pending[&id].lookup;
            let request = LookupRequest {
                lookup_id: id,
                lookup,
            };
            match self.writer().lookup(request) {
                Ok(()) => {
                    self.lookups.waiting.pop_front();
                    self.lookups.in_flight += 1;
                }
                Err(ReadRefused::Full(_)) => return,
                Err(ReadRefused::Stopped) => {
                    self.lookups.waiting.pop_front();
                    self.finish_lookup(id, PartitionAnswer::error(KAFKA_STORAGE_ERROR));
                }
            }
        }
    }

    /// A step of lookup `id` ran on the reader thread.
    pub(super) fn lookup_done(&mut self, id: u64, result: Result<LookupStep, LogError>) {
        self.lookups.in_flight = self.lookups.in_flight.saturating_sub(1);
        match result {
            Ok(LookupStep::Done(found)) => self.finish_lookup(id, PartitionAnswer::found(found)),
            Ok(LookupStep::Continue(next)) => match self.lookups.pending.get_mut(&id) {
                Some(pending) if pending.steps + 1 >= MAX_LOOKUP_STEPS => {
                    warn!(
                        steps = pending.steps + 1,
                        "a timestamp lookup took too many steps: answered REQUEST_TIMED_OUT, which the client \
                         retries; if it repeats, look up by offset (its batches' timestamps \
                         go back and forth)"
                    );
                    let answer = PartitionAnswer::error(ErrorCode::REQUEST_TIMED_OUT);
                    self.finish_lookup(id, answer);
                }
                Some(pending) => {
                    pending.steps += 1;
                    pending.lookup = next;
                    self.lookups.waiting.push_back(id);
                }
                None => {}
            },
            Err(error) => {
                warn!(%error, "a timestamp lookup could not read the log (answered KAFKA_STORAGE_ERROR): check \
                       the disk of log.dirs");
                self.finish_lookup(id, PartitionAnswer::error(KAFKA_STORAGE_ERROR));
            }
        }
        self.counters.timestamp_lookups += 1;
        self.pump_lookups();
    }

    fn finish_lookup(&mut self, id: u64, answer: PartitionAnswer) {
        if let Some(pending) = self.lookups.pending.remove(&id) {
            self.answer_list_offsets(pending, answer);
        }
    }

    fn answer_list_offsets(&mut self, pending: PendingListOffsets, answer: PartitionAnswer) {
        let PendingListOffsets {
            conn,
            seq,
            version,
            mut writer,
            mut response,
            slot: (t, i),
            ..
        } = pending;
        let p = &mut response.topics[t].partitions[i];
        (p.error, p.timestamp, p.offset, p.leader_epoch) = (
            answer.error,
            answer.timestamp,
            answer.offset,
            answer.leader_epoch,
        );
        response.encode(&mut writer, version);
        self.deliver(conn, seq, vec![writer.into_inner().freeze()]);
    }

    pub(in crate::node) fn handle_offset_for_leader_epoch(
        &mut self,
        asked: Asked,
        request: OffsetForLeaderEpochRequest,
    ) {
        let conn = asked.conn;
        let seq = self.reserve_response(conn);
        let refused = self.access(conn, OFFSET_FOR_LEADER_EPOCH).err();
        let response = OffsetForLeaderEpochResponse {
            throttle_time_ms: 0,
            topics: request
                .topics
                .iter()
                .map(|topic| OffsetForLeaderTopicResult {
                    name: topic.name.clone(),
                    partitions: topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let answer = match refused {
                                Some(error) => Err(error),
                                None if !is_ours(&topic.name, p.partition) => {
                                    Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                                }
                                None => self
                                    .replica
                                    .core()
                                    .offset_for_leader_epoch(
                                        epoch_or_none(p.current_leader_epoch),
                                        p.leader_epoch,
                                    )
                                    .map_err(|refused| refused.error_code()),
                            };
                            let (error, leader_epoch, end_offset) = match answer {
                                Ok(end) => (ErrorCode::NONE, end.epoch, end.offset),
                                Err(error) => (error, -1, -1),
                            };
                            EpochEndOffsetResponse {
                                error,
                                partition: p.partition,
                                leader_epoch,
                                end_offset,
                            }
                        })
                        .collect(),
                })
                .collect(),
        };
        self.answer(asked, seq, |w, version| response.encode(w, version));
    }
}

/// One partition of a Fetch response from the core's answer: committed batches as the log's
/// own bytes, the last stable offset = the high watermark (no transactions), no aborted
/// transactions, and on a refusal the leader the node knows (v12's CurrentLeader) when it is
/// among the `brokers` the node lists on the request's listener; else -1 (unknown).
/// kafka-python 3.0 takes a hinted leader as the partition's at once, and a leader id its
/// brokers lack raises UnknownBrokerIdError out of the consumer's poll (docs/clients.md), as
/// with Metadata. `brokers` is called on a refusal only: it builds a list.
fn fetch_answer(
    result: ClientFetchResult,
    brokers: impl FnOnce() -> Vec<ClusterBroker>,
) -> FetchPartitionData {
    let refused = is_refusal(&result);
    let hinted = if refused {
        listed_leader(Some(result.leader_id), &brokers())
    } else {
        None
    };
    FetchPartitionData {
        index: METADATA_PARTITION,
        error: result.error,
        high_watermark: result.high_watermark,
        last_stable_offset: result.high_watermark,
        log_start_offset: result.log_start_offset,
        aborted_transactions: Some(Vec::new()),
        preferred_read_replica: -1,
        records: Some(result.batches.into_iter().map(|b| b.bytes).collect()),
        diverging_epoch: result.diverging_epoch.map(|d| EpochEndOffset {
            epoch: d.epoch,
            end_offset: d.offset,
        }),
        current_leader: refused.then_some(match hinted {
            Some(leader_id) => LeaderIdAndEpoch {
                leader_id,
                leader_epoch: result.leader_epoch,
            },
            None => LeaderIdAndEpoch {
                leader_id: -1,
                leader_epoch: -1,
            },
        }),
        snapshot_id: None,
    }
}

/// An error that sends the consumer elsewhere (not the leader, a fenced epoch), which Fetch v12
/// answers with the current leader; an offset out of range is the consumer's to reset.
fn is_refusal(result: &ClientFetchResult) -> bool {
    !result.error.is_none() && result.error != ErrorCode::OFFSET_OUT_OF_RANGE
}

/// A Fetch answered without reading: every partition with `error` when the refusal is the
/// partitions' (`per_partition`, an authorization failure), else the top-level error alone.
fn fetch_refusal(request: &FetchRequest, error: ErrorCode, per_partition: bool) -> FetchResponse {
    let partition_error = if per_partition {
        error
    } else {
        ErrorCode::NONE
    };
    FetchResponse {
        throttle_time_ms: 0,
        error: if per_partition {
            ErrorCode::NONE
        } else {
            error
        },
        session_id: 0,
        topics: if per_partition {
            request
                .topics
                .iter()
                .map(|topic| FetchableTopic {
                    name: topic.name.clone(),
                    partitions: topic
                        .partitions
                        .iter()
                        .map(|p| FetchPartitionData::empty(p.partition, partition_error))
                        .collect(),
                })
                .collect()
        } else {
            Vec::new()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(error: ErrorCode) -> ClientFetchResult {
        ClientFetchResult {
            error,
            high_watermark: 10,
            log_start_offset: 0,
            leader_id: 2,
            leader_epoch: 7,
            diverging_epoch: None,
            batches: Vec::new(),
        }
    }

    fn brokers(ids: &[i32]) -> Vec<ClusterBroker> {
        ids.iter()
            .map(|&node_id| ClusterBroker {
                node_id,
                host: "127.0.0.1".into(),
                port: 9092 + node_id,
                rack: None,
            })
            .collect()
    }

    #[test]
    fn a_refusal_names_the_leader_only_when_it_is_listed() {
        let hint = |error, listed: &[i32]| {
            let leader = fetch_answer(result(error), || brokers(listed)).current_leader;
            leader.map(|l| (l.leader_id, l.leader_epoch))
        };
        for refusal in [
            ErrorCode::NOT_LEADER_OR_FOLLOWER,
            ErrorCode::FENCED_LEADER_EPOCH,
        ] {
            assert_eq!(hint(refusal, &[1, 2, 3]), Some((2, 7)));
            // Knows who leads, not where (just restarted): no leader named.
            assert_eq!(hint(refusal, &[1]), Some((-1, -1)));
        }
        for error in [ErrorCode::NONE, ErrorCode::OFFSET_OUT_OF_RANGE] {
            let answer = fetch_answer(result(error), || panic!("no list for an answer"));
            assert_eq!(answer.current_leader, None);
        }
    }
}
