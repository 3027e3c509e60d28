//! OffsetCommit (key 8, v2-v9, flexible from v8) and OffsetFetch (key 9, v1-v9, flexible from
//! v6; a batch of groups from v8): a consumer group's committed offsets (docs/protocol.md,
//! "Consumer groups").

use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use super::limits::Budget;
use super::topics::{read_topics, write_topics, Topic, TopicsLayout, MIN_TOPIC_BYTES};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const OFFSET_COMMIT: i16 = 8;
pub const OFFSET_FETCH: i16 = 9;

pub const OFFSET_COMMIT_SPEC: ApiSpec = ApiSpec::new(OFFSET_COMMIT, "OffsetCommit", 2..=9, Some(8));
pub const OFFSET_FETCH_SPEC: ApiSpec = ApiSpec::new(OFFSET_FETCH, "OffsetFetch", 1..=9, Some(6));

/// Groups one OffsetFetch (v8+) may name.
pub const MAX_FETCH_GROUPS: usize = 1_000;

/// Partition, CommittedOffset, [CommittedLeaderEpoch], CommittedMetadata.
const COMMIT_TOPICS: TopicsLayout = TopicsLayout::new(13);
/// Partition, ErrorCode.
const COMMIT_RESPONSE_TOPICS: TopicsLayout = TopicsLayout::new(6);
/// Partition indexes: bare int32s.
const FETCH_TOPICS: TopicsLayout = TopicsLayout::new(4).own_partition_tags();
/// Partition, CommittedOffset, [CommittedLeaderEpoch], Metadata, ErrorCode.
const FETCH_RESPONSE_TOPICS: TopicsLayout = TopicsLayout::new(15);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitPartition {
    pub partition: i32,
    pub committed_offset: i64,
    /// v6+; -1 when absent.
    pub committed_leader_epoch: i32,
    pub committed_metadata: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    /// -1 for a commit from outside the group's membership.
    pub generation_id: i32,
    pub member_id: String,
    /// v7+.
    pub group_instance_id: Option<String>,
    /// v2-v4 (ignored: offsets.retention.minutes applies).
    pub retention_time_ms: i64,
    pub topics: Vec<Topic<OffsetCommitPartition>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitPartitionResponse {
    pub partition: i32,
    pub error: ErrorCode,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitResponse {
    /// v3+.
    pub throttle_time_ms: i32,
    pub topics: Vec<Topic<OffsetCommitPartitionResponse>>,
}

impl OffsetCommitRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&OFFSET_COMMIT_SPEC, version);
        let group_id = flex.read_string(r, "group id")?;
        let generation_id = r.i32("generation id")?;
        let member_id = flex.read_string(r, "member id")?;
        let group_instance_id = since(version, 7, None, || {
            flex.read_nullable_string(r, "group instance id")
        })?;
        let retention_time_ms = match version <= 4 {
            true => r.i64("retention time")?,
            false => -1,
        };
        let topics = read_topics(&flex, r, &mut Budget::new(), &COMMIT_TOPICS, |r| {
            Ok(OffsetCommitPartition {
                partition: r.i32("partition")?,
                committed_offset: r.i64("committed offset")?,
                committed_leader_epoch: since(version, 6, -1, || r.i32("committed leader epoch"))?,
                committed_metadata: flex.read_nullable_string(r, "committed metadata")?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            retention_time_ms,
            topics,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&OFFSET_COMMIT_SPEC, version);
        flex.write_string(w, &self.group_id);
        w.i32(self.generation_id);
        flex.write_string(w, &self.member_id);
        if version >= 7 {
            flex.write_nullable_string(w, self.group_instance_id.as_deref());
        }
        if version <= 4 {
            w.i64(self.retention_time_ms);
        }
        write_topics(&flex, w, &COMMIT_TOPICS, &self.topics, |w, p| {
            w.i32(p.partition);
            w.i64(p.committed_offset);
            if version >= 6 {
                w.i32(p.committed_leader_epoch);
            }
            flex.write_nullable_string(w, p.committed_metadata.as_deref());
        });
        flex.write_tags(w);
    }
}

impl OffsetCommitResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&OFFSET_COMMIT_SPEC, version);
        if version >= 3 {
            w.i32(self.throttle_time_ms);
        }
        write_topics(&flex, w, &COMMIT_RESPONSE_TOPICS, &self.topics, |w, p| {
            w.i32(p.partition);
            w.i16(p.error.0);
        });
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&OFFSET_COMMIT_SPEC, version);
        let throttle_time_ms = since(version, 3, 0, || r.i32("throttle time"))?;
        let topics = read_topics(&flex, r, &mut Budget::new(), &COMMIT_RESPONSE_TOPICS, |r| {
            Ok(OffsetCommitPartitionResponse {
                partition: r.i32("partition")?,
                error: ErrorCode(r.i16("error code")?),
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            topics,
        })
    }
}

