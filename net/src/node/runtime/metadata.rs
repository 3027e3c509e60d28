//! The Metadata and DescribeCluster handlers (docs/clients.md): any node answers, from its
//! core's view (leader, epoch, voters, the leader's in-sync set) and its broker directory
//! (`node/brokers.rs`), with each broker's endpoint on the listener the request came in on.

use super::*;
use crate::security::acl::{Operation, Resource};
use crate::wire::kafka::DESCRIBE_CLUSTER;
use crate::wire::kafka::{
    ClusterBroker, DescribeClusterRequest, DescribeClusterResponse, MetadataPartition,
    MetadataRequest, MetadataResponse, MetadataTopic, AUTHORIZED_OPERATIONS_OMITTED,
    ENDPOINT_TYPE_BROKERS, METADATA,
};

/// Kafka's AclOperation codes, the bit positions of an "authorized operations" field.
fn acl_operation_code(operation: Operation) -> u32 {
    match operation {
        Operation::All => 2,
        Operation::Read => 3,
        Operation::Write => 4,
        Operation::Create => 5,
        Operation::Delete => 6,
        Operation::Alter => 7,
        Operation::Describe => 8,
        Operation::ClusterAction => 9,
        Operation::DescribeConfigs => 10,
        Operation::AlterConfigs => 11,
        Operation::IdempotentWrite => 12,
    }
}

/// What can be done to the topic and to the cluster in ringraft (the rest is not served).
const TOPIC_OPERATIONS: [Operation; 3] = [Operation::Read, Operation::Write, Operation::Describe];
const CLUSTER_OPERATIONS: [Operation; 4] = [
    Operation::Alter,
    Operation::Describe,
    Operation::ClusterAction,
    Operation::IdempotentWrite,
];

impl Node {
    pub(in crate::node) fn handle_metadata(&mut self, asked: Asked, request: MetadataRequest) {
        let seq = self.reserve_response(asked.conn);
        let response = self.metadata(asked.conn, &request);
        self.answer(asked, seq, |w, version| response.encode(w, version));
    }

    pub(in crate::node) fn handle_describe_cluster(
        &mut self,
        asked: Asked,
        request: DescribeClusterRequest,
    ) {
        let seq = self.reserve_response(asked.conn);
        let response = self.describe_cluster(asked.conn, &request);
        self.answer(asked, seq, |w, version| response.encode(w, version));
    }

    /// A response's size placeholder and header.
    pub(super) fn response_writer(&self, header: &RequestHeader, spec: &ApiSpec) -> WireWriter {
        let flexible = spec.response_header_flexible(header.api_version);
        inbound::response_start(header.correlation_id, flexible)
    }

    fn metadata(&self, conn: ConnId, request: &MetadataRequest) -> MetadataResponse {
        let allowed = self.access(conn, METADATA).is_ok();
        let topic_ops = request.include_topic_authorized_operations;
        let brokers = self.brokers_here(conn);
        let leader = listed_leader(self.replica.core().client_leader_id(), &brokers);
        let ours = || {
            if allowed {
                self.metadata_topic(conn, leader, topic_ops)
            } else {
                refused_topic(ErrorCode::TOPIC_AUTHORIZATION_FAILED, METADATA_TOPIC)
            }
        };
        let topics = match &request.topics {
            // A request for every topic lists those the principal may describe (Kafka's rule):
            // none, when it may not describe this one.
            None if !allowed => Vec::new(),
            None => vec![ours()],
            Some(asked) => asked
                .iter()
                .map(|topic| match topic.name.as_deref() {
                    Some(METADATA_TOPIC) => ours(),
                    // Never auto-created: only the log's own topic exists.
                    name => refused_topic(
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                        name.unwrap_or_default(),
                    ),
                })
                .collect(),
        };
        MetadataResponse {
            throttle_time_ms: 0,
            // Listed even when the topic is refused, as Kafka does.
            brokers,
            cluster_id: Some(self.config.cluster_id.clone()),
            controller_id: leader.unwrap_or(-1),
            topics,
            cluster_authorized_operations: if request.include_cluster_authorized_operations {
                self.authorized_operations(conn, &Resource::cluster(), &CLUSTER_OPERATIONS)
            } else {
                AUTHORIZED_OPERATIONS_OMITTED
            },
        }
    }

