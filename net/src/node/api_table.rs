//! The APIs a node serves, one row each: the wire spec (key, version range, first flexible
//! version), the handler that takes the request once its header is read, and the authorization
//! it needs. The table drives dispatch, the ApiVersions answer and the access check, so an API
//! is served exactly when it is advertised, and only as its row says; a key with no row is
//! refused (docs/security.md, "The operation each API needs"). Adding an API is a message with
//! its codec, a handler, and a row here (docs/architecture.md, "Adding an API").

use super::runtime::Node;
use crate::security::acl::Operation::{
    Alter, ClusterAction, Delete, Describe, IdempotentWrite, Read, Write,
};
use crate::security::acl::ResourceType::{Cluster, Group, Topic};
use crate::security::authorizer::Authorization::{self, NoneNeeded, Required};
use crate::transport::ConnId;
use crate::wire::api::{self, ApiSpec};
use crate::wire::kafka::{
    ApiVersionsRequest, DescribeClusterRequest, FetchRequest, FindCoordinatorRequest,
    HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest,
    OffsetForLeaderEpochRequest, SaslAuthenticateRequest, SaslHandshakeRequest, SyncGroupRequest,
    API_VERSIONS_SPEC, DESCRIBE_CLUSTER_SPEC, FETCH_SPEC, FIND_COORDINATOR_SPEC, HEARTBEAT_SPEC,
    INIT_PRODUCER_ID_SPEC, JOIN_GROUP_SPEC, LEAVE_GROUP_SPEC, LIST_OFFSETS_SPEC, METADATA_SPEC,
    OFFSET_COMMIT_SPEC, OFFSET_FETCH_SPEC, OFFSET_FOR_LEADER_EPOCH_SPEC, PRODUCE_SPEC,
    SASL_AUTHENTICATE_SPEC, SASL_HANDSHAKE_SPEC, SYNC_GROUP_SPEC,
};
use crate::wire::kafka::{
    DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest, OffsetDeleteRequest,
    DELETE_GROUPS_SPEC, DESCRIBE_GROUPS_SPEC, LIST_GROUPS_SPEC, OFFSET_DELETE_SPEC,
};
use crate::wire::{RequestHeader, WireReader};

/// A request whose header has been read: the connection it came on, its header, and its row's
/// spec (how its response header is written).
#[derive(Clone, Copy)]
pub(crate) struct Asked<'a> {
    pub(crate) conn: ConnId,
    pub(crate) header: &'a RequestHeader,
    pub(crate) spec: &'static ApiSpec,
}

impl Asked<'_> {
    /// The request's api key and version, as a log line names them.
    pub(crate) fn at(&self) -> Option<(i16, i16)> {
        named(self.header)
    }
}

/// The api key and version of a request whose header was read, as a log line names them.
pub(crate) fn named(header: &RequestHeader) -> Option<(i16, i16)> {
    Some((header.api_key, header.api_version))
}

/// Takes one request whose header has been read (the reader is at its body). Most rows hand
/// the body to their handler decoded, through `Node::decoded`.
pub(crate) type Handler = fn(&mut Node, Asked<'_>, WireReader);

/// Which listeners serve an API (docs/configuration.md, "Listeners"). With one listener it
/// serves every API; with several, the controller listener serves the quorum RPCs and the others
/// Kafka's client APIs, so a client listener open to users never takes a Vote. A row marked
/// `sasl` is further served only on listeners whose protocol uses SASL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every listener (ApiVersions, DescribeQuorum; the SASL APIs on every SASL listener).
    Any,
    /// The controller listener.
    Quorum,
    /// The client listeners.
    Client,
}

/// One API. No field has a default: a row that does not say what its API needs (its
/// `authorization`) does not compile.
pub(crate) struct ApiRow {
    pub(crate) spec: ApiSpec,
    pub(crate) handler: Handler,
    pub(crate) scope: Scope,
    /// Served only on listeners that use SASL (SASL_PLAINTEXT, SASL_SSL): SaslHandshake and
    /// SaslAuthenticate, which a PLAINTEXT or SSL listener neither advertises nor takes.
    pub(crate) sasl: bool,
    /// The operation and resource kind a request needs (`Node::access` checks it), or
    /// `NoneNeeded` for the handshake APIs, declared as such.
    pub(crate) authorization: Authorization,
}

