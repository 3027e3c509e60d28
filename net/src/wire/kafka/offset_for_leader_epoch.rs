//! OffsetForLeaderEpoch (key 23, v2-v4, flexible from v4): a consumer checks its position
//! against the leader's epoch history (the end offset of the epoch it last fetched in).

use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use super::limits::Budget;
use super::topics::{read_topics, write_topics, Topic, TopicsLayout};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const OFFSET_FOR_LEADER_EPOCH: i16 = 23;

pub const OFFSET_FOR_LEADER_EPOCH_SPEC: ApiSpec = ApiSpec::new(
    OFFSET_FOR_LEADER_EPOCH,
    "OffsetForLeaderEpoch",
    2..=4,
    Some(4),
);

/// The replica id of a consumer (v3+), and what a v2 request means.
pub const CONSUMER_REPLICA_ID: i32 = -2;

/// Partition, CurrentLeaderEpoch, LeaderEpoch.
const REQUEST_TOPICS: TopicsLayout = TopicsLayout::new(12);
/// ErrorCode, Partition, LeaderEpoch, EndOffset.
const RESPONSE_TOPICS: TopicsLayout = TopicsLayout::new(18);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub leader_epoch: i32,
}

pub type OffsetForLeaderTopic = Topic<OffsetForLeaderPartition>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderEpochRequest {
    /// v3+; [`CONSUMER_REPLICA_ID`] when absent.
    pub replica_id: i32,
    pub topics: Vec<OffsetForLeaderTopic>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochEndOffsetResponse {
    pub error: ErrorCode,
    pub partition: i32,
    pub leader_epoch: i32,
    pub end_offset: i64,
}

pub type OffsetForLeaderTopicResult = Topic<EpochEndOffsetResponse>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderEpochResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetForLeaderTopicResult>,
}

impl OffsetForLeaderEpochRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&OFFSET_FOR_LEADER_EPOCH_SPEC, version);
        let replica_id = since(version, 3, CONSUMER_REPLICA_ID, || r.i32("replica id"))?;
        let topics = read_topics(&flex, r, &mut Budget::new(), &REQUEST_TOPICS, |r| {
            Ok(OffsetForLeaderPartition {
                partition: r.i32("partition")?,
                current_leader_epoch: r.i32("current leader epoch")?,
                leader_epoch: r.i32("leader epoch")?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self { replica_id, topics })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&OFFSET_FOR_LEADER_EPOCH_SPEC, version);
        if version >= 3 {
            w.i32(self.replica_id);
        }
        write_topics(&flex, w, &REQUEST_TOPICS, &self.topics, |w, p| {
            w.i32(p.partition);
            w.i32(p.current_leader_epoch);
            w.i32(p.leader_epoch);
        });
        flex.write_tags(w);
    }
}

impl OffsetForLeaderEpochResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&OFFSET_FOR_LEADER_EPOCH_SPEC, version);
        w.i32(self.throttle_time_ms);
        write_topics(&flex, w, &RESPONSE_TOPICS, &self.topics, |w, p| {
            w.i16(p.error.0);
            w.i32(p.partition);
            w.i32(p.leader_epoch);
            w.i64(p.end_offset);
        });
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&OFFSET_FOR_LEADER_EPOCH_SPEC, version);
        let throttle_time_ms = r.i32("throttle time")?;
        let topics = read_topics(&flex, r, &mut Budget::new(), &RESPONSE_TOPICS, |r| {
            Ok(EpochEndOffsetResponse {
                error: ErrorCode(r.i16("error code")?),
                partition: r.i32("partition")?,
                leader_epoch: r.i32("leader epoch")?,
                end_offset: r.i64("end offset")?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            topics,
        })
    }
}
