//! The Kafka client APIs a node serves: ApiVersions (v0-v4) and Produce (v3-v9), in Kafka's own
//! layouts so existing clients negotiate and append as they do with a Kafka broker.

use bytes::Bytes;
use engine::raft::ErrorCode;

use super::api::{self, ApiSpec};
use super::primitives::{WireError, WireReader, WireWriter};

pub const PRODUCE: i16 = 0;

pub const API_VERSIONS_SPEC: ApiSpec = ApiSpec {
    key: api::API_VERSIONS,
    name: "ApiVersions",
    min_version: 0,
    max_version: 4,
    first_flexible: Some(3),
};

pub const PRODUCE_SPEC: ApiSpec = ApiSpec {
    key: PRODUCE,
    name: "Produce",
    min_version: 3,
    max_version: 9,
    first_flexible: Some(9),
};

/// Reads and writes the field types whose encoding depends on whether the version is flexible.
struct Flex(bool);

impl Flex {
    fn read_string(&self, r: &mut WireReader, field: &'static str) -> Result<String, WireError> {
        if self.0 {
            r.compact_string(field)
        } else {
            r.string(field)
        }
    }

    fn read_nullable_string(
        &self,
        r: &mut WireReader,
        field: &'static str,
    ) -> Result<Option<String>, WireError> {
        if self.0 {
            r.compact_nullable_string(field)
        } else {
            r.nullable_string(field)
        }
    }

    fn read_array_len(
        &self,
        r: &mut WireReader,
        field: &'static str,
        min_element_bytes: usize,
    ) -> Result<usize, WireError> {
        let len = if self.0 {
            r.compact_array_len(field, min_element_bytes)?
        } else {
            r.array_len(field, min_element_bytes)?
        };
        Ok(len.unwrap_or(0))
    }

    fn read_nullable_bytes(
        &self,
        r: &mut WireReader,
        field: &'static str,
    ) -> Result<Option<Bytes>, WireError> {
        if self.0 {
            r.compact_nullable_bytes(field)
        } else {
            r.nullable_bytes(field)
        }
    }

    fn read_tags(&self, r: &mut WireReader) -> Result<(), WireError> {
        if self.0 {
            r.skip_tagged_fields()?;
        }
        Ok(())
    }

    fn write_string(&self, w: &mut WireWriter, v: &str) {
        if self.0 {
            w.compact_string(v)
        } else {
            w.string(v)
        }
    }

    fn write_nullable_string(&self, w: &mut WireWriter, v: Option<&str>) {
        if self.0 {
            w.compact_nullable_string(v)
        } else {
            w.nullable_string(v)
        }
    }

    fn write_array_len(&self, w: &mut WireWriter, len: usize) {
        if self.0 {
            w.compact_array_len(Some(len))
        } else {
            w.array_len(Some(len))
        }
    }

    fn write_nullable_bytes(&self, w: &mut WireWriter, v: Option<&[u8]>) {
        if self.0 {
            w.compact_nullable_bytes(v)
        } else {
            w.nullable_bytes(v)
        }
    }

    fn write_tags(&self, w: &mut WireWriter) {
        if self.0 {
            w.no_tagged_fields();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ApiVersions

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiVersionsRequest {
    pub client_software_name: Option<String>,
    pub client_software_version: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiVersionRange {
    pub api_key: i16,
    pub min_version: i16,
    pub max_version: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiVersionsResponse {
    pub error: ErrorCode,
    pub api_keys: Vec<ApiVersionRange>,
    pub throttle_time_ms: i32,
}

impl ApiVersionsRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let mut request = Self::default();
        if version >= 3 {
            request.client_software_name = Some(r.compact_string("client software name")?);
            request.client_software_version = Some(r.compact_string("client software version")?);
            r.skip_tagged_fields()?;
        }
        r.finish()?;
        Ok(request)
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        if version >= 3 {
            w.compact_string(self.client_software_name.as_deref().unwrap_or(""));
            w.compact_string(self.client_software_version.as_deref().unwrap_or(""));
            w.no_tagged_fields();
        }
    }
}

impl ApiVersionsResponse {
    /// Versions above what the server supports are answered with UNSUPPORTED_VERSION in the v0
    /// body (protocol.md 17): the caller encodes such a response with `version = 0`.
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex(version >= 3);
        w.i16(self.error.0);
        flex.write_array_len(w, self.api_keys.len());
        for key in &self.api_keys {
            w.i16(key.api_key);
            w.i16(key.min_version);
            w.i16(key.max_version);
            flex.write_tags(w);
        }
        if version >= 1 {
            w.i32(self.throttle_time_ms);
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex(version >= 3);
        let error = ErrorCode(r.i16("error code")?);
        let count = flex.read_array_len(r, "api keys", 6)?;
        let mut api_keys = Vec::with_capacity(count);
        for _ in 0..count {
            api_keys.push(ApiVersionRange {
                api_key: r.i16("api key")?,
                min_version: r.i16("min version")?,
                max_version: r.i16("max version")?,
            });
            flex.read_tags(r)?;
        }
        let throttle_time_ms = if version >= 1 {
            r.i32("throttle time")?
        } else {
            0
        };
        flex.read_tags(r)?;
        r.finish()?;
        Ok(Self {
            error,
            api_keys,
            throttle_time_ms,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Produce

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
