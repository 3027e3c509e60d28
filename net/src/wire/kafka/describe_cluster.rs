//! DescribeCluster (key 60, v0-v1, flexible from v0): the cluster id, the controller (the Raft
//! leader), the brokers and, when asked, the operations the caller may do on the cluster
//! (docs/clients.md).

use engine::raft::ErrorCode;

use super::flex::{since, Flex};
use super::metadata::{read_broker, write_broker, ClusterBroker, AUTHORIZED_OPERATIONS_OMITTED};
use crate::wire::api::ApiSpec;
use crate::wire::primitives::{WireError, WireReader, WireWriter};

pub const DESCRIBE_CLUSTER: i16 = 60;

pub const DESCRIBE_CLUSTER_SPEC: ApiSpec =
    ApiSpec::new(DESCRIBE_CLUSTER, "DescribeCluster", 0..=1, Some(0));

/// EndpointType (v1+): the brokers' endpoints (1, the default) or the controllers' (2).
pub const ENDPOINT_TYPE_BROKERS: i8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeClusterRequest {
    pub include_cluster_authorized_operations: bool,
    /// v1+ ([`ENDPOINT_TYPE_BROKERS`] before).
    pub endpoint_type: i8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeClusterResponse {
    pub throttle_time_ms: i32,
    pub error: ErrorCode,
    pub error_message: Option<String>,
    /// v1+.
    pub endpoint_type: i8,
    pub cluster_id: String,
    pub controller_id: i32,
    pub brokers: Vec<ClusterBroker>,
    pub cluster_authorized_operations: i32,
}

impl DescribeClusterRequest {
    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let include_cluster_authorized_operations =
            r.bool("include cluster authorized operations")?;
        let endpoint_type = since(version, 1, ENDPOINT_TYPE_BROKERS, || r.i8("endpoint type"))?;
        r.skip_tagged_fields()?;
        r.finish()?;
        Ok(Self {
            include_cluster_authorized_operations,
            endpoint_type,
        })
    }

    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        w.bool(self.include_cluster_authorized_operations);
        if version >= 1 {
            w.i8(self.endpoint_type);
        }
        w.no_tagged_fields();
    }
}

impl DescribeClusterResponse {
    pub fn encode(&self, w: &mut WireWriter, version: i16) {
        w.i32(self.throttle_time_ms);
        w.i16(self.error.0);
        w.compact_nullable_string(self.error_message.as_deref());
        if version >= 1 {
            w.i8(self.endpoint_type);
        }
        w.compact_string(&self.cluster_id);
        w.i32(self.controller_id);
        // Every version is flexible, and every version has the broker's rack.
        let flex = Flex(true);
        flex.write_structs(w, &self.brokers, |w, b| write_broker(&flex, w, b, true));
        w.i32(self.cluster_authorized_operations);
        w.no_tagged_fields();
    }

    pub fn decode(r: &mut WireReader, version: i16) -> Result<Self, WireError> {
        let throttle_time_ms = r.i32("throttle time")?;
        let error = ErrorCode(r.i16("error code")?);
        let error_message = r.compact_nullable_string("error message")?;
        let endpoint_type = since(version, 1, ENDPOINT_TYPE_BROKERS, || r.i8("endpoint type"))?;
        let cluster_id = r.compact_string("cluster id")?;
        let controller_id = r.i32("controller id")?;
        let flex = Flex(true);
        let brokers = flex.read_structs(r, "brokers", 11, |r| read_broker(&flex, r, true))?;
        let cluster_authorized_operations = r.i32("cluster authorized operations")?;
        r.skip_tagged_fields()?;
        r.finish()?;
        Ok(Self {
            throttle_time_ms,
            error,
            error_message,
            endpoint_type,
            cluster_id,
            controller_id,
            brokers,
            cluster_authorized_operations,
        })
    }
}

impl Default for DescribeClusterResponse {
    fn default() -> Self {
        Self {
            throttle_time_ms: 0,
            error: ErrorCode::NONE,
            error_message: None,
            endpoint_type: ENDPOINT_TYPE_BROKERS,
            cluster_id: String::new(),
            controller_id: -1,
            brokers: Vec::new(),
            cluster_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::primitives::assert_every_prefix_refused;

    #[test]
    fn describe_cluster_round_trips_in_both_versions() {
        for version in DESCRIBE_CLUSTER_SPEC.min_version..=DESCRIBE_CLUSTER_SPEC.max_version {
            let request = DescribeClusterRequest {
                include_cluster_authorized_operations: true,
                endpoint_type: ENDPOINT_TYPE_BROKERS,
            };
            let mut w = WireWriter::new();
            request.encode(&mut w, version);
            let mut r = WireReader::new(w.into_inner().freeze());
            assert_eq!(
                DescribeClusterRequest::decode(&mut r, version).unwrap(),
                request
            );
            let response = DescribeClusterResponse {
                cluster_id: "c".into(),
                controller_id: 2,
                brokers: vec![ClusterBroker {
                    node_id: 2,
                    host: "h".into(),
                    port: 9,
                    rack: Some("r".into()),
                }],
                cluster_authorized_operations: 0x180,
                ..DescribeClusterResponse::default()
            };
            let mut w = WireWriter::new();
            response.encode(&mut w, version);
            let full = w.into_inner().freeze();
            let mut r = WireReader::new(full.clone());
            assert_eq!(
                DescribeClusterResponse::decode(&mut r, version).unwrap(),
                response
            );
            assert_every_prefix_refused(format_args!("v{version}"), &full, |r| {
                DescribeClusterResponse::decode(r, version)
            });
        }
    }
}
