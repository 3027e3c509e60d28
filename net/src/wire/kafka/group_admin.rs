//! ListGroups (key 16, v0-v5, flexible from v3), DescribeGroups (key 15, v0-v6, flexible from
//! v5), DeleteGroups (key 42, v0-v2, flexible from v2) and OffsetDelete (key 47, v0): the
//! administration of consumer groups (docs/protocol.md, "Consumer groups").

use bytes::Bytes;
use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use super::limits::Budget;
use super::topics::{read_topics, write_topics, Topic, TopicsLayout};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const DESCRIBE_GROUPS: i16 = 15;
pub const LIST_GROUPS: i16 = 16;
pub const DELETE_GROUPS: i16 = 42;
pub const OFFSET_DELETE: i16 = 47;

pub const DESCRIBE_GROUPS_SPEC: ApiSpec =
    ApiSpec::new(DESCRIBE_GROUPS, "DescribeGroups", 0..=6, Some(5));
pub const LIST_GROUPS_SPEC: ApiSpec = ApiSpec::new(LIST_GROUPS, "ListGroups", 0..=5, Some(3));
pub const DELETE_GROUPS_SPEC: ApiSpec = ApiSpec::new(DELETE_GROUPS, "DeleteGroups", 0..=2, Some(2));
pub const OFFSET_DELETE_SPEC: ApiSpec = ApiSpec::new(OFFSET_DELETE, "OffsetDelete", 0..=0, None);

/// Group ids one request may name.
pub const MAX_GROUPS_PER_REQUEST: usize = 1_000;

/// Partition index.
const DELETE_TOPICS: TopicsLayout = TopicsLayout::new(4);
/// Partition index, ErrorCode.
const DELETE_RESPONSE_TOPICS: TopicsLayout = TopicsLayout::new(6);

fn read_names(
    flex: &Flex,
    r: &mut WireReader,
    field: &'static str,
) -> Result<Vec<String>, WireError> {
    let count = flex.read_array_len(r, field, 1)?;
    if count > MAX_GROUPS_PER_REQUEST {
        return Err(WireError::TooMany {
            field,
            count,
            limit: MAX_GROUPS_PER_REQUEST,
        });
    }
    (0..count).map(|_| flex.read_string(r, field)).collect()
}

