//! Peers: the outbound connections to the other voters and the bootstrap servers (correlation,
//! reconnect backoff), and the endpoint probes that check an advertised address before it is used
//! (docs/architecture.md, "Node runtime"; docs/protocol.md section 9).

use super::*;
use crate::wire::broker_list::BrokerList;

/// The first reconnection delay to a peer, doubled per failure up to [`MAX_RECONNECT`].
pub(super) const MIN_RECONNECT: Duration = Duration::from_millis(50);
const MAX_RECONNECT: Duration = Duration::from_secs(1);
/// An outbound connection to a peer voter (or a bootstrap server, under the pseudo node id the
/// core gives it) and the requests in flight on it.
pub(super) struct Peer {
    pub(super) id: NodeId,
    pub(super) addr: SocketAddr,
    /// The host name `addr` was resolved from: what the peer's certificate must name.
    pub(super) host: String,
    pub(super) conn: Option<ConnId>,
    /// No connection attempt before this (backoff after a failure).
    pub(super) retry_at: Instant,
    pub(super) backoff: Duration,
    /// Wire correlation id → (core correlation, api key, sent at).
    pub(super) in_flight: BTreeMap<i32, (Correlation, i16, Instant)>,
}

impl Peer {
    pub(super) fn new(id: NodeId, addr: SocketAddr, host: &str, now: Instant) -> Self {
        Peer {
            id,
            addr,
            host: host.to_owned(),
            conn: None,
            retry_at: now,
            backoff: MIN_RECONNECT,
            in_flight: BTreeMap::new(),
        }
    }
}

/// Endpoint probes (FindQuorum on connections of their own) in flight at most.
const MAX_PROBES: usize = 16;
/// A probe of an advertised voter endpoint: one FindQuorum on a connection of its own, whose
/// answer the core checks before it uses the endpoint (engine's raft/endpoints.rs).
pub(super) struct Probe {
    pub(super) voter_id: NodeId,
    pub(super) correlation: Correlation,
    pub(super) wire_correlation: i32,
    pub(super) addr: SocketAddr,
    pub(super) endpoint: (String, i32),
    pub(super) started: Instant,
}

/// A probe waiting for its host name to resolve.
pub(super) struct UnresolvedProbe {
    pub(super) correlation: Correlation,
    pub(super) endpoint: VoterEndpoint,
    pub(super) request: Request,
}

impl Node {
    pub(super) fn send_to_peer(&mut self, to: NodeId, correlation: Correlation, request: Request) {
        let Some(index) = self.peers.iter().position(|p| p.id == to) else {
            warn!(to, "request to a node whose address is unknown (found through FindQuorum in time); if \
                   it repeats, name the node in quorum.voters or fix its advertised.listeners");
            self.step(Input::RequestFailed { to, correlation });
            return;
        };
        let Some(conn) = self.peer_conn(index) else {
            self.step(Input::RequestFailed { to, correlation });
            return;
        };
        let api_key = request.api_key();
        let (wire_correlation, frame) = self.request_frame(&request);
        if self.ring.send(conn, vec![frame]).is_err() {
            self.step(Input::RequestFailed { to, correlation });
            return;
        }
        self.bound_send_queue(conn);
        tracing::trace!(to, api_key, wire_correlation, ?request, "send");
        let now = Instant::now();
        let peer = &mut self.peers[index];
        // The core has long since timed out (and retried) a request unanswered for twice its
        // request timeout; a peer that is paused but connected must not grow this map forever.
        let stale = Duration::from_millis(2 * self.config.request_timeout_ms);
        peer.in_flight
            .retain(|_, (_, _, sent)| now.duration_since(*sent) < stale);
        peer.in_flight
            .insert(wire_correlation, (correlation, api_key, now));
    }

    /// A quorum request as one frame, under a fresh wire correlation id.
    pub(super) fn request_frame(&mut self, request: &Request) -> (i32, Bytes) {
        let wire_correlation = self.next_wire_correlation;
        self.next_wire_correlation = self.next_wire_correlation.wrapping_add(1).max(1);
        let mut w = WireWriter::with_capacity(128);
        w.i32(0); // size, filled below
        RequestHeader {
            api_key: request.api_key(),
            // Vote v1 for a pre-vote, v0 otherwise (wire/quorum.rs).
            api_version: quorum::request_version(request),
            correlation_id: wire_correlation,
            client_id: Some(format!("ringraft-{}", self.config.broker_id).into()),
        }
        .write(&mut w, true);
        // A fetch carries this node's client endpoints and the broker list version it holds
        // (node/brokers.rs), and its wish for producer ids (producer_ids.rs); the core never
        // sees them.
        let extras = match request {
            Request::FetchQuorumRecords(_) => quorum::FetchRequestExtras {
                producer_ids: self.replica.producer_ids().wanted(),
                ..self.brokers.fetch_extras()
            },
            _ => quorum::FetchRequestExtras::default(),
        };
        quorum::encode_request_with(request, &extras, &mut w);
        let mut frame = w.into_inner();
        let size = size_prefix(frame.len() - 4);
        frame[..4].copy_from_slice(&size);
        (wire_correlation, frame.freeze())
    }

