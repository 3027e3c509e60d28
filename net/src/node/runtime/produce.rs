//! Produce: a client's record batches appended through the core, answered when its acks say
//! (docs/architecture.md, "Node runtime"). The handler of the Produce row of the API table.

use super::arena::FrameArena;
use super::*;
use crate::wire::kafka::{visit_produce_partitions, ProduceHead};
use crate::wire::{WireError, WireStr};
use engine::record::RecordError;

/// Produce deadlines are checked on this coarse tick (node time, ms): every deadline inside one
/// tick shares one wake-up, and no timer is armed per request.
pub(super) const PRODUCE_TIMEOUT_TICK_MS: u64 = 10;

/// Slot vectors of answered requests kept for the next ones: at most this many, of at most
/// [`KEPT_SLOTS`] slots each.
const KEPT_SLOT_VECS: usize = 256;
const KEPT_SLOTS: usize = 16;

/// One partition of a Produce request: topic, partition index, and its outcome (error, base
/// offset) once known.
/// The topic is a slice of the request's frame.
pub(super) type ProduceSlot = (WireStr, i32, Option<(ErrorCode, i64)>);

/// A Produce request waiting for the outcome of its appends.
pub(super) struct PendingProduce {
    pub(super) conn: ConnId,
    /// Its slot in the connection's [`ResponseQueue`].
    pub(super) seq: u64,
    pub(super) correlation_id: i32,
    pub(super) version: i16,
    /// One entry per partition in request order; None while its append is outstanding.
    pub(super) partitions: Vec<ProduceSlot>,
    pub(super) outstanding: usize,
    /// Node time (ms) at which the outstanding partitions are answered REQUEST_TIMED_OUT: the
    /// request's `timeout_ms` after it arrived.
    pub(super) deadline_ms: u64,
    /// The wake-up that read it ([`Node::woke`]), for the commit latency of acks=all (metrics).
    pub(super) received: Option<std::time::Instant>,
}

impl Node {
    /// The head of a Produce is read first; its partitions are read where they are used, into
    /// vectors kept from earlier requests (no request is built).
    pub(in crate::node) fn handle_produce(&mut self, asked: Asked, mut r: WireReader) {
        let Asked { conn, header, .. } = asked;
        if header.api_version < PRODUCE_MIN_ACCEPTED {
            return self.refuse_legacy_produce(conn, header, r);
        }
        let head = match ProduceHead::decode(&mut r, header.api_version) {
            Ok(head) => head,
            Err(error) => return self.close_bad_produce(conn, header, &error.to_string()),
        };
        if let Err(error) = self.access(conn, PRODUCE_SPEC.key) {
            if head.acks == 0 {
                // No response is read for acks=0: closing is how Kafka tells such a client.
                return self.close_for_request(
                    conn,
                    api_table::named(header),
                    "Produce not authorized",
                    "acks=0",
                );
            }
            return self.reject_produce(conn, header, r, error);
        }
        self.on_produce(conn, header, &head, r)
    }