fn write_names(flex: &Flex, w: &mut WireWriter, names: &[String]) {
    flex.write_array_len(w, names.len());
    for name in names {
        flex.write_string(w, name);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListGroupsRequest {
    /// v4+.
    pub states_filter: Vec<String>,
    /// v5+.
    pub types_filter: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    /// v4+.
    pub group_state: String,
    /// v5+.
    pub group_type: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListGroupsResponse {
    /// v1+.
    pub throttle_time_ms: i32,
    pub error: ErrorCode,
    pub groups: Vec<ListedGroup>,
}

impl ListGroupsRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&LIST_GROUPS_SPEC, version);
        let states_filter = since(version, 4, Vec::new(), || {
            read_names(&flex, r, "states filter")
        })?;
        let types_filter = since(version, 5, Vec::new(), || {
            read_names(&flex, r, "types filter")
        })?;
        flex.read_end(r)?;
        Ok(Self {
            states_filter,
            types_filter,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&LIST_GROUPS_SPEC, version);
        if version >= 4 {
            write_names(&flex, w, &self.states_filter);
        }
        if version >= 5 {
            write_names(&flex, w, &self.types_filter);
        }
        flex.write_tags(w);
    }
}

impl ListGroupsResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&LIST_GROUPS_SPEC, version);
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error.0);
        flex.write_structs(w, &self.groups, |w, g| {
            flex.write_string(w, &g.group_id);
            flex.write_string(w, &g.protocol_type);
            if version >= 4 {
                flex.write_string(w, &g.group_state);
            }
            if version >= 5 {
                flex.write_string(w, &g.group_type);
            }
        });
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&LIST_GROUPS_SPEC, version);
        let throttle_time_ms = since(version, 1, 0, || r.i32("throttle time"))?;
        let error = ErrorCode(r.i16("error code")?);
        let groups = flex.read_structs(r, "groups", 2, |r| {
            Ok(ListedGroup {
                group_id: flex.read_string(r, "group id")?,
                protocol_type: flex.read_string(r, "protocol type")?,
                group_state: since(version, 4, String::new(), || {
                    flex.read_string(r, "group state")
                })?,
                group_type: since(version, 5, String::new(), || {
                    flex.read_string(r, "group type")
                })?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            error,
            groups,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeGroupsRequest {
    pub groups: Vec<String>,
    /// v3+.
    pub include_authorized_operations: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    /// v4+.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_metadata: Bytes,
    pub member_assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedGroup {
    pub error: ErrorCode,
    /// v6+.
    pub error_message: Option<String>,
    pub group_id: String,
    pub group_state: String,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<DescribedMember>,
    /// v3+.
    pub authorized_operations: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeGroupsResponse {
    /// v1+.
    pub throttle_time_ms: i32,
    pub groups: Vec<DescribedGroup>,
}

impl DescribeGroupsRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&DESCRIBE_GROUPS_SPEC, version);
        let groups = read_names(&flex, r, "groups")?;
        let include_authorized_operations = since(version, 3, false, || {
            r.bool("include authorized operations")
        })?;
        flex.read_end(r)?;
        Ok(Self {
            groups,
            include_authorized_operations,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&DESCRIBE_GROUPS_SPEC, version);
        write_names(&flex, w, &self.groups);
        if version >= 3 {
            w.bool(self.include_authorized_operations);
        }
        flex.write_tags(w);
    }
}

impl DescribeGroupsResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&DESCRIBE_GROUPS_SPEC, version);
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        flex.write_structs(w, &self.groups, |w, g| {
            w.i16(g.error.0);
            if version >= 6 {
                flex.write_nullable_string(w, g.error_message.as_deref());
            }
            flex.write_string(w, &g.group_id);
            flex.write_string(w, &g.group_state);
            flex.write_string(w, &g.protocol_type);
            flex.write_string(w, &g.protocol_data);
            flex.write_structs(w, &g.members, |w, m| {
                flex.write_string(w, &m.member_id);
                if version >= 4 {
                    flex.write_nullable_string(w, m.group_instance_id.as_deref());
                }
                flex.write_string(w, &m.client_id);
                flex.write_string(w, &m.client_host);
                flex.write_bytes(w, &m.member_metadata);
                flex.write_bytes(w, &m.member_assignment);
            });
            if version >= 3 {
                w.i32(g.authorized_operations);
            }
        });
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&DESCRIBE_GROUPS_SPEC, version);
        let throttle_time_ms = since(version, 1, 0, || r.i32("throttle time"))?;
        let groups = flex.read_structs(r, "groups", 6, |r| {
            Ok(DescribedGroup {
                error: ErrorCode(r.i16("error code")?),
                error_message: since(version, 6, None, || {
                    flex.read_nullable_string(r, "error message")
                })?,
                group_id: flex.read_string(r, "group id")?,
                group_state: flex.read_string(r, "group state")?,
                protocol_type: flex.read_string(r, "protocol type")?,
                protocol_data: flex.read_string(r, "protocol data")?,
                members: flex.read_structs(r, "members", 6, |r| {
                    Ok(DescribedMember {
                        member_id: flex.read_string(r, "member id")?,
                        group_instance_id: since(version, 4, None, || {
                            flex.read_nullable_string(r, "group instance id")
                        })?,
                        client_id: flex.read_string(r, "client id")?,
                        client_host: flex.read_string(r, "client host")?,
                        member_metadata: flex.read_bytes(r, "member metadata")?,
                        member_assignment: flex.read_bytes(r, "member assignment")?,
                    })
                })?,
                authorized_operations: since(version, 3, i32::MIN, || {
                    r.i32("authorized operations")
                })?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            groups,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteGroupsRequest {
    pub groups: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteGroupsResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<(String, ErrorCode)>,
}

impl DeleteGroupsRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&DELETE_GROUPS_SPEC, version);
        let groups = read_names(&flex, r, "groups names")?;
        flex.read_end(r)?;
        Ok(Self { groups })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&DELETE_GROUPS_SPEC, version);
        write_names(&flex, w, &self.groups);
        flex.write_tags(w);
    }
}

impl DeleteGroupsResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&DELETE_GROUPS_SPEC, version);
        w.i32(self.throttle_time_ms);
        flex.write_structs(w, &self.results, |w, (group, error)| {
            flex.write_string(w, group);
            w.i16(error.0);
        });
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&DELETE_GROUPS_SPEC, version);
        let throttle_time_ms = r.i32("throttle time")?;
        let results = flex.read_structs(r, "results", 3, |r| {
            Ok((
                flex.read_string(r, "group id")?,
                ErrorCode(r.i16("error code")?),
            ))
        })?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            results,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetDeleteRequest {
    pub group_id: String,
    pub topics: Vec<Topic<i32>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetDeleteResponse {
    pub error: ErrorCode,
    pub throttle_time_ms: i32,
    pub topics: Vec<Topic<(i32, ErrorCode)>>,
}

impl OffsetDeleteRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&OFFSET_DELETE_SPEC, version);
        let group_id = flex.read_string(r, "group id")?;
        let topics = read_topics(&flex, r, &mut Budget::new(), &DELETE_TOPICS, |r| {
            r.i32("partition index")
        })?;
        flex.read_end(r)?;
        Ok(Self { group_id, topics })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&OFFSET_DELETE_SPEC, version);
        flex.write_string(w, &self.group_id);
        write_topics(&flex, w, &DELETE_TOPICS, &self.topics, |w, p| w.i32(*p));
        flex.write_tags(w);
    }
}

impl OffsetDeleteResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&OFFSET_DELETE_SPEC, version);
        w.i16(self.error.0);
        w.i32(self.throttle_time_ms);
        write_topics(
            &flex,
            w,
            &DELETE_RESPONSE_TOPICS,
            &self.topics,
            |w, (p, e)| {
                w.i32(*p);
                w.i16(e.0);
            },
        );
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&OFFSET_DELETE_SPEC, version);
        let error = ErrorCode(r.i16("error code")?);
        let throttle_time_ms = r.i32("throttle time")?;
        let topics = read_topics(&flex, r, &mut Budget::new(), &DELETE_RESPONSE_TOPICS, |r| {
            Ok((r.i32("partition index")?, ErrorCode(r.i16("error code")?)))
        })?;
        flex.read_end(r)?;
        Ok(Self {
            error,
            throttle_time_ms,
            topics,
        })
    }
}
