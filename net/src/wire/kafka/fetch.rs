//! Fetch (key 1, v4-v12, flexible from v12): what Kafka consumers send to read a partition.
//!
//! The response is encoded as a chain of [`Bytes`] ([`FetchResponse::encode_chain`]) whose
//! record pieces are the log's own batches, as the quorum's fetch response is
//! (docs/architecture.md, "Fetch path"): the records are never copied into the response.

use bytes::{Bytes, BytesMut};
use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use super::limits::Budget;
use super::topics::{read_topics, write_topics, Topic, TopicsLayout};
use crate::wire::api::ApiSpec;
use crate::wire::frame::joined;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const FETCH: i16 = 1;

pub const FETCH_SPEC: ApiSpec = ApiSpec::new(FETCH, "Fetch", 4..=12, Some(12));

/// Request tagged field (v12): the cluster id a KIP-595 replica names.
const TAG_CLUSTER_ID: u32 = 0;
/// Partition response tagged fields (v12).
const TAG_DIVERGING_EPOCH: u32 = 0;
const TAG_CURRENT_LEADER: u32 = 1;
const TAG_SNAPSHOT_ID: u32 = 2;

/// Partition, FetchOffset, PartitionMaxBytes at least.
const REQUEST_TOPICS: TopicsLayout = TopicsLayout::new(16);
/// v7+: each partition a bare int32.
const FORGOTTEN_TOPICS: TopicsLayout = TopicsLayout::new(4)
    .named("forgotten topics", "forgotten partitions")
    .own_partition_tags();
/// Index, ErrorCode, HighWatermark, LastStableOffset at least; a partition's tagged fields
/// are its own (`decode_partition`).
const RESPONSE_TOPICS: TopicsLayout = TopicsLayout::new(22)
    .named("responses", "partitions")
    .own_partition_tags();
/// Smallest encoding, so an array count that cannot fit is refused before allocating.
const ABORTED_TRANSACTION_BYTES: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPartition {
    pub partition: i32,
    /// v9+; -1 when absent (no fencing).
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    /// v12+; -1 when absent.
    pub last_fetched_epoch: i32,
    /// v5+; -1 when absent.
    pub log_start_offset: i64,
    pub partition_max_bytes: i32,
}

pub type FetchTopic = Topic<FetchPartition>;

/// v7+: partitions an incremental fetch session stops following.
pub type ForgottenTopic = Topic<i32>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRequest {
    /// -1 for a consumer.
    pub replica_id: i32,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
    /// v7+; 0 when absent.
    pub session_id: i32,
    /// v7+; -1 when absent.
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic>,
    /// v7+.
    pub forgotten_topics: Vec<ForgottenTopic>,
    /// v11+; empty when absent.
    pub rack_id: String,
    /// v12 tagged field 0.
    pub cluster_id: Option<String>,
}

impl Default for FetchRequest {
    fn default() -> Self {
        Self {
            replica_id: -1,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 52_428_800,
            isolation_level: 0,
            session_id: 0,
            session_epoch: -1,
            topics: Vec::new(),
            forgotten_topics: Vec::new(),
            rack_id: String::new(),
            cluster_id: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// v12 tag 0: where the requester's log diverges from the leader's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub epoch: i32,
    pub end_offset: i64,
}

/// v12 tag 1 (and Produce v10's `CurrentLeader`): who leads now, for a client that asked the
/// wrong node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderIdAndEpoch {
    pub leader_id: i32,
    pub leader_epoch: i32,
}

/// v12 tag 2: the snapshot to fetch instead of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotId {
    pub end_offset: i64,
    pub epoch: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPartitionData {
    pub index: i32,
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// v5+; -1 when absent.
    pub log_start_offset: i64,
    /// None encodes null (every version allows it).
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
    /// v11+; -1 when absent.
    pub preferred_read_replica: i32,
    /// The record batches, each a `Bytes` of the log sent as its own piece of the chain; None
    /// encodes null. Decoded, the whole field is one piece (none when it is empty).
    pub records: Option<Vec<Bytes>>,
    pub diverging_epoch: Option<EpochEndOffset>,
    pub current_leader: Option<LeaderIdAndEpoch>,
    pub snapshot_id: Option<SnapshotId>,
}

impl FetchPartitionData {
    /// A partition answer with no records and no tagged fields.
    pub fn empty(index: i32, error: ErrorCode) -> Self {
        Self {
            index,
            error,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted_transactions: Some(Vec::new()),
            preferred_read_replica: -1,
            records: Some(Vec::new()),
            diverging_epoch: None,
            current_leader: None,
            snapshot_id: None,
        }
    }

