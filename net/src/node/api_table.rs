//! The APIs a node serves, one row each: the wire spec (key, version range, first flexible
//! version) and the handler that takes the request once its header is read. The table drives
//! both dispatch and the ApiVersions answer, so an API is served exactly when it is advertised.
//! Adding an API is a message with its codec, a handler, and a row here (docs/architecture.md,
//! "Adding an API").

use super::runtime::Node;
use crate::transport::ConnId;
use crate::wire::api::{self, ApiSpec};
use crate::wire::kafka::{API_VERSIONS_SPEC, PRODUCE_SPEC};
use crate::wire::{RequestHeader, WireReader};

/// Takes one request whose header has been read (the reader is at its body).
pub(crate) type Handler = fn(&mut Node, ConnId, &RequestHeader, &'static ApiSpec, WireReader);

pub(crate) struct ApiRow {
    pub(crate) spec: ApiSpec,
    pub(crate) handler: Handler,
}

const fn quorum(spec: ApiSpec) -> ApiRow {
    ApiRow {
        spec,
        handler: Node::handle_quorum_request,
    }
}

/// Every API this node serves, in the order ApiVersions lists them.
pub(crate) static API_TABLE: [ApiRow; 8] = [
    ApiRow {
        spec: PRODUCE_SPEC,
        handler: Node::handle_produce,
    },
    ApiRow {
        spec: API_VERSIONS_SPEC,
        handler: Node::handle_api_versions,
    },
    quorum(api::QUORUM_APIS[0]),
    quorum(api::QUORUM_APIS[1]),
    quorum(api::QUORUM_APIS[2]),
    quorum(api::QUORUM_APIS[3]),
    quorum(api::QUORUM_APIS[4]),
    quorum(api::QUORUM_APIS[5]),
];

/// The row of api key `key`, if this node serves it.
pub(crate) fn row(key: i16) -> Option<&'static ApiRow> {
    API_TABLE.iter().find(|row| row.spec.key == key)
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
        assert!(
            row(api::ALTER_QUORUM).is_none(),
            "not served yet, so not advertised"
        );
    }
}
