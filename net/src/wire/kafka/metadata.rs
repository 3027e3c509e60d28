//! Metadata (key 3, v0-v12, flexible from v9): the brokers, the cluster id, the controller and,
//! per topic asked about, its partitions' leaders and replicas. ringraft hosts one topic,
//! `__cluster_metadata`, with one partition (docs/clients.md).

use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const METADATA: i16 = 3;

pub const METADATA_SPEC: ApiSpec = ApiSpec::new(METADATA, "Metadata", 0..=12, Some(9));

/// Kafka's "authorized operations not asked for" value (`INT32_MIN`).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// A topic id: 16 bytes; ringraft's one topic has the zero id (Kafka's "no id").
pub type TopicId = [u8; 16];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataRequestTopic {
    /// v10+; zero before.
    pub topic_id: TopicId,
    /// Null only from v10 (a topic asked for by id).
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataRequest {
    /// None: every topic (a null array from v1; an empty array in v0 means the same).
    pub topics: Option<Vec<MetadataRequestTopic>>,
    /// v4+ (true before: v0-v3 brokers auto-created).
    pub allow_auto_topic_creation: bool,
    /// v8-v10.
    pub include_cluster_authorized_operations: bool,
    /// v8+.
    pub include_topic_authorized_operations: bool,
}

/// A broker as Metadata and DescribeCluster list it: its endpoint on one listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterBroker {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    /// v1+ (Metadata); always in DescribeCluster.
    pub rack: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataPartition {
    pub error: ErrorCode,
    pub partition_index: i32,
    pub leader_id: i32,
    /// v7+ (-1 before).
    pub leader_epoch: i32,
    pub replica_nodes: Vec<i32>,
    pub isr_nodes: Vec<i32>,
    /// v5+.
    pub offline_replicas: Vec<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataTopic {
    pub error: ErrorCode,
    /// Null only from v12 (a topic asked for by an unknown id).
    pub name: Option<String>,
    /// v10+.
    pub topic_id: TopicId,
    /// v1+.
    pub is_internal: bool,
    pub partitions: Vec<MetadataPartition>,
    /// v8+.
    pub topic_authorized_operations: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataResponse {
    /// v3+.
    pub throttle_time_ms: i32,
    pub brokers: Vec<ClusterBroker>,
    /// v2+.
    pub cluster_id: Option<String>,
    /// v1+ (-1: none).
    pub controller_id: i32,
    pub topics: Vec<MetadataTopic>,
    /// v8-v10.
    pub cluster_authorized_operations: i32,
}

impl Default for MetadataRequest {
    fn default() -> Self {
        Self {
            topics: None,
            allow_auto_topic_creation: true,
            include_cluster_authorized_operations: false,
            include_topic_authorized_operations: false,
        }
    }
}

pub(super) fn read_uuid(r: &mut WireReader, field: &'static str) -> Result<TopicId, WireError> {
    r.uuid(field)
}

pub(super) fn write_uuid(w: &mut WireWriter, id: &TopicId) {
    w.uuid(id)
}

fn read_ids(flex: &Flex, r: &mut WireReader, field: &'static str) -> Result<Vec<i32>, WireError> {
    let count = flex.read_array_len(r, field, 4)?;
    (0..count).map(|_| r.i32(field)).collect()
}

fn write_ids(flex: &Flex, w: &mut WireWriter, ids: &[i32]) {
    flex.write_array_len(w, ids.len());
    for id in ids {
        w.i32(*id);
    }
}

/// A topic's name: nullable in the versions where a topic may go by its id alone (`nullable`:
/// a request from v10, a response from v12), a plain string before them, where a missing name
/// is written empty. One pair for both messages, so their names are read and written alike.
fn read_name(flex: &Flex, r: &mut WireReader, nullable: bool) -> Result<Option<String>, WireError> {
    if nullable {
        flex.read_nullable_string(r, "topic name")
    } else {
        flex.read_string(r, "topic name").map(Some)
    }
}

/// Writes a name as [`read_name`] reads it.
fn write_name(flex: &Flex, w: &mut WireWriter, name: Option<&str>, nullable: bool) {
    if nullable {
        flex.write_nullable_string(w, name)
    } else {
        flex.write_string(w, name.unwrap_or(""))
    }
}

impl MetadataRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&METADATA_SPEC, version);
        let topics = flex.read_nullable_structs(r, "topics", 2, |r| {
            let topic_id = if version >= 10 {
                read_uuid(r, "topic id")?
            } else {
                [0; 16]
            };
            let name = read_name(&flex, r, version >= 10)?;
            Ok(MetadataRequestTopic { topic_id, name })
        })?;
        // v0 has no null array: an empty one asks for every topic.
        let topics = topics.filter(|topics| version > 0 || !topics.is_empty());
        let mut request = Self {
            topics,
            ..Self::default()
        };
        if version >= 4 {
            request.allow_auto_topic_creation = r.bool("allow auto topic creation")?;
        }
        if (8..=10).contains(&version) {
            request.include_cluster_authorized_operations =
                r.bool("include cluster authorized operations")?;
        }
        if version >= 8 {
            request.include_topic_authorized_operations =
                r.bool("include topic authorized operations")?;
        }
        flex.read_tags(r)?;
        // Bytes after the last field are ignored, as Kafka's broker ignores them (it never
        // checks that a request was read to its end), and only here: librdkafka
        // (confluent-kafka) asks for every topic in v9+ with the four zero bytes it reserved
        // for the array's length, which reads as a null array, flags and tags, with bytes left
        // over (docs/clients.md, "What Metadata says").
        Ok(request)
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&METADATA_SPEC, version);
        let topics = match &self.topics {
            // v0 has no null array: every topic is asked for with an empty one.
            None if version == 0 => Some(&[][..]),
            topics => topics.as_deref(),
        };
        flex.write_nullable_structs(w, topics, |w, topic| {
            if version >= 10 {
                write_uuid(w, &topic.topic_id);
            }
            write_name(&flex, w, topic.name.as_deref(), version >= 10);
        });
        if version >= 4 {
            w.bool(self.allow_auto_topic_creation);
        }
        if (8..=10).contains(&version) {
            w.bool(self.include_cluster_authorized_operations);
        }
        if version >= 8 {
            w.bool(self.include_topic_authorized_operations);
        }
        flex.write_tags(w);
    }
}

