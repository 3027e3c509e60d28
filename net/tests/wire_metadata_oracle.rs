//! Metadata and DescribeCluster against the `kafka-protocol` crate, byte for byte, in both
//! directions and every version we serve: our encoding is theirs, and each side decodes the
//! other's bytes to the same message.

mod wire_support;

use engine::raft::ErrorCode;
use kafka_protocol::messages::{
    describe_cluster_response::DescribeClusterBroker as KpDcBroker,
    metadata_request::MetadataRequestTopic as KpRequestTopic,
    metadata_response::{
        MetadataResponseBroker as KpBroker, MetadataResponsePartition as KpPartition,
        MetadataResponseTopic as KpTopic,
    },
    BrokerId, DescribeClusterRequest as KpDcRequest, DescribeClusterResponse as KpDcResponse,
    MetadataRequest as KpMetadataRequest, MetadataResponse as KpMetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use net::wire::kafka::{
    ClusterBroker, DescribeClusterRequest, DescribeClusterResponse, MetadataPartition,
    MetadataRequest, MetadataRequestTopic, MetadataResponse, MetadataTopic,
    AUTHORIZED_OPERATIONS_OMITTED, DESCRIBE_CLUSTER_SPEC, ENDPOINT_TYPE_BROKERS, METADATA_SPEC,
};
use wire_support::{assert_same_as_kafka_in, assert_spec_matches, versions};

const TOPIC: &str = "__cluster_metadata";

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().map(|id| BrokerId(*id)).collect()
}

#[test]
fn specs_are_within_kafkas() {
    use kafka_protocol::messages::{DescribeClusterRequest, MetadataRequest, MetadataResponse};
    assert_spec_matches::<MetadataRequest, MetadataResponse>(&METADATA_SPEC, false);
    assert_spec_matches::<DescribeClusterRequest, kafka_protocol::messages::DescribeClusterResponse>(
        &DESCRIBE_CLUSTER_SPEC,
        false,
    );
}

/// Our request at `version` and Kafka's same request.
fn metadata_requests(version: i16, all_topics: bool) -> (MetadataRequest, KpMetadataRequest) {
    let ours = MetadataRequest {
        topics: (!all_topics).then(|| {
            vec![MetadataRequestTopic {
                topic_id: [0; 16],
                name: Some(TOPIC.into()),
            }]
        }),
        // Kafka refuses to encode a field the version lacks unless it has its default.
        allow_auto_topic_creation: version < 4,
        include_cluster_authorized_operations: (8..=10).contains(&version),
        include_topic_authorized_operations: version >= 8,
    };
    let topics = match (all_topics, version) {
        // v0 has no null array: an empty one means every topic.
        (true, 0) => Some(vec![]),
        (true, _) => None,
        (false, _) => Some(vec![
            KpRequestTopic::default().with_name(Some(TopicName(s(TOPIC))))
        ]),
    };
    let theirs = KpMetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(ours.allow_auto_topic_creation)
        .with_include_cluster_authorized_operations(ours.include_cluster_authorized_operations)
        .with_include_topic_authorized_operations(ours.include_topic_authorized_operations);
    (ours, theirs)
}

#[test]
fn metadata_requests_match_kafka_in_every_version() {
    assert_same_as_kafka_in(versions(&METADATA_SPEC), |version| {
        vec![
            metadata_requests(version, false),
            metadata_requests(version, true),
        ]
    });
}

