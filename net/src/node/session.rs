//! What an inbound connection is: the listener it came in on, the peer's address, and what it
//! has proven about who it is (docs/security.md). Logic only; the runtime owns one per inbound
//! connection.

use std::net::SocketAddr;

use engine::raft::Sender;

use crate::security::principal::{KafkaPrincipal, ReplicaPrincipals};

/// What a connection has proven about its principal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Identity {
    /// Nothing yet: a TLS connection before its first frame (the certificate is read then), or
    /// a SASL connection before it authenticated.
    Pending,
    /// Nothing can be proven (PLAINTEXT, or TLS without a client certificate): the principal is
    /// User:ANONYMOUS and every claim is taken as made.
    Anonymous,
    /// A client certificate or SASL proved this principal.
    Proven(KafkaPrincipal),
}

/// One inbound connection's standing.
#[derive(Debug)]
pub(crate) struct Session {
    /// Index in `NodeConfig::listeners.all`.
    pub(crate) listener: usize,
    pub(crate) addr: SocketAddr,
    pub(crate) identity: Identity,
    /// Whether its refused transactional batches were logged already (once per connection).
    pub(crate) warned_transactional: bool,
}

impl Session {
    pub(crate) fn new(listener: usize, addr: SocketAddr, identity: Identity) -> Self {
        Self {
            listener,
            addr,
            identity,
            warned_transactional: false,
        }
    }

    /// The principal requests are authorized as.
    pub(crate) fn principal(&self) -> KafkaPrincipal {
        match &self.identity {
            Identity::Proven(principal) => principal.clone(),
            Identity::Pending | Identity::Anonymous => KafkaPrincipal::anonymous(),
        }
    }

    /// The replica this connection may speak for, as the core's admission checks take it: a
    /// proven replica principal speaks for its replica only, any other proven principal for
    /// none, and an unproven connection is taken at its word (PLAINTEXT).
    pub(crate) fn sender(&self, replicas: &ReplicaPrincipals) -> Sender {
        match &self.identity {
            Identity::Proven(principal) => replicas
                .replica_of(principal)
                .map_or(Sender::NotAReplica, Sender::Replica),
            Identity::Pending | Identity::Anonymous => Sender::Unverified,
        }
    }

    /// Whether this connection proved it is replica `id`'s principal.
    pub(crate) fn is_replica(&self, replicas: &ReplicaPrincipals) -> bool {
        matches!(self.sender(replicas), Sender::Replica(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(identity: Identity) -> Session {
        Session::new(0, "127.0.0.1:1".parse().unwrap(), identity)
    }

    #[test]
    fn only_a_proven_replica_principal_speaks_for_a_replica() {
        let replicas = ReplicaPrincipals::parse("User:ringraft-{id}").unwrap();
        let proven = |name: &str| session(Identity::Proven(KafkaPrincipal::user(name)));
        assert_eq!(proven("ringraft-2").sender(&replicas), Sender::Replica(2));
        assert!(proven("ringraft-2").is_replica(&replicas));
        assert_eq!(proven("alice").sender(&replicas), Sender::NotAReplica);
        assert_eq!(proven("ringraft-02").sender(&replicas), Sender::NotAReplica);
        assert_eq!(
            session(Identity::Anonymous).sender(&replicas),
            Sender::Unverified
        );
        assert_eq!(
            session(Identity::Anonymous).principal(),
            KafkaPrincipal::anonymous()
        );
        assert_eq!(
            session(Identity::Pending).principal(),
            KafkaPrincipal::anonymous()
        );
        assert_eq!(proven("alice").principal(), KafkaPrincipal::user("alice"));
    }
}
