//! Fetch, ListOffsets, OffsetForLeaderEpoch, InitProducerId and Produce v10 against an
//! independent Kafka codec (the `kafka-protocol` crate), in every version we speak and both
//! directions: our bytes equal Kafka's, Kafka's bytes decode here to the same values, and ours
//! decode there to the same values, tagged fields and null-versus-empty included. Produce v0-2
//! (which that crate does not encode) is checked against the layout in Kafka's schema.

mod wire_support;

use bytes::Bytes;
use engine::raft::ErrorCode;
use engine::record::RecordBatchBuilder;
use kafka_protocol::messages::{self as kp, BrokerId, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use net::wire::kafka::*;
use net::wire::{WireError, WireReader, WireWriter};
use proptest::prelude::*;
use wire_support::{
    assert_each_version_same_as_kafka, assert_same_as_kafka, assert_same_as_kafka_in,
    assert_spec_matches, decode_theirs, joined, ours, paired, theirs, versions,
};

const TOPIC: &str = "__cluster_metadata";

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// One of Kafka's topic types: a name and its partitions.
trait KpTopic: Default {
    type Partition;
    fn of(name: TopicName, partitions: Vec<Self::Partition>) -> Self;
}

macro_rules! kp_topic_types {
    ($($topic:ty: $with_name:ident, $partition:ty;)*) => {$(
        impl KpTopic for $topic {
            type Partition = $partition;
            fn of(name: TopicName, partitions: Vec<$partition>) -> Self {
                <$topic>::default().$with_name(name).with_partitions(partitions)
            }
        }
    )*};
}

kp_topic_types! {
    kp::fetch_request::FetchTopic: with_topic, kp::fetch_request::FetchPartition;
    kp::fetch_request::ForgottenTopic: with_topic, i32;
    kp::fetch_response::FetchableTopicResponse: with_topic, kp::fetch_response::PartitionData;
    kp::list_offsets_request::ListOffsetsTopic: with_name,
        kp::list_offsets_request::ListOffsetsPartition;
    kp::list_offsets_response::ListOffsetsTopicResponse: with_name,
        kp::list_offsets_response::ListOffsetsPartitionResponse;
    kp::offset_for_leader_epoch_request::OffsetForLeaderTopic: with_topic,
        kp::offset_for_leader_epoch_request::OffsetForLeaderPartition;
    kp::offset_for_leader_epoch_response::OffsetForLeaderTopicResult: with_topic,
        kp::offset_for_leader_epoch_response::EpochEndOffset;
}

/// Kafka's topic array for ours, `partition` making Kafka's partition from ours.
fn kp_topics<P, T: KpTopic>(topics: &[Topic<P>], partition: impl Fn(&P) -> T::Partition) -> Vec<T> {
    topics
        .iter()
        .map(|t| T::of(name(&t.name), t.partitions.iter().map(&partition).collect()))
        .collect()
}

#[test]
fn specs_match_kafka() {
    assert_spec_matches::<kp::FetchRequest, kp::FetchResponse>(&FETCH_SPEC, false);
    assert_spec_matches::<kp::ListOffsetsRequest, kp::ListOffsetsResponse>(
        &LIST_OFFSETS_SPEC,
        false,
    );
    assert_spec_matches::<kp::OffsetForLeaderEpochRequest, kp::OffsetForLeaderEpochResponse>(
        &OFFSET_FOR_LEADER_EPOCH_SPEC,
        true,
    );
    assert_spec_matches::<kp::InitProducerIdRequest, kp::InitProducerIdResponse>(
        &INIT_PRODUCER_ID_SPEC,
        false,
    );
    assert_spec_matches::<kp::ProduceRequest, kp::ProduceResponse>(&PRODUCE_SPEC, false);
    let ranges = [
        (FETCH_SPEC, 4, 12),
        (LIST_OFFSETS_SPEC, 1, 7),
        (OFFSET_FOR_LEADER_EPOCH_SPEC, 2, 4),
        (INIT_PRODUCER_ID_SPEC, 0, 4),
        (PRODUCE_SPEC, 0, 10),
    ];
    for (spec, min, max) in ranges {
        assert_eq!(
            (spec.min_version, spec.max_version),
            (min, max),
            "{}",
            spec.name
        );
    }
}

// ---- Fetch ----

/// A request with every field set that `version` has, the others at their defaults.
fn fetch_request(version: i16, topics: usize, seed: i64) -> FetchRequest {
    let partition = |i: i32| FetchPartition {
        partition: i,
        current_leader_epoch: if version >= 9 { 5 + i } else { -1 },
        fetch_offset: seed + i64::from(i),
        last_fetched_epoch: if version >= 12 { 4 } else { -1 },
        log_start_offset: if version >= 5 { 0 } else { -1 },
        partition_max_bytes: 1 << 20,
    };
    FetchRequest {
        replica_id: -1,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 52_428_800,
        isolation_level: 1,
        session_id: 0,
        session_epoch: if version >= 7 { 0 } else { -1 },
        topics: (0..topics)
            .map(|t| FetchTopic {
                name: if t == 0 {
                    TOPIC.into()
                } else {
                    format!("t{t}")
                },
                partitions: (0..=t as i32).map(partition).collect(),
            })
            .collect(),
        forgotten_topics: if version >= 7 {
            vec![ForgottenTopic {
                name: "gone".into(),
                partitions: vec![3, 4],
            }]
        } else {
            Vec::new()
        },
        rack_id: if version >= 11 {
            "rack-a".into()
        } else {
            String::new()
        },
        cluster_id: (version >= 12).then(|| "Mk3OEYBSD34fcwNTJENDM2Qk".into()),
    }
}

fn kp_fetch_request(r: &FetchRequest) -> kp::FetchRequest {
    kp::FetchRequest::default()
        .with_replica_id(BrokerId(r.replica_id))
        .with_max_wait_ms(r.max_wait_ms)
        .with_min_bytes(r.min_bytes)
        .with_max_bytes(r.max_bytes)
        .with_isolation_level(r.isolation_level)
        .with_session_id(r.session_id)
        .with_session_epoch(r.session_epoch)
        .with_topics(kp_topics(&r.topics, |p| {
            kp::fetch_request::FetchPartition::default()
                .with_partition(p.partition)
                .with_current_leader_epoch(p.current_leader_epoch)
                .with_fetch_offset(p.fetch_offset)
                .with_last_fetched_epoch(p.last_fetched_epoch)
                .with_log_start_offset(p.log_start_offset)
                .with_partition_max_bytes(p.partition_max_bytes)
        }))
        .with_forgotten_topics_data(kp_topics(&r.forgotten_topics, |p| *p))
        .with_rack_id(text(&r.rack_id))
        .with_cluster_id(r.cluster_id.as_deref().map(text))
}

fn assert_fetch_request_matches(request: &FetchRequest, version: i16) {
    assert_same_as_kafka(request, &kp_fetch_request(request), version);
}

#[test]
fn fetch_requests_match_kafka_in_every_version() {
    for version in versions(&FETCH_SPEC) {
        for topics in [0, 1, 3] {
            assert_fetch_request_matches(&fetch_request(version, topics, 42), version);
        }
        // Without the cluster id tag, and with an empty rack.
        let mut bare = fetch_request(version, 1, 0);
        bare.cluster_id = None;
        bare.rack_id.clear();
        assert_fetch_request_matches(&bare, version);
    }
}

/// A real RecordBatch v2 of `n` records.
fn batch(base: i64, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(base, 3);
    for i in 0..n {
        b.append(
            1_700_000_000_000,
            None,
            Some(format!("value {base}+{i}").as_bytes()),
            &[],
        );
    }
    b.build().freeze()
}

fn fetch_partition(version: i16, index: i32, records: Option<Vec<Bytes>>) -> FetchPartitionData {
    let flexible = version >= 12;
    FetchPartitionData {
        index,
        error: ErrorCode::NONE,
        high_watermark: 100,
        last_stable_offset: 100,
        log_start_offset: if version >= 5 { 0 } else { -1 },
        aborted_transactions: Some(Vec::new()),
        preferred_read_replica: -1,
        records,
        diverging_epoch: flexible.then_some(EpochEndOffset {
            epoch: 2,
            end_offset: 57,
        }),
        current_leader: flexible.then_some(LeaderIdAndEpoch {
            leader_id: 1,
            leader_epoch: 3,
        }),
        snapshot_id: flexible.then_some(SnapshotId {
            end_offset: 40,
            epoch: 2,
        }),
    }
}

fn kp_fetch_response(r: &FetchResponse) -> kp::FetchResponse {
    let partition = |p: &FetchPartitionData| {
        let mut data = kp::fetch_response::PartitionData::default()
            .with_partition_index(p.index)
            .with_error_code(p.error.0)
            .with_high_watermark(p.high_watermark)
            .with_last_stable_offset(p.last_stable_offset)
            .with_log_start_offset(p.log_start_offset)
            .with_aborted_transactions(p.aborted_transactions.as_ref().map(|list| {
                list.iter()
                    .map(|t| {
                        kp::fetch_response::AbortedTransaction::default()
                            .with_producer_id(ProducerId(t.producer_id))
                            .with_first_offset(t.first_offset)
                    })
                    .collect()
            }))
            .with_preferred_read_replica(BrokerId(p.preferred_read_replica))
            .with_records(p.records_bytes());
        if let Some(d) = p.diverging_epoch {
            data = data.with_diverging_epoch(
                kp::fetch_response::EpochEndOffset::default()
                    .with_epoch(d.epoch)
                    .with_end_offset(d.end_offset),
            );
        }
        if let Some(l) = p.current_leader {
            data = data.with_current_leader(
                kp::fetch_response::LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(l.leader_id))
                    .with_leader_epoch(l.leader_epoch),
            );
        }
        if let Some(s) = p.snapshot_id {
            data = data.with_snapshot_id(
                kp::fetch_response::SnapshotId::default()
                    .with_end_offset(s.end_offset)
                    .with_epoch(s.epoch),
            );
        }
        data
    };
    kp::FetchResponse::default()
        .with_throttle_time_ms(r.throttle_time_ms)
        .with_error_code(r.error.0)
        .with_session_id(r.session_id)
        .with_responses(kp_topics(&r.topics, partition))
}

