//! JoinGroup (key 11, v0-v9, flexible from v6), SyncGroup (key 14, v0-v5, flexible from v4),
//! Heartbeat (key 12, v0-v4, flexible from v4) and LeaveGroup (key 13, v0-v5, flexible from
//! v4): the classic rebalance protocol of consumer groups (docs/protocol.md, "Consumer
//! groups"). Ids a client leaves empty stay empty strings here; the handler maps them to None.

use bytes::Bytes;
use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const JOIN_GROUP: i16 = 11;
pub const HEARTBEAT: i16 = 12;
pub const LEAVE_GROUP: i16 = 13;
pub const SYNC_GROUP: i16 = 14;

pub const JOIN_GROUP_SPEC: ApiSpec = ApiSpec::new(JOIN_GROUP, "JoinGroup", 0..=9, Some(6));
pub const HEARTBEAT_SPEC: ApiSpec = ApiSpec::new(HEARTBEAT, "Heartbeat", 0..=4, Some(4));
pub const LEAVE_GROUP_SPEC: ApiSpec = ApiSpec::new(LEAVE_GROUP, "LeaveGroup", 0..=5, Some(4));
pub const SYNC_GROUP_SPEC: ApiSpec = ApiSpec::new(SYNC_GROUP, "SyncGroup", 0..=5, Some(4));

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupProtocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupRequest {
    pub group_id: String,
    pub session_timeout_ms: i32,
    /// v1+; the session timeout in v0.
    pub rebalance_timeout_ms: i32,
    pub member_id: String,
    /// v5+.
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<JoinGroupProtocol>,
    /// v8+.
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupMember {
    pub member_id: String,
    /// v5+.
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// v2+.
    pub throttle_time_ms: i32,
    pub error: ErrorCode,
    pub generation_id: i32,
    /// v7+.
    pub protocol_type: Option<String>,
    /// Nullable from v7 (an empty string before).
    pub protocol_name: Option<String>,
    pub leader: String,
    /// v9+.
    pub skip_assignment: bool,
    pub member_id: String,
    pub members: Vec<JoinGroupMember>,
}

impl JoinGroupRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&JOIN_GROUP_SPEC, version);
        let group_id = flex.read_string(r, "group id")?;
        let session_timeout_ms = r.i32("session timeout")?;
        let rebalance_timeout_ms = since(version, 1, session_timeout_ms, || {
            r.i32("rebalance timeout")
        })?;
        let member_id = flex.read_string(r, "member id")?;
        let group_instance_id = since(version, 5, None, || {
            flex.read_nullable_string(r, "group instance id")
        })?;
        let protocol_type = flex.read_string(r, "protocol type")?;
        let protocols = flex.read_structs(r, "protocols", 2, |r| {
            Ok(JoinGroupProtocol {
                name: flex.read_string(r, "protocol name")?,
                metadata: flex.read_bytes(r, "protocol metadata")?,
            })
        })?;
        let reason = since(version, 8, None, || flex.read_nullable_string(r, "reason"))?;
        flex.read_end(r)?;
        Ok(Self {
            group_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            member_id,
            group_instance_id,
            protocol_type,
            protocols,
            reason,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&JOIN_GROUP_SPEC, version);
        flex.write_string(w, &self.group_id);
        w.i32(self.session_timeout_ms);
        if version >= 1 {
            w.i32(self.rebalance_timeout_ms);
        }
        flex.write_string(w, &self.member_id);
        if version >= 5 {
            flex.write_nullable_string(w, self.group_instance_id.as_deref());
        }
        flex.write_string(w, &self.protocol_type);
        flex.write_structs(w, &self.protocols, |w, p| {
            flex.write_string(w, &p.name);
            flex.write_bytes(w, &p.metadata);
        });
        if version >= 8 {
            flex.write_nullable_string(w, self.reason.as_deref());
        }
        flex.write_tags(w);
    }
}

