//! Our bytes against an independent Kafka codec (the `kafka-protocol` crate) wherever Kafka has
//! the same message: request headers, ApiVersions, Produce, DescribeQuorum.

mod wire_support;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    self as kp, ApiVersionsRequest as KpApiVersionsRequest,
    ApiVersionsResponse as KpApiVersionsResponse, ProduceRequest as KpProduceRequest,
    ProduceResponse as KpProduceResponse, RequestHeader as KpRequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use net::wire::kafka::{
    ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse, ProducePartition,
    ProducePartitionResponse, ProduceRequest, ProduceResponse, ProduceTopic, ProduceTopicResponse,
    API_VERSIONS_SPEC, PRODUCE_MIN_ACCEPTED, PRODUCE_SPEC,
};
use net::wire::{RequestHeader, WireReader, WireWriter};
use wire_support::{assert_same_as_kafka_in, joined, ours, theirs, versions};

#[test]
fn request_headers_match_kafka_in_v1_and_v2() {
    for (version, flexible) in [(1i16, false), (2, true)] {
        let header = RequestHeader {
            api_key: 0,
            api_version: 9,
            correlation_id: 42,
            client_id: Some("ringraft-bench".into()),
        };
        let kp_header = KpRequestHeader::default()
            .with_request_api_key(0)
            .with_request_api_version(9)
            .with_correlation_id(42)
            .with_client_id(Some(StrBytes::from_static_str("ringraft-bench")));
        assert_eq!(
            ours(|w| header.write(w, flexible)),
            theirs(&kp_header, version)
        );
        let mut r = WireReader::new(theirs(&kp_header, version));
        assert_eq!(RequestHeader::read(&mut r, flexible).unwrap(), header);
    }
}

#[test]
fn api_versions_match_kafka_in_every_version() {
    assert_same_as_kafka_in(versions(&API_VERSIONS_SPEC), |version| {
        // v3 added the client's software name and version.
        let named = version >= 3;
        let request = ApiVersionsRequest {
            client_software_name: named.then(|| "ringraft".into()),
            client_software_version: named.then(|| "0.1.0".into()),
        };
        let mut kp_request = KpApiVersionsRequest::default();
        if named {
            kp_request = kp_request
                .with_client_software_name(StrBytes::from_static_str("ringraft"))
                .with_client_software_version(StrBytes::from_static_str("0.1.0"));
        }
        vec![(request, kp_request)]
    });
    assert_same_as_kafka_in(versions(&API_VERSIONS_SPEC), |_| {
        let response = ApiVersionsResponse {
            error: engine::raft::ErrorCode::NONE,
            api_keys: vec![
                ApiVersionRange {
                    api_key: 0,
                    min_version: 3,
                    max_version: 9,
                },
                ApiVersionRange {
                    api_key: 18,
                    min_version: 0,
                    max_version: 4,
                },
            ],
            throttle_time_ms: 0,
        };
        let kp_response = KpApiVersionsResponse::default().with_api_keys(vec![
            kp::api_versions_response::ApiVersion::default()
                .with_api_key(0)
                .with_min_version(3)
                .with_max_version(9),
            kp::api_versions_response::ApiVersion::default()
                .with_api_key(18)
                .with_min_version(0)
                .with_max_version(4),
        ]);
        vec![(response, kp_response)]
    });
}

#[test]
fn produce_matches_kafka_in_every_supported_version() {
    let records = Bytes::from_static(b"opaque record batch bytes");
    let accepted = PRODUCE_MIN_ACCEPTED..=PRODUCE_SPEC.max_version;
    assert_same_as_kafka_in(accepted.clone(), |_| {
        let request = ProduceRequest {
            transactional_id: None,
            acks: -1,
            timeout_ms: 1500,
            topics: vec![ProduceTopic {
                name: "__cluster_metadata".into(),
                partitions: vec![ProducePartition {
                    index: 0,
                    records: Some(records.clone()),
                }],
            }],
        };
        let kp_request = KpProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1500)
            .with_topic_data(vec![kp::produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                .with_partition_data(vec![
                    kp::produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records.clone())),
                ])]);
        vec![(request, kp_request)]
    });
    assert_same_as_kafka_in(accepted, |version| {
        // LogStartOffset is v5+; absent, both sides read -1.
        let log_start_offset = if version >= 5 { 0 } else { -1 };
        let response = ProduceResponse {
            topics: vec![ProduceTopicResponse {
                name: "__cluster_metadata".into(),
                partitions: vec![ProducePartitionResponse {
                    index: 0,
                    error: engine::raft::ErrorCode::NONE,
                    base_offset: 1234,
                    log_append_time_ms: -1,
                    log_start_offset,
                    error_message: None,
                    current_leader: None,
                }],
            }],
            throttle_time_ms: 0,
            node_endpoints: Vec::new(),
        };
        let kp_response = KpProduceResponse::default().with_responses(vec![
            kp::produce_response::TopicProduceResponse::default()
                .with_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                .with_partition_responses(vec![
                    kp::produce_response::PartitionProduceResponse::default()
                        .with_index(0)
                        .with_base_offset(1234)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(log_start_offset),
                ]),
        ]);
        vec![(response, kp_response)]
    });
}