fn assert_fetch_response_matches(response: &FetchResponse, version: i16) {
    assert_same_as_kafka(response, &kp_fetch_response(response), version);
}

#[test]
fn fetch_responses_match_kafka_in_every_version() {
    let batches = vec![batch(0, 3), batch(3, 1), batch(4, 5)];
    for version in FETCH_SPEC.min_version..=FETCH_SPEC.max_version {
        let mut errored = fetch_partition(version, 1, None);
        errored.error = ErrorCode::FENCED_LEADER_EPOCH;
        errored.aborted_transactions = None;
        let mut aborted = fetch_partition(version, 2, Some(Vec::new()));
        aborted.aborted_transactions = Some(vec![AbortedTransaction {
            producer_id: 9,
            first_offset: 11,
        }]);
        if version >= 11 {
            aborted.preferred_read_replica = 2;
        }
        aborted.diverging_epoch = None;
        aborted.snapshot_id = None;
        let response = FetchResponse {
            throttle_time_ms: 5,
            error: ErrorCode::NONE,
            session_id: if version >= 7 { 77 } else { 0 },
            topics: vec![
                FetchableTopic {
                    name: TOPIC.into(),
                    partitions: vec![
                        fetch_partition(version, 0, Some(batches.clone())),
                        errored,
                        aborted,
                    ],
                },
                FetchableTopic {
                    name: "other".into(),
                    partitions: vec![FetchPartitionData::empty(
                        0,
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    )],
                },
            ],
        };
        assert_fetch_response_matches(&response, version);
        let empty = FetchResponse {
            throttle_time_ms: 0,
            error: if version >= 7 {
                ErrorCode(70) // FETCH_SESSION_ID_NOT_FOUND
            } else {
                ErrorCode::NONE
            },
            session_id: 0,
            topics: Vec::new(),
        };
        assert_fetch_response_matches(&empty, version);
    }
}