/// The row of a quorum RPC: its authorization is declared at each call, as in any row.
const fn quorum(spec: ApiSpec, authorization: Authorization) -> ApiRow {
    ApiRow {
        spec,
        handler: Node::handle_quorum_request,
        // The admin APIs are for operators' tools on any listener; ACLs guard them
        // (DESCRIBE / ALTER on CLUSTER).
        scope: if spec.key == api::DESCRIBE_QUORUM || spec.key == api::ALTER_QUORUM {
            Scope::Any
        } else {
            Scope::Quorum
        },
        sasl: false,
        authorization,
    }
}

/// Every API this node serves, in the order ApiVersions lists them.
pub(crate) static API_TABLE: [ApiRow; 28] = [
    ApiRow {
        spec: PRODUCE_SPEC,
        handler: Node::handle_produce,
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Write, Topic),
    },
    ApiRow {
        spec: METADATA_SPEC,
        handler: |node, asked, r| {
            node.decoded(asked, r, MetadataRequest::decode, Node::handle_metadata)
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Describe, Topic),
    },
    ApiRow {
        spec: SASL_HANDSHAKE_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                SaslHandshakeRequest::decode,
                Node::handle_sasl_handshake,
            )
        },
        scope: Scope::Any,
        sasl: true,
        authorization: NoneNeeded,
    },
    ApiRow {
        spec: API_VERSIONS_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                ApiVersionsRequest::decode,
                Node::handle_api_versions,
            )
        },
        scope: Scope::Any,
        sasl: false,
        authorization: NoneNeeded,
    },
    ApiRow {
        spec: SASL_AUTHENTICATE_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                SaslAuthenticateRequest::decode,
                Node::handle_sasl_authenticate,
            )
        },
        scope: Scope::Any,
        sasl: true,
        authorization: NoneNeeded,
    },
    ApiRow {
        spec: DESCRIBE_CLUSTER_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                DescribeClusterRequest::decode,
                Node::handle_describe_cluster,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Describe, Cluster),
    },
    ApiRow {
        spec: FETCH_SPEC,
        handler: |node, asked, r| node.decoded(asked, r, FetchRequest::decode, Node::handle_fetch),
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Read, Topic),
    },
    ApiRow {
        spec: LIST_OFFSETS_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                ListOffsetsRequest::decode,
                Node::handle_list_offsets,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Read, Topic),
    },
    ApiRow {
        spec: OFFSET_FOR_LEADER_EPOCH_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                OffsetForLeaderEpochRequest::decode,
                Node::handle_offset_for_leader_epoch,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Describe, Topic),
    },
    ApiRow {
        spec: INIT_PRODUCER_ID_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                InitProducerIdRequest::decode,
                Node::handle_init_producer_id,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(IdempotentWrite, Cluster),
    },
    // Consumer groups (docs/protocol.md, "Consumer groups"): the group named in the request is
    // the resource; READ to take part and commit, DESCRIBE to look (docs/security.md).
    ApiRow {
        spec: OFFSET_COMMIT_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                OffsetCommitRequest::decode,
                Node::handle_offset_commit,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Read, Group),
    },
    ApiRow {
        spec: OFFSET_FETCH_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                OffsetFetchRequest::decode,
                Node::handle_offset_fetch,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Describe, Group),
    },
    ApiRow {
        spec: FIND_COORDINATOR_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                FindCoordinatorRequest::decode,
                Node::handle_find_coordinator,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Describe, Group),
    },
    ApiRow {
        spec: JOIN_GROUP_SPEC,
        handler: |node, asked, r| {
            node.decoded(asked, r, JoinGroupRequest::decode, Node::handle_join_group)
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Read, Group),
    },
    ApiRow {
        spec: HEARTBEAT_SPEC,
        handler: |node, asked, r| {
            node.decoded(asked, r, HeartbeatRequest::decode, Node::handle_heartbeat)
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Read, Group),
    },
    ApiRow {
        spec: LEAVE_GROUP_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                LeaveGroupRequest::decode,
                Node::handle_leave_group,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Read, Group),
    },
    ApiRow {
        spec: SYNC_GROUP_SPEC,
        handler: |node, asked, r| {
            node.decoded(asked, r, SyncGroupRequest::decode, Node::handle_sync_group)
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Read, Group),
    },
    ApiRow {
        spec: DESCRIBE_GROUPS_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                DescribeGroupsRequest::decode,
                Node::handle_describe_groups,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Describe, Group),
    },
    ApiRow {
        spec: LIST_GROUPS_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                ListGroupsRequest::decode,
                Node::handle_list_groups,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Describe, Group),
    },
    ApiRow {
        spec: DELETE_GROUPS_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                DeleteGroupsRequest::decode,
                Node::handle_delete_groups,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Delete, Group),
    },
    ApiRow {
        spec: OFFSET_DELETE_SPEC,
        handler: |node, asked, r| {
            node.decoded(
                asked,
                r,
                OffsetDeleteRequest::decode,
                Node::handle_offset_delete,
            )
        },
        scope: Scope::Client,
        sasl: false,
        authorization: Required(Delete, Group),
    },
    // The replicas' own RPCs: CLUSTER_ACTION, which a replica's own principal has without an
    // ACL (net/src/node/runtime/access.rs).
    quorum(api::QUORUM_APIS[0], Required(ClusterAction, Cluster)), // Vote
    quorum(api::QUORUM_APIS[1], Required(ClusterAction, Cluster)), // BeginQuorumEpoch
    quorum(api::QUORUM_APIS[2], Required(ClusterAction, Cluster)), // EndQuorumEpoch
    quorum(api::QUORUM_APIS[3], Required(Describe, Cluster)),      // DescribeQuorum
    quorum(api::QUORUM_APIS[4], Required(ClusterAction, Cluster)), // FetchQuorumRecords
    quorum(api::QUORUM_APIS[5], Required(ClusterAction, Cluster)), // FindQuorum
    quorum(api::ALTER_QUORUM_SPEC, Required(Alter, Cluster)),
];

