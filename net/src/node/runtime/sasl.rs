//! SASL on the SASL_PLAINTEXT and SASL_SSL listeners (docs/security.md, "SASL"): the
//! SaslHandshake and SaslAuthenticate handlers (rows of api_table.rs), each connection's
//! exchange, the gate that lets only ApiVersions and the SASL APIs through before a connection
//! has authenticated, the delayed close after a failed authentication, and the credentials'
//! reload on SIGHUP.
//!
//! A connection's principal is the user its exchange authenticated, never its TLS
//! certificate's. PLAIN steps (one PBKDF2 each) run on the SASL worker thread
//! (sasl_worker.rs); SCRAM steps run inline: the server side derives no key.
//!
//! After a v0 SaslHandshake the client speaks Kafka's legacy framing: its next frames are raw
//! size-prefixed SASL tokens, answered the same way, until the exchange is done. A failure
//! there has no answer (Kafka's neither): the connection is closed after the same delay.

use super::*;
use crate::node::sasl_worker::{SaslWorker, StepDone, StepJob};
use crate::security::authorizer::Authorization;
use crate::security::credentials::CredentialStore;
use crate::security::principal::KafkaPrincipal;
use crate::security::sasl::{Mechanism, SaslError, SaslServer, SaslStep};
use crate::wire::kafka::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    ILLEGAL_SASL_STATE, SASL_AUTHENTICATE_SPEC, SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
};

/// A failed connection whose answer is still being sent when its delay is over waits this
/// much longer, at most [`MAX_CLOSE_RETRIES`] times, so the answer is not cut off.
const CLOSE_RETRY_MS: u64 = 10;
const MAX_CLOSE_RETRIES: u32 = 100;

/// Where one SASL connection stands.
enum Phase {
    /// No successful SaslHandshake yet.
    Handshake,
    /// The exchange of `mechanism` is under way; `server` is None while a step of it runs on
    /// the worker. `legacy`: after a v0 handshake, the tokens come as raw frames.
    Exchange {
        mechanism: Mechanism,
        server: Option<Box<SaslServer>>,
        legacy: bool,
    },
    Authenticated,
    /// Closed at `deadline_ms` (node time); nothing it sends is read meanwhile.
    Failed {
        deadline_ms: u64,
        retries: u32,
    },
}

/// Where the answer to a step goes.
#[derive(Clone, Copy, Debug)]
enum Reply {
    /// A SaslAuthenticate response.
    Kafka {
        seq: u64,
        correlation_id: i32,
        version: i16,
    },
    /// A raw size-prefixed token (the legacy framing after a v0 handshake).
    Legacy { seq: u64 },
}

/// The SASL side of the node (empty unless a listener uses SASL).
pub(super) struct SaslRuntime {
    /// Loaded at start when a listener uses SASL; replaced on SIGHUP. An exchange keeps the
    /// store it started with.
    credentials: Option<Arc<CredentialStore>>,
    /// Every open connection on a SASL listener.
    phases: BTreeMap<ConnId, Phase>,
    /// Runs PLAIN steps; present when a SASL listener enables PLAIN.
    worker: Option<SaslWorker>,
    pub(super) worker_watch: Option<WatchId>,
    /// Steps on the worker, by job token: the connection and where the answer goes.
    steps: BTreeMap<u64, (ConnId, Reply)>,
    next_step: u64,
    /// (deadline ms, connection) of every failed connection: at most one per open connection.
    closing: BTreeSet<(u64, ConnId)>,
    delay_ms: u64,
}

/// What [`Node::on_request_frame`] does with a frame.
pub(super) enum FrameGate {
    /// A Kafka request.
    Request,
    /// A raw SASL token (legacy framing).
    LegacyToken,
    /// Nothing: the connection failed authentication and waits to be closed.
    Drop,
}

