//! FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch
//! against an independent Kafka codec (the `kafka-protocol` crate), in every version we speak
//! and both directions: our bytes equal Kafka's, Kafka's decode here to the same values, ours
//! decode there to the same values, nulls and empties included (docs/protocol.md, "Consumer
//! groups").

mod wire_support;

use bytes::Bytes;
use engine::raft::ErrorCode;
use kafka_protocol::messages::{self as kp, BrokerId, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use net::wire::kafka::*;
use net::wire::{WireReader, WireWriter};
use wire_support::{assert_same_as_kafka_in, assert_spec_matches, paired};

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn opt(s: &Option<String>) -> Option<StrBytes> {
    s.as_deref().map(text)
}

fn group(s: &str) -> GroupId {
    GroupId(text(s))
}

fn topic_name(s: &str) -> TopicName {
    TopicName(text(s))
}

#[test]
fn specs_are_kafkas() {
    assert_spec_matches::<kp::FindCoordinatorRequest, kp::FindCoordinatorResponse>(
        &FIND_COORDINATOR_SPEC,
        false,
    );
    assert_spec_matches::<kp::JoinGroupRequest, kp::JoinGroupResponse>(&JOIN_GROUP_SPEC, true);
    assert_spec_matches::<kp::SyncGroupRequest, kp::SyncGroupResponse>(&SYNC_GROUP_SPEC, true);
    assert_spec_matches::<kp::HeartbeatRequest, kp::HeartbeatResponse>(&HEARTBEAT_SPEC, true);
    assert_spec_matches::<kp::LeaveGroupRequest, kp::LeaveGroupResponse>(&LEAVE_GROUP_SPEC, true);
    assert_spec_matches::<kp::OffsetCommitRequest, kp::OffsetCommitResponse>(
        &OFFSET_COMMIT_SPEC,
        true,
    );
    assert_spec_matches::<kp::OffsetFetchRequest, kp::OffsetFetchResponse>(
        &OFFSET_FETCH_SPEC,
        true,
    );
}

#[test]
fn find_coordinator_matches_kafka() {
    assert_same_as_kafka_in(0..=4, |version| {
        let keys: Vec<Vec<String>> = match version {
            0..=3 => vec![vec!["group-1".into()], vec![String::new()]],
            _ => vec![vec!["a".into(), "b".into()], vec![]],
        };
        keys.into_iter()
            .map(|keys| {
                paired(
                    FindCoordinatorRequest {
                        keys,
                        key_type: if version >= 1 {
                            KEY_TYPE_TRANSACTION
                        } else {
                            KEY_TYPE_GROUP
                        },
                    },
                    |ours| {
                        let mut k = kp::FindCoordinatorRequest::default();
                        if version <= 3 {
                            k.key = text(&ours.keys[0]);
                        } else {
                            k.coordinator_keys = ours.keys.iter().map(|s| text(s)).collect();
                        }
                        k.key_type = ours.key_type;
                        k
                    },
                )
            })
            .collect()
    });
    assert_same_as_kafka_in(0..=4, |version| {
        let one = |key: &str, error: ErrorCode, message: Option<&str>| Coordinator {
            key: if version >= 4 {
                key.to_string()
            } else {
                String::new()
            },
            node_id: 2,
            host: "127.0.0.1".into(),
            port: 9092,
            error,
            error_message: if version >= 1 {
                message.map(str::to_string)
            } else {
                None
            },
        };
        let sets = match version {
            0..=3 => vec![
                vec![one("g", ErrorCode::NONE, None)],
                vec![one(
                    "g",
                    ErrorCode::COORDINATOR_NOT_AVAILABLE,
                    Some("no leader"),
                )],
            ],
            _ => vec![
                vec![
                    one("g", ErrorCode::NONE, None),
                    one("h", ErrorCode::NOT_COORDINATOR, Some("x")),
                ],
                vec![],
            ],
        };
        sets.into_iter()
            .map(|coordinators| {
                paired(
                    FindCoordinatorResponse {
                        throttle_time_ms: if version >= 1 { 7 } else { 0 },
                        coordinators,
                    },
                    |ours| {
                        let mut k = kp::FindCoordinatorResponse::default();
                        k.throttle_time_ms = ours.throttle_time_ms;
                        if version <= 3 {
                            let c = &ours.coordinators[0];
                            k.error_code = c.error.0;
                            if version >= 1 {
                                // v0 has no message: Kafka's absent value is its default.
                                k.error_message = opt(&c.error_message);
                            }
                            k.node_id = BrokerId(c.node_id);
                            k.host = text(&c.host);
                            k.port = c.port;
                        } else {
                            k.coordinators = ours
                                .coordinators
                                .iter()
                                .map(|c| {
                                    let mut kc =
                                        kp::find_coordinator_response::Coordinator::default();
                                    kc.key = text(&c.key);
                                    kc.node_id = BrokerId(c.node_id);
                                    kc.host = text(&c.host);
                                    kc.port = c.port;
                                    kc.error_code = c.error.0;
                                    kc.error_message = opt(&c.error_message);
                                    kc
                                })
                                .collect();
                        }
                        k
                    },
                )
            })
            .collect()
    });
}

#[test]
fn join_group_matches_kafka() {
    assert_same_as_kafka_in(0..=9, |version| {
        let request = |member: &str, instance: Option<&str>, protocols: usize| JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: if version >= 1 { 300_000 } else { 45_000 },
            member_id: member.into(),
            group_instance_id: if version >= 5 {
                instance.map(str::to_string)
            } else {
                None
            },
            protocol_type: "consumer".into(),
            protocols: (0..protocols)
                .map(|i| JoinGroupProtocol {
                    name: format!("p{i}"),
                    metadata: Bytes::from(vec![i as u8; i * 3]),
                })
                .collect(),
            reason: if version >= 8 {
                Some("because".into())
            } else {
                None
            },
        };
        [request("", None, 2), request("m-1", Some("i"), 0)]
            .into_iter()
            .map(|r| {
                paired(r, |ours| {
                    let mut k = kp::JoinGroupRequest::default();
                    k.group_id = group(&ours.group_id);
                    k.session_timeout_ms = ours.session_timeout_ms;
                    k.rebalance_timeout_ms = if version >= 1 {
                        ours.rebalance_timeout_ms
                    } else {
                        -1
                    };
                    k.member_id = text(&ours.member_id);
                    k.group_instance_id = opt(&ours.group_instance_id);
                    k.protocol_type = text(&ours.protocol_type);
                    k.protocols = ours
                        .protocols
                        .iter()
                        .map(|p| {
                            let mut kp_ =
                                kp::join_group_request::JoinGroupRequestProtocol::default();
                            kp_.name = text(&p.name);
                            kp_.metadata = p.metadata.clone();
                            kp_
                        })
                        .collect();
                    k.reason = opt(&ours.reason);
                    k
                })
            })
            .collect()
    });
    assert_same_as_kafka_in(0..=9, |version| {
        let response = |error: ErrorCode, members: usize| JoinGroupResponse {
            throttle_time_ms: if version >= 2 { 3 } else { 0 },
            error,
            generation_id: if error.is_none() { 4 } else { -1 },
            protocol_type: if version >= 7 && error.is_none() {
                Some("consumer".into())
            } else {
                None
            },
            protocol_name: match (version >= 7, error.is_none()) {
                (true, false) => None,
                (_, true) => Some("range".into()),
                (false, false) => Some(String::new()),
            },
            leader: if error.is_none() {
                "m-1".into()
            } else {
                String::new()
            },
            skip_assignment: false,
            member_id: "m-1".into(),
            members: (0..members)
                .map(|i| JoinGroupMember {
                    member_id: format!("m-{i}"),
                    group_instance_id: if version >= 5 && i == 1 {
                        Some("i".into())
                    } else {
                        None
                    },
                    metadata: Bytes::from(vec![7; i]),
                })
                .collect(),
        };
        [
            response(ErrorCode::NONE, 3),
            response(ErrorCode::MEMBER_ID_REQUIRED, 0),
        ]
        .into_iter()
        .map(|r| {
            paired(r, |ours| {
                let mut k = kp::JoinGroupResponse::default();
                k.throttle_time_ms = ours.throttle_time_ms;
                k.error_code = ours.error.0;
                k.generation_id = ours.generation_id;
                k.protocol_type = opt(&ours.protocol_type);
                k.protocol_name = opt(&ours.protocol_name);
                k.leader = text(&ours.leader);
                k.skip_assignment = ours.skip_assignment;
                k.member_id = text(&ours.member_id);
                k.members = ours
                    .members
                    .iter()
                    .map(|m| {
                        let mut km = kp::join_group_response::JoinGroupResponseMember::default();
                        km.member_id = text(&m.member_id);
                        km.group_instance_id = opt(&m.group_instance_id);
                        km.metadata = m.metadata.clone();
                        km
                    })
                    .collect();
                k
            })
        })
        .collect()
    });
}

