//! Producer ids that no two nodes ever hand out twice (docs/protocol.md, "Idempotent
//! producers"). Ids come in blocks reserved through the log: the leader appends a
//! [`ProducerIdBlock`] control record naming the node (and the run of it) that owns the block,
//! and a node hands out ids from a block only once the record has committed. Each block starts
//! past every block in the leader's log, and every committed block is in the log of every later
//! leader, so committed blocks never overlap; uncommitted ones may be lost with a truncation,
//! but nobody has used them. Any node (voter or observer) can then answer InitProducerId.
//!
//! The ledger is logic only: the node feeds it the log's changes and its high watermark, and
//! carries its requests to the leader.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;

use crate::base::{NodeId, Offset};
use crate::record::control::ProducerIdBlock;

/// The producer epoch every fresh producer id starts with.
pub const FIRST_PRODUCER_EPOCH: i16 = 0;

/// Ids per block (Kafka's broker blocks hold 1,000 too).
pub const BLOCK_SIZE: i32 = 1000;

/// A node asks for its next block once it holds fewer ids than this.
const LOW_WATER: i64 = BLOCK_SIZE as i64 / 2;

/// Committed blocks a node keeps for its own use; more are dropped (never handed out).
const MAX_OWN_RANGES: usize = 4;

/// Nodes whose latest committed block the ledger remembers, to answer repeated requests.
const MAX_REMEMBERED_NODES: usize = 4096;

/// What a node asks the leader for: a block for this run of it, newer than the one it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockWanted {
    pub incarnation: u64,
    /// The first id of the newest block this run of the node holds, -1 for none.
    pub have: i64,
}

/// Why the leader granted no block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoGrant {
    /// A block for that node is in the log already (not yet committed, or newer than the one it
    /// says it has): it only has to wait.
    Pending,
    /// Every id up to the largest was reserved.
    Exhausted,
}

/// What the committed blocks below an offset imply, all a node needs of them after a restart
/// (its own blocks are never reused by a new run): kept in the producer-state snapshot
/// (`crate::producer_snapshot`), so a start that replays the log from there misses no block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedBlocks {
    /// The high watermark they are committed below.
    pub committed_to: Offset,
    /// One past the largest id of every committed block.
    pub committed_end: i64,
    /// The offset of the newest committed block record.
    pub newest_record: Option<Offset>,
    /// Per node, (node, incarnation, first id) of its latest committed block; by node id.
    pub latest: Vec<(NodeId, u64, i64)>,
}

/// Nodes a [`CommittedBlocks`] may name at most (the ledger's own bound).
pub const MAX_COMMITTED_NODES: usize = MAX_REMEMBERED_NODES;

/// The producer-id blocks the log implies, as seen by one node.
#[derive(Debug)]
pub struct ProducerIdLedger {
    own_id: NodeId,
    incarnation: u64,
    /// Blocks in the log at or past the high watermark, by offset.
    uncommitted: BTreeMap<Offset, ProducerIdBlock>,
    /// One past the largest id of every committed block.
    committed_end: i64,
    /// The high watermark the ledger was last told about.
    committed_to: Offset,
    /// Per node, (incarnation, first id) of its latest committed block.
    latest: HashMap<NodeId, (u64, i64)>,
    /// This run's committed ids not handed out yet, oldest first.
    own: VecDeque<Range<i64>>,
    /// The first id of the newest committed block of this run, -1 for none.
    newest_own_first: i64,
    /// Set by the first InitProducerId: blocks are reserved only for nodes that hand ids out.
    in_use: bool,
    /// The offset of the newest committed block record: retention keeps it (a replica that
    /// starts from the log start learns where ids are free from it).
    newest_committed_record: Option<Offset>,
}

