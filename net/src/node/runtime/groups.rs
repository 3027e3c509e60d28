//! The consumer-group APIs on the node (docs/protocol.md, "Consumer groups"): FindCoordinator
//! names the Raft leader; JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetCommit are
//! checked here (ACLs on the GROUP, the one topic) and decided by the replica's coordinator
//! (`engine::groups`, stepped as `Input::Group`), each request's connection kept until the
//! replica answers it; OffsetFetch reads the replica's committed offsets.

use std::collections::BTreeMap;

use super::metadata::listed_leader;
use super::*;
use crate::security::acl::{Operation, Resource, ResourceType};
use crate::security::authorizer::{denied_error, Authorization};
use crate::wire::kafka::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest,
    HeartbeatResponse, JoinGroupMember, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, LeftMember, OffsetCommitPartitionResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchGroupResponse, OffsetFetchPartition, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, Topic, FIND_COORDINATOR, HEARTBEAT,
    JOIN_GROUP, KEY_TYPE_GROUP, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH, SYNC_GROUP,
};
use crate::wire::kafka::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    DescribedGroup, DescribedMember, ListGroupsRequest, ListGroupsResponse, ListedGroup,
    OffsetDeleteRequest, OffsetDeleteResponse, DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS,
    OFFSET_DELETE,
};
use engine::groups::{
    GroupAnswer, GroupLimits, GroupReply, GroupRequest, Groups, JoinAnswer, JoinGroup, Leaving,
    MemberRef, PartitionOffset, Protocol, SyncGroup,
};
use engine::replica::Input as ReplicaInput;

/// What a held request is, to write its answer.
enum Held {
    Join,
    Sync,
    Heartbeat,
    Leave,
    /// The response's topics: each partition's own error (refused here), or None for those
    /// the replica's answer covers.
    Commit(Vec<Topic<(i32, Option<ErrorCode>)>>),
    /// The same shape for OffsetDelete.
    DeleteOffsets(Vec<Topic<(i32, Option<ErrorCode>)>>),
    /// One group of the DeleteGroups `parent` (index `index` of its results).
    DeleteOne {
        parent: u64,
        index: usize,
    },
}

/// A DeleteGroups whose groups are being deleted one record each: the results so far and how
/// many are still to come.
struct Deleting {
    conn: ConnId,
    seq: u64,
    header: RequestHeader,
    spec: &'static ApiSpec,
    results: Vec<(String, Option<ErrorCode>)>,
    left: usize,
}

struct WaitingGroup {
    conn: ConnId,
    seq: u64,
    header: RequestHeader,
    spec: &'static ApiSpec,
    held: Held,
}

/// The group requests the replica has not answered yet, by request id (each is answered
/// exactly once: by the coordinator, by its timeouts, or NOT_COORDINATOR when this node stops
/// leading).
#[derive(Default)]
pub(super) struct GroupRequests {
    waiting: BTreeMap<u64, WaitingGroup>,
    deleting: BTreeMap<u64, Deleting>,
    next_request: u64,
}

/// The coordinator of a node: its limits (docs/configuration.md, "Consumer groups") and a
/// random prefix for the member ids it hands out, so no two runs hand out the same id.
pub(super) fn new_groups(limits: GroupLimits, offsets: engine::groups::OffsetStore) -> Groups {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    let prefix: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Groups::new(limits, prefix).with_offsets(offsets)
}