/// The credentials a node starts with when a listener uses SASL: loaded before anything is
/// bound, so a file that does not load stops the node with an error naming it.
pub(super) fn load_credentials(
    config: &NodeConfig,
) -> Result<Option<Arc<CredentialStore>>, NodeError> {
    let uses_sasl = config.listeners.all.iter().any(|l| l.protocol.uses_sasl());
    let Some(path) = config
        .security
        .credentials_file
        .as_ref()
        .filter(|_| uses_sasl)
    else {
        return Ok(None);
    };
    let store = CredentialStore::load(path).map_err(NodeError::Credentials)?;
    info!(
        node = config.broker_id,
        users = store.len(),
        file = %path.display(),
        "loaded the SASL credentials"
    );
    Ok(Some(Arc::new(store)))
}

/// The SASL side a node starts with: its credentials ([`load_credentials`]), and the worker
/// started when a SASL listener enables PLAIN. Called before the raft thread pins itself, so
/// the worker does not inherit that CPU; [`SaslRuntime::watch`] then puts its eventfd on the
/// ring.
pub(super) fn start(
    config: &NodeConfig,
    credentials: Option<Arc<CredentialStore>>,
) -> Result<SaslRuntime, NodeError> {
    let sasl_listeners: Vec<&Listener> = config
        .listeners
        .all
        .iter()
        .filter(|l| l.protocol.uses_sasl())
        .collect();
    let plain = |l: &Listener| {
        l.sasl_mechanisms
            .iter()
            .any(|m| m == Mechanism::Plain.name())
    };
    for listener in sasl_listeners.iter().filter(|l| plain(l)) {
        if listener.protocol == SecurityProtocol::SaslPlaintext {
            warn!(
                node = config.broker_id,
                listener = %listener.name,
                "PLAIN on a SASL_PLAINTEXT listener: passwords cross the network in the clear; use \
                 SASL_SSL, or SCRAM (docs/security.md)"
            );
        }
    }
    let worker = if sasl_listeners.iter().any(|l| plain(l)) {
        Some(SaslWorker::start().map_err(NodeError::SaslWorker)?)
    } else {
        None
    };
    Ok(SaslRuntime {
        credentials,
        phases: BTreeMap::new(),
        worker,
        worker_watch: None,
        steps: BTreeMap::new(),
        next_step: 1,
        closing: BTreeSet::new(),
        delay_ms: config.security.failed_authentication_delay_ms,
    })
}

/// Kafka's words for a failed exchange; the cause stays in the node's log.
fn failure_message(mechanism: Mechanism) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL \
         mechanism {mechanism}"
    )
}

impl SaslRuntime {
    /// Watches the worker's eventfd on `ring`, so a finished step wakes the loop.
    pub(super) fn watch(&mut self, ring: &mut EventLoop) -> Result<(), NodeError> {
        if let Some(worker) = &self.worker {
            self.worker_watch = Some(ring.watch_eventfd(worker.eventfd())?);
        }
        Ok(())
    }

    /// How long the loop may sleep before a failed connection is due to be closed.
    pub(super) fn next_close(&self, now_ms: u64) -> Option<Duration> {
        self.closing
            .first()
            .map(|&(deadline, _)| Duration::from_millis(deadline.saturating_sub(now_ms)))
    }
}

impl Node {
    /// A connection accepted on listener `index`: a SASL listener's starts at the handshake.
    pub(super) fn sasl_accepted(&mut self, conn: ConnId, index: usize) {
        if self.config.listeners.all[index].protocol.uses_sasl() {
            self.sasl.phases.insert(conn, Phase::Handshake);
        }
    }

    /// An inbound connection closed: its exchange, steps and close deadline go with it.
    pub(super) fn sasl_gone(&mut self, conn: ConnId) {
        if let Some(Phase::Failed { deadline_ms, .. }) = self.sasl.phases.remove(&conn) {
            self.sasl.closing.remove(&(deadline_ms, conn));
        }
        self.sasl.steps.retain(|_, (c, _)| *c != conn);
    }

    /// What to do with a frame from `conn`, before it is parsed.
    pub(super) fn sasl_gate(&self, conn: ConnId) -> FrameGate {
        match self.sasl.phases.get(&conn) {
            Some(Phase::Failed { .. }) => FrameGate::Drop,
            Some(Phase::Exchange { legacy: true, .. }) => FrameGate::LegacyToken,
            _ => FrameGate::Request,
        }
    }