    fn on_produce(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        head: &ProduceHead,
        mut r: WireReader,
    ) {
        let acks = match head.acks {
            -1 => Acks::Quorum,
            1 => Acks::Leader,
            0 => Acks::None,
            _ => {
                // INVALID_REQUIRED_ACKS (21) for every partition.
                self.reject_produce(conn, header, r, ErrorCode(21));
                return;
            }
        };
        let mut partitions = self.slot_vecs.pop().unwrap_or_default();
        let mut appends = std::mem::take(&mut self.append_scratch);
        let read = split_produce(&mut r, header.api_version, &mut partitions, &mut appends);
        if read.is_err() {
            appends.clear();
            self.append_scratch = appends;
            self.keep_slots(partitions);
            return self.close_bad_produce(conn, header, "");
        }
        let outstanding = appends.len();
        let produce_id = self.next_produce_id;
        self.next_produce_id += 1;
        self.counters.produce_requests += 1;
        self.counters.produce_batches += outstanding as u64;
        if acks != Acks::None {
            let seq = self.reserve_response(conn);
            // Kafka's timeout_ms bounds the wait for the acknowledgement; a negative one is
            // treated as 0 (answered at the next tick unless already done).
            let timeout_ms = u64::try_from(head.timeout_ms).unwrap_or(0);
            let deadline_ms = self.now_ms().saturating_add(timeout_ms);
            self.produces.insert(
                produce_id,
                PendingProduce {
                    conn,
                    seq,
                    correlation_id: header.correlation_id,
                    version: header.api_version,
                    partitions,
                    outstanding,
                    deadline_ms,
                    received: (acks == Acks::Quorum).then_some(self.woke),
                },
            );
            if outstanding > 0 {
                // Before the appends: the core may answer one at once.
                self.produce_deadlines.insert((deadline_ms, produce_id));
            }
        }
        for (slot, view) in appends.drain(..) {
            let id = self.next_append_id;
            self.next_append_id += 1;
            if acks != Acks::None {
                self.appends.insert(id, (produce_id, slot));
            }
            // The replica decides what becomes of the batch (appended, refused, or answered as
            // a duplicate: engine::replica::producing); the copy is what the core stamps. The
            // node only tells the operator why a transactional client is refused.
            if view.is_transactional() {
                self.log_transactional_once(conn);
            }
            let record_count = view.record_count();
            let batch = self.batch_copies.copy(view.bytes());
            self.step(Input::ClientAppend {
                id,
                batch,
                record_count,
                acks,
            });
        }
        self.append_scratch = appends;
        if outstanding == 0 {
            self.finish_produce(produce_id);
        }
    }

    /// Produce v0-2 is advertised (librdkafka keeps compression on only when v0 is listed) but
    /// answered UNSUPPORTED_VERSION for every partition it names, as Kafka 4 does
    /// (docs/protocol.md, "Kafka client APIs"); with acks=0 no answer is read, so the
    /// connection is closed instead.
    fn refuse_legacy_produce(&mut self, conn: ConnId, header: &RequestHeader, mut r: WireReader) {
        let request = match LegacyProduceRequest::decode(&mut r, header.api_version) {
            Ok(request) => request,
            Err(error) => return self.close_bad_produce(conn, header, &error.to_string()),
        };
        if request.acks == 0 {
            return self.close_for_request(
                conn,
                api_table::named(header),
                "Produce v0-2 is not accepted",
                "acks=0",
            );
        }
        let seq = self.reserve_response(conn);
        let frame = encode_produce_response(
            header.correlation_id,
            header.api_version,
            &request.refusal(),
        );
        self.deliver(conn, seq, frame);
    }

    /// Closes `conn` for a Produce body that does not decode (logged, rate-limited).
    fn close_bad_produce(&mut self, conn: ConnId, header: &RequestHeader, error: &str) {
        self.close_for_request(conn, api_table::named(header), "bad Produce body", error)
    }

    /// Counts each partition's answer by error code (`ringraft_responses_total`).
    fn count_produce_answers(&self, partitions: &[ProduceSlot]) {
        for (_, _, outcome) in partitions {
            if let Some((error, _)) = outcome {
                self.metrics.response(PRODUCE_SPEC.key, *error);
            }
        }
    }

    /// Answers every partition of the request that `r` reads on with `error`.
    fn reject_produce(
        &mut self,
        conn: ConnId,
        header: &RequestHeader,
        mut r: WireReader,
        error: ErrorCode,
    ) {
        let mut partitions = self.slot_vecs.pop().unwrap_or_default();
        let read = visit_produce_partitions(&mut r, header.api_version, |topic, p| {
            partitions.push((topic.clone(), p.index, Some((error, -1))))
        });
        if read.is_err() {
            self.keep_slots(partitions);
            return self.close_bad_produce(conn, header, "");
        }
        let seq = self.reserve_response(conn);
        let hint = self.leader_hint_if_redirected(conn, &partitions);
        self.count_produce_answers(&partitions);
        let frame = produce_response_frame(
            &mut self.frames,
            header.correlation_id,
            header.api_version,
            &partitions,
            self.replica.core().log_start_offset(),
            &hint,
        );
        self.keep_slots(partitions);
        self.deliver(conn, seq, frame);
    }

