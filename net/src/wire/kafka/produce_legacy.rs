//! Produce v0-v2, read only far enough to refuse them. They carry message sets (magic 0 or 1),
//! which this server never stores; the range is advertised because librdkafka before 2.11.1
//! turns compression off unless the broker lists Produce v0, and Kafka 4 advertises v0-v2 the
//! same way and answers them UNSUPPORTED_VERSION (docs/protocol.md, "Kafka client APIs").
//!
//! Layout (Kafka's schema): Acks int16, TimeoutMs int32, TopicData [Name string,
//! PartitionData [Index int32, Records bytes]]. The response is `ProduceResponse` encoded at the
//! request's own version: v1 adds ThrottleTimeMs, v2 adds LogAppendTimeMs.

use engine::raft::ErrorCode;

use super::flex::Flex;
use super::limits::Budget;
use super::produce::{
    ProducePartitionResponse, ProduceResponse, ProduceTopicResponse, PRODUCE_MIN_ACCEPTED,
};
use super::topics::{read_topics, Topic, TopicsLayout};
use crate::wire::primitives::{WireError, WireReader};

/// A topic of a refused request: its name and the partitions it named.
pub type LegacyProduceTopic = Topic<i32>;

/// Classic encodings only: a topic is at least a name length and a partition count (2 + 4
/// bytes), a partition an index and a records length (4 + 4).
const TOPICS: TopicsLayout = TopicsLayout::new(8).min_topic_bytes(6);

/// What a v0-v2 Produce says, without its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyProduceRequest {
    /// 0 means the client reads no response: the node sends none (Kafka closes such a
    /// connection instead).
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: Vec<LegacyProduceTopic>,
}

impl LegacyProduceRequest {
    /// Reads a v0-v2 body; each record set is skipped (taken as a slice of the frame, never
    /// copied or parsed).
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        if !(0..PRODUCE_MIN_ACCEPTED).contains(&version) {
            return Err(WireError::UnsupportedVersion {
                api: "Produce (v0-v2 refusal)",
                version,
            });
        }
        let acks = r.i16("acks")?;
        let timeout_ms = r.i32("timeout ms")?;
        let topics = read_topics(&Flex(false), r, &mut Budget::new(), &TOPICS, |r| {
            let index = r.i32("partition index")?;
            r.nullable_bytes("records")?;
            Ok(index)
        })?;
        r.finish()?;
        Ok(Self {
            acks,
            timeout_ms,
            topics,
        })
    }

    /// The answer: every partition the request named, UNSUPPORTED_VERSION, no offsets. Encode
    /// it with `ProduceResponse::encode` at the request's version.
    pub fn refusal(&self) -> ProduceResponse {
        ProduceResponse {
            topics: self
                .topics
                .iter()
                .map(|topic| ProduceTopicResponse {
                    name: topic.name.clone(),
                    partitions: topic
                        .partitions
                        .iter()
                        .map(|&index| ProducePartitionResponse {
                            index,
                            error: ErrorCode::UNSUPPORTED_VERSION,
                            base_offset: -1,
                            log_append_time_ms: -1,
                            log_start_offset: -1,
                            error_message: None,
                            current_leader: None,
                        })
                        .collect(),
                })
                .collect(),
            throttle_time_ms: 0,
            node_endpoints: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::wire::kafka::{ProducePartition, ProduceRequest, ProduceTopic};
    use crate::wire::primitives::assert_every_prefix_refused;
    use crate::wire::primitives::WireWriter;

    fn request() -> ProduceRequest {
        ProduceRequest {
            transactional_id: None,
            acks: 1,
            timeout_ms: 1000,
            topics: vec![
                ProduceTopic {
                    name: "__cluster_metadata".into(),
                    partitions: vec![
                        ProducePartition {
                            index: 0,
                            records: Some(Bytes::from_static(b"a magic 1 message set")),
                        },
                        ProducePartition {
                            index: 3,
                            records: None,
                        },
                    ],
                },
                ProduceTopic {
                    name: "other".into(),
                    partitions: vec![ProducePartition {
                        index: 1,
                        records: Some(Bytes::new()),
                    }],
                },
            ],
        }
    }

    #[test]
    fn every_partition_named_is_refused_in_the_requests_version() {
        for version in 0..PRODUCE_MIN_ACCEPTED {
            let mut w = WireWriter::new();
            request().encode(&mut w, version);
            let body = w.into_inner().freeze();
            let legacy =
                LegacyProduceRequest::decode(&mut WireReader::new(body.clone()), version).unwrap();
            assert_eq!(legacy.acks, 1);
            assert_eq!(legacy.timeout_ms, 1000);
            assert_eq!(legacy.topics[0].partitions, vec![0, 3]);
            assert_eq!(legacy.topics[1].name, "other");
            // The hot-path decoder refuses these versions rather than misreading them.
            assert!(matches!(
                ProduceRequest::decode(&mut WireReader::new(body.clone()), version),
                Err(WireError::UnsupportedVersion { .. })
            ));
            assert_every_prefix_refused(format_args!("v{version}"), &body, |r| {
                LegacyProduceRequest::decode(r, version)
            });

            let refusal = legacy.refusal();
            let mut w = WireWriter::new();
            refusal.encode(&mut w, version);
            let bytes = w.into_inner().freeze();
            // v0: per partition index, error, base offset (14 bytes); v1 + throttle; v2 + time.
            let per_partition = if version >= 2 { 22 } else { 14 };
            let expected_len = 4
                + (2 + 18 + 4 + 2 * per_partition)
                + (2 + 5 + 4 + per_partition)
                + if version >= 1 { 4 } else { 0 };
            assert_eq!(bytes.len(), expected_len, "v{version}");
            let back = ProduceResponse::decode(&mut WireReader::new(bytes), version).unwrap();
            assert_eq!(back, refusal);
            assert!(back
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.error == ErrorCode::UNSUPPORTED_VERSION));
        }
        assert!(
            LegacyProduceRequest::decode(&mut WireReader::new(Bytes::new()), 3).is_err(),
            "v3 is the hot path's"
        );
    }
}