    /// Whether `conn` may make a request of `row`'s API now: on a SASL listener, before the
    /// exchange is done, only the APIs whose row needs no authorization, ApiVersions and the
    /// SASL APIs (anything else closes the connection, as Kafka does).
    pub(super) fn sasl_admits(&self, conn: ConnId, row: &ApiRow) -> bool {
        match self.sasl.phases.get(&conn) {
            None | Some(Phase::Authenticated) => true,
            Some(_) => row.authorization == Authorization::NoneNeeded,
        }
    }

    // ---- handlers (rows of api_table.rs) ------------------------------------------------------

    /// SaslHandshake v0-1: a mechanism this listener enables starts its exchange (v0: in the
    /// legacy framing); any other is UNSUPPORTED_SASL_MECHANISM, and a handshake once an
    /// exchange has begun ILLEGAL_SASL_STATE. Both answers list the listener's mechanisms;
    /// after either the connection is closed, as after a failed authentication (Kafka's way),
    /// except that an authenticated connection stays.
    pub(in crate::node) fn handle_sasl_handshake(
        &mut self,
        asked: Asked,
        request: SaslHandshakeRequest,
    ) {
        let Asked { conn, header, .. } = asked;
        let Some(session) = self.sessions.get(&conn) else {
            return;
        };
        let enabled = self.config.listeners.all[session.listener]
            .sasl_mechanisms
            .clone();
        let error = match self.sasl.phases.get(&conn) {
            Some(Phase::Handshake) => {
                let mechanism = Some(request.mechanism.as_str())
                    .filter(|name| enabled.iter().any(|m| m == name))
                    .and_then(|name| name.parse::<Mechanism>().ok());
                match (mechanism, &self.sasl.credentials) {
                    (Some(mechanism), Some(store)) => {
                        let server = SaslServer::new(mechanism, Arc::clone(store));
                        self.sasl.phases.insert(
                            conn,
                            Phase::Exchange {
                                mechanism,
                                server: Some(Box::new(server)),
                                legacy: header.api_version == 0,
                            },
                        );
                        ErrorCode::NONE
                    }
                    _ => UNSUPPORTED_SASL_MECHANISM,
                }
            }
            Some(Phase::Exchange { .. } | Phase::Authenticated) => ILLEGAL_SASL_STATE,
            // Not a SASL listener (the row is not served there) or failed (nothing is read).
            Some(Phase::Failed { .. }) | None => {
                return self.close_for_request(conn, asked.at(), "unexpected SaslHandshake", "")
            }
        };
        let seq = self.reserve_response(conn);
        let response = SaslHandshakeResponse {
            error,
            mechanisms: enabled,
        };
        self.answer(asked, seq, |w, version| response.encode(w, version));
        if error != ErrorCode::NONE {
            let mechanism: String = request.mechanism.chars().take(64).collect();
            debug!(?conn, ?mechanism, %error, "SaslHandshake refused");
            if !matches!(self.sasl.phases.get(&conn), Some(Phase::Authenticated)) {
                self.fail_authentication(conn);
            }
        }
    }

    /// SaslAuthenticate v0-2: the client's token to the connection's exchange. Before a
    /// handshake it is ILLEGAL_SASL_STATE and the connection is closed; after authentication
    /// ILLEGAL_SASL_STATE too (re-authentication is not supported: the session lifetime is 0).
    pub(in crate::node) fn handle_sasl_authenticate(
        &mut self,
        asked: Asked,
        request: SaslAuthenticateRequest,
    ) {
        let Asked { conn, header, .. } = asked;
        let reply = Reply::Kafka {
            seq: self.reserve_response(conn),
            correlation_id: header.correlation_id,
            version: header.api_version,
        };
        match self.sasl.phases.get(&conn) {
            Some(Phase::Exchange { .. }) => self.sasl_step(conn, reply, request.auth_bytes),
            Some(Phase::Authenticated) => self.answer_step(
                conn,
                reply,
                ILLEGAL_SASL_STATE,
                Some("SaslAuthenticate request received after successful authentication".into()),
                Vec::new(),
            ),
            Some(Phase::Handshake) => {
                self.answer_step(
                    conn,
                    reply,
                    ILLEGAL_SASL_STATE,
                    Some("Unexpected SaslAuthenticate request during SASL handshake".into()),
                    Vec::new(),
                );
                self.fail_authentication(conn);
            }
            Some(Phase::Failed { .. }) | None => {
                self.close_for_request(conn, asked.at(), "unexpected SaslAuthenticate", "")
            }
        }
    }