/// Several batches go out as the log's own buffers, and Kafka's record decoder reads every
/// record of them back from the joined chain.
#[test]
fn a_fetch_chain_of_several_batches_decodes_as_kafka_records() {
    let batches = vec![batch(10, 2), batch(12, 4), batch(16, 1)];
    for version in FETCH_SPEC.min_version..=FETCH_SPEC.max_version {
        let response = FetchResponse {
            throttle_time_ms: 0,
            error: ErrorCode::NONE,
            session_id: 0,
            topics: vec![FetchableTopic {
                name: TOPIC.into(),
                partitions: vec![fetch_partition(version, 0, Some(batches.clone()))],
            }],
        };
        let chain = response.encode_chain(WireWriter::new(), version);
        // header piece, three batches, trailer
        assert_eq!(chain.len(), batches.len() + 2, "v{version}");
        for (piece, batch) in chain[1..=batches.len()].iter().zip(&batches) {
            assert_eq!(piece.as_ptr(), batch.as_ptr(), "a batch was copied");
        }
        let back: kp::FetchResponse = decode_theirs(joined(&chain), version);
        let mut records = back.responses[0].partitions[0].records.clone().unwrap();
        let mut offsets = Vec::new();
        for _ in 0..batches.len() {
            let set = RecordBatchDecoder::decode(&mut records).unwrap();
            offsets.extend(set.records.iter().map(|r| r.offset));
        }
        assert!(records.is_empty());
        assert_eq!(offsets, (10..17).collect::<Vec<i64>>(), "v{version}");
    }
}