    /// `__cluster_metadata` with its one partition as this node sees it, `leader` being the
    /// leader as [`listed_leader`] names it.
    fn metadata_topic(
        &self,
        conn: ConnId,
        leader: Option<NodeId>,
        include_operations: bool,
    ) -> MetadataTopic {
        let epoch = self.replica.core().epoch();
        let voters = self.replica.core().voters().to_vec();
        let view = self.replica.core().replica_view();
        let isr = self.brokers.in_sync(leader, epoch, view.as_ref());
        let offline = voters
            .iter()
            .copied()
            .filter(|v| !isr.contains(v))
            .collect();
        MetadataTopic {
            error: ErrorCode::NONE,
            name: Some(METADATA_TOPIC.to_owned()),
            topic_id: [0; 16],
            is_internal: false,
            partitions: vec![MetadataPartition {
                // During an election, or while the leader's endpoint is unknown here, there is
                // no leader to send to: the client asks again.
                error: if leader.is_some() {
                    ErrorCode::NONE
                } else {
                    ErrorCode::LEADER_NOT_AVAILABLE
                },
                partition_index: METADATA_PARTITION,
                leader_id: leader.unwrap_or(-1),
                leader_epoch: epoch,
                replica_nodes: voters,
                isr_nodes: isr,
                offline_replicas: offline,
            }],
            topic_authorized_operations: if include_operations {
                self.authorized_operations(
                    conn,
                    &Resource::topic(METADATA_TOPIC),
                    &TOPIC_OPERATIONS,
                )
            } else {
                AUTHORIZED_OPERATIONS_OMITTED
            },
        }
    }

    fn describe_cluster(
        &self,
        conn: ConnId,
        request: &DescribeClusterRequest,
    ) -> DescribeClusterResponse {
        let mut response = DescribeClusterResponse {
            endpoint_type: request.endpoint_type,
            cluster_id: self.config.cluster_id.clone(),
            controller_id: self.replica.core().leader_id().unwrap_or(-1),
            ..DescribeClusterResponse::default()
        };
        if let Err(error) = self.access(conn, DESCRIBE_CLUSTER) {
            response.error = error;
            return response;
        }
        if request.endpoint_type != ENDPOINT_TYPE_BROKERS {
            response.error = ErrorCode::UNSUPPORTED_ENDPOINT_TYPE;
            response.error_message = Some("only broker endpoints (type 1) are served".into());
            return response;
        }
        response.brokers = self.brokers_here(conn);
        response.controller_id =
            listed_leader(self.replica.core().client_leader_id(), &response.brokers).unwrap_or(-1);
        if request.include_cluster_authorized_operations {
            response.cluster_authorized_operations =
                self.authorized_operations(conn, &Resource::cluster(), &CLUSTER_OPERATIONS);
        }
        response
    }

    /// The brokers with their endpoints on the listener `conn` came in on.
    pub(super) fn brokers_here(&self, conn: ConnId) -> Vec<ClusterBroker> {
        let Some(session) = self.sessions.get(&conn) else {
            return Vec::new();
        };
        self.brokers
            .brokers_on(&self.config.listeners.all[session.listener].name)
    }

    /// Kafka's bit field of the `operations` the caller may do on `resource`.
    fn authorized_operations(
        &self,
        conn: ConnId,
        resource: &Resource,
        operations: &[Operation],
    ) -> i32 {
        let Some(session) = self.sessions.get(&conn) else {
            return 0;
        };
        let principal = session.principal();
        let bits = operations
            .iter()
            .filter(|op| match &self.authorizer {
                None => true,
                Some(a) => a.authorize(&principal, session.addr.ip(), **op, resource),
            })
            .fold(0u32, |bits, op| bits | 1 << acl_operation_code(*op));
        bits as i32
    }
}

/// The leader a Metadata answer (or a Fetch refusal's hint) may name: the core's, when the same
/// answer lists its endpoint.
/// A node that knows who leads before it has learned where (just restarted, or before the
/// leader's broker list reached it) answers LEADER_NOT_AVAILABLE instead, as Kafka never names
/// a leader its brokers do not include: kafka-python 3.0's producer, given such a leader, fails
/// every send loop with UnknownBrokerIdError and never recovers (docs/clients.md).
pub(super) fn listed_leader(leader: Option<NodeId>, brokers: &[ClusterBroker]) -> Option<NodeId> {
    leader.filter(|id| brokers.iter().any(|b| b.node_id == *id))
}

/// A topic answered with an error and nothing else.
fn refused_topic(error: ErrorCode, name: &str) -> MetadataTopic {
    MetadataTopic {
        error,
        name: Some(name.to_owned()),
        topic_id: [0; 16],
        is_internal: false,
        partitions: Vec::new(),
        topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(node_id: i32) -> ClusterBroker {
        ClusterBroker {
            node_id,
            host: "127.0.0.1".into(),
            port: 9092 + node_id,
            rack: None,
        }
    }

    /// The leader is named only when the same answer lists its endpoint.
    #[test]
    fn a_leader_is_named_only_with_its_endpoint() {
        let brokers = [broker(1), broker(3)];
        assert_eq!(listed_leader(Some(3), &brokers), Some(3));
        assert_eq!(
            listed_leader(Some(2), &brokers),
            None,
            "endpoint not known here"
        );
        assert_eq!(listed_leader(None, &brokers), None);
        assert_eq!(listed_leader(Some(1), &[]), None);
    }
}
