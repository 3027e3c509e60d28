//! Produce (key 0, v0-v10 advertised, flexible from v9): record batches appended to
//! `__cluster_metadata`-0. [`ProduceRequest`] decodes the accepted versions (v3-v10, from
//! [`PRODUCE_MIN_ACCEPTED`]); v0-v2 are advertised only so librdkafka keeps compression on, and
//! are refused with UNSUPPORTED_VERSION through `produce_legacy` (docs/protocol.md, "Kafka
//! client APIs"). The responses of every version are encoded here.

use bytes::Bytes;
use engine::raft::ErrorCode;

use super::fetch::{
    leader_tag_payload, read_leader_id_and_epoch, read_tag_payload, LeaderIdAndEpoch,
};
use super::flex::{since, Flex};
use super::limits::Budget;
use super::topics::{
    read_topics, visit_topics, write_flat_topics, write_topics, Topic, TopicEntry, TopicsLayout,
};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireStr, WireWriter};

pub const PRODUCE: i16 = 0;

pub const PRODUCE_SPEC: ApiSpec = ApiSpec::new(PRODUCE, "Produce", 0..=10, Some(9));

/// The first version whose requests are decoded and appended (RecordBatch v2 needs v3+).
pub const PRODUCE_MIN_ACCEPTED: i16 = 3;

/// v10 tagged fields: a partition's `CurrentLeader`, the response's `NodeEndpoints`.
const TAG_CURRENT_LEADER: u32 = 0;
const TAG_NODE_ENDPOINTS: u32 = 0;
const MIN_NODE_ENDPOINT_BYTES: usize = 11;

/// Index and a records length at least.
const REQUEST_TOPICS: TopicsLayout = TopicsLayout::new(5);
/// Index, ErrorCode, BaseOffset at least; a partition's tagged fields are its own (v10's
/// CurrentLeader).
const RESPONSE_TOPICS: TopicsLayout = TopicsLayout::new(14)
    .named("responses", "partition responses")
    .own_partition_tags();

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducePartition {
    pub index: i32,
    /// RecordBatch v2 bytes, a slice of the request frame.
    pub records: Option<Bytes>,
}

pub type ProduceTopic = Topic<ProducePartition>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceRequest {
    pub transactional_id: Option<String>,
    /// -1 (all), 1 (leader) or 0 (none).
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: Vec<ProduceTopic>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducePartitionResponse {
    pub index: i32,
    pub error: ErrorCode,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    pub error_message: Option<String>,
    /// v10+ tagged field 0: the leader a client should go to (NOT_LEADER_OR_FOLLOWER).
    pub current_leader: Option<LeaderIdAndEpoch>,
}

/// v10+: where a node named by a `current_leader` listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEndpoint {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

pub type ProduceTopicResponse = Topic<ProducePartitionResponse>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceResponse {
    pub topics: Vec<ProduceTopicResponse>,
    /// v1+; 0 when absent.
    pub throttle_time_ms: i32,
    /// v10+ tagged field 0; not sent when empty.
    pub node_endpoints: Vec<NodeEndpoint>,
}

/// What a Produce request says before its topics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceHead {
    pub transactional_id: Option<String>,
    /// -1 (all), 1 (leader) or 0 (none).
    pub acks: i16,
    pub timeout_ms: i32,
}

impl ProduceHead {
    /// Decodes an accepted version's fields before the topics (v3-v10; earlier ones are
    /// `produce_legacy`'s); [`visit_produce_partitions`] reads the rest.
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        if version < PRODUCE_MIN_ACCEPTED {
            return Err(WireError::UnsupportedVersion {
                api: PRODUCE_SPEC.name,
                version,
            });
        }
        let flex = Flex::of(&PRODUCE_SPEC, version);
        Ok(Self {
            transactional_id: flex.read_nullable_string(r, "transactional id")?,
            acks: r.i16("acks")?,
            timeout_ms: r.i32("timeout ms")?,
        })
    }
}

