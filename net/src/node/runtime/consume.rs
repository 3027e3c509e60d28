//! The Kafka read APIs on a node (docs/clients.md, docs/protocol.md "Consumer reads"): Fetch
//! (each partition of ours becomes one `Input::ClientFetch`, answered when the core's
//! `Output::ClientFetchDone` for it arrives), ListOffsets and OffsetForLeaderEpoch (read-only
//! queries of the core, answered at once). Only the leader serves them; the others answer
//! NOT_LEADER_OR_FOLLOWER with the leader they know, which a Kafka client follows after
//! refreshing its Metadata. InitProducerId is in producer_ids.rs.

use super::*;
use crate::wire::kafka::{
    EpochEndOffset, EpochEndOffsetResponse, FetchPartitionData, FetchRequest, FetchResponse,
    FetchableTopic, LeaderIdAndEpoch, ListOffsetsPartitionResponse, ListOffsetsRequest,
    ListOffsetsResponse, ListOffsetsTopicResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult, EARLIEST_TIMESTAMP, FETCH,
    LATEST_TIMESTAMP, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH,
};
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
/// Kafka's UNSUPPORTED_FOR_MESSAGE_FORMAT: what Kafka answers a timestamp lookup it cannot
/// serve; ringraft keeps no timestamp index yet (docs/clients.md).
const UNSUPPORTED_FOR_MESSAGE_FORMAT: ErrorCode = ErrorCode(43);

/// Kafka's "no epoch" (-1) as the core's None.
fn epoch_or_none(epoch: i32) -> Option<i32> {
    (epoch >= 0).then_some(epoch)
}

fn is_ours(topic: &str, partition: i32) -> bool {
    topic == METADATA_TOPIC && partition == METADATA_PARTITION
}

impl Node {
    pub(in crate::node) fn handle_fetch(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        spec: &'static ApiSpec,
        mut r: WireReader,
    ) {
        let Ok(request) = FetchRequest::decode(&mut r, header.api_version) else {
            return self.close(conn, "bad Fetch body");
        };
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
        *slot = Some(fetch_answer(result));
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
        let mut w = WireWriter::with_capacity(256);
        w.i32(0);
        ResponseHeader {
            correlation_id: pending.correlation_id,
        }
        .write(&mut w, FETCH_SPEC.response_header_flexible(pending.version));
        let chain = response.encode_chain(w, pending.version);
        self.deliver(pending.conn, pending.seq, chain);
    }

    pub(in crate::node) fn handle_list_offsets(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        spec: &'static ApiSpec,
        mut r: WireReader,
    ) {
        let Ok(request) = ListOffsetsRequest::decode(&mut r, header.api_version) else {
            return self.close(conn, "bad ListOffsets body");
        };
        let seq = self.reserve_response(conn);
        let refused = self.access(conn, LIST_OFFSETS).err();
        let response = ListOffsetsResponse {
            throttle_time_ms: 0,
            topics: request
                .topics
                .iter()
                .map(|topic| ListOffsetsTopicResponse {
                    name: topic.name.clone(),
                    partitions: topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let (error, offset, leader_epoch) = match refused {
                                Some(error) => (error, -1, -1),
                                None if !is_ours(&topic.name, p.index) => {
                                    (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
                                }
                                None => self.listed_offset(p.current_leader_epoch, p.timestamp),
                            };
                            ListOffsetsPartitionResponse {
                                index: p.index,
                                error,
                                timestamp: -1,
                                offset,
                                leader_epoch,
                            }
                        })
                        .collect(),
                })
                .collect(),
        };
        let mut w = self.response_writer(header, spec);
        response.encode(&mut w, header.api_version);
        self.deliver(conn, seq, vec![w.into_inner().freeze()]);
    }

    /// (error, offset, leader epoch) of a ListOffsets partition of ours.
    fn listed_offset(&self, current_leader_epoch: i32, timestamp: i64) -> (ErrorCode, i64, i32) {
        let spec = match timestamp {
            EARLIEST_TIMESTAMP => OffsetSpec::Earliest,
            LATEST_TIMESTAMP => OffsetSpec::Latest,
            _ => return (UNSUPPORTED_FOR_MESSAGE_FORMAT, -1, -1),
        };
        match self
            .core
            .list_offsets(epoch_or_none(current_leader_epoch), spec)
        {
            Ok(listed) => (
                ErrorCode::NONE,
                listed.offset,
                listed.leader_epoch.unwrap_or(-1),
            ),
            Err(refused) => (refused.error_code(), -1, -1),
        }
    }

    pub(in crate::node) fn handle_offset_for_leader_epoch(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        spec: &'static ApiSpec,
        mut r: WireReader,
    ) {
        let Ok(request) = OffsetForLeaderEpochRequest::decode(&mut r, header.api_version) else {
            return self.close(conn, "bad OffsetForLeaderEpoch body");
        };
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
                                    .core
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
        let mut w = self.response_writer(header, spec);
        response.encode(&mut w, header.api_version);
        self.deliver(conn, seq, vec![w.into_inner().freeze()]);
    }
}

/// One partition of a Fetch response from the core's answer: committed batches as the log's
/// own bytes, the last stable offset = the high watermark (no transactions), no aborted
/// transactions, and on a refusal the leader the node knows (v12's CurrentLeader).
fn fetch_answer(result: ClientFetchResult) -> FetchPartitionData {
    let refused = !result.error.is_none() && result.error != ErrorCode::OFFSET_OUT_OF_RANGE;
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
        current_leader: refused.then_some(LeaderIdAndEpoch {
            leader_id: result.leader_id,
            leader_epoch: result.leader_epoch,
        }),
        snapshot_id: None,
    }
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