impl MetadataResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        let flex = Flex::of(&METADATA_SPEC, version);
        if version >= 3 {
            w.i32(self.throttle_time_ms);
        }
        flex.write_structs(w, &self.brokers, |w, broker| {
            write_broker(&flex, w, broker, version >= 1)
        });
        if version >= 2 {
            flex.write_nullable_string(w, self.cluster_id.as_deref());
        }
        if version >= 1 {
            w.i32(self.controller_id);
        }
        flex.write_structs(w, &self.topics, |w, topic| {
            encode_topic(&flex, w, topic, version)
        });
        if (8..=10).contains(&version) {
            w.i32(self.cluster_authorized_operations);
        }
        flex.write_tags(w);
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let flex = Flex::of(&METADATA_SPEC, version);
        let throttle_time_ms = since(version, 3, 0, || r.i32("throttle time"))?;
        let brokers =
            flex.read_structs(r, "brokers", 10, |r| read_broker(&flex, r, version >= 1))?;
        let cluster_id = since(version, 2, None, || {
            flex.read_nullable_string(r, "cluster id")
        })?;
        let controller_id = since(version, 1, -1, || r.i32("controller id"))?;
        let topics = flex.read_structs(r, "topics", 7, |r| decode_topic(&flex, r, version))?;
        let cluster_authorized_operations = if (8..=10).contains(&version) {
            r.i32("cluster authorized operations")?
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        };
        flex.read_end(r)?;
        Ok(Self {
            throttle_time_ms,
            brokers,
            cluster_id,
            controller_id,
            topics,
            cluster_authorized_operations,
        })
    }
}

/// A broker as Metadata (with its rack from v1) and DescribeCluster (always with it) list it.
pub(super) fn write_broker(flex: &Flex, w: &mut WireWriter, broker: &ClusterBroker, rack: bool) {
    w.i32(broker.node_id);
    flex.write_string(w, &broker.host);
    w.i32(broker.port);
    if rack {
        flex.write_nullable_string(w, broker.rack.as_deref());
    }
}

pub(super) fn read_broker(
    flex: &Flex,
    r: &mut WireReader,
    rack: bool,
) -> Result<ClusterBroker, WireError> {
    Ok(ClusterBroker {
        node_id: r.i32("node id")?,
        host: flex.read_string(r, "host")?,
        port: r.i32("port")?,
        rack: if rack {
            flex.read_nullable_string(r, "rack")?
        } else {
            None
        },
    })
}

fn encode_topic(flex: &Flex, w: &mut WireWriter, topic: &MetadataTopic, version: i16) {
    w.i16(topic.error.0);
    write_name(flex, w, topic.name.as_deref(), version >= 12);
    if version >= 10 {
        write_uuid(w, &topic.topic_id);
    }
    if version >= 1 {
        w.bool(topic.is_internal);
    }
    flex.write_structs(w, &topic.partitions, |w, p| {
        w.i16(p.error.0);
        w.i32(p.partition_index);
        w.i32(p.leader_id);
        if version >= 7 {
            w.i32(p.leader_epoch);
        }
        write_ids(flex, w, &p.replica_nodes);
        write_ids(flex, w, &p.isr_nodes);
        if version >= 5 {
            write_ids(flex, w, &p.offline_replicas);
        }
    });
    if version >= 8 {
        w.i32(topic.topic_authorized_operations);
    }
}