/// Reads what follows a [`ProduceHead`] to the end of the request, handing `visit` each
/// partition with its topic's name (a slice of the frame): what a server reads on every
/// Produce, with the bounds of [`ProduceRequest::decode`] and no allocation per partition.
pub fn visit_produce_partitions(
    r: &mut WireReader,
    version: i16,
    mut visit: impl FnMut(&WireStr, ProducePartition),
) -> Result<(), WireError> {
    let flex = Flex::of(&PRODUCE_SPEC, version);
    let mut topic = None;
    visit_topics(&flex, r, &mut Budget::new(), &REQUEST_TOPICS, |r, entry| {
        match entry {
            TopicEntry::Topics(_) => {}
            TopicEntry::Topic { name, .. } => topic = Some(name),
            TopicEntry::Partition => {
                let partition = read_partition(&flex, r)?;
                visit(
                    topic.as_ref().expect("a partition follows its topic"),
                    partition,
                );
            }
        }
        Ok(())
    })?;
    flex.read_end(r)
}

fn read_partition(flex: &Flex, r: &mut WireReader) -> Result<ProducePartition, WireError> {
    Ok(ProducePartition {
        index: r.i32("partition index")?,
        records: flex.read_nullable_bytes(r, "records")?,
    })
}

impl ProduceRequest {
    /// One batch for one partition, not transactional, with Kafka's default 30 s timeout: what
    /// this project's own client and load generator send.
    pub fn one_batch(topic: &str, partition: i32, acks: i16, records: Bytes) -> Self {
        ProduceRequest {
            transactional_id: None,
            acks,
            timeout_ms: 30_000,
            topics: vec![ProduceTopic {
                name: topic.into(),
                partitions: vec![ProducePartition {
                    index: partition,
                    records: Some(records),
                }],
            }],
        }
    }

    /// Decodes an accepted version (v3-v10); earlier ones are `produce_legacy`'s.
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let head = ProduceHead::decode(r, version)?;
        let flex = Flex::of(&PRODUCE_SPEC, version);
        let topics = read_topics(&flex, r, &mut Budget::new(), &REQUEST_TOPICS, |r| {
            read_partition(&flex, r)
        })?;
        flex.read_end(r)?;
        Ok(Self {
            transactional_id: head.transactional_id,
            acks: head.acks,
            timeout_ms: head.timeout_ms,
            topics,
        })
    }

    /// Encodes any version; before v3 there is no transactional id (the records are then the
    /// caller's message set, which this server refuses anyway).
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&PRODUCE_SPEC, version);
        if version >= 3 {
            flex.write_nullable_string(w, self.transactional_id.as_deref());
        }
        w.i16(self.acks);
        w.i32(self.timeout_ms);
        write_topics(&flex, w, &REQUEST_TOPICS, &self.topics, |w, p| {
            w.i32(p.index);
            flex.write_nullable_bytes(w, p.records.as_deref());
        });
        flex.write_tags(w);
    }
}

impl ProduceResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&PRODUCE_SPEC, version);
        write_topics(&flex, w, &RESPONSE_TOPICS, &self.topics, |w, p| {
            encode_partition_response(&flex, w, p, version)
        });
        encode_response_end(
            &flex,
            w,
            version,
            self.throttle_time_ms,
            &self.node_endpoints,
        );
    }

    /// The bytes of [`ProduceResponse::encode`] for the response whose topics group `partitions`
    /// (consecutive partitions of one topic under one entry), throttle time 0, without building
    /// it: a server answers every Produce this way.
    pub fn encode_flat<P>(
        w: &mut WireWriter,
        version: i16,
        partitions: &[P],
        topic_of: impl Fn(&P) -> &str,
        answer_of: impl Fn(&P) -> ProducePartitionResponse,
        node_endpoints: &[NodeEndpoint],
    ) {
        let flex = Flex::of(&PRODUCE_SPEC, version);
        write_flat_topics(&flex, w, &RESPONSE_TOPICS, partitions, topic_of, |w, p| {
            encode_partition_response(&flex, w, &answer_of(p), version)
        });
        encode_response_end(&flex, w, version, 0, node_endpoints);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&PRODUCE_SPEC, version);
        let topics = read_topics(&flex, r, &mut Budget::new(), &RESPONSE_TOPICS, |r| {
            decode_partition_response(&flex, r, version)
        })?;
        let throttle_time_ms = since(version, 1, 0, || r.i32("throttle time"))?;
        let mut node_endpoints = Vec::new();
        if flex.0 {
            r.tagged_fields(|tag, payload| {
                if tag != TAG_NODE_ENDPOINTS || version < 10 {
                    return Ok(false);
                }
                node_endpoints = WireReader::whole(payload, read_node_endpoints)?;
                Ok(true)
            })?;
        }
        r.finish()?;
        Ok(Self {
            topics,
            throttle_time_ms,
            node_endpoints,
        })
    }
}