    pub(super) fn append_done(&mut self, id: u64, result: AppendResult) {
        let Some((produce_id, slot)) = self.appends.remove(&id) else {
            return;
        };
        let Some(produce) = self.produces.get_mut(&produce_id) else {
            return; // the client went away, or the request timed out
        };
        let outcome = match result {
            AppendResult::Appended { base_offset, .. } => (ErrorCode::NONE, base_offset),
            AppendResult::Failed { error, .. } => (error, -1),
        };
        assert!(
            produce.partitions[slot].2.is_none(),
            "append answered twice"
        );
        produce.partitions[slot].2 = Some(outcome);
        produce.outstanding -= 1;
        if produce.outstanding == 0 {
            self.finish_produce(produce_id);
        }
    }

    /// Answers every Produce whose `timeout_ms` passed with REQUEST_TIMED_OUT for the partitions
    /// still waiting (Kafka's semantics: their batches may still commit later).
    pub(super) fn expire_produces(&mut self, now_ms: u64) {
        while let Some(&(deadline_ms, produce_id)) = self.produce_deadlines.first() {
            if deadline_ms > now_ms {
                return;
            }
            let produce = self
                .produces
                .get_mut(&produce_id)
                .expect("a deadline is removed with its produce");
            for slot in produce.partitions.iter_mut().filter(|s| s.2.is_none()) {
                slot.2 = Some((ErrorCode::REQUEST_TIMED_OUT, -1));
            }
            produce.outstanding = 0;
            debug!(produce_id, "produce timed out");
            self.finish_produce(produce_id);
        }
    }

    pub(super) fn finish_produce(&mut self, produce_id: u64) {
        let Some(produce) = self.produces.remove(&produce_id) else {
            return;
        };
        self.produce_deadlines
            .remove(&(produce.deadline_ms, produce_id));
        let hint = self.leader_hint_if_redirected(produce.conn, &produce.partitions);
        self.count_produce_answers(&produce.partitions);
        let committed = produce
            .partitions
            .iter()
            .all(|slot| matches!(slot.2, Some((ErrorCode::NONE, _))));
        if let (Some(received), true) = (produce.received, committed) {
            let waited = self.woke.duration_since(received).as_micros();
            let micros = u64::try_from(waited).unwrap_or(u64::MAX);
            self.metrics.observe_commit(micros);
        }
        let frame = produce_response_frame(
            &mut self.frames,
            produce.correlation_id,
            produce.version,
            &produce.partitions,
            self.replica.core().log_start_offset(),
            &hint,
        );
        self.keep_slots(produce.partitions);
        self.deliver(produce.conn, produce.seq, frame);
    }

    /// Keeps an answered request's slot vector for the next request (bounded in number and
    /// size): one allocation fewer per Produce.
    fn keep_slots(&mut self, mut slots: Vec<ProduceSlot>) {
        if self.slot_vecs.len() < KEPT_SLOT_VECS && slots.capacity() <= KEPT_SLOTS {
            slots.clear();
            self.slot_vecs.push(slots);
        }
    }

    /// The leader hint when some partition is answered NOT_LEADER_OR_FOLLOWER, the only answer
    /// that carries one; none otherwise, without listing the brokers (a list per answer was a
    /// measurable part of every committed Produce's cost).
    fn leader_hint_if_redirected(&self, conn: ConnId, partitions: &[ProduceSlot]) -> LeaderHint {
        let redirected = partitions.iter().any(|(_, _, outcome)| {
            matches!(outcome, Some((error, _)) if *error == ErrorCode::NOT_LEADER_OR_FOLLOWER)
        });
        if redirected {
            self.leader_hint(conn)
        } else {
            LeaderHint::default()
        }
    }

