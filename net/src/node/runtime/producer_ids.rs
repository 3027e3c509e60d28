//! InitProducerId on every node (docs/protocol.md, "Idempotent producers"): the node checks the
//! request (authorization, no transactional id) and hands it to the replica, which answers it
//! from the producer-id blocks it reserves through the log (`engine::replica::producer_ids`);
//! this file keeps each request's connection until that answer comes, and draws the random
//! incarnation a run of the node reserves its blocks under.

use std::collections::BTreeMap;

use super::*;
use crate::wire::kafka::{InitProducerIdRequest, InitProducerIdResponse, INIT_PRODUCER_ID};
use engine::producer_ids::FIRST_PRODUCER_EPOCH;
use engine::replica::Input as ReplicaInput;

/// An InitProducerId the replica has not answered yet.
pub(super) struct WaitingInit {
    conn: ConnId,
    seq: u64,
    header: RequestHeader,
    spec: &'static ApiSpec,
}

/// The InitProducerIds the replica holds, by request id (each is answered exactly once, at
/// the latest `engine::replica::producer_ids::INIT_WAIT_MS` after it was stepped, and the
/// replica holds at most `MAX_WAITING_INITS`).
#[derive(Default)]
pub(super) struct InitRequests {
    waiting: BTreeMap<u64, WaitingInit>,
    next_request: u64,
}

/// The incarnation of a new run of the node, drawn at random: a restarted node never uses a
/// block reserved for an earlier run of it.
pub(super) fn new_incarnation() -> u64 {
    let mut bytes = [0u8; 8];
    // No randomness means no safe incarnation: a fixed value could repeat a former run's.
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    u64::from_le_bytes(bytes)
}

impl Node {
    pub(in crate::node) fn handle_init_producer_id(
        &mut self,
        asked: Asked,
        request: InitProducerIdRequest,
    ) {
        let Asked { conn, header, spec } = asked;
        let seq = self.reserve_response(conn);
        let refused = if let Err(error) = self.access(conn, INIT_PRODUCER_ID) {
            Some(error)
        } else if request
            .transactional_id
            .as_deref()
            .is_some_and(|id| !id.is_empty())
        {
            // Transactions are not served: no coordinator, no markers (docs/clients.md).
            Some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        } else {
            None
        };
        if let Some(error) = refused {
            return self.answer_init(asked, seq, Err(error));
        }
        // A producer asking to bump its epoch (v3+, KIP-360) gets a fresh id instead: its
        // sequences start again at 0 either way.
        let inits = &mut self.init_requests;
        let id = inits.next_request;
        inits.next_request += 1;
        let waiting = WaitingInit {
            conn,
            seq,
            header: header.clone(),
            spec,
        };
        inits.waiting.insert(id, waiting);
        self.step(ReplicaInput::InitProducerId { request: id });
    }

    /// The replica answered InitProducerId `request`.
    pub(super) fn init_answered(&mut self, request: u64, result: Result<i64, ErrorCode>) {
        let w = self
            .init_requests
            .waiting
            .remove(&request)
            .expect("the replica answers each InitProducerId once");
        if result.is_err() {
            debug!("InitProducerId answered without an id (retriable)");
        }
        let asked = Asked {
            conn: w.conn,
            header: &w.header,
            spec: w.spec,
        };
        self.answer_init(asked, w.seq, result);
    }

    fn answer_init(&mut self, asked: Asked, seq: u64, answer: Result<i64, ErrorCode>) {
        let (error, producer_id, producer_epoch) = match answer {
            Ok(id) => (ErrorCode::NONE, id, FIRST_PRODUCER_EPOCH),
            Err(error) => (error, -1, -1),
        };
        let response = InitProducerIdResponse {
            throttle_time_ms: 0,
            error,
            producer_id,
            producer_epoch,
        };
        self.answer(asked, seq, |w, version| response.encode(w, version));
    }
}
