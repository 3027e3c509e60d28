//! Who may send what (docs/security.md, "Principals and ACLs"): the authorizer over the
//! session's principal for the operation each API needs, the implicit CLUSTER_ACTION of the
//! replicas' own principals, and the replica a quorum request may speak for.

use std::net::IpAddr;

use super::*;
use crate::security::acl::{Operation, Resource, ResourceType};
use crate::security::authorizer::{denied_error, Authorization, Authorizer, AuthorizerConfig};
use crate::security::principal::KafkaPrincipal;

/// The authorizer a node starts with: None without `authorizer.acl.file` (every principal may
/// do everything, and the node says so).
pub(super) fn load_authorizer(config: &NodeConfig) -> Result<Option<Arc<Authorizer>>, NodeError> {
    let security = &config.security;
    let Some(acl_file) = &security.acl_file else {
        warn!(
            node = config.broker_id,
            "no authorizer.acl.file: every principal may do everything; set one for a cluster \
             others can reach (docs/security.md)"
        );
        return Ok(None);
    };
    let loaded = authorizer_config(config, acl_file.clone())
        .load()
        .map_err(NodeError::Acl)?;
    info!(
        node = config.broker_id,
        acls = loaded.acls().len(),
        file = %acl_file.display(),
        "loaded the ACLs"
    );
    Ok(Some(Arc::new(loaded)))
}

fn authorizer_config(config: &NodeConfig, acl_file: std::path::PathBuf) -> AuthorizerConfig {
    AuthorizerConfig {
        acl_file,
        super_users: config.security.super_users.clone(),
        allow_everyone_if_no_acl_found: config.security.allow_everyone_if_no_acl_found,
    }
}

impl Node {
    /// Whether `conn` may make a request of api `key`: Ok with the replica it may speak for, or
    /// the Kafka error code that refuses it (TOPIC_ or CLUSTER_AUTHORIZATION_FAILED). What the
    /// key needs is its row's in the API table; a key with no row is refused.
    pub(super) fn access(&self, conn: ConnId, key: i16) -> Result<Sender, ErrorCode> {
        let Some(session) = self.sessions.get(&conn) else {
            return Err(ErrorCode::CLUSTER_AUTHORIZATION_FAILED);
        };
        let replicas = &self.config.security.replica_principals;
        let sender = session.sender(replicas);
        let asker = Asker {
            principal: session.principal(),
            host: session.addr.ip(),
            replica: session.is_replica(replicas),
        };
        decide(
            api_table::authorization(key),
            &asker,
            self.authorizer.as_deref(),
        )
        .map(|()| sender)
    }

    /// A quorum request its sender may not make: answered with the error and nothing else
    /// (the core never sees it), and reported like any refused message.
    pub(super) fn refuse_quorum_request(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        spec: &'static ApiSpec,
        request: &Request,
        error: ErrorCode,
    ) {
        let principal = self
            .sessions
            .get(&conn)
            .map(|s| s.principal().to_string())
            .unwrap_or_default();
        let reason = format!("{} from {principal}: {error}", spec.name);
        let seq = self.reserve_response(conn);
        let w = self.response_writer(header, spec);
        let chain = quorum::encode_response(&request.refusal(error), w);
        self.deliver(conn, seq, chain);
        self.log_refusal_from(conn, &reason);
    }

    /// SIGHUP: the ACL file again; a file that does not load keeps the ACLs in force.
    pub(super) fn reload_acls(&mut self) {
        let (Some(acl_file), Some(current)) =
            (&self.config.security.acl_file, &mut self.authorizer)
        else {
            return;
        };
        match authorizer_config(&self.config, acl_file.clone()).reload(current) {
            Ok(()) => info!(acls = current.acls().len(), "reloaded the ACLs"),
            Err(error) => {
                tracing::error!(%error, "the ACL file did not load; the ACLs in force stay")
            }
        }
    }
}

/// Who asks, as the access decision needs it.
struct Asker {
    principal: KafkaPrincipal,
    host: IpAddr,
    /// One of the replicas' own principals (docs/security.md, "Principals and ACLs").
    replica: bool,
}