    /// Bytes of the records field (0 for null).
    pub fn records_len(&self) -> usize {
        self.records
            .as_ref()
            .map_or(0, |pieces| pieces.iter().map(Bytes::len).sum())
    }

    /// The records field as one buffer: the piece itself when there is one, else a copy of
    /// the pieces joined (for clients and tests, never the server's send path).
    pub fn records_bytes(&self) -> Option<Bytes> {
        self.records.as_deref().map(joined)
    }
}

pub type FetchableTopic = Topic<FetchPartitionData>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponse {
    pub throttle_time_ms: i32,
    /// v7+ (a session-level error); NONE when absent.
    pub error: ErrorCode,
    /// v7+; 0 when absent.
    pub session_id: i32,
    pub topics: Vec<FetchableTopic>,
}

impl FetchRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&FETCH_SPEC, version);
        let mut budget = Budget::new();
        let mut request = Self {
            replica_id: r.i32("replica id")?,
            max_wait_ms: r.i32("max wait ms")?,
            min_bytes: r.i32("min bytes")?,
            max_bytes: r.i32("max bytes")?,
            isolation_level: r.i8("isolation level")?,
            ..Self::default()
        };
        if version >= 7 {
            request.session_id = r.i32("session id")?;
            request.session_epoch = r.i32("session epoch")?;
        }
        request.topics = read_topics(&flex, r, &mut budget, &REQUEST_TOPICS, |r| {
            read_fetch_partition(r, version)
        })?;
        if version >= 7 {
            request.forgotten_topics =
                read_topics(&flex, r, &mut budget, &FORGOTTEN_TOPICS, |r| {
                    r.i32("forgotten partition")
                })?;
        }
        if version >= 11 {
            request.rack_id = flex.read_string(r, "rack id")?;
        }
        if flex.0 {
            let mut cluster_id = None;
            r.tagged_fields(|tag, payload| match tag {
                TAG_CLUSTER_ID => {
                    cluster_id =
                        WireReader::whole(payload, |t| t.compact_nullable_string("cluster id"))?;
                    Ok(true)
                }
                _ => Ok(false),
            })?;
            request.cluster_id = cluster_id;
        }
        r.finish()?;
        Ok(request)
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&FETCH_SPEC, version);
        w.i32(self.replica_id);
        w.i32(self.max_wait_ms);
        w.i32(self.min_bytes);
        w.i32(self.max_bytes);
        w.i8(self.isolation_level);
        if version >= 7 {
            w.i32(self.session_id);
            w.i32(self.session_epoch);
        }
        write_topics(&flex, w, &REQUEST_TOPICS, &self.topics, |w, p| {
            w.i32(p.partition);
            if version >= 9 {
                w.i32(p.current_leader_epoch);
            }
            w.i64(p.fetch_offset);
            if version >= 12 {
                w.i32(p.last_fetched_epoch);
            }
            if version >= 5 {
                w.i64(p.log_start_offset);
            }
            w.i32(p.partition_max_bytes);
        });
        if version >= 7 {
            write_topics(
                &flex,
                w,
                &FORGOTTEN_TOPICS,
                &self.forgotten_topics,
                |w, p| w.i32(*p),
            );
        }
        if version >= 11 {
            flex.write_string(w, &self.rack_id);
        }
        if flex.0 {
            match &self.cluster_id {
                Some(id) => {
                    let mut t = WireWriter::new();
                    t.compact_string(id);
                    w.tagged_fields(&[(TAG_CLUSTER_ID, &t.into_inner())]);
                }
                None => w.no_tagged_fields(),
            }
        }
    }
}

