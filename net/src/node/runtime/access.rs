//! Who may send what (docs/security.md, "Principals and ACLs"): the authorizer over the
//! session's principal for the operation each API needs, the implicit CLUSTER_ACTION of the
//! replicas' own principals, and the replica a quorum request may speak for.

use super::*;
use crate::security::acl::{Operation, Resource, ResourceType};
use crate::security::authorizer::{denied_error, required, Authorizer, AuthorizerConfig};

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
    /// the Kafka error code that refuses it (TOPIC_ or CLUSTER_AUTHORIZATION_FAILED).
    pub(super) fn access(&self, conn: ConnId, key: i16) -> Result<Sender, ErrorCode> {
        let Some(session) = self.sessions.get(&conn) else {
            return Err(ErrorCode::CLUSTER_AUTHORIZATION_FAILED);
        };
        let replicas = &self.config.security.replica_principals;
        let sender = session.sender(replicas);
        let Some((operation, resource_type)) = required(key) else {
            return Ok(sender);
        };
        // A replica's own principal may make the quorum RPCs without an ACL; what it may say
        // in them is the core's admission check (only for itself).
        if operation == Operation::ClusterAction && session.is_replica(replicas) {
            return Ok(sender);
        }
        let Some(authorizer) = &self.authorizer else {
            return Ok(sender);
        };
        let resource = match resource_type {
            ResourceType::Topic => Resource::topic(METADATA_TOPIC),
            _ => Resource::cluster(),
        };
        if authorizer.authorize(
            &session.principal(),
            session.addr.ip(),
            operation,
            &resource,
        ) {
            Ok(sender)
        } else {
            Err(denied_error(resource_type))
        }
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
