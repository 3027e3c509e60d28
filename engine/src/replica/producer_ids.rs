//! InitProducerId on every replica (docs/protocol.md, "Idempotent producers"): ids come from
//! blocks reserved through the log (`crate::producer_ids`). The leader appends the block
//! records, for itself or for a replica that asks in its FetchQuorumRecords; a replica hands out
//! ids only from its own committed blocks, so any voter or observer can answer a producer, and
//! one that has no ids yet holds the request until its block commits. Logic only: the replica
//! ([`super::Replica`]) feeds it the core's outputs and carries out what it asks for.

use std::collections::{BTreeMap, VecDeque};

use crate::base::{NodeId, Offset};
use crate::producer_ids::{BlockWanted, CommittedBlocks, NoGrant, ProducerIdLedger};
use crate::raft::{ErrorCode, LogOp, LogOpKind, TimeMs};
use crate::record::control::ProducerIdBlock;
use crate::record::BatchView;

/// How long an InitProducerId waits for this replica's block before it is answered
/// COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
pub const INIT_WAIT_MS: TimeMs = 5_000;

/// InitProducerId requests held at once; beyond, they are answered at once (retriable).
pub const MAX_WAITING_INITS: usize = 1_024;

/// The leader grants a replica at most one block per this many ms (its fetches repeat the
/// request until the block reaches it).
pub const GRANT_INTERVAL_MS: TimeMs = 100;

/// Replicas whose last grant time is kept; the map is cleared when it grows past this.
const MAX_GRANT_TIMES: usize = 4_096;

/// The answer to one InitProducerId: an id, or the (retriable) error.
pub type IdAnswer = (u64, Result<i64, ErrorCode>);

/// What the leader decided about a replica's wish for a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Append this block record.
    Append(ProducerIdBlock),
    /// Nothing to do: one was granted within [`GRANT_INTERVAL_MS`], or is on its way.
    NotNow,
    /// Every id was reserved: no block can be granted again (the operator is told).
    Exhausted,
}

/// A replica's producer-id blocks and the InitProducerIds waiting for them.
#[derive(Debug)]
pub struct ProducerIds {
    ledger: ProducerIdLedger,
    /// (request id, deadline) of the InitProducerIds waiting for a block, oldest first.
    waiting: VecDeque<(u64, TimeMs)>,
    /// On the leader: when each replica was last granted a block.
    granted_at: BTreeMap<NodeId, TimeMs>,
    /// Not leading: the wish a fresh fetch was last sent for (`Input::RefreshFetch`), so that a
    /// wish costs one extra fetch at most.
    refreshed_for: Option<BlockWanted>,
    /// Ids handed out by this run of the replica.
    handed_out: u64,
    /// Block records below this offset are the restored ledger's already (a reset that came
    /// with the leader's snapshot: [`ProducerIds::restore`]).
    replay_from: Offset,
}

impl ProducerIds {
    pub fn new(ledger: ProducerIdLedger) -> Self {
        Self {
            ledger,
            waiting: VecDeque::new(),
            granted_at: BTreeMap::new(),
            refreshed_for: None,
            handed_out: 0,
            replay_from: 0,
        }
    }

    /// The log was reset to a start below `offset`, with the leader's committed blocks there:
    /// they replace this replica's (the same run of it, so the ids it holds stay its own), and
    /// the block records below `offset` are not taken in again.
    pub(super) fn restore(&mut self, offset: Offset, committed: CommittedBlocks) {
        assert_eq!(
            committed.committed_to, offset,
            "blocks committed at the snapshot"
        );
        let (own_id, incarnation) = self.ledger.identity();
        self.ledger = ProducerIdLedger::restored(own_id, incarnation, committed);
        self.replay_from = offset;
    }

    /// What the committed blocks imply, for a producer-state snapshot.
    pub fn committed_blocks(&self) -> CommittedBlocks {
        self.ledger.committed_blocks()
    }

    /// What this replica's next FetchQuorumRecords asks the leader for.
    pub fn wanted(&self) -> Option<BlockWanted> {
        self.ledger.wanted()
    }

    /// The offset of the newest committed block record, which retention keeps.
    pub fn newest_committed_record(&self) -> Option<Offset> {
        self.ledger.newest_committed_record()
    }

    /// Ids this run of the replica handed out.
    pub fn handed_out(&self) -> u64 {
        self.handed_out
    }