fn read_fetch_partition(r: &mut WireReader, version: i16) -> Result<FetchPartition, WireError> {
    let partition = r.i32("partition")?;
    let current_leader_epoch = since(version, 9, -1, || r.i32("current leader epoch"))?;
    let fetch_offset = r.i64("fetch offset")?;
    let last_fetched_epoch = since(version, 12, -1, || r.i32("last fetched epoch"))?;
    let log_start_offset = since(version, 5, -1, || r.i64("log start offset"))?;
    Ok(FetchPartition {
        partition,
        current_leader_epoch,
        fetch_offset,
        last_fetched_epoch,
        log_start_offset,
        partition_max_bytes: r.i32("partition max bytes")?,
    })
}

impl FetchResponse {
    /// Encodes the body after what `w` already holds (typically the size prefix and the
    /// response header) as a chain: the pieces written here, each partition's record batches as
    /// the very `Bytes` given (no copy), then the rest.
    pub fn encode_chain(&self, mut w: WireWriter, version: i16) -> Vec<Bytes> {
        let flex = Flex::of(&FETCH_SPEC, version);
        let batches: usize = self
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.records.as_ref().map_or(0, Vec::len))
            .sum();
        let mut chain = Vec::with_capacity(2 * batches + 1);
        w.i32(self.throttle_time_ms);
        if version >= 7 {
            w.i16(self.error.0);
            w.i32(self.session_id);
        }
        write_topics(&flex, &mut w, &RESPONSE_TOPICS, &self.topics, |w, p| {
            encode_partition(&flex, w, &mut chain, p, version)
        });
        flex.write_tags(&mut w);
        chain.push(w.split_piece());
        chain
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&FETCH_SPEC, version);
        let throttle_time_ms = r.i32("throttle time")?;
        let (error, session_id) = if version >= 7 {
            (ErrorCode(r.i16("error code")?), r.i32("session id")?)
        } else {
            (ErrorCode::NONE, 0)
        };
        let topics = read_topics(&flex, r, &mut Budget::new(), &RESPONSE_TOPICS, |r| {
            decode_partition(&flex, r, version)
        })?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            error,
            session_id,
            topics,
        })
    }
}

fn encode_partition(
    flex: &Flex,
    w: &mut WireWriter,
    chain: &mut Vec<Bytes>,
    p: &FetchPartitionData,
    version: i16,
) {
    w.i32(p.index);
    w.i16(p.error.0);
    w.i64(p.high_watermark);
    w.i64(p.last_stable_offset);
    if version >= 5 {
        w.i64(p.log_start_offset);
    }
    let aborted = p.aborted_transactions.as_deref();
    flex.write_nullable_structs(w, aborted, |w, t| {
        w.i64(t.producer_id);
        w.i64(t.first_offset);
    });
    if version >= 11 {
        w.i32(p.preferred_read_replica);
    }
    flex.write_bytes_len(w, p.records.as_ref().map(|_| p.records_len()));
    let pieces = p.records.iter().flatten().filter(|b| !b.is_empty());
    for (i, piece) in pieces.enumerate() {
        if i == 0 {
            chain.push(w.split_piece());
        }
        chain.push(piece.clone());
    }
    if flex.0 {
        write_partition_tags(w, p);
    }
}

fn write_partition_tags(w: &mut WireWriter, p: &FetchPartitionData) {
    let diverging = p.diverging_epoch.map(|d| {
        tag_payload(|t| {
            t.i32(d.epoch);
            t.i64(d.end_offset);
        })
    });
    let leader = p.current_leader.map(leader_tag_payload);
    let snapshot = p.snapshot_id.map(|s| {
        tag_payload(|t| {
            t.i64(s.end_offset);
            t.i32(s.epoch);
        })
    });
    w.present_tagged_fields(&[
        (TAG_DIVERGING_EPOCH, diverging.as_deref()),
        (TAG_CURRENT_LEADER, leader.as_deref()),
        (TAG_SNAPSHOT_ID, snapshot.as_deref()),
    ]);
}

/// A `CurrentLeader` tagged field's payload (Fetch's and Produce's partition answers).
pub(super) fn leader_tag_payload(leader: LeaderIdAndEpoch) -> BytesMut {
    tag_payload(|t| {
        t.i32(leader.leader_id);
        t.i32(leader.leader_epoch);
    })
}