#[test]
fn sync_group_and_heartbeat_match_kafka() {
    assert_same_as_kafka_in(0..=5, |version| {
        let request = |assignments: usize, instance: Option<&str>| SyncGroupRequest {
            group_id: "g".into(),
            generation_id: 3,
            member_id: "m-1".into(),
            group_instance_id: if version >= 3 {
                instance.map(str::to_string)
            } else {
                None
            },
            protocol_type: if version >= 5 {
                Some("consumer".into())
            } else {
                None
            },
            protocol_name: if version >= 5 && assignments > 0 {
                Some("range".into())
            } else {
                None
            },
            assignments: (0..assignments)
                .map(|i| SyncGroupAssignment {
                    member_id: format!("m-{i}"),
                    assignment: Bytes::from(vec![1; i * 2]),
                })
                .collect(),
        };
        [request(2, Some("i")), request(0, None)]
            .into_iter()
            .map(|r| {
                paired(r, |ours| {
                    let mut k = kp::SyncGroupRequest::default();
                    k.group_id = group(&ours.group_id);
                    k.generation_id = ours.generation_id;
                    k.member_id = text(&ours.member_id);
                    k.group_instance_id = opt(&ours.group_instance_id);
                    k.protocol_type = opt(&ours.protocol_type);
                    k.protocol_name = opt(&ours.protocol_name);
                    k.assignments = ours
                        .assignments
                        .iter()
                        .map(|a| {
                            let mut ka =
                                kp::sync_group_request::SyncGroupRequestAssignment::default();
                            ka.member_id = text(&a.member_id);
                            ka.assignment = a.assignment.clone();
                            ka
                        })
                        .collect();
                    k
                })
            })
            .collect()
    });
    assert_same_as_kafka_in(0..=5, |version| {
        let response = |error: ErrorCode, assignment: &'static [u8]| SyncGroupResponse {
            throttle_time_ms: if version >= 1 { 9 } else { 0 },
            error,
            protocol_type: if version >= 5 && error.is_none() {
                Some("consumer".into())
            } else {
                None
            },
            protocol_name: if version >= 5 && error.is_none() {
                Some("range".into())
            } else {
                None
            },
            assignment: Bytes::from_static(assignment),
        };
        [
            response(ErrorCode::NONE, b"abc"),
            response(ErrorCode::REBALANCE_IN_PROGRESS, b""),
        ]
        .into_iter()
        .map(|r| {
            paired(r, |ours| {
                let mut k = kp::SyncGroupResponse::default();
                k.throttle_time_ms = ours.throttle_time_ms;
                k.error_code = ours.error.0;
                k.protocol_type = opt(&ours.protocol_type);
                k.protocol_name = opt(&ours.protocol_name);
                k.assignment = ours.assignment.clone();
                k
            })
        })
        .collect()
    });
    assert_same_as_kafka_in(0..=4, |version| {
        [Some("i"), None]
            .into_iter()
            .map(|instance| {
                paired(
                    HeartbeatRequest {
                        group_id: "g".into(),
                        generation_id: 5,
                        member_id: "m".into(),
                        group_instance_id: if version >= 3 {
                            instance.map(str::to_string)
                        } else {
                            None
                        },
                    },
                    |ours| {
                        let mut k = kp::HeartbeatRequest::default();
                        k.group_id = group(&ours.group_id);
                        k.generation_id = ours.generation_id;
                        k.member_id = text(&ours.member_id);
                        k.group_instance_id = opt(&ours.group_instance_id);
                        k
                    },
                )
            })
            .collect()
    });
    assert_same_as_kafka_in(0..=4, |version| {
        vec![paired(
            HeartbeatResponse {
                throttle_time_ms: if version >= 1 { 1 } else { 0 },
                error: ErrorCode::ILLEGAL_GENERATION,
            },
            |ours| {
                let mut k = kp::HeartbeatResponse::default();
                k.throttle_time_ms = ours.throttle_time_ms;
                k.error_code = ours.error.0;
                k
            },
        )]
    });
}