impl JoinGroupResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&JOIN_GROUP_SPEC, version);
        if version >= 2 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error.0);
        w.i32(self.generation_id);
        if version >= 7 {
            flex.write_nullable_string(w, self.protocol_type.as_deref());
            flex.write_nullable_string(w, self.protocol_name.as_deref());
        } else {
            flex.write_string(w, self.protocol_name.as_deref().unwrap_or(""));
        }
        flex.write_string(w, &self.leader);
        if version >= 9 {
            w.bool(self.skip_assignment);
        }
        flex.write_string(w, &self.member_id);
        flex.write_structs(w, &self.members, |w, m| {
            flex.write_string(w, &m.member_id);
            if version >= 5 {
                flex.write_nullable_string(w, m.group_instance_id.as_deref());
            }
            flex.write_bytes(w, &m.metadata);
        });
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&JOIN_GROUP_SPEC, version);
        let throttle_time_ms = since(version, 2, 0, || r.i32("throttle time"))?;
        let error = ErrorCode(r.i16("error code")?);
        let generation_id = r.i32("generation id")?;
        let (protocol_type, protocol_name) = if version >= 7 {
            (
                flex.read_nullable_string(r, "protocol type")?,
                flex.read_nullable_string(r, "protocol name")?,
            )
        } else {
            (None, Some(flex.read_string(r, "protocol name")?))
        };
        let leader = flex.read_string(r, "leader")?;
        let skip_assignment = since(version, 9, false, || r.bool("skip assignment"))?;
        let member_id = flex.read_string(r, "member id")?;
        let members = flex.read_structs(r, "members", 2, |r| {
            Ok(JoinGroupMember {
                member_id: flex.read_string(r, "member id")?,
                group_instance_id: since(version, 5, None, || {
                    flex.read_nullable_string(r, "group instance id")
                })?,
                metadata: flex.read_bytes(r, "metadata")?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            error,
            generation_id,
            protocol_type,
            protocol_name,
            leader,
            skip_assignment,
            member_id,
            members,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroupAssignment {
    pub member_id: String,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+.
    pub group_instance_id: Option<String>,
    /// v5+.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<SyncGroupAssignment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroupResponse {
    /// v1+.
    pub throttle_time_ms: i32,
    pub error: ErrorCode,
    /// v5+.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncGroupRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&SYNC_GROUP_SPEC, version);
        let group_id = flex.read_string(r, "group id")?;
        let generation_id = r.i32("generation id")?;
        let member_id = flex.read_string(r, "member id")?;
        let group_instance_id = since(version, 3, None, || {
            flex.read_nullable_string(r, "group instance id")
        })?;
        let (protocol_type, protocol_name) = if version >= 5 {
            (
                flex.read_nullable_string(r, "protocol type")?,
                flex.read_nullable_string(r, "protocol name")?,
            )
        } else {
            (None, None)
        };
        let assignments = flex.read_structs(r, "assignments", 2, |r| {
            Ok(SyncGroupAssignment {
                member_id: flex.read_string(r, "member id")?,
                assignment: flex.read_bytes(r, "assignment")?,
            })
        })?;
        flex.read_end(r)?;
        Ok(Self {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&SYNC_GROUP_SPEC, version);
        flex.write_string(w, &self.group_id);
        w.i32(self.generation_id);
        flex.write_string(w, &self.member_id);
        if version >= 3 {
            flex.write_nullable_string(w, self.group_instance_id.as_deref());
        }
        if version >= 5 {
            flex.write_nullable_string(w, self.protocol_type.as_deref());
            flex.write_nullable_string(w, self.protocol_name.as_deref());
        }
        flex.write_structs(w, &self.assignments, |w, a| {
            flex.write_string(w, &a.member_id);
            flex.write_bytes(w, &a.assignment);
        });
        flex.write_tags(w);
    }
}

impl SyncGroupResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&SYNC_GROUP_SPEC, version);
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error.0);
        if version >= 5 {
            flex.write_nullable_string(w, self.protocol_type.as_deref());
            flex.write_nullable_string(w, self.protocol_name.as_deref());
        }
        flex.write_bytes(w, &self.assignment);
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&SYNC_GROUP_SPEC, version);
        let throttle_time_ms = since(version, 1, 0, || r.i32("throttle time"))?;
        let error = ErrorCode(r.i16("error code")?);
        let (protocol_type, protocol_name) = if version >= 5 {
            (
                flex.read_nullable_string(r, "protocol type")?,
                flex.read_nullable_string(r, "protocol name")?,
            )
        } else {
            (None, None)
        };
        let assignment = flex.read_bytes(r, "assignment")?;
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            error,
            protocol_type,
            protocol_name,
            assignment,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+.
    pub group_instance_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// v1+.
    pub throttle_time_ms: i32,
    pub error: ErrorCode,
}

