//! ListOffsets (key 2, v1-v7, flexible from v6): a consumer asks for the offset at a time, the
//! earliest (-2), the latest (-1) or the one of the largest timestamp (-3).

use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use super::limits::Budget;
use super::topics::{read_topics, write_topics, Topic, TopicsLayout};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const LIST_OFFSETS: i16 = 2;

pub const LIST_OFFSETS_SPEC: ApiSpec = ApiSpec::new(LIST_OFFSETS, "ListOffsets", 1..=7, Some(6));

/// The special timestamps a request may carry instead of a time.
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;

/// Index, CurrentLeaderEpoch (v4+), Timestamp.
const REQUEST_TOPICS: TopicsLayout = TopicsLayout::new(12);
/// Index, ErrorCode, Timestamp, Offset, LeaderEpoch (v4+).
const RESPONSE_TOPICS: TopicsLayout = TopicsLayout::new(22);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsPartition {
    pub index: i32,
    /// v4+; -1 when absent.
    pub current_leader_epoch: i32,
    pub timestamp: i64,
}

pub type ListOffsetsTopic = Topic<ListOffsetsPartition>;

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

pub type ListOffsetsTopicResponse = Topic<ListOffsetsPartitionResponse>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOffsetsResponse {
    /// v2+; 0 when absent.
    pub throttle_time_ms: i32,
    pub topics: Vec<ListOffsetsTopicResponse>,
}

impl ListOffsetsRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&LIST_OFFSETS_SPEC, version);
        let replica_id = r.i32("replica id")?;
        let isolation_level = since(version, 2, 0, || r.i8("isolation level"))?;
        let topics = read_topics(&flex, r, &mut Budget::new(), &REQUEST_TOPICS, |r| {
            Ok(ListOffsetsPartition {
                index: r.i32("partition index")?,
                current_leader_epoch: since(version, 4, -1, || r.i32("current leader epoch"))?,
                timestamp: r.i64("timestamp")?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            replica_id,
            isolation_level,
            topics,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&LIST_OFFSETS_SPEC, version);
        w.i32(self.replica_id);
        if version >= 2 {
            w.i8(self.isolation_level);
        }
        write_topics(&flex, w, &REQUEST_TOPICS, &self.topics, |w, p| {
            w.i32(p.index);
            if version >= 4 {
                w.i32(p.current_leader_epoch);
            }
            w.i64(p.timestamp);
        });
        flex.write_tags(w);
    }
}

impl ListOffsetsResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&LIST_OFFSETS_SPEC, version);
        if version >= 2 {
            w.i32(self.throttle_time_ms);
        }
        write_topics(&flex, w, &RESPONSE_TOPICS, &self.topics, |w, p| {
            w.i32(p.index);
            w.i16(p.error.0);
            w.i64(p.timestamp);
            w.i64(p.offset);
            if version >= 4 {
                w.i32(p.leader_epoch);
            }
        });
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&LIST_OFFSETS_SPEC, version);
        let throttle_time_ms = since(version, 2, 0, || r.i32("throttle time"))?;
        let topics = read_topics(&flex, r, &mut Budget::new(), &RESPONSE_TOPICS, |r| {
            Ok(ListOffsetsPartitionResponse {
                index: r.i32("partition index")?,
                error: ErrorCode(r.i16("error code")?),
                timestamp: r.i64("timestamp")?,
                offset: r.i64("offset")?,
                leader_epoch: since(version, 4, -1, || r.i32("leader epoch"))?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            topics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The special timestamps are Kafka's (`ListOffsetsRequest`'s LATEST_TIMESTAMP,
    /// EARLIEST_TIMESTAMP and MAX_TIMESTAMP): what kcat's `-o end`, `-o beginning` and
    /// kafka-python's `end_offsets` send.
    #[test]
    fn special_timestamps_are_kafkas() {
        assert_eq!(LATEST_TIMESTAMP, -1);
        assert_eq!(EARLIEST_TIMESTAMP, -2);
        assert_eq!(MAX_TIMESTAMP, -3);
    }
}