#[test]
fn leave_group_matches_kafka() {
    assert_same_as_kafka_in(0..=5, |version| {
        let members = |n: usize| -> Vec<LeavingMember> {
            (0..n)
                .map(|i| LeavingMember {
                    member_id: format!("m-{i}"),
                    group_instance_id: if version >= 3 && i == 1 {
                        Some("i".into())
                    } else {
                        None
                    },
                    reason: if version >= 5 && i == 0 {
                        Some("bye".into())
                    } else {
                        None
                    },
                })
                .collect()
        };
        let sets = if version <= 2 {
            vec![members(1)]
        } else {
            vec![members(2), members(0)]
        };
        sets.into_iter()
            .map(|members| {
                paired(
                    LeaveGroupRequest {
                        group_id: "g".into(),
                        members,
                    },
                    |ours| {
                        let mut k = kp::LeaveGroupRequest::default();
                        k.group_id = group(&ours.group_id);
                        if version <= 2 {
                            k.member_id = text(&ours.members[0].member_id);
                        } else {
                            k.members = ours
                                .members
                                .iter()
                                .map(|m| {
                                    let mut km = kp::leave_group_request::MemberIdentity::default();
                                    km.member_id = text(&m.member_id);
                                    km.group_instance_id = opt(&m.group_instance_id);
                                    km.reason = opt(&m.reason);
                                    km
                                })
                                .collect();
                        }
                        k
                    },
                )
            })
            .collect()
    });
    assert_same_as_kafka_in(0..=5, |version| {
        let members = if version >= 3 {
            vec![LeftMember {
                member_id: "m".into(),
                group_instance_id: Some("i".into()),
                error: ErrorCode::FENCED_INSTANCE_ID,
            }]
        } else {
            vec![]
        };
        vec![paired(
            LeaveGroupResponse {
                throttle_time_ms: if version >= 1 { 2 } else { 0 },
                error: ErrorCode::NONE,
                members,
            },
            |ours| {
                let mut k = kp::LeaveGroupResponse::default();
                k.throttle_time_ms = ours.throttle_time_ms;
                k.error_code = ours.error.0;
                k.members = ours
                    .members
                    .iter()
                    .map(|m| {
                        let mut km = kp::leave_group_response::MemberResponse::default();
                        km.member_id = text(&m.member_id);
                        km.group_instance_id = opt(&m.group_instance_id);
                        km.error_code = m.error.0;
                        km
                    })
                    .collect();
                k
            },
        )]
    });
}