impl ProducerIdLedger {
    /// A ledger for node `own_id` in its run `incarnation` (drawn at random at start).
    pub fn new(own_id: NodeId, incarnation: u64) -> Self {
        Self {
            own_id,
            incarnation,
            uncommitted: BTreeMap::new(),
            committed_end: 0,
            committed_to: 0,
            latest: HashMap::new(),
            own: VecDeque::new(),
            newest_own_first: -1,
            in_use: false,
            newest_committed_record: None,
        }
    }

    /// A ledger for a new run `incarnation` of node `own_id` that starts from `committed` (a
    /// snapshot's) and is then fed the log from `committed.committed_to` on.
    /// The node and the run of it this ledger reserves blocks for.
    pub fn identity(&self) -> (NodeId, u64) {
        (self.own_id, self.incarnation)
    }

    pub fn restored(own_id: NodeId, incarnation: u64, committed: CommittedBlocks) -> Self {
        assert!(committed.latest.len() <= MAX_REMEMBERED_NODES);
        assert!(committed.committed_end >= 0 && committed.committed_to >= 0);
        let mut ledger = Self::new(own_id, incarnation);
        ledger.committed_to = committed.committed_to;
        ledger.committed_end = committed.committed_end;
        ledger.newest_committed_record = committed.newest_record;
        ledger.latest = committed
            .latest
            .into_iter()
            .map(|(node, incarnation, first)| (node, (incarnation, first)))
            .collect();
        ledger
    }

    /// What the blocks committed so far imply (see [`CommittedBlocks`]).
    pub fn committed_blocks(&self) -> CommittedBlocks {
        let mut latest: Vec<(NodeId, u64, i64)> = self
            .latest
            .iter()
            .map(|(&node, &(incarnation, first))| (node, incarnation, first))
            .collect();
        latest.sort_unstable();
        CommittedBlocks {
            committed_to: self.committed_to,
            committed_end: self.committed_end,
            newest_record: self.newest_committed_record,
            latest,
        }
    }

    /// A block record was appended to the log at `offset`.
    pub fn on_append(&mut self, offset: Offset, block: ProducerIdBlock) {
        debug_assert!(
            self.uncommitted
                .last_key_value()
                .is_none_or(|(last, _)| *last < offset),
            "log offsets only grow between truncations"
        );
        if offset < self.committed_to {
            // Only a log being re-read below what is known to be committed gets here.
            self.note_committed_record(offset);
            self.commit(block);
        } else {
            self.uncommitted.insert(offset, block);
        }
    }

    /// The log was truncated to end at `offset`: the records from there on are gone.
    pub fn truncate_to(&mut self, offset: Offset) {
        self.uncommitted.split_off(&offset);
    }

    /// The high watermark is `hw`: blocks below it are committed. Returns whether this node got
    /// new ids to hand out.
    pub fn on_committed(&mut self, hw: Offset) -> bool {
        if hw <= self.committed_to {
            return false;
        }
        self.committed_to = hw;
        let still = self.uncommitted.split_off(&hw);
        let done = std::mem::replace(&mut self.uncommitted, still);
        let before = self.own.len();
        for (offset, block) in done {
            self.note_committed_record(offset);
            self.commit(block);
        }
        self.own.len() > before
    }

    fn note_committed_record(&mut self, offset: Offset) {
        self.newest_committed_record = self.newest_committed_record.max(Some(offset));
    }

    /// The offset of the newest committed block record, which retention must keep (None: no
    /// block committed).
    pub fn newest_committed_record(&self) -> Option<Offset> {
        self.newest_committed_record
    }

    fn commit(&mut self, block: ProducerIdBlock) {
        debug_assert!(block.first_id >= 0 && block.count > 0);
        self.committed_end = self.committed_end.max(block.end_id());
        if self.latest.len() >= MAX_REMEMBERED_NODES && !self.latest.contains_key(&block.node_id) {
            // Forgetting a node costs at most one spare block if it asks again.
            let evict = *self.latest.keys().next().expect("the map is full");
            self.latest.remove(&evict);
        }
        let latest = self
            .latest
            .entry(block.node_id)
            .or_insert((block.incarnation, block.first_id));
        if latest.1 <= block.first_id {
            *latest = (block.incarnation, block.first_id);
        }
        let mine = block.node_id == self.own_id && block.incarnation == self.incarnation;
        if mine && block.first_id > self.newest_own_first {
            self.newest_own_first = block.first_id;
            if self.own.len() < MAX_OWN_RANGES {
                self.own.push_back(block.first_id..block.end_id());
            }
        }
    }