    // ---- endpoint probes ----------------------------------------------------------------------

    /// The core wants an advertised endpoint checked before it is used: one FindQuorum there, on
    /// a connection of its own. A host name is looked up off this thread.
    pub(super) fn start_probe(
        &mut self,
        correlation: Correlation,
        endpoint: VoterEndpoint,
        request: Request,
    ) {
        let to = endpoint.voter_id;
        let busy = self.probes.len() + self.unresolved_probes.len() >= MAX_PROBES;
        let Ok(port) = u16::try_from(endpoint.port) else {
            return self.step(Input::RequestFailed { to, correlation });
        };
        if busy {
            debug!(peer = to, "too many endpoint probes in flight");
            return self.step(Input::RequestFailed { to, correlation });
        }
        let token = self.next_lookup_token;
        self.next_lookup_token += 1;
        let lookup = self.resolver.resolve(token, &endpoint.host, port);
        let probe = UnresolvedProbe {
            correlation,
            endpoint,
            request,
        };
        match lookup {
            Some(result) => self.connect_probe(probe, result),
            None => {
                self.unresolved_probes.insert(token, probe);
            }
        }
    }

    pub(super) fn connect_probe(
        &mut self,
        probe: UnresolvedProbe,
        addr: std::io::Result<SocketAddr>,
    ) {
        let to = probe.endpoint.voter_id;
        let correlation = probe.correlation;
        let addr = match addr {
            Ok(addr) => addr,
            Err(error) => {
                debug!(peer = to, host = %probe.endpoint.host, %error, "probe: cannot resolve");
                return self.step(Input::RequestFailed { to, correlation });
            }
        };
        let conn = match self.dial(addr, &probe.endpoint.host) {
            Ok(conn) => conn,
            Err(error) => {
                debug!(peer = to, %addr, %error, "probe: connect");
                return self.step(Input::RequestFailed { to, correlation });
            }
        };
        let (wire_correlation, frame) = self.request_frame(&probe.request);
        if self.ring.send(conn, vec![frame]).is_err() {
            let _ = self.ring.close(conn);
            return self.step(Input::RequestFailed { to, correlation });
        }
        debug!(peer = to, %addr, "probing an advertised endpoint");
        self.probes.insert(
            conn,
            Probe {
                voter_id: to,
                correlation,
                wire_correlation,
                addr,
                endpoint: (probe.endpoint.host, probe.endpoint.port),
                started: Instant::now(),
            },
        );
    }

    /// Each loop turn: probes whose lookup finished connect; probes unanswered for twice the
    /// request timeout (the core gave up on them) are closed.
    pub(super) fn tend_probes(&mut self) {
        for (token, result) in self.resolver.finished() {
            if let Some(probe) = self.unresolved_probes.remove(&token) {
                self.connect_probe(probe, result);
            }
        }
        let stale = Duration::from_millis(2 * self.config.request_timeout_ms);
        let expired: Vec<ConnId> = self
            .probes
            .iter()
            .filter(|(_, p)| p.started.elapsed() > stale)
            .map(|(conn, _)| *conn)
            .collect();
        for conn in expired {
            let _ = self.ring.close(conn);
            self.probe_gone(conn);
        }
    }

    /// A probe's connection failed or closed before an answer. False if `conn` is no probe.
    pub(super) fn probe_gone(&mut self, conn: ConnId) -> bool {
        let Some(probe) = self.probes.remove(&conn) else {
            return false;
        };
        self.step(Input::RequestFailed {
            to: probe.voter_id,
            correlation: probe.correlation,
        });
        true
    }

    pub(super) fn on_probe_frame(&mut self, conn: ConnId, bytes: Bytes) {
        let Some(probe) = self.probes.remove(&conn) else {
            return;
        };
        let _ = self.ring.close(conn);
        let (to, correlation) = (probe.voter_id, probe.correlation);
        let mut r = WireReader::new(bytes);
        let answered = ResponseHeader::read(&mut r, true)
            .ok()
            .filter(|h| h.correlation_id == probe.wire_correlation)
            .and_then(|_| quorum::decode_response(api::FIND_QUORUM, &mut r).ok());
        let Some(response) = answered else {
            debug!(peer = to, addr = %probe.addr, "probe: no usable answer");
            return self.step(Input::RequestFailed { to, correlation });
        };
        if self.probed_addrs.len() >= MAX_PROBES {
            self.probed_addrs.clear();
        }
        let (host, port) = probe.endpoint;
        self.probed_addrs.insert((to, host, port), probe.addr);
        self.step(Input::Response {
            from: to,
            correlation,
            response,
        });
    }

