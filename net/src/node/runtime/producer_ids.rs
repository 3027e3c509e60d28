//! InitProducerId on every node (docs/protocol.md, "Idempotent producers"): ids come from
//! blocks reserved through the log (`engine::producer_ids`). The leader appends the block
//! records, for itself or for a replica that asks in its FetchQuorumRecords; a node hands out
//! ids only from its own committed blocks, so any voter or observer can answer a producer, and
//! one that has no ids yet holds the request until its block commits.

use std::collections::HashMap;

use super::*;
use crate::wire::kafka::{InitProducerIdRequest, InitProducerIdResponse, INIT_PRODUCER_ID};
use engine::base::Offset;
use engine::producer_ids::{
    BlockWanted, CommittedBlocks, NoGrant, ProducerIdLedger, FIRST_PRODUCER_EPOCH,
};
use engine::record::control::ProducerIdBlock;

/// How long an InitProducerId waits for this node's block before it is answered
/// COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
const INIT_WAIT_MS: u64 = 5_000;

/// InitProducerId requests held at once; beyond, they are answered at once (retriable).
const MAX_WAITING_INITS: usize = 1_024;

/// The leader grants a replica at most one block per this many ms (its fetches repeat the
/// request until the block reaches it).
const GRANT_INTERVAL_MS: u64 = 100;

/// Replicas whose last grant time is kept; the map is cleared when it grows past this.
const MAX_GRANT_TIMES: usize = 4_096;

/// An InitProducerId held until this node has ids.
pub(super) struct WaitingInit {
    conn: ConnId,
    seq: u64,
    header: RequestHeader,
    spec: &'static ApiSpec,
    deadline_ms: u64,
}

/// This node's producer-id blocks and the requests waiting for them.
pub(super) struct ProducerIds {
    ledger: ProducerIdLedger,
    waiting: VecDeque<WaitingInit>,
    /// On the leader: when each replica was last granted a block (node clock, ms).
    granted_at: HashMap<NodeId, u64>,
    /// Not leading: the wish a fresh fetch was last sent for ([`Input::RefreshFetch`]), so
    /// that a wish costs one extra fetch at most.
    refreshed_for: Option<BlockWanted>,
}

fn new_incarnation() -> u64 {
    let mut bytes = [0u8; 8];
    // No randomness means no safe incarnation: a fixed value could repeat a former run's.
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    u64::from_le_bytes(bytes)
}

impl ProducerIds {
    /// For node `own_id`, with an incarnation drawn at random: a restarted node never uses a
    /// block reserved for an earlier run of it.
    pub(super) fn new(own_id: NodeId) -> Self {
        Self::with_ledger(ProducerIdLedger::new(own_id, new_incarnation()))
    }

    /// As [`Self::new`], starting from the blocks a producer-state snapshot says are committed.
    pub(super) fn restored(own_id: NodeId, committed: CommittedBlocks) -> Self {
        Self::with_ledger(ProducerIdLedger::restored(
            own_id,
            new_incarnation(),
            committed,
        ))
    }

    fn with_ledger(ledger: ProducerIdLedger) -> Self {
        Self {
            ledger,
            waiting: VecDeque::new(),
            granted_at: HashMap::new(),
            refreshed_for: None,
        }
    }

    /// What the committed blocks imply, for a producer-state snapshot.
    pub(super) fn committed_blocks(&self) -> CommittedBlocks {
        self.ledger.committed_blocks()
    }

    /// A block record found in the log at start-up (before serving).
    pub(super) fn recovered(&mut self, offset: Offset, block: ProducerIdBlock) {
        self.ledger.on_append(offset, block);
    }

    /// What this node's next FetchQuorumRecords asks the leader for.
    pub(super) fn wanted(&self) -> Option<BlockWanted> {
        self.ledger.wanted()
    }
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
        if let Some(id) = self.producer_ids.ledger.allocate() {
            self.answer_init(asked, seq, Ok(id));
        } else if self.producer_ids.waiting.len() >= MAX_WAITING_INITS {
            let busy = Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
            self.answer_init(asked, seq, busy);
        } else {
            let deadline_ms = self.now_ms() + INIT_WAIT_MS;
            self.producer_ids.waiting.push_back(WaitingInit {
                conn,
                seq,
                header: header.clone(),
                spec,
                deadline_ms,
            });
        }
        self.reserve_producer_ids();
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

    /// Answers the waiting requests this node now has ids for, and those past their deadline;
    /// called when its blocks may have changed and on every loop turn.
    pub(super) fn tend_producer_ids(&mut self, now_ms: u64) {
        while let Some(front) = self.producer_ids.waiting.front() {
            let answer = match self.producer_ids.ledger.allocate() {
                Some(id) => Ok(id),
                None if front.deadline_ms <= now_ms => {
                    debug!("InitProducerId waited too long for a block of producer ids");
                    Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
                }
                None => break,
            };
            let w = self
                .producer_ids
                .waiting
                .pop_front()
                .expect("front was Some");
            let asked = Asked {
                conn: w.conn,
                header: &w.header,
                spec: w.spec,
            };
            self.answer_init(asked, w.seq, answer);
        }
        self.reserve_producer_ids();
    }