#[test]
fn offset_commit_matches_kafka() {
    assert_same_as_kafka_in(2..=9, |version| {
        let request =
            |generation: i32, topics: Vec<Topic<OffsetCommitPartition>>| OffsetCommitRequest {
                group_id: "g".into(),
                generation_id: generation,
                member_id: if generation >= 0 {
                    "m-1".into()
                } else {
                    String::new()
                },
                group_instance_id: if version >= 7 { Some("i".into()) } else { None },
                retention_time_ms: if version <= 4 { 86_400_000 } else { -1 },
                topics,
            };
        let partition = |p: i32, metadata: Option<&str>| OffsetCommitPartition {
            partition: p,
            committed_offset: 1_000 + i64::from(p),
            committed_leader_epoch: if version >= 6 { 3 } else { -1 },
            committed_metadata: metadata.map(str::to_string),
        };
        let topics = vec![Topic {
            name: "__cluster_metadata".into(),
            partitions: vec![partition(0, Some("")), partition(1, None)],
        }];
        [request(4, topics), request(-1, vec![])]
            .into_iter()
            .map(|r| {
                paired(r, |ours| {
                    let mut k = kp::OffsetCommitRequest::default();
                    k.group_id = group(&ours.group_id);
                    k.generation_id_or_member_epoch = ours.generation_id;
                    k.member_id = text(&ours.member_id);
                    k.group_instance_id = opt(&ours.group_instance_id);
                    k.retention_time_ms = ours.retention_time_ms;
                    k.topics = ours
                        .topics
                        .iter()
                        .map(|t| {
                            let mut kt = kp::offset_commit_request::OffsetCommitRequestTopic::default();
                            kt.name = topic_name(&t.name);
                            kt.partitions = t
                                .partitions
                                .iter()
                                .map(|p| {
                                    let mut kpp = kp::offset_commit_request::OffsetCommitRequestPartition::default();
                                    kpp.partition_index = p.partition;
                                    kpp.committed_offset = p.committed_offset;
                                    kpp.committed_leader_epoch = p.committed_leader_epoch;
                                    kpp.committed_metadata = opt(&p.committed_metadata);
                                    kpp
                                })
                                .collect();
                            kt
                        })
                        .collect();
                    k
                })
            })
            .collect()
    });
    assert_same_as_kafka_in(2..=9, |version| {
        vec![paired(
            OffsetCommitResponse {
                throttle_time_ms: if version >= 3 { 5 } else { 0 },
                topics: vec![Topic {
                    name: "t".into(),
                    partitions: vec![
                        OffsetCommitPartitionResponse {
                            partition: 0,
                            error: ErrorCode::NONE,
                        },
                        OffsetCommitPartitionResponse {
                            partition: 1,
                            error: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                        },
                    ],
                }],
            },
            |ours| {
                let mut k = kp::OffsetCommitResponse::default();
                k.throttle_time_ms = ours.throttle_time_ms;
                k.topics = ours
                    .topics
                    .iter()
                    .map(|t| {
                        let mut kt = kp::offset_commit_response::OffsetCommitResponseTopic::default();
                        kt.name = topic_name(&t.name);
                        kt.partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let mut kpp = kp::offset_commit_response::OffsetCommitResponsePartition::default();
                                kpp.partition_index = p.partition;
                                kpp.error_code = p.error.0;
                                kpp
                            })
                            .collect();
                        kt
                    })
                    .collect();
                k
            },
        )]
    });
}