    /// FindQuorum taught the core a voter's endpoint: a voter this node had no address for (an
    /// observer started with bootstrap.servers alone), or one that now listens elsewhere (it
    /// restarted with a newer boot timestamp): connect there from now on; requests in flight on
    /// an old connection fail and are retried.
    pub(super) fn peer_moved(&mut self, endpoint: &VoterEndpoint) {
        if endpoint.voter_id == self.config.broker_id {
            return;
        }
        let Ok(port) = u16::try_from(endpoint.port) else {
            warn!(
                peer = endpoint.voter_id,
                port = endpoint.port,
                "advertised port out of range: fix that voter's advertised.listeners"
            );
            return;
        };
        let probed =
            self.probed_addrs
                .get(&(endpoint.voter_id, endpoint.host.clone(), endpoint.port));
        let addr = match probed.map_or_else(|| resolve(&endpoint.host, port), |a| Ok(*a)) {
            Ok(addr) => addr,
            Err(error) => {
                warn!(peer = endpoint.voter_id, host = %endpoint.host, %error, "cannot resolve the \
                       voter's advertised host: fix its advertised.listeners or this host's DNS");
                return;
            }
        };
        let Some(index) = self.peers.iter().position(|p| p.id == endpoint.voter_id) else {
            info!(peer = endpoint.voter_id, %addr, "voter endpoint learned");
            self.peers.push(Peer::new(
                endpoint.voter_id,
                addr,
                &endpoint.host,
                Instant::now(),
            ));
            return;
        };
        if self.peers[index].addr == addr {
            return;
        }
        info!(peer = endpoint.voter_id, %addr, "voter endpoint changed");
        self.peers[index].addr = addr;
        self.peers[index].host = endpoint.host.clone();
        self.peers[index].retry_at = Instant::now();
        if let Some(conn) = self.peers[index].conn {
            if let Err(error) = self.ring.close(conn) {
                debug!(peer = endpoint.voter_id, %error, "closing the old connection");
            }
            self.peer_gone(conn);
        }
    }

    /// The connection to peer `index`, opening one if none is open and the backoff allows.
    pub(super) fn peer_conn(&mut self, index: usize) -> Option<ConnId> {
        let peer = &mut self.peers[index];
        if let Some(conn) = peer.conn {
            return Some(conn);
        }
        let now = Instant::now();
        if now < peer.retry_at {
            return None;
        }
        let (addr, host) = (peer.addr, peer.host.clone());
        let dialled = self.dial(addr, &host);
        let peer = &mut self.peers[index];
        match dialled {
            Ok(conn) => {
                peer.conn = Some(conn);
                peer.retry_at = now + peer.backoff;
                peer.backoff = (peer.backoff * 2).min(MAX_RECONNECT);
                self.peer_conns.insert(conn, index);
                Some(conn)
            }
            Err(error) => {
                warn!(peer = peer.id, %error, "connect to a voter failed (retried with backoff): check \
                       that it runs and that quorum.voters has its address");
                peer.retry_at = now + peer.backoff;
                None
            }
        }
    }

    /// A peer connection failed or closed: every request in flight on it failed.
    pub(super) fn peer_gone(&mut self, conn: ConnId) {
        let Some(index) = self.peer_conns.remove(&conn) else {
            return;
        };
        let peer = &mut self.peers[index];
        if peer.conn == Some(conn) {
            peer.conn = None;
        }
        let to = peer.id;
        let failed = std::mem::take(&mut peer.in_flight);
        for (correlation, _, _) in failed.into_values() {
            tracing::trace!(to, correlation, "request failed");
            self.step(Input::RequestFailed { to, correlation });
        }
    }

    pub(super) fn on_response_frame(&mut self, conn: ConnId, bytes: Bytes) {
        let index = self.peer_conns[&conn];
        let mut r = WireReader::new(bytes);
        let Ok(header) = ResponseHeader::read(&mut r, true) else {
            self.close(conn, "unreadable response header");
            return;
        };
        let Some((correlation, api_key, _)) =
            self.peers[index].in_flight.remove(&header.correlation_id)
        else {
            // Pruned as stale: the core gave up on it long ago.
            debug!(peer = self.peers[index].id, "late response dropped");
            return;
        };
        let from = self.peers[index].id;
        let decoded = quorum::decode_response_with(api_key, &mut r);
        tracing::trace!(from, api_key, ?decoded, "response");
        match decoded {
            Ok((response, list)) => {
                self.learn_broker_list(from, &response, list);
                self.step(Input::Response {
                    from,
                    correlation,
                    response,
                })
            }
            Err(error) => {
                warn!(from, %error, "undecodable response (connection closed): run the same ringraft \
                       version on every voter");
                self.step(Input::RequestFailed {
                    to: from,
                    correlation,
                });
                self.close(conn, "undecodable response");
            }
        }
    }
}

impl Node {
    /// A fetch answered by its leader: the broker list it sent replaces ours; none sent means
    /// ours is its current one (node/brokers.rs).
    fn learn_broker_list(&mut self, from: NodeId, response: &Response, list: Option<BrokerList>) {
        let Response::FetchQuorumRecords(fetch) = response else {
            return;
        };
        if !fetch.error.is_none() || fetch.leader_id != from {
            return;
        }
        match list {
            Some(list) => self.brokers.adopt(from, fetch.leader_epoch, list),
            None => self.brokers.confirm(from, fetch.leader_epoch),
        }
    }
}
