//! TLS in the node (docs/security.md, "TLS" and "Voters trust only voters"): the listeners'
//! server configs, the client config peers are dialled with, the principal a client certificate
//! proves, the check that a dialled peer is the replica it should be, and the reload on SIGHUP.

use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use super::*;
use crate::security::principal::{KafkaPrincipal, SslPrincipalMapper};
use crate::security::tls::{
    client_config, server_config, subject_dn, ChainCheck, TlsConfigError, TlsSettings,
};

/// The TLS side of one listener.
pub(super) struct ListenerTls {
    pub(super) id: ListenerId,
    pub(super) mapper: SslPrincipalMapper,
}

/// What the node dials its peers with when the controller listener uses TLS.
pub(super) struct PeerTls {
    pub(super) config: Arc<ClientConfig>,
    /// The controller listener's mapping rules: a peer's certificate maps to its principal
    /// with the same rules the peer's own listener applies to ours.
    pub(super) mapper: SslPrincipalMapper,
}

fn tls_error(listener: &Listener, error: TlsConfigError) -> NodeError {
    NodeError::Tls(listener.name.clone(), error)
}

fn mapper(ssl: &SslSettings) -> SslPrincipalMapper {
    SslPrincipalMapper::parse(&ssl.principal_mapping_rules)
        .expect("the configuration checked the mapping rules")
}

/// Listens on `listener`: with TLS when its protocol says so.
pub(super) fn listen(
    ring: &mut EventLoop,
    listener: &Listener,
    addr: SocketAddr,
) -> Result<(ListenerId, Option<ListenerTls>), NodeError> {
    let Some(ssl) = listener
        .ssl
        .as_ref()
        .filter(|_| listener.protocol.uses_tls())
    else {
        return Ok((ring.listen(addr)?, None));
    };
    let config = server_config(&ssl.tls).map_err(|e| tls_error(listener, e))?;
    let id = ring.listen_tls(addr, config)?;
    Ok((
        id,
        Some(ListenerTls {
            id,
            mapper: mapper(ssl),
        }),
    ))
}

/// The client side for dialling peers, when the controller listener uses TLS.
pub(super) fn peer_tls(config: &NodeConfig) -> Result<Option<PeerTls>, NodeError> {
    let controller = config.listeners.controller();
    let Some(ssl) = controller.ssl.as_ref() else {
        return Ok(None);
    };
    Ok(Some(PeerTls {
        config: client_config(&ssl.tls).map_err(|e| tls_error(controller, e))?,
        mapper: mapper(ssl),
    }))
}