fn fetch_topics(n: usize) -> Vec<Topic<i32>> {
    (0..n)
        .map(|i| Topic {
            name: format!("t{i}"),
            partitions: (0..i as i32 + 1).collect(),
        })
        .collect()
}

#[test]
fn offset_fetch_matches_kafka() {
    assert_same_as_kafka_in(1..=9, |version| {
        let g = |id: &str, topics: Option<Vec<Topic<i32>>>| OffsetFetchGroup {
            group_id: id.into(),
            member_id: if version >= 9 { Some("m".into()) } else { None },
            member_epoch: if version >= 9 { 2 } else { -1 },
            topics,
        };
        let sets = match version {
            1 => vec![
                vec![g("g", Some(fetch_topics(2)))],
                vec![g("g", Some(vec![]))],
            ],
            2..=7 => vec![vec![g("g", Some(fetch_topics(2)))], vec![g("g", None)]],
            _ => vec![vec![g("g", Some(fetch_topics(1))), g("h", None)], vec![]],
        };
        sets.into_iter()
            .map(|groups| {
                paired(
                    OffsetFetchRequest {
                        groups,
                        require_stable: version >= 7,
                    },
                    |ours| {
                        let mut k = kp::OffsetFetchRequest::default();
                        k.require_stable = ours.require_stable;
                        if version <= 7 {
                            let g = &ours.groups[0];
                            k.group_id = group(&g.group_id);
                            k.topics = g.topics.as_ref().map(|ts| {
                                ts.iter()
                                    .map(|t| {
                                        let mut kt = kp::offset_fetch_request::OffsetFetchRequestTopic::default();
                                        kt.name = topic_name(&t.name);
                                        kt.partition_indexes = t.partitions.clone();
                                        kt
                                    })
                                    .collect()
                            });
                        } else {
                            k.topics = Some(vec![]);
                            k.groups = ours
                                .groups
                                .iter()
                                .map(|g| {
                                    let mut kg = kp::offset_fetch_request::OffsetFetchRequestGroup::default();
                                    kg.group_id = group(&g.group_id);
                                    kg.member_id = opt(&g.member_id);
                                    kg.member_epoch = g.member_epoch;
                                    kg.topics = g.topics.as_ref().map(|ts| {
                                        ts.iter()
                                            .map(|t| {
                                                let mut kt = kp::offset_fetch_request::OffsetFetchRequestTopics::default();
                                                kt.name = topic_name(&t.name);
                                                kt.partition_indexes = t.partitions.clone();
                                                kt
                                            })
                                            .collect()
                                    });
                                    kg
                                })
                                .collect();
                        }
                        k
                    },
                )
            })
            .collect()
    });
    assert_same_as_kafka_in(1..=9, |version| {
        let partition = |p: i32, committed: bool| OffsetFetchPartition {
            partition: p,
            committed_offset: if committed { 77 } else { -1 },
            committed_leader_epoch: if version >= 5 && committed { 2 } else { -1 },
            metadata: if committed {
                Some("meta".into())
            } else {
                Some(String::new())
            },
            error: ErrorCode::NONE,
        };
        let g = |id: &str, error: ErrorCode| OffsetFetchGroupResponse {
            group_id: if version >= 8 {
                id.into()
            } else {
                String::new()
            },
            topics: vec![Topic {
                name: "__cluster_metadata".into(),
                partitions: vec![partition(0, true), partition(1, false)],
            }],
            error: if version >= 2 { error } else { ErrorCode::NONE },
        };
        let sets = match version {
            1..=7 => vec![
                vec![g("g", ErrorCode::NONE)],
                vec![g("g", ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)],
            ],
            _ => vec![vec![
                g("g", ErrorCode::NONE),
                g("h", ErrorCode::NOT_COORDINATOR),
            ]],
        };
        sets.into_iter()
            .map(|groups| {
                paired(
                    OffsetFetchResponse {
                        throttle_time_ms: if version >= 3 { 4 } else { 0 },
                        groups,
                    },
                    |ours| {
                        let mut k = kp::OffsetFetchResponse::default();
                        k.throttle_time_ms = ours.throttle_time_ms;
                        if version <= 7 {
                            let g = &ours.groups[0];
                            k.error_code = g.error.0;
                            k.topics = g
                                .topics
                                .iter()
                                .map(|t| {
                                    let mut kt = kp::offset_fetch_response::OffsetFetchResponseTopic::default();
                                    kt.name = topic_name(&t.name);
                                    kt.partitions = t
                                        .partitions
                                        .iter()
                                        .map(|p| {
                                            let mut kpp = kp::offset_fetch_response::OffsetFetchResponsePartition::default();
                                            kpp.partition_index = p.partition;
                                            kpp.committed_offset = p.committed_offset;
                                            kpp.committed_leader_epoch = p.committed_leader_epoch;
                                            kpp.metadata = opt(&p.metadata);
                                            kpp.error_code = p.error.0;
                                            kpp
                                        })
                                        .collect();
                                    kt
                                })
                                .collect();
                        } else {
                            k.groups = ours
                                .groups
                                .iter()
                                .map(|g| {
                                    let mut kg = kp::offset_fetch_response::OffsetFetchResponseGroup::default();
                                    kg.group_id = group(&g.group_id);
                                    kg.error_code = g.error.0;
                                    kg.topics = g
                                        .topics
                                        .iter()
                                        .map(|t| {
                                            let mut kt = kp::offset_fetch_response::OffsetFetchResponseTopics::default();
                                            kt.name = topic_name(&t.name);
                                            kt.partitions = t
                                                .partitions
                                                .iter()
                                                .map(|p| {
                                                    let mut kpp = kp::offset_fetch_response::OffsetFetchResponsePartitions::default();
                                                    kpp.partition_index = p.partition;
                                                    kpp.committed_offset = p.committed_offset;
                                                    kpp.committed_leader_epoch = p.committed_leader_epoch;
                                                    kpp.metadata = opt(&p.metadata);
                                                    kpp.error_code = p.error.0;
                                                    kpp
                                                })
                                                .collect();
                                            kt
                                        })
                                        .collect();
                                    kg
                                })
                                .collect();
                        }
                        k
                    },
                )
            })
            .collect()
    });
}