    /// InitProducerIds waiting for a block.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// InitProducerId `request` at `now`: answered at once from a committed block, else held
    /// until one commits (or [`INIT_WAIT_MS`] passes), or refused when too many wait.
    pub(super) fn init(&mut self, request: u64, now: TimeMs) -> Option<Result<i64, ErrorCode>> {
        if let Some(id) = self.allocate() {
            return Some(Ok(id));
        }
        if self.waiting.len() >= MAX_WAITING_INITS {
            return Some(Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS));
        }
        self.waiting
            .push_back((request, now.saturating_add(INIT_WAIT_MS)));
        None
    }

    fn allocate(&mut self) -> Option<i64> {
        let id = self.ledger.allocate()?;
        assert!(id >= 0, "producer ids are not negative");
        self.handed_out += 1;
        Some(id)
    }

    /// Answers the waiting requests this replica now has ids for, and those past their
    /// deadline at `now`, oldest first.
    pub(super) fn tend(&mut self, now: TimeMs, answers: &mut Vec<IdAnswer>) {
        while let Some(&(request, deadline)) = self.waiting.front() {
            let answer = match self.allocate() {
                Some(id) => Ok(id),
                None if deadline <= now => Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
                None => break,
            };
            self.waiting.pop_front();
            answers.push((request, answer));
        }
    }

    /// Not leading: whether a fresh fetch should carry this replica's wish now (once per
    /// wish).
    pub(super) fn refresh_for_wish(&mut self) -> bool {
        let wanted = self.ledger.wanted();
        if wanted.is_none() || self.refreshed_for == wanted {
            return false;
        }
        self.refreshed_for = wanted;
        true
    }

    /// On the leader: what to do about `node`'s wish `wanted` at `now`.
    pub(super) fn grant(&mut self, node: NodeId, wanted: BlockWanted, now: TimeMs) -> Grant {
        if self
            .granted_at
            .get(&node)
            .is_some_and(|&at| now.saturating_sub(at) < GRANT_INTERVAL_MS)
        {
            return Grant::NotNow;
        }
        let block = match self.ledger.grant(node, wanted) {
            Ok(block) => block,
            Err(NoGrant::Pending) => return Grant::NotNow,
            Err(NoGrant::Exhausted) => return Grant::Exhausted,
        };
        assert!(
            block.first_id >= 0 && block.count > 0 && block.node_id == node,
            "a granted block is a non-empty range of ids for the node that asked"
        );
        if self.granted_at.len() >= MAX_GRANT_TIMES {
            self.granted_at.clear();
        }
        self.granted_at.insert(node, now);
        Grant::Append(block)
    }

    /// On the leader, when retention is held back by the newest committed block record below
    /// `below`: the wish that carries it forward (a block for the leader itself), if needed.
    pub(super) fn carry_wanted(&self, below: Offset) -> Option<BlockWanted> {
        self.ledger
            .newest_committed_record()
            .is_some_and(|record| record < below)
            .then(|| self.ledger.carry_wanted())
    }

    /// Every log change goes through the ledger, as through the producer state. `hw` is the
    /// replica's high watermark after the step that made the change.
    pub(super) fn track(&mut self, op: &LogOp, hw: Option<Offset>) {
        match &op.kind {
            LogOpKind::Append(batches) => {
                let fed = batches
                    .iter()
                    .filter(|b| b.is_control && b.base_offset >= self.replay_from);
                for batch in fed {
                    if let Some(block) = producer_id_block(&batch.bytes) {
                        self.ledger.on_append(batch.base_offset, block);
                    }
                }
            }
            LogOpKind::TruncateTo(offset) => self.ledger.truncate_to(*offset),
            // Every block record this log held at or above its high watermark went with it;
            // those below stay committed (docs/protocol.md, "Retention and the log start").
            LogOpKind::ResetTo { .. } => self.ledger.truncate_to(hw.unwrap_or(0)),
        }
    }

    /// The high watermark moved to `hw`: blocks below it are committed, and waiting requests
    /// are answered from this replica's new ids.
    pub(super) fn committed(&mut self, hw: Offset, now: TimeMs, answers: &mut Vec<IdAnswer>) {
        if self.ledger.on_committed(hw) {
            self.tend(now, answers);
        }
    }
}

/// The producer-id block a control batch holds, if it is one. The core's batches were
/// validated when they came in; anything else in a control batch is not ours to read here.
pub fn producer_id_block(bytes: &bytes::Bytes) -> Option<ProducerIdBlock> {
    let view = BatchView::parse(bytes.clone()).ok()?;
    ProducerIdBlock::from_batch(&view).ok()
}
