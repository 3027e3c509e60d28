//! Inbound connections: requests read and dispatched through the API table, and each
//! connection's responses released in request order (docs/architecture.md, "Node runtime").

use super::*;

/// Bytes queued on one connection beyond which it is closed (a reader that stopped reading).
const MAX_QUEUED_SEND_BYTES: usize = 256 << 20;
/// Distinct senders whose refused messages are logged; beyond that they are only counted.
const MAX_REFUSED_LOGGED: usize = 1024;

/// An inbound request waiting for the core's answer.
pub(super) struct PendingRequest {
    pub(super) conn: ConnId,
    /// Its slot in the connection's [`ResponseQueue`].
    pub(super) seq: u64,
    pub(super) correlation_id: i32,
    pub(super) spec: &'static ApiSpec,
    pub(super) version: i16,
    /// A FetchQuorumRecords request's extras, kept for its answer (node/brokers.rs).
    pub(super) fetch: Option<InboundFetch>,
}

/// What a fetcher added to its request around the core's fields.
pub(super) struct InboundFetch {
    replica: NodeId,
    extras: quorum::FetchRequestExtras,
    /// Whether its endpoints may be kept as that replica's: its sender is proven to be that
    /// replica, or it came on a PLAINTEXT listener, where nothing is proven for anyone.
    trusted: bool,
}

/// The responses owed on one inbound connection, released in request order: Kafka clients match
/// each response to their oldest request in flight (docs/protocol.md section 13), while the core
/// answers as things complete (a Produce waits for the high watermark, a DescribeQuorum does not).
#[derive(Debug, Default)]
pub(super) struct ResponseQueue {
    /// The sequence number of `slots[0]`.
    head: u64,
    /// One slot per request still owed a response, in arrival order; Some once answered.
    slots: VecDeque<Option<Vec<Bytes>>>,
}

impl ResponseQueue {
    /// A slot for the next request; its response is released after every earlier one.
    pub(super) fn reserve(&mut self) -> u64 {
        self.slots.push_back(None);
        self.head + self.slots.len() as u64 - 1
    }

    pub(super) fn fill(&mut self, seq: u64, chain: Vec<Bytes>) {
        assert!(seq >= self.head, "slot {seq} was released already");
        let slot = &mut self.slots[(seq - self.head) as usize];
        assert!(slot.is_none(), "slot {seq} answered twice");
        *slot = Some(chain);
    }

    /// The oldest response if it is ready (then every earlier one went out before it).
    pub(super) fn pop_ready(&mut self) -> Option<Vec<Bytes>> {
        if !matches!(self.slots.front(), Some(Some(_))) {
            return None;
        }
        self.head += 1;
        self.slots.pop_front().flatten()
    }
}

/// The start of every response frame: 4 placeholder bytes for the size (see
/// [`Node::deliver`]) and the response header, flexible or not as the API and version say.
pub(super) fn response_start(correlation_id: i32, flexible: bool) -> WireWriter {
    let mut w = WireWriter::with_capacity(256);
    w.i32(0);
    ResponseHeader { correlation_id }.write(&mut w, flexible);
    w
}

impl Node {
    /// An inbound connection closed: its pending requests can no longer be answered.
    pub(super) fn inbound_gone(&mut self, conn: ConnId) {
        self.inbound.remove(&conn);
        self.sessions.remove(&conn);
        self.sasl_gone(conn);
        self.requests.retain(|_, r| r.conn != conn);
        let deadlines = &mut self.produce_deadlines;
        self.produces.retain(|&id, p| {
            if p.conn == conn {
                deadlines.remove(&(p.deadline_ms, id));
            }
            p.conn != conn
        });
    }

    /// A slot for the response to a request just read from `conn`.
    pub(super) fn reserve_response(&mut self, conn: ConnId) -> u64 {
        self.inbound.entry(conn).or_default().reserve()
    }