    /// The next id of this node's committed blocks, or None until one commits (then
    /// [`Self::wanted`] says what to ask for).
    pub fn allocate(&mut self) -> Option<i64> {
        self.in_use = true;
        let range = self.own.front_mut()?;
        let id = range.start;
        range.start += 1;
        if range.is_empty() {
            self.own.pop_front();
        }
        Some(id)
    }

    /// Ids this node holds and has not handed out.
    pub fn available(&self) -> i64 {
        self.own.iter().map(|r| r.end - r.start).sum()
    }

    /// What this node should ask the leader for, if anything: a block once it hands ids out and
    /// holds fewer than half a block.
    pub fn wanted(&self) -> Option<BlockWanted> {
        (self.in_use && self.available() < LOW_WATER).then_some(BlockWanted {
            incarnation: self.incarnation,
            have: self.newest_own_first,
        })
    }

    /// What this node asks for to carry the newest block record forward: one more block past
    /// the newest it has (granted even while it holds unused ids).
    pub fn carry_wanted(&self) -> BlockWanted {
        BlockWanted {
            incarnation: self.incarnation,
            have: self.newest_own_first,
        }
    }

    /// On the leader: the block to append for `node`'s request, starting past every block in
    /// the log. None while a block for that node is already in the log and not committed, or
    /// one newer than what it has is committed (it is on its way to the node).
    pub fn grant(&self, node: NodeId, wanted: BlockWanted) -> Result<ProducerIdBlock, NoGrant> {
        let pending = self.uncommitted.values().any(|b| b.node_id == node);
        let delivered = self.latest.get(&node).is_some_and(|&(incarnation, first)| {
            incarnation == wanted.incarnation && first > wanted.have
        });
        if pending || delivered {
            return Err(NoGrant::Pending);
        }
        let first_id = self.next_free();
        first_id
            .checked_add(i64::from(BLOCK_SIZE))
            .ok_or(NoGrant::Exhausted)?;
        Ok(ProducerIdBlock {
            node_id: node,
            incarnation: wanted.incarnation,
            first_id,
            count: BLOCK_SIZE,
        })
    }