    /// A raw token after a v0 handshake.
    pub(super) fn on_legacy_token(&mut self, conn: ConnId, token: Bytes) {
        let seq = self.reserve_response(conn);
        self.sasl_step(conn, Reply::Legacy { seq }, token);
    }

    // ---- the exchange -------------------------------------------------------------------------

    /// Steps `conn`'s exchange with `token`: PLAIN on the worker, SCRAM here.
    fn sasl_step(&mut self, conn: ConnId, reply: Reply, token: Bytes) {
        let Some(Phase::Exchange {
            mechanism, server, ..
        }) = self.sasl.phases.get_mut(&conn)
        else {
            return;
        };
        let mechanism = *mechanism;
        // None: a step is still running (a client that did not wait for the answer).
        let Some(mut server) = server.take() else {
            return self.step_done(conn, reply, mechanism, None, Err(SaslError::IllegalState));
        };
        if mechanism != Mechanism::Plain {
            // SCRAM's server steps derive no key: a lookup, HMACs and hashes.
            let result = server.step(&token);
            return self.step_done(conn, reply, mechanism, Some(server), result);
        }
        let Some(worker) = self.sasl.worker.as_mut() else {
            return self.step_done(conn, reply, mechanism, None, Err(SaslError::IllegalState));
        };
        let job_token = self.sasl.next_step;
        self.sasl.next_step += 1;
        let job = StepJob {
            token: job_token,
            server,
            client_token: token,
        };
        match worker.submit(job) {
            Ok(()) => {
                self.sasl.steps.insert(job_token, (conn, reply));
            }
            Err(_) => {
                warn!(
                    ?conn,
                    "{} SASL steps are queued already: refusing a PLAIN login (the client retries); if \
                     it repeats, find the client that logs in in a loop",
                    crate::node::sasl_worker::MAX_PENDING
                );
                self.step_done(
                    conn,
                    reply,
                    mechanism,
                    None,
                    Err(SaslError::AuthenticationFailed),
                );
            }
        }
    }

    /// Carries out what a step gave: the next challenge, the authenticated principal, or the
    /// failure (answered, then the connection closed after the delay).
    fn step_done(
        &mut self,
        conn: ConnId,
        reply: Reply,
        mechanism: Mechanism,
        server: Option<Box<SaslServer>>,
        result: Result<SaslStep, SaslError>,
    ) {
        match result {
            Ok(SaslStep::Continue(challenge)) => {
                if let Some(Phase::Exchange { server: slot, .. }) = self.sasl.phases.get_mut(&conn)
                {
                    *slot = server;
                }
                self.answer_step(conn, reply, ErrorCode::NONE, None, challenge);
            }
            Ok(SaslStep::Done { user, token }) => {
                let principal = KafkaPrincipal::user(user);
                debug!(?conn, %principal, %mechanism, "SASL authenticated");
                self.sasl.phases.insert(conn, Phase::Authenticated);
                if let Some(session) = self.sessions.get_mut(&conn) {
                    session.identity = Identity::Proven(principal);
                }
                self.answer_step(conn, reply, ErrorCode::NONE, None, token);
            }
            Err(error) => {
                let from = self.sessions.get(&conn).map(|s| s.addr.ip());
                info!(?conn, from = ?from, %mechanism, %error, "failed SASL authentication");
                let message = failure_message(mechanism);
                let code = error.error_code();
                self.answer_step(conn, reply, code, Some(message), Vec::new());
                self.fail_authentication(conn);
            }
        }
    }