/// Hostile counts are refused before anything is allocated: a FindCoordinator v4 with more
/// keys than allowed, an OffsetFetch v8 with more groups.
#[test]
fn batched_counts_are_bounded() {
    let mut w = WireWriter::new();
    w.i8(0);
    w.compact_array_len(Some(MAX_COORDINATOR_KEYS + 1));
    for _ in 0..=MAX_COORDINATOR_KEYS {
        w.compact_string("k");
    }
    w.no_tagged_fields();
    let decoded = FindCoordinatorRequest::decode(&mut WireReader::new(w.into_inner().freeze()), 4);
    assert!(decoded.is_err());
    let mut w = WireWriter::new();
    w.compact_array_len(Some(MAX_FETCH_GROUPS + 1));
    for _ in 0..=MAX_FETCH_GROUPS {
        w.compact_string("g");
        w.compact_array_len(None);
        w.no_tagged_fields();
    }
    w.bool(false);
    w.no_tagged_fields();
    let decoded = OffsetFetchRequest::decode(&mut WireReader::new(w.into_inner().freeze()), 8);
    assert!(decoded.is_err());
}

#[test]
fn group_admin_specs_are_kafkas() {
    assert_spec_matches::<kp::ListGroupsRequest, kp::ListGroupsResponse>(&LIST_GROUPS_SPEC, true);
    assert_spec_matches::<kp::DescribeGroupsRequest, kp::DescribeGroupsResponse>(
        &DESCRIBE_GROUPS_SPEC,
        true,
    );
    assert_spec_matches::<kp::DeleteGroupsRequest, kp::DeleteGroupsResponse>(
        &DELETE_GROUPS_SPEC,
        true,
    );
    assert_spec_matches::<kp::OffsetDeleteRequest, kp::OffsetDeleteResponse>(
        &OFFSET_DELETE_SPEC,
        true,
    );
}

