//! OffsetForLeaderEpoch (key 23, v2-v4, flexible from v4): a consumer checks its position
//! against the leader's epoch history (the end offset of the epoch it last fetched in).

use engine::raft::ErrorCode;

use super::flex::Flex;
use super::limits::{read_topic_name, Budget};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const OFFSET_FOR_LEADER_EPOCH: i16 = 23;

pub const OFFSET_FOR_LEADER_EPOCH_SPEC: ApiSpec = ApiSpec {
    key: OFFSET_FOR_LEADER_EPOCH,
    name: "OffsetForLeaderEpoch",
    min_version: 2,
    max_version: 4,
    first_flexible: Some(4),
};

/// The replica id of a consumer (v3+), and what a v2 request means.
pub const CONSUMER_REPLICA_ID: i32 = -2;

const MIN_TOPIC_BYTES: usize = 3;
const PARTITION_BYTES: usize = 12;
const RESPONSE_PARTITION_BYTES: usize = 18;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub leader_epoch: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderTopic {
    pub name: String,
    pub partitions: Vec<OffsetForLeaderPartition>,
}

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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderTopicResult {
    pub name: String,
    pub partitions: Vec<EpochEndOffsetResponse>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetForLeaderEpochResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetForLeaderTopicResult>,
}

fn flex(version: i16) -> Flex {
    Flex(OFFSET_FOR_LEADER_EPOCH_SPEC.is_flexible(version))
}

impl OffsetForLeaderEpochRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = flex(version);
        let mut budget = Budget::new();
        let replica_id = if version >= 3 {
            r.i32("replica id")?
        } else {
            CONSUMER_REPLICA_ID
        };
        let count = budget.topics(&flex, r, "topics", MIN_TOPIC_BYTES)?;
        let mut topics = Vec::with_capacity(count);
        for _ in 0..count {
            let name = read_topic_name(&flex, r)?;
            let n = budget.partitions(&flex, r, "partitions", PARTITION_BYTES)?;
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                partitions.push(OffsetForLeaderPartition {
                    partition: r.i32("partition")?,
                    current_leader_epoch: r.i32("current leader epoch")?,
                    leader_epoch: r.i32("leader epoch")?,
                });
                flex.read_tags(r)?;
            }
            flex.read_tags(r)?;
            topics.push(OffsetForLeaderTopic { name, partitions });
        }
        flex.read_tags(r)?;
        r.finish()?;
        Ok(Self { replica_id, topics })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = flex(version);
        if version >= 3 {
            w.i32(self.replica_id);
        }
        flex.write_array_len(w, self.topics.len());
        for topic in &self.topics {
            flex.write_string(w, &topic.name);
            flex.write_array_len(w, topic.partitions.len());
            for p in &topic.partitions {
                w.i32(p.partition);
                w.i32(p.current_leader_epoch);
                w.i32(p.leader_epoch);
                flex.write_tags(w);
            }
            flex.write_tags(w);
        }
        flex.write_tags(w);
    }
}

impl OffsetForLeaderEpochResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = flex(version);
        w.i32(self.throttle_time_ms);
        flex.write_array_len(w, self.topics.len());
        for topic in &self.topics {
            flex.write_string(w, &topic.name);
            flex.write_array_len(w, topic.partitions.len());
            for p in &topic.partitions {
                w.i16(p.error.0);
                w.i32(p.partition);
                w.i32(p.leader_epoch);
                w.i64(p.end_offset);
                flex.write_tags(w);
            }
            flex.write_tags(w);
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = flex(version);
        let mut budget = Budget::new();
        let throttle_time_ms = r.i32("throttle time")?;
        let count = budget.topics(&flex, r, "topics", MIN_TOPIC_BYTES)?;
        let mut topics = Vec::with_capacity(count);
        for _ in 0..count {
            let name = read_topic_name(&flex, r)?;
            let n = budget.partitions(&flex, r, "partitions", RESPONSE_PARTITION_BYTES)?;
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                partitions.push(EpochEndOffsetResponse {
                    error: ErrorCode(r.i16("error code")?),
                    partition: r.i32("partition")?,
                    leader_epoch: r.i32("leader epoch")?,
                    end_offset: r.i64("end offset")?,
                });
                flex.read_tags(r)?;
            }
            flex.read_tags(r)?;
            topics.push(OffsetForLeaderTopicResult { name, partitions });
        }
        flex.read_tags(r)?;
        r.finish()?;
        Ok(Self {
            throttle_time_ms,
            topics,
        })
    }
}