    /// The first id past every block in the log, committed or not.
    fn next_free(&self) -> i64 {
        self.uncommitted
            .values()
            .map(ProducerIdBlock::end_id)
            .fold(self.committed_end, i64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(node_id: NodeId, incarnation: u64, first_id: i64) -> ProducerIdBlock {
        ProducerIdBlock {
            node_id,
            incarnation,
            first_id,
            count: BLOCK_SIZE,
        }
    }

    /// A ledger restored from what another run had committed grants past every committed block
    /// and knows each node's latest, as the ledger fed the whole log does.
    #[test]
    fn a_restored_ledger_continues_where_the_committed_blocks_end() {
        let mut fed = ProducerIdLedger::new(2, 77);
        fed.on_append(5, block(2, 76, 0));
        fed.on_append(6, block(3, 70, 1000));
        fed.on_append(9, block(4, 71, 2000));
        fed.on_committed(7);
        let committed = fed.committed_blocks();
        assert_eq!(
            committed,
            CommittedBlocks {
                committed_to: 7,
                committed_end: 2000,
                newest_record: Some(6),
                latest: vec![(2, 76, 0), (3, 70, 1000)],
            }
        );
        let mut restored = ProducerIdLedger::restored(2, 78, committed);
        restored.on_append(9, block(4, 71, 2000));
        for ledger in [&mut fed, &mut restored] {
            ledger.on_committed(10);
        }
        assert_eq!(restored.committed_blocks(), fed.committed_blocks());
        assert_eq!(restored.newest_committed_record(), Some(9));
        let wanted = BlockWanted {
            incarnation: 78,
            have: -1,
        };
        assert_eq!(restored.grant(2, wanted).unwrap().first_id, 3000);
        // Node 3's block is delivered already: a repeated request waits.
        let old = BlockWanted {
            incarnation: 70,
            have: -1,
        };
        assert_eq!(restored.grant(3, old), Err(NoGrant::Pending));
    }

    #[test]
    fn ids_are_handed_out_only_from_committed_blocks_of_this_run() {
        let mut ledger = ProducerIdLedger::new(2, 77);
        assert_eq!(ledger.allocate(), None);
        assert_eq!(
            ledger.wanted(),
            Some(BlockWanted {
                incarnation: 77,
                have: -1
            })
        );
        ledger.on_append(5, block(2, 76, 0)); // a former run of node 2
        ledger.on_append(6, block(3, 77, 1000)); // another node
        ledger.on_append(7, block(2, 77, 2000));
        assert!(
            !ledger.on_committed(7),
            "offset 7 is not below the high watermark 7"
        );
        assert_eq!(ledger.allocate(), None);
        assert!(ledger.on_committed(8));
        assert_eq!(ledger.allocate(), Some(2000));
        assert_eq!(ledger.allocate(), Some(2001));
        assert_eq!(ledger.available(), i64::from(BLOCK_SIZE) - 2);
        assert_eq!(ledger.wanted(), None, "more than half a block is left");
    }

    #[test]
    fn a_block_at_the_high_watermark_is_not_committed_and_one_below_it_is() {
        let mut ledger = ProducerIdLedger::new(2, 7);
        ledger.on_committed(5);
        ledger.on_append(5, block(2, 7, 0));
        assert_eq!(
            ledger.allocate(),
            None,
            "offset 5 is not below the high watermark 5"
        );
        assert!(ledger.on_committed(6));
        assert_eq!(ledger.allocate(), Some(0));

        // A block read back below what is known committed counts at once.
        let mut ledger = ProducerIdLedger::new(2, 7);
        ledger.on_committed(10);
        ledger.on_append(3, block(2, 7, 4000));
        assert_eq!(ledger.allocate(), Some(4000));
    }

    #[test]
    fn the_same_block_seen_twice_gives_its_ids_once_and_the_newest_grant_is_remembered() {
        let mut ledger = ProducerIdLedger::new(2, 7);
        ledger.on_append(0, block(2, 7, 0));
        ledger.on_committed(1);
        ledger.on_append(0, block(2, 7, 0)); // read again below the high watermark
        assert_eq!(ledger.available(), i64::from(BLOCK_SIZE));

        ledger.on_append(1, block(4, 8, 1000));
        ledger.on_append(2, block(4, 8, 2000));
        ledger.on_committed(3);
        let has_the_first = BlockWanted {
            incarnation: 8,
            have: 1000,
        };
        assert_eq!(
            ledger.grant(4, has_the_first),
            Err(NoGrant::Pending),
            "the newer block is on its way"
        );
    }

    #[test]
    fn a_node_asks_again_below_half_a_block_and_moves_on_to_the_next() {
        let mut ledger = ProducerIdLedger::new(1, 9);
        ledger.on_append(0, block(1, 9, 0));
        ledger.on_committed(1);
        for expected in 0..i64::from(BLOCK_SIZE) / 2 + 1 {
            assert_eq!(ledger.allocate(), Some(expected));
        }
        assert_eq!(
            ledger.wanted(),
            Some(BlockWanted {
                incarnation: 9,
                have: 0
            })
        );
        let next = ledger.grant(1, ledger.wanted().unwrap()).unwrap();
        assert_eq!(next.first_id, i64::from(BLOCK_SIZE));
        ledger.on_append(1, next);
        ledger.on_committed(2);
        let mut handed = Vec::new();
        while let Some(id) = ledger.allocate() {
            handed.push(id);
        }
        let first_half = i64::from(BLOCK_SIZE) / 2 + 1;
        assert_eq!(
            handed,
            (first_half..2 * i64::from(BLOCK_SIZE)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_leader_grants_past_every_block_and_once_per_request() {
        let mut ledger = ProducerIdLedger::new(1, 5);
        ledger.on_append(3, block(2, 1, 4000));
        ledger.on_committed(4);
        ledger.on_append(4, block(3, 1, 9000)); // not committed: still counts
        let wanted = BlockWanted {
            incarnation: 8,
            have: -1,
        };
        let granted = ledger.grant(4, wanted).unwrap();
        assert_eq!(granted.first_id, 9000 + i64::from(BLOCK_SIZE));
        assert_eq!((granted.node_id, granted.incarnation), (4, 8));
        ledger.on_append(5, granted);
        assert_eq!(ledger.grant(4, wanted), Err(NoGrant::Pending));
        ledger.on_committed(6);
        assert_eq!(
            ledger.grant(4, wanted),
            Err(NoGrant::Pending),
            "committed, on its way to node 4"
        );
        let has_it = BlockWanted {
            incarnation: 8,
            have: granted.first_id,
        };
        assert_eq!(
            ledger.grant(4, has_it).unwrap().first_id,
            granted.end_id(),
            "node 4 has it and asks for the next"
        );
        let restarted = BlockWanted {
            incarnation: 11,
            have: -1,
        };
        assert!(
            ledger.grant(4, restarted).is_ok(),
            "a new run of node 4 gets its own"
        );
    }

    #[test]
    fn truncated_blocks_are_never_used_and_their_ids_may_be_granted_again() {
        let mut ledger = ProducerIdLedger::new(2, 1);
        ledger.allocate();
        ledger.on_append(10, block(2, 1, 0));
        ledger.truncate_to(10);
        assert!(!ledger.on_committed(20));
        assert_eq!(ledger.allocate(), None);
        let regranted = ledger.grant(2, ledger.wanted().unwrap()).unwrap();
        assert_eq!(regranted.first_id, 0, "nobody used the lost block's ids");
    }

    #[test]
    fn ids_run_out_at_the_largest_and_blocks_never_overlap() {
        let mut ledger = ProducerIdLedger::new(1, 1);
        let wanted = BlockWanted {
            incarnation: 1,
            have: -1,
        };
        let mut offset = 0;
        let mut ends = Vec::new();
        for node in 2..50 {
            let granted = ledger.grant(node, wanted).unwrap();
            assert!(ends.iter().all(|&end| granted.first_id >= end));
            ends.push(granted.end_id());
            ledger.on_append(offset, granted);
            offset += 1;
            if node % 3 == 0 {
                ledger.on_committed(offset);
            }
        }
        ledger.on_append(offset, block(9, 1, i64::MAX - i64::from(BLOCK_SIZE)));
        ledger.on_committed(offset + 1);
        assert_eq!(ledger.grant(60, wanted), Err(NoGrant::Exhausted));
    }

    #[test]
    fn the_ledger_stays_bounded() {
        let mut ledger = ProducerIdLedger::new(1, 1);
        for (offset, node) in (0..MAX_REMEMBERED_NODES as i32 + 100).enumerate() {
            ledger.on_append(offset as Offset, block(node + 2, 1, offset as i64 * 1000));
        }
        ledger.on_committed(i64::MAX);
        assert!(ledger.latest.len() <= MAX_REMEMBERED_NODES);
        assert!(ledger.uncommitted.is_empty());
        for offset in 0..10 {
            ledger.on_append(i64::MAX - 10 + offset, block(1, 1, offset * 1000));
        }
        assert!(ledger.own.len() <= MAX_OWN_RANGES);
    }
}