/// The access decision, pure: `authorization` is what the API's row declares (None: the key
/// has no row), `authorizer` the ACLs in force (None: no `authorizer.acl.file`). Fails closed:
/// a key with no row is refused whoever asks, with or without ACLs.
fn decide(
    authorization: Option<Authorization>,
    asker: &Asker,
    authorizer: Option<&Authorizer>,
) -> Result<(), ErrorCode> {
    let (operation, resource_type) = match authorization {
        None => return Err(ErrorCode::CLUSTER_AUTHORIZATION_FAILED),
        Some(Authorization::NoneNeeded) => return Ok(()),
        Some(Authorization::Required(operation, resource_type)) => (operation, resource_type),
    };
    // A replica's own principal may make the quorum RPCs without an ACL; what it may say in
    // them is the core's admission check (only for itself).
    if operation == Operation::ClusterAction && asker.replica {
        return Ok(());
    }
    let Some(authorizer) = authorizer else {
        return Ok(());
    };
    let resource = match resource_type {
        ResourceType::Topic => Resource::topic(METADATA_TOPIC),
        // A group is named by the request: only `Node::access_group` (groups.rs) can check
        // it, so a check without the name refuses (fail-closed).
        ResourceType::Group => return Err(denied_error(ResourceType::Group)),
        _ => Resource::cluster(),
    };
    if authorizer.authorize(&asker.principal, asker.host, operation, &resource) {
        Ok(())
    } else {
        Err(denied_error(resource_type))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::parse_acl_file;

    fn asker(name: &str, replica: bool) -> Asker {
        Asker {
            principal: KafkaPrincipal::user(name),
            host: "127.0.0.1".parse().unwrap(),
            replica,
        }
    }

    /// Keys no row serves: in Kafka's range, ringraft's private one, and negative.
    const UNKNOWN_KEYS: [i16; 5] = [-1, 4, 32, 999, 1010];

    #[test]
    fn a_key_with_no_row_is_refused_whoever_asks() {
        let open = Authorizer::new(Vec::new(), Vec::new(), true);
        let root = Authorizer::new(Vec::new(), vec![KafkaPrincipal::user("root")], false);
        let everyone = Authorizer::new(
            parse_acl_file("allow User:* ALL topic:* from *\nallow User:* ALL cluster:* from *")
                .unwrap(),
            Vec::new(),
            false,
        );
        for key in UNKNOWN_KEYS {
            assert_eq!(api_table::authorization(key), None, "{key} has a row");
            for authorizer in [None, Some(&open), Some(&root), Some(&everyone)] {
                for asker in [asker("root", false), asker("node1", true)] {
                    assert_eq!(
                        decide(api_table::authorization(key), &asker, authorizer),
                        Err(ErrorCode::CLUSTER_AUTHORIZATION_FAILED),
                        "key {key}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_row_is_checked_as_it_declares() {
        let nobody = Authorizer::new(Vec::new(), Vec::new(), false);
        let alice = asker("alice", false);
        let produce = api_table::authorization(crate::wire::kafka::PRODUCE);
        let vote = api_table::authorization(api::VOTE);
        let versions = api_table::authorization(api::API_VERSIONS);
        // Without ACLs every row is open; with ACLs that grant nothing only the handshake.
        for key in [produce, vote, versions] {
            assert_eq!(decide(key, &alice, None), Ok(()));
        }
        assert_eq!(decide(versions, &alice, Some(&nobody)), Ok(()));
        assert_eq!(
            decide(produce, &alice, Some(&nobody)),
            Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
        );
        assert_eq!(
            decide(vote, &alice, Some(&nobody)),
            Err(ErrorCode::CLUSTER_AUTHORIZATION_FAILED)
        );
        // A replica's own principal makes the quorum RPCs without an ACL, and nothing else.
        let replica = asker("node1", true);
        assert_eq!(decide(vote, &replica, Some(&nobody)), Ok(()));
        assert_eq!(
            decide(produce, &replica, Some(&nobody)),
            Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
        );
    }

    /// A group row checked without the group's name (only `Node::access_group` has it) is
    /// refused whenever ACLs are loaded, even ones that grant every group: fail-closed.
    #[test]
    fn a_group_row_without_its_group_is_refused() {
        let every_group = Authorizer::new(
            parse_acl_file("allow User:* ALL group:* from *").unwrap(),
            Vec::new(),
            false,
        );
        let join = api_table::authorization(crate::wire::kafka::JOIN_GROUP);
        let fetch = api_table::authorization(crate::wire::kafka::OFFSET_FETCH);
        for key in [join, fetch] {
            assert_eq!(
                decide(key, &asker("alice", false), Some(&every_group)),
                Err(ErrorCode::GROUP_AUTHORIZATION_FAILED)
            );
            assert_eq!(decide(key, &asker("alice", false), None), Ok(()));
        }
    }
}