    /// Queues the response to request `seq` of `conn` (a chain whose first piece starts with 4
    /// placeholder bytes for the size) and sends every response that is now at the head.
    pub(super) fn deliver(&mut self, conn: ConnId, seq: u64, chain: Vec<Bytes>) {
        let Some(queue) = self.inbound.get_mut(&conn) else {
            return; // the connection closed meanwhile
        };
        queue.fill(seq, chain);
        while let Some(ready) = self
            .inbound
            .get_mut(&conn)
            .and_then(ResponseQueue::pop_ready)
        {
            self.send_frame(conn, ready);
        }
    }

    /// Logs a refused message once per sender (by address where the transport knows it), and
    /// counts every one.
    pub(super) fn log_refusal(&mut self, request: Option<u64>, peer: Option<NodeId>, reason: &str) {
        self.counters.refused += 1;
        let addr = request
            .and_then(|id| self.requests.get(&id))
            .and_then(|pending| self.sessions.get(&pending.conn))
            .map(|session| session.addr);
        let sender = match (addr, peer) {
            (Some(addr), _) => addr.ip().to_string(),
            (None, Some(peer)) => format!("node {peer}"),
            (None, None) => "an unknown sender".to_string(),
        };
        self.note_refusal(sender, reason);
    }

    /// [`Node::log_refusal`] of a request refused before it reached the core.
    pub(super) fn log_refusal_from(&mut self, conn: ConnId, reason: &str) {
        self.counters.refused += 1;
        let sender = self
            .sessions
            .get(&conn)
            .map_or("an unknown sender".to_string(), |s| s.addr.ip().to_string());
        self.note_refusal(sender, reason);
    }

    fn note_refusal(&mut self, sender: String, reason: &str) {
        if self.refused_logged.len() < MAX_REFUSED_LOGGED
            && self.refused_logged.insert(sender.clone())
        {
            warn!(
                node = self.config.broker_id,
                from = %sender,
                reason,
                "refused a message no honest node sends (logged once per sender; all are counted \
                 in node stats as refused); see docs/operations.md, \"Hostile input\""
            );
        }
    }

    // ---- inbound requests -------------------------------------------------------------------

    /// Whether the listener `conn` came in on serves the API of `row`.
    fn served_here(&self, conn: ConnId, row: &ApiRow) -> bool {
        let Some(session) = self.sessions.get(&conn) else {
            return false;
        };
        let listeners = &self.config.listeners;
        row.served_on(
            listeners.serves_quorum(session.listener),
            listeners.serves_clients(session.listener),
            listeners.all[session.listener].protocol.uses_sasl(),
        )
    }

    pub(super) fn on_request_frame(&mut self, conn: ConnId, bytes: Bytes) {
        match self.sasl_gate(conn) {
            sasl::FrameGate::Request => {}
            sasl::FrameGate::LegacyToken => return self.on_legacy_token(conn, bytes),
            sasl::FrameGate::Drop => return,
        }
        if !self.settle_tls_identity(conn) {
            return;
        }
        let mut r = WireReader::new(bytes);
        let Ok(prefix) = RequestPrefix::read(&mut r) else {
            self.close_for_request(conn, None, "short request", "");
            return;
        };
        let at = Some((prefix.api_key, prefix.api_version));
        let Some(row) = api_table::row(prefix.api_key) else {
            self.close_for_request(conn, at, "unknown api key", "");
            return;
        };
        if !self.served_here(conn, row) {
            // Not advertised on this listener: a client that read ApiVersions never sends it.
            self.close_for_request(conn, at, "api not served on this listener", "");
            return;
        }
        if !self.sasl_admits(conn, row) {
            // Kafka closes a connection that sends anything else before it authenticated.
            self.close_for_request(conn, at, "request before SASL authentication", "");
            return;
        }
        let spec = &row.spec;
        self.metrics.request(spec.key);
        if !spec.supports(prefix.api_version) {
            if spec.key == api::API_VERSIONS {
                let seq = self.reserve_response(conn);
                self.answer_api_versions(conn, seq, prefix.correlation_id, 0, true);
            } else if spec.key == api::VOTE && prefix.api_version > spec.max_version {
                // A newer candidate's Vote: answered UNSUPPORTED_VERSION, not dropped with the
                // connection, so it falls back (docs/protocol.md, "Pre-vote").
                self.answer_unsupported_vote(conn, prefix.correlation_id);
            } else {
                self.close_for_request(conn, at, "unsupported api version", "");
            }
            return;
        }
        let flexible = spec.is_flexible(prefix.api_version);
        let header = match RequestHeader::read_rest(&mut r, prefix, flexible) {
            Ok(header) => header,
            Err(error) => {
                let detail = error.to_string();
                return self.close_for_request(conn, at, "bad request header", &detail);
            }
        };
        let asked = Asked {
            conn,
            header: &header,
            spec,
        };
        (row.handler)(self, asked, r);
    }