/// What follows the topics: the throttle time (v1+) and the tagged fields (v10's endpoints).
fn encode_response_end(
    flex: &Flex,
    w: &mut WireWriter,
    version: i16,
    throttle_time_ms: i32,
    node_endpoints: &[NodeEndpoint],
) {
    if version >= 1 {
        w.i32(throttle_time_ms);
    }
    if version >= 10 && !node_endpoints.is_empty() {
        let mut t = WireWriter::new();
        Flex(true).write_structs(&mut t, node_endpoints, |t, node| {
            t.i32(node.node_id);
            t.compact_string(&node.host);
            t.i32(node.port);
            t.compact_nullable_string(node.rack.as_deref());
        });
        w.tagged_fields(&[(TAG_NODE_ENDPOINTS, &t.into_inner())]);
    } else {
        flex.write_tags(w);
    }
}

fn encode_partition_response(
    flex: &Flex,
    w: &mut WireWriter,
    p: &ProducePartitionResponse,
    version: i16,
) {
    w.i32(p.index);
    w.i16(p.error.0);
    w.i64(p.base_offset);
    if version >= 2 {
        w.i64(p.log_append_time_ms);
    }
    if version >= 5 {
        w.i64(p.log_start_offset);
    }
    if version >= 8 {
        flex.write_array_len(w, 0); // RecordErrors
        flex.write_nullable_string(w, p.error_message.as_deref());
    }
    match p.current_leader {
        Some(leader) if version >= 10 => {
            w.tagged_fields(&[(TAG_CURRENT_LEADER, &leader_tag_payload(leader))]);
        }
        _ => flex.write_tags(w),
    }
}

fn decode_partition_response(
    flex: &Flex,
    r: &mut WireReader,
    version: i16,
) -> Result<ProducePartitionResponse, WireError> {
    let index = r.i32("partition index")?;
    let error = ErrorCode(r.i16("error code")?);
    let base_offset = r.i64("base offset")?;
    let log_append_time_ms = since(version, 2, -1, || r.i64("log append time"))?;
    let log_start_offset = since(version, 5, -1, || r.i64("log start offset"))?;
    let mut error_message = None;
    if version >= 8 {
        let errors = flex.read_array_len(r, "record errors", 5)?;
        for _ in 0..errors {
            r.i32("batch index")?;
            flex.read_nullable_string(r, "batch index error message")?;
            flex.read_tags(r)?;
        }
        error_message = flex.read_nullable_string(r, "error message")?;
    }
    let mut current_leader = None;
    if flex.0 {
        r.tagged_fields(|tag, payload| {
            if tag != TAG_CURRENT_LEADER || version < 10 {
                return Ok(false);
            }
            current_leader = Some(read_tag_payload(payload, read_leader_id_and_epoch)?);
            Ok(true)
        })?;
    }
    Ok(ProducePartitionResponse {
        index,
        error,
        base_offset,
        log_append_time_ms,
        log_start_offset,
        error_message,
        current_leader,
    })
}