    /// Sends a step's answer: a SaslAuthenticate response, or in the legacy framing the raw
    /// token (nothing on an error: that framing has no way to say it).
    fn answer_step(
        &mut self,
        conn: ConnId,
        reply: Reply,
        error: ErrorCode,
        message: Option<String>,
        token: Vec<u8>,
    ) {
        match reply {
            Reply::Kafka {
                seq,
                correlation_id,
                version,
            } => {
                let flexible = SASL_AUTHENTICATE_SPEC.response_header_flexible(version);
                let mut w = inbound::response_start(correlation_id, flexible);
                SaslAuthenticateResponse {
                    error,
                    error_message: message,
                    auth_bytes: Bytes::from(token),
                    session_lifetime_ms: 0,
                }
                .encode(&mut w, version);
                self.deliver(conn, seq, vec![w.into_inner().freeze()]);
            }
            Reply::Legacy { seq } if error == ErrorCode::NONE => {
                self.deliver(
                    conn,
                    seq,
                    vec![Bytes::from_static(&[0; 4]), Bytes::from(token)],
                );
            }
            Reply::Legacy { .. } => {}
        }
    }

    /// The connection failed to authenticate: it is closed after
    /// `connection.failed.authentication.delay.ms`, and nothing it sends is read meanwhile.
    fn fail_authentication(&mut self, conn: ConnId) {
        let deadline_ms = self.now_ms() + self.sasl.delay_ms;
        if let Some(Phase::Failed { deadline_ms, .. }) = self.sasl.phases.insert(
            conn,
            Phase::Failed {
                deadline_ms,
                retries: 0,
            },
        ) {
            self.sasl.closing.remove(&(deadline_ms, conn));
        }
        self.sasl.closing.insert((deadline_ms, conn));
    }

    /// Each loop turn: the worker's finished steps, and the failed connections now due.
    pub(super) fn tend_sasl(&mut self) {
        let finished = match self.sasl.worker.as_mut() {
            Some(worker) => worker.finished(),
            None => Vec::new(),
        };
        for StepDone {
            token,
            server,
            result,
        } in finished
        {
            let Some((conn, reply)) = self.sasl.steps.remove(&token) else {
                continue; // the connection closed meanwhile
            };
            let mechanism = server.mechanism();
            match self.sasl.phases.get(&conn) {
                Some(Phase::Exchange { server: None, .. }) => {
                    self.step_done(conn, reply, mechanism, Some(server), result)
                }
                // Failed meanwhile (a request it should not have sent): the answer's slot is
                // filled so nothing waits behind it, but the outcome no longer counts.
                _ => self.answer_step(
                    conn,
                    reply,
                    SASL_AUTHENTICATION_FAILED,
                    Some(failure_message(mechanism)),
                    Vec::new(),
                ),
            }
        }
        let now = self.now_ms();
        while let Some(&(deadline, conn)) = self.sasl.closing.first() {
            if deadline > now {
                break;
            }
            self.sasl.closing.pop_first();
            let Some(Phase::Failed { retries, .. }) = self.sasl.phases.get(&conn) else {
                continue;
            };
            let retries = *retries;
            let sending = self.ring.queued_send_bytes(conn).is_some_and(|b| b > 0);
            if sending && retries < MAX_CLOSE_RETRIES {
                let deadline_ms = now + CLOSE_RETRY_MS;
                self.sasl.phases.insert(
                    conn,
                    Phase::Failed {
                        deadline_ms,
                        retries: retries + 1,
                    },
                );
                self.sasl.closing.insert((deadline_ms, conn));
                continue;
            }
            self.close(conn, "SASL authentication failed");
        }
    }

    /// SIGHUP: the credentials file again, for exchanges that start from now on; a file that
    /// does not load keeps the credentials in force.
    pub(super) fn reload_credentials(&mut self) {
        let (Some(path), Some(current)) = (
            &self.config.security.credentials_file,
            &mut self.sasl.credentials,
        ) else {
            return;
        };
        match CredentialStore::load(path) {
            Ok(store) => {
                info!(users = store.len(), "reloaded the SASL credentials");
                *current = Arc::new(store);
            }
            Err(error) => tracing::error!(
                %error,
                "the credentials file did not load; the credentials in force stay"
            ),
        }
    }
}