    /// Decodes a request's body at its version for `handle`. A body that does not decode
    /// closes the connection: the client no longer speaks the API it named.
    pub(in crate::node) fn decoded<T, E: std::fmt::Display>(
        &mut self,
        asked: Asked,
        mut r: WireReader,
        decode: fn(&mut WireReader, i16) -> Result<T, E>,
        handle: fn(&mut Node, Asked, T),
    ) {
        match decode(&mut r, asked.header.api_version) {
            Ok(request) => handle(self, asked, request),
            Err(error) => {
                let why = format!("bad {} body", asked.spec.name);
                let detail = error.to_string();
                self.close_for_request(asked.conn, asked.at(), &why, &detail)
            }
        }
    }

    /// Answers request `seq` with one response body, written at the request's version.
    pub(super) fn answer(
        &mut self,
        asked: Asked,
        seq: u64,
        body: impl FnOnce(&mut WireWriter, i16),
    ) {
        let mut w = self.response_writer(asked.header, asked.spec);
        body(&mut w, asked.header.api_version);
        self.deliver(asked.conn, seq, vec![w.into_inner().freeze()]);
    }

    // ---- handlers (rows of api_table.rs) ------------------------------------------------------

    pub(in crate::node) fn handle_api_versions(
        &mut self,
        asked: Asked,
        _request: ApiVersionsRequest,
    ) {
        let seq = self.reserve_response(asked.conn);
        let header = asked.header;
        self.answer_api_versions(
            asked.conn,
            seq,
            header.correlation_id,
            header.api_version,
            false,
        );
    }

    /// A quorum RPC goes to the core; its answer comes back as `Output::Respond`.
    pub(in crate::node) fn handle_quorum_request(&mut self, asked: Asked, mut r: WireReader) {
        let Asked { conn, header, spec } = asked;
        let (request, extras) =
            match quorum::decode_request_with(spec.key, header.api_version, &mut r) {
                Ok(decoded) => decoded,
                Err(error) => {
                    let detail = error.to_string();
                    let why = "bad quorum request body";
                    return self.close_for_request(conn, asked.at(), why, &detail);
                }
            };
        tracing::trace!(?request, "request");
        let from = match self.access(conn, spec.key) {
            Ok(sender) => sender,
            Err(error) => return self.refuse_quorum_request(conn, header, spec, &request, error),
        };
        let fetch = match &request {
            Request::FetchQuorumRecords(f) => Some(InboundFetch {
                replica: f.replica_id,
                extras,
                trusted: self.speaks_for(conn, from, f.replica_id),
            }),
            _ => None,
        };
        // A wish for producer ids is granted when the fetch arrives, not when it is answered:
        // a follower's fetch at the log end is parked up to its MaxWait, and so would be the
        // first InitProducerId it holds (docs/protocol.md, "Producer ids").
        let ids_wanted = match (&request, &fetch) {
            (Request::FetchQuorumRecords(f), Some(inbound)) if inbound.trusted => inbound
                .extras
                .producer_ids
                .filter(|_| f.cluster_id == self.config.cluster_id)
                .map(|wanted| (f.replica_id, f.leader_epoch, wanted)),
            _ => None,
        };
        let id = self.next_request_id;
        self.next_request_id += 1;
        let seq = self.reserve_response(conn);
        self.requests.insert(
            id,
            PendingRequest {
                conn,
                seq,
                correlation_id: header.correlation_id,
                spec,
                version: header.api_version,
                fetch,
            },
        );
        self.step(Input::Request { id, from, request });
        if let Some((replica, epoch, wanted)) = ids_wanted {
            // After the step: a first fetch makes its observer one the leader tracks.
            self.step(engine::replica::Input::ProducerIdsWanted {
                replica,
                epoch,
                wanted,
            });
        }
    }