fn decode_topic(flex: &Flex, r: &mut WireReader, version: i16) -> Result<MetadataTopic, WireError> {
    let error = ErrorCode(r.i16("topic error code")?);
    let name = read_name(flex, r, version >= 12)?;
    let topic_id = if version >= 10 {
        read_uuid(r, "topic id")?
    } else {
        [0; 16]
    };
    let is_internal = version >= 1 && r.bool("is internal")?;
    let partitions = flex.read_structs(r, "partitions", 14, |r| {
        Ok(MetadataPartition {
            error: ErrorCode(r.i16("partition error code")?),
            partition_index: r.i32("partition index")?,
            leader_id: r.i32("leader id")?,
            leader_epoch: since(version, 7, -1, || r.i32("leader epoch"))?,
            replica_nodes: read_ids(flex, r, "replica nodes")?,
            isr_nodes: read_ids(flex, r, "isr nodes")?,
            offline_replicas: if version >= 5 {
                read_ids(flex, r, "offline replicas")?
            } else {
                Vec::new()
            },
        })
    })?;
    let topic_authorized_operations = since(version, 8, AUTHORIZED_OPERATIONS_OMITTED, || {
        r.i32("topic authorized operations")
    })?;
    Ok(MetadataTopic {
        error,
        name,
        topic_id,
        is_internal,
        partitions,
        topic_authorized_operations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::primitives::assert_every_prefix_refused;

    fn response() -> MetadataResponse {
        MetadataResponse {
            throttle_time_ms: 0,
            brokers: vec![ClusterBroker {
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 9092,
                rack: None,
            }],
            cluster_id: Some("cluster-1".into()),
            controller_id: 1,
            topics: vec![MetadataTopic {
                error: ErrorCode::NONE,
                name: Some("__cluster_metadata".into()),
                topic_id: [0; 16],
                is_internal: true,
                partitions: vec![MetadataPartition {
                    error: ErrorCode::NONE,
                    partition_index: 0,
                    leader_id: 1,
                    leader_epoch: 4,
                    replica_nodes: vec![1, 2, 3],
                    isr_nodes: vec![1, 2],
                    offline_replicas: vec![3],
                }],
                topic_authorized_operations: 256,
            }],
            cluster_authorized_operations: 128,
        }
    }

    /// What a version carries of `response`: the fields it lacks read back as their defaults.
    fn as_seen_in(mut response: MetadataResponse, version: i16) -> MetadataResponse {
        if version < 2 {
            response.cluster_id = None;
        }
        if version < 1 {
            response.controller_id = -1;
            response.topics[0].is_internal = false;
        }
        if !(8..=10).contains(&version) {
            response.cluster_authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
        }
        let topic = &mut response.topics[0];
        if version < 8 {
            topic.topic_authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
        }
        if version < 7 {
            topic.partitions[0].leader_epoch = -1;
        }
        if version < 5 {
            topic.partitions[0].offline_replicas.clear();
        }
        response
    }

    #[test]
    fn metadata_round_trips_in_every_version() {
        for version in METADATA_SPEC.min_version..=METADATA_SPEC.max_version {
            for topics in [
                None,
                Some(vec![MetadataRequestTopic {
                    topic_id: [0; 16],
                    name: Some("__cluster_metadata".into()),
                }]),
            ] {
                let request = MetadataRequest {
                    topics,
                    allow_auto_topic_creation: version < 4,
                    include_cluster_authorized_operations: (8..=10).contains(&version),
                    include_topic_authorized_operations: version >= 8,
                };
                let mut w = WireWriter::new();
                request.encode(&mut w, version);
                let mut r = WireReader::new(w.into_inner().freeze());
                assert_eq!(MetadataRequest::decode(&mut r, version).unwrap(), request);
            }
            let mut w = WireWriter::new();
            response().encode(&mut w, version);
            let mut r = WireReader::new(w.into_inner().freeze());
            assert_eq!(
                MetadataResponse::decode(&mut r, version).unwrap(),
                as_seen_in(response(), version),
                "v{version}"
            );
        }
    }

    #[test]
    fn every_prefix_of_a_request_is_an_error_not_a_panic() {
        let request = MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                topic_id: [7; 16],
                name: Some("t".into()),
            }]),
            ..MetadataRequest::default()
        };
        for version in METADATA_SPEC.min_version..=METADATA_SPEC.max_version {
            let mut w = WireWriter::new();
            request.encode(&mut w, version);
            let full = w.into_inner().freeze();
            assert_every_prefix_refused(format_args!("v{version}"), &full, |r| {
                MetadataRequest::decode(r, version)
            });
        }
    }

    #[test]
    fn a_huge_topic_count_is_refused_before_any_allocation() {
        let mut w = WireWriter::new();
        w.i32(i32::MAX);
        let mut r = WireReader::new(w.into_inner().freeze());
        assert!(matches!(
            MetadataRequest::decode(&mut r, 1),
            Err(WireError::ArrayTooLong { .. })
        ));
    }
}