/// A tagged field's payload: a struct's fields, then its own (empty) tagged-field section.
pub(super) fn tag_payload(f: impl FnOnce(&mut WireWriter)) -> BytesMut {
    let mut t = WireWriter::new();
    f(&mut t);
    t.no_tagged_fields();
    t.into_inner()
}

/// Reads a tagged field's struct payload with `f`, then its tagged fields; nothing may follow.
pub(super) fn read_tag_payload<T>(
    payload: Bytes,
    f: impl FnOnce(&mut WireReader) -> Result<T, WireError>,
) -> Result<T, WireError> {
    WireReader::whole(payload, |t| {
        let value = f(t)?;
        t.skip_tagged_fields()?;
        Ok(value)
    })
}

fn decode_partition(
    flex: &Flex,
    r: &mut WireReader,
    version: i16,
) -> Result<FetchPartitionData, WireError> {
    let index = r.i32("partition index")?;
    let error = ErrorCode(r.i16("error code")?);
    let high_watermark = r.i64("high watermark")?;
    let last_stable_offset = r.i64("last stable offset")?;
    let log_start_offset = since(version, 5, -1, || r.i64("log start offset"))?;
    let aborted_transactions =
        flex.read_nullable_structs(r, "aborted transactions", ABORTED_TRANSACTION_BYTES, |r| {
            Ok(AbortedTransaction {
                producer_id: r.i64("producer id")?,
                first_offset: r.i64("first offset")?,
            })
        })?;
    let preferred_read_replica = since(version, 11, -1, || r.i32("preferred read replica"))?;
    let records = flex.read_nullable_bytes(r, "records")?.map(|b| {
        if b.is_empty() {
            Vec::new()
        } else {
            vec![b]
        }
    });
    let mut p = FetchPartitionData {
        index,
        error,
        high_watermark,
        last_stable_offset,
        log_start_offset,
        aborted_transactions,
        preferred_read_replica,
        records,
        diverging_epoch: None,
        current_leader: None,
        snapshot_id: None,
    };
    if flex.0 {
        r.tagged_fields(|tag, payload| {
            match tag {
                TAG_DIVERGING_EPOCH => {
                    p.diverging_epoch = Some(read_tag_payload(payload, read_diverging_epoch)?)
                }
                TAG_CURRENT_LEADER => {
                    p.current_leader = Some(read_tag_payload(payload, read_leader_id_and_epoch)?)
                }
                TAG_SNAPSHOT_ID => {
                    p.snapshot_id = Some(read_tag_payload(payload, read_snapshot_id)?)
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
    }
    Ok(p)
}

fn read_diverging_epoch(t: &mut WireReader) -> Result<EpochEndOffset, WireError> {
    Ok(EpochEndOffset {
        epoch: t.i32("diverging epoch")?,
        end_offset: t.i64("diverging end offset")?,
    })
}

fn read_snapshot_id(t: &mut WireReader) -> Result<SnapshotId, WireError> {
    Ok(SnapshotId {
        end_offset: t.i64("snapshot end offset")?,
        epoch: t.i32("snapshot epoch")?,
    })
}

pub(super) fn read_leader_id_and_epoch(t: &mut WireReader) -> Result<LeaderIdAndEpoch, WireError> {
    Ok(LeaderIdAndEpoch {
        leader_id: t.i32("leader id")?,
        leader_epoch: t.i32("leader epoch")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::primitives::assert_every_prefix_refused;

    /// An answer without records says no offsets, as Kafka's broker does for a partition it
    /// answers with an error: -1 for each, not 0 (a client would take 0 as real).
    #[test]
    fn an_empty_partition_answer_carries_no_offsets() {
        let p = FetchPartitionData::empty(3, ErrorCode::NOT_LEADER_OR_FOLLOWER);
        assert_eq!(p.index, 3);
        assert_eq!(p.error, ErrorCode::NOT_LEADER_OR_FOLLOWER);
        let offsets = (p.high_watermark, p.last_stable_offset, p.log_start_offset);
        assert_eq!(offsets, (-1, -1, -1));
        assert_eq!(p.preferred_read_replica, -1);
        assert_eq!(p.records, Some(vec![]));
    }

    fn response(records: Option<Vec<Bytes>>) -> FetchResponse {
        FetchResponse {
            throttle_time_ms: 0,
            error: ErrorCode::NONE,
            session_id: 0,
            topics: vec![FetchableTopic {
                name: "__cluster_metadata".into(),
                partitions: vec![FetchPartitionData {
                    high_watermark: 10,
                    last_stable_offset: 10,
                    log_start_offset: 0,
                    records,
                    ..FetchPartitionData::empty(0, ErrorCode::NONE)
                }],
            }],
        }
    }

    #[test]
    fn records_are_the_given_buffers_not_copies() {
        let a = Bytes::from(vec![1u8; 100]);
        let b = Bytes::from(vec![2u8; 50]);
        for version in FETCH_SPEC.min_version..=FETCH_SPEC.max_version {
            let chain =
                response(Some(vec![a.clone(), b.clone()])).encode_chain(WireWriter::new(), version);
            assert_eq!(chain.len(), 4, "v{version}");
            assert_eq!(chain[1].as_ptr(), a.as_ptr());
            assert_eq!(chain[2].as_ptr(), b.as_ptr());
            let mut r = WireReader::new(joined(&chain));
            let back = FetchResponse::decode(&mut r, version).unwrap();
            let p = &back.topics[0].partitions[0];
            assert_eq!(p.records_len(), 150);
            assert_eq!(&p.records_bytes().unwrap()[..100], &a[..]);
        }
    }

    #[test]
    fn null_and_empty_records_stay_apart() {
        for version in FETCH_SPEC.min_version..=FETCH_SPEC.max_version {
            for records in [None, Some(Vec::new())] {
                let mut sent = response(records.clone());
                if version < 5 {
                    sent.topics[0].partitions[0].log_start_offset = -1;
                }
                let chain = sent.encode_chain(WireWriter::new(), version);
                assert_eq!(chain.len(), 1);
                let mut r = WireReader::new(joined(&chain));
                assert_eq!(FetchResponse::decode(&mut r, version).unwrap(), sent);
            }
        }
    }

    #[test]
    fn every_prefix_of_a_request_is_an_error() {
        let request = FetchRequest {
            topics: vec![FetchTopic {
                name: "__cluster_metadata".into(),
                partitions: vec![FetchPartition {
                    partition: 0,
                    current_leader_epoch: 3,
                    fetch_offset: 7,
                    last_fetched_epoch: 2,
                    log_start_offset: 0,
                    partition_max_bytes: 1 << 20,
                }],
            }],
            forgotten_topics: vec![ForgottenTopic {
                name: "t".into(),
                partitions: vec![1, 2],
            }],
            rack_id: "r1".into(),
            cluster_id: Some("cluster".into()),
            session_epoch: 0,
            ..FetchRequest::default()
        };
        let mut w = WireWriter::new();
        request.encode(&mut w, 12);
        let full = w.into_inner().freeze();
        assert_eq!(
            FetchRequest::decode(&mut WireReader::new(full.clone()), 12).unwrap(),
            request
        );
        assert_every_prefix_refused("v12", &full, |r| FetchRequest::decode(r, 12));
    }

    #[test]
    fn a_thousand_and_one_partitions_are_refused() {
        let partition = FetchPartition {
            partition: 0,
            current_leader_epoch: -1,
            fetch_offset: 0,
            last_fetched_epoch: -1,
            log_start_offset: -1,
            partition_max_bytes: 1,
        };
        for (count, ok) in [(1000, true), (1001, false)] {
            let request = FetchRequest {
                topics: vec![
                    FetchTopic {
                        name: "a".into(),
                        partitions: vec![partition.clone(); count - 1],
                    },
                    FetchTopic {
                        name: "b".into(),
                        partitions: vec![partition.clone()],
                    },
                ],
                ..FetchRequest::default()
            };
            let mut w = WireWriter::new();
            request.encode(&mut w, 11);
            let got = FetchRequest::decode(&mut WireReader::new(w.into_inner().freeze()), 11);
            assert_eq!(got.is_ok(), ok, "{count}");
            if !ok {
                assert!(matches!(got, Err(WireError::TooMany { limit: 1000, .. })));
            }
        }
    }
}