#[test]
fn fetch_request_bounds_refuse_what_kafka_would_encode() {
    let long = "x".repeat(MAX_TOPIC_NAME_BYTES + 1);
    for version in FETCH_SPEC.min_version..=FETCH_SPEC.max_version {
        let mut request = fetch_request(version, 1, 0);
        request.topics[0].name = long.clone();
        let mut r = WireReader::new(theirs(&kp_fetch_request(&request), version));
        assert!(matches!(
            FetchRequest::decode(&mut r, version),
            Err(WireError::TooLong {
                len: 250,
                limit: 249,
                ..
            })
        ));
        let mut many = fetch_request(version, 1, 0);
        many.topics = (0..=MAX_ENTRIES_PER_REQUEST)
            .map(|i| FetchTopic {
                name: format!("t{i}"),
                partitions: Vec::new(),
            })
            .collect();
        let mut r = WireReader::new(theirs(&kp_fetch_request(&many), version));
        assert!(matches!(
            FetchRequest::decode(&mut r, version),
            Err(WireError::TooMany { limit: 1000, .. })
        ));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn fetch_requests_round_trip_and_match_kafka(
        version in 4i16..=12,
        topics in 0usize..4,
        seed in any::<i64>(),
        max_wait in any::<i32>(),
        isolation in 0i8..=1,
        session in any::<(i32, i32)>(),
        rack in "[a-z0-9-]{0,12}",
    ) {
        let mut request = fetch_request(version, topics, seed);
        request.max_wait_ms = max_wait;
        request.isolation_level = isolation;
        if version >= 7 {
            (request.session_id, request.session_epoch) = session;
        }
        if version >= 11 {
            request.rack_id = rack;
        }
        assert_fetch_request_matches(&request, version);
    }

    #[test]
    fn fetch_responses_round_trip_and_match_kafka(
        version in 4i16..=12,
        hw in 0i64..i64::MAX,
        sizes in proptest::collection::vec(1usize..4, 0..4),
        null_records in any::<bool>(),
        null_aborted in any::<bool>(),
    ) {
        let batches: Vec<Bytes> = sizes
            .iter()
            .scan(0i64, |base, &n| {
                let b = batch(*base, n);
                *base += n as i64;
                Some(b)
            })
            .collect();
        let mut p = fetch_partition(version, 0, (!null_records).then_some(batches));
        p.high_watermark = hw;
        p.last_stable_offset = hw;
        if null_aborted {
            p.aborted_transactions = None;
        }
        let response = FetchResponse {
            throttle_time_ms: 0,
            error: ErrorCode::NONE,
            session_id: 0,
            topics: vec![FetchableTopic { name: TOPIC.into(), partitions: vec![p] }],
        };
        assert_fetch_response_matches(&response, version);
    }
}

// ---- ListOffsets ----

fn list_offsets_request(version: i16) -> ListOffsetsRequest {
    let epoch = |e| if version >= 4 { e } else { -1 };
    ListOffsetsRequest {
        replica_id: -1,
        isolation_level: if version >= 2 { 1 } else { 0 },
        topics: vec![
            ListOffsetsTopic {
                name: TOPIC.into(),
                partitions: vec![
                    ListOffsetsPartition {
                        index: 0,
                        current_leader_epoch: epoch(4),
                        timestamp: EARLIEST_TIMESTAMP,
                    },
                    ListOffsetsPartition {
                        index: 1,
                        current_leader_epoch: epoch(-1),
                        timestamp: 1_700_000_000_000,
                    },
                ],
            },
            ListOffsetsTopic {
                name: "empty".into(),
                partitions: Vec::new(),
            },
        ],
    }
}

fn list_offsets_response(version: i16) -> ListOffsetsResponse {
    let epoch = |e| if version >= 4 { e } else { -1 };
    ListOffsetsResponse {
        throttle_time_ms: if version >= 2 { 3 } else { 0 },
        topics: vec![ListOffsetsTopicResponse {
            name: TOPIC.into(),
            partitions: vec![
                ListOffsetsPartitionResponse {
                    index: 0,
                    error: ErrorCode::NONE,
                    timestamp: -1,
                    offset: 0,
                    leader_epoch: epoch(4),
                },
                ListOffsetsPartitionResponse {
                    index: 1,
                    error: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: epoch(-1),
                },
            ],
        }],
    }
}

fn kp_list_offsets_request(r: &ListOffsetsRequest) -> kp::ListOffsetsRequest {
    let partition = |p: &ListOffsetsPartition| {
        kp::list_offsets_request::ListOffsetsPartition::default()
            .with_partition_index(p.index)
            .with_current_leader_epoch(p.current_leader_epoch)
            .with_timestamp(p.timestamp)
    };
    kp::ListOffsetsRequest::default()
        .with_replica_id(BrokerId(r.replica_id))
        .with_isolation_level(r.isolation_level)
        .with_topics(kp_topics(&r.topics, partition))
}

fn kp_list_offsets_response(r: &ListOffsetsResponse) -> kp::ListOffsetsResponse {
    let partition = |p: &ListOffsetsPartitionResponse| {
        kp::list_offsets_response::ListOffsetsPartitionResponse::default()
            .with_partition_index(p.index)
            .with_error_code(p.error.0)
            .with_timestamp(p.timestamp)
            .with_offset(p.offset)
            .with_leader_epoch(p.leader_epoch)
    };
    kp::ListOffsetsResponse::default()
        .with_throttle_time_ms(r.throttle_time_ms)
        .with_topics(kp_topics(&r.topics, partition))
}

#[test]
fn list_offsets_matches_kafka_in_every_version() {
    let spec = LIST_OFFSETS_SPEC;
    assert_each_version_same_as_kafka(&spec, list_offsets_request, kp_list_offsets_request);
    assert_each_version_same_as_kafka(&spec, list_offsets_response, kp_list_offsets_response);
}

// ---- OffsetForLeaderEpoch ----

fn offset_for_leader_epoch_request(version: i16) -> OffsetForLeaderEpochRequest {
    OffsetForLeaderEpochRequest {
        replica_id: if version >= 3 {
            -1
        } else {
            CONSUMER_REPLICA_ID
        },
        topics: vec![OffsetForLeaderTopic {
            name: TOPIC.into(),
            partitions: vec![
                OffsetForLeaderPartition {
                    partition: 0,
                    current_leader_epoch: 5,
                    leader_epoch: 3,
                },
                OffsetForLeaderPartition {
                    partition: 1,
                    current_leader_epoch: -1,
                    leader_epoch: 0,
                },
            ],
        }],
    }
}

fn offset_for_leader_epoch_response() -> OffsetForLeaderEpochResponse {
    OffsetForLeaderEpochResponse {
        throttle_time_ms: 1,
        topics: vec![OffsetForLeaderTopicResult {
            name: TOPIC.into(),
            partitions: vec![
                EpochEndOffsetResponse {
                    error: ErrorCode::NONE,
                    partition: 0,
                    leader_epoch: 3,
                    end_offset: 120,
                },
                EpochEndOffsetResponse {
                    error: ErrorCode::FENCED_LEADER_EPOCH,
                    partition: 1,
                    leader_epoch: -1,
                    end_offset: -1,
                },
            ],
        }],
    }
}

fn kp_offset_for_leader_epoch_request(
    r: &OffsetForLeaderEpochRequest,
) -> kp::OffsetForLeaderEpochRequest {
    use kp::offset_for_leader_epoch_request as kpr;
    let partition = |p: &OffsetForLeaderPartition| {
        kpr::OffsetForLeaderPartition::default()
            .with_partition(p.partition)
            .with_current_leader_epoch(p.current_leader_epoch)
            .with_leader_epoch(p.leader_epoch)
    };
    kp::OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(r.replica_id))
        .with_topics(kp_topics(&r.topics, partition))
}