/// The row of api key `key`, if this node serves it.
pub(crate) fn row(key: i16) -> Option<&'static ApiRow> {
    API_TABLE.iter().find(|row| row.spec.key == key)
}

/// What a request of api key `key` needs, from its row; None for a key with no row, which
/// nothing may use.
pub(crate) fn authorization(key: i16) -> Option<Authorization> {
    row(key).map(|row| row.authorization)
}

impl ApiRow {
    /// Whether a listener that serves the quorum RPCs (`quorum`) and/or the client APIs
    /// (`clients`), and uses SASL or not (`sasl`), serves this API.
    pub(crate) fn served_on(&self, quorum: bool, clients: bool, sasl: bool) -> bool {
        if self.sasl && !sasl {
            return false;
        }
        match self.scope {
            Scope::Any => true,
            Scope::Quorum => quorum,
            Scope::Client => clients,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_once_and_every_quorum_rpc_served() {
        let mut keys: Vec<i16> = API_TABLE.iter().map(|r| r.spec.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), API_TABLE.len(), "a key in two rows");
        for spec in api::QUORUM_APIS {
            assert_eq!(row(spec.key).map(|r| r.spec), Some(spec));
        }
        assert_eq!(
            row(api::ALTER_QUORUM).map(|r| (r.spec, r.scope)),
            Some((api::ALTER_QUORUM_SPEC, Scope::Any))
        );
    }

    /// The whole table's authorization, row by row: what docs/security.md ("The operation each
    /// API needs") promises. A row added without its line here fails.
    #[test]
    fn every_row_declares_what_it_needs() {
        let expected: &[(i16, Authorization)] = &[
            (PRODUCE_SPEC.key, Required(Write, Topic)),
            (FETCH_SPEC.key, Required(Read, Topic)),
            (LIST_OFFSETS_SPEC.key, Required(Read, Topic)),
            (METADATA_SPEC.key, Required(Describe, Topic)),
            (OFFSET_FOR_LEADER_EPOCH_SPEC.key, Required(Describe, Topic)),
            (
                INIT_PRODUCER_ID_SPEC.key,
                Required(IdempotentWrite, Cluster),
            ),
            (api::DESCRIBE_QUORUM, Required(Describe, Cluster)),
            (DESCRIBE_CLUSTER_SPEC.key, Required(Describe, Cluster)),
            (api::ALTER_QUORUM, Required(Alter, Cluster)),
            (api::VOTE, Required(ClusterAction, Cluster)),
            (api::BEGIN_QUORUM_EPOCH, Required(ClusterAction, Cluster)),
            (api::END_QUORUM_EPOCH, Required(ClusterAction, Cluster)),
            (api::FETCH_QUORUM_RECORDS, Required(ClusterAction, Cluster)),
            (api::FIND_QUORUM, Required(ClusterAction, Cluster)),
            (OFFSET_COMMIT_SPEC.key, Required(Read, Group)),
            (OFFSET_FETCH_SPEC.key, Required(Describe, Group)),
            (FIND_COORDINATOR_SPEC.key, Required(Describe, Group)),
            (JOIN_GROUP_SPEC.key, Required(Read, Group)),
            (HEARTBEAT_SPEC.key, Required(Read, Group)),
            (LEAVE_GROUP_SPEC.key, Required(Read, Group)),
            (SYNC_GROUP_SPEC.key, Required(Read, Group)),
            (DESCRIBE_GROUPS_SPEC.key, Required(Describe, Group)),
            (LIST_GROUPS_SPEC.key, Required(Describe, Group)),
            (DELETE_GROUPS_SPEC.key, Required(Delete, Group)),
            (OFFSET_DELETE_SPEC.key, Required(Delete, Group)),
            (api::API_VERSIONS, NoneNeeded),
            (SASL_HANDSHAKE_SPEC.key, NoneNeeded),
            (SASL_AUTHENTICATE_SPEC.key, NoneNeeded),
        ];
        assert_eq!(
            expected.len(),
            API_TABLE.len(),
            "a row without its line here"
        );
        for row in &API_TABLE {
            let line = expected.iter().find(|(key, _)| *key == row.spec.key);
            assert_eq!(
                line.map(|(_, needs)| *needs),
                Some(row.authorization),
                "{}",
                row.spec.name
            );
        }
        // Only the handshake APIs go unchecked, and every one of them is on a row.
        let unchecked: Vec<&str> = API_TABLE
            .iter()
            .filter(|row| row.authorization == NoneNeeded)
            .map(|row| row.spec.name)
            .collect();
        assert_eq!(
            unchecked,
            ["SaslHandshake", "ApiVersions", "SaslAuthenticate"]
        );
        // A key with no row needs nothing *because* nothing may use it: no authorization at
        // all, which `Node::access` refuses (access.rs).
        for key in (-1..=100).chain(999..=1010) {
            if row(key).is_none() {
                assert_eq!(authorization(key), None, "api key {key}");
            }
        }
    }

    #[test]
    fn a_client_listener_takes_no_quorum_rpc_and_a_controller_listener_no_produce() {
        let served = |quorum, clients| -> Vec<i16> {
            API_TABLE
                .iter()
                .filter(|r| r.served_on(quorum, clients, false))
                .map(|r| r.spec.key)
                .collect()
        };
        let client = served(false, true);
        let controller = served(true, false);
        for key in [
            api::VOTE,
            api::BEGIN_QUORUM_EPOCH,
            api::END_QUORUM_EPOCH,
            api::FETCH_QUORUM_RECORDS,
            api::FIND_QUORUM,
        ] {
            assert!(!client.contains(&key) && controller.contains(&key), "{key}");
        }
        for key in [
            PRODUCE_SPEC.key,
            METADATA_SPEC.key,
            DESCRIBE_CLUSTER_SPEC.key,
        ] {
            assert!(client.contains(&key) && !controller.contains(&key), "{key}");
        }
        for key in [api::API_VERSIONS, api::DESCRIBE_QUORUM, api::ALTER_QUORUM] {
            assert!(client.contains(&key) && controller.contains(&key), "{key}");
        }
        assert_eq!(
            served(true, true).len(),
            API_TABLE.len() - 2,
            "one listener serves all but the SASL APIs"
        );
    }

    #[test]
    fn the_sasl_apis_are_served_on_sasl_listeners_only() {
        let sasl_keys = [SASL_HANDSHAKE_SPEC.key, SASL_AUTHENTICATE_SPEC.key];
        for (quorum, clients) in [(true, false), (false, true), (true, true)] {
            let served = |sasl| -> Vec<i16> {
                API_TABLE
                    .iter()
                    .filter(|r| r.served_on(quorum, clients, sasl))
                    .map(|r| r.spec.key)
                    .collect()
            };
            let (with, without) = (served(true), served(false));
            for key in sasl_keys {
                assert!(with.contains(&key) && !without.contains(&key), "{key}");
            }
            // Otherwise SASL changes nothing: the same APIs, ApiVersions among them.
            let rest: Vec<i16> = with
                .iter()
                .copied()
                .filter(|k| !sasl_keys.contains(k))
                .collect();
            assert_eq!(rest, without);
            assert!(without.contains(&api::API_VERSIONS));
        }
        for key in sasl_keys {
            let row = row(key).unwrap();
            assert_eq!(row.scope, Scope::Any);
            assert!(row.sasl);
        }
    }
}
