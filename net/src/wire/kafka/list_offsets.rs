//! ListOffsets (key 2, v1-v7, flexible from v6): a consumer asks for the offset at a time, the
//! earliest (-2), the latest (-1) or the one of the largest timestamp (-3).

use engine::raft::ErrorCode;

use super::flex::Flex;
use super::limits::{read_topic_name, Budget};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const LIST_OFFSETS: i16 = 2;

pub const LIST_OFFSETS_SPEC: ApiSpec = ApiSpec {
    key: LIST_OFFSETS,
    name: "ListOffsets",
    min_version: 1,
    max_version: 7,
    first_flexible: Some(6),
};

/// The special timestamps a request may carry instead of a time.
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;

const MIN_TOPIC_BYTES: usize = 3;
const MIN_REQUEST_PARTITION_BYTES: usize = 12;
const MIN_RESPONSE_PARTITION_BYTES: usize = 22;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsPartition {
    pub index: i32,
    /// v4+; -1 when absent.
    pub current_leader_epoch: i32,
    pub timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsTopic {
    pub name: String,
    pub partitions: Vec<ListOffsetsPartition>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsRequest {
    /// -1 for a consumer.
    pub replica_id: i32,
    /// v2+; 0 (read_uncommitted) when absent.
    pub isolation_level: i8,
    pub topics: Vec<ListOffsetsTopic>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsPartitionResponse {
    pub index: i32,
    pub error: ErrorCode,
    pub timestamp: i64,
    pub offset: i64,
    /// v4+; -1 when absent.
    pub leader_epoch: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsTopicResponse {
    pub name: String,
    pub partitions: Vec<ListOffsetsPartitionResponse>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsResponse {
    /// v2+; 0 when absent.
    pub throttle_time_ms: i32,
    pub topics: Vec<ListOffsetsTopicResponse>,
}

fn flex(version: i16) -> Flex {
    Flex(LIST_OFFSETS_SPEC.is_flexible(version))
}

impl ListOffsetsRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = flex(version);
        let mut budget = Budget::new();
        let replica_id = r.i32("replica id")?;
        let isolation_level = if version >= 2 {
            r.i8("isolation level")?
        } else {
            0
        };
        let count = budget.topics(&flex, r, "topics", MIN_TOPIC_BYTES)?;
        let mut topics = Vec::with_capacity(count);
        for _ in 0..count {
            let name = read_topic_name(&flex, r)?;
            let n = budget.partitions(&flex, r, "partitions", MIN_REQUEST_PARTITION_BYTES)?;
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                let index = r.i32("partition index")?;
                let current_leader_epoch = if version >= 4 {
                    r.i32("current leader epoch")?
                } else {
                    -1
                };
                partitions.push(ListOffsetsPartition {
                    index,
                    current_leader_epoch,
                    timestamp: r.i64("timestamp")?,
                });
                flex.read_tags(r)?;
            }
            flex.read_tags(r)?;
            topics.push(ListOffsetsTopic { name, partitions });
        }
        flex.read_tags(r)?;
        r.finish()?;
        Ok(Self {
            replica_id,
            isolation_level,
            topics,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = flex(version);
        w.i32(self.replica_id);
        if version >= 2 {
            w.i8(self.isolation_level);
        }
        flex.write_array_len(w, self.topics.len());
        for topic in &self.topics {
            flex.write_string(w, &topic.name);
            flex.write_array_len(w, topic.partitions.len());
            for p in &topic.partitions {
                w.i32(p.index);
                if version >= 4 {
                    w.i32(p.current_leader_epoch);
                }
                w.i64(p.timestamp);
                flex.write_tags(w);
            }
            flex.write_tags(w);
        }
        flex.write_tags(w);
    }
}

impl ListOffsetsResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = flex(version);
        if version >= 2 {
            w.i32(self.throttle_time_ms);
        }
        flex.write_array_len(w, self.topics.len());
        for topic in &self.topics {
            flex.write_string(w, &topic.name);
            flex.write_array_len(w, topic.partitions.len());
            for p in &topic.partitions {
                w.i32(p.index);
                w.i16(p.error.0);
                w.i64(p.timestamp);
                w.i64(p.offset);
                if version >= 4 {
                    w.i32(p.leader_epoch);
                }
                flex.write_tags(w);
            }
            flex.write_tags(w);
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = flex(version);
        let mut budget = Budget::new();
        let throttle_time_ms = if version >= 2 {
            r.i32("throttle time")?
        } else {
            0
        };
        let count = budget.topics(&flex, r, "topics", MIN_TOPIC_BYTES)?;
        let mut topics = Vec::with_capacity(count);
        for _ in 0..count {
            let name = read_topic_name(&flex, r)?;
            let n = budget.partitions(&flex, r, "partitions", MIN_RESPONSE_PARTITION_BYTES)?;
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                partitions.push(ListOffsetsPartitionResponse {
                    index: r.i32("partition index")?,
                    error: ErrorCode(r.i16("error code")?),
                    timestamp: r.i64("timestamp")?,
                    offset: r.i64("offset")?,
                    leader_epoch: if version >= 4 {
                        r.i32("leader epoch")?
                    } else {
                        -1
                    },
                });
                flex.read_tags(r)?;
            }
            flex.read_tags(r)?;
            topics.push(ListOffsetsTopicResponse { name, partitions });
        }
        flex.read_tags(r)?;
        r.finish()?;
        Ok(Self {
            throttle_time_ms,
            topics,
        })
    }
}