fn kp_offset_for_leader_epoch_response(
    r: &OffsetForLeaderEpochResponse,
) -> kp::OffsetForLeaderEpochResponse {
    use kp::offset_for_leader_epoch_response as kpr;
    let partition = |p: &EpochEndOffsetResponse| {
        kpr::EpochEndOffset::default()
            .with_error_code(p.error.0)
            .with_partition(p.partition)
            .with_leader_epoch(p.leader_epoch)
            .with_end_offset(p.end_offset)
    };
    kp::OffsetForLeaderEpochResponse::default()
        .with_throttle_time_ms(r.throttle_time_ms)
        .with_topics(kp_topics(&r.topics, partition))
}

#[test]
fn offset_for_leader_epoch_matches_kafka_in_every_version() {
    let spec = OFFSET_FOR_LEADER_EPOCH_SPEC;
    assert_each_version_same_as_kafka(
        &spec,
        offset_for_leader_epoch_request,
        kp_offset_for_leader_epoch_request,
    );
    assert_each_version_same_as_kafka(
        &spec,
        |_| offset_for_leader_epoch_response(),
        kp_offset_for_leader_epoch_response,
    );
}

// ---- InitProducerId ----

fn kp_init_producer_id_request(r: &InitProducerIdRequest) -> kp::InitProducerIdRequest {
    kp::InitProducerIdRequest::default()
        .with_transactional_id(
            r.transactional_id
                .as_deref()
                .map(|id| TransactionalId(text(id))),
        )
        .with_transaction_timeout_ms(r.transaction_timeout_ms)
        .with_producer_id(ProducerId(r.producer_id))
        .with_producer_epoch(r.producer_epoch)
}