    /// UNSUPPORTED_VERSION for a Vote of a version above ours, in the body every Vote version
    /// answers with so far (response header v1, as all of them are flexible), granting nothing.
    fn answer_unsupported_vote(&mut self, conn: ConnId, correlation_id: i32) {
        let seq = self.reserve_response(conn);
        let w = response_start(correlation_id, true);
        let refusal = Response::Vote(engine::raft::VoteResponse {
            error: ErrorCode::UNSUPPORTED_VERSION,
            leader_id: -1,
            leader_epoch: -1,
            vote_granted: false,
        });
        self.metrics.response(api::VOTE, refusal.error());
        let chain = quorum::encode_response(&refusal, w);
        self.deliver(conn, seq, chain);
    }

    pub(super) fn respond(&mut self, id: u64, response: &Response) {
        tracing::trace!(id, ?response, "respond");
        let Some(pending) = self.requests.remove(&id) else {
            return; // the connection closed meanwhile
        };
        let stripped = self.without_oversized_producer_state(response);
        let response = stripped.as_ref().unwrap_or(response);
        self.metrics.response(pending.spec.key, response.error());
        if let Response::FetchQuorumRecords(fetch) = response {
            if !fetch.batches.is_empty() {
                self.counters.fetch_data_responses += 1;
                self.counters.fetch_batches += fetch.batches.len() as u64;
            }
        }
        let flexible = pending.spec.response_header_flexible(pending.version);
        let list = match (&pending.fetch, response) {
            (Some(fetch), Response::FetchQuorumRecords(answer)) if answer.error.is_none() => {
                self.broker_list_for(fetch)
            }
            _ => None,
        };
        let chain = match response {
            Response::FetchQuorumRecords(answer) => {
                let id = pending.correlation_id;
                self.frames.fetch_frame(id, flexible, answer, list.as_ref())
            }
            _ => {
                let w = response_start(pending.correlation_id, flexible);
                quorum::encode_response_with(response, list.as_ref(), w)
            }
        };
        self.deliver(pending.conn, pending.seq, chain);
    }

    /// The answer without the producer-state snapshot the replica put in it, if that would
    /// make the frame larger than the fetcher may read (`socket.request.max.bytes`, the same
    /// on every node of a cluster as the docs ask): the fetcher then resets without it
    /// (docs/protocol.md, "Retention and the log start").
    fn without_oversized_producer_state(&self, response: &Response) -> Option<Response> {
        let Response::FetchQuorumRecords(answer) = response else {
            return None;
        };
        let size = answer.producer_state.as_ref()?.len();
        if size <= self.config.max_request_bytes / 2 {
            return None;
        }
        warn!(
            node = self.config.broker_id,
            bytes = size,
            max = self.config.max_request_bytes,
            "the producer-state snapshot is too large to send with the log start: the fetcher \
             resets its log without it and does not know the producers whose batches were \
             deleted; raise socket.request.max.bytes on every node"
        );
        let mut answer = answer.clone();
        answer.producer_state = None;
        Some(Response::FetchQuorumRecords(answer))
    }

    /// Whether the fetch's endpoints may be taken as replica `replica`'s (node/brokers.rs).
    fn speaks_for(&self, conn: ConnId, from: Sender, replica: NodeId) -> bool {
        let plaintext = self.sessions.get(&conn).is_some_and(|s| {
            self.config.listeners.all[s.listener].protocol == SecurityProtocol::Plaintext
        });
        crate::node::brokers::vouches_for(from, replica, plaintext)
    }

    /// On the leader, answering a fetch without error: keep the fetcher's endpoints, and return
    /// the broker list if the fetcher holds another version of it.
    fn broker_list_for(&mut self, fetch: &InboundFetch) -> Option<Bytes> {
        let view = self.replica.core().replica_view()?;
        let voters = self.replica.core().voters();
        if let (true, Some(endpoints)) = (fetch.trusted, &fetch.extras.endpoints) {
            self.brokers.learn(fetch.replica, endpoints, voters, &view);
        }
        let held = fetch.extras.known_brokers?;
        let (version, bytes) = self.brokers.leader_list(voters, &view);
        (held != version).then_some(bytes)
    }