/// An id a client sent empty: none.
fn id(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn ms(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Node {
    /// Whether `conn` may do the operation api `key` needs (its row's) on group `group_id`.
    fn access_group(&self, conn: ConnId, key: i16, group_id: &str) -> Result<(), ErrorCode> {
        let operation = match api_table::authorization(key) {
            Some(Authorization::Required(operation, ResourceType::Group)) => operation,
            // A group API whose row does not name a GROUP: refused (fail-closed).
            _ => return Err(ErrorCode::GROUP_AUTHORIZATION_FAILED),
        };
        self.access_to(
            conn,
            operation,
            &Resource::new(ResourceType::Group, group_id),
        )
    }

    /// Whether `conn` may do `operation` on `resource` (None: every principal may, without
    /// an authorizer).
    fn access_to(
        &self,
        conn: ConnId,
        operation: Operation,
        resource: &Resource,
    ) -> Result<(), ErrorCode> {
        let Some(session) = self.sessions.get(&conn) else {
            return Err(denied_error(resource.resource_type));
        };
        match &self.authorizer {
            None => Ok(()),
            Some(a)
                if a.authorize(&session.principal(), session.addr.ip(), operation, resource) =>
            {
                Ok(())
            }
            Some(_) => Err(denied_error(resource.resource_type)),
        }
    }

    fn hold(&mut self, asked: Asked, seq: u64, held: Held, ask: GroupRequest) {
        let request = self.hold_only(asked, seq, held);
        self.step(ReplicaInput::Group { request, ask });
    }

    /// Keeps the request's connection under a new request id, stepping nothing yet.
    fn hold_only(&mut self, asked: Asked, seq: u64, held: Held) -> u64 {
        let requests = &mut self.group_requests;
        let request = requests.next_request;
        requests.next_request += 1;
        requests.waiting.insert(
            request,
            WaitingGroup {
                conn: asked.conn,
                seq,
                header: asked.header.clone(),
                spec: asked.spec,
                held,
            },
        );
        request
    }

    pub(in crate::node) fn handle_find_coordinator(
        &mut self,
        asked: Asked,
        request: FindCoordinatorRequest,
    ) {
        let seq = self.reserve_response(asked.conn);
        let brokers = self.brokers_here(asked.conn);
        let leader = listed_leader(self.replica.core().client_leader_id(), &brokers)
            .and_then(|id| brokers.iter().find(|b| b.node_id == id));
        let coordinators = request
            .keys
            .iter()
            .map(|key| {
                let error = if request.key_type != KEY_TYPE_GROUP {
                    // Transactions are not served (docs/clients.md).
                    ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                } else if let Err(error) = self.access_group(asked.conn, FIND_COORDINATOR, key) {
                    error
                } else if leader.is_none() {
                    ErrorCode::COORDINATOR_NOT_AVAILABLE
                } else {
                    ErrorCode::NONE
                };
                match leader.filter(|_| error.is_none()) {
                    Some(b) => Coordinator {
                        key: key.clone(),
                        node_id: b.node_id,
                        host: b.host.clone(),
                        port: b.port,
                        error,
                        error_message: None,
                    },
                    None => Coordinator {
                        key: key.clone(),
                        node_id: -1,
                        host: String::new(),
                        port: -1,
                        error,
                        error_message: Some(error.description().to_string()),
                    },
                }
            })
            .collect();
        let response = FindCoordinatorResponse {
            throttle_time_ms: 0,
            coordinators,
        };
        self.answer(asked, seq, |w, version| response.encode(w, version));
    }

    pub(in crate::node) fn handle_join_group(&mut self, asked: Asked, request: JoinGroupRequest) {
        let seq = self.reserve_response(asked.conn);
        if let Err(error) = self.access_group(asked.conn, JOIN_GROUP, &request.group_id) {
            return self.answer_group(
                asked,
                seq,
                &Held::Join,
                GroupReply::Membership(GroupAnswer::Join(JoinAnswer::failed(error))),
            );
        }
        let client_host = self
            .sessions
            .get(&asked.conn)
            .map(|s| format!("/{}", s.addr.ip()))
            .unwrap_or_default();
        let join = JoinGroup {
            group_id: request.group_id,
            session_timeout_ms: ms(request.session_timeout_ms),
            rebalance_timeout_ms: match request.rebalance_timeout_ms {
                t if t > 0 => ms(t),
                _ => ms(request.session_timeout_ms),
            },
            member_id: id(&request.member_id),
            instance_id: request.group_instance_id.filter(|i| !i.is_empty()),
            protocol_type: request.protocol_type,
            protocols: request
                .protocols
                .into_iter()
                .map(|p| Protocol {
                    name: p.name,
                    metadata: p.metadata,
                })
                .collect(),
            client_id: asked
                .header
                .client_id
                .as_ref()
                .map(|c| c.as_str().to_string())
                .unwrap_or_default(),
            client_host,
            require_known_member_id: asked.header.api_version >= 4,
        };
        self.hold(asked, seq, Held::Join, GroupRequest::Join(join));
    }

    pub(in crate::node) fn handle_sync_group(&mut self, asked: Asked, request: SyncGroupRequest) {
        let seq = self.reserve_response(asked.conn);
        if let Err(error) = self.access_group(asked.conn, SYNC_GROUP, &request.group_id) {
            return self.answer_group(
                asked,
                seq,
                &Held::Sync,
                GroupReply::Membership(GroupAnswer::Sync(Err(error))),
            );
        }
        let sync = SyncGroup {
            group_id: request.group_id,
            generation: request.generation_id,
            member_id: request.member_id,
            instance_id: request.group_instance_id.filter(|i| !i.is_empty()),
            protocol_type: request.protocol_type,
            protocol_name: request.protocol_name,
            assignments: request
                .assignments
                .into_iter()
                .map(|a| (a.member_id, a.assignment))
                .collect(),
        };
        self.hold(asked, seq, Held::Sync, GroupRequest::Sync(sync));
    }

    pub(in crate::node) fn handle_heartbeat(&mut self, asked: Asked, request: HeartbeatRequest) {
        let seq = self.reserve_response(asked.conn);
        if let Err(error) = self.access_group(asked.conn, HEARTBEAT, &request.group_id) {
            return self.answer_group(
                asked,
                seq,
                &Held::Heartbeat,
                GroupReply::Membership(GroupAnswer::Heartbeat(error)),
            );
        }
        let who = MemberRef {
            group_id: request.group_id,
            generation: Some(request.generation_id),
            member_id: id(&request.member_id),
            instance_id: request.group_instance_id.filter(|i| !i.is_empty()),
        };
        self.hold(asked, seq, Held::Heartbeat, GroupRequest::Heartbeat(who));
    }

    pub(in crate::node) fn handle_leave_group(&mut self, asked: Asked, request: LeaveGroupRequest) {
        let seq = self.reserve_response(asked.conn);
        if let Err(error) = self.access_group(asked.conn, LEAVE_GROUP, &request.group_id) {
            return self.answer_group(
                asked,
                seq,
                &Held::Leave,
                GroupReply::Membership(GroupAnswer::Leave(Err(error))),
            );
        }
        let members = request
            .members
            .into_iter()
            .map(|m| Leaving {
                member_id: id(&m.member_id),
                instance_id: m.group_instance_id.filter(|i| !i.is_empty()),
            })
            .collect();
        let ask = GroupRequest::Leave {
            group_id: request.group_id,
            members,
        };
        self.hold(asked, seq, Held::Leave, ask);
    }

    pub(in crate::node) fn handle_offset_commit(
        &mut self,
        asked: Asked,
        request: OffsetCommitRequest,
    ) {
        let seq = self.reserve_response(asked.conn);
        let group_error = self
            .access_group(asked.conn, OFFSET_COMMIT, &request.group_id)
            .err();
        let topic_error = self
            .access_to(
                asked.conn,
                Operation::Read,
                &Resource::topic(METADATA_TOPIC),
            )
            .err();
        let mut offsets = Vec::new();
        let topics: Vec<Topic<(i32, Option<ErrorCode>)>> = request
            .topics
            .into_iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let ours =
                            topic.name == METADATA_TOPIC && p.partition == METADATA_PARTITION;
                        let refused = if let Some(error) = group_error {
                            Some(error)
                        } else if !ours {
                            Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                        } else if let Some(error) = topic_error {
                            Some(error)
                        } else if p.committed_offset < 0 {
                            Some(ErrorCode::OFFSET_OUT_OF_RANGE)
                        } else {
                            None
                        };
                        if refused.is_none() {
                            offsets.push(PartitionOffset {
                                topic: topic.name.clone(),
                                partition: p.partition,
                                offset: Some(p.committed_offset),
                                leader_epoch: (p.committed_leader_epoch >= 0)
                                    .then_some(p.committed_leader_epoch),
                                metadata: p.committed_metadata,
                            });
                        }
                        (p.partition, refused)
                    })
                    .collect();
                Topic {
                    name: topic.name,
                    partitions,
                }
            })
            .collect();
        let held = Held::Commit(topics);
        if offsets.is_empty() {
            // Nothing to write: every partition has its own answer.
            return self.answer_group(asked, seq, &held, GroupReply::Written(ErrorCode::NONE));
        }
        let who = MemberRef {
            group_id: request.group_id,
            generation: (request.generation_id >= 0).then_some(request.generation_id),
            member_id: id(&request.member_id),
            instance_id: request.group_instance_id.filter(|i| !i.is_empty()),
        };
        self.hold(asked, seq, held, GroupRequest::Commit { who, offsets });
    }

    pub(in crate::node) fn handle_offset_fetch(
        &mut self,
        asked: Asked,
        request: OffsetFetchRequest,
    ) {
        let seq = self.reserve_response(asked.conn);
        let status = self.replica.coordinator_status();
        let topic_allowed = self
            .access_to(
                asked.conn,
                Operation::Describe,
                &Resource::topic(METADATA_TOPIC),
            )
            .is_ok();
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let error = match self.access_group(asked.conn, OFFSET_FETCH, &g.group_id) {
                    Err(error) => Err(error),
                    Ok(()) => status,
                };
                let topics = match error {
                    Err(_) => Vec::new(),
                    Ok(()) => self.fetched_offsets(g.topics.as_deref(), &g.group_id, topic_allowed),
                };
                OffsetFetchGroupResponse {
                    group_id: g.group_id.clone(),
                    topics,
                    error: error.err().unwrap_or(ErrorCode::NONE),
                }
            })
            .collect();
        let response = OffsetFetchResponse {
            throttle_time_ms: 0,
            groups,
        };
        self.answer(asked, seq, |w, version| response.encode(w, version));
    }

    /// A group's committed offsets as OffsetFetch answers them: those asked for (-1 where none
    /// is committed), or every one (`asked` None).
    fn fetched_offsets(
        &self,
        asked: Option<&[Topic<i32>]>,
        group_id: &str,
        topic_allowed: bool,
    ) -> Vec<Topic<OffsetFetchPartition>> {
        let committed = self.replica.groups().offsets().group(group_id);
        let partition = |topic: &str, partition: i32| {
            let found = committed.and_then(|c| c.get(&(topic.to_string(), partition)));
            let refused = topic == METADATA_TOPIC && !topic_allowed;
            match found {
                Some(c) if !refused => OffsetFetchPartition {
                    partition,
                    committed_offset: c.offset,
                    committed_leader_epoch: c.leader_epoch.unwrap_or(-1),
                    metadata: Some(c.metadata.clone().unwrap_or_default()),
                    error: ErrorCode::NONE,
                },
                _ => OffsetFetchPartition {
                    partition,
                    committed_offset: -1,
                    committed_leader_epoch: -1,
                    metadata: Some(String::new()),
                    error: match refused {
                        true => ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                        false => ErrorCode::NONE,
                    },
                },
            }
        };
        match asked {
            Some(topics) => topics
                .iter()
                .map(|t| Topic {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|&p| partition(&t.name, p))
                        .collect(),
                })
                .collect(),
            None => {
                let mut topics: Vec<Topic<OffsetFetchPartition>> = Vec::new();
                for (topic, p) in committed.into_iter().flat_map(|c| c.keys()) {
                    if topic == METADATA_TOPIC && !topic_allowed {
                        continue;
                    }
                    match topics.last_mut() {
                        Some(t) if t.name == *topic => t.partitions.push(partition(topic, *p)),
                        _ => topics.push(Topic {
                            name: topic.clone(),
                            partitions: vec![partition(topic, *p)],
                        }),
                    }
                }
                topics
            }
        }
    }

    /// The replica answered group request `request`.
    pub(super) fn group_answered(&mut self, request: u64, reply: GroupReply) {
        let w = self
            .group_requests
            .waiting
            .remove(&request)
            .expect("the replica answers each group request once");
        if let Held::DeleteOne { parent, index } = w.held {
            let GroupReply::Written(error) = reply else {
                unreachable!("a group deletion answered with {reply:?}")
            };
            return self.group_deleted(parent, index, error);
        }
        let asked = Asked {
            conn: w.conn,
            header: &w.header,
            spec: w.spec,
        };
        self.answer_group(asked, w.seq, &w.held, reply);
    }

    fn answer_group(&mut self, asked: Asked, seq: u64, held: &Held, reply: GroupReply) {
        let version = asked.header.api_version;
        match (held, reply) {
            (Held::Join, GroupReply::Membership(GroupAnswer::Join(a))) => {
                let response = JoinGroupResponse {
                    throttle_time_ms: 0,
                    error: a.error,
                    generation_id: a.generation.unwrap_or(-1),
                    protocol_type: a.protocol_type,
                    protocol_name: match (a.protocol_name, version >= 7) {
                        (Some(name), _) => Some(name),
                        (None, true) => None,
                        (None, false) => Some(String::new()),
                    },
                    leader: a.leader.unwrap_or_default(),
                    skip_assignment: false,
                    member_id: a.member_id.unwrap_or_default(),
                    members: a
                        .members
                        .into_iter()
                        .map(|m| JoinGroupMember {
                            member_id: m.member_id,
                            group_instance_id: m.instance_id.filter(|_| version >= 5),
                            metadata: m.metadata,
                        })
                        .collect(),
                };
                self.answer(asked, seq, |w, v| response.encode(w, v));
            }
            (Held::Sync, GroupReply::Membership(GroupAnswer::Sync(a))) => {
                let response = match a {
                    Ok(a) => SyncGroupResponse {
                        throttle_time_ms: 0,
                        error: ErrorCode::NONE,
                        protocol_type: a.protocol_type.filter(|_| version >= 5),
                        protocol_name: a.protocol_name.filter(|_| version >= 5),
                        assignment: a.assignment,
                    },
                    Err(error) => SyncGroupResponse {
                        throttle_time_ms: 0,
                        error,
                        protocol_type: None,
                        protocol_name: None,
                        assignment: Bytes::new(),
                    },
                };
                self.answer(asked, seq, |w, v| response.encode(w, v));
            }
            (Held::Heartbeat, GroupReply::Membership(GroupAnswer::Heartbeat(error))) => {
                let response = HeartbeatResponse {
                    throttle_time_ms: 0,
                    error,
                };
                self.answer(asked, seq, |w, v| response.encode(w, v));
            }
            (Held::Leave, GroupReply::Membership(GroupAnswer::Leave(a))) => {
                let response = match a {
                    Err(error) => LeaveGroupResponse {
                        throttle_time_ms: 0,
                        error,
                        members: Vec::new(),
                    },
                    // v0-v2 name one member: its error is the answer's.
                    Ok(members) if version <= 2 => LeaveGroupResponse {
                        throttle_time_ms: 0,
                        error: members.first().map_or(ErrorCode::NONE, |m| m.1),
                        members: Vec::new(),
                    },
                    Ok(members) => LeaveGroupResponse {
                        throttle_time_ms: 0,
                        error: ErrorCode::NONE,
                        members: members
                            .into_iter()
                            .map(|(m, error)| LeftMember {
                                member_id: m.member_id.unwrap_or_default(),
                                group_instance_id: m.instance_id,
                                error,
                            })
                            .collect(),
                    },
                };
                self.answer(asked, seq, |w, v| response.encode(w, v));
            }
            (Held::DeleteOffsets(topics), GroupReply::Written(written)) => {
                // A group with members keeps its offsets: Kafka's per-partition answer.
                let (error, per_partition) = match written {
                    ErrorCode::GROUP_ID_NOT_FOUND => (written, ErrorCode::NONE),
                    ErrorCode::NON_EMPTY_GROUP => {
                        (ErrorCode::NONE, ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC)
                    }
                    other if other.is_none() => (ErrorCode::NONE, ErrorCode::NONE),
                    other => (other, other),
                };
                let response = OffsetDeleteResponse {
                    error,
                    throttle_time_ms: 0,
                    topics: topics
                        .iter()
                        .map(|t| Topic {
                            name: t.name.clone(),
                            partitions: t
                                .partitions
                                .iter()
                                .map(|&(p, own)| (p, own.unwrap_or(per_partition)))
                                .collect(),
                        })
                        .collect(),
                };
                self.answer(asked, seq, |w, v| response.encode(w, v));
            }
            (Held::Commit(topics), GroupReply::Written(written)) => {
                let response = OffsetCommitResponse {
                    throttle_time_ms: 0,
                    topics: topics
                        .iter()
                        .map(|t| Topic {
                            name: t.name.clone(),
                            partitions: t
                                .partitions
                                .iter()
                                .map(|&(partition, own)| OffsetCommitPartitionResponse {
                                    partition,
                                    error: own.unwrap_or(written),
                                })
                                .collect(),
                        })
                        .collect(),
                };
                self.answer(asked, seq, |w, v| response.encode(w, v));
            }
            (held, reply) => {
                let kind = match held {
                    Held::Join => "JoinGroup",
                    Held::Sync => "SyncGroup",
                    Held::Heartbeat => "Heartbeat",
                    Held::Leave => "LeaveGroup",
                    Held::Commit(_) => "OffsetCommit",
                    Held::DeleteOffsets(_) => "OffsetDelete",
                    Held::DeleteOne { .. } => "DeleteGroups",
                };
                unreachable!("a {kind} answered with {reply:?}")
            }
        }
    }
}