    /// Who leads as this node knows it, and where the leader listens on `conn`'s listener:
    /// Produce v10's answer to NOT_LEADER_OR_FOLLOWER (KIP-951), so a client can go there
    /// without a Metadata round trip. A leader whose endpoint this node does not know yet is
    /// not named, as in Metadata: a client cannot go to it, and may not recover from trying.
    fn leader_hint(&self, conn: ConnId) -> LeaderHint {
        let Some(leader_id) = self.replica.core().client_leader_id() else {
            return LeaderHint::default();
        };
        let leader = self
            .brokers_here(conn)
            .into_iter()
            .find(|broker| broker.node_id == leader_id)
            .map(|broker| {
                let named = LeaderIdAndEpoch {
                    leader_id,
                    leader_epoch: self.replica.core().epoch(),
                };
                let endpoint = NodeEndpoint {
                    node_id: broker.node_id,
                    host: broker.host,
                    port: broker.port,
                    rack: broker.rack,
                };
                (named, endpoint)
            });
        LeaderHint { leader }
    }
}

/// What a Produce v10 answer carries on NOT_LEADER_OR_FOLLOWER: the leader with its endpoint,
/// or nothing (none known, or not where).
#[derive(Default)]
pub(super) struct LeaderHint {
    leader: Option<(LeaderIdAndEpoch, NodeEndpoint)>,
}

/// A Produce request's partitions in request order (read on from its head), each with its
/// outcome when known at once (wrong topic or partition, corrupt batch), and the batches to
/// append with their slot, into the (empty) vectors given. Nothing is copied: the topic names
/// and the batches are slices of the request's frame.
pub(super) fn split_produce(
    r: &mut WireReader,
    version: i16,
    partitions: &mut Vec<ProduceSlot>,
    appends: &mut Vec<(usize, BatchView)>,
) -> Result<(), WireError> {
    assert!(partitions.is_empty() && appends.is_empty());
    visit_produce_partitions(r, version, |topic, partition| {
        let slot = partitions.len();
        let outcome = if topic.as_str() != METADATA_TOPIC || partition.index != METADATA_PARTITION {
            Some((ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1))
        } else {
            match partition.records.map(BatchView::parse) {
                Some(Ok(view)) if !view.is_control() => {
                    appends.push((slot, view));
                    None
                }
                Some(Err(error)) => {
                    debug!(%error, "a Produce batch refused");
                    Some((refusal(&error), -1))
                }
                _ => Some((ErrorCode::CORRUPT_MESSAGE, -1)),
            }
        };
        partitions.push((topic.clone(), partition.index, outcome));
    })
}

/// The error a Produce partition gets for a batch that fails validation: bytes that are damaged
/// (CRC, framing, a codec's stream that does not decompress) are CORRUPT_MESSAGE, as Kafka
/// answers; records of a compressed batch that decompress but are malformed or too large are
/// INVALID_RECORD.
fn refusal(error: &RecordError) -> ErrorCode {
    match error {
        RecordError::DecompressedTooLarge { .. } | RecordError::InCompressedRecords { .. } => {
            ErrorCode::INVALID_RECORD
        }
        _ => ErrorCode::CORRUPT_MESSAGE,
    }
}

/// The Produce response frame for answered slots, written in `frames` and stamped with its size.
pub(super) fn produce_response_frame(
    frames: &mut FrameArena,
    correlation_id: i32,
    version: i16,
    partitions: &[ProduceSlot],
    log_start_offset: i64,
    hint: &LeaderHint,
) -> Vec<Bytes> {
    let answer = |(_, index, outcome): &ProduceSlot| {
        let (error, base_offset) = outcome.expect("every partition answered");
        ProducePartitionResponse {
            index: *index,
            error,
            base_offset,
            log_append_time_ms: -1,
            // Kafka's answer: the partition's log start with an offset, -1 with an error.
            log_start_offset: if error == ErrorCode::NONE {
                log_start_offset
            } else {
                -1
            },
            error_message: None,
            current_leader: hint
                .leader
                .as_ref()
                .map(|(named, _)| *named)
                .filter(|_| error == ErrorCode::NOT_LEADER_OR_FOLLOWER),
        }
    };
    let redirected = hint.leader.is_some()
        && partitions.iter().any(|(_, _, outcome)| {
            matches!(outcome, Some((error, _)) if *error == ErrorCode::NOT_LEADER_OR_FOLLOWER)
        });
    let endpoints = match &hint.leader {
        Some((_, endpoint)) if redirected => std::slice::from_ref(endpoint),
        _ => &[],
    };
    let flexible = PRODUCE_SPEC.response_header_flexible(version);
    let frame = frames.frame(correlation_id, flexible, |w| {
        ProduceResponse::encode_flat(w, version, partitions, |slot| &slot.0, answer, endpoints)
    });
    vec![frame]
}