/// A response as `version` carries it: ours and Kafka's.
fn metadata_responses(version: i16) -> (MetadataResponse, KpMetadataResponse) {
    let (v1, v2, v5, v7, v8) = (
        version >= 1,
        version >= 2,
        version >= 5,
        version >= 7,
        version >= 8,
    );
    let cluster_ops = if (8..=10).contains(&version) {
        0x180
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    };
    let topic_ops = if v8 {
        0x118
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    };
    let partition = |error: ErrorCode, leader: i32| MetadataPartition {
        error,
        partition_index: 0,
        leader_id: leader,
        leader_epoch: if v7 { 7 } else { -1 },
        replica_nodes: vec![1, 2, 3],
        isr_nodes: vec![1, 2],
        offline_replicas: if v5 { vec![3] } else { vec![] },
    };
    let ours = MetadataResponse {
        throttle_time_ms: 0,
        brokers: vec![
            ClusterBroker {
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 9092,
                rack: None,
            },
            ClusterBroker {
                node_id: 2,
                host: "broker-2.example".into(),
                port: 19092,
                rack: v1.then(|| "rack-b".into()),
            },
        ],
        cluster_id: v2.then(|| "cluster-1".into()),
        controller_id: if v1 { 1 } else { -1 },
        topics: vec![
            MetadataTopic {
                error: ErrorCode::NONE,
                name: Some(TOPIC.into()),
                topic_id: [0; 16],
                is_internal: false,
                partitions: vec![partition(ErrorCode::NONE, 1)],
                topic_authorized_operations: topic_ops,
            },
            MetadataTopic {
                error: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                name: Some("other".into()),
                topic_id: [0; 16],
                is_internal: false,
                partitions: vec![],
                topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            },
        ],
        cluster_authorized_operations: cluster_ops,
    };
    let kp_partition = KpPartition::default()
        .with_error_code(0)
        .with_partition_index(0)
        .with_leader_id(BrokerId(1))
        .with_leader_epoch(if v7 { 7 } else { -1 })
        .with_replica_nodes(ids(&[1, 2, 3]))
        .with_isr_nodes(ids(&[1, 2]))
        .with_offline_replicas(if v5 { ids(&[3]) } else { vec![] });
    let theirs = KpMetadataResponse::default()
        .with_brokers(vec![
            KpBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(s("127.0.0.1"))
                .with_port(9092),
            KpBroker::default()
                .with_node_id(BrokerId(2))
                .with_host(s("broker-2.example"))
                .with_port(19092)
                .with_rack(v1.then(|| s("rack-b"))),
        ])
        .with_cluster_id(v2.then(|| s("cluster-1")))
        .with_controller_id(BrokerId(if v1 { 1 } else { -1 }))
        .with_topics(vec![
            KpTopic::default()
                .with_name(Some(TopicName(s(TOPIC))))
                .with_partitions(vec![kp_partition])
                .with_topic_authorized_operations(topic_ops),
            KpTopic::default()
                .with_error_code(3)
                .with_name(Some(TopicName(s("other")))),
        ])
        .with_cluster_authorized_operations(cluster_ops);
    (ours, theirs)
}

#[test]
fn metadata_responses_match_kafka_in_every_version() {
    assert_same_as_kafka_in(versions(&METADATA_SPEC), |version| {
        vec![metadata_responses(version)]
    });
}

#[test]
fn describe_cluster_matches_kafka_in_every_version() {
    assert_same_as_kafka_in(versions(&DESCRIBE_CLUSTER_SPEC), |_| {
        let request = DescribeClusterRequest {
            include_cluster_authorized_operations: true,
            endpoint_type: ENDPOINT_TYPE_BROKERS,
        };
        let kp_request = KpDcRequest::default()
            .with_include_cluster_authorized_operations(true)
            .with_endpoint_type(ENDPOINT_TYPE_BROKERS);
        vec![(request, kp_request)]
    });
    assert_same_as_kafka_in(versions(&DESCRIBE_CLUSTER_SPEC), |_| {
        let response = DescribeClusterResponse {
            error: ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
            error_message: Some("no".into()),
            cluster_id: "cluster-1".into(),
            controller_id: 2,
            brokers: vec![ClusterBroker {
                node_id: 2,
                host: "127.0.0.1".into(),
                port: 9093,
                rack: None,
            }],
            cluster_authorized_operations: 0x100,
            ..DescribeClusterResponse::default()
        };
        let kp_response = KpDcResponse::default()
            .with_error_code(31)
            .with_error_message(Some(s("no")))
            .with_endpoint_type(ENDPOINT_TYPE_BROKERS)
            .with_cluster_id(s("cluster-1"))
            .with_controller_id(BrokerId(2))
            .with_brokers(vec![KpDcBroker::default()
                .with_broker_id(BrokerId(2))
                .with_host(s("127.0.0.1"))
                .with_port(9093)])
            .with_cluster_authorized_operations(0x100);
        vec![(response, kp_response)]
    });
}