impl Node {
    pub(in crate::node) fn handle_list_groups(&mut self, asked: Asked, request: ListGroupsRequest) {
        let seq = self.reserve_response(asked.conn);
        let wants = |filter: &[String], value: &str| {
            filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value))
        };
        let (error, groups) = match self.replica.coordinator_status() {
            // Clients ask every broker and merge: a node that does not lead has none.
            Err(ErrorCode::NOT_COORDINATOR) => (ErrorCode::NONE, Vec::new()),
            Err(error) => (error, Vec::new()),
            Ok(()) => {
                let groups = self.replica.groups();
                let membership = groups.membership();
                let mut listed: Vec<ListedGroup> = membership
                    .list()
                    .map(|(id, state, protocol_type)| ListedGroup {
                        group_id: id.to_string(),
                        protocol_type: protocol_type.unwrap_or_default().to_string(),
                        group_state: state.name().to_string(),
                        group_type: "classic".into(),
                    })
                    .collect();
                for id in groups.offsets().groups() {
                    if !membership.has_members(id) {
                        listed.push(ListedGroup {
                            group_id: id.to_string(),
                            protocol_type: String::new(),
                            group_state: "Empty".into(),
                            group_type: "classic".into(),
                        });
                    }
                }
                listed.retain(|g| {
                    wants(&request.states_filter, &g.group_state)
                        && wants(&request.types_filter, &g.group_type)
                        && self
                            .access_group(asked.conn, LIST_GROUPS, &g.group_id)
                            .is_ok()
                });
                listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
                (ErrorCode::NONE, listed)
            }
        };
        let response = ListGroupsResponse {
            throttle_time_ms: 0,
            error,
            groups,
        };
        self.answer(asked, seq, |w, version| response.encode(w, version));
    }

    pub(in crate::node) fn handle_describe_groups(
        &mut self,
        asked: Asked,
        request: DescribeGroupsRequest,
    ) {
        let seq = self.reserve_response(asked.conn);
        let status = self.replica.coordinator_status();
        let version = asked.header.api_version;
        let groups = request
            .groups
            .iter()
            .map(|id| {
                let refused = self
                    .access_group(asked.conn, DESCRIBE_GROUPS, id)
                    .err()
                    .or(status.err());
                let empty = |error: ErrorCode, state: &str| DescribedGroup {
                    error,
                    error_message: None,
                    group_id: id.clone(),
                    group_state: state.to_string(),
                    protocol_type: String::new(),
                    protocol_data: String::new(),
                    members: Vec::new(),
                    authorized_operations: i32::MIN,
                };
                if let Some(error) = refused {
                    return empty(error, "");
                }
                let groups = self.replica.groups();
                match groups.membership().describe(id) {
                    Some(d) => DescribedGroup {
                        error: ErrorCode::NONE,
                        error_message: None,
                        group_id: id.clone(),
                        group_state: d.state.name().to_string(),
                        protocol_type: d.protocol_type.unwrap_or_default(),
                        protocol_data: d.protocol.unwrap_or_default(),
                        members: d
                            .members
                            .into_iter()
                            .map(|m| DescribedMember {
                                member_id: m.member_id,
                                group_instance_id: m.instance_id,
                                client_id: m.client_id,
                                client_host: m.client_host,
                                member_metadata: m.metadata,
                                member_assignment: m.assignment,
                            })
                            .collect(),
                        authorized_operations: i32::MIN,
                    },
                    None if groups.offsets().group(id).is_some() => empty(ErrorCode::NONE, "Empty"),
                    // Kafka's answer for a group it does not know: Dead, and from v6 an error.
                    None if version >= 6 => empty(ErrorCode::GROUP_ID_NOT_FOUND, "Dead"),
                    None => empty(ErrorCode::NONE, "Dead"),
                }
            })
            .collect();
        let response = DescribeGroupsResponse {
            throttle_time_ms: 0,
            groups,
        };
        self.answer(asked, seq, |w, version| response.encode(w, version));
    }

    pub(in crate::node) fn handle_delete_groups(
        &mut self,
        asked: Asked,
        request: DeleteGroupsRequest,
    ) {
        let seq = self.reserve_response(asked.conn);
        let requests = &mut self.group_requests;
        let parent = requests.next_request;
        requests.next_request += 1;
        let results: Vec<(String, Option<ErrorCode>)> = request
            .groups
            .iter()
            .map(|id| {
                (
                    id.clone(),
                    self.access_group(asked.conn, DELETE_GROUPS, id).err(),
                )
            })
            .collect();
        let asks: Vec<(usize, String)> = results
            .iter()
            .enumerate()
            .filter(|(_, (_, refused))| refused.is_none())
            .map(|(index, (id, _))| (index, id.clone()))
            .collect();
        self.group_requests.deleting.insert(
            parent,
            Deleting {
                conn: asked.conn,
                seq,
                header: asked.header.clone(),
                spec: asked.spec,
                results,
                left: asks.len(),
            },
        );
        if asks.is_empty() {
            return self.finish_deleting(parent);
        }
        for (index, group_id) in asks {
            let request = self.hold_only(asked, seq, Held::DeleteOne { parent, index });
            self.step(ReplicaInput::Group {
                request,
                ask: GroupRequest::Delete { group_id },
            });
        }
    }

    fn group_deleted(&mut self, parent: u64, index: usize, error: ErrorCode) {
        let deleting = self
            .group_requests
            .deleting
            .get_mut(&parent)
            .expect("a deletion belongs to its DeleteGroups");
        assert!(deleting.results[index].1.is_none(), "a group deleted twice");
        deleting.results[index].1 = Some(error);
        deleting.left -= 1;
        if deleting.left == 0 {
            self.finish_deleting(parent);
        }
    }

    fn finish_deleting(&mut self, parent: u64) {
        let d = self
            .group_requests
            .deleting
            .remove(&parent)
            .expect("a DeleteGroups waiting");
        let response = DeleteGroupsResponse {
            throttle_time_ms: 0,
            results: d
                .results
                .into_iter()
                .map(|(id, error)| (id, error.expect("every group answered")))
                .collect(),
        };
        let asked = Asked {
            conn: d.conn,
            header: &d.header,
            spec: d.spec,
        };
        self.answer(asked, d.seq, |w, version| response.encode(w, version));
    }

    pub(in crate::node) fn handle_offset_delete(
        &mut self,
        asked: Asked,
        request: OffsetDeleteRequest,
    ) {
        let seq = self.reserve_response(asked.conn);
        if let Err(error) = self.access_group(asked.conn, OFFSET_DELETE, &request.group_id) {
            let response = OffsetDeleteResponse {
                error,
                throttle_time_ms: 0,
                topics: Vec::new(),
            };
            return self.answer(asked, seq, |w, version| response.encode(w, version));
        }
        let mut partitions = Vec::new();
        let topics: Vec<Topic<(i32, Option<ErrorCode>)>> = request
            .topics
            .into_iter()
            .map(|t| {
                let ours = t.name == METADATA_TOPIC;
                let answered = t
                    .partitions
                    .iter()
                    .map(|&p| {
                        if ours && p == METADATA_PARTITION {
                            partitions.push((t.name.clone(), p));
                            (p, None)
                        } else {
                            (p, Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION))
                        }
                    })
                    .collect();
                Topic {
                    name: t.name,
                    partitions: answered,
                }
            })
            .collect();
        let ask = GroupRequest::DeleteOffsets {
            group_id: request.group_id,
            partitions,
        };
        self.hold(asked, seq, Held::DeleteOffsets(topics), ask);
    }
}