/// One group an OffsetFetch asks about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchGroup {
    pub group_id: String,
    /// v9+.
    pub member_id: Option<String>,
    /// v9+; -1 when absent.
    pub member_epoch: i32,
    /// None: every partition with a committed offset (v2+).
    pub topics: Option<Vec<Topic<i32>>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    /// v1-v7: exactly one; v8+: the batch.
    pub groups: Vec<OffsetFetchGroup>,
    /// v7+.
    pub require_stable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchPartition {
    pub partition: i32,
    /// -1: none committed.
    pub committed_offset: i64,
    /// v5+; -1 when unknown.
    pub committed_leader_epoch: i32,
    pub metadata: Option<String>,
    pub error: ErrorCode,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchGroupResponse {
    /// v8+ only.
    pub group_id: String,
    pub topics: Vec<Topic<OffsetFetchPartition>>,
    /// v2+.
    pub error: ErrorCode,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchResponse {
    /// v3+.
    pub throttle_time_ms: i32,
    /// v1-v7: exactly one; v8+: one per group asked.
    pub groups: Vec<OffsetFetchGroupResponse>,
}

/// A topic array that may be null (None).
fn read_nullable_fetch_topics(
    flex: &Flex,
    r: &mut WireReader,
    budget: &mut Budget,
) -> Result<Option<Vec<Topic<i32>>>, WireError> {
    let mut peek = r.clone();
    if flex
        .read_nullable_array_len(&mut peek, "topics", MIN_TOPIC_BYTES)?
        .is_none()
    {
        *r = peek;
        return Ok(None);
    }
    read_topics(flex, r, budget, &FETCH_TOPICS, |r| r.i32("partition index")).map(Some)
}

fn write_nullable_fetch_topics(flex: &Flex, w: &mut WireWriter, topics: Option<&[Topic<i32>]>) {
    match topics {
        None => flex.write_nullable_array_len(w, None),
        Some(topics) => write_topics(flex, w, &FETCH_TOPICS, topics, |w, p| w.i32(*p)),
    }
}

impl OffsetFetchRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&OFFSET_FETCH_SPEC, version);
        let mut budget = Budget::new();
        let groups = if version <= 7 {
            let group_id = flex.read_string(r, "group id")?;
            let topics = match version {
                1 => Some(read_topics(&flex, r, &mut budget, &FETCH_TOPICS, |r| {
                    r.i32("partition index")
                })?),
                _ => read_nullable_fetch_topics(&flex, r, &mut budget)?,
            };
            vec![OffsetFetchGroup {
                group_id,
                member_id: None,
                member_epoch: -1,
                topics,
            }]
        } else {
            let count = flex.read_array_len(r, "groups", 3)?;
            if count > MAX_FETCH_GROUPS {
                return Err(WireError::TooMany {
                    field: "groups",
                    count,
                    limit: MAX_FETCH_GROUPS,
                });
            }
            let mut groups = Vec::with_capacity(count);
            for _ in 0..count {
                let group_id = flex.read_string(r, "group id")?;
                let (member_id, member_epoch) = if version >= 9 {
                    (
                        flex.read_nullable_string(r, "member id")?,
                        r.i32("member epoch")?,
                    )
                } else {
                    (None, -1)
                };
                let topics = read_nullable_fetch_topics(&flex, r, &mut budget)?;
                flex.read_tags(r)?;
                groups.push(OffsetFetchGroup {
                    group_id,
                    member_id,
                    member_epoch,
                    topics,
                });
            }
            groups
        };
        let require_stable = since(version, 7, false, || r.bool("require stable"))?;
        flex.read_end(r)?;
        Ok(Self {
            groups,
            require_stable,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&OFFSET_FETCH_SPEC, version);
        if version <= 7 {
            assert_eq!(self.groups.len(), 1, "v1-v7 ask about one group");
            let group = &self.groups[0];
            flex.write_string(w, &group.group_id);
            write_nullable_fetch_topics(&flex, w, group.topics.as_deref());
        } else {
            flex.write_structs(w, &self.groups, |w, g| {
                flex.write_string(w, &g.group_id);
                if version >= 9 {
                    flex.write_nullable_string(w, g.member_id.as_deref());
                    w.i32(g.member_epoch);
                }
                write_nullable_fetch_topics(&flex, w, g.topics.as_deref());
            });
        }
        if version >= 7 {
            w.bool(self.require_stable);
        }
        flex.write_tags(w);
    }
}