impl HeartbeatRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&HEARTBEAT_SPEC, version);
        let request = Self {
            group_id: flex.read_string(r, "group id")?,
            generation_id: r.i32("generation id")?,
            member_id: flex.read_string(r, "member id")?,
            group_instance_id: since(version, 3, None, || {
                flex.read_nullable_string(r, "group instance id")
            })?,
        };
        flex.read_end(r)?;
        Ok(request)
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&HEARTBEAT_SPEC, version);
        flex.write_string(w, &self.group_id);
        w.i32(self.generation_id);
        flex.write_string(w, &self.member_id);
        if version >= 3 {
            flex.write_nullable_string(w, self.group_instance_id.as_deref());
        }
        flex.write_tags(w);
    }
}

impl HeartbeatResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&HEARTBEAT_SPEC, version);
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error.0);
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&HEARTBEAT_SPEC, version);
        let response = Self {
            throttle_time_ms: since(version, 1, 0, || r.i32("throttle time"))?,
            error: ErrorCode(r.i16("error code")?),
        };
        flex.read_end(r)?;
        Ok(response)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+.
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    /// v0-v2: one member, its id only; v3+: the batch.
    pub members: Vec<LeavingMember>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error: ErrorCode,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    /// v1+.
    pub throttle_time_ms: i32,
    pub error: ErrorCode,
    /// v3+.
    pub members: Vec<LeftMember>,
}

impl LeaveGroupRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&LEAVE_GROUP_SPEC, version);
        let group_id = flex.read_string(r, "group id")?;
        let members = if version <= 2 {
            vec![LeavingMember {
                member_id: flex.read_string(r, "member id")?,
                group_instance_id: None,
                reason: None,
            }]
        } else {
            flex.read_structs(r, "members", 2, |r| {
                Ok(LeavingMember {
                    member_id: flex.read_string(r, "member id")?,
                    group_instance_id: flex.read_nullable_string(r, "group instance id")?,
                    reason: since(version, 5, None, || flex.read_nullable_string(r, "reason"))?,
                })
            })?
        };
        flex.read_end(r)?;
        Ok(Self { group_id, members })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&LEAVE_GROUP_SPEC, version);
        flex.write_string(w, &self.group_id);
        if version <= 2 {
            assert_eq!(self.members.len(), 1, "v0-v2 name one member");
            flex.write_string(w, &self.members[0].member_id);
        } else {
            flex.write_structs(w, &self.members, |w, m| {
                flex.write_string(w, &m.member_id);
                flex.write_nullable_string(w, m.group_instance_id.as_deref());
                if version >= 5 {
                    flex.write_nullable_string(w, m.reason.as_deref());
                }
            });
        }
        flex.write_tags(w);
    }
}

impl LeaveGroupResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&LEAVE_GROUP_SPEC, version);
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        w.i16(self.error.0);
        if version >= 3 {
            flex.write_structs(w, &self.members, |w, m| {
                flex.write_string(w, &m.member_id);
                flex.write_nullable_string(w, m.group_instance_id.as_deref());
                w.i16(m.error.0);
            });
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&LEAVE_GROUP_SPEC, version);
        let throttle_time_ms = since(version, 1, 0, || r.i32("throttle time"))?;
        let error = ErrorCode(r.i16("error code")?);
        let members = if version >= 3 {
            flex.read_structs(r, "members", 4, |r| {
                Ok(LeftMember {
                    member_id: flex.read_string(r, "member id")?,
                    group_instance_id: flex.read_nullable_string(r, "group instance id")?,
                    error: ErrorCode(r.i16("error code")?),
                })
            })?
        } else {
            Vec::new()
        };
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            error,
            members,
        })
    }
}