#[test]
fn list_groups_matches_kafka() {
    assert_same_as_kafka_in(0..=5, |version| {
        let request = ListGroupsRequest {
            states_filter: if version >= 4 {
                vec!["Stable".into(), "Empty".into()]
            } else {
                vec![]
            },
            types_filter: if version >= 5 {
                vec!["classic".into()]
            } else {
                vec![]
            },
        };
        vec![paired(request, |ours| {
            let mut k = kp::ListGroupsRequest::default();
            k.states_filter = ours.states_filter.iter().map(|s| text(s)).collect();
            k.types_filter = ours.types_filter.iter().map(|s| text(s)).collect();
            k
        })]
    });
    assert_same_as_kafka_in(0..=5, |version| {
        let response = ListGroupsResponse {
            throttle_time_ms: if version >= 1 { 3 } else { 0 },
            error: ErrorCode::NONE,
            groups: vec![ListedGroup {
                group_id: "g".into(),
                protocol_type: "consumer".into(),
                group_state: if version >= 4 {
                    "Stable".into()
                } else {
                    String::new()
                },
                group_type: if version >= 5 {
                    "classic".into()
                } else {
                    String::new()
                },
            }],
        };
        vec![paired(response, |ours| {
            let mut k = kp::ListGroupsResponse::default();
            k.throttle_time_ms = ours.throttle_time_ms;
            k.error_code = ours.error.0;
            k.groups = ours
                .groups
                .iter()
                .map(|g| {
                    let mut kg = kp::list_groups_response::ListedGroup::default();
                    kg.group_id = group(&g.group_id);
                    kg.protocol_type = text(&g.protocol_type);
                    kg.group_state = text(&g.group_state);
                    kg.group_type = text(&g.group_type);
                    kg
                })
                .collect();
            k
        })]
    });
}

#[test]
fn describe_groups_matches_kafka() {
    assert_same_as_kafka_in(0..=6, |version| {
        let request = DescribeGroupsRequest {
            groups: vec!["a".into(), "b".into()],
            include_authorized_operations: version >= 3,
        };
        vec![paired(request, |ours| {
            let mut k = kp::DescribeGroupsRequest::default();
            k.groups = ours.groups.iter().map(|g| group(g)).collect();
            k.include_authorized_operations = ours.include_authorized_operations;
            k
        })]
    });
    assert_same_as_kafka_in(0..=6, |version| {
        let response = DescribeGroupsResponse {
            throttle_time_ms: if version >= 1 { 2 } else { 0 },
            groups: vec![DescribedGroup {
                error: ErrorCode::NONE,
                error_message: None,
                group_id: "g".into(),
                group_state: "Stable".into(),
                protocol_type: "consumer".into(),
                protocol_data: "range".into(),
                members: vec![DescribedMember {
                    member_id: "m".into(),
                    group_instance_id: if version >= 4 { Some("i".into()) } else { None },
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    member_metadata: Bytes::from_static(b"meta"),
                    member_assignment: Bytes::from_static(b"as"),
                }],
                authorized_operations: if version >= 3 { 1 << 3 } else { i32::MIN },
            }],
        };
        vec![paired(response, |ours| {
            let mut k = kp::DescribeGroupsResponse::default();
            k.throttle_time_ms = ours.throttle_time_ms;
            k.groups = ours
                .groups
                .iter()
                .map(|g| {
                    let mut kg = kp::describe_groups_response::DescribedGroup::default();
                    kg.error_code = g.error.0;
                    kg.error_message = opt(&g.error_message);
                    kg.group_id = group(&g.group_id);
                    kg.group_state = text(&g.group_state);
                    kg.protocol_type = text(&g.protocol_type);
                    kg.protocol_data = text(&g.protocol_data);
                    kg.authorized_operations = g.authorized_operations;
                    kg.members = g
                        .members
                        .iter()
                        .map(|m| {
                            let mut km =
                                kp::describe_groups_response::DescribedGroupMember::default();
                            km.member_id = text(&m.member_id);
                            km.group_instance_id = opt(&m.group_instance_id);
                            km.client_id = text(&m.client_id);
                            km.client_host = text(&m.client_host);
                            km.member_metadata = m.member_metadata.clone();
                            km.member_assignment = m.member_assignment.clone();
                            km
                        })
                        .collect();
                    kg
                })
                .collect();
            k
        })]
    });
}