impl OffsetFetchResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&OFFSET_FETCH_SPEC, version);
        if version >= 3 {
            w.i32(self.throttle_time_ms);
        }
        let write_partition = |w: &mut WireWriter, p: &OffsetFetchPartition| {
            w.i32(p.partition);
            w.i64(p.committed_offset);
            if version >= 5 {
                w.i32(p.committed_leader_epoch);
            }
            flex.write_nullable_string(w, p.metadata.as_deref());
            w.i16(p.error.0);
        };
        if version <= 7 {
            assert_eq!(self.groups.len(), 1, "v1-v7 answer one group");
            let group = &self.groups[0];
            write_topics(
                &flex,
                w,
                &FETCH_RESPONSE_TOPICS,
                &group.topics,
                write_partition,
            );
            if version >= 2 {
                w.i16(group.error.0);
            }
        } else {
            flex.write_structs(w, &self.groups, |w, g| {
                flex.write_string(w, &g.group_id);
                write_topics(&flex, w, &FETCH_RESPONSE_TOPICS, &g.topics, write_partition);
                w.i16(g.error.0);
            });
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&OFFSET_FETCH_SPEC, version);
        let throttle_time_ms = since(version, 3, 0, || r.i32("throttle time"))?;
        let read_partition = |r: &mut WireReader| {
            Ok(OffsetFetchPartition {
                partition: r.i32("partition")?,
                committed_offset: r.i64("committed offset")?,
                committed_leader_epoch: since(version, 5, -1, || r.i32("committed leader epoch"))?,
                metadata: flex.read_nullable_string(r, "metadata")?,
                error: ErrorCode(r.i16("error code")?),
            })
        };
        let mut budget = Budget::new();
        let groups = if version <= 7 {
            let topics = read_topics(
                &flex,
                r,
                &mut budget,
                &FETCH_RESPONSE_TOPICS,
                read_partition,
            )?;
            let error = since(version, 2, ErrorCode::NONE, || {
                Ok(ErrorCode(r.i16("error code")?))
            })?;
            vec![OffsetFetchGroupResponse {
                group_id: String::new(),
                topics,
                error,
            }]
        } else {
            flex.read_structs(r, "groups", 5, |r| {
                Ok(OffsetFetchGroupResponse {
                    group_id: flex.read_string(r, "group id")?,
                    topics: read_topics(
                        &flex,
                        r,
                        &mut budget,
                        &FETCH_RESPONSE_TOPICS,
                        read_partition,
                    )?,
                    error: ErrorCode(r.i16("error code")?),
                })
            })?
        };
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            groups,
        })
    }
}