/// The `NodeEndpoints` array (a tagged field's whole payload: an array has no tag section of
/// its own, unlike a struct).
fn read_node_endpoints(t: &mut WireReader) -> Result<Vec<NodeEndpoint>, WireError> {
    Flex(true).read_structs(t, "node endpoints", MIN_NODE_ENDPOINT_BYTES, |t| {
        Ok(NodeEndpoint {
            node_id: t.i32("node id")?,
            host: t.compact_string("host")?,
            port: t.i32("port")?,
            rack: t.compact_nullable_string("rack")?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NodeEndpoints and a partition's CurrentLeader are tag 0 of a v10 response only: a v9
    /// reader skips whatever tag 0 holds, a v10 reader takes them.
    #[test]
    fn node_endpoints_and_current_leader_are_read_from_v10_only() {
        let partition = ProducePartitionResponse {
            index: 0,
            error: ErrorCode::NOT_LEADER_OR_FOLLOWER,
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
            error_message: None,
            current_leader: Some(LeaderIdAndEpoch {
                leader_id: 2,
                leader_epoch: 7,
            }),
        };
        let response = ProduceResponse {
            topics: vec![Topic {
                name: "t".into(),
                partitions: vec![partition],
            }],
            throttle_time_ms: 3,
            node_endpoints: vec![NodeEndpoint {
                node_id: 2,
                host: "h".into(),
                port: 9092,
                rack: None,
            }],
        };
        let mut w = WireWriter::new();
        response.encode(&mut w, 10);
        let bytes = w.into_inner().freeze();
        let v10 = ProduceResponse::decode(&mut WireReader::new(bytes.clone()), 10).unwrap();
        assert_eq!(v10, response);
        let v9 = ProduceResponse::decode(&mut WireReader::new(bytes), 9).unwrap();
        assert!(v9.node_endpoints.is_empty());
        assert_eq!(v9.topics[0].partitions[0].current_leader, None);
        assert_eq!(v9.throttle_time_ms, 3);
    }

    /// A server's flat answer is byte for byte the built response it stands for, in every
    /// version: partitions grouped under their topics, a leader and its endpoint on v10.
    #[test]
    fn a_flat_answer_encodes_as_the_response_it_groups() {
        fn topic_of<'a>(p: &'a (&str, ProducePartitionResponse)) -> &'a str {
            p.0
        }
        let answer = |index, error: ErrorCode| ProducePartitionResponse {
            index,
            error,
            base_offset: if error == ErrorCode::NONE {
                40 + i64::from(index)
            } else {
                -1
            },
            log_append_time_ms: -1,
            log_start_offset: if error == ErrorCode::NONE { 3 } else { -1 },
            error_message: None,
            current_leader: (error == ErrorCode::NOT_LEADER_OR_FOLLOWER).then_some(
                LeaderIdAndEpoch {
                    leader_id: 2,
                    leader_epoch: 7,
                },
            ),
        };
        let flat = vec![
            ("m", answer(0, ErrorCode::NONE)),
            ("m", answer(1, ErrorCode::NOT_LEADER_OR_FOLLOWER)),
            ("x", answer(0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)),
            ("m", answer(2, ErrorCode::NONE)),
        ];
        let endpoints = vec![NodeEndpoint {
            node_id: 2,
            host: "node-2".into(),
            port: 9092,
            rack: Some("r".into()),
        }];
        let grouped = ProduceResponse {
            topics: vec![
                Topic {
                    name: "m".into(),
                    partitions: vec![flat[0].1.clone(), flat[1].1.clone()],
                },
                Topic {
                    name: "x".into(),
                    partitions: vec![flat[2].1.clone()],
                },
                Topic {
                    name: "m".into(),
                    partitions: vec![flat[3].1.clone()],
                },
            ],
            throttle_time_ms: 0,
            node_endpoints: endpoints.clone(),
        };
        for version in 0..=PRODUCE_SPEC.max_version {
            let built = WireWriter::bytes_of(|w| grouped.encode(w, version));
            let flat_bytes = WireWriter::bytes_of(|w| {
                ProduceResponse::encode_flat(
                    w,
                    version,
                    &flat,
                    topic_of,
                    |p| p.1.clone(),
                    &endpoints,
                )
            });
            assert_eq!(flat_bytes, built, "version {version}");
        }
    }

    /// A server's visit reads what `decode` reads, partition by partition under its topic, and
    /// refuses every truncation of the request that `decode` refuses.
    #[test]
    fn visiting_partitions_reads_what_decode_reads() {
        let partition = |index, records: &'static [u8]| ProducePartition {
            index,
            records: Some(Bytes::from_static(records)),
        };
        let request = ProduceRequest {
            transactional_id: Some("tx".into()),
            acks: -1,
            timeout_ms: 500,
            topics: vec![
                Topic {
                    name: "a".into(),
                    partitions: vec![partition(0, b"one"), partition(3, b"two")],
                },
                Topic {
                    name: "empty".into(),
                    partitions: vec![],
                },
                Topic {
                    name: "b".into(),
                    partitions: vec![partition(1, b"three")],
                },
            ],
        };
        for version in PRODUCE_MIN_ACCEPTED..=PRODUCE_SPEC.max_version {
            let bytes = WireWriter::bytes_of(|w| request.encode(w, version));
            let visit = |bytes: Bytes| {
                let mut r = WireReader::new(bytes);
                let head = ProduceHead::decode(&mut r, version)?;
                let mut seen = Vec::new();
                visit_produce_partitions(&mut r, version, |topic, p| {
                    seen.push((topic.to_string(), p))
                })?;
                Ok::<_, WireError>((head, seen))
            };
            let (head, seen) = visit(bytes.clone()).unwrap();
            assert_eq!(
                (head.transactional_id.as_deref(), head.acks),
                (Some("tx"), -1)
            );
            assert_eq!(head.timeout_ms, 500);
            let expected: Vec<(String, ProducePartition)> = request
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.clone())))
                .collect();
            assert_eq!(seen, expected, "version {version}");
            for cut in 0..bytes.len() {
                let decoded =
                    ProduceRequest::decode(&mut WireReader::new(bytes.slice(..cut)), version);
                assert!(decoded.is_err());
                assert!(
                    visit(bytes.slice(..cut)).is_err(),
                    "version {version}, {cut} bytes"
                );
            }
        }
    }

    #[test]
    fn produce_round_trips_in_every_version() {
        let request = ProduceRequest::one_batch(
            "__cluster_metadata",
            0,
            -1,
            Bytes::from_static(b"batch bytes"),
        );
        let response = ProduceResponse {
            topics: vec![ProduceTopicResponse {
                name: "__cluster_metadata".into(),
                partitions: vec![ProducePartitionResponse {
                    index: 0,
                    error: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                    base_offset: -1,
                    log_append_time_ms: -1,
                    log_start_offset: 0,
                    error_message: Some("leader is 2".into()),
                    current_leader: Some(LeaderIdAndEpoch {
                        leader_id: 2,
                        leader_epoch: 7,
                    }),
                }],
            }],
            throttle_time_ms: 0,
            node_endpoints: vec![NodeEndpoint {
                node_id: 2,
                host: "node-2".into(),
                port: 9092,
                rack: None,
            }],
        };
        for version in PRODUCE_MIN_ACCEPTED..=PRODUCE_SPEC.max_version {
            let mut w = WireWriter::new();
            request.encode(&mut w, version);
            let mut r = WireReader::new(w.into_inner().freeze());
            assert_eq!(ProduceRequest::decode(&mut r, version).unwrap(), request);

            let mut w = WireWriter::new();
            response.encode(&mut w, version);
            let mut r = WireReader::new(w.into_inner().freeze());
            let mut expected = response.clone();
            if version < 8 {
                expected.topics[0].partitions[0].error_message = None;
            }
            if version < 5 {
                expected.topics[0].partitions[0].log_start_offset = -1;
            }
            if version < 10 {
                expected.topics[0].partitions[0].current_leader = None;
                expected.node_endpoints.clear();
            }
            assert_eq!(ProduceResponse::decode(&mut r, version).unwrap(), expected);
        }
    }

    /// The bounds of `limits` apply to Produce as to the other client APIs: a topic name
    /// longer than Kafka allows, or more partitions than one request may name, is a decode
    /// error, however the request was encoded.
    #[test]
    fn requests_beyond_the_limits_are_refused() {
        use crate::wire::kafka::{MAX_ENTRIES_PER_REQUEST, MAX_TOPIC_NAME_BYTES};
        let partition = |index| ProducePartition {
            index,
            records: None,
        };
        let request = |name: String, partitions: usize| ProduceRequest {
            transactional_id: None,
            acks: 1,
            timeout_ms: 1000,
            topics: vec![ProduceTopic {
                name,
                partitions: (0..partitions as i32).map(partition).collect(),
            }],
        };
        let name = |len| "t".repeat(len);
        for version in PRODUCE_MIN_ACCEPTED..=PRODUCE_SPEC.max_version {
            let decode = |request: &ProduceRequest| {
                let mut w = WireWriter::new();
                request.encode(&mut w, version);
                ProduceRequest::decode(&mut WireReader::new(w.into_inner().freeze()), version)
            };
            let within = request(name(MAX_TOPIC_NAME_BYTES), MAX_ENTRIES_PER_REQUEST);
            assert_eq!(decode(&within), Ok(within.clone()), "v{version}");
            assert!(matches!(
                decode(&request(name(MAX_TOPIC_NAME_BYTES + 1), 1)),
                Err(WireError::TooLong { limit: 249, .. })
            ));
            assert!(matches!(
                decode(&request(name(1), MAX_ENTRIES_PER_REQUEST + 1)),
                Err(WireError::TooMany { limit: 1000, .. })
            ));
        }
    }
}