impl Node {
    /// Opens a connection to a peer at `addr`, known as `host`: over TLS when the controller
    /// listener uses it (the server's certificate must name `host`).
    pub(super) fn dial(&mut self, addr: SocketAddr, host: &str) -> Result<ConnId, String> {
        let Some(tls) = &self.peer_tls else {
            return self.ring.connect(addr).map_err(|e| e.to_string());
        };
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| format!("{host} is no server name: {e}"))?;
        self.ring
            .connect_tls(addr, tls.config.clone(), name)
            .map_err(|e| e.to_string())
    }

    /// The principal a TLS connection's certificate proves under `mapper`; None without a
    /// certificate. Err when the certificate does not map (the connection should close).
    fn certificate_principal(
        &self,
        conn: ConnId,
        mapper: &SslPrincipalMapper,
    ) -> Result<Option<KafkaPrincipal>, String> {
        let Some(info) = self.ring.tls_peer(conn) else {
            return Err("no TLS session".into());
        };
        let Some(leaf) = info.peer_certificates.first() else {
            return Ok(None);
        };
        let dn = subject_dn(leaf).map_err(|e| e.to_string())?;
        mapper
            .principal_of(&dn)
            .map(Some)
            .map_err(|e| format!("certificate {dn}: {e}"))
    }

    /// Settles what a connection on a TLS listener proved, at its first frame (the handshake
    /// is over by then): the principal of its certificate, or ANONYMOUS without one. False if
    /// the connection was closed instead.
    pub(super) fn settle_tls_identity(&mut self, conn: ConnId) -> bool {
        let Some(session) = self.sessions.get(&conn) else {
            return false;
        };
        if session.identity != Identity::Pending {
            return true;
        }
        let listener = &self.config.listeners.all[session.listener];
        if listener.protocol.uses_sasl() {
            return true; // SASL settles it
        }
        let Some(tls) = self.listener_tls[session.listener].as_ref() else {
            return true;
        };
        let identity = match self.certificate_principal(conn, &tls.mapper) {
            Ok(Some(principal)) => Identity::Proven(principal),
            Ok(None) => Identity::Anonymous,
            Err(why) => {
                warn!(
                    ?conn,
                    why, "a client certificate that maps to no principal: closing; add a rule for its subject \
                     to ssl.principal.mapping.rules (docs/security.md)"
                );
                self.close(conn, "unmapped certificate");
                return false;
            }
        };
        debug!(?conn, ?identity, "TLS identity");
        self.sessions
            .get_mut(&conn)
            .expect("checked above")
            .identity = identity;
        true
    }

    /// An outbound TLS connection to peer `expected` (a voter id, or None for a bootstrap
    /// server, which may be any replica) has just finished its handshake: the server must be
    /// that replica's principal. Anything else (another voter's certificate on this address, an
    /// operator's) is closed: a voter sends quorum requests only to the replica it means.
    pub(super) fn verify_peer(&mut self, conn: ConnId, expected: Option<NodeId>) -> bool {
        let Some(tls) = &self.peer_tls else {
            return true;
        };
        let principal = self.certificate_principal(conn, &tls.mapper);
        let replicas = &self.config.security.replica_principals;
        let replica = match &principal {
            Ok(Some(p)) => replicas.replica_of(p),
            _ => None,
        };
        let fits = match expected {
            Some(id) => replica == Some(id),
            None => replica.is_some(),
        };
        if !fits {
            warn!(
                ?conn,
                expected = ?expected,
                found = ?principal,
                "a dialled peer is not the replica it should be: closing; check that quorum.voters \
                 gives each voter the address of the host whose certificate names it \
                 (quorum.replica.principal, docs/security.md)"
            );
            self.close(conn, "peer is not the expected replica");
        }
        fits
    }

    /// SIGHUP: the TLS listeners' certificates and truststores again, for new handshakes
    /// (open connections keep their sessions); the peers' client config too.
    pub(super) fn reload_tls(&mut self) {
        let mut stale = Vec::new();
        for (index, listener) in self.config.listeners.all.iter().enumerate() {
            let (Some(ssl), Some(tls)) = (&listener.ssl, &self.listener_tls[index]) else {
                continue;
            };
            match server_config(&ssl.tls) {
                Ok(config) => match self.ring.set_listener_tls(tls.id, config) {
                    Ok(()) => {
                        info!(listener = %listener.name, "reloaded the TLS certificates");
                        stale.extend(self.connections_failing(tls.id, &ssl.tls));
                    }
                    Err(error) => tracing::error!(listener = %listener.name, %error, "TLS reload"),
                },
                Err(error) => tracing::error!(
                    listener = %listener.name,
                    %error,
                    "the TLS files did not load; the certificates in force stay"
                ),
            }
        }
        for conn in stale {
            warn!(
                ?conn,
                "its client certificate no longer verifies against the reloaded truststore: \
                 closing; reissue it from a CA the truststore holds, or put its CA back"
            );
            self.close(conn, "certificate no longer trusted");
        }
        match peer_tls(&self.config) {
            Ok(Some(tls)) => self.peer_tls = Some(tls),
            Ok(None) => {}
            Err(error) => tracing::error!(%error, "the peers' TLS files did not load"),
        }
    }

    /// The open connections of `listener` whose client certificate chain no longer verifies
    /// under `settings` (a CA removed from the truststore, a certificate expired since).
    fn connections_failing(&self, listener: ListenerId, settings: &TlsSettings) -> Vec<ConnId> {
        let check = match ChainCheck::new(settings) {
            Ok(Some(check)) => check,
            Ok(None) => return Vec::new(),
            Err(error) => {
                tracing::error!(%error, "cannot re-check the open connections");
                return Vec::new();
            }
        };
        self.ring
            .tls_connections()
            .into_iter()
            .filter(|(_, info)| info.listener == Some(listener))
            .filter(|(_, info)| !check.passes(&info.peer_certificates))
            .map(|(conn, _)| conn)
            .collect()
    }
}