/// A Produce response frame at `version` (4 placeholder bytes for the size first).
fn encode_produce_response(
    correlation_id: i32,
    version: i16,
    response: &ProduceResponse,
) -> Vec<Bytes> {
    let flexible = PRODUCE_SPEC.response_header_flexible(version);
    let mut w = inbound::response_start(correlation_id, flexible);
    response.encode(&mut w, version);
    vec![w.into_inner().freeze()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only NOT_LEADER_OR_FOLLOWER partitions name the leader, and the leader's endpoint comes
    /// only with them; no partition has a log append time, and an error has no log start.
    #[test]
    fn a_redirected_answer_names_the_leader_on_those_partitions_only() {
        let named = LeaderIdAndEpoch {
            leader_id: 2,
            leader_epoch: 7,
        };
        let endpoint = NodeEndpoint {
            node_id: 2,
            host: "node-2".into(),
            port: 9092,
            rack: None,
        };
        let hint = LeaderHint {
            leader: Some((named, endpoint.clone())),
        };
        let answer = |slots: &[ProduceSlot]| {
            let mut frames = FrameArena::default();
            let frame = produce_response_frame(&mut frames, 1, 10, slots, 3, &hint);
            let mut r = WireReader::new(frame[0].slice(4..));
            ResponseHeader::read(&mut r, PRODUCE_SPEC.response_header_flexible(10)).unwrap();
            ProduceResponse::decode(&mut r, 10).unwrap()
        };
        let redirected = answer(&[
            ("m".into(), 0, Some((ErrorCode::NONE, 5))),
            ("m".into(), 1, Some((ErrorCode::NOT_LEADER_OR_FOLLOWER, -1))),
        ]);
        let [ok, moved] = &redirected.topics[0].partitions[..] else {
            panic!("two partitions: {redirected:?}");
        };
        assert_eq!((ok.current_leader, ok.log_start_offset), (None, 3));
        assert_eq!(
            (moved.current_leader, moved.log_start_offset),
            (Some(named), -1)
        );
        assert_eq!((ok.log_append_time_ms, moved.log_append_time_ms), (-1, -1));
        assert_eq!(redirected.node_endpoints, vec![endpoint]);

        let committed = answer(&[("m".into(), 0, Some((ErrorCode::NONE, 5)))]);
        assert_eq!(committed.topics[0].partitions[0].current_leader, None);
        assert!(committed.node_endpoints.is_empty(), "{committed:?}");
    }

    #[test]
    fn a_produce_answer_lists_partitions_under_their_topics_in_request_order() {
        let slots: Vec<ProduceSlot> = vec![
            ("a".into(), 0, Some((ErrorCode::NONE, 5))),
            ("a".into(), 1, Some((ErrorCode::REQUEST_TIMED_OUT, -1))),
            (
                "b".into(),
                0,
                Some((ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1)),
            ),
        ];
        let mut frames = FrameArena::default();
        let frame = produce_response_frame(&mut frames, 42, 9, &slots, 3, &LeaderHint::default());
        let mut r = WireReader::new(frame[0].slice(4..));
        let header = ResponseHeader::read(&mut r, PRODUCE_SPEC.response_header_flexible(9));
        assert_eq!(header.unwrap().correlation_id, 42);
        let response = ProduceResponse::decode(&mut r, 9).unwrap();
        let flat: Vec<(String, i32, ErrorCode, i64, i64)> = response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let name = t.name.clone();
                    (name, p.index, p.error, p.base_offset, p.log_start_offset)
                })
            })
            .collect();
        assert_eq!(response.topics.len(), 2);
        assert_eq!(
            flat,
            vec![
                ("a".into(), 0, ErrorCode::NONE, 5, 3),
                ("a".into(), 1, ErrorCode::REQUEST_TIMED_OUT, -1, -1),
                ("b".into(), 0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            ]
        );
    }
}