fn kp_init_producer_id_response(r: &InitProducerIdResponse) -> kp::InitProducerIdResponse {
    kp::InitProducerIdResponse::default()
        .with_throttle_time_ms(r.throttle_time_ms)
        .with_error_code(r.error.0)
        .with_producer_id(ProducerId(r.producer_id))
        .with_producer_epoch(r.producer_epoch)
}

fn assert_init_producer_id_matches(request: &InitProducerIdRequest, version: i16) {
    assert_same_as_kafka(request, &kp_init_producer_id_request(request), version);
}

#[test]
fn init_producer_id_matches_kafka_in_every_version() {
    let spec = INIT_PRODUCER_ID_SPEC;
    assert_same_as_kafka_in(versions(&spec), |version| {
        let (producer_id, producer_epoch) = if version >= 3 { (1000, 2) } else { (-1, -1) };
        [None, Some(""), Some("txn-1")]
            .map(|transactional_id| {
                let request = InitProducerIdRequest {
                    transactional_id: transactional_id.map(str::to_string),
                    transaction_timeout_ms: 60_000,
                    producer_id,
                    producer_epoch,
                };
                paired(request, kp_init_producer_id_request)
            })
            .to_vec()
    });
    assert_same_as_kafka_in(versions(&spec), |_| {
        [
            (ErrorCode::NONE, 4096, 0),
            (ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1),
        ]
        .map(|(error, producer_id, producer_epoch)| {
            let response = InitProducerIdResponse {
                throttle_time_ms: 0,
                error,
                producer_id,
                producer_epoch,
            };
            paired(response, kp_init_producer_id_response)
        })
        .to_vec()
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn init_producer_id_requests_match_kafka(
        version in 0i16..=4,
        id in proptest::option::of("[a-zA-Z0-9._-]{0,40}"),
        timeout in any::<i32>(),
        producer in any::<(i64, i16)>(),
    ) {
        let (producer_id, producer_epoch) = if version >= 3 { producer } else { (-1, -1) };
        let request = InitProducerIdRequest {
            transactional_id: id,
            transaction_timeout_ms: timeout,
            producer_id,
            producer_epoch,
        };
        assert_init_producer_id_matches(&request, version);
    }
}

// ---- Produce v10 and v0-2 ----

#[test]
fn produce_v10_tagged_fields_match_kafka() {
    for version in 9..=10i16 {
        for with_tags in [false, true] {
            let leader = with_tags.then_some(LeaderIdAndEpoch {
                leader_id: 2,
                leader_epoch: 8,
            });
            let endpoints = if with_tags {
                vec![
                    NodeEndpoint {
                        node_id: 2,
                        host: "node-2.example".into(),
                        port: 9092,
                        rack: Some("r2".into()),
                    },
                    NodeEndpoint {
                        node_id: 3,
                        host: "10.0.0.3".into(),
                        port: 19092,
                        rack: None,
                    },
                ]
            } else {
                Vec::new()
            };
            let response = ProduceResponse {
                topics: vec![ProduceTopicResponse {
                    name: TOPIC.into(),
                    partitions: vec![ProducePartitionResponse {
                        index: 0,
                        error: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                        base_offset: -1,
                        log_append_time_ms: -1,
                        log_start_offset: -1,
                        error_message: Some("not the leader".into()),
                        current_leader: leader,
                    }],
                }],
                throttle_time_ms: 0,
                node_endpoints: endpoints.clone(),
            };
            let mut partition = kp::produce_response::PartitionProduceResponse::default()
                .with_index(0)
                .with_error_code(ErrorCode::NOT_LEADER_OR_FOLLOWER.0)
                .with_base_offset(-1)
                .with_error_message(Some(text("not the leader")));
            if let Some(l) = leader {
                partition = partition.with_current_leader(
                    kp::produce_response::LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(l.leader_id))
                        .with_leader_epoch(l.leader_epoch),
                );
            }
            let kp_response = kp::ProduceResponse::default()
                .with_responses(vec![kp::produce_response::TopicProduceResponse::default()
                    .with_name(name(TOPIC))
                    .with_partition_responses(vec![partition])])
                .with_node_endpoints(
                    endpoints
                        .iter()
                        .map(|n| {
                            kp::produce_response::NodeEndpoint::default()
                                .with_node_id(BrokerId(n.node_id))
                                .with_host(text(&n.host))
                                .with_port(n.port)
                                .with_rack(n.rack.as_deref().map(text))
                        })
                        .collect(),
                );
            if version == 9 {
                // v9 has neither field: Kafka's encoder refuses them, ours leaves them out.
                let mut expected = response.clone();
                expected.topics[0].partitions[0].current_leader = None;
                expected.node_endpoints.clear();
                let bytes = ours(|w| response.encode(w, version));
                let mut r = WireReader::new(bytes.clone());
                assert_eq!(ProduceResponse::decode(&mut r, version).unwrap(), expected);
                let _: kp::ProduceResponse = decode_theirs(bytes, version);
                continue;
            }
            assert_same_as_kafka(&response, &kp_response, version);
        }
    }
}

/// Appends the classic (int32-count, int16-length name) topic array of the Produce v0-2 test:
/// one topic, [`TOPIC`], with partitions 0 and 7, each its index and then what `partition_rest`
/// appends.
fn push_classic_topics(bytes: &mut Vec<u8>, mut partition_rest: impl FnMut(&mut Vec<u8>)) {
    bytes.extend_from_slice(&1i32.to_be_bytes());
    bytes.extend_from_slice(&(TOPIC.len() as i16).to_be_bytes());
    bytes.extend_from_slice(TOPIC.as_bytes());
    bytes.extend_from_slice(&2i32.to_be_bytes());
    for index in [0i32, 7] {
        bytes.extend_from_slice(&index.to_be_bytes());
        partition_rest(bytes);
    }
}

/// kafka-protocol starts at Produce v3, so v0-2 are checked against Kafka's schema written out
/// by hand: request Acks int16, TimeoutMs int32, [Name string, [Index int32, Records bytes]];
/// response [Name, [Index, ErrorCode int16, BaseOffset int64, LogAppendTimeMs int64 (v2+)]],
/// ThrottleTimeMs int32 (v1+).
#[test]
fn produce_v0_to_v2_follow_kafkas_schema() {
    let records = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x0emagic-1 set";
    let mut request = Vec::new();
    request.extend_from_slice(&(-1i16).to_be_bytes());
    request.extend_from_slice(&5000i32.to_be_bytes());
    push_classic_topics(&mut request, |partition| {
        partition.extend_from_slice(&(records.len() as i32).to_be_bytes());
        partition.extend_from_slice(records);
    });
    let request = Bytes::from(request);
    for version in 0..PRODUCE_MIN_ACCEPTED {
        let legacy =
            LegacyProduceRequest::decode(&mut WireReader::new(request.clone()), version).unwrap();
        assert_eq!(
            legacy,
            LegacyProduceRequest {
                acks: -1,
                timeout_ms: 5000,
                topics: vec![LegacyProduceTopic {
                    name: TOPIC.into(),
                    partitions: vec![0, 7],
                }],
            }
        );
        // Our encoder writes the same bytes for the same request (the client's v0-2 path).
        let ours_request = ProduceRequest {
            transactional_id: None,
            acks: -1,
            timeout_ms: 5000,
            topics: vec![ProduceTopic {
                name: TOPIC.into(),
                partitions: [0, 7]
                    .map(|index| ProducePartition {
                        index,
                        records: Some(Bytes::from_static(records)),
                    })
                    .to_vec(),
            }],
        };
        assert_eq!(ours(|w| ours_request.encode(w, version)), request);

        let mut expected = Vec::new();
        push_classic_topics(&mut expected, |partition| {
            partition.extend_from_slice(&35i16.to_be_bytes());
            partition.extend_from_slice(&(-1i64).to_be_bytes());
            if version >= 2 {
                partition.extend_from_slice(&(-1i64).to_be_bytes());
            }
        });
        if version >= 1 {
            expected.extend_from_slice(&0i32.to_be_bytes());
        }
        let refusal = legacy.refusal();
        let bytes = ours(|w| refusal.encode(w, version));
        assert_eq!(&bytes[..], &expected[..], "v{version}");
        let back = ProduceResponse::decode(&mut WireReader::new(bytes), version).unwrap();
        assert_eq!(back, refusal);
    }
}