    /// Sends a chain whose first piece starts with 4 placeholder bytes for the size.
    pub(super) fn send_frame(&mut self, conn: ConnId, mut chain: Vec<Bytes>) {
        let total: usize = chain.iter().map(Bytes::len).sum();
        let size = size_prefix(total - 4);
        if chain[0][..4] != [0; 4] {
            // Stamped where it was written (FrameArena): no frame has size 0.
            assert_eq!(chain[0][..4], size, "a stamped frame's size is its length");
        } else {
            // An encoder's buffer is the only reference to its bytes: stamped in place rather
            // than copied (a shared one, none today, is still copied).
            let mut first = std::mem::take(&mut chain[0])
                .try_into_mut()
                .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
            first[..4].copy_from_slice(&size);
            chain[0] = first.freeze();
        }
        if let Err(error) = self.ring.send(conn, chain) {
            debug!(?conn, %error, "send");
        }
        self.bound_send_queue(conn);
    }

    /// A peer or client that stops reading would make its send queue grow without bound:
    /// past [`MAX_QUEUED_SEND_BYTES`] its connection is closed (its requests then fail).
    pub(super) fn bound_send_queue(&mut self, conn: ConnId) {
        if self
            .ring
            .queued_send_bytes(conn)
            .is_some_and(|queued| queued > MAX_QUEUED_SEND_BYTES)
        {
            warn!(
                ?conn,
                "send queue over {MAX_QUEUED_SEND_BYTES} bytes: closing; a client that does not \
                 read its responses (it may reconnect); if it repeats, find that client"
            );
            self.close(conn, "send queue full");
        }
    }

    pub(super) fn answer_api_versions(
        &mut self,
        conn: ConnId,
        seq: u64,
        correlation_id: i32,
        version: i16,
        bad: bool,
    ) {
        let api_keys = API_TABLE
            .iter()
            .filter(|row| self.served_here(conn, row))
            .map(|row| ApiVersionRange {
                api_key: row.spec.key,
                min_version: row.spec.min_version,
                max_version: row.spec.max_version,
            })
            .collect();
        let response = ApiVersionsResponse {
            error: if bad {
                ErrorCode::UNSUPPORTED_VERSION
            } else {
                ErrorCode::NONE
            },
            api_keys,
            throttle_time_ms: 0,
        };
        let mut w = response_start(correlation_id, false);
        response.encode(&mut w, version);
        self.deliver(conn, seq, vec![w.into_inner().freeze()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(tag: u8) -> Vec<Bytes> {
        vec![Bytes::from(vec![tag])]
    }

    fn drain(queue: &mut ResponseQueue) -> Vec<u8> {
        std::iter::from_fn(|| queue.pop_ready())
            .map(|c| c[0][0])
            .collect()
    }

    #[test]
    fn responses_leave_in_request_order_whatever_order_they_are_answered_in() {
        let mut queue = ResponseQueue::default();
        let seqs: Vec<u64> = (0..4).map(|_| queue.reserve()).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3]);
        queue.fill(2, chain(2));
        queue.fill(1, chain(1));
        assert!(
            drain(&mut queue).is_empty(),
            "the head (0) is not answered yet"
        );
        queue.fill(0, chain(0));
        assert_eq!(drain(&mut queue), vec![0, 1, 2]);
        assert_eq!(queue.reserve(), 4);
        queue.fill(4, chain(4));
        assert!(drain(&mut queue).is_empty(), "3 still waits");
        queue.fill(3, chain(3));
        assert_eq!(drain(&mut queue), vec![3, 4]);
        assert!(queue.slots.is_empty());
    }

    #[test]
    #[should_panic(expected = "answered twice")]
    fn a_slot_answered_twice_is_a_bug() {
        let mut queue = ResponseQueue::default();
        let seq = queue.reserve();
        let _ = queue.reserve();
        queue.fill(seq + 1, chain(1));
        queue.fill(seq + 1, chain(1));
    }
}