    /// The offset of the newest committed block record, which retention keeps.
    pub(super) fn newest_producer_id_block(&self) -> Option<Offset> {
        self.producer_ids.ledger.newest_committed_record()
    }

    /// On the leader, when retention is held back by the newest committed block record below
    /// `below`: reserves a block for itself, so that a newer record takes over
    /// (docs/protocol.md, "Retention and the log start").
    pub(super) fn carry_producer_id_block(&mut self, below: Offset) {
        let ledger = &self.producer_ids.ledger;
        if self.replica.core().role() != Role::Leader
            || ledger
                .newest_committed_record()
                .is_none_or(|record| record >= below)
        {
            return;
        }
        let wanted = ledger.carry_wanted();
        self.grant_producer_ids(self.config.broker_id, wanted);
    }

    /// On the leader, reserves a block for itself when it needs one. Elsewhere the need rides
    /// the node's fetches (peers.rs): a new one is sent at once rather than after the one
    /// parked at the leader (up to its MaxWait), once per wish.
    fn reserve_producer_ids(&mut self) {
        let Some(wanted) = self.producer_ids.ledger.wanted() else {
            return;
        };
        if self.replica.core().role() == Role::Leader {
            self.grant_producer_ids(self.config.broker_id, wanted);
        } else if self.producer_ids.refreshed_for != Some(wanted) {
            self.producer_ids.refreshed_for = Some(wanted);
            self.step(Input::RefreshFetch);
        }
    }

    /// On the leader: appends a block for `node` unless one is on its way to it. `node` is this
    /// node, or a voter or observer whose fetch (from a connection that may speak for it)
    /// carried the request.
    pub(super) fn grant_producer_ids(&mut self, node: NodeId, wanted: BlockWanted) {
        let now = self.now_ms();
        let ids = &mut self.producer_ids;
        if ids
            .granted_at
            .get(&node)
            .is_some_and(|&at| now.saturating_sub(at) < GRANT_INTERVAL_MS)
        {
            return;
        }
        let block = match ids.ledger.grant(node, wanted) {
            Ok(block) => block,
            Err(NoGrant::Pending) => {
                debug!(
                    node,
                    have = wanted.have,
                    "a block of producer ids is on its way already"
                );
                return;
            }
            Err(NoGrant::Exhausted) => {
                warn!(
                    node,
                    "every producer id was reserved; no more can be handed out: InitProducerId fails \
                     from now on; move idempotent producers to a new cluster"
                );
                return;
            }
        };
        if ids.granted_at.len() >= MAX_GRANT_TIMES {
            ids.granted_at.clear();
        }
        ids.granted_at.insert(node, now);
        debug!(
            node,
            first_id = block.first_id,
            count = block.count,
            "reserving producer ids"
        );
        let timestamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.step(Input::AppendControl {
            batch: block.to_batch(0, 0, timestamp_ms),
        });
    }

    /// Every log change goes through the ledger, as through the producer state.
    pub(super) fn track_producer_id_blocks(&mut self, op: &LogOp) {
        match &op.kind {
            LogOpKind::Append(batches) => {
                for batch in batches.iter().filter(|b| b.is_control) {
                    if let Some(block) = producer_id_block(&batch.bytes) {
                        self.producer_ids.ledger.on_append(batch.base_offset, block);
                    }
                }
            }
            LogOpKind::TruncateTo(offset) => self.producer_ids.ledger.truncate_to(*offset),
            // Every block record this log held at or above its high watermark went with it;
            // those below stay committed (docs/protocol.md, "Retention and the log start").
            LogOpKind::ResetTo { .. } => {
                let hw = self.replica.core().high_watermark().unwrap_or(0);
                self.producer_ids.ledger.truncate_to(hw);
            }
        }
    }

    /// The high watermark moved: blocks below it are committed.
    pub(super) fn commit_producer_id_blocks(&mut self, hw: Offset) {
        if self.producer_ids.ledger.on_committed(hw) {
            debug!(
                hw,
                available = self.producer_ids.ledger.available(),
                "a block of producer ids for this node committed"
            );
            self.tend_producer_ids(self.now_ms());
        }
    }

    /// A replica's fetch asked for producer ids: granted if it is a voter or an observer the
    /// leader tracks (so made-up replica ids cannot fill the log with blocks).
    pub(super) fn producer_ids_asked(&mut self, replica: NodeId, wanted: BlockWanted) {
        let known = self.replica.core().voters().contains(&replica)
            || self
                .replica
                .core()
                .replica_view()
                .is_some_and(|view| view.observers.contains(&replica));
        if known && self.replica.core().role() == Role::Leader {
            self.grant_producer_ids(replica, wanted);
        } else {
            debug!(
                replica,
                known,
                role = ?self.replica.core().role(),
                "producer ids asked for and not granted here"
            );
        }
    }
}

/// The producer-id block a control batch holds, if it is one. The core's batches were
/// validated when they came in; anything else in a control batch is not ours to read here.
pub(super) fn producer_id_block(bytes: &Bytes) -> Option<ProducerIdBlock> {
    let view = BatchView::parse(bytes.clone()).ok()?;
    ProducerIdBlock::from_batch(&view).ok()
}