/// The edges of topic lists: an empty request list (from v1 it asks for no topic, unlike null),
/// and from the versions that name topics by id a topic without a name, in a request (v10+) and
/// in a response (v12+), where the name is null rather than empty.
#[test]
fn metadata_empty_lists_and_unnamed_topics_match_kafka() {
    assert_same_as_kafka_in(1..=METADATA_SPEC.max_version, |version| {
        let (mut empty, kp_empty) = metadata_requests(version, false);
        empty.topics = Some(vec![]);
        let mut pairs = vec![(empty, kp_empty.with_topics(Some(vec![])))];
        if version >= 10 {
            let (mut unnamed, kp_unnamed) = metadata_requests(version, false);
            unnamed.topics = Some(vec![MetadataRequestTopic {
                topic_id: [0; 16],
                name: None,
            }]);
            let kp_unnamed =
                kp_unnamed.with_topics(Some(vec![KpRequestTopic::default().with_name(None)]));
            pairs.push((unnamed, kp_unnamed));
        }
        pairs
    });
    assert_same_as_kafka_in(12..=METADATA_SPEC.max_version, |version| {
        let (mut ours, theirs) = metadata_responses(version);
        ours.topics[1].name = None;
        ours.topics[1].error = ErrorCode(100); // UNKNOWN_TOPIC_ID
        let mut topics = theirs.topics.clone();
        topics[1] = KpTopic::default().with_error_code(100).with_name(None);
        vec![(ours, theirs.with_topics(topics))]
    });
}

/// A request for every topic (null; in v0, which has no null, an empty list) and one for no
/// topic (an empty list, v1+), with the flags clients send by default, in every version the
/// node advertises, byte for byte against Kafka's.
#[test]
fn null_and_empty_topic_lists_match_kafka_in_every_advertised_version() {
    assert_same_as_kafka_in(versions(&METADATA_SPEC), |version| {
        let request = |topics: Option<Vec<MetadataRequestTopic>>| MetadataRequest {
            topics,
            ..MetadataRequest::default()
        };
        let kafka = |topics: Option<Vec<KpRequestTopic>>| {
            KpMetadataRequest::default()
                .with_topics(topics)
                .with_allow_auto_topic_creation(true)
        };
        let mut pairs = vec![(
            request(None),
            kafka(if version == 0 { Some(vec![]) } else { None }),
        )];
        if version >= 1 {
            pairs.push((request(Some(vec![])), kafka(Some(vec![]))));
        }
        pairs
    });
}

/// librdkafka (confluent-kafka's `AdminClient.list_topics()`) asks for every topic in a
/// flexible version with the four zero bytes it reserves for an array's length where the
/// compact length belongs, then its flags and tags: `00 00 00 00 01 00 00` in v12, as captured
/// from confluent-kafka 2.16. Kafka reads a null array, flags and tags and ignores what is left;
/// so must we, to the same request (docs/clients.md, "What Metadata says").
#[test]
fn librdkafkas_request_for_every_topic_reads_as_kafka_reads_it() {
    use bytes::Bytes;
    use kafka_protocol::protocol::Decodable;
    use net::wire::WireReader;
    let body = Bytes::from_static(&[0, 0, 0, 0, 1, 0, 0]);
    for version in 9..=METADATA_SPEC.max_version {
        let theirs = KpMetadataRequest::decode(&mut body.clone(), version).unwrap();
        let ours = MetadataRequest::decode(&mut WireReader::new(body.clone()), version)
            .unwrap_or_else(|e| panic!("v{version}: {e}"));
        assert_eq!(ours.topics, None, "v{version}: every topic");
        assert_eq!(theirs.topics, None, "v{version}");
        assert_eq!(
            (
                ours.allow_auto_topic_creation,
                ours.include_cluster_authorized_operations,
                ours.include_topic_authorized_operations
            ),
            (
                theirs.allow_auto_topic_creation,
                theirs.include_cluster_authorized_operations,
                theirs.include_topic_authorized_operations
            ),
            "v{version}"
        );
    }
    // Anything short of a whole request is still refused.
    for version in versions(&METADATA_SPEC) {
        for cut in [0, 1] {
            let short = Bytes::copy_from_slice(&body[..cut]);
            if version >= 4 || cut == 0 {
                assert!(
                    MetadataRequest::decode(&mut WireReader::new(short), version).is_err(),
                    "v{version}, {cut} bytes"
                );
            }
        }
    }
}
