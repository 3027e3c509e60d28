//! Produce (key 0, v3-v9, flexible from v9): record batches appended to `__cluster_metadata`-0.

use bytes::Bytes;
use engine::raft::ErrorCode;

use super::flex::Flex;
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const PRODUCE: i16 = 0;

pub const PRODUCE_SPEC: ApiSpec = ApiSpec {
    key: PRODUCE,
    name: "Produce",
    min_version: 3,
    max_version: 9,
    first_flexible: Some(9),
};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducePartition {
    pub index: i32,
    /// RecordBatch v2 bytes, a slice of the request frame.
    pub records: Option<Bytes>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceTopic {
    pub name: String,
    pub partitions: Vec<ProducePartition>,
}

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
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceTopicResponse {
    pub name: String,
    pub partitions: Vec<ProducePartitionResponse>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceResponse {
    pub topics: Vec<ProduceTopicResponse>,
    pub throttle_time_ms: i32,
}

impl ProduceRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex(PRODUCE_SPEC.is_flexible(version));
        let transactional_id = flex.read_nullable_string(r, "transactional id")?;
        let acks = r.i16("acks")?;
        let timeout_ms = r.i32("timeout ms")?;
        let topic_count = flex.read_array_len(r, "topics", 2)?;
        let mut topics = Vec::with_capacity(topic_count);
        for _ in 0..topic_count {
            let name = flex.read_string(r, "topic name")?;
            let partition_count = flex.read_array_len(r, "partitions", 5)?;
            let mut partitions = Vec::with_capacity(partition_count);
            for _ in 0..partition_count {
                partitions.push(ProducePartition {
                    index: r.i32("partition index")?,
                    records: flex.read_nullable_bytes(r, "records")?,
                });
                flex.read_tags(r)?;
            }
            flex.read_tags(r)?;
            topics.push(ProduceTopic { name, partitions });
        }
        flex.read_tags(r)?;
        r.finish()?;
        Ok(Self {
            transactional_id,
            acks,
            timeout_ms,
            topics,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex(PRODUCE_SPEC.is_flexible(version));
        flex.write_nullable_string(w, self.transactional_id.as_deref());
        w.i16(self.acks);
        w.i32(self.timeout_ms);
        flex.write_array_len(w, self.topics.len());
        for topic in &self.topics {
            flex.write_string(w, &topic.name);
            flex.write_array_len(w, topic.partitions.len());
            for partition in &topic.partitions {
                w.i32(partition.index);
                flex.write_nullable_bytes(w, partition.records.as_deref());
                flex.write_tags(w);
            }
            flex.write_tags(w);
        }
        flex.write_tags(w);
    }
}

impl ProduceResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex(PRODUCE_SPEC.is_flexible(version));
        flex.write_array_len(w, self.topics.len());
        for topic in &self.topics {
            flex.write_string(w, &topic.name);
            flex.write_array_len(w, topic.partitions.len());
            for p in &topic.partitions {
                w.i32(p.index);
                w.i16(p.error.0);
                w.i64(p.base_offset);
                w.i64(p.log_append_time_ms);
                if version >= 5 {
                    w.i64(p.log_start_offset);
                }
                if version >= 8 {
                    flex.write_array_len(w, 0); // RecordErrors
                    flex.write_nullable_string(w, p.error_message.as_deref());
                }
                flex.write_tags(w);
            }
            flex.write_tags(w);
        }
        w.i32(self.throttle_time_ms);
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex(PRODUCE_SPEC.is_flexible(version));
        let topic_count = flex.read_array_len(r, "responses", 2)?;
        let mut topics = Vec::with_capacity(topic_count);
        for _ in 0..topic_count {
            let name = flex.read_string(r, "topic name")?;
            let count = flex.read_array_len(r, "partition responses", 22)?;
            let mut partitions = Vec::with_capacity(count);
            for _ in 0..count {
                let index = r.i32("partition index")?;
                let error = ErrorCode(r.i16("error code")?);
                let base_offset = r.i64("base offset")?;
                let log_append_time_ms = r.i64("log append time")?;
                let log_start_offset = if version >= 5 {
                    r.i64("log start offset")?
                } else {
                    -1
                };
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
                flex.read_tags(r)?;
                partitions.push(ProducePartitionResponse {
                    index,
                    error,
                    base_offset,
                    log_append_time_ms,
                    log_start_offset,
                    error_message,
                });
            }
            flex.read_tags(r)?;
            topics.push(ProduceTopicResponse { name, partitions });
        }
        let throttle_time_ms = r.i32("throttle time")?;
        flex.read_tags(r)?;
        r.finish()?;
        Ok(Self {
            topics,
            throttle_time_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produce_round_trips_in_every_version() {
        let request = ProduceRequest {
            transactional_id: None,
            acks: -1,
            timeout_ms: 30_000,
            topics: vec![ProduceTopic {
                name: "__cluster_metadata".into(),
                partitions: vec![ProducePartition {
                    index: 0,
                    records: Some(Bytes::from_static(b"batch bytes")),
                }],
            }],
        };
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
                }],
            }],
            throttle_time_ms: 0,
        };
        for version in PRODUCE_SPEC.min_version..=PRODUCE_SPEC.max_version {
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
            assert_eq!(ProduceResponse::decode(&mut r, version).unwrap(), expected);
        }
    }
}