#[test]
fn describe_quorum_matches_kafkas_v0_layout() {
    use engine::raft::{DescribeQuorumRequest, ReplicaState, Request, Response};
    use net::wire::quorum::{decode_request, decode_response, encode_request, encode_response};

    let kp_request = kp::DescribeQuorumRequest::default().with_topics(vec![
        kp::describe_quorum_request::TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![
                kp::describe_quorum_request::PartitionData::default().with_partition_index(0)
            ]),
    ]);
    let ours_request =
        ours(|w| encode_request(&Request::DescribeQuorum(DescribeQuorumRequest {}), w));
    assert_eq!(ours_request, theirs(&kp_request, 0));
    let mut r = WireReader::new(theirs(&kp_request, 0));
    decode_request(net::wire::api::DESCRIBE_QUORUM, 0, &mut r).unwrap();

    // Kafka's decoder reads our response (our timestamps and target voters are tagged fields it
    // skips), and we read Kafka's.
    let response = Response::DescribeQuorum(engine::raft::DescribeQuorumResponse {
        error: engine::raft::ErrorCode::NONE,
        leader_id: 1,
        leader_epoch: 5,
        high_watermark: 99,
        current_voters: vec![ReplicaState {
            replica_id: 1,
            directory_id: engine::raft::DirectoryId::ZERO,
            log_end_offset: 100,
            last_fetch_timestamp: 7,
            last_caught_up_timestamp: 8,
        }],
        target_voters: Some(vec![]),
        observers: vec![],
    });
    let mut bytes = joined(&encode_response(&response, WireWriter::new()));
    let decoded = kp::DescribeQuorumResponse::decode(&mut bytes, 0).unwrap();
    let partition = &decoded.topics[0].partitions[0];
    assert_eq!(partition.leader_id.0, 1);
    assert_eq!(partition.high_watermark, 99);
    assert_eq!(partition.current_voters[0].log_end_offset, 100);

    let mut kafka_bytes = BytesMut::new();
    decoded.encode(&mut kafka_bytes, 0).unwrap();
    let mut r = WireReader::new(kafka_bytes.freeze());
    let Response::DescribeQuorum(back) = decode_response(55, &mut r).unwrap() else {
        panic!("not a DescribeQuorum response");
    };
    assert_eq!(back.high_watermark, 99);
    assert_eq!(back.current_voters[0].replica_id, 1);
}

/// A DescribeQuorum response built by Kafka's codec, with the partitions listed given as
/// (topic, partition, partition error, leader id).
fn kafka_describe_response(top_error: i16, partitions: &[(&'static str, i32, i16, i32)]) -> Bytes {
    use kp::describe_quorum_response::{PartitionData, TopicData};
    let topics = partitions
        .iter()
        .map(|&(topic, index, error, leader)| {
            TopicData::default()
                .with_topic_name(TopicName(StrBytes::from_static_str(topic)))
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(index)
                    .with_error_code(error)
                    .with_leader_id(kp::BrokerId(leader))
                    .with_leader_epoch(3)])
        })
        .collect();
    let response = kp::DescribeQuorumResponse::default()
        .with_error_code(top_error)
        .with_topics(topics);
    let mut bytes = BytesMut::new();
    response.encode(&mut bytes, 0).unwrap();
    bytes.freeze()
}

fn decode_describe(bytes: Bytes) -> engine::raft::DescribeQuorumResponse {
    use net::wire::quorum::decode_response;
    let mut r = WireReader::new(bytes);
    match decode_response(net::wire::api::DESCRIBE_QUORUM, &mut r).unwrap() {
        engine::raft::Response::DescribeQuorum(d) => d,
        other => panic!("not a DescribeQuorum response: {other:?}"),
    }
}

/// Of the partitions a DescribeQuorum response lists, only the metadata partition
/// (`__cluster_metadata`-0) is the answer: not another partition of that topic, not partition 0
/// of another topic, whichever comes last.
#[test]
fn describe_quorum_answer_is_the_metadata_partition_only() {
    let bytes = kafka_describe_response(
        0,
        &[
            ("__cluster_metadata", 0, 0, 1),
            ("__cluster_metadata", 1, 0, 8),
            ("other", 0, 0, 9),
        ],
    );
    assert_eq!(decode_describe(bytes).leader_id, 1);
}

/// A top-level error overrides the partition's; without one the partition's error stands.
#[test]
fn describe_quorum_top_level_error_wins_and_a_partition_error_stands_alone() {
    let not_leader = engine::raft::ErrorCode::NOT_LEADER_OR_FOLLOWER;
    let denied = engine::raft::ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
    let bytes = kafka_describe_response(denied.0, &[("__cluster_metadata", 0, 0, 1)]);
    assert_eq!(decode_describe(bytes).error, denied);
    let bytes = kafka_describe_response(0, &[("__cluster_metadata", 0, not_leader.0, 1)]);
    assert_eq!(decode_describe(bytes).error, not_leader);
}