#[test]
fn delete_groups_and_offset_delete_match_kafka() {
    assert_same_as_kafka_in(0..=2, |_| {
        vec![paired(
            DeleteGroupsRequest {
                groups: vec!["a".into(), "b".into()],
            },
            |ours| {
                let mut k = kp::DeleteGroupsRequest::default();
                k.groups_names = ours.groups.iter().map(|g| group(g)).collect();
                k
            },
        )]
    });
    assert_same_as_kafka_in(0..=2, |_| {
        vec![paired(
            DeleteGroupsResponse {
                throttle_time_ms: 1,
                results: vec![
                    ("a".into(), ErrorCode::NONE),
                    ("b".into(), ErrorCode::NON_EMPTY_GROUP),
                ],
            },
            |ours| {
                let mut k = kp::DeleteGroupsResponse::default();
                k.throttle_time_ms = ours.throttle_time_ms;
                k.results = ours
                    .results
                    .iter()
                    .map(|(g, e)| {
                        let mut kr = kp::delete_groups_response::DeletableGroupResult::default();
                        kr.group_id = group(g);
                        kr.error_code = e.0;
                        kr
                    })
                    .collect();
                k
            },
        )]
    });
    assert_same_as_kafka_in(0..=0, |_| {
        vec![paired(
            OffsetDeleteRequest {
                group_id: "g".into(),
                topics: fetch_topics(2),
            },
            |ours| {
                let mut k = kp::OffsetDeleteRequest::default();
                k.group_id = group(&ours.group_id);
                k.topics = ours
                    .topics
                    .iter()
                    .map(|t| {
                        let mut kt = kp::offset_delete_request::OffsetDeleteRequestTopic::default();
                        kt.name = topic_name(&t.name);
                        kt.partitions = t
                            .partitions
                            .iter()
                            .map(|&p| {
                                let mut kpp = kp::offset_delete_request::OffsetDeleteRequestPartition::default();
                                kpp.partition_index = p;
                                kpp
                            })
                            .collect();
                        kt
                    })
                    .collect();
                k
            },
        )]
    });
    assert_same_as_kafka_in(0..=0, |_| {
        vec![paired(
            OffsetDeleteResponse {
                error: ErrorCode::NONE,
                throttle_time_ms: 0,
                topics: vec![Topic {
                    name: "t".into(),
                    partitions: vec![
                        (0, ErrorCode::NONE),
                        (1, ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC),
                    ],
                }],
            },
            |ours| {
                let mut k = kp::OffsetDeleteResponse::default();
                k.error_code = ours.error.0;
                k.throttle_time_ms = ours.throttle_time_ms;
                k.topics = ours
                    .topics
                    .iter()
                    .map(|t| {
                        let mut kt = kp::offset_delete_response::OffsetDeleteResponseTopic::default();
                        kt.name = topic_name(&t.name);
                        kt.partitions = t
                            .partitions
                            .iter()
                            .map(|&(p, e)| {
                                let mut kpp = kp::offset_delete_response::OffsetDeleteResponsePartition::default();
                                kpp.partition_index = p;
                                kpp.error_code = e.0;
                                kpp
                            })
                            .collect();
                        kt
                    })
                    .collect();
                k
            },
        )]
    });
}
